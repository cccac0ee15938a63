"""`payload-estimation estimate`: payload mass and CoM (and inertia with --full) from recorded samples."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from .robot_option import add_robot_arguments, robot_from_args

HELP = "estimate the payload (mass, CoM[, inertia]) from loaded (and unloaded) joint samples"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_robot_arguments(parser)
    parser.add_argument("--samples", required=True, type=Path,
                        help="loaded samples: CSV (q1..qn, tau1..taun[, dq*, ddq*, t]), rosbag2 directory or "
                             ".db3/.mcap file")
    parser.add_argument("--unloaded", type=Path,
                        help="unloaded samples at the same poses/trajectory (differential method); "
                             "without it the unloaded torque comes from the robot model (one-shot)")
    parser.add_argument("--topic", default="joint_states", help="JointState topic when reading a rosbag")
    parser.add_argument("--full", action="store_true",
                        help="estimate all 10 parameters from dynamic samples (needs dq and ddq columns)")
    parser.add_argument("--offsets", action="store_true", help="also fit constant joint-torque offsets (one-shot)")
    parser.add_argument("--max-payload", type=float, default=50.0, metavar="KG",
                        help="reject estimates heavier than this (default 50 kg)")
    parser.add_argument("--max-com-radius", type=float, default=1.0, metavar="M",
                        help="reject CoM farther than this from the payload frame (default 1 m)")
    parser.add_argument("--max-speed", type=float, default=0.02, metavar="RAD_S",
                        help="static samples must move slower than this (default 0.02 rad/s)")
    parser.add_argument("--json", action="store_true", help="print the estimate as JSON")


def _load(path: Path, desc, topic: str, quiet: bool = False):
    """Samples of any recording; what loading found (repeats dropped, rate, gaps) is printed
    (on stderr when stdout carries JSON)."""
    import sys

    from ..identification.recording import load_recording

    rec = load_recording(path, desc, topic)
    print("\n".join(rec.report.lines()), file=sys.stderr if quiet else sys.stdout)
    return rec.samples


def _table(est) -> str:
    s = est.std
    lines = [
        f"payload estimate ({est.method}, frame {est.frame}, {est.samples} samples)",
        f"  mass          {est.mass:10.4f} kg   +- {s.get('mass', float('nan')):.2g}",
    ]
    for i, ax in enumerate("xyz"):
        lines.append(f"  CoM {ax}         {est.com[i]:10.4f} m    +- {s.get('c' + ax, float('nan')):.2g}")
    if est.inertia is not None:
        for i, nm in enumerate(("Ixx", "Ixy", "Ixz", "Iyy", "Iyz", "Izz")):
            lines.append(f"  {nm} (CoM)     {est.inertia[i]:10.5f} kg m^2 +- {s.get(nm, float('nan')):.2g}")
    if est.offsets is not None:
        lines.append("  offsets       " + " ".join(f"{o:.3f}" for o in est.offsets) + " N m")
    lines.append(f"  residual RMS  {est.residual_rms:.4g} N m, condition number {est.condition_number:.4g}")
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    from ..identification.data import check_static
    from ..identification.payload import PayloadLimits, estimate_payload_full, estimate_payload_gravity
    from ..model.dynamics import RigidBodyDynamics

    desc = robot_from_args(args)
    dyn = RigidBodyDynamics(desc)
    loaded = _load(args.samples, desc, args.topic, args.json)
    unloaded = _load(args.unloaded, desc, args.topic, args.json) if args.unloaded else None
    limits = PayloadLimits(max_payload=args.max_payload, max_com_radius=args.max_com_radius)
    if args.full:
        for s, name in ((loaded, args.samples), (unloaded, args.unloaded)):
            if s is not None and (s.dq is None or s.ddq is None):
                raise ValueError(f"{name}: --full needs velocity and acceleration columns dq1.., ddq1..")
        if unloaded is not None and unloaded.n_samples != loaded.n_samples:
            raise ValueError(f"{args.unloaded}: {unloaded.n_samples} samples, the loaded file has {loaded.n_samples}")
        est = estimate_payload_full(dyn, loaded.q, loaded.dq, loaded.ddq, loaded.tau,
                                    None if unloaded is None else unloaded.tau, limits=limits)
    else:
        check_static(loaded, args.max_speed)
        tau_u = None
        if unloaded is not None:
            check_static(unloaded, args.max_speed)
            if unloaded.n_samples != loaded.n_samples:
                raise ValueError(
                    f"{args.unloaded}: {unloaded.n_samples} samples but {args.samples} has {loaded.n_samples}; "
                    "the differential method needs the same poses"
                )
            gap = np.abs(unloaded.q - loaded.q).max()
            if gap > 1e-2:
                raise ValueError(f"unloaded poses differ from the loaded ones by up to {gap:.3g} rad; "
                                 "record both at the same poses")
            tau_u = unloaded.tau
        est = estimate_payload_gravity(dyn, loaded.q, loaded.tau, tau_u, estimate_offsets=args.offsets,
                                       limits=limits)
    print(json.dumps(est.to_dict(), indent=2) if args.json else _table(est))
    return 0
