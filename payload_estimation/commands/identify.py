"""`payload-estimation identify`: identify the unloaded robot from a recording (paper 003, paper 001).

Periodic excitation (``--trajectory TRAJ.trajectory.json`` from `excite`, or ``--period``/``--harmonics``):
period averaging, frequency-domain differentiation, Butterworth-filtered torque. Otherwise filtered
numerical differentiation. ``--gravity-only``: static samples -> gravity coefficients.
``--physical``: also retrieve physically consistent link parameters (eqs. 15-18) and write
OUT_robot.yaml (package robot schema) and OUT_robot.urdf.
"""

from __future__ import annotations

import argparse
import os

HELP = "identify the robot's dynamic coefficients (and physically consistent link parameters) from a recording"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--robot", required=True, help="lwr4, iiwa14, or a robot YAML / URDF path")
    parser.add_argument("--data", required=True, help="recording: CSV file (t, q1.., tau1.., ...) or rosbag2 directory")
    parser.add_argument("--topic", default="joint_states", help="JointState topic in a rosbag (default joint_states)")
    parser.add_argument("--trajectory", help="trajectory file written by `excite` (periodic processing, alignment)")
    parser.add_argument("--period", type=float, help="excitation period in s (without --trajectory)")
    parser.add_argument("--harmonics", type=int, help="excited harmonics L (with --period)")
    parser.add_argument("--start", type=float, default=None,
                        help="time (s, recording clock) where the first period starts (default: found by matching "
                             "the trajectory, or the first sample)")
    parser.add_argument("--skip-periods", type=int, default=0, help="periods to discard at the start (transients)")
    parser.add_argument("--torque-cutoff", type=float, default=6.0, help="torque low-pass cut-off Hz (default 6)")
    parser.add_argument("--friction", action="store_true",
                        help="identify viscous + Coulomb friction (only if the torque signal contains friction)")
    parser.add_argument("--essential", action="store_true", help="keep only the essential coefficients")
    parser.add_argument("--min-abs", type=float, default=0.01, help="essential: |coefficient| threshold")
    parser.add_argument("--max-rsd", type=float, default=40.0, help="essential: RSD threshold in %%")
    parser.add_argument("--gravity-only", action="store_true", help="gravity coefficients from static samples")
    parser.add_argument("--max-speed", type=float, default=0.01,
                        help="gravity-only: samples faster than this (rad/s) are not static and are dropped")
    parser.add_argument("--physical", action="store_true", help="also retrieve physically consistent parameters")
    parser.add_argument("--starts", type=int, default=5, help="physical: number of multi-start runs (default 5)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", required=True, help="PARAMS.yaml output path")


def load_samples(path: str, desc, topic: str = "joint_states"):
    """Samples from a CSV file or a rosbag2 directory, in the robot's joint order."""
    from pathlib import Path

    from ..identification.data import load_csv, load_rosbag

    p = Path(path)
    if p.is_dir():
        return load_rosbag(p, topic, desc)
    return load_csv(p, desc)


def run(args: argparse.Namespace) -> int:
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    from pathlib import Path

    import numpy as np

    from ..identification.data import select_static
    from ..identification.excitation import read_trajectory_file
    from ..identification.robot_identification import (
        IdentificationOptions,
        identify_gravity,
        identify_robot,
        sample_rate,
    )
    from ..model.robot_file import load_robot

    desc = load_robot(args.robot)
    samples = load_samples(args.data, desc, args.topic)
    out = Path(args.out)
    if args.gravity_only:
        if args.friction or args.physical:
            raise ValueError("--gravity-only cannot be combined with --friction or --physical")
        if samples.dq is not None or samples.t is not None:
            samples = select_static(samples, args.max_speed)
        model = identify_gravity(desc, samples, essential=args.essential, min_abs=args.min_abs,
                                 max_rsd=args.max_rsd)
    else:
        period = harmonics = q_des = None
        if args.trajectory:
            names, _, four = read_trajectory_file(args.trajectory)
            if four is None:
                raise ValueError(f"{args.trajectory}: no 'excitation' record; pass --period and --harmonics")
            if tuple(names) != tuple(desc.joint_names):
                raise ValueError(f"{args.trajectory}: joints {list(names)} differ from robot '{desc.name}' "
                                 f"{list(desc.joint_names)}")
            period, harmonics = four.period, four.harmonics
            fs = sample_rate(samples)
            q_des = four.evaluate(np.arange(int(round(period * fs))) / fs)[0]
        elif args.period is not None:
            if args.harmonics is None:
                raise ValueError("--period needs --harmonics (the excitation's L)")
            period, harmonics = args.period, args.harmonics
        start_index = None
        if args.start is not None:
            if samples.t is None:
                raise ValueError("--start needs time stamps in the recording")
            start_index = int(np.searchsorted(samples.t, args.start))
        elif period is not None and q_des is None:
            start_index = 0
        opts = IdentificationOptions(friction=args.friction, essential=args.essential, min_abs=args.min_abs,
                                     max_rsd=args.max_rsd, torque_cutoff=args.torque_cutoff,
                                     skip_periods=args.skip_periods)
        model = identify_robot(desc, samples, opts, period=period, harmonics=harmonics, q_desired_period=q_des,
                               start_index=start_index)
    model.info["data"] = str(args.data)
    print(f"robot {desc.name}: {model.kind} model, {len(model.kept)} of {len(model.all_names)} coefficients, "
          f"{model.n_rows} equations, cond {model.condition_number:.1f}, residual RMS {model.residual_rms:.4f} N m")
    print("| coefficient | value | std | RSD % |\n|---|---:|---:|---:|")
    for name, v, s, r in zip(model.names, model.values, model.std, model.rsd):
        print(f"| {name} | {v:.6g} | {s:.3g} | {r:.2f} |")
    resid = np.asarray(model.per_joint_rms)
    print("per-joint fit residual RMS (N m): " + ", ".join(f"{n} {v:.4f}" for n, v in zip(desc.joint_names, resid)))
    if args.physical:
        from ..identification.physical import CoefficientTarget, PhysicalRetrieval, write_identified_robot

        n_fric = len(model.all_names) - model.rank
        k_full = np.vstack([model.K, np.zeros((n_fric, model.K.shape[1]))])[model.kept]
        f_full = None
        if n_fric:
            f_full = np.vstack([np.zeros((model.rank, n_fric)), np.eye(n_fric)])[model.kept]
        target = CoefficientTarget(model.values, model.covariance, k_full, f_full, model.rss, model.sigma2,
                                   model.names)
        res = PhysicalRetrieval(desc, target).solve(starts=args.starts, seed=args.seed)
        if res.problems:
            raise ValueError("physical retrieval violates constraints: " + "; ".join(res.problems))
        robot_yaml = out.with_name(out.stem + "_robot.yaml")
        written = write_identified_robot(args.robot, desc, res.bodies, robot_yaml,
                                         note=f"Objective f(mu) = {res.objective_nm:.4g} N m.")
        model.info["physical"] = {"objective_nm": res.objective_nm, "chi2": res.chi2, "seconds": res.seconds,
                                  "robot_files": [str(w) for w in written]}
        if res.friction is not None:
            model.info["physical"]["friction"] = [float(v) for v in res.friction]
        print(f"physical parameters: f(mu) = {res.objective_nm:.4f} N m (LS optimum {np.sqrt(model.rss):.4f}), "
              f"chi2 {res.chi2:.3g}, {res.seconds:.1f} s; wrote {', '.join(str(w) for w in written)}")
    model.save(out)
    print(f"wrote {out}")
    return 0
