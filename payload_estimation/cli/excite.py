"""`payload-estimation excite`: design an optimal excitation trajectory (paper 003, eqs. 8-10).

Writes TRAJ.csv (t, q1.., dq1.., ddq1..) and, next to it, a JointTrajectory-shaped file
(TRAJ.trajectory.json by default) that the simulated arm / a joint_trajectory_controller can run and
that `identify --trajectory` reads to average whole periods.
"""

from __future__ import annotations

import argparse
import math
import os

from .command_line import CommandError, output_file
from .robot_option import add_robot_arguments, robot_from_args

HELP = "design a Fourier-series excitation trajectory with minimal cond(Y_b) for identification"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_robot_arguments(parser)
    parser.add_argument("--harmonics", type=int, default=5, help="number of harmonics L (default 5)")
    parser.add_argument("--f0", type=float, default=0.05, help="fundamental frequency in Hz (default 0.05: 20 s)")
    parser.add_argument("--duration", type=float, default=None,
                        help="total duration written to the files in s (rounded up to whole periods; default one "
                             "period per --periods)")
    parser.add_argument("--periods", type=int, default=1, help="periods written to the files (default 1)")
    parser.add_argument("--velocity-factor", type=float, default=0.6,
                        help="fraction of the velocity limits (default 0.6, reduced as in Xu et al., IEEE Access 2020)")
    parser.add_argument("--position-factor", type=float, default=0.9, help="fraction of the position range")
    parser.add_argument("--acceleration-limit", type=float, default=3.0, help="rad/s^2 (default 3)")
    parser.add_argument("--center-deg", type=float, nargs="+", default=None,
                        help="configuration q0 the trajectory starts/ends at and oscillates around (deg)")
    parser.add_argument("--max-deviation-deg", type=float, default=None,
                        help="workspace restriction: max |q - q0| per joint (deg)")
    parser.add_argument("--maxiter", type=int, default=60, help="differential-evolution generations (default 60)")
    parser.add_argument("--popsize", type=int, default=8, help="differential-evolution population factor")
    parser.add_argument("--no-friction", action="store_true", help="cond(Y_b) without friction columns")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--rate", type=float, default=100.0, help="CSV sample rate in Hz (default 100)")
    parser.add_argument("--points-rate", type=float, default=50.0, help="trajectory-file point rate in Hz")
    parser.add_argument("--trajectory-format", choices=("json", "yaml"), default="json")
    parser.add_argument("--out", required=True, help="output CSV path (TRAJ.csv)")


def run(args: argparse.Namespace) -> int:
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    output_file(args.out, "--out")  # before the design: a mistyped path must not cost it
    from pathlib import Path

    from ..files import write_trajectory_csv, write_trajectory_file
    from ..identification import ExcitationConfig, ExcitationDesigner, check_limits

    desc = robot_from_args(args)
    center = None
    if args.center_deg is not None:
        if len(args.center_deg) != desc.n:
            raise CommandError(f"--center-deg needs {desc.n} angles for robot '{desc.name}', "
                               f"got {len(args.center_deg)}")
        center = tuple(math.radians(v) for v in args.center_deg)
    max_dev = None if args.max_deviation_deg is None else math.radians(args.max_deviation_deg)
    cfg = ExcitationConfig(harmonics=args.harmonics, f0=args.f0, position_factor=args.position_factor,
                           velocity_factor=args.velocity_factor, acceleration_limit=args.acceleration_limit,
                           center=center, max_deviation=max_dev,
                           friction=not args.no_friction, maxiter=args.maxiter, popsize=args.popsize, seed=args.seed)
    periods = args.periods if args.duration is None else max(1, math.ceil(args.duration * args.f0 - 1e-9))
    res = ExcitationDesigner(desc, cfg).optimise()
    problems = check_limits(res.trajectory, desc)
    if problems:
        raise CommandError("designed trajectory violates limits: " + "; ".join(problems))
    out = Path(args.out)
    write_trajectory_csv(out, res.trajectory, args.rate, periods)
    traj_path = out.with_suffix(f".trajectory.{args.trajectory_format}")
    write_trajectory_file(traj_path, res.trajectory, args.points_rate, periods, cond=res.cond)
    print(f"robot {desc.name}: L = {cfg.harmonics}, f0 = {cfg.f0} Hz (period {cfg.period:g} s), {periods} period(s)")
    print(f"cond(Y_b) = {res.cond:.1f} (random start {res.cond_initial:.1f}; {res.evaluations} evaluations, "
          f"{res.seconds:.1f} s)")
    print(f"wrote {out} and {traj_path}")
    return 0
