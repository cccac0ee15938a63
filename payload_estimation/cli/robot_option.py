"""The ``--robot`` option shared by every command, with ``--base-link`` / ``--tip-link`` for URDFs."""

from __future__ import annotations

import argparse

ROBOT_HELP = "shipped robot (lwr4, iiwa14) or a robot YAML / URDF path"


def add_robot_arguments(parser: argparse.ArgumentParser, help: str = ROBOT_HELP) -> None:
    """Add ``--robot`` (required) and the URDF chain selection ``--base-link`` / ``--tip-link``."""
    parser.add_argument("--robot", required=True, help=help)
    parser.add_argument("--base-link", default=None,
                        help="URDF only: first link of the chain (default: the root link)")
    parser.add_argument("--tip-link", default=None,
                        help="URDF only: last link of the chain, also the payload frame (default: the single "
                             "tip below the moving joints; an error lists the candidates when there are several)")


def robot_from_args(args: argparse.Namespace):
    """The :class:`RobotDescription` named by the parsed ``--robot``/``--base-link``/``--tip-link``."""
    from ..model import load_robot

    return load_robot(args.robot, getattr(args, "base_link", None), getattr(args, "tip_link", None))
