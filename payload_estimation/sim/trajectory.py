"""Joint trajectories for the simulated position controller: quintic segments through waypoints.

Like ros2_control's joint_trajectory_controller, a new trajectory replaces the current one and
starts from the current state (position, velocity) at the current time. Each segment is a quintic
with the given waypoint velocities (zero where not given) and zero waypoint accelerations
(rest-to-rest when no velocities are given). Times in s, angles in rad.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass

import numpy as np

from ..model.description import JointLimits
from .config import SimInputError

# Relative slack on velocity limits (sampling resolution of the check and round-off).
_VEL_SLACK = 1e-6
_POS_SLACK = 1e-9


@dataclass(frozen=True)
class TrajectoryPoint:
    """A waypoint: ``time`` from the trajectory start (s), ``q`` (rad), ``dq`` (rad/s)."""

    time: float
    q: np.ndarray
    dq: np.ndarray


def _quintic_coeffs(q0, v0, q1, v1, t):
    """Coefficients c0..c5 (each n,) of q(s) = sum c_i s^i on [0, t], zero end accelerations."""
    d = q1 - q0
    c0, c1, c2 = q0, v0, np.zeros_like(q0)
    c3 = (20 * d - (8 * v1 + 12 * v0) * t) / (2 * t**3)
    c4 = (-30 * d + (14 * v1 + 16 * v0) * t) / (2 * t**4)
    c5 = (12 * d - 6 * (v1 + v0) * t) / (2 * t**5)
    return np.stack([c0, c1, c2, c3, c4, c5])


class JointTrajectory:
    """Piecewise-quintic trajectory starting at ``t0`` from (``q0``, ``dq0``)."""

    def __init__(self, t0: float, q0: np.ndarray, dq0: np.ndarray, points: list[TrajectoryPoint]):
        self.t0 = float(t0)
        self.times = np.array([0.0] + [p.time for p in points])
        qs = [np.asarray(q0, float)] + [p.q for p in points]
        vs = [np.asarray(dq0, float)] + [p.dq for p in points]
        self._coeffs = [
            _quintic_coeffs(qs[i], vs[i], qs[i + 1], vs[i + 1], self.times[i + 1] - self.times[i])
            for i in range(len(points))
        ]
        self.q_end = qs[-1]
        self.dq_end = vs[-1]
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


def parse_points(points, n: int, names: tuple[str, ...], limits: JointLimits) -> list[TrajectoryPoint]:
    """Validate ``points`` = [(time_from_start_s, positions, velocities | None), ...]."""
    if len(points) == 0:
        raise SimInputError("trajectory has no points")
    out = []
    last = 0.0
    lo, hi = limits.position[:, 0], limits.position[:, 1]
    for i, point in enumerate(points):
        try:
            t, q, dq = point
        except (TypeError, ValueError) as exc:
            raise SimInputError(
                f"trajectory point {i}: expected (time_from_start, positions, velocities|None)") from exc
        t = float(t)
        if not np.isfinite(t) or t <= last:
            raise SimInputError(
                f"trajectory point {i}: time_from_start {t} s must be finite and greater than the previous "
                f"point's ({last} s)"
            )
        q = np.asarray(q, dtype=float)
        if q.shape != (n,):
            raise SimInputError(f"trajectory point {i}: {q.size} positions given for {n} joints {list(names)}")
        if not np.all(np.isfinite(q)):
            raise SimInputError(f"trajectory point {i}: positions contain NaN/inf: {q}")
        if dq is None:
            dq = np.zeros(n)
        dq = np.asarray(dq, dtype=float)
        if dq.shape != (n,):
            raise SimInputError(f"trajectory point {i}: {dq.size} velocities given for {n} joints")
        if not np.all(np.isfinite(dq)):
            raise SimInputError(f"trajectory point {i}: velocities contain NaN/inf: {dq}")
        bad = np.flatnonzero((q < lo - _POS_SLACK) | (q > hi + _POS_SLACK))
        if bad.size:
            j = bad[0]
            raise SimInputError(
                f"trajectory point {i}: joint {names[j]} position {q[j]:.4f} rad is outside its limits "
                f"[{lo[j]:.4f}, {hi[j]:.4f}] rad"
            )
        badv = np.flatnonzero(np.abs(dq) > limits.velocity)
        if badv.size:
            j = badv[0]
            raise SimInputError(
                f"trajectory point {i}: joint {names[j]} velocity {dq[j]:.3f} rad/s exceeds its limit "
                f"{limits.velocity[j]:.3f} rad/s"
            )
        out.append(TrajectoryPoint(t, q, dq))
        last = t
    return out
