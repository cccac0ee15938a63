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

Units: rad, rad/s, rad/s², s.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..identification.excitation import FourierTrajectory, constraint_nullspace
from ..model.dynamics import RigidBodyDynamics
from .poses import Envelope, MotionLimitError, make_envelope

CHECK_SAMPLES = 400  # per period: where the limits are checked
FIT_SAMPLES = 40  # per period: where the payload regressor is evaluated for the condition number


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
        for name, ok in (("duration", 0 < self.duration <= 60), ("amplitude_deg", 0 < self.amplitude_deg <= 10),
                         ("limit_margin_deg", 0 <= self.limit_margin_deg <= 20),
                         ("velocity_scale", 0 < self.velocity_scale <= 1),
                         ("max_acceleration", 0 < self.max_acceleration <= 50),
                         ("harmonics", 2 <= self.harmonics <= 10), ("candidates", 1 <= self.candidates <= 10000)):
            if not ok:
                raise MotionLimitError(f"excitation {name} = {getattr(self, name)!r} is out of range")


@dataclass(frozen=True)
class ExcitationPlan:
    """The planned excitation: ``trajectory`` (one period from q0 back to q0), the ``envelope`` it
    keeps to, its peak |q - q0|, velocity and acceleration per joint (rad, rad/s, rad/s²) and the
    ``condition_number`` of its column-scaled payload regressor (lower: better determined); the
    ``velocity_budget`` (rad/s per joint) it was planned for."""

    trajectory: FourierTrajectory
    envelope: Envelope
    peak_deviation: np.ndarray
    peak_velocity: np.ndarray
    peak_acceleration: np.ndarray
    condition_number: float
    velocity_budget: np.ndarray

    @property
    def duration(self) -> float:
        return self.trajectory.period

    def recentred(self, envelope: Envelope) -> ExcitationPlan:
        """The same motion around ``envelope.q0`` (e.g. a reference run's excitation at a pick
        configuration a fraction of a degree away); raises MotionLimitError when it does not fit
        that envelope."""
        t = self.trajectory
        plan = ExcitationPlan(FourierTrajectory(np.array(envelope.q0, float), t.a, t.b, t.f0, t.joint_names),
                              envelope, self.peak_deviation, self.peak_velocity, self.peak_acceleration,
                              self.condition_number, self.velocity_budget)
        lo, hi = envelope.q0 - plan.peak_deviation, envelope.q0 + plan.peak_deviation
        if np.any(lo < envelope.lower - 1e-9) or np.any(hi > envelope.upper + 1e-9):
            raise MotionLimitError("the reference run's excitation does not fit the envelope of this pick "
                                   "configuration")
        return plan

    def points(self, rate: float = 100.0) -> list[tuple[float, np.ndarray, np.ndarray]]:
        """[(time_from_start s, positions, velocities)] at ``rate`` Hz for a trajectory controller."""
        t, q, dq, _ = self.trajectory.sample(rate)
        return [(float(t[k]), q[k].copy(), dq[k].copy()) for k in range(len(t))]


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


def plan_payload_excitation(dyn: RigidBodyDynamics, q0: np.ndarray, config: ExcitationPlanConfig | None = None,
                            envelope: Envelope | None = None) -> ExcitationPlan:
    """The best-conditioned of ``config.candidates`` random excitations around ``q0`` (module
    docstring). Raises :class:`~.poses.MotionLimitError` for a configuration outside the limits or
    out-of-range settings, ``ValueError`` when no joint may move."""
    config = config if config is not None else ExcitationPlanConfig()
    config.check()
    desc = dyn.desc
    env = envelope or make_envelope(desc, q0, config.amplitude_deg, config.limit_margin_deg)
    q0 = env.q0
    dev = np.minimum(env.upper - q0, q0 - env.lower)
    if not np.any(dev > 1e-6):
        raise ValueError("no joint can move: the pick configuration is at the limit margin of every joint")
    vmax = config.velocity_scale * np.asarray(desc.limits.velocity, float)
    amax = np.full(desc.n, config.max_acceleration)
    null = constraint_nullspace(config.harmonics)
    f0 = 1.0 / config.duration
    rng = np.random.default_rng(config.seed)
    best: tuple[float, FourierTrajectory] | None = None
    for _ in range(config.candidates):
        x = (null @ rng.normal(size=(desc.n, null.shape[1])).T).T  # n x 2L, rest-to-rest at q0
        raw = FourierTrajectory(q0.copy(), x[:, :config.harmonics], x[:, config.harmonics:], f0, desc.joint_names)
        dq_dev, v, a = _peaks(raw)
        ratio = np.maximum.reduce([dq_dev / np.maximum(dev, 1e-12), v / vmax, a / amax])
        scale = np.where(dev > 1e-6, 0.999 / np.maximum(ratio, 1e-300), 0.0)[:, None]
        traj = FourierTrajectory(q0.copy(), raw.a * scale, raw.b * scale, f0, desc.joint_names)
        cond = scaled_condition(dyn, traj)
        if best is None or cond < best[0]:
            best = (cond, traj)
    cond, traj = best
    peak_q, peak_v, peak_a = _peaks(traj)
    return ExcitationPlan(traj, env, peak_q, peak_v, peak_a, cond, vmax)


def check_excitation(plan: ExcitationPlan, desc, rate: float = 1000.0) -> None:
    """Raise MotionLimitError unless every point of the plan at ``rate`` Hz is inside its envelope and
    the joint limits and no joint exceeds its velocity limit (what the commanded points must obey)."""
    t, q, dq, _ = plan.trajectory.sample(rate)
    lim = desc.limits.position
    for k in range(len(t)):
        if not plan.envelope.contains(q[k]) or np.any(q[k] < lim[:, 0]) or np.any(q[k] > lim[:, 1]):
            j = int(np.argmax((q[k] < plan.envelope.lower - 1e-9) | (q[k] > plan.envelope.upper + 1e-9)))
            raise MotionLimitError(f"excitation point at {t[k]:.3f} s leaves the envelope at joint "
                                   f"{desc.joint_names[j]} ({np.degrees(q[k][j]):.3f} deg)")
        over = np.abs(dq[k]) > np.asarray(desc.limits.velocity, float)
        if np.any(over):
            j = int(np.argmax(over))
            raise MotionLimitError(f"excitation point at {t[k]:.3f} s exceeds the velocity limit of joint "
                                   f"{desc.joint_names[j]} ({dq[k][j]:.3f} rad/s)")


__all__ = ["ExcitationPlan", "ExcitationPlanConfig", "check_excitation", "plan_payload_excitation",
           "scaled_condition"]
