"""The ``--robot`` option shared by every command, with ``--base-link`` / ``--tip-link`` for URDFs."""

from __future__ import annotations

import argparse
import logging
import sys

ROBOT_HELP = "shipped robot (lwr4, iiwa14) or a robot YAML / URDF path"


def add_robot_arguments(parser: argparse.ArgumentParser, help: str = ROBOT_HELP) -> None:
    """Add ``--robot`` (required) and the URDF chain selection ``--base-link`` / ``--tip-link``."""
    parser.add_argument("--robot", required=True, help=help)
    parser.add_argument("--base-link", default=None,
                        help="URDF only: first link of the chain (default: the root link)")
    parser.add_argument("--tip-link", default=None,
                        help="URDF only: last link of the chain, also the payload frame (default: the end of the "
                             "moving chain, continued through fixed joints past collision-only side links; the "
                             "choice is printed, and an error lists the candidates when there are several arms)")


def robot_from_args(args: argparse.Namespace):
    """The :class:`RobotDescription` named by the parsed ``--robot``/``--base-link``/``--tip-link``.

    What loading decided (``desc.notes``: a URDF's default tip and why, rounded angles read as exact, lumped
    bodies) is on stderr once: warnings through the package's log, which the command line shows; the info
    notes printed here (as ``note: ...``) unless the log shows them already (``-v``)."""
    from ..model import load_robot

    desc = load_robot(args.robot, getattr(args, "base_link", None), getattr(args, "tip_link", None))
    if not logging.getLogger("payload_estimation").isEnabledFor(logging.INFO):
        for level, text in desc.notes:
            if level == "info":
                print(f"note: {text}", file=sys.stderr)
    return desc
