"""`payload-estimation` command line: one sub-command per module in this folder (payload_estimation/cli/).

Each command module defines ``HELP`` (one line), ``add_arguments(parser)`` and ``run(args) -> int``.
Modules are imported lazily so that e.g. ``coefficients`` never loads rclpy or MuJoCo.
"""

from __future__ import annotations

import argparse
import errno
import importlib
import logging
import os
import sys
from pathlib import Path

from ..errors import PayloadEstimationError
from ..files import output_problem

# sub-command name -> module under payload_estimation.cli
COMMANDS = {
    "coefficients": "coefficients",
    "estimate": "estimate",
    "identify": "identify",
    "validate": "validate",
    "residual": "residual",
    "excite": "excite",
    "demo": "demo",
    "report": "report",
    "export-csv": "export_csv",
    "export": "export",
}


class CommandError(PayloadEstimationError):
    """A command's refusal of its arguments or data; the message says what to change."""


_REASONS = {errno.ENOENT: "no such file", errno.EISDIR: "is a directory", errno.ENOTDIR: "a part of it is not a "
            "directory", errno.EACCES: "permission denied", errno.EPERM: "permission denied",
            errno.EROFS: "read-only file system", errno.ENOSPC: "no space left on the device"}


def os_reason(exc: OSError) -> str:
    """An operating-system error in words, without its ``[Errno N]`` and file name ("no such file", ...)."""
    return _REASONS.get(exc.errno, (exc.strerror or str(exc)).lower()) if exc.errno else str(exc)


def input_file(path: str | Path, option: str) -> Path:
    """``path`` as a readable file, or :class:`CommandError` naming ``option``, the path and why
    ("no such file", "is a directory", "permission denied"); check before the work."""
    p = Path(path)
    if p.is_dir():
        raise CommandError(f"{option} {p}: is a directory, not a file")
    if not p.exists():
        raise CommandError(f"{option} {p}: no such file")
    if not os.access(p, os.R_OK):
        raise CommandError(f"{option} {p}: permission denied (not readable)")
    return p


def output_file(path: str | Path, option: str) -> Path:
    """``path`` where a file can be written (created or replaced), or :class:`CommandError` naming ``option``,
    the path and why ("is a directory", "directory D does not exist", "directory D is not writable"; the rule is
    :func:`files.output_path.output_problem`'s, the nodes' too). Call it before the computation, so that a
    mistyped output path does not fail only after it; a write that fails anyway can be reported with
    :func:`os_reason`."""
    problem = output_problem(path, "file", create=False)
    if problem:
        raise CommandError(f"{option} {problem}")
    return Path(path)


def _load(name: str):
    return importlib.import_module(f"payload_estimation.cli.{COMMANDS[name]}")


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="payload-estimation",
        description="Payload estimation, robot identification and collision detection for torque-sensing arms.",
    )
    parser.add_argument("-v", "--verbose", action="store_true",
                        help="show the library's progress and diagnostic log messages (INFO) on stderr")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMANDS:
        if only is not None and name != only:
            sub.add_parser(name, help=f"(see `payload-estimation {name} --help`)", add_help=False)
            continue
        mod = _load(name)
        p = sub.add_parser(name, help=mod.HELP, description=mod.HELP)
        mod.add_arguments(p)
        p.set_defaults(_run=mod.run)
    return parser


def _configure_logging(verbose: bool) -> None:
    """The library logs; the command line shows warnings (and with -v its INFO progress) on stderr."""
    logger = logging.getLogger("payload_estimation")
    handler = next((h for h in logger.handlers if getattr(h, "_payload_estimation_cli", False)), None)
    if handler is None:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
        handler._payload_estimation_cli = True  # type: ignore[attr-defined]
        logger.addHandler(handler)
    handler.setLevel(logging.INFO if verbose else logging.WARNING)
    if verbose:
        logger.setLevel(logging.INFO)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    verbose = bool(argv) and argv[0] in ("-v", "--verbose")
    if verbose:
        argv = argv[1:]
    only = argv[0] if argv and argv[0] in COMMANDS else None
    parser = build_parser(only)
    args = parser.parse_args(argv)
    _configure_logging(verbose or args.verbose)
    if not getattr(args, "_run", None):
        parser.print_help()
        return 2
    try:
        return int(args._run(args) or 0)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # e.g. `payload-estimation coefficients ... | head`: not an error
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except (PayloadEstimationError, OSError, UnicodeError) as exc:  # our refusals (operator-readable), unreadable files
        print(f"payload-estimation {args.command}: error: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
