"""Time alignment (s) of a loaded recording to an unloaded one of the same motion, by position mismatch."""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import scipy.optimize
import scipy.signal

from .resample import GAP_FACTOR, MAX_GAP, resample, stamp_report
from .samples import SampleDataError, Samples

MAX_MISMATCH = 0.02


MIN_OVERLAP = 0.5


ALIGN_RATE = 200.0


class AlignmentError(SampleDataError):
    """Two recordings cannot be lined up as one motion; the message says why and what to do."""


@dataclass(frozen=True)
class Alignment:
    """Two recordings of one motion on one grid (loaded clock).

    ``shift`` s added to the unloaded stamps; ``start``/``end`` the common span (s, loaded clock),
    ``overlap`` its length; ``rate`` Hz of the grid; ``rms`` per joint (rad) of the position difference
    on the grid; ``loaded``/``unloaded``: the resampled samples (identical ``t``; gaps of either
    recording longer than ``max_gap`` are left out of both).
    """

    shift: float
    start: float
    end: float
    rate: float
    rms: np.ndarray
    loaded: Samples
    unloaded: Samples
    joint_names: tuple[str, ...] = ()

    @property
    def overlap(self) -> float:
        return self.end - self.start

    @property
    def mismatch(self) -> float:
        """RMS position difference over all joints (rad)."""
        return float(np.sqrt(np.mean(self.rms ** 2)))

    def describe(self) -> str:
        j = int(np.argmax(self.rms))
        name = self.joint_names[j] if j < len(self.joint_names) else f"{j + 1}"
        return (f"alignment: unloaded run shifted by {self.shift:+.4f} s; overlap {self.overlap:.3f} s "
                f"(t = {self.start:.3f}..{self.end:.3f} s, loaded clock), {self.loaded.n_samples} samples at "
                f"{self.rate:.4g} Hz; residual position mismatch RMS {self.mismatch:.3g} rad "
                f"(worst joint {name} {self.rms[j]:.3g} rad)")

    def to_dict(self) -> dict:
        return {"shift_s": self.shift, "overlap_s": self.overlap, "start_s": self.start, "end_s": self.end,
                "rate_hz": self.rate, "samples": self.loaded.n_samples, "mismatch_rms_rad": self.mismatch,
                "mismatch_rms_per_joint_rad": [float(x) for x in self.rms]}


def _stamped(samples: Samples, what: str) -> np.ndarray:
    if samples.t is None or samples.n_samples < 4:
        raise AlignmentError(f"{what}: lining two runs up needs time stamps (CSV column 't' or the bag's stamps) "
                             "and at least 4 samples")
    return samples.t


def _uniform_positions(samples: Samples, fs: float) -> tuple[float, np.ndarray]:
    t = samples.t
    grid = t[0] + np.arange(int(np.floor((t[-1] - t[0]) * fs + 1e-9)) + 1) / fs
    return float(t[0]), np.column_stack([np.interp(grid, t, samples.q[:, j]) for j in range(samples.n_joints)])


def _mismatch(loaded: Samples, unloaded: Samples, shift: float) -> tuple[np.ndarray, int]:
    """Per-joint mean squared position difference on the loaded stamps inside the overlap."""
    tl, tu = loaded.t, unloaded.t + shift
    inside = (tl >= tu[0]) & (tl <= tu[-1])
    if inside.sum() < 2:
        return np.full(loaded.n_joints, np.inf), 0
    t = tl[inside]
    d = np.column_stack([loaded.q[inside, j] - np.interp(t, tu, unloaded.q[:, j]) for j in range(loaded.n_joints)])
    return np.mean(d ** 2, axis=0), int(inside.sum())


def find_time_shift(loaded: Samples, unloaded: Samples, rate: float | None = None,
                    min_overlap: float = MIN_OVERLAP) -> float:
    """The shift (s, added to the unloaded stamps) that best lines ``unloaded`` up with ``loaded``.

    Both are interpolated to a uniform grid (the lower median rate, at most :data:`ALIGN_RATE`), the mean
    squared position difference over the overlap is computed for every lag at once (FFT
    cross-correlation plus running sums of squares), lags sharing less than ``min_overlap`` of the
    shorter recording are not considered; among the local minima at most 1.5 x the best (a periodic
    motion has one per period) the one with the largest overlap wins; then a parabola through the
    neighbouring lags and a bounded scalar minimisation on the loaded stamps refine it below one sample.
    """
    _stamped(loaded, "loaded recording")
    _stamped(unloaded, "unloaded recording")
    if loaded.n_joints != unloaded.n_joints:
        raise AlignmentError(f"the loaded recording has {loaded.n_joints} joints, the unloaded one {unloaded.n_joints}")
    fs = float(rate) if rate is not None else min(stamp_report(loaded.t).rate, stamp_report(unloaded.t).rate,
                                                  ALIGN_RATE)
    ta0, a = _uniform_positions(loaded, fs)
    tb0, b = _uniform_positions(unloaded, fs)
    mean = a.mean(axis=0)
    a, b = a - mean, b - mean
    na, nb = a.shape[0], b.shape[0]
    cross = sum(scipy.signal.correlate(a[:, j], b[:, j], mode="full", method="fft") for j in range(a.shape[1]))
    lags = scipy.signal.correlation_lags(na, nb, mode="full")
    ea = np.concatenate([[0.0], np.cumsum(np.sum(a ** 2, axis=1))])
    eb = np.concatenate([[0.0], np.cumsum(np.sum(b ** 2, axis=1))])
    lo = np.maximum(0, -lags)
    hi = np.minimum(nb, na - lags)
    count = hi - lo
    need = max(3, int(np.ceil(min_overlap * min(na, nb))))
    ok = count >= need
    if not ok.any():
        raise AlignmentError("the recordings are too short to line up")
    ssd = (ea[np.where(ok, hi + lags, 0)] - ea[np.where(ok, lo + lags, 0)]) + (eb[np.where(ok, hi, 0)]
                                                                               - eb[np.where(ok, lo, 0)]) - 2 * cross
    msd = np.where(ok, np.maximum(ssd, 0.0) / np.maximum(count, 1), np.inf)
    best = float(msd.min())
    interior = np.zeros(msd.size, bool)
    interior[1:-1] = (msd[1:-1] <= msd[:-2]) & (msd[1:-1] <= msd[2:]) & np.isfinite(msd[1:-1])
    interior[int(np.argmin(msd))] = True
    cand = np.flatnonzero(interior & (msd <= 1.5 * best + 1e-12))
    k = int(cand[np.argmax(count[cand])])
    frac = 0.0
    if 0 < k < msd.size - 1 and np.isfinite(msd[k - 1]) and np.isfinite(msd[k + 1]):
        den = msd[k - 1] - 2 * msd[k] + msd[k + 1]
        if den > 0:
            frac = float(np.clip(0.5 * (msd[k - 1] - msd[k + 1]) / den, -0.5, 0.5))
    shift = ta0 - tb0 + (lags[k] + frac) / fs
    res = scipy.optimize.minimize_scalar(lambda s: float(np.sum(_mismatch(loaded, unloaded, s)[0])),
                                         bounds=(shift - 1.0 / fs, shift + 1.0 / fs), method="bounded",
                                         options={"xatol": 1e-5})
    return float(res.x) if res.fun <= np.sum(_mismatch(loaded, unloaded, shift)[0]) else float(shift)


def _valid_mask(t_src: np.ndarray, at: np.ndarray, max_gap: float) -> np.ndarray:
    """True where ``at`` lies inside ``t_src`` and not inside a step longer than the gap limit."""
    med = float(np.median(np.diff(t_src)))
    limit = max(max_gap, GAP_FACTOR * med)
    j = np.searchsorted(t_src, at)
    inside = (at >= t_src[0]) & (at <= t_src[-1])
    jj = np.clip(j, 1, t_src.size - 1)
    step = t_src[jj] - t_src[jj - 1]
    exact = np.isin(at, t_src)
    return inside & ((step <= limit) | exact)


def _interp(samples: Samples, at: np.ndarray, t_src: np.ndarray) -> dict:
    def f(x):
        return None if x is None else np.column_stack([np.interp(at, t_src, x[:, j]) for j in range(x.shape[1])])

    return {"q": f(samples.q), "tau": f(samples.tau), "dq": f(samples.dq)}


def align_recordings(loaded: Samples, unloaded: Samples, rate: float | None = None, max_gap: float = MAX_GAP,
                     max_mismatch: float = MAX_MISMATCH, min_overlap: float = MIN_OVERLAP,
                     shift: float | None = None) -> Alignment:
    """Line ``unloaded`` up with ``loaded`` (:func:`find_time_shift`, or the given ``shift`` s) and
    resample both on one grid over their common span: the loaded recording's grid at ``rate`` Hz (default
    its median rate; :func:`.recording.resample`), the unloaded one interpolated at the same instants.
    Samples inside a gap (> ``max_gap`` s) of either recording are left out of both. Recorded
    velocities are kept only when both recordings have them.

    Raises :class:`AlignmentError` when the RMS position difference after alignment exceeds
    ``max_mismatch`` rad (not the same motion) or the overlap is shorter than ``min_overlap`` of the
    shorter recording.
    """
    tl = _stamped(loaded, "loaded recording")
    tu = _stamped(unloaded, "unloaded recording")
    if shift is None:
        shift = find_time_shift(loaded, unloaded, None, min_overlap)
    start, end = max(tl[0], tu[0] + shift), min(tl[-1], tu[-1] + shift)
    shorter = min(tl[-1] - tl[0], tu[-1] - tu[0])
    if not end - start >= min_overlap * shorter or end <= start:
        raise AlignmentError(
            f"the recordings share only {max(0.0, end - start):.3f} s after a shift of {shift:+.3f} s (less than "
            f"{min_overlap:.0%} of the shorter one, {shorter:.3f} s): record the same motion for both runs")
    inside = (tl >= start) & (tl <= end)
    if inside.sum() < 4:
        raise AlignmentError("fewer than 4 loaded samples lie in the common span of the two recordings")
    both_dq = loaded.dq is not None and unloaded.dq is not None
    lsub = loaded.subset(inside)
    if not both_dq:
        lsub = replace(lsub, dq=None)
    res = resample(lsub, rate, max_gap)
    fs = res.rate
    ts, parts_l, parts_u = [], [], []
    for seg in res.segments:
        ok = _valid_mask(tu + shift, seg.t, max_gap) & _valid_mask(lsub.t, seg.t, max_gap)
        if ok.sum() < 2:
            continue
        g = seg.t[ok]
        ts.append(g)
        parts_l.append({"q": seg.q[ok], "tau": seg.tau[ok], "dq": None if seg.dq is None else seg.dq[ok]})
        parts_u.append(_interp(unloaded if both_dq else replace(unloaded, dq=None), g, tu + shift))
    if not ts:
        raise AlignmentError("no common stretch of the two recordings is free of gaps")
    t = np.concatenate(ts)

    def cat(parts, key):
        return None if parts[0][key] is None else np.concatenate([p[key] for p in parts])

    names = loaded.joint_names
    al = Samples(cat(parts_l, "q"), cat(parts_l, "tau"), cat(parts_l, "dq"), None, t, names)
    au = Samples(cat(parts_u, "q"), cat(parts_u, "tau"), cat(parts_u, "dq"), None, t, names)
    rms = np.sqrt(np.mean((al.q - au.q) ** 2, axis=0))
    out = Alignment(float(shift), float(t[0]), float(t[-1]), fs, rms, al, au, names)
    if out.mismatch > max_mismatch:
        raise AlignmentError(
            f"the loaded and unloaded recordings are not the same motion: after the best time shift "
            f"({shift:+.3f} s) their joint positions still differ by RMS {out.mismatch:.3g} rad (worst joint "
            f"{names[int(np.argmax(rms))]} {rms.max():.3g} rad; limit {max_mismatch:g} rad). Record the unloaded run "
            "with the same trajectory (any start time), or raise --max-mismatch if the tracking differs this much")
    return out


__all__ = ["MAX_MISMATCH", "MIN_OVERLAP", "Alignment", "AlignmentError", "align_recordings", "find_time_shift"]
