"""`payload-estimation export`: a payload estimate in the formats controllers take.

Reads the estimate JSON that ``estimate --json`` prints, or the ``payload.yaml`` the estimator node writes
into its ``export_dir``, and writes a URDF ``<link>``/``<inertial>`` snippet, a YAML record, KUKA load
data (KRL ``$LOAD`` and the Sunrise dialog's values) and franka ``set_load`` arguments. The KUKA and
franka files are in the robot's flange frame (``--robot`` places it; default: the shipped robot whose
payload frame the estimate names).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from .robot_option import robot_from_args

HELP = "write a payload estimate as URDF <inertial>, YAML, KUKA load data and franka set_load arguments"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--estimate", required=True, type=Path,
                        help="estimate JSON (`payload-estimation estimate ... --json > est.json`), the payload.yaml "
                             "the estimator node writes into its export_dir, or - for stdin")
    parser.add_argument("--format", choices=("all", "urdf", "yaml", "kuka", "franka"), default="all",
                        help="which format (default: all)")
    parser.add_argument("--out", type=Path, default=None,
                        help="directory to write payload.<ext> files into (default: print to stdout)")
    parser.add_argument("--parent", default=None, help="URDF: the link the payload is fixed to (default: its frame)")
    parser.add_argument("--model", default="", help="YAML: name of the gravity model the estimate used")
    parser.add_argument("--robot", default=None,
                        help="KUKA/franka: the robot the estimate was made with (shipped lwr4, iiwa14, or a robot "
                             "YAML / URDF path): it places the flange those formats are given in (default: the "
                             "shipped robot whose payload frame the estimate names)")
    parser.add_argument("--base-link", default=None, help="URDF robot only: first link of the chain")
    parser.add_argument("--tip-link", default=None,
                        help="URDF robot only: last link of the chain (the payload frame and flange)")
    parser.add_argument("--flange-link", default=None,
                        help="URDF robot only: the link the vendor's flange is, when it is not the payload frame "
                             "(franka: fr3_link8 when the estimate is in the hand's TCP fr3_hand_tcp)")


def run(args: argparse.Namespace) -> int:
    from ..files import FORMATS, ExportError, export_text, read_estimate, urdf_flange, write_exports

    text = sys.stdin.read() if str(args.estimate) == "-" else args.estimate.read_text()
    est, model = read_estimate(text, str(args.estimate))
    args.model = args.model or model
    formats = FORMATS if args.format == "all" else (args.format,)
    robot = None if args.robot is None else robot_from_args(args)
    if args.flange_link is not None:
        if robot is None or not str(args.robot).lower().endswith(".urdf"):
            raise ExportError("--flange-link names a link of a URDF: give that URDF as --robot")
        robot = urdf_flange(Path(args.robot).read_text(), est.frame or robot.payload_frame_name, args.flange_link,
                            str(args.robot))
    if args.out is None:
        for fmt in formats:
            print(export_text(est, fmt, args.model, args.parent, robot))
        return 0
    for path in write_exports(est, args.out, formats, args.model, args.parent, robot=robot):
        print(f"wrote {path}")
    return 0
