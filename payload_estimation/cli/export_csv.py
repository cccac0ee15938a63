"""`payload-estimation export-csv`: write a recording's joint states as the package's CSV.

Reads a rosbag2 directory (with or without metadata.yaml), a lone .db3/.mcap file or a CSV;
joints by name in the robot's order (``--robot``) or the bag's first message's order; logger
repeats dropped and counted; the sampling (rate, jitter, gaps) reported. Columns: t, q1..qn,
dq1..dqn (when recorded), tau1..taun.
"""

from __future__ import annotations

import argparse

from .command_line import output_file
from .recording_input import add_data_arguments, add_rate_argument

HELP = "write a rosbag2 recording's joint states (or any recording) as the package's CSV"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_data_arguments(parser)
    add_rate_argument(parser)
    parser.add_argument("--robot", help="map joints by name to this robot's order (default: the bag's order)")
    parser.add_argument("--base-link", default=None, help="URDF only: first link of the chain")
    parser.add_argument("--tip-link", default=None, help="URDF only: last link of the chain")
    parser.add_argument("--out", required=True, help="CSV file to write")


def run(args: argparse.Namespace) -> int:
    from ..files import write_samples_csv
    from ..model import load_robot
    from .recording_input import load_samples

    output_file(args.out, "--out")
    desc = load_robot(args.robot, args.base_link, args.tip_link) if args.robot else None
    s = load_samples(args.data, desc, args, stamps="required" if args.rate else "captures", sign="warn")
    write_samples_csv(s, args.out)
    print(f"wrote {args.out}: {s.n_samples} samples of {s.n_joints} joints ({', '.join(s.joint_names)})")
    return 0
