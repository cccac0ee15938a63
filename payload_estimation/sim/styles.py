"""Trajectories as users send them to joint_trajectory_controller, one per style (issue 46).

One straight joint-space move from ``q0`` to ``q1``, written the ways a user's program or a planner writes it:

- ``positions``: a planner's path (quintic time scaling over ``duration``) sampled every ``spacing`` s, positions
  only (a hand-written or a simple script's trajectory; the controller interpolates linearly, so the commanded
  velocity steps at every point);
- ``positions+velocities``: the same points with their velocities (cubic: the acceleration steps at the points);
- ``positions+velocities+accelerations``: with accelerations too (quintic: smooth);
- ``time-parameterised``: like MoveIt's time-optimal parameterisation: the time-optimal profile along the path
  under the joints' velocity limits (x ``velocity_scale``) and ``acceleration`` (trapezoidal speed, so the
  acceleration jumps at the switching instants), sampled every ``spacing`` s with positions, velocities and
  accelerations, the first point at ``time_from_start`` 0 (the start state), its own duration;
- ``stop-and-go``: positions only through two intermediate stops, each held ``dwell`` s (the velocity steps to
  zero and back).

Points are ``(time_from_start s, q rad, dq rad/s | None, ddq rad/s² | None)``, what
:meth:`.arm.SimulatedArm.set_trajectory` and :meth:`.driver.SimDriver.set_trajectory` take.
"""

from __future__ import annotations

import numpy as np

from .config import SimInputError

STYLES = ("positions", "positions+velocities", "positions+velocities+accelerations", "time-parameterised",
          "stop-and-go")


def _quintic_scaling(t: np.ndarray, duration: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    x = t / duration
    return (10 * x**3 - 15 * x**4 + 6 * x**5, (30 * x**2 - 60 * x**3 + 30 * x**4) / duration,
            (60 * x - 180 * x**2 + 120 * x**3) / duration**2)


def _trapezoid(t: np.ndarray, length: float, speed: float, accel: float) -> tuple[np.ndarray, ...]:
    """(s, ds, dds) at ``t`` of the time-optimal rest-to-rest profile over ``length`` with |ds| <= ``speed``,
    |dds| <= ``accel``, and its duration."""
    ta = speed / accel
    if ta * speed > length:  # no cruise: a triangle
        ta = np.sqrt(length / accel)
        speed = accel * ta
    tc = (length - ta * speed) / speed
    total = 2 * ta + tc
    back = np.clip(total - t, 0.0, None)
    s = np.where(t < ta, 0.5 * accel * t**2,
                 np.where(t < ta + tc, 0.5 * accel * ta**2 + speed * (t - ta), length - 0.5 * accel * back**2))
    ds = np.where(t < ta, accel * t, np.where(t < ta + tc, speed, accel * back))
    dds = np.where(t < ta, accel, np.where(t < ta + tc, 0.0, np.where(t < total, -accel, 0.0)))
    return s, ds, dds, total


def user_trajectory(style: str, q0, q1, duration: float = 2.5, spacing: float = 0.1, velocity_limits=None,
                    velocity_scale: float = 0.5, acceleration: float = 2.0, dwell: float = 0.3) -> list[tuple]:
    """The points of the move ``q0`` -> ``q1`` (rad) in ``style`` (one of :data:`STYLES`, module docstring);
    ``duration`` s (not for ``time-parameterised``: its own, from ``velocity_limits`` rad/s x ``velocity_scale``
    and ``acceleration`` rad/s² per joint), points every ``spacing`` s."""
    q0, q1 = np.asarray(q0, float), np.asarray(q1, float)
    d = q1 - q0
    if style in STYLES[:3]:
        t = np.arange(1, int(round(duration / spacing)) + 1) * (duration / round(duration / spacing))
        s, ds, dds = _quintic_scaling(t, duration)
        vel = style != "positions"
        acc = style == "positions+velocities+accelerations"
        return [(ti, q0 + si * d, dsi * d if vel else None, ddsi * d if acc else None)
                for ti, si, dsi, ddsi in zip(t, s, ds, dds)]
    if style == "time-parameterised":
        if velocity_limits is None:
            raise SimInputError("a time-parameterised trajectory needs the joints' velocity limits")
        moving = np.abs(d) > 1e-12
        if not np.any(moving):
            return [(0.0, q0, np.zeros_like(q0), np.zeros_like(q0)), (spacing, q1, np.zeros_like(q0),
                                                                       np.zeros_like(q0))]
        vmax = velocity_scale * np.asarray(velocity_limits, float)
        speed = float(np.min(vmax[moving] / np.abs(d[moving])))  # path parameter s in [0, 1]
        accel = float(np.min(acceleration / np.abs(d[moving])))
        total = _trapezoid(np.zeros(1), 1.0, speed, accel)[3]
        t = np.append(np.arange(0.0, total - 1e-6, spacing), total)
        s, ds, dds, _ = _trapezoid(t, 1.0, speed, accel)
        return [(ti, q0 + si * d, dsi * d, ddsi * d) for ti, si, dsi, ddsi in zip(t, s, ds, dds)]
    if style == "stop-and-go":
        move = (duration - 2 * dwell) / 3
        if move <= 0:
            raise SimInputError(f"stop-and-go: duration {duration} s leaves no time to move between two "
                                f"{dwell} s stops")
        a, b = q0 + d / 3, q0 + 2 * d / 3
        return [(move, a, None, None), (move + dwell, a, None, None), (2 * move + dwell, b, None, None),
                (2 * move + 2 * dwell, b, None, None), (duration, q1, None, None)]
    raise SimInputError(f"unknown trajectory style '{style}': one of {', '.join(STYLES)}")


__all__ = ["STYLES", "user_trajectory"]
