"""Causal first-order low-pass filters on irregular stamps (s): a signal and its filtered derivative.

The filtered payload formulation uses them instead of differentiated velocities.
"""

from __future__ import annotations

import numpy as np

from .filters import SignalError


def _coefficients(t: np.ndarray, cutoff: float) -> tuple[np.ndarray, np.ndarray]:
    dt = np.diff(t)
    if np.any(~np.isfinite(dt)) or np.any(dt <= 0):
        k = int(np.argmax(~(dt > 0)))
        raise SignalError(f"time stamps must increase: sample {k + 1} at {t[k + 1]!r} s follows {t[k]!r} s")
    if not (np.isfinite(cutoff) and cutoff > 0):
        raise SignalError(f"cutoff must be a frequency > 0 Hz, got {cutoff}")
    return np.exp(-2 * np.pi * cutoff * dt), dt


def causal_lowpass(t: np.ndarray, x: np.ndarray, cutoff: float, order: int = 1) -> np.ndarray:
    """F[x] along axis 0 (samples at times ``t``): ``order`` first-order sections at ``cutoff`` Hz,
    trapezoidal input, each starting in steady state on its first input."""
    a, _ = _coefficients(t, cutoff)
    out = np.asarray(x, dtype=float)
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
    out = np.zeros_like(x, dtype=float)
    for k in range(1, x.shape[0]):
        out[k] = a[k - 1] * out[k - 1] + (1 - a[k - 1]) * (x[k] - x[k - 1]) / dt[k - 1]
    return out


__all__ = ["causal_lowpass", "causal_lowpass_derivative"]
