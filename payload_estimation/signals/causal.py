"""Causal first-order low-pass filters on irregular stamps (s): a signal and its filtered derivative.

The filtered payload formulation uses them instead of differentiated velocities.
"""

from __future__ import annotations

import numpy as np
from scipy.signal import lfilter, lfilter_zi

from .filters import SignalError

UNIFORM = 1e-4
"""Relative spread of the sample intervals below which they are one interval (a resampled grid whose stamps carry
rounding only): the filter then runs as one linear recursion (scipy's lfilter), not sample by sample."""


def _coefficients(t: np.ndarray, cutoff: float) -> tuple[np.ndarray, np.ndarray]:
    dt = np.diff(t)
    if np.any(~np.isfinite(dt)) or np.any(dt <= 0):
        k = int(np.argmax(~(dt > 0)))
        raise SignalError(f"time stamps must increase: sample {k + 1} at {t[k + 1]!r} s follows {t[k]!r} s")
    if not (np.isfinite(cutoff) and cutoff > 0):
        raise SignalError(f"cutoff must be a frequency > 0 Hz, got {cutoff}")
    return np.exp(-2 * np.pi * cutoff * dt), dt


def _uniform(dt: np.ndarray, cutoff: float) -> tuple[float, float] | None:
    """(the one interval s, its coefficient exp(-2π f_c dt)) when the intervals ``dt`` are uniform
    (:data:`UNIFORM`), else None (also for no interval)."""
    if dt.size == 0:
        return None
    mean = float(np.mean(dt))
    if float(np.max(np.abs(dt - mean))) > UNIFORM * mean:
        return None
    return mean, float(np.exp(-2 * np.pi * cutoff * mean))


def _recursion(b: np.ndarray, a: float, x: np.ndarray) -> np.ndarray:
    """y_k = a y_(k-1) + b0 x_k + b1 x_(k-1) along axis 0, in steady state on x_0 before the first sample."""
    den = np.array([1.0, -a])
    zi = lfilter_zi(b, den).reshape((1,) + (1,) * (x.ndim - 1)) * x[:1]
    return lfilter(b, den, x, axis=0, zi=zi)[0]


def causal_lowpass(t: np.ndarray, x: np.ndarray, cutoff: float, order: int = 1) -> np.ndarray:
    """F[x] along axis 0 (samples at times ``t``): ``order`` first-order sections at ``cutoff`` Hz,
    trapezoidal input, each starting in steady state on its first input."""
    a, dt = _coefficients(t, cutoff)
    out = np.asarray(x, dtype=float)
    grid = _uniform(dt, cutoff)
    if grid is not None:
        c = grid[1]
        for _ in range(order):
            out = _recursion(np.full(2, 0.5 * (1 - c)), c, out)
        return out
    for _ in range(order):
        x, out = out, np.empty_like(out)
        out[0] = x[0]
        for k in range(1, x.shape[0]):
            out[k] = a[k - 1] * out[k - 1] + (1 - a[k - 1]) * 0.5 * (x[k] + x[k - 1])
    return out


def causal_lowpass_derivative(t: np.ndarray, x: np.ndarray, cutoff: float) -> np.ndarray:
    """F[dx/dt] along axis 0: the filter applied to the first difference of ``x`` per interval,
    starting at 0 (at rest)."""
    a, dt = _coefficients(t, cutoff)
    grid = _uniform(dt, cutoff)
    if grid is not None:
        step, c = grid
        return _recursion(np.array([1.0, -1.0]) * (1 - c) / step, c, np.asarray(x, dtype=float))
    out = np.zeros_like(x, dtype=float)
    for k in range(1, x.shape[0]):
        out[k] = a[k - 1] * out[k - 1] + (1 - a[k - 1]) * (x[k] - x[k - 1]) / dt[k - 1]
    return out


__all__ = ["causal_lowpass", "causal_lowpass_derivative"]
