"""What the collision monitor's threshold floor buys during the online estimate: 40 N contacts and drops (issue 32).

The cases, the arm, the calibrated online estimator and the monitor of bench_online.py (its module docstring:
random pick -> place moves, 0.5-5 kg boxes, 3 % model error, ±0.5 N m offsets, 0.1 N m noise, the monitor carrying
the online estimate with thresholds widened by 3σ of its gravity torque), the same seeds and so the same moves; only
the monitor's thresholds T (its ``thresholds`` parameter, 6 N m by default) change. Per floor: 40 N contacts
detected within 30 ms, contacts classified as collisions, drops classified as a loss within 100 ms, runs with a
false alarm (a detection before the drop or the contact).

``calibrated``: per case, thresholds from a contact-free recording of the same arm
(``collision.calibrate_thresholds``, its defaults): the unloaded arm makes 4 other point-to-point moves from the
pick configuration (30-120 deg over 1.5-4 s each, 0.3 s at rest after each; a generator of their own, so the
moves judged are ones the calibration has never seen), the monitor (nominal model, K_I 150/s) records its
residual, and T_j = max(2.5 N m, 2 x its largest |r_j|). Inside the announced grasp's window the thresholds are at
least 6 N m, as in the monitor node (``WatchConfig.window_floor``). Seeds other than bench_online's (--seeds 2 3)
judge the rule on cases it was not chosen on.

Usage: .venv/bin/python bench/bench_thresholds.py [--robots iiwa14 lwr4] [--runs 100] [--seeds 0 1]
[--thresholds 6 5 4 calibrated] [--write] [--save F.pkl]   (--seeds: one per robot, bench_online's --seed for
each; --write -> docs/bench/thresholds.md); --report A.pkl B.pkl [--write] [--command C] [--note N] merges the
--save files of one process per robot (a robot's second file is labelled by its name, e.g. held-out seeds).
"""

from __future__ import annotations

import argparse
import datetime
import pickle
import sys
import time
from pathlib import Path

import numpy as np
from bench_online import calibrate, make_arm, make_case, monitored_run, random_target
from benchlib import machine, write_section

from payload_estimation.collision import CollisionMonitor, MonitorConfig, calibrate_thresholds
from payload_estimation.model import load_robot
from payload_estimation.model.dynamics import RigidBodyDynamics
from payload_estimation.reporting import format_table

CALIBRATED = "calibrated"
CALIBRATION_MOVES = 4


def recorded_thresholds(dyn, case) -> np.ndarray:
    """T_j (N m) calibrated on a contact-free recording of this case's unloaded arm (module docstring)."""
    arm = make_arm(dyn, case)
    rng = np.random.default_rng([case.seed, 777])
    mon = CollisionMonitor(dyn, MonitorConfig(contact=None, thresholds=100.0))
    q, ts, rs, dqs = case.q0, [], [], []
    for _ in range(CALIBRATION_MOVES):
        q, duration = random_target(dyn, rng, q), rng.uniform(1.5, 4.0)
        arm.set_trajectory([(duration, q, None)])
        for _ in range(round((duration + 0.3) * 1000)):
            arm.step(1)
            s = arm.state()
            ts.append(s.t)
            rs.append(mon.update(s.t, s.q, s.dq, s.tau).residual)
            dqs.append(s.dq)
    return calibrate_thresholds(ts, rs, dqs).thresholds


def _label(floor) -> str:
    return floor if isinstance(floor, str) else f"{floor:g}"


def bench_robot(robot: str, runs: int, seed: int, floors: list) -> dict:
    dyn = RigidBodyDynamics(load_robot(robot))
    rng = np.random.default_rng(seed)
    out: dict = {t: [] for t in floors}
    for i in range(runs):
        case = make_case(dyn, rng, i)
        t0 = time.perf_counter()
        model = calibrate(dyn, case)
        for t in floors:
            th = recorded_thresholds(dyn, case) if t == CALIBRATED else t
            out[t].append({"drop": monitored_run(dyn, case, model, "drop", th),
                           "contact": monitored_run(dyn, case, model, "contact", th),
                           "thresholds": np.broadcast_to(th, (dyn.n,)).copy()})
        line = ", ".join(f"{_label(t)}: contact {_ms(out[t][-1]['contact']['delay'])}, "
                         f"false {out[t][-1]['drop']['false'] + out[t][-1]['contact']['false']}" for t in floors)
        print(f"{robot} {i + 1}/{runs} ({time.perf_counter() - t0:.0f} s): {line}", flush=True)
    return out


def _ms(x) -> str:
    return "-" if x is None else f"{1e3 * x:.0f} ms"


def _floor_text(t, rs: list[dict]) -> str:
    if t != CALIBRATED:
        return f"{t:g}"
    th = np.array([r["thresholds"] for r in rs])
    return f"calibrated: {np.median(th):.1f} ({th.min():.1f}-{th.max():.1f})"


def _margin(rs: list[dict]) -> str:
    m = [max(r["drop"]["margin"], r["contact"]["margin"]) for r in rs]
    return f"{np.median(m):.2f} / {max(m):.2f}"


def report(results: dict[str, dict], command: str) -> str:
    rows = []
    for robot, by_floor in results.items():
        for t, rs in by_floor.items():
            contacts, drops = [r["contact"] for r in rs], [r["drop"] for r in rs]
            detected = [c for c in contacts if c["delay"] is not None]
            rows.append((robot, _floor_text(t, rs), len(rs),
                         f"{sum(c['delay'] <= 0.03 for c in detected)}/{len(rs)}",
                         f"{sum(c['verdict'] == 'collision' for c in detected)}/{len(detected)}",
                         f"{sum(d['verdict'] == 'payload lost' and d.get('decided', 1.0) <= 0.1 for d in drops)}"
                         f"/{len(rs)}",
                         f"{sum(r['drop']['false'] + r['contact']['false'] > 0 for r in rs)}/{len(rs)}",
                         _margin(rs)))
    table = format_table(("robot", "thresholds T, N m (calibrated: median, range over joints and arms)", "moves",
                          "40 N contacts detected within 30 ms",
                          "classified collision (of detected)", "drops classified lost within 100 ms",
                          "runs with a false alarm", "largest abs(r) / threshold before the event: median / max"),
                         rows, "llr", pad=False)
    return "\n".join([
        "# The collision monitor's threshold floor during the online estimate (issue 32)", "",
        f"{datetime.date.today()}, {machine()}. `{command}` (module docstring: set-up).", "",
        "The same moves, payloads, contacts and drops as docs/bench/online.md (bench_online.py's seeds); only the "
        "monitor's thresholds change. Target (issue 32): 40 N contacts detected within 30 ms in ≥ 95 %, no false "
        "alarm.", "", table, ""])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--robots", nargs="+", default=["iiwa14", "lwr4"])
    ap.add_argument("--runs", type=int, default=100)
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1], help="bench_online's --seed, one per robot")
    ap.add_argument("--thresholds", nargs="+", default=["6", "5", "4", CALIBRATED],
                    help=f"floors in N m, or '{CALIBRATED}' (module docstring)")
    ap.add_argument("--write", action="store_true", help="write docs/bench/thresholds.md")
    ap.add_argument("--save", type=Path, help="pickle the results (one robot per process, then --report)")
    ap.add_argument("--report", type=Path, nargs="+", help="report the results of these --save files instead")
    ap.add_argument("--command", default="", help="the command(s) that made the --report files, for the doc")
    ap.add_argument("--note", default="", help="a paragraph appended to the doc (reading, before/after)")
    a = ap.parse_args()
    if a.report:
        results = {}
        for f in a.report:
            if not f.is_file():
                ap.error(f"--report: {f} does not exist (write it with --save)")
            for robot, rows in pickle.loads(f.read_bytes()).items():
                results[f"{robot}, {f.stem}" if robot in results else robot] = rows  # a second run: by its file
        text = report(results, a.command or "merged: " + " ".join(map(str, a.report))) + (
            f"\n{a.note}\n" if a.note else "")
        print(text)
        if a.write:
            print(write_section("thresholds", text))
        return
    try:
        floors = [t if t == CALIBRATED else float(t) for t in a.thresholds]
    except ValueError:
        ap.error(f"--thresholds takes numbers (N m) or '{CALIBRATED}', got {a.thresholds}")
    if len(a.seeds) != len(a.robots):
        ap.error(f"--seeds needs one seed per robot ({len(a.robots)}), got {len(a.seeds)}")
    results = {robot: bench_robot(robot, a.runs, seed, floors) for robot, seed in zip(a.robots, a.seeds)}
    if a.save:
        a.save.write_bytes(pickle.dumps(results))
    text = report(results, ".venv/bin/python bench/bench_thresholds.py " + " ".join(sys.argv[1:]))
    print(text)
    if a.write:
        print(write_section("thresholds", text))


if __name__ == "__main__":
    main()
