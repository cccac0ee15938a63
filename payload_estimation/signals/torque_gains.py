"""Measured effort to joint torque (N m): per-joint gains, e.g. a motor current's torque constant, or -1
where a driver reports the joint torque with the opposite sign (lbr_fri_ros2_stack: KUKA's FRI
``measured_torque`` runs opposite to the URDF's joint torque)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from .samples import SampleDataError, Samples


def torque_gains(gain, n: int, joint_names: tuple[str, ...] = ()) -> np.ndarray:
    """Per-joint gains (n,) N m per unit from one value for all joints or n values (a list, an array or
    a string "G" / "G1,...,Gn"); an empty list means 1 (torque already in N m); a negative gain flips the
    effort's sign. Raises :class:`~.data.SampleDataError` naming the joint of a gain that is not a finite
    non-zero number."""
    if isinstance(gain, str):
        try:
            gain = [float(x) for x in gain.replace(" ", "").split(",") if x != ""]
        except ValueError:
            raise SampleDataError(f"torque gain {gain!r}: expected one number or {n} numbers separated by commas "
                                  "(N m per unit of the recorded effort)") from None
    g = np.atleast_1d(np.asarray(gain, dtype=float)).reshape(-1)
    if g.size == 0:
        return np.ones(n)
    if g.size == 1:
        g = np.full(n, float(g[0]))
    if g.size != n:
        raise SampleDataError(f"torque gain has {g.size} values, the robot has {n} joints "
                              "(give one value for all joints or one per joint)")
    bad = np.flatnonzero(~np.isfinite(g) | (g == 0))
    if bad.size:
        j = int(bad[0])
        name = joint_names[j] if j < len(joint_names) else f"{j + 1}"
        raise SampleDataError(f"torque gain of joint {name} is {g[j]}: gains must be finite non-zero "
                              "numbers (N m per unit of the recorded effort; -1 flips its sign)")
    return g


def effort_to_torque(effort: np.ndarray, gains: np.ndarray) -> np.ndarray:
    """Joint torque (N m) from a recorded effort (n,) or (N, n) and per-joint gains from :func:`torque_gains`."""
    return np.asarray(effort, dtype=float) * gains


def apply_torque_gain(samples: Samples, gain) -> Samples:
    """``samples`` with tau = G * effort per joint (see :func:`torque_gains`)."""
    g = torque_gains(gain, samples.n_joints, samples.joint_names)
    return samples if np.all(g == 1.0) else replace(samples, tau=effort_to_torque(samples.tau, g))


__all__ = ["apply_torque_gain", "effort_to_torque", "torque_gains"]
