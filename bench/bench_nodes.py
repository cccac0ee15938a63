"""Collision-monitor node at 1 kHz joint_states: sustained rate and input-to-residual latency.

Three processes over real DDS (localhost): a publisher of sensor_msgs/JointState at RATE Hz
(stamped with the wall clock at publication), the ``collision_monitor`` node, and this process
receiving ``collision_monitor/residual``. Latency = the residual's DDS source timestamp (the moment
the monitor published it) minus the stamp of the joint_states sample it was computed from (the
monitor copies the stamp): "residual published within X ms of the input sample". The arrival time
here (one more DDS hop) is recorded too.

Usage: .venv/bin/python bench/bench_nodes.py [--seconds 10] [--rates 1000 500] [--repeats 3] [--realtime]
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
from benchlib import machine, write_section


def callback_cost(samples: int = 5000) -> dict:
    """CPU time of the monitor's whole per-sample path, in-process (µs): convert, observer, detector,
    reaction, residual publish — on a moving lwr4 (0.5 rad/s sinusoid), no DDS input."""
    import rclpy

    from payload_estimation.ros.messages import joint_state_msg, sec_to_time
    from payload_estimation.ros.monitor_node import CollisionMonitorNode

    rclpy.init(args=["bench", "--ros-args", "-p", "robot:=lwr4", "-p", "policy:=none"])
    try:
        mon = CollisionMonitorNode()
        dyn = mon.dyn
        q0 = np.radians([10, 40, -5, -70, 15, 50, 20])
        msgs = []
        for k in range(samples):
            t = 1e-3 * k
            q = q0 + 0.1 * np.sin(5.0 * t)
            dq = np.full(7, 0.5 * np.cos(5.0 * t))
            msgs.append(joint_state_msg(dyn.desc.joint_names, q, dq, dyn.gravity(q), stamp=sec_to_time(1.0 + t)))
        cost = np.empty(samples)
        for k, m in enumerate(msgs):
            t0 = time.perf_counter_ns()
            mon._on_joint_states(m)
            cost[k] = time.perf_counter_ns() - t0
        mon.destroy_node()
    finally:
        rclpy.shutdown()
    cost = cost[samples // 10:] * 1e-3  # after warm-up
    return {"median_us": float(np.median(cost)), "p99_us": float(np.percentile(cost, 99))}


def publisher(rate: float, seconds: float) -> None:
    """Publish a static lwr4 joint state (effort = g(q)) at ``rate`` Hz for ``seconds`` s.

    Like a real-time driver, one sample per tick of a fixed grid: a tick this process wakes up too late
    for is skipped (counted), never made up for by a burst of back-to-back samples. Prints the number
    published and skipped.
    """
    import gc

    import rclpy
    from sensor_msgs.msg import JointState

    from payload_estimation.model import RigidBodyDynamics, load_robot
    from payload_estimation.ros.messages import sec_to_time
    from payload_estimation.ros.qos import SENSOR_QOS

    desc = load_robot("lwr4")
    q = np.radians([10, 40, -5, -70, 15, 50, 20])
    tau = RigidBodyDynamics(desc).gravity(q)
    rclpy.init()
    node = rclpy.create_node("bench_joint_states")
    pub = node.create_publisher(JointState, "joint_states", SENSOR_QOS)
    msg = JointState(name=list(desc.joint_names), position=q.tolist(), velocity=[0.0] * desc.n, effort=tau.tolist())
    gc.collect()
    gc.freeze()  # no multi-ms collections over the start-up objects while publishing
    time.sleep(2.0)  # discovery
    period = 1.0 / rate
    t0 = time.perf_counter()
    tick = published = skipped = 0
    while True:
        target = t0 + tick * period
        now = time.perf_counter()
        if now - t0 > seconds:
            break
        if target > now:  # sleep only: a busy-wait would take a whole core from the monitor
            time.sleep(target - now)
        msg.header.stamp = sec_to_time(time.time())
        pub.publish(msg)
        published += 1
        late = int((time.perf_counter() - t0) / period) - tick  # whole ticks already past: skip them
        skipped += max(0, late)
        tick += 1 + max(0, late)
    print(published, skipped, flush=True)
    node.destroy_node()
    rclpy.shutdown()


def noop(seconds: float) -> None:
    """A subscriber process that does nothing with joint_states (the same dedicated-thread mechanism as the
    monitor): prints the latency (receipt minus the sample's stamp) median and p99 in ms and its count."""
    import rclpy
    from sensor_msgs.msg import JointState

    from payload_estimation.ros.dedicated_subscription import DedicatedSubscription
    from payload_estimation.ros.messages import time_to_sec
    from payload_estimation.ros.qos import SENSOR_QOS

    lat: list[float] = []
    rclpy.init()
    node = rclpy.create_node("bench_noop")
    sub = DedicatedSubscription(node, JointState, "joint_states",
                                lambda m: lat.append(time.time() - time_to_sec(m.header.stamp)), SENSOR_QOS,
                                threading.Lock())
    time.sleep(seconds)
    sub.destroy()
    node.destroy_node()
    rclpy.shutdown()
    a = 1e3 * np.array(lat) if lat else np.array([np.nan])
    print(f"{np.median(a)} {np.percentile(a, 99)} {len(lat)}", flush=True)


def _rss_mb(pid: int) -> float:
    """Resident set size of a process (MB, Linux /proc)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024.0
    return float("nan")


def measure(rate: float, seconds: float, realtime: bool = False, sample_every: float = 0.0) -> dict:
    """Run monitor + publisher at ``rate`` Hz for ``seconds`` s; latencies in ms, CPU in % of a core.

    ``realtime``: run the monitor and the publisher under SCHED_FIFO priority 10 (``chrt -f 10``), as a
    real-robot deployment would run its control-path nodes.
    """
    import rclpy
    from sensor_msgs.msg import JointState

    from payload_estimation.ros.bringup import ros_args, start_processes, stop_processes
    from payload_estimation.ros.dedicated_subscription import DedicatedSubscription
    from payload_estimation.ros.messages import time_to_sec
    from payload_estimation.ros.qos import SENSOR_QOS

    rt = ["chrt", "-f", "10"] if realtime else []
    monitor = start_processes(["monitor"], ros_args(None, None, False, (), [
        "robot:=lwr4", "policy:=none", "residual_decimation:=1"]), prefix=rt)
    samples: list[tuple[float, float, float]] = []  # (input stamp, residual published, residual received) s

    def on_residual(msg, info) -> None:
        samples.append((time_to_sec(msg.header.stamp), 1e-9 * info["source_timestamp"],
                        1e-9 * info["received_timestamp"]))

    rclpy.init()
    try:
        node = rclpy.create_node("bench_residual_probe")
        probe = DedicatedSubscription(node, JointState, "collision_monitor/residual", on_residual, SENSOR_QOS,
                                      threading.Lock(), with_info=True)
        noop_proc = subprocess.Popen([sys.executable, __file__, "--noop", str(seconds + 3.5)], stdout=subprocess.PIPE,
                                     text=True)
        time.sleep(2.0)
        load0 = os.getloadavg()[0]
        cpu0, st0 = _cpu(monitor[0].pid), _cpu_times()
        series: list[tuple[float, float, float]] = []  # (s since start, CPU % of a core over the interval, RSS MB)
        stop = threading.Event()

        def soak() -> None:
            start = t0 = time.monotonic()
            c0 = _cpu(monitor[0].pid)
            while not stop.wait(sample_every):
                t1, c1 = time.monotonic(), _cpu(monitor[0].pid)
                series.append((t1 - start, 100.0 * (c1 - c0) / (t1 - t0), _rss_mb(monitor[0].pid)))
                t0, c0 = t1, c1

        sampler = threading.Thread(target=soak, daemon=True) if sample_every > 0 else None
        if sampler:
            series.append((0.0, float("nan"), _rss_mb(monitor[0].pid)))
            sampler.start()
        pub = subprocess.run([*rt, sys.executable, __file__, "--publisher", str(rate), str(seconds)],
                             capture_output=True, text=True, check=True, timeout=seconds + 30.0)
        stop.set()
        cpu1, st1 = _cpu(monitor[0].pid), _cpu_times()
        time.sleep(0.5)
        published, skipped = (int(x) for x in pub.stdout.split()[-2:])
        noop_out, _ = noop_proc.communicate(timeout=30.0)
        noop_median, noop_p99, noop_n = (float(x) for x in noop_out.split()[-3:])
        probe.destroy()
        node.destroy_node()
    finally:
        rclpy.shutdown()
        stop_processes(monitor)
    a = np.array(samples)
    pub_ms = 1e3 * (a[:, 1] - a[:, 0])
    recv_ms = 1e3 * (a[:, 2] - a[:, 0])
    tail = pub_ms[-max(1, len(pub_ms) // 10):]
    return {"rate": rate, "realtime": realtime, "published": published, "skipped": skipped, "received": len(a),
            "median_ms": float(np.median(pub_ms)), "p99_ms": float(np.percentile(pub_ms, 99)),
            "max_ms": float(pub_ms.max()), "tail_median_ms": float(np.median(tail)),
            "recv_median_ms": float(np.median(recv_ms)), "recv_p99_ms": float(np.percentile(recv_ms, 99)),
            "cpu_pct": 100.0 * (cpu1 - cpu0) / (seconds + 2.0), "load": max(load0, os.getloadavg()[0]),
            "steal_pct": 100.0 * (st1[0] - st0[0]) / max(1, st1[1] - st0[1]), "samples": a,
            "noop_median_ms": noop_median, "noop_p99_ms": noop_p99, "noop_received": int(noop_n), "series": series}


def machine_floor(rate: float, seconds: float) -> dict:
    """What this machine gives any 1 kHz subscriber, without the monitor (ms).

    ``sleep``: overshoot of ``time.sleep(0.5 ms)`` (how late the OS wakes a waiting process), 5000 times.
    ``hop``: the same publisher straight into a Python callback that does nothing: callback start minus
    the sample's stamp (one DDS hop + the wake-up) — the part of the monitor's latency it cannot remove.
    """
    import rclpy
    from sensor_msgs.msg import JointState

    from payload_estimation.ros.dedicated_subscription import DedicatedSubscription
    from payload_estimation.ros.messages import time_to_sec
    from payload_estimation.ros.qos import SENSOR_QOS

    over = np.empty(5000)
    for k in range(over.size):
        t0 = time.perf_counter()
        time.sleep(5e-4)
        over[k] = time.perf_counter() - t0 - 5e-4
    hop: list[float] = []
    rclpy.init()
    try:
        node = rclpy.create_node("bench_hop_probe")
        probe = DedicatedSubscription(node, JointState, "joint_states",
                                      lambda m: hop.append(time.time() - time_to_sec(m.header.stamp)),
                                      SENSOR_QOS, threading.Lock())
        time.sleep(1.0)
        st0 = _cpu_times()
        subprocess.run([sys.executable, __file__, "--publisher", str(rate), str(seconds)],
                       capture_output=True, text=True, check=True, timeout=seconds + 30.0)
        st1 = _cpu_times()
        probe.destroy()
        node.destroy_node()
    finally:
        rclpy.shutdown()
    h = 1e3 * np.array(hop)
    return {"sleep_median_ms": float(np.median(over) * 1e3), "sleep_p99_ms": float(np.percentile(over, 99) * 1e3),
            "sleep_max_ms": float(over.max() * 1e3), "hop_median_ms": float(np.median(h)),
            "hop_p99_ms": float(np.percentile(h, 99)), "hop_max_ms": float(h.max()),
            "steal_pct": 100.0 * (st1[0] - st0[0]) / max(1, st1[1] - st0[1])}


def _cpu_times() -> tuple[int, int]:
    """(steal, total) jiffies of all CPUs since boot (Linux /proc/stat): time the hypervisor ran others."""
    f = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    return f[7], sum(f[:8])


def _cpu(pid: int) -> float:
    """User + system CPU seconds of a process (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--publisher":
        publisher(float(sys.argv[2]), float(sys.argv[3]))
        return 0
    if len(sys.argv) > 1 and sys.argv[1] == "--noop":
        noop(float(sys.argv[2]))
        return 0
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--rates", type=float, nargs="+", default=[1000.0, 500.0])
    ap.add_argument("--repeats", type=int, default=3, help="runs per rate (the table gives each, then the median)")
    ap.add_argument("--dump", type=Path, default=None,
                    help="also save each run's (input stamp, published, received) times (s) as .npy here")
    ap.add_argument("--realtime", action="store_true",
                    help="also run monitor and publisher under SCHED_FIFO (chrt -f 10; needs CAP_SYS_NICE)")
    ap.add_argument("--soak", type=float, default=0.0,
                    help="also one run of this many s at the highest rate, sampling the monitor's CPU and RSS")
    args = ap.parse_args()
    from payload_estimation.ros.domain import isolate

    isolate()
    modes = [False, True] if args.realtime else [False]
    cb = callback_cost()
    print(f"[bench_nodes] per-sample path in-process: {cb['median_us']:.0f} us median", file=sys.stderr)
    floors = [machine_floor(max(args.rates), args.seconds) for _ in range(args.repeats)]
    floor = {k: float(np.median([f[k] for f in floors])) for k in floors[0]}
    print(f"[bench_nodes] machine floor: sleep overshoot p99 {floor['sleep_p99_ms']:.2f} ms, one hop p99 "
          f"{floor['hop_p99_ms']:.2f} ms (medians of {len(floors)})", file=sys.stderr)
    rows = []
    for rt in modes:
        for rate in args.rates:
            for k in range(args.repeats):
                print(f"[bench_nodes] {rate:.0f} Hz for {args.seconds:.0f} s{' (SCHED_FIFO)' if rt else ''}, "
                      f"run {k + 1}/{args.repeats} ...", file=sys.stderr, flush=True)
                rows.append(measure(rate, args.seconds, rt))
                r = rows[-1]
                if args.dump:
                    args.dump.mkdir(parents=True, exist_ok=True)
                    np.save(args.dump / f"latency_{rate:.0f}hz{'_fifo' if rt else ''}_{k + 1}.npy", r["samples"])
                print(f"[bench_nodes]   p99 {r['p99_ms']:.2f} ms, median {r['median_ms']:.2f} ms, "
                      f"{r['received']}/{r['published']} residuals", file=sys.stderr, flush=True)
    from payload_estimation.reporting import format_table  # here: the --publisher child process stays light

    lines = [
        "## Collision monitor node: sustained rate and latency",
        "",
        f"- machine: {machine()} (at the end)",
        f"- date: {datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC",
        f"- command: `.venv/bin/python bench/bench_nodes.py --seconds {args.seconds:g} --repeats {args.repeats}"
        f"{' --realtime' if args.realtime else ''}`",
        "- three processes over DDS on this machine: a joint_states publisher (stamp = wall clock at publication; "
        "one sample per tick of a fixed grid like a real-time driver: a tick it wakes too late for is skipped, "
        "not made up for by a burst), "
        "`collision_monitor` (observer + detector on every sample, a residual published for every sample) and "
        "a receiver",
        "- **latency** = the residual's DDS source timestamp (when the monitor published it) minus the input "
        "sample's stamp: DDS hop in, queueing, callback, publish. **at receiver** adds the second DDS hop. "
        "**last 10 %** = median latency over the last tenth of the run (equal to the median = no backlog)",
        "- load = 1-min load average (the highest of start and end of the run); steal = share of CPU time the "
        "hypervisor gave to other guests during the run (/proc/stat; a virtual machine's vCPUs stall then); "
        "publisher ticks skipped = ticks the publisher woke up too late for; the monitor's joint_states "
        "subscription runs on its own thread (`ros/dedicated_subscription.py`)",
        "",
        f"- the monitor's per-sample path in-process (convert, observer, detector, reaction, residual publish; "
        f"moving lwr4, 4500 samples after warm-up): **{cb['median_us']:.0f} µs** median, {cb['p99_us']:.0f} µs p99",
        f"- this machine's floor, without the monitor (medians of {len(floors)} runs): `time.sleep(0.5 ms)` "
        f"overshoots by {floor['sleep_median_ms']:.2f} ms median, **{floor['sleep_p99_ms']:.2f} ms p99** "
        f"(how late the OS wakes a waiting process); the same publisher at {max(args.rates):.0f} Hz straight "
        f"into a Python callback that does nothing: {floor['hop_median_ms']:.2f} ms median, "
        f"**{floor['hop_p99_ms']:.2f} ms p99** (runs: "
        + ", ".join(f"{f['hop_p99_ms']:.2f} ms at {f['steal_pct']:.0f} % steal" for f in floors)
        + ") — one DDS hop + wake-up",
        "",
    ]
    runs = [[f"{r['rate']:.0f} Hz", "SCHED_FIFO" if r["realtime"] else "default", f"{r['received']} / {r['published']}",
             str(r["skipped"]), f"{r['median_ms']:.2f} ms", f"**{r['p99_ms']:.2f} ms**", f"{r['max_ms']:.1f} ms",
             f"{r['tail_median_ms']:.2f} ms", f"{r['recv_p99_ms']:.2f} ms", f"{r['noop_median_ms']:.2f} ms",
             f"{r['noop_p99_ms']:.2f} ms", f"**{r['p99_ms'] / r['noop_p99_ms']:.2f}**", f"{r['cpu_pct']:.0f} %",
             f"{r['load']:.1f}", f"{r['steal_pct']:.0f} %"] for r in rows]
    lines += format_table(["rate", "scheduling", "residuals / published", "publisher ticks skipped", "latency median",
                           "p99", "max", "last 10 %", "at receiver p99", "no-op median", "no-op p99", "p99 / no-op p99",
                           "monitor CPU", "load", "steal"], runs, "rl" + "r" * 13, pad=False).splitlines()
    lines += ["", "Median over the runs (goal: median <= 1 ms, p99 <= 1.5 x the no-op subscriber's p99 in the same "
              "run):", ""]
    medians = []
    for rt in modes:
        for rate in args.rates:
            rs = [r for r in rows if r["rate"] == rate and r["realtime"] == rt]
            got = sum(r["received"] for r in rs) / max(1, sum(r["published"] for r in rs))
            medians.append([f"{rate:.0f} Hz", "SCHED_FIFO" if rt else "default",
                            f"{np.median([r['median_ms'] for r in rs]):.2f} ms",
                            f"**{np.median([r['p99_ms'] for r in rs]):.2f} ms**",
                            f"{np.median([r['noop_p99_ms'] for r in rs]):.2f} ms",
                            f"**{np.median([r['p99_ms'] / r['noop_p99_ms'] for r in rs]):.2f}**", f"{100 * got:.1f} %"])
    lines += format_table(["rate", "scheduling", "latency median", "p99", "no-op p99", "p99 / no-op p99",
                           "residuals received"], medians, "rlrrrrr", pad=False).splitlines()
    best = min(float(np.median([r["p99_ms"] for r in rows if r["rate"] == rate and r["realtime"] == rt]))
               for rt in modes for rate in args.rates)
    lines += ["", "Reading: the monitor keeps up when every residual arrives and the last tenth of a run has the "
              "median latency of the whole (no backlog). Its own share of the latency is the per-sample path "
              f"({cb['median_us']:.0f} µs); the rest is the DDS hop and the wake-up of a waiting thread, "
              f"which this machine delivers late: a subscriber doing nothing already has a p99 of "
              f"{floor['hop_p99_ms']:.2f} ms. "
              + ("A p99 under 2 ms needs a machine whose floor is well under that (an idle robot PC, a real-time "
                 "kernel, the monitor at real-time priority: `monitor_prefix:='chrt -f 80'`)."
                 if floor["hop_p99_ms"] > 1.0 or best > 2.0 else "")]
    if args.soak > 0:
        rate = max(args.rates)
        print(f"[bench_nodes] soak: {rate:.0f} Hz for {args.soak:.0f} s ...", file=sys.stderr, flush=True)
        r = measure(rate, args.soak, False, sample_every=max(10.0, args.soak / 20))
        ser = r["series"]
        cpu = [c for _, c, _ in ser[1:]]
        rss = [m for _, _, m in ser]
        lines += ["", f"**{args.soak / 60:.0f} minutes at {rate:.0f} Hz** (`--soak {args.soak:g}`): "
                  f"{r['received']} / {r['published']} residuals, latency median {r['median_ms']:.2f} ms, p99 "
                  f"{r['p99_ms']:.2f} ms (no-op p99 {r['noop_p99_ms']:.2f} ms, ratio "
                  f"{r['p99_ms'] / r['noop_p99_ms']:.2f}), last tenth median {r['tail_median_ms']:.2f} ms; "
                  f"monitor CPU {min(cpu):.0f}-{max(cpu):.0f} % of a core per interval, RSS {rss[0]:.1f} MB at "
                  f"the start, {rss[-1]:.1f} MB at the end "
                  f"(max {max(rss):.1f} MB)", ""]
        lines += format_table(["t (s)", "CPU (% of a core)", "RSS (MB)"],
                              [[f"{t:.0f}", f"{c:.0f}", f"{m:.1f}"] for t, c, m in ser], "rrr", pad=False).splitlines()
    text = "\n".join(lines) + "\n"
    write_section("nodes", text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
