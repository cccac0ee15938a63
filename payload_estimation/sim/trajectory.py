"""Joint trajectories for the simulated position controller: polynomial segments through waypoints.

A new trajectory replaces the current one and starts from the current state (position, velocity) at the current
time, as ros2_control's joint_trajectory_controller does. Two interpolations (``interpolation``):

- :data:`QUINTIC` (the Python API's default, the package's own moves): a quintic per segment with the given
  waypoint velocities and accelerations, zero where not given (rest-to-rest when no velocities are given);
- :data:`JTC` (sim_node: what ros2_controllers' joint_trajectory_controller does with its default ``spline``
  interpolation, ``trajectory.cpp``): per segment by the fields *both* ends carry -- positions only: linear (the
  velocity steps at every waypoint, the acceleration is 0 between them); positions and velocities: cubic (the
  acceleration steps at the waypoints); positions, velocities and accelerations: quintic. The state before the
  trajectory is the measured one with positions and velocities but no accelerations (a robot without an
  acceleration state interface), so the first segment is linear or cubic; a first point at ``time_from_start``
  0 starts the trajectory at that point (the current state is not used).

After the last point both hold its position at zero velocity. Times in s, angles in rad.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass

import numpy as np

from ..model.description import JointLimits
from .config import SimInputError

QUINTIC = "quintic"
JTC = "jtc"
INTERPOLATIONS = (QUINTIC, JTC)

# Relative slack on velocity limits (sampling resolution of the check and round-off).
_VEL_SLACK = 1e-6
_POS_SLACK = 1e-9


@dataclass(frozen=True)
class TrajectoryPoint:
    """A waypoint: ``time`` from the trajectory start (s), ``q`` (rad), ``dq`` (rad/s) and ``ddq`` (rad/s²),
    each None when the point does not give it."""

    time: float
    q: np.ndarray
    dq: np.ndarray | None = None
    ddq: np.ndarray | None = None


def _quintic_coeffs(q0, v0, q1, v1, t, a0=None, a1=None):
    """Coefficients c0..c5 (each n,) of q(s) = sum c_i s^i on [0, t] through (q0, v0, a0) and (q1, v1, a1)
    (accelerations zero when None)."""
    d = q1 - q0
    a0 = np.zeros_like(d) if a0 is None else a0
    a1 = np.zeros_like(d) if a1 is None else a1
    c0, c1, c2 = q0, v0, 0.5 * a0 + np.zeros_like(d)
    c3 = (20 * d - (8 * v1 + 12 * v0) * t - (3 * a0 - a1) * t**2) / (2 * t**3)
    c4 = (-30 * d + (14 * v1 + 16 * v0) * t + (3 * a0 - 2 * a1) * t**2) / (2 * t**4)
    c5 = (12 * d - 6 * (v1 + v0) * t - (a0 - a1) * t**2) / (2 * t**5)
    return np.stack([c0, c1, c2, c3, c4, c5])


def _cubic_coeffs(q0, v0, q1, v1, t):
    """c0..c5 (c4 = c5 = 0) of the cubic through (q0, v0) and (q1, v1) on [0, t]."""
    d = q1 - q0
    z = np.zeros_like(d)
    return np.stack([q0, v0, (3 * d - (2 * v0 + v1) * t) / t**2, (-2 * d + (v0 + v1) * t) / t**3, z, z])


def _linear_coeffs(q0, q1, t):
    """c0..c5 (c2.. = 0) of the straight line from q0 to q1 on [0, t]."""
    z = np.zeros_like(q0)
    return np.stack([q0, (q1 - q0) / t, z, z, z, z])


class JointTrajectory:
    """Piecewise-polynomial trajectory starting at ``t0`` from (``q0``, ``dq0``); ``interpolation`` one of
    :data:`INTERPOLATIONS` (module docstring)."""

    def __init__(self, t0: float, q0: np.ndarray, dq0: np.ndarray, points: list[TrajectoryPoint],
                 interpolation: str = QUINTIC):
        if interpolation not in INTERPOLATIONS:
            raise SimInputError(f"unknown interpolation '{interpolation}': one of {', '.join(INTERPOLATIONS)}")
        self.t0 = float(t0)
        self.interpolation = interpolation
        q0, dq0 = np.asarray(q0, float), np.asarray(dq0, float)
        pts = list(points)
        if interpolation == JTC and pts and pts[0].time <= 0.0:
            start = [pts.pop(0)]  # the trajectory starts at its first point: the current state is not used
        else:
            start = [TrajectoryPoint(0.0, q0, dq0, None if interpolation == JTC else np.zeros_like(q0))]
        nodes = start + pts
        self.times = np.array([p.time for p in nodes], dtype=float)
        self.kinds: list[str] = []
        self._coeffs = []
        for a, b in zip(nodes[:-1], nodes[1:]):
            kind, c = _segment(a, b, b.time - a.time, interpolation)
            self.kinds.append(kind)
            self._coeffs.append(c)
        self.q_end = nodes[-1].q
        self.dq_end = nodes[-1].dq if nodes[-1].dq is not None else np.zeros_like(self.q_end)
        self._zero = np.zeros_like(self.q_end)
        self._times_list = self.times.tolist()

    @property
    def duration(self) -> float:
        return float(self.times[-1])

    @property
    def t_end(self) -> float:
        return self.t0 + self.duration

    def sample(self, t: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Desired (q, dq, ddq) at absolute time ``t``; holds the last point after the end."""
        s = t - self.t0
        if s >= self.duration or not self._coeffs:
            return self.q_end, self._zero, self._zero
        s = max(s, 0.0)
        i = min(max(bisect.bisect_right(self._times_list, s) - 1, 0), len(self._coeffs) - 1)
        x = s - self._times_list[i]
        x2, x3 = x * x, x * x * x
        x4 = x2 * x2
        basis = np.array([
            [1.0, x, x2, x3, x4, x4 * x],
            [0.0, 1.0, 2 * x, 3 * x2, 4 * x3, 5 * x4],
            [0.0, 0.0, 2.0, 6 * x, 12 * x2, 20 * x3],
        ])
        out = basis @ self._coeffs[i]
        return out[0], out[1], out[2]

    def check_limits(self, limits: JointLimits, names: tuple[str, ...], samples: int = 64) -> None:
        """Raise SimInputError if a waypoint leaves the position limits or a segment's velocity
        exceeds the velocity limits (checked on ``samples`` points per segment)."""
        lo, hi = limits.position[:, 0], limits.position[:, 1]
        for i, c in enumerate(self._coeffs):
            t = self.times[i + 1] - self.times[i]
            x = np.linspace(0.0, t, samples)[:, None]
            q = c[0] + x * (c[1] + x * (c[2] + x * (c[3] + x * (c[4] + x * c[5]))))
            dq = c[1] + x * (2 * c[2] + x * (3 * c[3] + x * (4 * c[4] + x * 5 * c[5])))
            bad_q = (q < lo - _POS_SLACK) | (q > hi + _POS_SLACK)
            # The start is the current state; judge the path after it.
            if np.any(bad_q[1:]):
                r, j = np.argwhere(bad_q[1:])[0]
                raise SimInputError(
                    f"trajectory segment {i + 1} (to point {i}, t={self.times[i + 1]:.3f} s): joint "
                    f"{names[j]} reaches {q[r + 1, j]:.4f} rad, outside its limits [{lo[j]:.4f}, {hi[j]:.4f}]"
                )
            bad_v = np.abs(dq) > limits.velocity * (1 + _VEL_SLACK)
            if np.any(bad_v):
                r, j = np.argwhere(bad_v)[0]
                raise SimInputError(
                    f"trajectory segment {i + 1} (to point {i}, t={self.times[i + 1]:.3f} s): joint "
                    f"{names[j]} needs {abs(dq[r, j]):.3f} rad/s, above its velocity limit "
                    f"{limits.velocity[j]:.3f} rad/s; give the point a later time_from_start"
                )


def _segment(a: TrajectoryPoint, b: TrajectoryPoint, t: float, interpolation: str) -> tuple[str, np.ndarray]:
    """(kind, coefficients) of the segment from ``a`` to ``b`` over ``t`` s."""
    if interpolation == QUINTIC:
        za = np.zeros_like(a.q)
        return "quintic", _quintic_coeffs(a.q, za if a.dq is None else a.dq, b.q, za if b.dq is None else b.dq, t,
                                          a.ddq, b.ddq)
    if a.dq is None or b.dq is None:
        return "linear", _linear_coeffs(a.q, b.q, t)
    if a.ddq is None or b.ddq is None:
        return "cubic", _cubic_coeffs(a.q, a.dq, b.q, b.dq, t)
    return "quintic", _quintic_coeffs(a.q, a.dq, b.q, b.dq, t, a.ddq, b.ddq)


def _field(values, i: int, n: int, what: str, unit: str) -> np.ndarray | None:
    if values is None:
        return None
    v = np.asarray(values, dtype=float)
    if v.shape != (n,):
        raise SimInputError(f"trajectory point {i}: {v.size} {what} given for {n} joints")
    if not np.all(np.isfinite(v)):
        raise SimInputError(f"trajectory point {i}: {what} contain NaN/inf: {v}")
    return v


def parse_points(points, n: int, names: tuple[str, ...], limits: JointLimits,
                 interpolation: str = QUINTIC) -> list[TrajectoryPoint]:
    """Validate ``points`` = [(time_from_start_s, positions, velocities | None[, accelerations | None]), ...].

    Times strictly increase from > 0 s (:data:`JTC`: the first may be 0 s, the start). With :data:`JTC` a point's
    accelerations need its velocities (the controller ignores them otherwise)."""
    if len(points) == 0:
        raise SimInputError("trajectory has no points")
    out = []
    last = 0.0
    lo, hi = limits.position[:, 0], limits.position[:, 1]
    for i, point in enumerate(points):
        try:
            if len(point) == 3:
                t, q, dq = point
                ddq = None
            else:
                t, q, dq, ddq = point
        except (TypeError, ValueError) as exc:
            raise SimInputError(
                f"trajectory point {i}: expected (time_from_start, positions, velocities|None"
                "[, accelerations|None])") from exc
        t = float(t)
        first_at_zero = i == 0 and interpolation == JTC and t == 0.0
        if not np.isfinite(t) or (t <= last and not first_at_zero):
            raise SimInputError(
                f"trajectory point {i}: time_from_start {t} s must be finite and greater than the previous "
                f"point's ({last} s)"
            )
        q = np.asarray(q, dtype=float)
        if q.shape != (n,):
            raise SimInputError(f"trajectory point {i}: {q.size} positions given for {n} joints {list(names)}")
        if not np.all(np.isfinite(q)):
            raise SimInputError(f"trajectory point {i}: positions contain NaN/inf: {q}")
        dq = _field(dq, i, n, "velocities", "rad/s")
        ddq = _field(ddq, i, n, "accelerations", "rad/s^2")
        if interpolation == JTC and ddq is not None and dq is None:
            raise SimInputError(f"trajectory point {i}: accelerations without velocities (joint_trajectory_controller "
                                "interpolates accelerations only together with velocities): give both or neither")
        bad = np.flatnonzero((q < lo - _POS_SLACK) | (q > hi + _POS_SLACK))
        if bad.size:
            j = bad[0]
            raise SimInputError(
                f"trajectory point {i}: joint {names[j]} position {q[j]:.4f} rad is outside its limits "
                f"[{lo[j]:.4f}, {hi[j]:.4f}] rad"
            )
        if dq is not None:
            badv = np.flatnonzero(np.abs(dq) > limits.velocity)
            if badv.size:
                j = badv[0]
                raise SimInputError(
                    f"trajectory point {i}: joint {names[j]} velocity {dq[j]:.3f} rad/s exceeds its limit "
                    f"{limits.velocity[j]:.3f} rad/s"
                )
        if interpolation == QUINTIC and dq is None:
            dq = np.zeros(n)
        out.append(TrajectoryPoint(t, q, dq, ddq))
        last = t
    return out
