"""Signal processing for identification data (arrays are (N samples, ...) along axis 0).

* :func:`zero_phase_lowpass` — zero-phase Butterworth low-pass (``scipy.signal.sosfiltfilt``), paper 000 Sec. V
  (1 Hz cut-off on 5 ms data) and paper 003 (6 Hz on torques);
* :func:`differentiate` — velocity and acceleration by central differences of (filtered) positions;
* :func:`period_average` — average of M periods of K samples, paper 003 eq. (11);
* :func:`fft_differentiate` — derivatives of periodic data in the frequency domain: keep the
  selected harmonics, multiply by j*omega and -omega^2, transform back (paper 003 Sec. II-C).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import scipy.signal

from ..errors import PayloadEstimationError


class SignalError(PayloadEstimationError):
    """Bad signal-processing input (message names the argument and the constraint)."""


def _signal(x, name: str = "x") -> np.ndarray:
    a = np.asarray(x, dtype=float)
    if a.ndim == 0 or a.shape[0] < 2:
        raise SignalError(f"{name} must have at least 2 samples along axis 0, got shape {a.shape}")
    bad = ~np.isfinite(a)
    if bad.any():
        idx = tuple(int(i) for i in np.argwhere(bad)[0])
        raise SignalError(f"{name} is NaN/inf at index {idx}")
    return a


def _rate(fs: float) -> float:
    if not (np.isfinite(fs) and fs > 0):
        raise SignalError(f"sample rate fs must be a positive number (Hz), got {fs}")
    return float(fs)


def zero_phase_lowpass(x: np.ndarray, cutoff: float, fs: float, order: int = 4) -> np.ndarray:
    """Zero-phase Butterworth low-pass of ``x`` along axis 0.

    cutoff and fs in Hz (0 < cutoff < fs/2); ``order`` of the underlying filter (the forward-backward
    pass doubles the attenuation). Needs more than ~3*(order+1) samples (padding of sosfiltfilt).
    """
    a = _signal(x)
    fs = _rate(fs)
    if not 0 < cutoff < fs / 2:
        raise SignalError(f"cutoff {cutoff} Hz must be in (0, fs/2 = {fs / 2} Hz)")
    if not (isinstance(order, int | np.integer) and 1 <= order <= 12):
        raise SignalError(f"order must be an integer in 1..12, got {order}")
    sos = scipy.signal.butter(order, cutoff, btype="low", fs=fs, output="sos")
    padlen = 3 * (2 * len(sos) + 1)
    if a.shape[0] <= padlen:
        raise SignalError(f"the low-pass filter needs more than {padlen} samples for order {order}, got {a.shape[0]}")
    return scipy.signal.sosfiltfilt(sos, a, axis=0)


def differentiate(x: np.ndarray, dt: float | np.ndarray) -> np.ndarray:
    """d x / dt along axis 0 by second-order central differences (one-sided at the ends).

    ``dt``: the sample period (s) or the time stamps (N,) (s, strictly increasing).
    """
    a = _signal(x)
    if np.ndim(dt) == 0:
        step = float(dt)
        if not (np.isfinite(step) and step > 0):
            raise SignalError(f"dt must be a positive sample period (s), got {dt}")
        return np.gradient(a, step, axis=0, edge_order=2 if a.shape[0] > 2 else 1)
    t = np.asarray(dt, dtype=float)
    if t.shape != (a.shape[0],):
        raise SignalError(f"time stamps have shape {t.shape}, expected ({a.shape[0]},)")
    d = np.diff(t)
    if not np.all(np.isfinite(t)) or (d <= 0).any():
        raise SignalError("time stamps must be finite and strictly increasing")
    return np.gradient(a, t, axis=0, edge_order=2 if a.shape[0] > 2 else 1)


def velocity_acceleration(q: np.ndarray, fs: float, cutoff: float | None = None,
                          order: int = 4) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(q_filtered, dq, ddq) from positions sampled at ``fs`` Hz: optional zero-phase low-pass at
    ``cutoff`` Hz, then central differences twice (paper 000 Sec. V)."""
    fs = _rate(fs)
    qf = zero_phase_lowpass(q, cutoff, fs, order) if cutoff is not None else _signal(q, "q")
    dq = differentiate(qf, 1.0 / fs)
    return qf, dq, differentiate(dq, 1.0 / fs)


def period_average(x: np.ndarray, samples_per_period: int, n_periods: int | None = None) -> np.ndarray:
    """Average of M periods of K samples (paper 003 eq. 11): x_bar(k) = 1/M sum_m x_m(k).

    ``x`` must hold exactly M*K samples along axis 0 (or ``n_periods`` given: the first M*K are used).
    Returns K samples. White noise std drops by sqrt(M).
    """
    a = _signal(x)
    k = int(samples_per_period)
    if k < 1 or k != samples_per_period:
        raise SignalError(f"samples_per_period must be a positive integer, got {samples_per_period}")
    total = a.shape[0]
    if n_periods is None:
        if total % k:
            raise SignalError(
                f"{total} samples are not a whole number of periods of {k} samples "
                f"({total / k:.3f} periods); trim the data or pass n_periods"
            )
        m = total // k
    else:
        m = int(n_periods)
        if m < 1 or m * k > total:
            raise SignalError(f"{m} periods of {k} samples need {m * k} samples, got {total}")
    return a[: m * k].reshape((m, k) + a.shape[1:]).mean(axis=0)


def fft_differentiate(x: np.ndarray, fs: float, harmonics: Sequence[int] | int | None = None,
                      ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Frequency-domain filtering and differentiation of ONE period of periodic data.

    ``x`` holds K samples of one period (axis 0) at ``fs`` Hz. ``harmonics``: indices k >= 0 of
    the kept DFT bins (frequency k*fs/K; an int L keeps 0..L; None keeps all). All other bins are
    zeroed (rectangular window), the kept ones multiplied by j*omega_k and -omega_k^2 with
    omega_k = 2 pi k fs / K. Returns (x_filtered, dx/dt, d2x/dt2). The Nyquist bin of an even K is
    dropped from the derivatives (its derivative is not real).
    """
    a = _signal(x)
    fs = _rate(fs)
    n = a.shape[0]
    spec = np.fft.rfft(a, axis=0)
    nb = spec.shape[0]
    keep = np.zeros(nb, bool)
    if harmonics is None:
        keep[:] = True
    elif np.ndim(harmonics) == 0:
        last = int(harmonics)
        if last < 0 or last >= nb:
            raise SignalError(f"harmonics {harmonics} outside 0..{nb - 1} for {n} samples")
        keep[: last + 1] = True
    else:
        idx = np.asarray(list(harmonics), dtype=int)
        if idx.size and (idx.min() < 0 or idx.max() >= nb):
            raise SignalError(f"harmonic indices must be in 0..{nb - 1} for {n} samples, got {idx.tolist()}")
        keep[idx] = True
    shape = (nb,) + (1,) * (a.ndim - 1)
    mask = keep.reshape(shape)
    omega = (2 * np.pi * fs * np.arange(nb) / n).reshape(shape)
    spec = np.where(mask, spec, 0.0)
    dspec = spec.copy()
    if n % 2 == 0:
        dspec[-1] = 0.0
    xf = np.fft.irfft(spec, n=n, axis=0)
    dx = np.fft.irfft(1j * omega * dspec, n=n, axis=0)
    ddx = np.fft.irfft(-(omega**2) * dspec, n=n, axis=0)
    return xf, dx, ddx


__all__ = [
    "SignalError",
    "differentiate",
    "fft_differentiate",
    "zero_phase_lowpass",
    "period_average",
    "velocity_acceleration",
]
