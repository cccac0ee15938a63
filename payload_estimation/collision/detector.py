"""Collision detection and isolation on the momentum-observer residual.

A collision is detected when |r_j| exceeds its threshold on any joint j for ``confirm_samples``
consecutive samples; it is released (hysteresis) when every |r_j| is back below
``release_fraction`` x threshold_j. Isolation uses the structure r ≈ J_cᵀ F: joints after the
contact link carry no external torque, so the contact is on (or, if the force happens to load the
last joints only weakly, beyond) link k = the highest joint whose |r| is significant (above
``isolation_fraction`` x threshold) between the onset and the detection (plus ``isolation_window``
seconds). Isolation is frozen then, before a stop reaction's own transient (deceleration torques of
unmodelled payload inertia, model error) can load other joints; the peak keeps being tracked.

Units: residual N m, time s. Links are numbered 1..n; link k is moved by joint k.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np


class DetectorInputError(ValueError):
    """A detector argument or sample is malformed; the message names it."""


@dataclass(frozen=True)
class CollisionEvent:
    """One detected collision.

    onset_time: first sample above threshold (s); detection_time: when it was confirmed (s);
    peak: per-joint max |r| during the event so far (N m); peak_max: max over joints (N m);
    peak_joint: index (0-based) of that joint; link: isolated contact link (1..n, the contact is on
    this link or beyond; from the residual up to the detection, see module docstring); link_name
    (``link_k``); joints_above: joints that crossed their threshold;
    release_time (s) and residual_at_release (N m) are None while the event is active.
    """

    onset_time: float
    detection_time: float
    peak: np.ndarray
    peak_max: float
    peak_joint: int
    link: int
    link_name: str
    joints_above: tuple[int, ...]
    release_time: float | None = None
    residual_at_release: np.ndarray | None = None

    @property
    def active(self) -> bool:
        return self.release_time is None

    @property
    def duration(self) -> float | None:
        """Detection to release (s), None while active."""
        return None if self.release_time is None else self.release_time - self.detection_time

    def to_dict(self) -> dict:
        """JSON-ready mapping."""
        return {
            "onset_time": self.onset_time,
            "detection_time": self.detection_time,
            "peak": [float(x) for x in self.peak],
            "peak_max": self.peak_max,
            "peak_joint": self.peak_joint,
            "link": self.link,
            "link_name": self.link_name,
            "joints_above": list(self.joints_above),
            "release_time": self.release_time,
            "residual_at_release": None if self.residual_at_release is None
            else [float(x) for x in self.residual_at_release],
        }


def isolate_link(peak: np.ndarray, level: np.ndarray) -> int:
    """Contact link (1..n) from per-joint peak |r| and significance levels: highest significant joint.

    Returns 0 if no joint is significant (cannot happen for a detected event since a threshold
    crossing is significant).
    """
    sig = np.flatnonzero(np.abs(peak) > level)
    return int(sig[-1]) + 1 if sig.size else 0


class CollisionDetector:
    """Thresholds with hysteresis on the residual; one :meth:`update` per observer sample.

    thresholds: N m (scalar or per joint, default 6 N m as in paper 000); release_fraction in
    (0, 1]; isolation_fraction in (0, 1]; confirm_samples >= 1 consecutive samples above a
    threshold before a detection (debounce against single-sample spikes); isolation_window (s) >= 0:
    how long after the detection the isolation may still move to a higher link.
    """

    def __init__(self, n: int, thresholds=6.0, release_fraction: float = 0.5, isolation_fraction: float = 0.15,
                 confirm_samples: int = 1, link_names: tuple[str, ...] | None = None,
                 isolation_window: float = 0.0):
        if n < 1:
            raise DetectorInputError(f"number of joints must be >= 1, got {n}")
        self.n = n
        th = np.asarray(thresholds, dtype=float)
        if th.ndim == 0:
            th = np.full(n, float(th))
        if th.shape != (n,):
            raise DetectorInputError(f"thresholds must be a scalar or {n} values (one per joint), got shape {th.shape}")
        if not np.all(np.isfinite(th)) or np.any(th <= 0):
            raise DetectorInputError(f"thresholds must be finite and > 0 N m, got {th.tolist()}")
        if not 0 < release_fraction <= 1:
            raise DetectorInputError(f"release_fraction must be in (0, 1], got {release_fraction}")
        if not 0 < isolation_fraction <= 1:
            raise DetectorInputError(f"isolation_fraction must be in (0, 1], got {isolation_fraction}")
        if int(confirm_samples) < 1:
            raise DetectorInputError(f"confirm_samples must be >= 1, got {confirm_samples}")
        if not (np.isfinite(isolation_window) and isolation_window >= 0):
            raise DetectorInputError(f"isolation_window must be >= 0 s, got {isolation_window}")
        self.isolation_window = float(isolation_window)
        self._base_thresholds = th
        self._fractions = (float(release_fraction), float(isolation_fraction))
        self.scale_thresholds(1.0)
        self.confirm_samples = int(confirm_samples)
        self.link_names = tuple(link_names) if link_names else tuple(f"link_{k + 1}" for k in range(n))
        if len(self.link_names) != n:
            raise DetectorInputError(f"link_names must have {n} names, got {len(self.link_names)}")
        self.events: list[CollisionEvent] = []
        self.skipped = 0
        self.reset()

    def scale_thresholds(self, factor: float) -> None:
        """Use ``factor`` x the configured thresholds (and release/isolation levels) from now on, e.g.
        while the payload is only provisionally known; 1.0 restores them."""
        if not (np.isfinite(factor) and factor > 0):
            raise DetectorInputError(f"threshold scale must be > 0, got {factor}")
        self.thresholds = self._base_thresholds * float(factor)
        self.release = self.thresholds * self._fractions[0]
        self.isolation_level = self.thresholds * self._fractions[1]

    def reset(self) -> None:
        """Back to no collision; the finished-event list is kept (clear ``events`` to forget it)."""
        self._current: CollisionEvent | None = None
        self._above_count = 0
        self._onset: float | None = None
        self._peak = np.zeros(self.n)
        self._iso_peak = np.zeros(self.n)  # peak |r| over [onset, detection + isolation_window]
        self._joints_above: set[int] = set()
        self._t_prev: float | None = None

    @property
    def in_collision(self) -> bool:
        return self._current is not None

    @property
    def current(self) -> CollisionEvent | None:
        """The active event (peak up to the last sample), or None."""
        return self._snapshot() if self._current is not None else None

    def _snapshot(self) -> CollisionEvent:
        assert self._current is not None
        j = int(np.argmax(self._peak))
        link = isolate_link(self._iso_peak, self.isolation_level)
        return replace(self._current, peak=self._peak.copy(), peak_max=float(self._peak[j]), peak_joint=j,
                       link=link, link_name=self.link_names[link - 1] if link else "",
                       joints_above=tuple(sorted(self._joints_above)))

    def update(self, t: float, r) -> CollisionEvent | None:
        """Feed one residual sample; return the event when it is detected and again when released.

        The event returned at detection has ``release_time`` None; the one returned at release is
        final (also appended to :attr:`events`). Non-finite samples or non-increasing time are
        ignored and counted in :attr:`skipped`.
        """
        r = np.asarray(r, dtype=float)
        if r.shape != (self.n,):
            raise DetectorInputError(f"residual must have {self.n} values, got shape {r.shape}")
        t = float(t)
        if not (np.isfinite(t) and np.all(np.isfinite(r))) or (self._t_prev is not None and t <= self._t_prev):
            self.skipped += 1
            return None
        self._t_prev = t
        a = np.abs(r)
        above = a > self.thresholds
        if self._current is None:
            if above.any():
                if self._above_count == 0:
                    self._onset = t
                    self._peak[:] = 0.0
                    self._joints_above.clear()
                self._above_count += 1
                np.maximum(self._peak, a, out=self._peak)
                self._iso_peak[:] = self._peak
                self._joints_above.update(np.flatnonzero(above).tolist())
                if self._above_count >= self.confirm_samples:
                    self._current = CollisionEvent(self._onset, t, self._peak.copy(), 0.0, 0, 0, "", ())
                    return self._snapshot()
            else:
                self._above_count = 0
            return None
        np.maximum(self._peak, a, out=self._peak)
        if t <= self._current.detection_time + self.isolation_window:
            np.maximum(self._iso_peak, a, out=self._iso_peak)
        self._joints_above.update(np.flatnonzero(above).tolist())
        if np.all(a < self.release):
            ev = replace(self._snapshot(), release_time=t, residual_at_release=r.copy())
            self.events.append(ev)
            self._current = None
            self._above_count = 0
            return ev
        return None


__all__ = ["CollisionDetector", "CollisionEvent", "DetectorInputError", "isolate_link"]
