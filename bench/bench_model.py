"""Benchmark of the model layer: symbolic derivation (cold and cached), Y_g(q) and g/M/C evaluation.

Usage (repository root): .venv/bin/python bench/bench_model.py [--quick]
Prints a markdown section and writes docs/bench/model.md.

Measures (medians):
- pi_g derivation of lwr4 / iiwa14: cold (empty cache directory, sympy potential energy + base
  selection) and cached (JSON cache read + expressions rebuilt), each in a fresh temporary cache dir;
- one evaluation of Y_gb(q) (n x 12): lambdified symbolic vs pinocchio (gravity regressor @ selection);
- pinocchio g(q), M(q), C(q, dq) per call;
- the numeric 7R base parameters (compute_base_parameters: joint-frame columns, 200 random states), full
  and gravity;
- the full (10 per link) coefficients: symbolic Lagrangian of a 3R test arm, numeric mapping of lwr4.
"""

from __future__ import annotations

import argparse
import datetime
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchlib import machine, write_section  # noqa: E402

from payload_estimation.model import RigidBodyDynamics, compute_base_parameters, derive, load_robot  # noqa: E402
from payload_estimation.reporting import format_table  # noqa: E402


def median_time(fn, repeats: int) -> float:
    """Median wall time (s) of ``fn()`` over ``repeats`` runs."""
    out = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t0)
    return statistics.median(out)


def per_call(fn, args_list, repeats: int) -> float:
    """Median over ``repeats`` of the mean time (s) per call of ``fn(*a)`` over ``args_list``."""
    def batch():
        for a in args_list:
            fn(*a)
    return median_time(batch, repeats) / len(args_list)


def derivation_times(robot: str, kind: str, repeats: int) -> tuple[float, float, float]:
    """Median cold derivation, cached load, and lambdify of the symbolic base regressor (if any), in s."""
    desc = load_robot(robot)
    cold, warm, lamb = [], [], []
    for _ in range(repeats):
        with tempfile.TemporaryDirectory() as tmp:
            os.environ["PAYLOAD_ESTIMATION_CACHE"] = tmp
            t0 = time.perf_counter()
            derive(desc, kind)
            cold.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            sc = derive(desc, kind)
            warm.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            if sc.base_regressor is not None:
                sc.base_regressor_function()
            lamb.append(time.perf_counter() - t0)
    return statistics.median(cold), statistics.median(warm), statistics.median(lamb)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="fewer repeats")
    args = ap.parse_args()
    rep_derive = 2 if args.quick else 3
    rep_eval = 3 if args.quick else 7
    rng = np.random.default_rng(0)
    rows = []
    for robot in ("lwr4", "iiwa14"):
        cold, warm, lamb = derivation_times(robot, "gravity", rep_derive)
        rows.append(("pi_g derivation, cold (sin/cos polynomial ring + base selection)", robot, f"{cold * 1e3:.0f} ms"))
        rows.append(("pi_g derivation, cached (pickle read)", robot, f"{warm * 1e3:.1f} ms"))
        rows.append(("lambdify of Y_gb(q) (first call of base_regressor_function)", robot, f"{lamb * 1e3:.0f} ms"))
    cold, _, lamb = derivation_times(str(ROOT / "test" / "data" / "spatial3r.yaml"), "full", rep_derive)
    rows.append(("full pi by the symbolic Lagrangian, cold (15 coefficients)", "spatial3r (test/data)",
                 f"{cold * 1e3:.0f} ms"))
    cold, warm, _ = derivation_times("lwr4", "full", rep_derive)
    rows.append(("full pi (70 -> 43) mapping, cold", "lwr4", f"{cold * 1e3:.0f} ms"))
    rows.append(("full pi mapping, cached", "lwr4", f"{warm * 1e3:.1f} ms"))

    with tempfile.TemporaryDirectory() as tmp:
        os.environ["PAYLOAD_ESTIMATION_CACHE"] = tmp
        for robot in ("lwr4", "iiwa14"):
            desc = load_robot(robot)
            dyn = RigidBodyDynamics(desc)
            sc = derive(desc, "gravity")
            yb = sc.base_regressor_function()
            sel = sc.selection_numeric()
            qs = [(rng.uniform(-2, 2, 7),) for _ in range(200)]
            qdq = [(rng.uniform(-2, 2, 7), rng.uniform(-1, 1, 7)) for _ in range(200)]
            rows.append(("Y_gb(q) per call, lambdified sympy", robot,
                         f"{per_call(yb, qs, rep_eval) * 1e6:.1f} µs"))
            rows.append(("Y_gb(q) per call, pinocchio regressor @ selection", robot,
                         f"{per_call(lambda q, d=dyn, s=sel: d.gravity_regressor(q) @ s, qs, rep_eval) * 1e6:.1f} µs"))
            rows.append(("g(q) per call, pinocchio", robot, f"{per_call(dyn.gravity, qs, rep_eval) * 1e6:.1f} µs"))
            rows.append(("M(q) per call, pinocchio (CRBA)", robot,
                         f"{per_call(dyn.mass_matrix, qs, rep_eval) * 1e6:.1f} µs"))
            rows.append(("C(q, dq) per call, pinocchio", robot,
                         f"{per_call(dyn.coriolis, qdq, rep_eval) * 1e6:.1f} µs"))
    for robot in ("lwr4", "iiwa14"):
        dyn = RigidBodyDynamics(load_robot(robot))
        for kind in ("full", "gravity"):
            t = median_time(lambda d=dyn, k=kind: compute_base_parameters(d, k), rep_derive)
            rank = compute_base_parameters(dyn, kind).rank
            rows.append((f"numeric base parameters ({kind}, 200 states) -> {rank}", robot, f"{t * 1e3:.0f} ms"))

    cmd = ".venv/bin/python bench/bench_model.py" + (" --quick" if args.quick else "")
    lines = [
        "## Model: symbolic coefficients and rigid-body dynamics",
        "",
        f"- machine: {machine()}",
        f"- date: {datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC",
        f"- command: `{cmd}`",
        f"- medians over {rep_derive} (derivations) / {rep_eval} (per-call batches of 200) repeats; the machine is "
        "shared, so expect run-to-run spread",
        "",
        *format_table(["what", "robot", "median"], [[str(x) for x in row] for row in rows], "llr",
                      pad=False).splitlines(),
    ]
    text = "\n".join(lines) + "\n"
    print(text)
    write_section("model", text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
