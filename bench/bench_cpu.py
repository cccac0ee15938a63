"""What the nodes cost on a robot PC (issue 48): CPU per process at 1 kHz, as ratios to a bare subscriber.

Processes over real DDS on this machine, all in one namespace on the simulator's clock (the set-up of the demo and
test/ros_helpers.sim_stack): ``sim_node`` (iiwa14, 1 kHz joint_states, /clock at 250 Hz), ``payload_estimator``,
``payload_sampler`` and ``collision_monitor`` with the package's parameter file (config/payload_estimation.yaml;
only ``robot`` overridden), and **the floor**: a bare rclpy node (``rclpy.spin``, one subscription to the same
joint_states with the nodes' sensor QoS, a callback that does nothing, the same ``--ros-args``), measured in the
same run. CPU per process = user + system time from /proc/<pid>/stat over each phase (every thread of the process).

Phases (each ``--seconds`` s unless said):

- **idle**: the arm at rest, nothing asked of the nodes;
- **latency** (``--seconds`` / 2, not a CPU phase: this process subscribes to joint_states and the residual at
  1 kHz then): the monitor's receive-to-decision latency = the DDS source timestamp of its ``~/residual`` (published
  right after the observer and detector ran on a sample) minus that of the joint_states sample it was computed from
  (matched by stamp; the definition of docs/bench/nodes.md with the simulator as the driver);
- **monitoring**: the arm moves (one joint_trajectory of smooth swings, 20 deg per joint), no sampling;
- **sampling**: ``payload_sampler/sample`` (static poses) called back to back until ``--seconds`` passed; the
  phase lasts from the first call to the last answer;
- **online**: ``payload_estimator/grasped``, a 2 kg payload attached in the simulator, the arm moving as in
  monitoring: the online estimate runs (then ``released`` and detached).

Usage: .venv/bin/python bench/bench_cpu.py [--seconds 20] [--phases idle latency monitoring sampling online]
       [--quick] [--no-write]
``--quick``: 5 s phases, for a smoke run (not written to docs unless --write). Writes docs/bench/cpu.md.
"""

from __future__ import annotations

import argparse
import datetime
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # before numpy: threaded BLAS would add threads to every process

import numpy as np  # noqa: E402
from benchlib import BENCH_DOCS, machine, write_section  # noqa: E402

ROBOT = "iiwa14"
Q0 = np.radians([0, 30, 0, -80, 0, 50, 0])
SWING = np.radians([20, 15, 20, 15, 20, 20, 20])  # rad per joint, peak to peak of the monitoring motion
SWING_PERIOD = 4.0  # s
MASS, COM = 2.0, [0.03, -0.02, 0.08]
PROCESSES = ("sim", "estimator", "sampler", "monitor", "floor")
LABELS = {"sim": "sim_node", "estimator": "payload_estimator", "sampler": "payload_sampler",
          "monitor": "collision_monitor", "floor": "floor (bare rclpy subscriber)"}
KEPT = "<!-- kept by bench_cpu.py: an earlier run, for comparison -->"
"""docs/bench/cpu.md keeps what follows this line when the bench writes it anew."""
TARGETS = {"estimator": 0.3, "sampler": 0.15, "monitor": 0.6, "nodes": 1.0}
"""Issue 48's idle targets, as ratios to the floor."""


def floor_node() -> int:
    """The floor process: a bare rclpy node subscribing to joint_states, doing nothing; prints the count at SIGINT."""
    import rclpy
    from rclpy.executors import ExternalShutdownException
    from sensor_msgs.msg import JointState

    from payload_estimation.ros.qos import SENSOR_QOS

    count = [0]

    def on_msg(_msg) -> None:
        count[0] += 1

    rclpy.init(args=sys.argv)
    node = rclpy.create_node("cpu_floor")
    node.create_subscription(JointState, "joint_states", on_msg, SENSOR_QOS)
    try:
        rclpy.spin(node)
    except (KeyboardInterrupt, ExternalShutdownException, RuntimeError):  # RuntimeError: a take cut by SIGINT
        pass
    print(f"received {count[0]}", flush=True)
    return 0


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of a process, all its threads (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def steal_total() -> tuple[int, int]:
    """(steal, total) jiffies of all CPUs since boot (/proc/stat)."""
    f = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    return f[7], sum(f[:8])


class Rig:
    """The processes, and a probe node in this process (status, services, trajectories)."""

    def __init__(self, ns: str):
        import rclpy
        from diagnostic_msgs.msg import DiagnosticArray
        from rclpy.executors import SingleThreadedExecutor
        from trajectory_msgs.msg import JointTrajectory

        from payload_estimation.ros.bringup import config_file, override_file, ros_args, start_processes
        from payload_estimation.ros.qos import COMMAND_QOS, LATCHED_QOS
        from payload_estimation.ros.spin_thread import SpinThread

        self.ns = ns
        clock = [f"/clock:={ns}/clock"]
        self.procs = start_processes(["sim"], ros_args(None, ns, None, clock, [
            f"robot:={ROBOT}", "rate_hz:=1000.0", f"initial_positions:={Q0.tolist()}", f"payload_mass:={MASS}",
            f"payload_com:={COM}"]))
        self.override = override_file([f"robot:={ROBOT}"], ["estimator", "sampler", "monitor"])
        self.procs += start_processes(["estimator", "sampler", "monitor"],
                                      ros_args(config_file(), ns, True, clock) + ["--params-file", str(self.override)])
        floor = subprocess.Popen([sys.executable, __file__, "--floor", *ros_args(None, ns, True, clock)],
                                 stdout=subprocess.PIPE, text=True)
        floor.node = "floor"
        self.procs.append(floor)
        self.pid = {p.node: p.pid for p in self.procs}
        rclpy.init(args=["--ros-args", "-r", f"__ns:={ns}", "-r", f"/clock:={ns}/clock"])  # a sim-time client too
        self.node = rclpy.create_node("cpu_probe")
        self.status: dict[str, tuple[int, str, dict]] = {}
        for name in ("payload_estimator", "payload_sampler", "collision_monitor"):
            self.node.create_subscription(DiagnosticArray, f"{name}/status",
                                          lambda m, n=name: self._on_status(n, m), LATCHED_QOS)
        self.pub_traj = self.node.create_publisher(JointTrajectory, "joint_trajectory", COMMAND_QOS)
        self.spin = SpinThread(SingleThreadedExecutor(), self.node)

    def _on_status(self, name: str, msg) -> None:
        from payload_estimation.ros.messages import diagnostic_level

        st = msg.status[0]
        self.status[name] = (diagnostic_level(st.level), st.message, {kv.key: kv.value for kv in st.values})

    def text(self, name: str) -> str:
        return self.status.get(name, (None, "", {}))[1]

    def wait_ready(self, timeout: float = 90.0) -> None:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if (self.text("collision_monitor").startswith("monitoring") and "idle" in self.text("payload_sampler")
                    and "payload_estimator" in self.status and self.status["payload_estimator"][0] == 0):
                return
            for p in self.procs:
                if p.poll() is not None:
                    raise RuntimeError(f"{p.node} exited with {p.returncode}")
            time.sleep(0.1)
        raise RuntimeError(f"nodes not ready within {timeout} s: {self.status}")

    def call(self, service: str, timeout: float = 60.0):
        from std_srvs.srv import Trigger

        cli = self.node.create_client(Trigger, service)
        try:
            if not cli.wait_for_service(timeout_sec=10.0):
                raise RuntimeError(f"service {service} not available")
            fut = cli.call_async(Trigger.Request())
            end = time.monotonic() + timeout
            while not fut.done():
                if time.monotonic() > end:
                    raise RuntimeError(f"{service} did not answer within {timeout} s")
                time.sleep(0.01)
            return fut.result()
        finally:
            self.node.destroy_client(cli)

    def swing(self, seconds: float) -> None:
        """Command the arm through smooth swings around Q0 for ``seconds`` s (back at Q0, at rest, at the end)."""
        from payload_estimation.ros.messages import trajectory_msg

        cycles = max(1, round(seconds / SWING_PERIOD))
        w = 2 * np.pi * cycles / seconds
        t = np.arange(1, int(seconds / 0.05) + 1) * 0.05
        q = Q0 + SWING * (1 - np.cos(w * t))[:, None] / 2
        dq = SWING * w * np.sin(w * t)[:, None] / 2
        dq[-1] = 0.0
        self.pub_traj.publish(trajectory_msg(self.joint_names(), q, t, velocities=dq))

    def joint_names(self) -> list[str]:
        from payload_estimation.model import load_robot

        return list(load_robot(ROBOT).joint_names)

    def cpu(self) -> dict[str, float]:
        return {k: cpu_seconds(pid) for k, pid in self.pid.items()}

    def stop(self) -> str:
        from payload_estimation.ros.bringup import stop_processes

        self.spin.stop()
        self.node.destroy_node()
        import rclpy

        rclpy.shutdown()
        floor = next(p for p in self.procs if p.node == "floor")
        floor.send_signal(signal.SIGINT)
        try:
            out, _ = floor.communicate(timeout=5.0)
        except subprocess.TimeoutExpired:
            floor.kill()
            out = ""
        stop_processes([p for p in self.procs if p.node != "floor"])
        self.override.unlink(missing_ok=True)
        return out


def measure(rig: Rig, seconds: float, during=None) -> dict:
    """CPU % of a core per process over ``seconds`` s (or while ``during()`` runs, if given)."""
    load0 = os.getloadavg()[0]
    st0, c0, t0 = steal_total(), rig.cpu(), time.monotonic()
    extra = during() if during is not None else time.sleep(seconds)
    st1, c1, t1 = steal_total(), rig.cpu(), time.monotonic()
    span = t1 - t0
    out = {k: 100.0 * (c1[k] - c0[k]) / span for k in c0}
    out["nodes"] = out["estimator"] + out["sampler"] + out["monitor"]
    return {"cpu": out, "span": span, "load": max(load0, os.getloadavg()[0]),
            "steal": 100.0 * (st1[0] - st0[0]) / max(1, st1[1] - st0[1]), "extra": extra}


def latency(rig: Rig, seconds: float) -> dict:
    """The monitor's receive-to-decision latency (ms): residual source timestamp - joint_states source timestamp."""
    from sensor_msgs.msg import JointState

    from payload_estimation.ros.dedicated_subscription import DedicatedSubscription
    from payload_estimation.ros.qos import SENSOR_QOS

    js: dict[int, int] = {}
    res: list[tuple[int, int]] = []

    def stamp(m) -> int:
        return m.header.stamp.sec * 1_000_000_000 + m.header.stamp.nanosec

    lock = threading.Lock()
    a = DedicatedSubscription(rig.node, JointState, "joint_states",
                              lambda m, i: js.__setitem__(stamp(m), i["source_timestamp"]), SENSOR_QOS, lock,
                              with_info=True)
    b = DedicatedSubscription(rig.node, JointState, "collision_monitor/residual",
                              lambda m, i: res.append((stamp(m), i["source_timestamp"])), SENSOR_QOS, lock,
                              with_info=True)
    time.sleep(1.0)  # discovery
    js.clear()
    res.clear()
    time.sleep(seconds)
    a.destroy()
    b.destroy()
    lat = np.array([1e-6 * (src - js[s]) for s, src in res if s in js])
    if lat.size == 0:
        return {"n": 0, "p50": float("nan"), "p99": float("nan"), "max": float("nan"), "residuals": len(res),
                "states": len(js)}
    return {"n": int(lat.size), "p50": float(np.median(lat)), "p99": float(np.percentile(lat, 99)),
            "max": float(lat.max()), "residuals": len(res), "states": len(js)}


def sampling(rig: Rig, seconds: float) -> dict:
    """``payload_sampler/sample`` back to back until ``seconds`` s passed; the answers."""
    end = time.monotonic() + seconds
    answers = []
    while True:
        r = rig.call("payload_sampler/sample", timeout=60.0)
        answers.append((r.success, r.message.splitlines()[0][:160]))
        if time.monotonic() >= end or not r.success:
            return {"calls": len(answers), "ok": sum(a for a, _ in answers), "last": answers[-1][1]}


def online(rig: Rig, seconds: float) -> dict:
    """Grasp announced, payload attached, the arm swinging for ``seconds`` s: the online estimate runs."""
    for s in ("payload_estimator/grasped", "sim_node/attach_payload", "payload_estimator/grasped"):
        r = rig.call(s)
        if not r.success:
            raise RuntimeError(f"{s}: {r.message}")
        time.sleep(0.3)  # as a gripper driver: the announcement reaches the monitor before the load does
    rig.swing(seconds)
    time.sleep(seconds + 0.3)
    est = rig.status.get("payload_estimator", (None, "", {}))[1]
    for s in ("payload_estimator/released", "sim_node/detach_payload"):
        rig.call(s)
    return {"estimator": est[:160]}


def run(args) -> dict:
    from payload_estimation.ros.domain import isolate

    isolate()
    rig = Rig(f"/cpu{os.getpid()}")
    out: dict = {"phases": {}}
    try:
        rig.wait_ready()
        time.sleep(3.0)  # start-up work (imports, first plans) done
        for phase in args.phases:
            print(f"[bench_cpu] {phase} ...", file=sys.stderr, flush=True)
            if phase == "idle":
                out["phases"][phase] = measure(rig, args.seconds)
            elif phase == "latency":
                out["latency"] = latency(rig, args.seconds / 2)
            elif phase == "monitoring":
                rig.swing(args.seconds)
                time.sleep(0.3)
                out["phases"][phase] = measure(rig, args.seconds - 0.3)
                time.sleep(0.5)
            elif phase == "sampling":
                out["phases"][phase] = measure(rig, 0.0, lambda: sampling(rig, args.seconds))
            elif phase == "online":
                out["phases"][phase] = measure(rig, 0.0, lambda: online(rig, args.seconds))
            events = rig.status.get("collision_monitor", (None, "", {}))[2].get("events", "?")
            print(f"[bench_cpu]   {out['phases'].get(phase, out.get('latency'))} (monitor events {events})",
                  file=sys.stderr, flush=True)
        out["monitor_status"] = rig.text("collision_monitor")
        out["monitor_events"] = rig.status.get("collision_monitor", (None, "", {}))[2].get("events", "?")
    finally:
        floor_out = rig.stop()
    out["floor_received"] = floor_out.strip()
    return out


def table(res: dict, phases: list[str]) -> list[str]:
    from payload_estimation.reporting import format_table

    cols = [p for p in phases if p in res["phases"]]
    rows = []
    for key in ("estimator", "sampler", "monitor", "nodes", "sim", "floor"):
        label = "estimator + sampler + monitor" if key == "nodes" else LABELS[key]
        row = [label]
        for p in cols:
            c = res["phases"][p]["cpu"]
            ratio = c[key] / c["floor"] if c["floor"] > 0 else float("nan")
            row.append(f"{c[key]:.1f} % ({ratio:.2f}×)" if key != "floor" else f"{c[key]:.1f} %")
        row.append(f"≤ {TARGETS[key]:.2f}×" if key in TARGETS else "")
        rows.append(row)
    rows.append(["phase length, load, steal"] + [
        f"{res['phases'][p]['span']:.0f} s, {res['phases'][p]['load']:.1f}, {res['phases'][p]['steal']:.0f} %"
        for p in cols] + [""])
    return format_table(["process", *[f"{p} (× floor)" for p in cols], "target idle"], rows,
                        "l" + "r" * (len(cols) + 1), pad=False).splitlines()


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--floor":
        return floor_node()
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=20.0, help="s per phase (default 20)")
    ap.add_argument("--phases", nargs="+", default=["idle", "latency", "monitoring", "sampling", "online"],
                    choices=["idle", "latency", "monitoring", "sampling", "online"])
    ap.add_argument("--quick", action="store_true", help="5 s phases, a smoke run (not written unless --write)")
    ap.add_argument("--write", action="store_true", help="write docs/bench/cpu.md also with --quick")
    ap.add_argument("--no-write", action="store_true", help="print only")
    args = ap.parse_args()
    if args.quick:
        args.seconds = 5.0
    t0 = time.monotonic()
    res = run(args)
    cmd = " ".join(["bench/bench_cpu.py", *sys.argv[1:]])
    lines = [
        "## CPU of the nodes at 1 kHz (issue 48)",
        "",
        f"- machine: {machine()} (at the end)",
        f"- date: {datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC; the run took {time.monotonic() - t0:.0f} s",
        f"- command: `.venv/bin/python {cmd}`",
        f"- processes over DDS: `sim_node` ({ROBOT}, 1 kHz joint_states, /clock at 250 Hz), `payload_estimator`, "
        "`payload_sampler`, `collision_monitor` (the package's parameter file, use_sim_time as in the demo) and the "
        "**floor**: a bare rclpy node (`rclpy.spin`, one joint_states subscription with the nodes' sensor QoS, a "
        "callback doing nothing, the same ros-args: it follows /clock too), measured in the same run; "
        f"floor {res['floor_received']} joint_states",
        "- CPU = user + system time of each process (all its threads, /proc/<pid>/stat) over the phase, in % of one "
        "core; (×) = ratio to the floor in the same phase. Phases: idle (arm at rest, nothing asked), monitoring "
        f"(the arm swinging ±{np.degrees(SWING).max() / 2:.0f}° around the start pose), sampling "
        "(`payload_sampler/sample` back to back), online (grasp announced, 2 kg attached, the arm swinging: the "
        "online estimate runs). load = 1-min load average (max of start and end); steal = hypervisor steal time",
        "",
    ]
    lines += table(res, args.phases)
    if "idle" in res["phases"]:
        c = res["phases"]["idle"]["cpu"]
        verdicts = [f"{'the three' if k == 'nodes' else k} {c[k] / c['floor']:.2f}× (≤ {t:.2f}×: "
                    f"{'met' if c[k] / c['floor'] <= t else 'NOT met'})" for k, t in TARGETS.items()]
        lines += ["", "Targets at idle (issue 48): " + "; ".join(verdicts) + "."]
    lat = res.get("latency")
    if lat:
        lines += ["", f"Monitor receive-to-decision latency (the residual's DDS source timestamp minus that of the "
                  f"joint_states sample it was computed from, {lat['n']} samples; this process subscribes to both at "
                  f"1 kHz meanwhile): **p50 {lat['p50']:.2f} ms, p99 {lat['p99']:.2f} ms**, max {lat['max']:.1f} ms."]
    ph = res["phases"]
    if "sampling" in ph:
        e = ph["sampling"]["extra"]
        lines += ["", f"Sampling: {e['ok']}/{e['calls']} calls succeeded; last answer: {e['last']}."]
    if "online" in ph:
        lines += ["", f"Online: the estimator's status at the end of the move: {ph['online']['extra']['estimator']}."]
    lines += ["", f"Collision events reported by the monitor over the whole run: {res['monitor_events']}."]
    text = "\n".join(lines) + "\n"
    old = BENCH_DOCS / "cpu.md"
    if old.is_file() and KEPT in old.read_text():  # an earlier run kept for comparison (before a change)
        text += "\n" + KEPT + old.read_text().split(KEPT, 1)[1]
    if not args.no_write and (not args.quick or args.write):
        write_section("cpu", text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
