"""Announced grasps and releases: a residual that a payload change explains is not a collision.

When the gripper closes on an unknown object (or opens), the unloaded (or loaded) model misses the
payload's gravity torque Y_L,g(q) Δp (paper 000 eq. 27, Δp = (Δm, Δ(m c)) in the payload frame) and the
residual, which estimates the external torque, steps by -Y_L,g(q) Δp: expected physics, not a contact.
After the user announces the change (:meth:`PayloadWatch.announce`), for ``window`` s the detector sees
the residual *minus* the best payload change that explains it (:func:`explain_payload_change`): the
weighted least-squares Δp whose total payload p_model + Δp is a plausible body (mass within the
announced range, CoM within ``max_com_radius``). A contact is still detected when its torque is not
what a payload hanging from the payload frame could produce (a force that is not vertical, not at the
tool, or heavier than ``max_payload``); only the part of it such a payload explains is hidden.

Meanwhile the provisional payload (:class:`.provisional.ProvisionalPayload`) is learnt at rest, each rest
block replacing the last one (the load may still change while the window is open); after the window the
monitor carries that provisional payload, with thresholds widened by the torque its uncertainty allows —
at most what a payload of ``max_payload`` with its CoM within ``max_com_radius`` could produce
(:func:`payload_torque_limit`) — until an estimate arrives, as while sampling. The payload sampler starting
ends an open window: its run learns the load at its own rest poses under the sampling rules (a release window
still open when the next object is grasped and sampled would model it by gravity only, with at most the mass
released, and read the sampling moves' dynamics as a collision).

Units: SI (s, kg, m, N m); joint order: the model's.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..errors import PayloadEstimationError
from ..model.dynamics import RigidBodyDynamics
from ..model.parameters import BodyInertia
from ..node_limits import MAX_COM_RADIUS, MAX_PAYLOAD
from .provisional import ProvisionalConfig, ProvisionalFit, ProvisionalPayload

GRASP = "grasp"
GAP = 0.02
"""s: a longer step between samples is a stream gap, across which the observer holds the residual."""
RELEASE = "release"
KINDS = (GRASP, RELEASE)


class PayloadEventError(PayloadEstimationError):
    """A bad announcement or configuration; the message says what to do."""


@dataclass(frozen=True)
class WatchConfig:
    """window s after an announcement in which a payload change explains the residual; sampling_factor x the
    thresholds while the payload is provisional; window_factor x inside a window (not sampling), where the part a
    payload explains is taken out and the rest is judged against the configured thresholds; max_payload kg and
    max_com_radius m: what counts as a payload; release_margin: a release may remove up to (1 + release_margin)
    x the last carried mass + 0.1 kg; k_sigma: standard deviations of the provisional payload's torque added to
    the thresholds; window_floor N m: the least threshold inside a window (not sampling). A grasp is in no
    calibration recording (:func:`.thresholds.calibrate_thresholds`), and an object taken at once moves the arm
    before its inertia is known: in the bench's grasps of up to 5 kg that left up to 2.7 N m the payload's gravity
    does not explain (docs/collision.md §3); the paper's 6 N m covers it."""

    window: float = 5.0
    sampling_factor: float = 1.5
    window_factor: float = 1.0
    window_floor: float = 6.0
    max_payload: float = MAX_PAYLOAD
    max_com_radius: float = MAX_COM_RADIUS
    release_margin: float = 0.2
    k_sigma: float = 3.0

    def __post_init__(self):
        for name in ("window", "max_payload", "max_com_radius"):
            v = getattr(self, name)
            if not (math.isfinite(v) and v > 0):
                raise PayloadEventError(f"{name} must be a finite number > 0, got {v}")
        if not (math.isfinite(self.window_floor) and self.window_floor >= 0):
            raise PayloadEventError(f"window_floor must be a finite number >= 0 N m, got {self.window_floor}")
        for name in ("sampling_factor", "window_factor"):
            v = getattr(self, name)
            if not (math.isfinite(v) and v >= 1):
                raise PayloadEventError(f"{name} must be >= 1, got {v}")


def gravity_params(body: BodyInertia | None) -> np.ndarray:
    """p_L,g = (m, m cx, m cy, m cz) of ``body`` (payload frame); zeros for None."""
    if body is None:
        return np.zeros(4)
    return np.concatenate([[body.mass], body.mass * np.asarray(body.com, float)])


def payload_torque_limit(y: np.ndarray, max_mass: float, max_com_radius: float) -> np.ndarray:
    """Largest |gravity torque| (N m, per joint) of any payload of mass <= ``max_mass`` kg with its CoM within
    ``max_com_radius`` m of the payload frame origin, from its regressor ``y`` (n, 4) at the current q."""
    return max_mass * (np.abs(y[:, 0]) + max_com_radius * np.linalg.norm(y[:, 1:], axis=1))


def _moments(y: np.ndarray, w: np.ndarray, rhs: np.ndarray) -> np.ndarray:
    return np.linalg.lstsq(w[:, None] * y[:, 1:], w * rhs, rcond=1e-9)[0]


def explain_payload_change(y: np.ndarray, r: np.ndarray, weights: np.ndarray, p_model: np.ndarray,
                           mass_range: tuple[float, float], max_com_radius: float) -> np.ndarray:
    """Δp (4,) of the payload change that best explains the residual ``r`` (n,) N m. The residual estimates the
    external torque, and a payload the model lacks acts as τ_ext = -y Δp (τ_J = g + y Δp at rest): min
    |W (r + y Δp)| with W = diag(``weights``) (1/N m, e.g. 1/threshold), such that p_model + Δp has its mass in
    ``mass_range`` (kg) and its first moment |m c| <= m ``max_com_radius`` (the CoM within that radius). The
    mass is clipped into the range and the moments refitted; the moments are then scaled into the ball
    (feasible, not always the constrained optimum: a payload at the bounds may be explained slightly less
    than it could be)."""
    w = np.asarray(weights, float)
    r = -np.asarray(r, float)
    dp = np.linalg.lstsq(w[:, None] * y, w * r, rcond=1e-9)[0]
    p = p_model + dp
    lo, hi = mass_range
    m = float(np.clip(p[0], lo, hi))
    if m != p[0]:
        dm = m - p_model[0]
        p = np.concatenate([[m], p_model[1:] + _moments(y, w, r - y[:, 0] * dm)])
    h = p[1:]
    norm, cap = float(np.linalg.norm(h)), max(m, 0.0) * max_com_radius
    if norm > cap:
        p = np.concatenate([[m], h * (cap / norm if norm > 0 else 0.0)])
    return p - p_model


@dataclass
class Announcement:
    """One announced change: kind (grasp/release), allowed total payload mass range (kg), when its window
    opened (s, sample time; None until the first sample after the announcement)."""

    kind: str
    mass_range: tuple[float, float]
    start: float | None = None

    def open(self, t: float, window: float) -> bool:
        """Whether the window is open at ``t`` (s); the first call starts it."""
        if self.start is None:
            self.start = t
        return t - self.start < window


@dataclass(frozen=True)
class WatchStep:
    """What one sample changed: a new provisional payload for the observer (or None), the detector's new
    threshold scale (scalar or per joint; None: unchanged) and a line for the log ('' if nothing to say)."""

    fit: ProvisionalFit | None = None
    scale: float | np.ndarray | None = None
    note: str = ""


class PayloadWatch:
    """The payload between estimates: the provisional fit while sampling or after an announced grasp or
    release, the announced window and the thresholds that follow (module docstring). One per monitor.

    Sequence: :meth:`set_sampling` (the sampler's active flag), :meth:`announce` (grasp/release),
    :meth:`estimate` (a published estimate); per sample :meth:`explain` (the detector's hook, used by
    :class:`.monitor.CollisionMonitor`) then :meth:`update` (after the monitor's step).
    """

    def __init__(self, dyn: RigidBodyDynamics, base_thresholds, config: WatchConfig | None = None,
                 provisional: ProvisionalConfig | None = None):
        self.dyn = dyn
        self.cfg = config or WatchConfig()
        self._set_base(base_thresholds)
        self.provisional = ProvisionalPayload(dyn, provisional)
        self.sampling = False
        self.learning = False
        self.announced: Announcement | None = None
        self.last_change: str = ""  # what the last announcement did, for the status
        self._carried = 0.0  # kg, the last nonzero payload mass the monitor carried (what a release removes)
        self.explained_last = np.zeros(dyn.n)
        self._model = np.zeros(4)  # p_L,g of the observer's payload at the last sample
        self._model_before = np.zeros(4)  # ... and before its last change within this window
        self._t_prev: float | None = None
        self._since_fit = 0.0  # s of residual convergence (stream gaps left out) since the last provisional fit

    # ------------------------------------------------------------------ inputs
    def configure(self, config: WatchConfig, base_thresholds) -> None:
        """New parameters (the announcement in progress keeps its mass range)."""
        self.cfg = config
        self._set_base(base_thresholds)

    def _set_base(self, base_thresholds) -> None:
        """The configured thresholds (N m per joint) and the window's scale over them (``window_factor``, at least
        ``window_floor`` N m: per joint where they differ, else one number)."""
        self.base = np.broadcast_to(np.asarray(base_thresholds, float), (self.dyn.n,)).copy()
        f = np.maximum(self.cfg.window_factor, self.cfg.window_floor / self.base)
        self._window_scale = float(f[0]) if np.all(f == f[0]) else f

    def carried(self, body: BodyInertia | None) -> None:
        """The monitor's payload model changed to ``body``: remember the mass a release may remove."""
        if body is not None and body.mass > 0:
            self._carried = float(body.mass)

    def set_sampling(self, active: bool) -> float | None:
        """The payload sampler's active flag; returns the new threshold scale on a change (else None)."""
        if active == self.sampling:
            return None
        self.sampling = active
        if active:
            self.provisional.start()
            self.learning = True
            if self.announced is not None:
                # the run learns the load at its own rest poses, with thresholds widened by what it does not know
                # yet; a release window's rules (gravity-only model, mass up to the one carried) would read its
                # moves' dynamics with a new object as a collision
                self.last_change = f"{self.announced.kind} window ended: the payload sampler learns the payload"
                self.announced = None
        elif self.announced is None:
            self.learning = False
        return self.scale()

    def announce(self, kind: str) -> str:
        """A grasp or a release was announced: the payload is unknown from now on; returns the log line."""
        if kind not in KINDS:
            raise PayloadEventError(f"unknown payload event {kind!r}: use one of {', '.join(KINDS)}")
        if kind == GRASP:
            rng = (0.0, self.cfg.max_payload)
            text = (f"grasp announced: payload being learned (a residual a payload of up to "
                    f"{self.cfg.max_payload:g} kg explains is not a collision for {self.cfg.window:g} s)")
        else:
            top = (1 + self.cfg.release_margin) * self._carried + 0.1 if self._carried > 0 else self.cfg.max_payload
            rng = (0.0, min(top, self.cfg.max_payload))
            text = (f"release announced: the payload's torque may disappear (up to {rng[1]:.2f} kg explained for "
                    f"{self.cfg.window:g} s), the payload is re-learned")
        self.announced = Announcement(kind, rng)
        self._model_before = self._model.copy()  # a refit before this announcement explains nothing in it
        self.provisional.start()
        self.learning = True
        self.last_change = text
        return text

    def estimate(self, mass: float) -> bool:
        """A published estimate of ``mass`` kg: it replaces the provisional payload (learning stops), unless a
        0 kg estimate arrives while an announced window is open (the release's own reset). Returns whether
        learning stopped."""
        if mass == 0.0 and self.announced is not None:
            return False
        self.learning = False
        self.announced = None
        return True

    def restart(self) -> None:
        """The stream started over: learning (if any) starts again from the new samples, an open window runs
        from the first of them (its start stamp belongs to the old time base)."""
        if self.learning:
            self.provisional.start()
        if self.announced is not None:
            self.announced.start = None

    # ------------------------------------------------------------------ per sample
    def explain(self, t: float, q: np.ndarray, r: np.ndarray, payload: BodyInertia | None) -> np.ndarray | None:
        """The part of ``r`` (N m) an announced payload change explains at ``t`` (None outside a window)."""
        a = self.announced
        if a is None or not a.open(t, self.cfg.window):
            return None
        y = self.dyn.payload_gravity_regressor(q)
        r = np.asarray(r, float)
        p = gravity_params(payload)
        if not np.array_equal(p, self._model):
            self._model_before, self._model = self._model, p
        best = self._explained(y, r, p, a)
        if not np.array_equal(self._model_before, p):
            # the residual converges to a new model in ~5/K_I s (longer across a stream gap, which holds it): the
            # model before the last refit may explain it better; both are plausible payloads of this window
            before = self._explained(y, r, self._model_before, a)
            if np.max(np.abs((r - before) / self.base)) < np.max(np.abs((r - best) / self.base)):
                best = before
        self.explained_last = best
        return best

    def _explained(self, y: np.ndarray, r: np.ndarray, p_model: np.ndarray, a: Announcement) -> np.ndarray:
        return -y @ explain_payload_change(y, r, 1.0 / self.base, p_model, a.mass_range, self.cfg.max_com_radius)

    def in_window(self, t: float) -> bool:
        """Whether an announced window is open at ``t`` (s); the first sample after the announcement opens it."""
        a = self.announced
        return a is not None and a.open(t, self.cfg.window)

    def scale(self) -> float | np.ndarray:
        """The threshold scale without the provisional bound: ``sampling_factor`` while sampling or learning,
        inside an announced window (not sampling) ``window_factor`` and at least ``window_floor`` N m per joint
        (one per joint where the configured thresholds are lower), else 1."""
        if self.sampling:
            return self.cfg.sampling_factor
        if self.announced is not None:
            return self._window_scale
        return self.cfg.sampling_factor if self.learning else 1.0

    def observer_model(self, fit: ProvisionalFit, point_mass: bool = True) -> tuple[BodyInertia, bool]:
        """(body, gravity_only) of a provisional ``fit`` for the observer: gravity only inside a release window (the
        payload may vanish at any moment: its mass in M and C would then read as a dynamic torque)."""
        return fit.observer_model(point_mass and (self.announced is None or self.announced.kind == GRASP))

    def update(self, t: float, q: np.ndarray, dq: np.ndarray | None, tau: np.ndarray, settle: float = 0.2,
               detected: float | None = None) -> WatchStep:
        """Learn from one sample (after the monitor's step); ``settle`` s: the residual's convergence (5/K_I);
        ``detected``: detection time (s) of the collision the detector reports, or None. One detected inside an
        announced window is beyond what a payload explains: nothing is learnt while it lasts. (One detected
        before, e.g. an unannounced grasp while the sampler starts, is the load to learn.)"""
        dt = 0.0 if self._t_prev is None else t - self._t_prev
        self._t_prev = t
        if 0.0 < dt <= GAP:
            self._since_fit += dt
        if not self.learning or dq is None:
            return WatchStep()
        a = self.announced
        if detected is not None and a is not None and a.start is not None and detected >= a.start:
            self.provisional.hold()
            return WatchStep()
        window = self.in_window(t)
        if self.announced is not None and not window:
            return self._close(t, q, settle)
        fit = self.provisional.update(t, q, dq, tau, replace=window)
        if fit is not None:
            self._since_fit = 0.0
        if window:
            return WatchStep(fit, self.scale())
        return WatchStep(fit, self.cfg.sampling_factor + self.bound(q, t, settle) / self.base)

    def _close(self, t: float, q: np.ndarray, settle: float) -> WatchStep:
        """The announced window ends: with nothing carried (a release, or a grasp that took nothing), back to the
        unloaded model and the configured thresholds; otherwise the provisional payload stays, learnt further at
        new rest poses."""
        kind, est = self.announced.kind, self.provisional.estimate
        self.announced = None
        if est is None:
            return WatchStep(None, self.cfg.sampling_factor + self.bound(q, t, settle) / self.base,
                             f"{kind} window closed before the arm was at rest: the payload is not learnt yet, "
                             "thresholds widened by the torque of the largest payload until it rests or an estimate "
                             "arrives")
        if est.mass <= 3 * est.mass_std + 0.05:  # nothing carried: a completed release, or a grasp of nothing
            self.learning = self.sampling
            self._carried = 0.0
            unloaded = ProvisionalFit(0.0, np.zeros(3), est.mass_std, est.poses)
            what = "release complete" if kind == RELEASE else f"grasp window closed: no payload ({est.mass:.3f} kg)"
            return WatchStep(unloaded, self.scale(), f"{what}: unloaded model, configured thresholds")
        what = "still carried after the release" if kind == RELEASE else "learnt"
        return WatchStep(est, self.cfg.sampling_factor + self.bound(q, t, settle) / self.base,
                         f"{kind} window closed: provisional payload {est.mass:.3f} kg {what}; thresholds widened by "
                         "its uncertainty until an estimate arrives (payload_sampler/sample)")

    def bound(self, q: np.ndarray, t: float, settle: float = 0.2) -> np.ndarray:
        """k_sigma of the provisional payload's torque at ``q`` (N m), at most what the largest payload's
        error could produce (:func:`payload_torque_limit` plus the provisional payload's own torque)."""
        y = self.dyn.payload_gravity_regressor(q)
        sigma = self.provisional.torque_bound(q, t, self.cfg.k_sigma, settle, elapsed=self._since_fit)
        est = self.provisional.estimate
        own = np.abs(y @ est.gravity_params()) if est is not None else 0.0
        return np.minimum(sigma, payload_torque_limit(y, self.cfg.max_payload, self.cfg.max_com_radius) + own)


__all__ = ["GRASP", "RELEASE", "KINDS", "Announcement", "PayloadEventError", "PayloadWatch", "WatchConfig",
           "WatchStep", "explain_payload_change", "gravity_params", "payload_torque_limit"]
