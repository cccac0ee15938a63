"""Shared by the bench scripts (run as `python bench/bench_X.py`, so this directory is on sys.path)."""

from __future__ import annotations

import os
import platform
from pathlib import Path


def machine() -> str:
    """CPU model, cores, Python version and the current 1-min load average (timings depend on it)."""
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{cpu}, {os.cpu_count()} cores, Python {platform.python_version()}, load avg {os.getloadavg()[0]:.1f}"


BENCH_DOCS = Path(__file__).resolve().parent.parent / "docs" / "bench"
"""Where each bench writes its section; bench/run_all.py stitches them into docs/benchmarks.md."""


def write_section(area: str, text: str) -> Path:
    """Write ``text`` as docs/bench/<area>.md (creating the folder) and return the path."""
    BENCH_DOCS.mkdir(parents=True, exist_ok=True)
    out = BENCH_DOCS / f"{area}.md"
    out.write_text(text if text.endswith("\n") else text + "\n")
    return out
