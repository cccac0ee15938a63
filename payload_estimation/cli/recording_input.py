"""Recordings as every command reads them: --data/--topic/--torque-gain/--rate, the torque's sign checked.

One path for identify, validate, residual, report, estimate and export-csv: load (repeats and corrupt
rows dropped and counted, a log without stamps timed from ``--rate``), the torque gain applied (one
value or one per joint; -1 flips a driver's sign), then the sign test against the description's
gravity torque (:mod:`..signals.torque_sign`): a recording whose effort runs opposite to the model on a
joint is refused with the joints, the evidence and the option that fixes it.
"""

from __future__ import annotations

import argparse
import sys

import numpy as np

from .command_line import CommandError

SIGN_CHECK_ROWS = 2000
"""Rows (evenly spread) the sign test evaluates the description's gravity torque on."""


def add_data_arguments(parser: argparse.ArgumentParser, multiple: bool = False) -> None:
    """--data, --topic, --torque-gain: the options every command that reads a recording shares."""
    parser.add_argument("--data", required=True, nargs="+" if multiple else None,
                        help="recording: CSV file (t, q1.., tau1.., ...), rosbag2 directory, or a lone .db3/.mcap file")
    parser.add_argument("--topic", default="joint_states", help="JointState topic in a rosbag (default joint_states)")
    add_torque_gain_argument(parser)


def add_torque_gain_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--torque-gain", metavar="G[,G2,..]", default=None,
                        help="N m per unit of the recorded effort, one value or one per joint (default 1); -1 where "
                             "the driver reports the joint torque with the opposite sign (lbr_fri_ros2_stack: "
                             "--torque-gain -1); a gain other than +-1 converts motor currents")


def add_rate_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--rate", type=float, default=None,
                        help="Hz: the rate a recording without time stamps was logged at (e.g. 100 for a FRI "
                             "log); its stamps are made from it and lost states found")


def load_samples(path, desc, args: argparse.Namespace, out=None, stamps: str = "required",
                 sign: str = "refuse", loader=None):
    """Samples of any recording in the robot's joint order, torque gain applied and sign checked; what
    loading found is printed to ``out``. ``stamps``: "required" (a time series: a log without stamps needs
    --rate), or "captures" (rows without stamps are separate static captures). ``sign``: "refuse" or
    "warn" (export-csv: a conversion, not a fit)."""
    from ..files import load_recording
    from ..payload import CURRENT_WARNING
    from ..signals import apply_torque_gain

    out = sys.stdout if out is None else out
    rate = getattr(args, "rate", None) if stamps == "required" else None
    if rate is not None and not rate > 0:
        raise CommandError(f"--rate must be > 0 Hz, got {rate}")
    rec = (loader or load_recording)(path, desc, getattr(args, "topic", "joint_states"), rate)
    print("\n".join(rec.report.lines()), file=out)
    samples = rec.samples
    if stamps == "required" and samples.t is None:
        raise CommandError(
            f"{path}: the recording has no time stamps (no CSV column 't'), and this command needs a time series: "
            "give the rate its rows were logged at, e.g. --rate 100 for a 100 Hz FRI log (the stamps are then "
            "made from it and lost states found); rows that are separate static captures are for "
            "`payload-estimation estimate`")
    gain_text = getattr(args, "torque_gain", None)
    if gain_text:
        samples = apply_torque_gain(samples, gain_text)
        note = f"torque gain {gain_text} N m per unit applied"
        if any(abs(float(g)) != 1.0 for g in str(gain_text).split(",") if g.strip()):
            note += f"; warning: {CURRENT_WARNING}"
        print(note, file=out)
    if desc is not None:
        check = sign_check(desc, samples)
        problem = check.problem(str(path), "--torque-gain {}")
        if problem is not None and sign == "refuse":
            raise CommandError(problem)
        print(problem if problem is not None else check.describe(), file=out)
    return samples


def sign_check(desc, samples):
    """:func:`..signals.check_torque_sign` of ``samples`` against ``desc``'s gravity torque."""
    from ..model import RigidBodyDynamics
    from ..signals import check_torque_sign

    dyn = RigidBodyDynamics(desc)
    rows = np.unique(np.linspace(0, samples.n_samples - 1, min(samples.n_samples, SIGN_CHECK_ROWS)).astype(int))
    g = np.array([dyn.gravity(samples.q[k]) for k in rows])
    return check_torque_sign(g, samples.tau[rows], desc.joint_names)


__all__ = ["add_data_arguments", "add_rate_argument", "add_torque_gain_argument", "load_samples", "sign_check"]
