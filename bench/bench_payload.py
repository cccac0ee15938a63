"""Benchmark of static payload estimation (mass and CoM from ±7° poses), paper 000 Sec. VI-A.

Usage (repository root): .venv/bin/python bench/bench_payload.py [--runs 200]
Prints a markdown section and writes docs/bench/payload.md.

For lwr4 and iiwa14 at the pick configuration q0 = (0, 30, 0, -60, 0, 60, 0) deg, poses from
payload_estimation.sampling.plan_poses (±7° per joint, D-optimal), torques = pinocchio gravity of the
loaded robot + i.i.d. Gaussian noise sigma, one-shot estimate with the exact unloaded model:
Monte-Carlo errors versus sigma and the number of poses, compared with the Cramér–Rao bound
sigma^2 (Y^T Y)^-1 of the same design and with paper 000's experimental figures. Also the shipped
MuJoCo example (5 % model error, sensor offsets) and the compute time of one 10-sample estimate.
"""

from __future__ import annotations

import argparse
import datetime
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchlib import machine, write_section  # noqa: E402

from payload_estimation.files import load_csv  # noqa: E402
from payload_estimation.model import BodyInertia, RigidBodyDynamics, load_robot  # noqa: E402
from payload_estimation.payload.gravity import cramer_rao_std, estimate_payload_gravity, payload_gravity_rows  # noqa: E402
from payload_estimation.reporting import format_table  # noqa: E402
from payload_estimation.sampling import PosePlanConfig, plan_poses  # noqa: E402

PICK = np.deg2rad([0.0, 30.0, 0.0, -60.0, 0.0, 60.0, 0.0])
HEAVY = BodyInertia(3.028, np.array([0.0, 0.0, 0.119]), np.diag([0.02, 0.02, 0.005]))  # paper eq. (39)
LIGHT = BodyInertia(0.144, np.array([0.0, 0.0, 0.1146]), np.diag([1e-4, 1e-4, 5e-5]))  # paper Tab. I



def crb_com(dyn, q, sigma, body) -> np.ndarray:
    """Cramér–Rao std of (m, cx, cy, cz) by the delta method on sigma^2 (Y^T Y)^-1 at the truth."""
    y = payload_gravity_rows(dyn, q)
    cov = sigma**2 * np.linalg.inv(y.T @ y)
    m, c = body.mass, np.asarray(body.com)
    jac = np.zeros((4, 4))
    jac[0, 0] = 1.0
    jac[1:, 0] = -c / m
    jac[1:, 1:] = np.eye(3) / m
    return np.sqrt(np.diag(jac @ cov @ jac.T))


def monte_carlo(dyn, q, body, sigma, runs, rng) -> dict:
    loaded = dyn.with_payload(body)
    g = np.array([loaded.gravity(qk) for qk in q])
    errs, stds = [], []
    for _ in range(runs):
        e = estimate_payload_gravity(dyn, q, g + rng.normal(0, sigma, g.shape), check=False)
        errs.append(np.concatenate([[e.mass - body.mass], e.com - body.com]))
        stds.append(e.std["mass"])
    errs = np.array(errs)
    com_norm = np.linalg.norm(errs[:, 1:], axis=1)
    crb = crb_com(dyn, q, sigma, body)
    return {
        "mass_bias": float(errs[:, 0].mean()),
        "mass_std": float(errs[:, 0].std(ddof=1)),
        "mass_reported": float(np.mean(stds)),
        "mass_crb": float(cramer_rao_std(dyn, q, sigma)[0]),
        "com_rms_cm": float(100 * np.sqrt(np.mean(com_norm**2))),
        "com_p95_cm": float(100 * np.percentile(np.abs(errs[:, 1:]).max(axis=1), 95)),
        "com_crb_cm": float(100 * np.sqrt(np.sum(crb[1:] ** 2))),
    }


def timing(dyn, q, body, repeats=200) -> float:
    loaded = dyn.with_payload(body)
    tau = np.array([loaded.gravity(qk) for qk in q]) + 0.1
    out = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        estimate_payload_gravity(dyn, q, tau, check=False)
        out.append(time.perf_counter() - t0)
    return statistics.median(out)


def example_table() -> list[str]:
    ex = ROOT / "examples"
    truth = json.loads((ex / "lwr4_truth.json").read_text())
    desc = load_robot("lwr4")
    dyn = RigidBodyDynamics(desc)
    lo, un = load_csv(ex / "lwr4_loaded_samples.csv", desc), load_csv(ex / "lwr4_unloaded_samples.csv", desc)
    rows = []
    for label, est in (("one-shot (nominal model)", estimate_payload_gravity(dyn, lo.q, lo.tau)),
                       ("differential", estimate_payload_gravity(dyn, lo.q, lo.tau, un.tau))):
        cerr = 100 * np.abs(est.com - np.asarray(truth["com"]))
        rows.append([label, f"{est.mass:.3f} ± {est.std['mass']:.3f}", f"{truth['mass']:.3f}",
                     " / ".join(f"{v:.2f}" for v in cerr), f"{est.residual_rms:.3f}"])
    return format_table(["method", "mass (kg)", "truth (kg)", "CoM error x / y / z (cm)", "residual RMS (N m)"], rows,
                        "lrrrr", pad=False).splitlines()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=200, help="Monte-Carlo runs per cell")
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    lines = [
        "## Payload estimation (static, mass and CoM)",
        "",
        f"- machine: {machine()}",
        f"- date: {datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC",
        f"- command: `.venv/bin/python bench/bench_payload.py --runs {args.runs}`",
        "- poses: `plan_poses` ±7° around q0 = (0, 30, 0, −60, 0, 60, 0)°, pick pose included; torques = "
        "pinocchio gravity of the loaded robot + i.i.d. N(0, σ²) on every joint; one-shot with the exact "
        f"unloaded model; {args.runs} Monte-Carlo runs per row",
        "- CRB = Cramér–Rao bound σ²(YᵀY)⁻¹ of the same design (CoM: delta method at the truth); "
        "'reported' = mean std the estimator reports from its own residual",
        "",
    ]
    times = {}
    for robot in ("lwr4", "iiwa14"):
        dyn = RigidBodyDynamics(load_robot(robot))
        # the planner's tour timing before issue 49 (0.5 / 0.4 s; now the node's): the same pose order and figures
        plans = {n: plan_poses(dyn, PICK, PosePlanConfig(n_poses=n, velocity_scale=0.5, min_duration=0.4)).poses
                 for n in (5, 10, 20)}
        for label, body, grid in (
            ("3.028 kg, CoM (0, 0, 0.119) m [paper eq. 39]", HEAVY,
             [(n, s) for n in (5, 10, 20) for s in (0.1, 0.3, 1.0)]),
            ("0.144 kg, CoM (0, 0, 0.1146) m [paper Tab. I]", LIGHT, [(10, s) for s in (0.05, 0.1, 0.3)]),
        ):
            lines += [f"**{robot}, payload {label}**", ""]
            cells = []
            for n, s in grid:
                r = monte_carlo(dyn, plans[n], body, s, args.runs, rng)
                cells.append([str(n), str(s), f"{r['mass_bias']:+.4f}", f"{r['mass_std']:.4f}",
                              f"{r['mass_reported']:.4f}", f"{r['mass_crb']:.4f}", f"{r['com_rms_cm']:.2f}",
                              f"{r['com_p95_cm']:.2f}", f"{r['com_crb_cm']:.2f}"])
            lines += format_table(["poses", "σ (N m)", "mass bias (kg)", "mass std (kg)", "reported", "CRB",
                                   "CoM RMS error (cm)", "CoM 95 % max-axis (cm)", "CoM CRB (cm)"], cells, "r" * 9,
                                  pad=False).splitlines()
            lines.append("")
        times[robot] = timing(dyn, plans[10], HEAVY)
    lines += [
        "Paper 000 (real LWR 4+, 10 static ±7° samples, Sec. VI-A, eq. 47): 3.059 kg for 3.028 kg (+0.031 kg), "
        "CoM (−0.28, 1.1, 0.93) cm off the nominal (0, 0, 11.9) cm; light payload (Tab. I, 500 poses): 0.143 kg "
        "for 0.144 kg, CoM off by (0.3, 0.2, 0.22) cm. In the tables, a 10-pose error of the paper's size "
        "(≈ 0.03 kg, ≈ 1 cm on the worst axis) corresponds to σ ≈ 0.3–0.5 N m of white torque noise; the "
        "paper also lists static friction, sensor offsets and the approximate nominal truth as error sources, "
        "and the MuJoCo example below shows that a 5 % link-model error alone moves a one-shot estimate by "
        "0.16 kg while the differential estimate stays within its std. The light payload's CoM needs many "
        "more poses (the paper used 500) or much less noise: with 10 poses its CoM std is several cm.",
        "",
        "**Shipped MuJoCo example** (`examples/`, 10 poses, true links 5 % off the model, sensor offsets "
        "up to 0.5 N m, 0.5 N m noise through a 10 Hz low-pass):",
        "",
        *example_table(),
        "",
        "**Compute time of one 10-sample estimate** (regressor + LS + delta method, median of 200): "
        + ", ".join(f"{k} {1e3 * v:.2f} ms" for k, v in times.items()),
        "",
    ]
    text = "\n".join(lines)
    print(text)
    write_section("payload", text)


if __name__ == "__main__":
    main()
