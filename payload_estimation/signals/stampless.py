"""Time stamps for a recording without them (a log of rows at a nominal rate), skipped states found.

A driver's state stream loses a state now and then; a logger that writes rows without stamps hides it.
Taken one row per 1/rate, the row after a lost state carries two steps of motion in one: its velocity
doubles for one row, and a momentum observer (K = 150/s) turns that into a 20-30 N m residual spike
(8 such rows in 100 s of a real LBR Med 7 log). While the arm moves smoothly, a step that is k times
its neighbours' (k >= 2, within ``tolerance``) on the joint-position norm is k rows' worth of time.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

NEIGHBOURS = 9
"""Rows of the running median that stands for the local step length."""
MOVING = 1e-4
"""rad: a local step below this is rest (noise), where no state can be told missing."""


@dataclass(frozen=True)
class StamplessTiming:
    """What :func:`stamps_from_rate` assumed and found."""

    rate: float                  # Hz, as given
    rows: int
    skipped: np.ndarray          # row indices (0-based) that follow one or more lost states
    steps: np.ndarray            # (len(skipped),) how many periods each of those rows spans
    first_at: str = ""           # where the first of them is in the file ('line 1064'), if the caller knows

    def describe(self) -> str:
        """One line for a command's output."""
        head = f"no time stamps: rows taken {1e3 / self.rate:g} ms apart (the rate given, {self.rate:g} Hz)"
        if not self.skipped.size:
            return head + "; no lost state found"
        first = self.first_at or f"row {int(self.skipped[0])}"
        lo, hi = int(self.steps.min()), int(self.steps.max())
        times = f"{lo}x" if lo == hi else f"{lo}-{hi}x"
        return (head + f"; {self.skipped.size} row(s) follow a lost state (their step is {times} their neighbours': "
                f"given that many periods), first at {first}")


def stamps_from_rate(q: np.ndarray, rate: float, tolerance: float = 0.25) -> tuple[np.ndarray, StamplessTiming]:
    """Stamps (s, from 0) for rows of positions ``q`` (N, n) logged at ``rate`` Hz, lost states counted."""
    from scipy.ndimage import median_filter

    q = np.asarray(q, float)
    if not rate > 0:
        raise ValueError(f"rate must be > 0 Hz, got {rate}")
    n_rows = q.shape[0]
    if n_rows < 2:
        return np.arange(n_rows) / rate, StamplessTiming(rate, n_rows, np.zeros(0, int), np.zeros(0, int))
    step = np.linalg.norm(np.diff(q, axis=0), axis=1)
    local = median_filter(step, size=min(NEIGHBOURS, step.size), mode="nearest")
    ratio = step / np.maximum(local, 1e-300)
    k = np.rint(ratio)
    lost = (local > MOVING) & (k >= 2) & (np.abs(ratio - k) <= tolerance * k)
    periods = np.where(lost, k, 1.0)
    t = np.concatenate([[0.0], np.cumsum(periods)]) / rate
    rows = np.flatnonzero(lost) + 1
    return t, StamplessTiming(float(rate), n_rows, rows, periods[lost].astype(int))


__all__ = ["StamplessTiming", "stamps_from_rate"]
