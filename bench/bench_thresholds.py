"""What the collision monitor's threshold floor buys during the online estimate: 40 N contacts and drops (issue 32).

The cases, the arm, the calibrated online estimator and the monitor of bench_online.py (its module docstring:
random pick -> place moves, 0.5-5 kg boxes, 3 % model error, ±0.5 N m offsets, 0.1 N m noise, the monitor carrying
the online estimate with thresholds widened by 3σ of its gravity torque), the same seeds and so the same moves; only
the monitor's thresholds T (its ``thresholds`` parameter, 6 N m by default) change. Per floor: 40 N contacts
detected within 30 ms, contacts classified as collisions, drops classified as a loss within 100 ms, runs with a
false alarm (a detection before the drop or the contact).

Usage: .venv/bin/python bench/bench_thresholds.py [--robots iiwa14 lwr4] [--runs 100] [--seeds 0 1]
[--thresholds 6 5 4] [--write]   (--seeds: one per robot, bench_online's --seed for each; --write ->
docs/bench/thresholds.md)
"""

from __future__ import annotations

import argparse
import datetime
import sys
import time

import numpy as np
from bench_online import calibrate, make_case, monitored_run
from benchlib import machine, write_section

from payload_estimation.model import load_robot
from payload_estimation.model.dynamics import RigidBodyDynamics
from payload_estimation.reporting import format_table


def bench_robot(robot: str, runs: int, seed: int, floors: list[float]) -> dict[float, list[dict]]:
    dyn = RigidBodyDynamics(load_robot(robot))
    rng = np.random.default_rng(seed)
    out: dict[float, list[dict]] = {t: [] for t in floors}
    for i in range(runs):
        case = make_case(dyn, rng, i)
        t0 = time.perf_counter()
        model = calibrate(dyn, case)
        for t in floors:
            out[t].append({"drop": monitored_run(dyn, case, model, "drop", t),
                           "contact": monitored_run(dyn, case, model, "contact", t)})
        line = ", ".join(f"{t:g} N m: contact {_ms(out[t][-1]['contact']['delay'])}, "
                         f"false {out[t][-1]['drop']['false'] + out[t][-1]['contact']['false']}" for t in floors)
        print(f"{robot} {i + 1}/{runs} ({time.perf_counter() - t0:.0f} s): {line}", flush=True)
    return out


def _ms(x) -> str:
    return "-" if x is None else f"{1e3 * x:.0f} ms"


def report(results: dict[str, dict[float, list[dict]]], command: str) -> str:
    rows = []
    for robot, by_floor in results.items():
        for t, rs in by_floor.items():
            contacts, drops = [r["contact"] for r in rs], [r["drop"] for r in rs]
            detected = [c for c in contacts if c["delay"] is not None]
            rows.append((robot, f"{t:g}", len(rs),
                         f"{sum(c['delay'] <= 0.03 for c in detected)}/{len(rs)}",
                         f"{sum(c['verdict'] == 'collision' for c in detected)}/{len(detected)}",
                         f"{sum(d['verdict'] == 'payload lost' and d.get('decided', 1.0) <= 0.1 for d in drops)}"
                         f"/{len(rs)}",
                         f"{sum(r['drop']['false'] + r['contact']['false'] > 0 for r in rs)}/{len(rs)}"))
    table = format_table(("robot", "thresholds T, N m", "moves", "40 N contacts detected within 30 ms",
                          "classified collision (of detected)", "drops classified lost within 100 ms",
                          "runs with a false alarm"), rows, "llr", pad=False)
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
    ap.add_argument("--thresholds", type=float, nargs="+", default=[6.0, 5.0, 4.0])
    ap.add_argument("--write", action="store_true", help="write docs/bench/thresholds.md")
    a = ap.parse_args()
    if len(a.seeds) != len(a.robots):
        ap.error(f"--seeds needs one seed per robot ({len(a.robots)}), got {len(a.seeds)}")
    results = {robot: bench_robot(robot, a.runs, seed, a.thresholds) for robot, seed in zip(a.robots, a.seeds)}
    text = report(results, ".venv/bin/python bench/bench_thresholds.py " + " ".join(sys.argv[1:]))
    print(text)
    if a.write:
        print(write_section("thresholds", text))


if __name__ == "__main__":
    main()
