"""The collision monitor's per-sample core: observer -> detector -> contact estimate, one call per sample.

:class:`CollisionMonitor` is what the ROS node, the ``residual`` command, the demo and the bench run:
``update(t, q, dq, tau)`` returns the residual, the detection/release event of this sample (if any)
and a new contact estimate (once per event, ``ContactConfig.delay`` s after the detection; it is
also attached to the event). Time faults are handled here: a sample stamped more than
``time_jump_back`` s before the last accepted one (a stream or simulation restart), or the
``max_time_skips``-th non-increasing stamp in a row (the stream is behind a stamp far in the
future), re-initialises the observer's time base — keeping the residual, so a contact or an
unmodelled load that is still there stays visible — and the sample is used.

Units: SI (s, rad, rad/s, N m, N, m); joint order: the model's.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from ..model.dynamics import RigidBodyDynamics
from ..model.parameters import BodyInertia
from .contact import ContactConfig, ContactEstimate, ContactLocator, ContactTracker
from .detector import CollisionDetector, CollisionEvent
from .geometry import LinkGeometry
from .observer import JointFriction, MomentumObserver, ObserverInputError


@dataclass(frozen=True)
class MonitorConfig:
    """Gains and thresholds of :class:`CollisionMonitor` (defaults: docs/collision.md).

    gains K_I (1/s), thresholds T_j (N m), margin (N m) and speed (N m s/rad) of the model-error
    envelope, n_sigma, torque_noise (N m) and velocity_noise (rad/s) of the sensors: scalars or one
    per joint (see :class:`CollisionDetector`, :class:`MomentumObserver`). release_fraction,
    isolation_fraction, confirm_samples: as the detector. max_gap (s), quadrature: as the observer.
    time_jump_back (s), max_time_skips: time-fault re-initialisation (module docstring).
    contact: contact-estimation settings, or None for detection only.
    """

    gains: float | tuple[float, ...] = 150.0
    thresholds: float | tuple[float, ...] = 6.0
    margin: float | tuple[float, ...] = 0.0
    speed: float | tuple[float, ...] = 0.0
    n_sigma: float = 5.0
    torque_noise: float | tuple[float, ...] = 0.0
    velocity_noise: float | tuple[float, ...] = 0.0
    release_fraction: float = 0.5
    isolation_fraction: float = 0.15
    confirm_samples: int = 3
    max_gap: float = 0.1
    quadrature: str = "trapezoid"
    time_jump_back: float = 0.5
    max_time_skips: int = 50
    contact: ContactConfig | None = field(default_factory=ContactConfig)

    def __post_init__(self):
        if not (math.isfinite(self.time_jump_back) and self.time_jump_back > 0):
            raise ObserverInputError(f"time_jump_back must be > 0 s, got {self.time_jump_back}")
        if int(self.max_time_skips) < 1:
            raise ObserverInputError(f"max_time_skips must be >= 1, got {self.max_time_skips}")


@dataclass(frozen=True)
class MonitorStep:
    """One sample's output: residual r (N m); the detection or release event of this sample, or None;
    the contact estimate made at this sample, or None."""

    residual: np.ndarray
    event: CollisionEvent | None = None
    contact: ContactEstimate | None = None


class CollisionMonitor:
    """Observer, detector and contact tracker of one arm (module docstring).

    ``dyn``: the unloaded model; ``friction``: optional observer friction model; ``link_names``
    for events and estimates (default ``link_k``); ``geometry``: link capsules for the contact
    estimate (default from the description). Attributes :attr:`observer`, :attr:`detector`,
    :attr:`tracker` (None without contact estimation); :attr:`restarts` counts time faults;
    :attr:`explain` (t, q, r, payload) -> the part of r (N m) an announced payload change explains, or None
    (:meth:`.payload_change.PayloadWatch.explain`): the detector then judges r minus that part.
    """

    def __init__(self, dyn: RigidBodyDynamics, config: MonitorConfig | None = None,
                 friction: JointFriction | None = None, link_names: tuple[str, ...] | None = None,
                 geometry: LinkGeometry | None = None):
        cfg = config or MonitorConfig()
        self.config = cfg
        self.dyn = dyn
        self.observer = MomentumObserver(dyn, cfg.gains, friction=friction, max_gap=cfg.max_gap,
                                         torque_noise=cfg.torque_noise, velocity_noise=cfg.velocity_noise,
                                         quadrature=cfg.quadrature)
        self.detector = CollisionDetector(dyn.n, cfg.thresholds, release_fraction=cfg.release_fraction,
                                          isolation_fraction=cfg.isolation_fraction,
                                          confirm_samples=cfg.confirm_samples, link_names=link_names,
                                          margin=cfg.margin, speed=cfg.speed, n_sigma=cfg.n_sigma)
        self.tracker = None if cfg.contact is None else ContactTracker(
            ContactLocator(dyn, geometry, cfg.contact, self.detector.link_names))
        self._noisy = bool(np.any(self.observer.torque_noise > 0) or np.any(self.observer.velocity_noise > 0))
        self._dynamic = self._noisy or bool(np.any(self.detector.speed > 0) or np.any(self.detector.margin > 0))
        self.restarts = 0
        self.explain: Callable[[float, np.ndarray, np.ndarray, BodyInertia | None], np.ndarray | None] | None = None

    def set_payload(self, body: BodyInertia | None, gravity_only: bool = False) -> bool:
        """The observer's payload (payload frame), see :meth:`MomentumObserver.set_payload` (True: the residual
        was moved to the new model at once, the arm at rest)."""
        return self.observer.set_payload(body, gravity_only)

    def carry(self, old: CollisionMonitor) -> None:
        """Go on from ``old`` (the same arm under a new model): its residual and its detector's events, active one
        included, so a contact that lasts through the model change is neither lost nor detected twice."""
        self.observer.continue_residual(old.observer.residual)
        self.detector.carry(old.detector)

    def reset(self, keep_residual: bool = True) -> None:
        """Re-initialise the time base (observer, detector clock, contact history); an active event
        stays active. ``keep_residual`` False also zeroes r (a fresh start)."""
        self.observer.reset(keep_residual=keep_residual)
        self.detector.reset_time()
        if self.tracker is not None:
            self.tracker.reset()

    def _time_fault(self, t: float) -> bool:
        last = self.observer.last_time
        if last is None or not math.isfinite(t) or t > last:
            return False
        return (last - t > self.config.time_jump_back
                or self.observer.consecutive_time_skips + 1 >= self.config.max_time_skips)

    def update(self, t: float, q, dq, tau) -> MonitorStep:
        """Feed one joint-state sample (t s, q rad, dq rad/s, measured τ N m)."""
        if self._time_fault(float(t)):
            self.restarts += 1
            self.reset(keep_residual=True)
        accepted = self.observer.accepted
        r = self.observer.update(t, q, dq, tau)
        if self.observer.accepted == accepted:
            return MonitorStep(r)
        r_det = r
        if self.explain is not None:
            expected = self.explain(t, np.asarray(q, float), r, self.observer.payload)
            if expected is not None:
                r_det = r - expected
        if self._dynamic:
            ev = self.detector.update(t, r_det, dq, self.observer.residual_noise if self._noisy else None)
        else:
            ev = self.detector.update(t, r_det)
        contact = None
        if self.tracker is not None:
            contact = self.tracker.update(t, q, self.observer.disturbance, self.detector.current, dq=dq)
            if contact is not None:
                self.detector.attach_contact(contact)
        return MonitorStep(r, ev, contact)

    def events(self) -> list[CollisionEvent]:
        """Finished events plus the active one (if any)."""
        cur = self.detector.current
        return list(self.detector.events) + ([cur] if cur is not None else [])


def replay(monitor: CollisionMonitor, t, q, dq, tau) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Run ``monitor`` over arrays (N samples x n joints); (r (N, n) N m, in-collision flag (N,), gap flag (N,):
    the samples the observer reached over a gap, holding r over the step before them)."""
    n_s = len(t)
    r = np.empty((n_s, monitor.dyn.n))
    flag = np.zeros(n_s, dtype=bool)
    gap = np.zeros(n_s, dtype=bool)
    obs = monitor.observer
    for k in range(n_s):
        before = obs.gaps
        r[k] = monitor.update(t[k], q[k], dq[k], tau[k]).residual
        flag[k] = monitor.detector.in_collision
        gap[k] = obs.gaps > before
    return r, flag, gap


__all__ = ["CollisionMonitor", "MonitorConfig", "MonitorStep", "replay"]
