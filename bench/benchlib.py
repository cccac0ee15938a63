"""Shared by the bench scripts (run as `python bench/bench_X.py`, so this directory is on sys.path)."""

from __future__ import annotations

import os
import platform
from pathlib import Path

import numpy as np

from payload_estimation.model import BodyInertia


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


LIMIT_MARGIN = np.radians(1.5)


def pick_configurations(desc, n: int, rng: np.random.Generator) -> list[tuple[str, np.ndarray]]:
    """The stretched-up pose, poses with joints 1.5-10 deg inside a limit, and random ones (rad)."""
    lim = desc.limits.position
    out = [("stretched up", np.clip(np.zeros(desc.n), lim[:, 0] + LIMIT_MARGIN, lim[:, 1] - LIMIT_MARGIN))]
    while len(out) < n:
        q = rng.uniform(lim[:, 0] + np.radians(10), lim[:, 1] - np.radians(10))
        kind = "random"
        if len(out) % 2 == 1:
            kind = "near limits"
            for j in rng.choice(desc.n, size=rng.integers(1, 4), replace=False):
                side = rng.integers(0, 2)
                q[j] = lim[j, side] + (1 - 2 * side) * np.radians(rng.uniform(1.5, 10.0))
        out.append((kind, q))
    return out


def payload(rng: np.random.Generator, mass: float) -> BodyInertia:
    """A box-like payload of ``mass`` kg with a random CoM within 0.12 m (z 0.02-0.15 m) of the flange."""
    com = np.array([rng.uniform(-0.05, 0.05), rng.uniform(-0.05, 0.05), rng.uniform(0.02, 0.15)])
    a, b, c = rng.uniform(0.04, 0.2, size=3)
    inertia = mass / 12 * np.diag([b * b + c * c, a * a + c * c, a * a + b * b])
    return BodyInertia(mass, com, inertia)
