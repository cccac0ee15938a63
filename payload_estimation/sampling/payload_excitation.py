"""A short excitation around the pick configuration for the payload's ten parameters (issue 18).

One period of a finite Fourier series per joint (:class:`~payload_estimation.identification.excitation.
FourierTrajectory`) that starts and ends at rest, with zero acceleration, at the pick configuration
q0. Each joint's series is scaled so that it never leaves the sampling envelope (±``amplitude_deg``
of q0 within the joint limits less ``limit_margin_deg``: a joint at its margin does not move), its
velocity budget (``velocity_scale`` of the limit) or its acceleration budget (``max_acceleration``).
Among ``candidates`` random series, :func:`plan_payload_excitation` keeps the one whose payload
regressor along the motion is best conditioned (columns scaled to unit norm: the ten parameters'
units do not matter), which is what the inertia's precision depends on. Planning is a random search:
fast (a fraction of a second) and reproducible by ``seed``.

The payload is grasped but not yet known when the excitation runs: the collision monitor's model
carries only what one rest pose at q0 shows of it. Given that mass's standard deviation
(:class:`UnknownPayload`), every candidate is also scaled down until 3 σ of the unseen mass's torque
along it stays within the torque budget (:func:`unknown_payload_torque`). Where even ``min_scale`` of
the motion would exceed it (at the stretched-up pose the mass does not show at rest at all),
:func:`plan_tilted_excitation` starts with a short tilt (:class:`Tilt`): a rest-to-rest move of half the
envelope on the joint that shows the mass best, slow enough for the unseen mass, a hold there while the
collision monitor fits the mass, the excitation around the tilted pose, and the move back to q0; where no
tilt helps either, planning raises :class:`UnsafeExcitation` and the sampler uses the static poses.

Units: rad, rad/s, rad/s², s.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from ..collision.provisional import payload_gravity_posterior
from ..errors import PayloadEstimationError
from ..identification.excitation import FourierTrajectory, constraint_nullspace
from ..model.dynamics import RigidBodyDynamics
from .poses import (
    VELOCITY_MARGIN,
    Envelope,
    MotionLimitError,
    check_executed,
    executed_path,
    make_envelope,
    unknown_payload_duration,
)

CHECK_SAMPLES = 400  # per period: where the limits are checked
FIT_SAMPLES = 40  # per period: where the payload regressor is evaluated for the condition number
TORQUE_SAMPLES = 80  # per period: where the unseen payload's torque is bounded
BUDGET_MARGIN = 0.9  # plan to this fraction of the torque budget (the run re-checks at its own q0)
POINT_RATE = 100.0
"""Hz: points of the commanded excitation (with velocities; the controller interpolates between them)."""
TILT_FRACTION = 0.5
"""Of the envelope's room on a joint: how far a tilt goes (the excitation keeps the rest of it)."""
TILT_HOLD = 0.4
"""s at rest at the tilted pose: the arm's own settling (~0.15 s), the collision monitor's fit of the mass there
(0.05 s at rest; its residual reads the fit at once) and rest the fit uses (0.3 s held: iiwa14's stretched-up CoM
error median 2.2 mm against 1.2 mm, docs/bench/dynamic.md)."""
TILT_CANDIDATES = 4
"""Tilts tried (best first, by the mass's standard deviation after them) before falling back to static poses."""


class UnsafeExcitation(MotionLimitError):
    """No useful excitation keeps the unseen payload's torque within the budget here."""


@dataclass(frozen=True)
class UnknownPayload:
    """The payload mass the collision monitor does not know yet when the excitation starts: its
    standard deviation ``mass_std`` (kg, :func:`collision.provisional.payload_gravity_posterior` at
    q0, capped by the largest mass accepted), the ``torque_budget`` (N m) that ``k_sigma`` of it may
    add on any joint, and the smallest fraction ``min_scale`` of a planned motion worth running."""

    mass_std: float
    torque_budget: float
    k_sigma: float = 3.0
    min_scale: float = 0.3


@dataclass(frozen=True)
class ExcitationPlanConfig:
    """``duration`` s (one period); ``amplitude_deg`` and ``limit_margin_deg`` as the static sampling
    (the same envelope); ``velocity_scale`` of the velocity limits; ``max_acceleration`` rad/s² per
    joint; ``harmonics`` of the series (>= 2); ``candidates`` random series tried; ``seed``."""

    duration: float = 2.0
    amplitude_deg: float = 7.0
    limit_margin_deg: float = 1.0
    velocity_scale: float = 0.5
    max_acceleration: float = 4.0
    harmonics: int = 3
    candidates: int = 200
    seed: int = 0

    def check(self) -> None:
        """Raise MotionLimitError naming the first value out of its range."""
        for name, ok, allowed in (("duration", 0 < self.duration <= 60, "(0, 60] s"),
                                  ("amplitude_deg", 0 < self.amplitude_deg <= 10, "(0, 10] deg"),
                                  ("limit_margin_deg", 0 <= self.limit_margin_deg <= 20, "[0, 20] deg"),
                                  ("velocity_scale", 0 < self.velocity_scale <= 1, "(0, 1]"),
                                  ("max_acceleration", 0 < self.max_acceleration <= 50, "(0, 50] rad/s²"),
                                  ("harmonics", 2 <= self.harmonics <= 10, "2 to 10"),
                                  ("candidates", 1 <= self.candidates <= 10000, "1 to 10000")):
            if not ok:
                raise MotionLimitError(f"excitation {name} = {getattr(self, name)!r} is out of range (allowed: "
                                       f"{allowed})")


@dataclass(frozen=True)
class Tilt:
    """A tilt before the excitation (module docstring): ``q`` the tilted pose (rad) the excitation runs around,
    reached from the pick configuration in ``move`` s (rest-to-rest quintic), held ``hold`` s, and left back to it
    in ``back`` s after the excitation (faster: the mass has shown at the tilted pose by then)."""

    q: np.ndarray
    move: float
    back: float
    hold: float = TILT_HOLD

    @property
    def seconds(self) -> float:
        return self.move + self.hold + self.back


def _quintic_points(q_from: np.ndarray, q_to: np.ndarray, seconds: float, rate: float, t0: float
                    ) -> list[tuple[float, np.ndarray, np.ndarray]]:
    """Rest-to-rest quintic from ``q_from`` to ``q_to`` in ``seconds`` at ``rate`` Hz, times from ``t0`` (its first
    point, at ``q_from``, left out: the previous segment ends there)."""
    step = np.asarray(q_to, float) - np.asarray(q_from, float)
    k = max(int(round(seconds * rate)), 1)
    out = []
    for i in range(1, k + 1):
        tau = i / k
        s = tau ** 3 * (10 - 15 * tau + 6 * tau * tau)
        ds = 30 * tau * tau * (1 - tau) ** 2 / seconds
        out.append((t0 + i / rate, q_from + s * step, ds * step))
    return out


@dataclass(frozen=True)
class ExcitationPlan:
    """The planned excitation: ``trajectory`` (one period from q0 back to q0), the ``envelope`` it
    keeps to, its peak |q - q0|, velocity and acceleration per joint (rad, rad/s, rad/s²) and the
    ``condition_number`` of its column-scaled payload regressor (lower: better determined); the
    ``velocity_budget`` (rad/s per joint) it was planned for; ``scale``: the fraction of its limits'
    motion it was scaled to for the unseen payload's torque (1: none), and that torque (N m, 0: not
    bounded); ``tilt``: the tilt it starts with (None: the excitation runs around ``envelope.q0`` itself, which is
    ``trajectory.q0``; with a tilt ``trajectory.q0`` is the tilted pose)."""

    trajectory: FourierTrajectory
    envelope: Envelope
    peak_deviation: np.ndarray
    peak_velocity: np.ndarray
    peak_acceleration: np.ndarray
    condition_number: float
    velocity_budget: np.ndarray
    scale: float = 1.0
    unknown_torque: float = 0.0
    tilt: Tilt | None = None

    @property
    def duration(self) -> float:
        return self.trajectory.period + (self.tilt.seconds if self.tilt is not None else 0.0)

    @property
    def rest_poses(self) -> np.ndarray:
        """The poses (k, n) the arm rests at before the excitation: the pick configuration (and the tilted pose)."""
        q0 = np.asarray(self.envelope.q0, float)
        return q0[None] if self.tilt is None else np.array([q0, self.tilt.q])

    def recentred(self, envelope: Envelope) -> ExcitationPlan:
        """The same motion around ``envelope.q0`` (e.g. a reference run's excitation at a pick
        configuration a fraction of a degree away); raises MotionLimitError when it does not fit
        that envelope."""
        t, tilt = self.trajectory, self.tilt
        if tilt is not None:
            tilt = replace(tilt, q=np.asarray(envelope.q0, float) + (tilt.q - np.asarray(self.envelope.q0, float)))
        centre = np.array(envelope.q0 if tilt is None else tilt.q, float)
        plan = ExcitationPlan(FourierTrajectory(centre, t.a, t.b, t.f0, t.joint_names),
                              envelope, self.peak_deviation, self.peak_velocity, self.peak_acceleration,
                              self.condition_number, self.velocity_budget, self.scale, self.unknown_torque, tilt)
        lo, hi = envelope.q0 - plan.peak_deviation, envelope.q0 + plan.peak_deviation
        if np.any(lo < envelope.lower - 1e-9) or np.any(hi > envelope.upper + 1e-9):
            raise MotionLimitError("the reference run's excitation does not fit the envelope of this pick "
                                   "configuration (amplitude_deg or limit_margin_deg changed since it was recorded, "
                                   "or the joint limits are nearer here): call ~/record_reference again before the "
                                   "grasp")
        return plan

    def points(self, rate: float = 100.0) -> list[tuple[float, np.ndarray, np.ndarray]]:
        """[(time_from_start s, positions, velocities)] at ``rate`` Hz for a trajectory controller, from rest at
        the pick configuration (t = 0) back to rest there; with a tilt: the tilt, its hold, the excitation around
        the tilted pose and the move back."""
        t, q, dq, _ = self.trajectory.sample(rate)
        excitation = [(float(t[k]), q[k].copy(), dq[k].copy()) for k in range(len(t))]
        if self.tilt is None:
            return excitation
        q0, tilt = np.asarray(self.envelope.q0, float), self.tilt
        zero = np.zeros_like(q0)
        out = [(0.0, q0.copy(), zero.copy())] + _quintic_points(q0, tilt.q, tilt.move, rate, 0.0)
        t_hold = out[-1][0]
        out += [(t_hold + k / rate, tilt.q.copy(), zero.copy()) for k in range(1, int(round(tilt.hold * rate)) + 1)]
        t_start = out[-1][0]
        out += [(t_start + tk, qk, dqk) for tk, qk, dqk in excitation[1:]]
        return out + _quintic_points(tilt.q, q0, tilt.back, rate, out[-1][0])


def _peaks(traj: FourierTrajectory) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    t = np.linspace(0.0, traj.period, CHECK_SAMPLES + 1)
    q, dq, ddq = traj.evaluate(t)
    return np.abs(q - traj.q0).max(axis=0), np.abs(dq).max(axis=0), np.abs(ddq).max(axis=0)


def scaled_condition(dyn: RigidBodyDynamics, traj: FourierTrajectory, samples: int = FIT_SAMPLES) -> float:
    """Condition number of the stacked payload regressor along ``traj`` with unit-norm columns."""
    t = np.arange(samples) * (traj.period / samples)
    q, dq, ddq = traj.evaluate(t)
    y = np.vstack([dyn.payload_regressor(a, b, c) for a, b, c in zip(q, dq, ddq)])
    norms = np.linalg.norm(y, axis=0)
    if np.any(norms == 0):
        return float("inf")
    s = np.linalg.svd(y / norms, compute_uv=False)
    return float(s[0] / s[-1]) if s[-1] > 0 else float("inf")


def unknown_payload_torque(dyn: RigidBodyDynamics, traj: FourierTrajectory, mass_std: float,
                           k_sigma: float = 3.0, samples: int = TORQUE_SAMPLES) -> float:
    """``k_sigma`` x ``mass_std`` (kg) x the largest torque (N m/kg, any joint) a unit point mass at the
    payload frame adds along ``traj`` beyond what it adds at rest at ``traj.q0`` (which the monitor's
    provisional fit at q0 already explains). The CoM components one pose leaves open move the torque
    far less than an unseen mass."""
    if mass_std <= 0:
        return 0.0
    t = np.arange(samples + 1) * (traj.period / samples)
    q, dq, ddq = traj.evaluate(t)
    y0 = dyn.payload_gravity_regressor(traj.q0)[:, 0]
    worst = max(float(np.max(np.abs(dyn.payload_regressor(a, b, c)[:, 0] - y0))) for a, b, c in zip(q, dq, ddq))
    return k_sigma * mass_std * worst


def _within_budget(dyn: RigidBodyDynamics, traj: FourierTrajectory, unknown: UnknownPayload
                   ) -> tuple[FourierTrajectory, float, float]:
    """(``traj`` scaled down until its unseen-payload torque is within BUDGET_MARGIN of the budget, the
    scale, that torque). The torque is not linear in the scale (gravity and Coriolis parts): a few
    proportional steps."""
    scale, torque = 1.0, unknown_payload_torque(dyn, traj, unknown.mass_std, unknown.k_sigma)
    target = BUDGET_MARGIN * unknown.torque_budget
    for _ in range(4):
        if torque <= target or scale < unknown.min_scale:
            break
        step = 0.98 * target / torque
        scale *= step
        traj = FourierTrajectory(traj.q0, traj.a * step, traj.b * step, traj.f0, traj.joint_names)
        torque = unknown_payload_torque(dyn, traj, unknown.mass_std, unknown.k_sigma)
    return traj, scale, torque


def plan_payload_excitation(dyn: RigidBodyDynamics, q0: np.ndarray, config: ExcitationPlanConfig | None = None,
                            envelope: Envelope | None = None, unknown: UnknownPayload | None = None
                            ) -> ExcitationPlan:
    """The best-conditioned of ``config.candidates`` random excitations around ``q0`` (module
    docstring), each scaled for ``unknown`` when given. Raises :class:`~.poses.MotionLimitError` for a
    configuration outside the limits or out-of-range settings, :class:`UnsafeExcitation` when no
    candidate fits the unknown payload's torque budget at ``unknown.min_scale`` or more,
    ``PayloadEstimationError`` when no joint may move."""
    config = config if config is not None else ExcitationPlanConfig()
    config.check()
    desc = dyn.desc
    env = envelope or make_envelope(desc, q0, config.amplitude_deg, config.limit_margin_deg)
    q0 = env.q0
    dev = np.minimum(env.upper - q0, q0 - env.lower)
    if not np.any(dev > 1e-6):
        raise PayloadEstimationError("no joint can move: the pick configuration is at the limit margin of every joint")
    vmax = config.velocity_scale * np.asarray(desc.limits.velocity, float)
    amax = np.full(desc.n, config.max_acceleration)
    null = constraint_nullspace(config.harmonics)
    f0 = 1.0 / config.duration
    rng = np.random.default_rng(config.seed)
    best: tuple[float, FourierTrajectory, float, float] | None = None
    smallest = 1.0
    for _ in range(config.candidates):
        x = (null @ rng.normal(size=(desc.n, null.shape[1])).T).T  # n x 2L, rest-to-rest at q0
        raw = FourierTrajectory(q0.copy(), x[:, :config.harmonics], x[:, config.harmonics:], f0, desc.joint_names)
        dq_dev, v, a = _peaks(raw)
        ratio = np.maximum.reduce([dq_dev / np.maximum(dev, 1e-12), v / vmax, a / amax])
        scale = np.where(dev > 1e-6, 0.999 / np.maximum(ratio, 1e-300), 0.0)[:, None]
        traj = FourierTrajectory(q0.copy(), raw.a * scale, raw.b * scale, f0, desc.joint_names)
        fraction, torque = 1.0, 0.0
        if unknown is not None:
            traj, fraction, torque = _within_budget(dyn, traj, unknown)
            smallest = min(smallest, fraction)
            if fraction < unknown.min_scale or torque > unknown.torque_budget:
                continue
        cond = scaled_condition(dyn, traj)
        if best is None or cond < best[0]:
            best = (cond, traj, fraction, torque)
    if best is None:
        raise UnsafeExcitation(
            f"the payload's mass does not show at rest here (σ {unknown.mass_std:.2f} kg): every excitation "
            f"would have to shrink to {100 * smallest:.0f} % or less (at least {100 * unknown.min_scale:.0f} % "
            f"is useful) to keep {unknown.k_sigma:g} σ of its torque within {unknown.torque_budget:g} N m")
    cond, traj, fraction, torque = best
    traj = within_executed(desc, traj, vmax)
    peak_q, peak_v, peak_a = _peaks(traj)
    return ExcitationPlan(traj, env, peak_q, peak_v, peak_a, cond, vmax, fraction, torque)


def plan_tilted_excitation(dyn: RigidBodyDynamics, config: ExcitationPlanConfig | None, envelope: Envelope,
                           unknown: UnknownPayload, mass_limit: float, why: str = "") -> ExcitationPlan:
    """Where no excitation around ``envelope.q0`` keeps the unseen mass's torque within ``unknown.torque_budget``:
    the excitation around a tilted pose (:class:`Tilt`, module docstring). Candidates: each joint but the last,
    either way, by TILT_FRACTION of its room in the envelope (at least 1.5°: the monitor fits a new pose from 1°
    on); the first :data:`TILT_CANDIDATES`, best first by the mass's standard deviation after resting at q0 and
    there (at most ``mass_limit`` / 3 kg: a heavier payload is refused anyway), whose excitation plans. The move
    into the tilt is slow enough for the mass seen at q0 (:func:`.poses.unknown_payload_duration`) and within
    ``config.velocity_scale`` of the limits. Raises :class:`UnsafeExcitation` (``why``: what failed at q0) when
    none plans."""
    config = config if config is not None else ExcitationPlanConfig()
    q0 = np.asarray(envelope.q0, float)
    vmax = config.velocity_scale * np.asarray(dyn.desc.limits.velocity, float)
    candidates = []
    for j in range(dyn.n - 1):
        for sign in (1.0, -1.0):
            room = envelope.upper[j] - q0[j] if sign > 0 else q0[j] - envelope.lower[j]
            if TILT_FRACTION * room < np.radians(1.5):
                continue
            qt = q0.copy()
            qt[j] += sign * TILT_FRACTION * room
            candidates.append((unknown_mass_std(dyn, np.array([q0, qt]), mass_limit), j, qt))
    candidates.sort(key=lambda c: c[0])
    def seconds(poses: np.ndarray, q_from: np.ndarray, q_to: np.ndarray) -> float:
        """The quintic's duration for the mass seen at ``poses``, within the velocity budget, on the points' grid."""
        t = max(unknown_payload_floor(dyn, poses, q_from, q_to, mass_limit, unknown.torque_budget, unknown.k_sigma),
                1.875 * float(np.max(np.abs(q_to - q_from) / vmax)), 0.2)
        return float(np.ceil(t * POINT_RATE)) / POINT_RATE

    failures = []
    for std, j, qt in candidates[:TILT_CANDIDATES]:
        try:
            plan = plan_payload_excitation(dyn, qt, config, Envelope(qt, envelope.lower, envelope.upper),
                                           replace(unknown, mass_std=std, min_scale=0.05))
        except UnsafeExcitation as e:
            failures.append(f"joint {j + 1}: {e}")
            continue
        tilt = Tilt(qt, seconds(q0[None], q0, qt), seconds(np.array([q0, qt]), qt, q0))
        tilted = replace(plan, envelope=envelope, tilt=tilt)
        q = np.array([p[1] for p in tilted.points(POINT_RATE)])
        return replace(tilted, peak_deviation=np.max(np.abs(q - q0), axis=0))
    raise UnsafeExcitation(f"{why + '; ' if why else ''}no tilt within the envelope helps either"
                           + (f" ({failures[0]})" if failures else " (no joint has room for one)"))


def unknown_payload_floor(dyn: RigidBodyDynamics, poses: np.ndarray, q_from: np.ndarray, q_to: np.ndarray,
                          mass_limit: float, torque_budget: float, k_sigma: float = 3.0) -> float:
    """Shortest rest-to-rest quintic (s) from ``q_from`` to ``q_to`` for the payload as seen at rest at ``poses``
    (k, n; :func:`.poses.unknown_payload_duration` with the monitor's provisional posterior), its mass feared up to
    ``mass_limit`` only: a heavier payload is refused anyway."""
    _, cov = payload_gravity_posterior(dyn, poses)
    shrink = min(1.0, mass_limit / (3.0 * float(np.sqrt(cov[0, 0]))))
    cov[0, :] *= shrink
    cov[:, 0] *= shrink
    return unknown_payload_duration(dyn, q_from, q_to, cov, torque_budget, k_sigma)


def unknown_mass_std(dyn: RigidBodyDynamics, poses: np.ndarray, mass_limit: float) -> float:
    """Standard deviation (kg) of the payload mass as known from rest at ``poses`` (k, n; the monitor's provisional
    posterior), at most ``mass_limit`` / 3: a heavier payload is refused anyway."""
    _, cov = payload_gravity_posterior(dyn, poses)
    return min(float(np.sqrt(cov[0, 0])), mass_limit / 3.0)


def executed_peak_velocity(desc, traj: FourierTrajectory, rate: float = POINT_RATE) -> np.ndarray:
    """Peak |dq| per joint (rad/s) of the controller's path through ``traj``'s points at ``rate`` Hz from
    rest at q0 (:func:`.poses.executed_path`: quintic segments with zero waypoint accelerations, whose
    ripple between the points exceeds the series' own peak by up to a few tenths of a percent)."""
    t, q, dq, _ = traj.sample(rate)
    points = [(float(t[k]), q[k], dq[k]) for k in range(len(t)) if t[k] > 0]
    _, path_dq = executed_path(traj.q0, None, points)
    return np.max(np.abs(path_dq), axis=0)


def within_executed(desc, traj: FourierTrajectory, vmax: np.ndarray, rate: float = POINT_RATE) -> FourierTrajectory:
    """``traj`` with every joint whose executed path (:func:`executed_peak_velocity`) needs more than
    ``vmax`` or (1 - VELOCITY_MARGIN) of its velocity limit scaled down to it: the path is linear in
    the series' coefficients, so the scaled joint meets its budget exactly (the period, and with it the
    run's robot time, is kept; a joint's amplitude shrinks by as much as its path overshot)."""
    budget = np.minimum(np.asarray(vmax, float), (1.0 - VELOCITY_MARGIN) * np.asarray(desc.limits.velocity, float))
    ratio = executed_peak_velocity(desc, traj, rate) / budget
    if np.all(ratio <= 1.0):
        return traj
    scale = np.where(ratio > 1.0, 0.999 / np.maximum(ratio, 1e-300), 1.0)[:, None]
    return FourierTrajectory(traj.q0, traj.a * scale, traj.b * scale, traj.f0, traj.joint_names)


def check_excitation(plan: ExcitationPlan, desc, rate: float = 1000.0) -> None:
    """Raise MotionLimitError unless every point of the plan at ``rate`` Hz is inside its envelope and
    the joint limits, no joint exceeds its velocity limit (what the commanded points must obey), and
    the controller's path between the commanded points (:data:`POINT_RATE` Hz, from rest at q0) stays
    within (1 - VELOCITY_MARGIN) of the velocity limits (:func:`.poses.check_executed`)."""
    points = plan.points(rate)
    t = np.array([p[0] for p in points])
    q, dq = np.array([p[1] for p in points]), np.array([p[2] for p in points])
    lim = desc.limits.position
    env = plan.envelope
    outside = (q < env.lower - 1e-9) | (q > env.upper + 1e-9) | (q < lim[:, 0]) | (q > lim[:, 1])
    over = np.abs(dq) > np.asarray(desc.limits.velocity, float)
    for bad, what in ((outside, "leaves the envelope at joint"), (over, "exceeds the velocity limit of joint")):
        if np.any(bad):
            k, j = (int(v) for v in np.argwhere(bad)[0])
            value = f"{np.degrees(q[k][j]):.3f} deg" if bad is outside else f"{dq[k][j]:.3f} rad/s"
            raise MotionLimitError(f"excitation point at {t[k]:.3f} s {what} {desc.joint_names[j]} ({value})")
    check_executed(desc, np.asarray(plan.envelope.q0, float), None, [p for p in plan.points(POINT_RATE) if p[0] > 0],
                   "excitation")


__all__ = ["ExcitationPlan", "ExcitationPlanConfig", "POINT_RATE", "TILT_HOLD", "Tilt", "UnknownPayload",
           "UnsafeExcitation", "check_excitation", "executed_peak_velocity", "plan_payload_excitation",
           "plan_tilted_excitation", "scaled_condition", "unknown_mass_std", "unknown_payload_floor",
           "unknown_payload_torque",
           "within_executed"]
