"""Sampling of a recorded stream: its stamp report (rate, gaps), a uniform grid, hold-out splits.

Also velocity from positions (rad/s) for recordings that carry none. Times in s.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from .samples import SampleDataError, Samples

REGULAR_TOLERANCE = 1e-3


IRREGULAR_STEP = 0.25


GAP_FACTOR = 2.5


MAX_GAP = 0.05


@dataclass(frozen=True)
class Gap:
    """A step of the stamps longer than ``GAP_FACTOR`` median steps: from ``start`` to ``end`` (s)."""

    start: float
    end: float
    where: str = ""

    @property
    def length(self) -> float:
        return self.end - self.start


@dataclass(frozen=True)
class StampReport:
    """How a time-stamped stream was sampled (times in s, rate in Hz)."""

    samples: int
    duration: float
    median_step: float
    irregular_steps: int
    gaps: tuple[Gap, ...] = ()
    max_deviation: float = 0.0     # largest |step - median| / median

    @property
    def rate(self) -> float:
        return 1.0 / self.median_step

    @property
    def regular(self) -> bool:
        """Uniform within ``REGULAR_TOLERANCE``: usable without resampling."""
        return self.max_deviation <= REGULAR_TOLERANCE

    def describe(self) -> str:
        text = (f"{self.samples} samples over {self.duration:.3f} s, median rate {self.rate:.4g} Hz; "
                f"{self.irregular_steps} steps more than {IRREGULAR_STEP:.0%} off the median step")
        if self.gaps:
            big = max(self.gaps, key=lambda g: g.length)
            text += (f"; {len(self.gaps)} gaps (steps > {GAP_FACTOR:g} x median), largest {1e3 * big.length:.1f} ms "
                     f"at t = {big.start:.3f} s ({big.where})")
        else:
            text += "; no gaps"
        return text

    def to_dict(self) -> dict:
        return {"samples": self.samples, "duration_s": self.duration, "rate_hz": self.rate,
                "irregular_steps": self.irregular_steps, "gaps": len(self.gaps),
                "largest_gap_s": max((g.length for g in self.gaps), default=0.0)}


def stamp_report(t: np.ndarray, where=None) -> StampReport:
    """:class:`StampReport` of strictly increasing stamps ``t`` (s); ``where(k)`` names row k."""
    t = np.asarray(t, float)
    if t.size < 2:
        return StampReport(int(t.size), 0.0, float("inf"), 0)
    dt = np.diff(t)
    med = float(np.median(dt))
    dev = np.abs(dt - med) / med
    gaps = tuple(Gap(float(t[k]), float(t[k + 1]), where(k + 1) if where else f"sample {k + 1}")
                 for k in np.flatnonzero(dt > GAP_FACTOR * med))
    return StampReport(int(t.size), float(t[-1] - t[0]), med, int(np.sum(dev > IRREGULAR_STEP)), gaps,
                       float(dev.max()))


@dataclass(frozen=True)
class Resampled:
    """Uniformly sampled segments of a recording (each at ``rate`` Hz) and what it took."""

    segments: tuple[Samples, ...]
    rate: float
    resampled: bool              # False: the stamps were regular and the samples are the originals
    bridged: tuple[Gap, ...] = ()
    split: tuple[Gap, ...] = ()

    def describe(self) -> str:
        how = f"linear resample to {self.rate:.6g} Hz" if self.resampled else f"regular stamps at {self.rate:.6g} Hz"
        parts = [how]
        if self.bridged:
            parts.append(f"{len(self.bridged)} gaps bridged by interpolation (each <= {MAX_GAP * 1e3:.0f} ms)")
        if self.split:
            parts.append(f"{len(self.split)} longer gaps split it into {len(self.segments)} segments "
                         f"(largest {max(g.length for g in self.split):.3f} s at t = "
                         f"{max(self.split, key=lambda g: g.length).start:.3f} s)")
        return ", ".join(parts)


def resample(samples: Samples, rate: float | None = None, max_gap: float = MAX_GAP) -> Resampled:
    """Uniform segments of ``samples`` at ``rate`` Hz (default: the median rate of the stamps).

    Regularly stamped samples at that rate are returned unchanged. Otherwise every channel is
    linearly interpolated onto t0 + k / rate within each segment; gaps (steps longer than
    ``GAP_FACTOR`` median steps) longer than ``max_gap`` s end a segment (the data are not invented
    across them).
    """
    if samples.t is None:
        raise SampleDataError("resampling needs time stamps (column 't' or the bag's stamps)")
    if samples.n_samples < 2:
        raise SampleDataError(f"a recording of {samples.n_samples} sample cannot be resampled")
    rep = stamp_report(samples.t)
    fs = float(rate) if rate is not None else rep.rate
    if not (np.isfinite(fs) and fs > 0):
        raise SampleDataError(f"resampling rate must be a positive number of Hz, got {rate}")
    t = samples.t
    dt = np.diff(t)
    breaks = np.flatnonzero(dt > max(max_gap, GAP_FACTOR * rep.median_step))
    gaps = list(rep.gaps)
    split = tuple(g for g in gaps if g.length > max_gap)
    bridged = tuple(g for g in gaps if g.length <= max_gap)
    if rep.regular and abs(rep.rate - fs) <= REGULAR_TOLERANCE * fs and not breaks.size:
        return Resampled((samples,), fs, False)
    bounds = np.concatenate([[0], breaks + 1, [samples.n_samples]])
    segs = []
    for a, b in zip(bounds[:-1], bounds[1:]):
        if b - a < 2:
            continue
        grid = t[a] + np.arange(int(np.floor((t[b - 1] - t[a]) * fs + 1e-9)) + 1) / fs
        if grid.size < 2:
            continue

        def interp(x, a=a, b=b, grid=grid):
            if x is None:
                return None
            return np.column_stack([np.interp(grid, t[a:b], x[a:b, j]) for j in range(x.shape[1])])

        segs.append(Samples(interp(samples.q), interp(samples.tau), interp(samples.dq), interp(samples.ddq), grid,
                            samples.joint_names))
    if not segs:
        raise SampleDataError(f"no two consecutive samples are within {max_gap} s of each other: nothing to resample")
    return Resampled(tuple(segs), fs, True, bridged, split)


def split_by_time(samples: Samples, hold_out: float) -> tuple[Samples, Samples]:
    """(first part, last ``hold_out`` fraction by time) of a time-stamped recording."""
    if samples.t is None:
        raise SampleDataError("holding out the end of a recording needs time stamps")
    if not 0 < hold_out < 1:
        raise SampleDataError(f"the hold-out fraction must be in (0, 1), got {hold_out}")
    t = samples.t
    cut = t[0] + (1.0 - hold_out) * (t[-1] - t[0])
    before = t < cut
    if before.sum() < 2 or (~before).sum() < 2:
        raise SampleDataError(f"holding out {hold_out:.0%} leaves fewer than 2 samples on one side")
    return samples.subset(before), samples.subset(~before)


def derive_velocity(samples: Samples, source: str = "the recording") -> tuple[Samples, str]:
    """``samples`` with dq: the recorded one, or d q / dt by differences on the true stamps
    (second order inside, first order at the ends; not filtered). Returns the samples and a note
    saying what was derived ('' when nothing was). Needs time stamps."""
    if samples.dq is not None:
        return samples, ""
    if samples.t is None or samples.n_samples < 2:
        raise SampleDataError(f"{source}: velocities cannot be derived without time stamps (CSV column 't' or the "
                              "bag's stamps) and at least 2 samples")
    dq = np.gradient(samples.q, samples.t, axis=0, edge_order=1)
    return (replace(samples, dq=dq),
            "no recorded velocities: dq derived from the positions by differences on the recorded stamps")


__all__ = [
    "GAP_FACTOR", "IRREGULAR_STEP", "MAX_GAP", "Gap", "Resampled", "StampReport", "derive_velocity", "resample",
    "split_by_time", "stamp_report",
]
