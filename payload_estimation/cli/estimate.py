"""`payload-estimation estimate`: payload mass and CoM (and, where a motion determines it, inertia) from
recordings as they are: static captures or any motion; against an unloaded recording of the same
poses/motion (aligned automatically), an identified model with its friction (--model), or the nominal
description. The work is done by :mod:`payload_estimation.payload.recordings`."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from ..errors import PayloadEstimationError
from .command_line import CommandError
from .recording_input import add_torque_gain_argument, load_samples
from .robot_option import add_robot_arguments, robot_from_args

HELP = "estimate the payload (mass, CoM[, inertia]) from a loaded recording and an unloaded one or a model"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_robot_arguments(parser)
    parser.add_argument("--samples", required=True, type=Path,
                        help="loaded recording: CSV (t, q1..qn, tau1..taun[, dq*, ddq*]), rosbag2 directory or "
                             ".db3/.mcap file; static captures or any motion")
    ref = parser.add_mutually_exclusive_group()
    ref.add_argument("--unloaded", type=Path,
                     help="unloaded recording of the same poses (static) or the same motion (any start time and "
                          "length: aligned automatically) -- the differential method")
    ref.add_argument("--model", metavar="FILE",
                     help="unloaded torque model: a PARAMS.yaml written by `identify --out` (with its friction and "
                          "offsets) or a robot YAML/URDF with friction; default: the nominal description")
    parser.add_argument("--topic", default="joint_states", help="JointState topic when reading a rosbag")
    parser.add_argument("--full", action="store_true",
                        help="treat the recording as a motion even if it is slow (a motion is detected "
                             "automatically: some joint faster than --max-speed)")
    add_torque_gain_argument(parser)
    parser.add_argument("--offsets", action="store_true",
                        help="also fit constant joint-torque offsets (static captures against a model)")
    parser.add_argument("--model-uncertainty", type=float, default=0.05, metavar="REL",
                        help="against the nominal description (static captures or motion): its link masses, CoMs "
                             "and inertias are off by this much (relative, 1 sigma; default 0.05); enters the "
                             "reported std")
    parser.add_argument("--torque-offset-std", type=float, default=0.5, metavar="NM",
                        help="captures or motion against a model: 1-sigma sensor offset it lacks (default 0.5 N m)")
    parser.add_argument("--max-payload", type=float, default=50.0, metavar="KG",
                        help="reject estimates heavier than this (default 50 kg)")
    parser.add_argument("--max-com-radius", type=float, default=1.0, metavar="M",
                        help="reject CoM farther than this from the payload frame (default 1 m)")
    parser.add_argument("--max-speed", type=float, default=0.02, metavar="RAD_S",
                        help="a recording whose joints all stay slower than this is static captures (default 0.02)")
    parser.add_argument("--cutoff", type=float, default=6.0, metavar="HZ",
                        help="motion: zero-phase low-pass of q and tau before differentiation (default 6 Hz)")
    parser.add_argument("--velocity", choices=("auto", "positions", "recorded"), default="auto",
                        help="motion: velocities from the recorded dq (auto: when present) or differentiated q")
    parser.add_argument("--rate", type=float, default=None, metavar="HZ",
                        help="motion: resample to this rate (default: the loaded recording's median rate)")
    parser.add_argument("--max-gap", type=float, default=0.05, metavar="S",
                        help="motion: longest gap bridged by interpolation; longer ones split the data (default 0.05)")
    parser.add_argument("--max-mismatch", type=float, default=0.02, metavar="RAD",
                        help="largest RMS joint-position difference of the aligned loaded and unloaded runs "
                             "(default 0.02 rad); more is not the same motion and is refused")
    parser.add_argument("--json", action="store_true", help="print the estimate as JSON")


def _table(result) -> str:
    from ..payload import ICOM_NAMES, is_no_payload

    est = result.estimate
    s = est.std
    lines = [
        f"payload estimate ({est.method}, {result.reference}, frame {est.frame}, {est.samples} samples)",
        f"  mass          {est.mass:10.4f} kg   +- {s.get('mass', float('nan')):.2g}",
    ]
    undetermined_inertia = [nm for nm in ICOM_NAMES if nm in est.undetermined]
    if is_no_payload(est):
        lines.append("  no payload detected: CoM and inertia do not apply (see the note)")
    else:
        for i, ax in enumerate("xyz"):
            lines.append(f"  CoM {ax}         {est.com[i]:10.4f} m    +- {s.get('c' + ax, float('nan')):.2g}")
        if est.inertia is not None:
            for i, nm in enumerate(ICOM_NAMES):
                lines.append(f"  {nm} (CoM)     {est.inertia[i]:10.5f} kg m^2 +- {s.get(nm, float('nan')):.2g}")
        elif undetermined_inertia:
            lines.append(f"  inertia       not determined ({', '.join(undetermined_inertia)})")
        else:
            lines.append("  inertia       not estimated (static captures: gravity only)")
    if est.offsets is not None:
        offsets = [(k.removeprefix("offset_"), v, s.get(k, float("nan"))) for k, v in est.params.items()
                   if k.startswith("offset_")]
        lines.append("  offsets       " + ", ".join(f"{j} {v:+.3f} +- {sd:.2g}" for j, v, sd in offsets) + " N m")
    lines.append(f"  residual RMS  {est.residual_rms:.4g} N m, condition number {est.condition_number:.4g}")
    lines += [f"  note: {n}" for n in est.notes]
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    from ..model import RigidBodyDynamics, require_masses
    from ..payload import PayloadLimits, PayloadOptions, estimate_payload_recordings

    desc = robot_from_args(args)
    if args.unloaded is None and args.model is None:
        require_masses(desc, "a one-shot payload estimate against the robot description (no --unloaded or --model)")
    dyn = RigidBodyDynamics(desc)
    info = sys.stderr if args.json else sys.stdout
    # static captures or a motion: a file without stamps is a set of captures (--rate is the motion's resampling)
    loaded = load_samples(args.samples, desc, args, out=info, stamps="captures")
    unloaded = load_samples(args.unloaded, desc, args, out=info, stamps="captures") if args.unloaded else None
    model = None
    if args.model:
        from ..identification import load_torque_model

        model = load_torque_model(args.model, desc)
        model.check_robot(desc)
    opts = PayloadOptions(cutoff=args.cutoff, velocity=args.velocity, rate=args.rate, max_gap=args.max_gap,
                          max_speed=args.max_speed, motion=args.full, max_mismatch=args.max_mismatch,
                          offsets=args.offsets, model_uncertainty=args.model_uncertainty,
                          torque_offset_std=args.torque_offset_std,
                          limits=PayloadLimits(max_payload=args.max_payload, max_com_radius=args.max_com_radius))
    try:
        result = estimate_payload_recordings(dyn, loaded, unloaded, model, opts,
                                             model_label=f"model {args.model}" if args.model else "model")
    except PayloadEstimationError as exc:
        files = str(args.samples) + (f" and {args.unloaded}" if args.unloaded else "")
        raise CommandError(f"{files}: {exc}") from exc
    if args.json:
        print(json.dumps(result.to_dict(), indent=2))
    else:
        print("\n".join(result.lines))
        print(_table(result))
    return 0
