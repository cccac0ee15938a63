"""Collision-monitor node at 1 kHz joint_states: sustained rate and input-to-residual latency.

Three processes over real DDS (localhost): a publisher of sensor_msgs/JointState at RATE Hz
(stamped with the wall clock at publication), the ``collision_monitor`` node, and this process
receiving ``collision_monitor/residual``. Latency = arrival of the residual here minus the stamp of
the joint_states sample it was computed from (the monitor copies the stamp), i.e. two DDS hops plus
the monitor's callback: an upper bound on "residual published within X ms of the input sample".

Usage: .venv/bin/python bench/bench_nodes.py [--seconds 10] [--rates 1000 500]
Writes docs/bench/nodes.md.
"""

from __future__ import annotations

import argparse
import datetime
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
from benchlib import machine

ROOT = Path(__file__).resolve().parent.parent


def publisher(rate: float, seconds: float) -> None:
    """Publish a static lwr4 joint state (effort = g(q)) at ``rate`` Hz for ``seconds`` s."""
    import rclpy
    from sensor_msgs.msg import JointState

    from payload_estimation.model.dynamics import RigidBodyDynamics
    from payload_estimation.model.robot_file import load_robot
    from payload_estimation.ros.messages import sec_to_time
    from payload_estimation.ros.qos import SENSOR_QOS

    desc = load_robot("lwr4")
    q = np.radians([10, 40, -5, -70, 15, 50, 20])
    tau = RigidBodyDynamics(desc).gravity(q)
    rclpy.init()
    node = rclpy.create_node("bench_joint_states")
    pub = node.create_publisher(JointState, "joint_states", SENSOR_QOS)
    msg = JointState(name=list(desc.joint_names), position=q.tolist(), velocity=[0.0] * desc.n, effort=tau.tolist())
    time.sleep(2.0)  # discovery
    period = 1.0 / rate
    t0 = time.perf_counter()
    k = 0
    while True:
        target = t0 + k * period
        now = time.perf_counter()
        if now - t0 > seconds:
            break
        if target > now:  # sleep only: a busy-wait would take a whole core from the monitor
            time.sleep(target - now)
        msg.header.stamp = sec_to_time(time.time())
        pub.publish(msg)
        k += 1
    print(k, flush=True)
    node.destroy_node()
    rclpy.shutdown()


def measure(rate: float, seconds: float) -> dict:
    import rclpy
    from rclpy.executors import SingleThreadedExecutor
    from sensor_msgs.msg import JointState

    from payload_estimation.ros.bringup import ros_args, start_processes, stop_processes
    from payload_estimation.ros.messages import time_to_sec
    from payload_estimation.ros.qos import SENSOR_QOS

    monitor = start_processes(["monitor"], ros_args(None, None, False, (), [
        "robot:=lwr4", "policy:=none", "residual_decimation:=1"]))
    lat: list[float] = []
    rclpy.init()
    node = rclpy.create_node("bench_residual_probe")
    node.create_subscription(JointState, "collision_monitor/residual",
                             lambda m: lat.append(time.time() - time_to_sec(m.header.stamp)), SENSOR_QOS)
    ex = SingleThreadedExecutor()
    ex.add_node(node)
    spin = threading.Thread(target=ex.spin, daemon=True)
    spin.start()
    time.sleep(2.0)
    cpu0 = _cpu(monitor[0].pid)
    pub = subprocess.run([sys.executable, __file__, "--publisher", str(rate), str(seconds)],
                         capture_output=True, text=True, check=True)
    cpu1 = _cpu(monitor[0].pid)
    time.sleep(0.5)
    published = int(pub.stdout.split()[-1])
    ex.shutdown()
    node.destroy_node()
    rclpy.shutdown()
    stop_processes(monitor)
    a = 1e3 * np.array(lat)
    return {"rate": rate, "published": published, "received": a.size,
            "median_ms": float(np.median(a)), "p99_ms": float(np.percentile(a, 99)), "max_ms": float(a.max()),
            "cpu_pct": 100.0 * (cpu1 - cpu0) / (seconds + 2.0)}


def _cpu(pid: int) -> float:
    """User + system CPU seconds of a process (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--publisher":
        publisher(float(sys.argv[2]), float(sys.argv[3]))
        return 0
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--rates", type=float, nargs="+", default=[1000.0, 500.0])
    args = ap.parse_args()
    from payload_estimation.ros.domain import isolate

    isolate()
    rows = []
    for rate in args.rates:
        print(f"[bench_nodes] {rate:.0f} Hz for {args.seconds:.0f} s ...", file=sys.stderr, flush=True)
        rows.append(measure(rate, args.seconds))
    lines = [
        "## Collision monitor node: sustained rate and latency",
        "",
        f"- machine: {machine()} (at the end)",
        f"- date: {datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC",
        f"- command: `.venv/bin/python bench/bench_nodes.py --seconds {args.seconds:g}`",
        "- publisher, `collision_monitor` (observer + detector on every sample, residual published for every "
        "sample) and receiver in three processes; latency = residual arrival minus the input sample's stamp "
        "(two DDS hops + the monitor callback)",
        "",
        "| joint_states rate | published | residuals received | latency median | p99 | max | monitor CPU |",
        "|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(f"| {r['rate']:.0f} Hz | {r['published']} | {r['received']} "
                     f"({100 * r['received'] / max(r['published'], 1):.1f} %) | {r['median_ms']:.2f} ms | "
                     f"{r['p99_ms']:.2f} ms | {r['max_ms']:.1f} ms | {r['cpu_pct']:.0f} % of a core |")
    text = "\n".join(lines) + "\n"
    out = ROOT / "docs" / "bench" / "nodes.md"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
