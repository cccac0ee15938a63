"""From a recording to regression-ready samples: positions, velocities, accelerations, torques.

Two paths (paper 003 Sec. II-C, paper 000 Sec. V):

* periodic excitation -- M whole periods averaged (eq. 11), the excited harmonics of the averaged
  positions differentiated in the DFT domain, the averaged torque low-passed in the DFT domain;
* any recording -- zero-phase Butterworth low-pass of q and tau (``scipy.signal.sosfiltfilt``),
  velocities and accelerations by central differences, filter edges dropped.

Real recordings are taken as they are: irregular stamps are resampled to a uniform grid
(:func:`.recording.resample`), gaps longer than ``max_gap`` split the recording into segments that
are filtered separately; recorded velocities are either used or compared with differentiated
positions (:class:`VelocityCheck`), never silently dropped.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .filters import SignalError, differentiate, fft_differentiate, period_average, zero_phase_lowpass
from .resample import MAX_GAP, Resampled, resample
from .samples import SampleDataError, Samples


class PreprocessingError(SignalError):
    """A recording that cannot be preprocessed as asked (no stamps, too short, rate too low for the cutoff)."""


VELOCITY_SOURCES = ("auto", "positions", "recorded")
"""Where velocities come from: differentiated positions, the recorded dq, or auto (recorded when present)."""


@dataclass(frozen=True)
class VelocityCheck:
    """Recorded dq against d/dt of the positions, both low-passed alike (rad/s, s).

    ``rms`` per joint of their difference, ``relative`` to the RMS speed, ``lag``: how much the
    recorded velocity lags the differentiated positions (first-order fit; > 0: recorded is late).
    """

    rms: np.ndarray
    relative: np.ndarray
    lag: float

    def describe(self) -> str:
        return (f"recorded dq vs d/dt q: RMS difference {np.sqrt(np.mean(self.rms ** 2)):.4g} rad/s "
                f"({100 * float(np.max(self.relative)):.1f} % of the RMS speed at worst), recorded lags by "
                f"{1e3 * self.lag:.1f} ms")


def velocity_check(dq_recorded: np.ndarray, dq_positions: np.ndarray, ddq_positions: np.ndarray) -> VelocityCheck:
    """:class:`VelocityCheck` of filtered recorded and position-derived velocities (N x n)."""
    diff = dq_recorded - dq_positions
    rms = np.sqrt(np.mean(diff ** 2, axis=0))
    ref = np.sqrt(np.mean(dq_positions ** 2, axis=0))
    rel = np.where(ref > 0, rms / np.where(ref > 0, ref, 1.0), 0.0)
    den = float(np.sum(ddq_positions ** 2))
    lag = -float(np.sum(diff * ddq_positions)) / den if den > 0 else 0.0
    return VelocityCheck(rms, rel, lag)


@dataclass(frozen=True)
class Preprocessed:
    """Samples ready for regression: q, dq, ddq, tau (N x n), their times t (N,) s, and how they
    were obtained (``describe()`` says it in words)."""

    q: np.ndarray
    dq: np.ndarray
    ddq: np.ndarray
    tau: np.ndarray
    method: str
    periods: int = 0
    fs: float = 0.0
    t: np.ndarray | None = None
    velocity: str = "positions"
    cutoff: float = 0.0
    order: int = 4
    edge: float = 0.0
    segments: int = 1
    resampling: str = ""
    velocity_check: VelocityCheck | None = None

    @property
    def n_samples(self) -> int:
        return int(self.q.shape[0])

    def describe(self) -> str:
        """Which samples and which filter: what an RMS over these samples means."""
        if self.method.startswith("period"):
            return (f"{self.n_samples} samples of one period averaged over {self.periods} periods at {self.fs:.6g} Hz; "
                    f"excited harmonics of q differentiated in the DFT domain; torque low-passed at {self.cutoff:g} Hz "
                    "(Butterworth magnitude, zero phase, in the DFT domain)")
        span = "" if self.t is None or not self.t.size else f", t = {self.t[0]:.3f}..{self.t[-1]:.3f} s"
        seg = f" in {self.segments} segments" if self.segments > 1 else ""
        vel = "the recorded dq (low-passed alike)" if self.velocity == "recorded" else "differentiated q"
        return (f"{self.n_samples} samples at {self.fs:.6g} Hz{seg}{span} ({self.resampling}); q and tau "
                f"low-passed by a zero-phase order-{self.order} Butterworth at {self.cutoff:g} Hz (forward-backward); "
                f"velocities from {vel}, accelerations by central differences; the first and last "
                f"{self.edge:.3f} s of each segment dropped (filter edges)")


# --- periodic recordings -------------------------------------------------------------------------

def _periodic_lowpass(x: np.ndarray, fs: float, cutoff: float, order: int) -> np.ndarray:
    """Low-pass of one period in the DFT domain with the squared magnitude of the *analog*
    Butterworth prototype, |H(f)|^2 = 1 / (1 + (f / cutoff)^(2 order)): zero phase and no edges, as
    a forward-backward pass would give; the digital filter of :func:`.filters.zero_phase_lowpass` differs only
    near fs/2 (bilinear warping), negligible for cutoff << fs."""
    spec = np.fft.rfft(x, axis=0)
    f = np.fft.rfftfreq(x.shape[0], 1.0 / fs)
    gain = 1.0 / (1.0 + (f / cutoff) ** (2 * order))
    return np.fft.irfft(spec * gain[:, None], n=x.shape[0], axis=0)


def uniform_recording(samples: Samples, rate: float | None = None, max_gap: float = MAX_GAP) -> Resampled:
    """:func:`recording.resample` with identification's wording for what it cannot use."""
    if samples.t is None:
        raise PreprocessingError("the recording has no time stamps (CSV column 't' or the bag's stamps); "
                                  "identification from motion needs them to derive velocities and accelerations")
    try:
        return resample(samples, rate, max_gap)
    except SampleDataError as exc:
        raise PreprocessingError(str(exc)) from exc


def periodic_rate(samples: Samples, period: float) -> float:
    """A rate near the recording's median one that puts a whole number of samples in ``period`` s."""
    fs = uniform_recording(samples).rate
    k = max(1, int(round(period * fs)))
    return k / period


def align_to_trajectory(samples: Samples, q_desired_period: np.ndarray, fs: float) -> int:
    """Index of the sample where the (first) period of the desired trajectory starts, by matching
    the measured positions against one period of the desired ones (coarse-to-fine search)."""
    k = q_desired_period.shape[0]
    q = samples.q
    span = q.shape[0] - k
    if span < 0:
        raise PreprocessingError(f"recording has {q.shape[0]} samples, shorter than one period ({k})")
    stride = max(1, k // 400)
    ref = q_desired_period[::stride]

    def err(s):
        return float(np.mean((q[s:s + k:stride][: len(ref)] - ref) ** 2))

    step = max(1, int(fs * 0.02))
    coarse = np.arange(0, span + 1, step)
    errs = np.array([err(int(c)) for c in coarse])
    # Every period start matches equally well: take the first shift that is (nearly) as good as the best.
    thr = errs.min() + 0.05 * (np.median(errs) - errs.min())
    first = int(np.argmax(errs <= thr))
    while first + 1 < errs.size and errs[first + 1] < errs[first]:
        first += 1
    best = int(coarse[first])
    fine = range(max(0, best - int(fs * 0.02)), min(span, best + int(fs * 0.02)) + 1)
    return min(fine, key=err)


def preprocess_periodic(samples: Samples, period: float, harmonics: int, torque_cutoff: float = 6.0,
                        order: int = 4, start_index: int = 0, skip_periods: int = 0) -> Preprocessed:
    """Period averaging (eq. 11), frequency-domain differentiation of q (harmonics 0..``harmonics``
    of 1/period), zero-phase Butterworth magnitude on the averaged torque (paper: order 4, 6 Hz).

    ``samples`` must be uniformly sampled with a whole number of samples per period (resample
    irregular recordings first at :func:`periodic_rate`; ``start_index`` refers to those samples).
    """
    res = uniform_recording(samples)
    if res.resampled or len(res.segments) > 1:
        raise PreprocessingError(f"periodic processing needs one uniformly sampled stretch; this recording has "
                                  f"irregular stamps or gaps ({res.describe()}): resample it at periodic_rate() first")
    fs = res.rate
    k = int(round(period * fs))
    if abs(k - period * fs) > 1e-3 * k:
        raise PreprocessingError(f"period {period} s is not a whole number of samples at {fs:.6g} Hz")
    m = (samples.n_samples - start_index) // k - skip_periods
    if m < 1:
        raise PreprocessingError(f"recording holds {(samples.n_samples - start_index) / k:.2f} periods of "
                                  f"{period} s after sample {start_index}; need at least {skip_periods + 1}")
    if not 0 < torque_cutoff < fs / 2:
        raise PreprocessingError(_rate_too_low(fs, torque_cutoff))
    s0 = start_index + skip_periods * k
    q_avg = period_average(samples.q[s0:s0 + m * k], k)
    tau_avg = period_average(samples.tau[s0:s0 + m * k], k)
    qf, dq, ddq = fft_differentiate(q_avg, fs, harmonics)
    tau = _periodic_lowpass(tau_avg, fs, torque_cutoff, order)
    return Preprocessed(qf, dq, ddq, tau, "period-average+fft", m, fs, np.arange(k) / fs, "positions",
                        torque_cutoff, order)


# --- any recording -------------------------------------------------------------------------------

def _rate_too_low(fs: float, cutoff: float) -> str:
    return (f"the recording's rate, {fs:.4g} Hz, is too low for a {cutoff:g} Hz torque filter (the rate must exceed "
            f"twice the cut-off; {8 * cutoff:g} Hz or more is advisable): record faster or choose a cut-off below "
            f"{fs / 2:.3g} Hz (--torque-cutoff / --cutoff)")


def edge_samples(fs: float, cutoff: float) -> int:
    """Samples dropped at each end of a filtered segment: two cut-off periods (plus 2), where the
    zero-phase filter's padding corrupts the second derivative."""
    return int(2.0 * fs / cutoff) + 2


def preprocess_filtered(samples: Samples, cutoff: float = 6.0, order: int = 4, velocity: str = "positions",
                        rate: float | None = None, max_gap: float = MAX_GAP) -> Preprocessed:
    """Zero-phase low-pass of q and tau at ``cutoff`` Hz, central differences, edges dropped.

    The recording is first made uniform (:func:`recording.resample` at ``rate`` Hz, default its
    median rate; gaps > ``max_gap`` s split it into segments, each filtered on its own; segments
    too short to filter are skipped and said so). ``velocity``: "positions" (differentiate q),
    "recorded" (the recorded dq, low-passed alike, differentiated for ddq) or "auto" (recorded when
    present). With recorded dq the disagreement with d/dt q is measured either way.
    """
    if velocity not in VELOCITY_SOURCES:
        raise PreprocessingError(f"velocity source must be one of {', '.join(VELOCITY_SOURCES)}, got {velocity!r}")
    if velocity == "recorded" and samples.dq is None:
        raise PreprocessingError("velocity 'recorded' needs dq columns (or JointState velocities) in the recording")
    use_recorded = samples.dq is not None and velocity in ("recorded", "auto")
    res = uniform_recording(samples, rate, max_gap)
    fs = res.rate
    if not 0 < cutoff < fs / 2:
        raise PreprocessingError(_rate_too_low(fs, cutoff))
    cut = edge_samples(fs, cutoff)
    parts = []
    checks = []
    short = []
    for seg in res.segments:
        if seg.n_samples <= 4 * cut:
            short.append(seg)
            continue
        qf = zero_phase_lowpass(seg.q, cutoff, fs, order)
        dq_q = differentiate(qf, 1.0 / fs)
        ddq_q = differentiate(dq_q, 1.0 / fs)
        dq, ddq = dq_q, ddq_q
        if seg.dq is not None:
            dq_r = zero_phase_lowpass(seg.dq, cutoff, fs, order)
            ddq_r = differentiate(dq_r, 1.0 / fs)
            checks.append((dq_r[cut:-cut], dq_q[cut:-cut], ddq_q[cut:-cut]))
            if use_recorded:
                dq, ddq = dq_r, ddq_r
        tau = zero_phase_lowpass(seg.tau, cutoff, fs, order)
        sl = slice(cut, seg.n_samples - cut)
        parts.append((seg.t[sl], qf[sl], dq[sl], ddq[sl], tau[sl]))
    if not parts:
        longest = max(s.t[-1] - s.t[0] for s in res.segments)
        raise PreprocessingError(
            f"the recording is too short to filter: its longest continuous stretch lasts {longest:.3f} s "
            f"({max(s.n_samples for s in res.segments)} samples at {fs:.4g} Hz); a {cutoff:g} Hz zero-phase filter "
            f"drops {cut / fs:.3f} s at each end, so at least {4 * cut / fs:.2f} s of continuous motion are needed -- "
            "record a longer motion or choose a lower cut-off")
    notes = res.describe()
    if short:
        notes += (f"; {len(short)} segment(s) shorter than {4 * cut / fs:.2f} s skipped "
                  f"({sum(s.n_samples for s in short)} samples)")
    t, q, dq, ddq, tau = (np.concatenate([p[i] for p in parts]) for i in range(5))
    check = None
    if checks:
        check = velocity_check(*(np.concatenate([c[i] for c in checks]) for i in range(3)))
    return Preprocessed(q, dq, ddq, tau, "lowpass+differences", 0, fs, t, "recorded" if use_recorded else "positions",
                        cutoff, order, cut / fs, len(parts), notes, check)


__all__ = [
    "VELOCITY_SOURCES",
    "Preprocessed",
    "VelocityCheck",
    "align_to_trajectory",
    "edge_samples",
    "periodic_rate",
    "preprocess_filtered",
    "preprocess_periodic",
    "uniform_recording",
    "velocity_check",
]
