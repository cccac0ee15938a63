"""The `payload-estimation` command: :func:`main` and one module per sub-command."""

from .command_line import main

__all__ = ["main"]
