"""The online estimate's error against its reported σ on a user's positions-only move, before and after issue 46.

Per run (bench/bench_online.py's arm and estimators: 3 % model error, sensor offsets within ±0.5 N m, 0.1 N m noise,
1 kHz; the nominal estimator and the one on a calibration sweep's gravity model, both anchored at rest before the
grasp): a random pick configuration, a 0.5-5 kg box, the grasp, then one 2.5 s move of 25-55 deg per joint (the
pick-and-place of issue 46) written as ``--style`` (:mod:`payload_estimation.sim.styles`; ``smooth``: the
simulator's single rest-to-rest quintic) and executed with ``--interp`` (``jtc``: as sim_node now does,
joint_trajectory_controller's interpolation; ``quintic``: as sim_node did before, a quintic through every point
with zero velocity where none is given, the arm stopping at each). The estimate 1.0 s into the move and at its end:
mass error (%), CoM error (mm), reported σ, max |error| / σ over mass and CoM, and the fit's χ²/ν and σ widening.

``--old-velocity`` feeds the estimator MuJoCo's velocity, half a step behind the positions and the torque: the
simulator's recording before issue 46, reproduced (to the Coriolis torque of that half step, ~0.01 N m; the
figures equal those of the old checkout). ``--no-check`` turns the misfit check off (misfit_chi2 inf, the estimator
before issue 46). ``--root DIR`` runs another checkout (its bench/bench_online.py and package; the check's figures
need this one's).

Usage: .venv/bin/python bench/bench_online_misfit.py [--robot iiwa14] [--runs 6] [--style positions] [--interp jtc]
       [--old-velocity] [--no-check] [--root DIR]
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys
from dataclasses import replace
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402

HERE = Path(__file__).resolve().parents[1]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", default=str(HERE))
    ap.add_argument("--robot", default="iiwa14")
    ap.add_argument("--runs", type=int, default=6)
    ap.add_argument("--style", default="positions")
    ap.add_argument("--interp", default="jtc", choices=("jtc", "quintic"))
    ap.add_argument("--old-velocity", action="store_true")
    ap.add_argument("--no-check", action="store_true")
    args = ap.parse_args()
    sys.path[:0] = [args.root, str(Path(args.root) / "bench")]
    import bench_online as bo

    from payload_estimation.model.dynamics import RigidBodyDynamics
    from payload_estimation.model.robot_file import load_robot
    from payload_estimation.payload.online import OnlinePayloadEstimator

    spec = importlib.util.spec_from_file_location("payload_estimation.sim._styles_bench",
                                                  HERE / "payload_estimation/sim/styles.py")
    styles = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(styles)
    dyn = RigidBodyDynamics(load_robot(args.robot))
    lim = dyn.desc.limits.position
    rng = np.random.default_rng(46)
    z_all = {}
    for i in range(args.runs):
        case = bo.make_case(dyn, rng, i)  # its payload and offsets; the move is issue 46's
        for _ in range(200):
            q0 = rng.uniform(lim[:, 0] + 0.3, lim[:, 1] - 0.3)
            target = q0 + rng.choice([-1, 1], dyn.n) * np.radians(rng.uniform(25, 55, dyn.n))
            if np.all(target > lim[:, 0] + 0.1) and np.all(target < lim[:, 1] - 0.1):
                break
        case = replace(case, q0=q0, target=target, duration=2.5)
        model = bo.calibrate(dyn, case)
        arm = bo.make_arm(dyn, case)
        ests = bo.estimators(dyn, model)
        ests.pop("prior")
        if args.no_check:
            cfg = replace(ests["nominal"].cfg, misfit_chi2=float("inf"))
            ests = {"nominal": OnlinePayloadEstimator(dyn, cfg), "calibrated": OnlinePayloadEstimator(dyn, cfg, model)}
        truth = np.array([case.body.mass, *case.body.com])
        k_grasp, k_move = round(bo.T_GRASP * 1000), round(bo.T_MOVE * 1000)
        k_early, k_end = k_move + round(bo.AFTER * 1000), k_move + round(case.duration * 1000)
        for k in range(k_end + 1):
            if k == k_grasp:
                arm.attach_payload(case.body)
                for e in ests.values():
                    e.grasped()
            if k == k_move:
                if args.style == "smooth":
                    arm.set_trajectory([(case.duration, case.target, None)])
                else:
                    pts = styles.user_trajectory(args.style, arm.state().q, case.target, case.duration,
                                                 velocity_limits=dyn.desc.limits.velocity)
                    if args.interp == "jtc":
                        arm.set_trajectory(pts, "jtc")
                    else:
                        arm.set_trajectory([p[:3] for p in pts if p[0] > 0])
            arm.step(1)
            s = arm.state()
            dq = s.dq - 0.5 * arm.dt * arm.acceleration if args.old_velocity else s.dq
            for e in ests.values():
                e.update(s.t, s.q, dq, s.tau)
            if k in (k_early, k_end):
                when = "1.0 s" if k == k_early else "end"
                for name, e in ests.items():
                    st = e.solve()
                    est = st.estimate
                    err = np.array([est.mass, *est.com]) - truth
                    std = np.array([est.std[key] for key in bo.KEYS])
                    z = float(np.max(np.abs(err) / std))
                    z_all.setdefault((name, when), []).append(z)
                    fit = (f"χ²/ν {st.misfit_ratio:.3g}, σ x{st.widening:.2f}" if hasattr(st, "misfit_ratio")
                           else f"residual {est.residual_rms:.3f} N m")
                    print(f"{args.robot} run {i} {name:10s} {when:5s}: mass {100 * err[0] / case.body.mass:+.2f} %, "
                          f"CoM error {np.round(1e3 * err[1:], 1)} mm, σ {np.round(1e3 * std[1:], 1)} mm, "
                          f"max |err|/σ {z:.1f}; {fit}", flush=True)
    for (name, when), zs in z_all.items():
        zs = np.array(zs)
        print(f"{args.robot} {args.style} ({args.interp}{', old velocity' if args.old_velocity else ''}"
              f"{', no check' if args.no_check else ''}) {name} at {when}: {np.sum(zs <= 3)}/{zs.size} within 3σ, "
              f"max |err|/σ median {np.median(zs):.1f}, max {zs.max():.1f}")


if __name__ == "__main__":
    main()
