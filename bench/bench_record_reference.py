"""``payload_sampler/record_reference`` at the default ``joint_state_timeout`` (0.5 s): how often it succeeds.

Issue 27 item 2: the excitation's planning (~0.5-1 s of CPU, seconds on a loaded machine) used to run
on the sampler's executor and its own watchdog aborted the run ("joint_states lost") ~12 times in 13.
sim_node (iiwa14) and the three nodes as processes (the stack of test/integration/test_sampler_recovery.py: the
sampler and the estimator at their default joint_state_timeout, the monitor at 2 s), then ``--runs``
reference runs in a row. Each line: success, the longest joint_states gap this script's own
subscription saw during the call (a gap there means the stream itself stalled, e.g. a starved
sim_node; the sampler losing the stream with no gap here is the defect), the answer.
Usage: .venv/bin/python bench/bench_record_reference.py [--runs 6]   (prints only; note the load: uptime)
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "test"))  # the stack and probe of test_sampler_recovery, the call helper

from payload_estimation.ros.domain import isolate  # noqa: E402

isolate()  # own DDS domain, before rclpy is imported
os.environ.setdefault("RMW_IMPLEMENTATION", "rmw_fastrtps_cpp")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=6)
    args = ap.parse_args()

    import rclpy
    import test_sampler_recovery as rec
    from rclpy.executors import SingleThreadedExecutor
    from ros_helpers import call_trigger, wait_for

    from payload_estimation.model import load_robot
    from payload_estimation.ros.spin_thread import SpinThread

    ns = f"/benchref{os.getpid()}"
    rclpy.init(args=["--ros-args", "-r", f"__ns:={ns}", "-r", f"/clock:={ns}/clock"])
    desc = load_robot(rec.ROBOT)
    results: list[tuple[bool, float, str]] = []
    try:
        with rec.stack(ns, [f"robot:={rec.ROBOT}", "noise_std:=[0.1]", "model_error:=0.03",
                            f"initial_positions:={rec.PICK.tolist()}"]):
            probe = rec.Probe(desc.joint_names)
            spin = SpinThread(SingleThreadedExecutor(), probe)
            try:
                if not (wait_for(lambda: probe.q is not None, 60.0)
                        and wait_for(lambda: probe.values().get("busy") == "False", 60.0)):
                    print("the nodes did not come up within 60 s")
                    return 1
                time.sleep(2.0)
                for i in range(args.runs):
                    call_trigger(probe, "payload_sampler/forget_pick", 10.0)
                    t0 = time.monotonic()
                    res = call_trigger(probe, "payload_sampler/record_reference", 90.0)
                    gap = probe.stalled_since(t0)
                    results.append((res.success, gap, res.message))
                    print(f"{i + 1}: {'ok' if res.success else 'FAILED'}, longest joint_states gap seen here "
                          f"{gap:.2f} s: {res.message[:160]}", flush=True)
                    time.sleep(1.0)
            finally:
                spin.stop()
                probe.destroy_node()
    finally:
        rclpy.shutdown()
    ok = sum(r[0] for r in results)
    alone = sum(not r[0] and "joint_states lost" in r[2] and r[1] <= 0.3 for r in results)
    print(f"{ok}/{len(results)} succeeded; {alone} failed on 'joint_states lost' with no gap in the stream here; "
          f"load average {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
