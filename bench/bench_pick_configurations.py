"""Sampling from anywhere: random pick configurations (incl. stretched up and near the joint limits), 0-5 kg.

    .venv/bin/python bench/bench_pick_configurations.py [--robots lwr4 iiwa14] [--runs 20] [--seed 0]

Each run is the three nodes' logic on the MuJoCo arm without ROS (``sampling.bare_run``): grasp at rest,
then one ``~/sample`` request with the shipped defaults and ``method: differential`` (an unloaded
capture before the grasp); 3 % link model error, 0.1 N m torque noise. Per run: the outcome, collisions
the monitor raised while sampling (must be 0), the peak |residual| relative to the monitor's sampling
thresholds, the robot time of the call, and the estimate's errors. Writes docs/bench/pick_configurations.md.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np
from benchlib import machine, payload, pick_configurations, write_section

from payload_estimation.model import load_robot
from payload_estimation.payload import EstimatorConfig
from payload_estimation.reporting import format_table
from payload_estimation.sampling.bare_run import BareRunConfig, bare_run


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--robots", nargs="+", default=["lwr4", "iiwa14"])
    ap.add_argument("--runs", type=int, default=20, help="pick configurations per robot")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--no-write", action="store_true")
    args = ap.parse_args()
    rows, t0 = [], time.monotonic()
    for robot in args.robots:
        desc = load_robot(robot)
        rng = np.random.default_rng(args.seed)
        masses = np.linspace(0.0, 5.0, args.runs)
        rng.shuffle(masses)
        for k, (kind, q) in enumerate(pick_configurations(desc, args.runs, rng)):
            body = payload(rng, float(masses[k])) if masses[k] > 0 else None
            cfg = BareRunConfig(estimator=EstimatorConfig().with_fit(method="differential"), seed=args.seed + k)
            r = bare_run(desc, q, body, cfg)
            m = 0.0 if body is None else body.mass
            est = r.estimate
            row = {"robot": robot, "kind": kind, "mass": m, "code": r.finished.code, "collisions": r.collisions,
                   "peak": r.peak_ratio, "duration": r.duration,
                   "dm": None if est is None else est.mass - m,
                   "dc": None if est is None or body is None else 1e3 * float(np.linalg.norm(est.com - body.com)),
                   "near": float(np.degrees(np.min(np.minimum(q - desc.limits.position[:, 0],
                                                              desc.limits.position[:, 1] - q))))}
            rows.append(row)
            print(f"[bench_pick] {robot} {k + 1}/{args.runs} {kind:12s} {m:4.2f} kg: {row['code']}, "
                  f"collisions {row['collisions']}, peak {row['peak']:.2f}, {row['duration']:.2f} s, "
                  f"dm {row['dm'] if row['dm'] is None else round(1e3 * row['dm'], 1)} g, "
                  f"dCoM {row['dc'] if row['dc'] is None else round(row['dc'], 1)} mm", file=sys.stderr, flush=True)
    text = report(rows, args, time.monotonic() - t0)
    print(text)
    if not args.no_write:
        print(f"wrote {write_section('pick_configurations', text)}", file=sys.stderr)
    return 0 if all(r["collisions"] == 0 and r["code"] == "done" for r in rows) else 1


def report(rows, args, wall: float) -> str:
    fmt = lambda v, f: "—" if v is None else format(v, f)  # noqa: E731
    lines = [
        "## Sampling from any pick configuration (issue 14)", "",
        f"`bench/bench_pick_configurations.py --robots {' '.join(args.robots)} --runs {args.runs} --seed {args.seed}`"
        f" — {machine()}, {wall:.0f} s wall.", "",
        "The three nodes' logic on the MuJoCo arm without ROS (`sampling.bare_run`): grasp at rest, then one "
        "`~/sample` with the shipped defaults and `method: differential`; 3 % link model error, 0.1 N m noise. "
        "Payloads 0-5 kg with a random CoM (within 0.12 m of the flange) and box inertia. *peak* = the largest "
        "|r_j| / threshold_j while sampling (the monitor raises a collision at 1); *edge* = the smallest distance "
        "of a joint from its limit at the pick configuration.", "",
    ]
    for robot in args.robots:
        rs = [r for r in rows if r["robot"] == robot]
        ok = [r for r in rs if r["code"] == "done"]
        loaded = [r for r in ok if r["mass"] > 0]
        dms = [abs(r["dm"]) for r in ok]
        dcs = [r["dc"] for r in loaded if r["mass"] >= 1.0]
        lines += [f"**{robot}**: {len(ok)}/{len(rs)} runs done, {sum(r['collisions'] for r in rs)} collisions "
                  f"raised while sampling, peak ratio max {max(r['peak'] for r in rs):.2f}; mass error max "
                  f"{1e3 * max(dms):.0f} g (median {1e3 * float(np.median(dms)):.0f} g), CoM error max "
                  f"{max(dcs):.1f} mm for payloads >= 1 kg; sample call {np.median([r['duration'] for r in ok]):.2f} s "
                  f"median ({max(r['duration'] for r in ok):.2f} s max) robot time.", ""]
        cells = []
        for r in rs:
            dm = None if r["dm"] is None else 1e3 * r["dm"]
            cells.append([str(r["kind"]), f"{r['near']:.1f}", f"{r['mass']:.2f}", str(r["code"]), str(r["collisions"]),
                          f"{r['peak']:.2f}", f"{r['duration']:.2f}", fmt(dm, "+.1f"), fmt(r["dc"], ".1f")])
        lines += format_table(["pick configuration", "edge (deg)", "payload (kg)", "outcome", "collisions", "peak",
                               "call (s)", "mass error (g)", "CoM error (mm)"], cells, "lrrlrrrrr",
                              pad=False).splitlines()
        lines.append("")
    return "\n".join(lines)


if __name__ == "__main__":
    raise SystemExit(main())
