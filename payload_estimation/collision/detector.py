"""Collision detection and isolation on the momentum-observer residual.

A collision is detected when |r_j| exceeds its threshold on any joint j for ``confirm_samples``
consecutive samples; it is released (hysteresis) when every |r_j| is back below
``release_fraction`` x threshold_j. The threshold of joint j at each sample is

    th_j = max(T_j, margin_j + speed_j |dq_j| + n_sigma σ_r,j)

T_j the configured threshold (6 N m, paper 000), margin_j + speed_j |dq_j| an envelope of the
model error (calibrated on a contact-free run, :func:`.thresholds.calibrate_envelope`) and σ_r,j the residual's
noise standard deviation (:attr:`MomentumObserver.residual_noise`): the threshold only rises above
T_j where the error or the noise would otherwise reach it (docs/collision.md).

Isolation from the thresholds alone uses the structure r ≈ J_cᵀ F: joints after the contact link
carry no external torque, so the contact is on (or, if the force loads the last joints only weakly,
beyond) link k = the highest joint whose |r| is significant (above ``isolation_fraction`` x
threshold) between the onset and the detection (plus ``isolation_window`` seconds): a lower bound,
``link_lower_bound``. The exact link, the force and the point come from
:class:`~.contact.ContactTracker` and are attached with :meth:`CollisionDetector.attach_contact`.

Units: residual N m, time s, dq rad/s. Links are numbered 1..n; link k is moved by joint k.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from ..errors import PayloadEstimationError
from ..model.joint_vectors import per_joint
from .contact import ContactEstimate


class DetectorInputError(PayloadEstimationError):
    """A detector argument or sample is malformed; the message names it."""


@dataclass(frozen=True)
class CollisionEvent:
    """One detected collision.

    onset_time: first sample above threshold (s); detection_time: when it was confirmed (s);
    peak: per-joint max |r| during the event so far (N m); peak_max: max over joints (N m);
    peak_joint: index (0-based) of that joint; link (1..n) and link_name: the contact link — the
    contact estimate's once attached, until then the threshold isolation's lower bound (the
    contact is on this link or beyond); link_lower_bound: that lower bound; joints_above: joints
    that crossed their threshold; thresholds: the per-joint thresholds at the detection (N m);
    contact: the :class:`~.contact.ContactEstimate` (force, point, ambiguity) or None;
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
    link_lower_bound: int = 0
    thresholds: np.ndarray | None = None
    contact: ContactEstimate | None = None

    @property
    def active(self) -> bool:
        return self.release_time is None

    @property
    def duration(self) -> float | None:
        """Detection to release (s), None while active."""
        return None if self.release_time is None else self.release_time - self.detection_time

    @property
    def link_ambiguous(self) -> bool:
        """True unless a contact estimate names the link unambiguously."""
        return self.contact is None or self.contact.link_ambiguous

    @property
    def force(self) -> np.ndarray | None:
        """Contact force (N, base frame) when the estimate determines it, else None."""
        c = self.contact
        return None if c is None or c.force is None or c.force_ambiguous else c.force.copy()

    @property
    def point(self) -> np.ndarray | None:
        """Contact point (m, base frame) when observable, else None."""
        c = self.contact
        return None if c is None or c.point is None else c.point.copy()

    def to_dict(self) -> dict:
        """JSON-ready mapping: timing, peak, ``link`` (1-based) / ``link_name`` / ``link_ambiguous``,
        ``force`` (N, base frame) / ``force_norm`` and ``point`` (m, base frame) — None when
        ambiguous or unobservable — and the full ``contact`` estimate (best fit and ranges)."""
        vec = lambda v: None if v is None else [float(x) for x in v]  # noqa: E731
        f = self.force
        return {
            "onset_time": self.onset_time,
            "detection_time": self.detection_time,
            "peak": vec(self.peak),
            "peak_max": self.peak_max,
            "peak_joint": self.peak_joint,
            "link": self.link,
            "link_name": self.link_name,
            "link_ambiguous": self.link_ambiguous,
            "link_lower_bound": self.link_lower_bound,
            "force": vec(f),
            "force_norm": None if f is None else float(np.linalg.norm(f)),
            "force_ambiguous": self.contact is None or self.contact.force_ambiguous,
            "point": vec(self.point),
            "joints_above": list(self.joints_above),
            "thresholds": vec(self.thresholds),
            "release_time": self.release_time,
            "residual_at_release": vec(self.residual_at_release),
            "contact": None if self.contact is None else self.contact.to_dict(),
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

    thresholds T_j: N m (scalar or per joint, default 6 N m as in paper 000); margin (N m) and
    speed (N m s/rad), scalar or per joint: the model-error envelope margin_j + speed_j |dq_j|
    (default 0: fixed thresholds); n_sigma: multiple of the residual noise std passed to
    :meth:`update`; release_fraction in (0, 1]; isolation_fraction in (0, 1]; confirm_samples >= 1
    consecutive samples above a threshold before a detection (debounce against single-sample
    spikes); isolation_window (s) >= 0: how long after the detection the threshold isolation may
    still move to a higher link.
    """

    def __init__(self, n: int, thresholds=6.0, release_fraction: float = 0.5, isolation_fraction: float = 0.15,
                 confirm_samples: int = 1, link_names: tuple[str, ...] | None = None,
                 isolation_window: float = 0.0, margin=0.0, speed=0.0, n_sigma: float = 5.0):
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
        self.margin = per_joint(margin, n, "threshold margin (N m)", nonnegative=True, error=DetectorInputError)
        self.speed = per_joint(speed, n, "threshold speed coefficient (N m s/rad)", nonnegative=True,
                               error=DetectorInputError)
        if not (np.isfinite(n_sigma) and n_sigma >= 0):
            raise DetectorInputError(f"n_sigma must be >= 0, got {n_sigma}")
        self.n_sigma = float(n_sigma)
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
        self._scale = 1.0
        self.scale_thresholds(1.0)
        self.confirm_samples = int(confirm_samples)
        self.link_names = tuple(link_names) if link_names else tuple(f"link_{k + 1}" for k in range(n))
        if len(self.link_names) != n:
            raise DetectorInputError(f"link_names must have {n} names, got {len(self.link_names)}")
        self.events: list[CollisionEvent] = []
        self.skipped = 0
        self.peak_ratio = np.zeros(n)
        """Per joint, the largest |r_j| / th_j over the samples below every threshold (outside events): how close the
        residual came to a detection, 1 the threshold itself (:meth:`reset_peak_ratio` starts it over)."""
        self.reset()

    def scale_thresholds(self, factor) -> None:
        """Use ``factor`` (scalar or one per joint) x the configured thresholds and envelope (and
        release/isolation levels) from now on, e.g. while the payload is only provisionally known;
        1.0 restores them."""
        f = np.asarray(factor, dtype=float)
        if not (np.all(np.isfinite(f)) and np.all(f > 0)) or f.shape not in ((), (self.n,)):
            raise DetectorInputError(f"threshold scale must be > 0 (one value or {self.n}), got {factor}")
        self._scale = f if f.ndim else float(f)
        self._set_levels(self._base_thresholds * self._scale)

    def _set_levels(self, th: np.ndarray) -> None:
        self.thresholds = th
        self.release = th * self._fractions[0]
        self.isolation_level = th * self._fractions[1]

    def current_thresholds(self, dq=None, noise=None) -> np.ndarray:
        """th_j (N m) for joint velocities ``dq`` (rad/s) and residual noise std ``noise`` (N m)."""
        th = self._base_thresholds * self._scale
        if dq is None and noise is None:
            return th
        env = self.margin * self._scale
        if dq is not None:
            env = env + self._scale * self.speed * np.abs(np.asarray(dq, float))
        if noise is not None:
            env = env + self.n_sigma * np.asarray(noise, float)
        return np.maximum(th, env)

    def reset(self) -> None:
        """Back to no collision; the finished-event list is kept (clear ``events`` to forget it)."""
        self._current: CollisionEvent | None = None
        self._above_count = 0
        self._onset: float | None = None
        self._peak = np.zeros(self.n)
        self._iso_peak = np.zeros(self.n)  # peak |r| / isolation level over [onset, detection + isolation_window]
        self._joints_above: set[int] = set()
        self._t_prev: float | None = None

    def carry(self, old: CollisionDetector) -> None:
        """Go on from ``old``'s state (the same joints, a new model of the arm): its finished events, its peak ratio
        and its active or confirming event, so that a contact still there stays one event and its release is
        reported. The time base starts over (:meth:`reset_time`)."""
        if old.n != self.n:
            raise DetectorInputError(f"cannot carry a detector of {old.n} joints into one of {self.n}")
        self.events = list(old.events)
        self.peak_ratio = old.peak_ratio.copy()
        self._current, self._above_count, self._onset = old._current, old._above_count, old._onset
        self._peak, self._iso_peak = old._peak.copy(), old._iso_peak.copy()
        self._joints_above = set(old._joints_above)
        self._t_prev = None

    def reset_peak_ratio(self) -> None:
        """Start :attr:`peak_ratio` over (e.g. for a new task)."""
        self.peak_ratio[:] = 0.0

    def reset_time(self) -> None:
        """Forget the last time stamp only (after a clock jump back); an active event stays active."""
        self._t_prev = None

    @property
    def in_collision(self) -> bool:
        return self._current is not None

    @property
    def current(self) -> CollisionEvent | None:
        """The active event (peak up to the last sample), or None."""
        return self._snapshot() if self._current is not None else None

    def attach_contact(self, contact: ContactEstimate) -> None:
        """Attach the contact estimate of the active event (its link replaces the lower bound)."""
        if self._current is not None:
            self._current = replace(self._current, contact=contact)

    def _snapshot(self) -> CollisionEvent:
        assert self._current is not None
        j = int(np.argmax(self._peak))
        bound = isolate_link(self._iso_peak, np.ones(self.n))
        c = self._current.contact
        link = c.link if c is not None and c.link > 0 else bound
        return replace(self._current, peak=self._peak.copy(), peak_max=float(self._peak[j]), peak_joint=j,
                       link=link, link_name=self.link_names[link - 1] if link else "", link_lower_bound=bound,
                       joints_above=tuple(sorted(self._joints_above)))

    def update(self, t: float, r, dq=None, noise=None) -> CollisionEvent | None:
        """Feed one residual sample (N m), optionally the joint velocities ``dq`` (rad/s, for the
        speed-dependent envelope) and the residual noise std ``noise`` (N m); return the event when
        it is detected and again when released.

        The event returned at detection has ``release_time`` None; the one returned at release is
        final (also appended to :attr:`events`). Non-finite samples or non-increasing time are
        ignored and counted in :attr:`skipped`.
        """
        r = np.asarray(r, dtype=float)
        if r.shape != (self.n,):
            raise DetectorInputError(f"residual must have {self.n} values, got shape {r.shape}")
        t = float(t)
        if not (np.isfinite(t) and np.isfinite(r).all()) or (self._t_prev is not None and t <= self._t_prev):
            self.skipped += 1
            return None
        self._t_prev = t
        if dq is not None or noise is not None:
            self._set_levels(self.current_thresholds(dq, noise))
        a = np.abs(r)
        above = a > self.thresholds
        if self._current is None:
            if above.any():
                if self._above_count == 0:
                    self._onset = t
                    self._peak[:] = 0.0
                    self._iso_peak[:] = 0.0
                    self._joints_above.clear()
                self._above_count += 1
                np.maximum(self._peak, a, out=self._peak)
                np.maximum(self._iso_peak, a / self.isolation_level, out=self._iso_peak)
                self._joints_above.update(np.flatnonzero(above).tolist())
                if self._above_count >= self.confirm_samples:
                    self._current = CollisionEvent(self._onset, t, self._peak.copy(), 0.0, 0, 0, "", (),
                                                   thresholds=self.thresholds.copy())
                    return self._snapshot()
            else:
                self._above_count = 0
                np.maximum(self.peak_ratio, a / self.thresholds, out=self.peak_ratio)
            return None
        np.maximum(self._peak, a, out=self._peak)
        if t <= self._current.detection_time + self.isolation_window:
            np.maximum(self._iso_peak, a / self.isolation_level, out=self._iso_peak)
        self._joints_above.update(np.flatnonzero(above).tolist())
        if (a < self.release).all():
            ev = replace(self._snapshot(), release_time=t, residual_at_release=r.copy())
            self.events.append(ev)
            self._current = None
            self._above_count = 0
            return ev
        return None


__all__ = ["CollisionDetector", "CollisionEvent", "DetectorInputError", "isolate_link"]
