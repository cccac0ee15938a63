"""Configuration and state records of the simulated torque-sensing arm (no ROS, SI units)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..errors import PayloadEstimationError
from ..model.parameters import BodyInertia

ArrayLike = float | np.ndarray | list | tuple


class SimInputError(PayloadEstimationError):
    """A simulator setting or command that cannot be used; the message names it and what is allowed."""


@dataclass(frozen=True)
class SensorConfig:
    """Joint-torque sensor and friction model.

    ``noise_std`` (N m) white Gaussian noise drawn at every physics step, scalar or per joint;
    ``offset`` (N m) constant sensor bias, scalar or per joint; ``lowpass_hz`` optional cut-off of
    a first-order low-pass applied to the sensor signal (noise and offset included) at the physics
    rate, as the lbr_fri_ros2_stack driver does (10 Hz). ``viscous`` (N m s/rad) and ``coulomb``
    (N m) are joint friction acting on the *motor side* of the torque sensor: the sensor measures
    the link-side torque tau_J = M q'' + C q' + g - tau_ext and does not see friction, unless
    ``sensor_sees_friction`` is set, in which case the measurement is the motor-side torque
    tau_J + tau_friction (like a torque estimated from motor currents).
    """

    noise_std: ArrayLike = 0.0
    offset: ArrayLike = 0.0
    lowpass_hz: float | None = None
    viscous: ArrayLike = 0.0
    coulomb: ArrayLike = 0.0
    sensor_sees_friction: bool = False


@dataclass(frozen=True)
class SimConfig:
    """Simulation settings.

    ``dt`` physics step (s); ``seed`` seeds the sensor noise and the model error; ``model_error``
    relative perturbation of the true link parameters (mass, CoM, inertia) with respect to the
    description the nodes use (0.1 = about 10 %), kept physically consistent; ``true_links``
    replaces the true link inertias altogether (link frames, one per joint).
    ``kp`` (N m/rad), ``kd`` (N m s/rad), ``ki`` (N m/(rad s)) joint controller gains, scalar or per
    joint; ``None`` derives them from the nominal inertia (see :mod:`payload_estimation.sim.arm`).
    ``bandwidth`` (rad/s) is the closed-loop bandwidth those default gains aim at. ``armature``
    (kg m^2, scalar or per joint) is the reflected rotor inertia of each drive: it sits on the
    motor side of the torque sensor (never in the measured link torque) and, as on a real
    geared arm, keeps the joint loops well conditioned whatever the link inertia.
    """

    dt: float = 0.001
    seed: int = 0
    model_error: float = 0.0
    true_links: tuple[BodyInertia, ...] | None = None
    sensor: SensorConfig = field(default_factory=SensorConfig)
    kp: ArrayLike | None = None
    kd: ArrayLike | None = None
    ki: ArrayLike | None = None
    bandwidth: float = 30.0
    armature: ArrayLike = 0.5


@dataclass(frozen=True)
class ArmState:
    """Simulated measurement at time ``t`` (s): positions (rad), velocities (rad/s) and the
    MEASURED joint torque ``tau`` (N m, per :class:`SensorConfig`), model joint order."""

    t: float
    q: np.ndarray
    dq: np.ndarray
    tau: np.ndarray

