"""Whether this process can write where it is asked to: the one rule of the command line's output options and
the nodes' path parameters (checked before the work, so a mistyped path does not fail only after it)."""

from __future__ import annotations

import os
from pathlib import Path


def output_problem(path: str | Path, kind: str = "file", create: bool = True) -> str | None:
    """None if this process can write ``path`` as a ``kind`` ("file": create or overwrite it; "dir": create it
    and write into it), else ``'PATH: why'`` in words (what is in the way, what to give instead). ``create``:
    missing parent directories may be created (a node's export directory); False: the parent must exist (a
    command's output file)."""
    p = Path(path).expanduser()
    if kind == "file":
        if p.is_dir():
            return f"{p}: is a directory (give a file name inside it)"
        if p.exists():
            return None if os.access(p, os.W_OK) else f"{p}: the file exists and is not writable"
        where = p.parent if str(p.parent) else Path(".")
    else:
        if p.exists() and not p.is_dir():
            return f"{p}: exists and is not a directory"
        where = p
    ancestor = where
    while not ancestor.exists() and ancestor != ancestor.parent:
        ancestor = ancestor.parent
    if ancestor != where and not create and kind == "file":
        return f"{p}: directory {where} does not exist"
    if not ancestor.is_dir():
        return f"{p}: {ancestor} is a file, not a directory"
    if not os.access(ancestor, os.W_OK | os.X_OK):
        return f"{p}: directory {ancestor} is not writable"
    return None


__all__ = ["output_problem"]
