"""Static pose sets for payload estimation around a pick configuration (paper 000, Sec. VI-A).

The robot visits a few poses within ±7° per joint of the pick configuration ``q0`` and a static
sample is taken at each. Poses are chosen greedily for D-optimality of the stacked payload gravity
regressor (maximise log det(Σ Y_kᵀ Y_k), Y_k = ``dyn.payload_gravity_regressor(q_k)``, n x 4) over
candidate perturbations {-a, 0, +a} per joint, then ordered to keep the moves short.

Safety: every pose lies in the *envelope* = [q0 - a, q0 + a] ∩ [limit_lo + margin, limit_hi - margin]
(rad), and every move duration keeps the peak joint speed of a quintic (minimum-jerk) profile —
the fastest of linear, cubic and quintic interpolation with the same end points — at or below
``velocity_scale`` x the velocity limit. :func:`check_command` re-validates any commanded point
against the envelope and the limits before it is published.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ..errors import PayloadEstimationError
from ..model.description import RobotDescription
from ..sim.trajectory import _quintic_coeffs as quintic_coefficients  # the executor's own interpolation

QUINTIC_PEAK = 1.875
"""Peak speed / average speed of a rest-to-rest quintic (cubic: 1.5, linear: 1.0)."""

QUINTIC_ACCEL_PEAK = 10.0 / np.sqrt(3.0)
"""Peak |acceleration| x duration² / distance of a rest-to-rest quintic."""


VELOCITY_MARGIN = 0.005
"""Fraction of every velocity limit a commanded trajectory keeps free along the executor's interpolated
path (the controller starts from its state when the command arrives, a few ms after the planner's)."""

EXECUTED_SAMPLES = 32
"""Points per segment where the executor's interpolated path is checked."""


class MotionLimitError(PayloadEstimationError):
    """A commanded or planned point is outside the allowed envelope or the joint limits."""


@dataclass(frozen=True)
class MoveTiming:
    """How a rest-to-rest move is timed: its quintic peak speed within ``velocity_scale`` of the velocity limits
    (0, 1], taking at least ``min_duration`` s. The one home of these defaults: they are the payload_sampler
    node's (:class:`.sampler.SamplerConfig` and so its parameter table read them here), and the pose plan
    (:class:`PosePlanConfig`: its tour) and the sequence (:class:`.sequence.SequenceConfig`: its moves) take theirs
    from here (issue 49: they were 0.9 / 0.25 s, 0.5 / 0.4 s and 0.7 / 0.35 s)."""

    velocity_scale: float = 0.9
    min_duration: float = 0.25


@dataclass(frozen=True)
class PosePlanConfig:
    """Pose-set parameters.

    n_poses: number of static samples including the pick configuration (paper: 10);
    amplitude_deg: perturbation per joint (deg, scalar or per joint; paper: 7);
    limit_margin_deg: distance kept from the joint position limits (deg);
    velocity_scale: fraction of the velocity limit used by the peak speed of a move (0, 1];
    min_duration: minimum move duration (s) (both: :class:`MoveTiming`'s defaults); include_pick: sample q0
    itself first;
    moving_joints: model joint indices allowed to move (None = all).
    """

    n_poses: int = 10
    amplitude_deg: float | Sequence[float] = 7.0
    limit_margin_deg: float = 1.0
    velocity_scale: float = MoveTiming.velocity_scale
    min_duration: float = MoveTiming.min_duration
    include_pick: bool = True
    moving_joints: tuple[int, ...] | None = None
    max_candidates: int = 3000
    seed: int = 0

    def __post_init__(self):
        if self.n_poses < 1:
            raise PayloadEstimationError(f"n_poses must be >= 1, got {self.n_poses}")
        amp = np.atleast_1d(np.asarray(self.amplitude_deg, dtype=float))
        if np.any(~np.isfinite(amp)) or np.any(amp < 0) or np.any(amp > 30):
            raise PayloadEstimationError(f"amplitude_deg must be in [0, 30] deg, got {self.amplitude_deg}")
        if not 0.0 < self.velocity_scale <= 1.0:
            raise PayloadEstimationError(f"velocity_scale must be in (0, 1], got {self.velocity_scale}")
        if not self.min_duration > 0.0:
            raise PayloadEstimationError(f"min_duration must be > 0 s, got {self.min_duration}")
        if self.limit_margin_deg < 0:
            raise PayloadEstimationError(f"limit_margin_deg must be >= 0, got {self.limit_margin_deg}")


@dataclass(frozen=True)
class Envelope:
    """Allowed joint box around q0 (rad): lower <= q <= upper, lower <= q0 <= upper."""

    q0: np.ndarray
    lower: np.ndarray
    upper: np.ndarray

    def contains(self, q: np.ndarray, tol: float = 1e-9) -> bool:
        q = np.asarray(q, dtype=float)
        return bool(np.all(q >= self.lower - tol) and np.all(q <= self.upper + tol))


@dataclass(frozen=True)
class PosePlan:
    """A planned pose set.

    poses (N, n) rad in visiting order (poses[0] = q0 when include_pick); durations (N + 1,) s:
    durations[k] is the move into poses[k] from the previous pose (durations[0] from q0, 0 when
    poses[0] = q0) and durations[N] the move back to q0; logdet / condition_number of Σ Y_kᵀ Y_k.
    """

    q0: np.ndarray
    poses: np.ndarray
    durations: np.ndarray
    envelope: Envelope
    velocity_limits: np.ndarray
    logdet: float
    condition_number: float

    def moves(self) -> list[tuple[np.ndarray, float]]:
        """(target, duration) for every move, ending with the return to q0 (zero-length moves skipped)."""
        targets = [*self.poses, self.q0]
        out = []
        prev = self.q0
        for tgt, dur in zip(targets, self.durations, strict=True):
            if np.any(np.abs(tgt - prev) > 1e-12):
                out.append((tgt, float(dur)))
            prev = tgt
        return out

    @property
    def total_motion_time(self) -> float:
        return float(np.sum(self.durations))


def make_envelope(desc: RobotDescription, q0: np.ndarray, amplitude_deg=7.0, limit_margin_deg: float = 1.0) -> Envelope:
    """Envelope ∩ limits around ``q0`` (raises :class:`MotionLimitError` if q0 is outside the limits)."""
    q0 = np.asarray(q0, dtype=float)
    n = desc.n
    if q0.shape != (n,) or not np.all(np.isfinite(q0)):
        raise MotionLimitError(f"pick configuration must be {n} finite joint angles, got {q0}")
    lim = desc.limits.position
    outside = np.flatnonzero((q0 < lim[:, 0]) | (q0 > lim[:, 1]))
    if outside.size:
        j = int(outside[0])
        raise MotionLimitError(
            f"pick configuration joint {desc.joint_names[j]} = {np.degrees(q0[j]):.2f} deg is outside its "
            f"limits [{np.degrees(lim[j, 0]):.1f}, {np.degrees(lim[j, 1]):.1f}] deg")
    amp = np.broadcast_to(np.radians(np.asarray(amplitude_deg, dtype=float)), (n,))
    margin = np.radians(limit_margin_deg)
    lo = np.minimum(np.maximum(q0 - amp, lim[:, 0] + margin), q0)
    hi = np.maximum(np.minimum(q0 + amp, lim[:, 1] - margin), q0)
    return Envelope(q0.copy(), lo, hi)


def move_duration(q_from: np.ndarray, q_to: np.ndarray, velocity_limits: np.ndarray,
                  velocity_scale: float = 0.5, min_duration: float = 0.5) -> float:
    """Duration (s) of a rest-to-rest move whose quintic peak speed is <= velocity_scale x limit."""
    dq = np.abs(np.asarray(q_to, float) - np.asarray(q_from, float))
    t = QUINTIC_PEAK * dq / (velocity_scale * np.asarray(velocity_limits, float))
    return float(max(min_duration, np.max(t)))


def check_command(q: np.ndarray, envelope: Envelope, desc: RobotDescription, tol: float = 1e-9) -> None:
    """Raise :class:`MotionLimitError` unless ``q`` is finite, inside the envelope and the limits."""
    q = np.asarray(q, dtype=float)
    if q.shape != (desc.n,) or not np.all(np.isfinite(q)):
        raise MotionLimitError(f"commanded point must be {desc.n} finite joint angles, got {q}")
    lim = desc.limits.position
    for j in range(desc.n):
        name = desc.joint_names[j]
        if q[j] < lim[j, 0] - tol or q[j] > lim[j, 1] + tol:
            raise MotionLimitError(f"commanded {name} = {np.degrees(q[j]):.3f} deg is outside the joint limits")
        if q[j] < envelope.lower[j] - tol or q[j] > envelope.upper[j] + tol:
            raise MotionLimitError(
                f"commanded {name} = {np.degrees(q[j]):.3f} deg is outside the sampling envelope "
                f"[{np.degrees(envelope.lower[j]):.3f}, {np.degrees(envelope.upper[j]):.3f}] deg around the pick "
                "configuration")


def check_move(q_from: np.ndarray, q_to: np.ndarray, duration: float, velocity_limits: np.ndarray,
               names: Sequence[str] | None = None) -> None:
    """Raise :class:`MotionLimitError` if a rest-to-rest quintic move would exceed a velocity limit."""
    if not np.isfinite(duration) or duration <= 0.0:
        raise MotionLimitError(f"move duration must be > 0 s, got {duration}")
    peak = QUINTIC_PEAK * np.abs(np.asarray(q_to, float) - np.asarray(q_from, float)) / duration
    over = np.flatnonzero(peak > np.asarray(velocity_limits, float) * (1 + 1e-9))
    if over.size:
        j = int(over[0])
        name = names[j] if names is not None else str(j)
        raise MotionLimitError(f"move of {name} needs {peak[j]:.3f} rad/s > limit {velocity_limits[j]:.3f} rad/s")


def stop_point(desc: RobotDescription, q: np.ndarray, dq: np.ndarray | None, deceleration: float = 10.0,
               min_time: float = 0.2, lead: float = 0.0, envelope: Envelope | None = None) -> tuple[np.ndarray, float]:
    """Where and when to stop from (q rad, dq rad/s) with a constant deceleration (rad/s^2).

    Returns (q_stop, T): T = max(min_time, max_j |dq_j| / deceleration), q_stop = q + dq (lead + T / 2)
    (the rest point of a linear velocity ramp to zero, ``lead`` s after the sample was taken: the
    age of the measurement when the command leaves), clipped to the position limits and, when given,
    to ``envelope`` (a stop inside a sampling run never leaves the run's envelope). A rest-to-rest
    hold at the *measured* position would need a reversal (the arm has moved on since), i.e. more
    than the velocity limit for a short T; this keeps the stop within the speed the arm already has.
    """
    q = np.asarray(q, dtype=float)
    if not (np.isfinite(deceleration) and deceleration > 0 and min_time > 0 and lead >= 0):
        raise PayloadEstimationError("deceleration and min_time must be > 0, lead >= 0")
    if dq is None:
        q_stop, t = q, float(min_time)
    else:
        dq = np.asarray(dq, dtype=float)
        t = float(max(min_time, np.max(np.abs(dq)) / deceleration))
        q_stop = q + dq * (lead + 0.5 * t)
    if envelope is not None:
        q_stop = np.clip(q_stop, envelope.lower, envelope.upper)
    return desc.limits.clip_position(q_stop), t


def executed_path(q_from: np.ndarray, dq_from: np.ndarray | None, points, samples: int = EXECUTED_SAMPLES
                  ) -> tuple[np.ndarray, np.ndarray]:
    """(q, dq), each (S, n) rad and rad/s: the path a controller follows for ``points`` =
    [(time_from_start s, q rad, dq rad/s | None)] from the state (``q_from``, ``dq_from``; None: at rest)
    -- the simulator's interpolation (:class:`sim.trajectory.JointTrajectory`: quintic segments with
    zero waypoint accelerations, its coefficients), at ``samples`` points per segment. The waypoints may
    respect every limit while the interpolation between them does not (a segment that starts moving, or
    ripple between an excitation's points)."""
    q_from = np.asarray(q_from, dtype=float)
    zero = np.zeros_like(q_from)
    times = np.array([0.0] + [float(p[0]) for p in points])
    qs = np.array([q_from] + [np.asarray(p[1], float) for p in points])
    vs = np.array([zero if dq_from is None else np.asarray(dq_from, float)]
                  + [zero if p[2] is None else np.asarray(p[2], float) for p in points])
    span = np.diff(times)[:, None]  # (S, 1)
    c = quintic_coefficients(qs[:-1], vs[:-1], qs[1:], vs[1:], span)  # (6, S, n)
    x = (span * np.linspace(0.0, 1.0, samples + 1)[None, 1:])[:, :, None]  # (S, m, 1): after each segment's start
    c = c[:, :, None, :]
    q = c[0] + x * (c[1] + x * (c[2] + x * (c[3] + x * (c[4] + x * c[5]))))
    dq = c[1] + x * (2 * c[2] + x * (3 * c[3] + x * (4 * c[4] + x * 5 * c[5])))
    return q.reshape(-1, q_from.size), dq.reshape(-1, q_from.size)


def executed_velocity_excess(desc: RobotDescription, q_from: np.ndarray, dq_from: np.ndarray | None, points,
                             margin: float = VELOCITY_MARGIN) -> np.ndarray:
    """Per joint, the peak |dq| along :func:`executed_path` over (1 - ``margin``) x its velocity limit
    (<= 1: within)."""
    _, dq = executed_path(q_from, dq_from, points)
    return np.max(np.abs(dq), axis=0) / ((1.0 - margin) * np.asarray(desc.limits.velocity, float))


def check_executed(desc: RobotDescription, q_from: np.ndarray, dq_from: np.ndarray | None, points,
                   what: str = "trajectory", margin: float = VELOCITY_MARGIN) -> None:
    """Raise :class:`MotionLimitError` when the executor's interpolated path of ``points`` from
    (``q_from``, ``dq_from``) leaves the position limits or needs more than (1 - ``margin``) of a
    velocity limit (:func:`executed_path`)."""
    q, dq = executed_path(q_from, dq_from, points)
    lim = desc.limits.position
    out = (q < lim[:, 0] - 1e-9) | (q > lim[:, 1] + 1e-9)
    if np.any(out):
        j = int(np.argwhere(out)[0][1])
        raise MotionLimitError(f"the {what} between its points leaves the limits of joint {desc.joint_names[j]}")
    vmax = (1.0 - margin) * np.asarray(desc.limits.velocity, float)
    over = np.max(np.abs(dq), axis=0) > vmax
    if np.any(over):
        j = int(np.argmax(np.max(np.abs(dq), axis=0) / vmax))
        raise MotionLimitError(f"the {what} needs {np.max(np.abs(dq[:, j])):.3f} rad/s of joint "
                               f"{desc.joint_names[j]} between its points, above {100 * (1 - margin):g} % of its "
                               f"velocity limit {desc.limits.velocity[j]:.3f} rad/s")


def executed_duration(desc: RobotDescription, q_from: np.ndarray, dq_from: np.ndarray | None, target: np.ndarray,
                      duration: float, margin: float = VELOCITY_MARGIN, stretch: float = 1.02,
                      max_duration: float = 30.0, target_velocity: np.ndarray | None = None) -> float:
    """The shortest of ``duration`` x ``stretch``^k (s) for which the executor's move from (``q_from``,
    ``dq_from``) to ``target``, at rest there or with ``target_velocity`` (rad/s), stays within the position
    limits and (1 - ``margin``) of the velocity limits (:func:`check_executed`); raises
    :class:`MotionLimitError` when none up to ``max_duration`` does (a velocity beyond the limits themselves)."""
    while True:
        try:
            check_executed(desc, q_from, dq_from, [(duration, target, target_velocity)], "move", margin)
            return float(duration)
        except MotionLimitError:
            if duration * stretch > max_duration:
                raise
            duration *= stretch


def checked_move(q: np.ndarray, target: np.ndarray, envelope: Envelope, desc: RobotDescription,
                 velocity_scale: float, min_duration: float, names: Sequence[str] | None = None,
                 dq: np.ndarray | None = None) -> float:
    """Duration (s) of a rest-to-rest move from the measured ``q`` (and velocity ``dq`` rad/s; None:
    at rest) to ``target`` (rad) after checking the target against ``envelope`` and the limits and
    the move against the velocity limits (raises :class:`MotionLimitError`): the quintic's peak within
    ``velocity_scale`` of the limits, and the executor's path from the measured state within
    (1 - :data:`VELOCITY_MARGIN`) of them (:func:`executed_duration` stretches the time where it is
    not). Every move a sampling run commands goes through here."""
    check_command(target, envelope, desc)
    duration = move_duration(q, target, desc.limits.velocity, velocity_scale, min_duration)
    check_move(q, target, duration, desc.limits.velocity, names or desc.joint_names)
    return executed_duration(desc, q, dq, target, duration)


def unknown_payload_duration(dyn, q_from: np.ndarray, q_to: np.ndarray, covariance: np.ndarray,
                             torque_margin: float, k_sigma: float = 3.0) -> float:
    """Shortest rest-to-rest quintic duration (s) from ``q_from`` to ``q_to`` (rad) for which the part of
    the payload the model does not know yet adds at most ``torque_margin`` (N m) of inertial torque on any
    joint at ``k_sigma`` standard deviations (0 when nothing is unknown).

    ``covariance`` (4 x 4) is that of p_L,g = (m, m c) (kg, kg m; payload frame) given the poses seen
    so far (:func:`collision.provisional.payload_gravity_posterior`). While a grasped load's mass or
    CoM is not determined by them (at the arm's stretched-up pose the mass does not show in the joint
    torques at all; after one pose the CoM along the gravity direction does not), its inertial torque
    Y_L(q, dq, ddq) Δp reads as an external torque in the monitor's residual; this bounds it below the
    residual's margin, at the quintic's peak acceleration (10/√3 · step / T²) and, for the Coriolis and
    centrifugal part, at its peak velocity (15/8 · step / T). The payload's own rotational inertia is
    left out (static poses never determine it, and at ±7° moves it adds hundredths of a N m).
    """
    cov = np.asarray(covariance, dtype=float)
    if cov.shape != (4, 4) or not np.all(np.isfinite(cov)):
        raise PayloadEstimationError(f"covariance must be a finite 4 x 4 matrix, got shape {cov.shape}")
    if not torque_margin > 0.0:
        raise PayloadEstimationError(f"torque_margin must be > 0 N m, got {torque_margin}")
    if not np.any(cov):
        return 0.0
    q_from = np.asarray(q_from, dtype=float)
    step = np.asarray(q_to, dtype=float) - q_from
    zero = np.zeros_like(q_from)
    static = dyn.payload_gravity_regressor(q_from)
    per_accel = dyn.payload_regressor(q_from, zero, step)[:, :4] - static  # N m per (rad/s² along step)
    per_speed = dyn.payload_regressor(q_from, step, zero)[:, :4] - static  # N m per (rad/s along step)²

    def spread(y: np.ndarray) -> float:
        return k_sigma * float(np.sqrt(np.max(np.einsum("ij,jk,ik->i", y, cov, y))))

    peak = max(QUINTIC_ACCEL_PEAK * spread(per_accel), QUINTIC_PEAK ** 2 * spread(per_speed))
    return float(np.sqrt(peak / torque_margin))


def _candidates(env: Envelope, moving: np.ndarray, max_candidates: int, rng: np.random.Generator) -> np.ndarray:
    """Corner/axis perturbations {lower, q0, upper} per moving joint (all, or a random subset)."""
    n = env.q0.size
    m = moving.size
    levels = np.stack([env.lower, env.q0, env.upper])  # (3, n)
    if 3 ** m <= max_candidates:
        codes = np.array(np.meshgrid(*([np.arange(3)] * m), indexing="ij")).reshape(m, -1).T
    else:
        axis = []
        for k in range(m):
            for c in (0, 2):
                code = np.ones(m, dtype=int)
                code[k] = c
                axis.append(code)
        codes = np.vstack([np.array(axis), rng.integers(0, 3, size=(max_candidates - len(axis), m))])
    cand = np.tile(env.q0, (codes.shape[0], 1))
    for k, j in enumerate(moving):
        cand[:, j] = levels[codes[:, k], j]
    cand = np.unique(cand, axis=0)
    assert cand.shape[1] == n
    return cand


def shortest_tour(q0: np.ndarray, poses: np.ndarray, cost) -> np.ndarray:
    """Order poses (first fixed when it is q0) by nearest neighbour + 2-opt on the move cost."""
    n = len(poses)
    if n <= 2:
        return np.arange(n)
    fixed_first = bool(np.allclose(poses[0], q0))
    start = q0
    remaining = list(range(1 if fixed_first else 0, n))
    order = [0] if fixed_first else []
    cur = start if not fixed_first else poses[0]
    while remaining:
        k = min(remaining, key=lambda i: cost(cur, poses[i]))
        order.append(k)
        remaining.remove(k)
        cur = poses[k]

    def total(o):
        pts = [q0, *[poses[i] for i in o], q0]
        return sum(cost(a, b) for a, b in zip(pts[:-1], pts[1:], strict=True))

    best = total(order)
    lo = 1 if fixed_first else 0
    improved = True
    while improved:
        improved = False
        for i in range(lo, n - 1):
            for j in range(i + 1, n):
                cand = order[:i] + order[i:j + 1][::-1] + order[j + 1:]
                c = total(cand)
                if c < best - 1e-12:
                    order, best, improved = cand, c, True
    return np.array(order)


def plan_poses(dyn, q0: np.ndarray, config: PosePlanConfig | None = None) -> PosePlan:
    """Plan a D-optimal static pose set around ``q0`` (see module docstring).

    ``dyn`` provides ``desc`` (RobotDescription) and ``payload_gravity_regressor(q)`` (n x 4).
    """
    cfg = config or PosePlanConfig()
    desc: RobotDescription = dyn.desc
    env = make_envelope(desc, q0, cfg.amplitude_deg, cfg.limit_margin_deg)
    n = desc.n
    moving = np.arange(n) if cfg.moving_joints is None else np.asarray(cfg.moving_joints, dtype=int)
    if moving.size and (moving.min() < 0 or moving.max() >= n):
        raise PayloadEstimationError(f"moving_joints must be in [0, {n}), got {cfg.moving_joints}")
    rng = np.random.default_rng(cfg.seed)
    cand = _candidates(env, moving, cfg.max_candidates, rng)
    ys = np.stack([dyn.payload_gravity_regressor(c) for c in cand])  # (C, n, 4)
    infos = np.einsum("cij,cik->cjk", ys, ys)  # (C, 4, 4)
    taken = [int(np.argmin(np.max(np.abs(cand - env.q0), axis=1)))] if cfg.include_pick else []
    chosen, info = greedy_d_optimal(infos, np.sum(infos[taken], axis=0) if taken else np.zeros((4, 4)),
                                    cfg.n_poses - len(taken), taken)
    return tour_plan(desc, env, cand[taken + chosen], info, cfg)


def greedy_d_optimal(infos: np.ndarray, info: np.ndarray, count: int,
                     taken: list[int] | tuple[int, ...] = ()) -> tuple[list[int], np.ndarray]:
    """Greedily add ``count`` of the candidates' information matrices ``infos`` (C, p, p) to ``info``
    (p, p), each maximising log det (regularised by 1e-6 of the mean candidate information); ``taken``
    candidates are not picked again unless every candidate has been. Returns (picked indices, info)."""
    p = info.shape[0]
    reg = 1e-6 * max(float(np.trace(infos.mean(axis=0))) / p, 1e-12) * np.eye(p)
    available = np.ones(len(infos), dtype=bool)
    available[list(taken)] = False
    chosen: list[int] = []
    while len(chosen) < count:
        if not available.any():
            available[:] = True  # fewer distinct candidates than poses: allow repeats
        _, logdets = np.linalg.slogdet(info + infos + reg)
        logdets[~available] = -np.inf
        k = int(np.argmax(logdets))
        chosen.append(k)
        available[k] = False
        info = info + infos[k]
    return chosen, info


def tour_plan(desc: RobotDescription, env: Envelope, poses: np.ndarray, info: np.ndarray,
              cfg: PosePlanConfig) -> PosePlan:
    """The :class:`PosePlan` visiting ``poses`` in a short tour from ``env.q0`` and back (quintic moves
    within ``cfg.velocity_scale`` of the limits, at least ``cfg.min_duration``), its D-criterion from
    the information matrix ``info``; validated (:func:`validate_plan`)."""
    vlim = np.asarray(desc.limits.velocity, dtype=float)

    def cost(a, b):
        return move_duration(a, b, vlim, cfg.velocity_scale, cfg.min_duration)

    poses = poses[shortest_tour(env.q0, poses, cost)]
    prev = env.q0
    durations = []
    for tgt in [*poses, env.q0]:
        durations.append(0.0 if np.allclose(tgt, prev, atol=1e-12) else cost(prev, tgt))
        prev = tgt
    sign, logdet = np.linalg.slogdet(info)
    ev = np.linalg.eigvalsh(info)
    cond = float(np.sqrt(ev[-1] / ev[0])) if ev[0] > 0 else float("inf")
    plan = PosePlan(env.q0.copy(), poses, np.array(durations), env, vlim,
                    float(logdet) if sign > 0 else float("-inf"), cond)
    validate_plan(plan, desc)
    return plan


def validate_plan(plan: PosePlan, desc: RobotDescription) -> None:
    """Check every pose against envelope ∩ limits and every move against the velocity limits."""
    prev = plan.q0
    for tgt, dur in plan.moves():
        check_command(tgt, plan.envelope, desc)
        check_move(prev, tgt, dur, plan.velocity_limits, desc.joint_names)
        prev = tgt


__all__ = [
    "MotionLimitError", "MoveTiming", "PosePlanConfig", "Envelope", "PosePlan", "make_envelope", "move_duration",
    "check_command", "check_move", "checked_move", "plan_poses", "unknown_payload_duration",
    "QUINTIC_ACCEL_PEAK", "validate_plan", "shortest_tour", "QUINTIC_PEAK", "stop_point", "tour_plan",
    "greedy_d_optimal", "VELOCITY_MARGIN", "executed_path", "executed_velocity_excess", "check_executed",
    "executed_duration",
]
