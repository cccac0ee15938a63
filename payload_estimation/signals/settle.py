"""Static-state detection over a window of joint samples.

The paper (000, Sec. VI-A) waits 1 s at every pose before taking a sample; here the arm is declared
static as soon as the most recent ``window`` seconds satisfy all of

- RMS joint velocity < ``max_velocity`` (rad/s) on every joint (RMS, not mean: a decaying
  oscillation averages out; falls back to the slope of a straight-line fit to the positions when no
  velocity is measured),
- position spread (max - min) < ``max_position_spread`` (rad) on every joint,
- torque standard deviation < ``max_torque_std`` (N m) on every joint,
- torque drift |mean of the second half - mean of the first half| < ``max_torque_drift`` +
  ``torque_drift_relative`` x |mean torque| (N m) on every joint. Heavily loaded proximal joints
  settle last and weigh least in the payload fit. With 0.15 N m white noise and a 0.12 s window at
  1 kHz the limit is about 3.7 sigma of the noise; adding a noise allowance made the CoM worse. The
  tail of a settling transient biases the mean torque: in simulation, capturing as soon as the
  other tests passed moved the CoM by 5 mm. The limit is raised to ``drift_noise_sigmas`` standard
  deviations of the drift statistic itself, sigma_j sqrt(1/n_1 + 1/n_2), where the window holds too
  few samples to resolve the fixed limit (a Python executor that cannot keep up with 1 kHz sees
  ~10-20 samples in 0.12 s: the fixed limit then rejected a truly static arm most of the time).
  sigma_j comes from successive differences, so a drift does not inflate its own allowance. With
  0.15 N m noise and >= 50 samples the fixed limit is the larger one, i.e. unchanged,

and ``dwell`` (s, default 1 s, the paper's value) is the upper bound a caller waits for that.
The static sample is the window mean of q and tau. When the last ``window`` s hold fewer than
``min_average_samples`` samples (a thinned stream), the window reaches back to that many samples,
at most ``max_window`` s: all tests then apply to the longer window, so a thin stream costs time,
not accuracy (in a one-process simulation the estimator saw 6-38 samples per 0.12 s). A history
shorter than both (just after start-up) is "collecting samples", not static: a caller's buffer must
keep more than ``max_window`` s.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

import numpy as np

from ..errors import PayloadEstimationError


class SettleConfigError(PayloadEstimationError):
    """Settle-test values that cannot work together (the message names the value and the rule)."""

@dataclass(frozen=True)
class SettleConfig:
    """Thresholds of :func:`check_static` (SI units)."""

    window: float = 0.12
    min_samples: int = 5
    min_average_samples: int = 30
    max_window: float = 0.4
    max_velocity: float = 0.005
    max_position_spread: float = 5e-4
    max_torque_std: float = 0.5
    max_torque_drift: float = 0.1
    torque_drift_relative: float = 0.005
    drift_noise_sigmas: float = 3.0
    dwell: float = 1.0

    def __post_init__(self):
        for k in ("window", "max_velocity", "max_position_spread", "max_torque_std", "max_torque_drift", "dwell"):
            v = getattr(self, k)
            if not (np.isfinite(v) and v > 0):
                raise SettleConfigError(f"settle {k} must be > 0, got {v}")
        if not (np.isfinite(self.drift_noise_sigmas) and self.drift_noise_sigmas >= 0):
            raise SettleConfigError(f"settle drift_noise_sigmas must be >= 0, got {self.drift_noise_sigmas}")
        if not (np.isfinite(self.torque_drift_relative) and self.torque_drift_relative >= 0):
            raise SettleConfigError(f"settle torque_drift_relative must be >= 0, got {self.torque_drift_relative}")
        if not (np.isfinite(self.max_window) and self.max_window >= self.window):
            raise SettleConfigError(f"settle max_window must be >= window ({self.window} s), got {self.max_window}")
        if self.min_average_samples < self.min_samples:
            raise SettleConfigError(f"settle min_average_samples must be >= min_samples, "
                                    f"got {self.min_average_samples}")
        if self.min_samples < 2:
            raise SettleConfigError(f"settle min_samples must be >= 2, got {self.min_samples}")


@dataclass(frozen=True)
class SettleResult:
    """Outcome of :func:`check_static`: ``static`` and, if not, a ``reason`` an operator can read.

    q (rad), tau (N m): window means (None when not static); samples used; window span (s);
    worst figures: velocity (rad/s), spread (rad), torque std (N m).
    """

    static: bool
    reason: str
    q: np.ndarray | None = None
    tau: np.ndarray | None = None
    samples: int = 0
    span: float = 0.0
    velocity: float = float("nan")
    spread: float = float("nan")
    torque_std: float = float("nan")


def check_static(t, q, dq, tau, config: SettleConfig | None = None,
                 joint_names: tuple[str, ...] | None = None) -> SettleResult:
    """Decide whether the arm was static over the last ``config.window`` seconds of samples.

    t (N,) s increasing; q, tau (N, n); dq (N, n) or None.
    """
    cfg = config or SettleConfig()
    t = np.asarray(t, dtype=float)
    if t.size == 0:
        return SettleResult(False, "no joint_states received")
    q = np.asarray(q, dtype=float).reshape(t.size, -1)
    tau = np.asarray(tau, dtype=float).reshape(t.size, -1)
    sel = t >= t[-1] - cfg.window
    if np.count_nonzero(sel) < cfg.min_average_samples:  # thin stream: reach back for more samples
        if t.size < cfg.min_average_samples and t[-1] - t[0] < cfg.max_window:
            return SettleResult(False, f"collecting samples: {t.size} over {t[-1] - t[0]:.3f} s so far (averages "
                                f"{cfg.min_average_samples} or {cfg.max_window:.2f} s); try again shortly",
                                samples=int(t.size), span=float(t[-1] - t[0]))
        start = max(t[-min(t.size, cfg.min_average_samples)], t[-1] - cfg.max_window)
        sel = t >= start
    t, q, tau = t[sel], q[sel], tau[sel]
    dqw = None if dq is None else np.asarray(dq, dtype=float).reshape(sel.size, -1)[sel]
    names = joint_names or tuple(f"joint {j}" for j in range(q.shape[1]))
    span = float(t[-1] - t[0])
    if t.size < cfg.min_samples or span < 0.5 * cfg.window:
        return SettleResult(False, f"only {t.size} samples over {span:.3f} s (need {cfg.min_samples} over "
                            f"{cfg.window:.3f} s); is joint_states being published?", samples=int(t.size), span=span)
    if dqw is not None:
        vel = np.sqrt(np.mean(dqw ** 2, axis=0))
    else:
        tc = t - t.mean()
        vel = np.abs(tc @ (q - q.mean(axis=0))) / max(float(tc @ tc), 1e-12)
    spread = q.max(axis=0) - q.min(axis=0)
    tstd = tau.std(axis=0)
    half = t.size // 2
    drift = np.abs(tau[half:].mean(axis=0) - tau[:half].mean(axis=0))
    drift_limit = cfg.max_torque_drift + cfg.torque_drift_relative * np.abs(tau.mean(axis=0))
    sigma = np.diff(tau, axis=0).std(axis=0) / np.sqrt(2.0)  # white-noise std, blind to slow drift
    drift_limit = np.maximum(drift_limit, cfg.drift_noise_sigmas * sigma * np.sqrt(1.0 / half + 1.0 / (t.size - half)))
    figures = dict(samples=int(t.size), span=span, velocity=float(vel.max()), spread=float(spread.max()),
                   torque_std=float(tstd.max()))
    checks = (
        (vel, cfg.max_velocity, "moving: RMS velocity of {j} is {v:.4f} rad/s (limit {lim:g})"),
        (spread, cfg.max_position_spread, "moving: position spread of {j} is {v:.5f} rad (limit {lim:g})"),
        (tstd, cfg.max_torque_std, "torque not steady: std of {j} is {v:.3f} N m (limit {lim:g})"),
        (drift, drift_limit, "torque still settling: mean of {j} drifted {v:.3f} N m (limit {lim:g})"),
    )
    for values, lim, text in checks:
        lim = np.broadcast_to(np.asarray(lim, dtype=float), values.shape)
        j = int(np.argmax(values / lim))
        if values[j] >= lim[j]:
            return SettleResult(False, text.format(j=names[j], v=values[j], lim=float(lim[j])), **figures)
    return SettleResult(True, "static", q.mean(axis=0), tau.mean(axis=0), **figures)


class SampleWindow:
    """A bounded ring of recent joint samples (time s, q, dq, tau), thread-compatible via copies.

    ``horizon``: seconds kept; ``max_samples``: hard cap. Appending is O(1) (cheap at 1 kHz).
    """

    def __init__(self, horizon: float = 2.0, max_samples: int = 5000):
        self.horizon = float(horizon)
        self._buf: deque = deque(maxlen=max_samples)

    def append(self, t: float, q: np.ndarray, dq: np.ndarray | None, tau: np.ndarray) -> None:
        if self._buf and t < self._buf[-1][0]:
            self._buf.clear()  # time jumped back (sim reset, bag loop): start over
        self._buf.append((t, q, dq, tau))
        while self._buf and self._buf[0][0] < t - self.horizon:
            self._buf.popleft()

    def clear(self) -> None:
        self._buf.clear()

    def __len__(self) -> int:
        return len(self._buf)

    @property
    def last_time(self) -> float | None:
        return self._buf[-1][0] if self._buf else None

    def arrays(self):
        """(t (N,), q (N, n), dq (N, n) or None, tau (N, n)) copies; empty arrays when no samples."""
        buf = list(self._buf)
        if not buf:
            return np.empty(0), np.empty((0, 0)), None, np.empty((0, 0))
        t = np.array([b[0] for b in buf])
        q = np.array([b[1] for b in buf])
        dq = None if any(b[2] is None for b in buf) else np.array([b[2] for b in buf])
        tau = np.array([b[3] for b in buf])
        return t, q, dq, tau

    def check_static(self, config: SettleConfig | None = None, joint_names=None) -> SettleResult:
        t, q, dq, tau = self.arrays()
        return check_static(t, q, dq, tau, config, joint_names)


__all__ = ["SettleConfig", "SettleResult", "check_static", "SampleWindow"]
