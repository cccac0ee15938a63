"""``collision_monitor``'s parameters: the one table of defaults, ranges and docs, and its map to the core.

:data:`PARAMS` declares every parameter (docs/ros_interface.md and config/payload_estimation.yaml are generated
from it); each default is read from the field of the core's config that the parameter sets (one home each:
:class:`collision.monitor.MonitorConfig`, :class:`collision.payload_change.WatchConfig`,
:class:`collision.reaction.ReactionConfig`, :class:`collision.stop_resume.StopResumeConfig`,
:class:`collision.loss_gate.LossGateConfig`, :class:`collision.live_calibration.CalibrationConfig`,
:class:`collision.observer_payload.ObserverPayloadConfig`; ``max_payload``/``max_com_radius``: ``node_limits``).
:func:`monitor_configs` and :func:`calibration_config` turn the values into those configs.
"""

from __future__ import annotations

from dataclasses import fields, replace

import numpy as np

from ..collision.live_calibration import CalibrationConfig
from ..collision.loss_gate import LossGateConfig
from ..collision.monitor import MonitorConfig
from ..collision.observer_payload import ObserverPayloadConfig
from ..collision.payload_change import WatchConfig
from ..collision.reaction import POLICIES, ReactionConfig
from ..collision.stop_resume import StopResumeConfig
from ..collision.supervisor import SupervisorConfig
from .node_support import LIMIT_PARAMS, ROBOT_PARAMS, STREAM_PARAMS, TORQUE_PARAMS
from .parameters import Param, ParameterTable

_MON, _WATCH, _REACTION = MonitorConfig(), WatchConfig(), ReactionConfig()
_STOP, _LOSS, _CAL, _PAYLOAD = StopResumeConfig(), LossGateConfig(), CalibrationConfig(), ObserverPayloadConfig()

PARAMS = ROBOT_PARAMS + STREAM_PARAMS + TORQUE_PARAMS + LIMIT_PARAMS + ParameterTable([
    Param("dynamic_model", "", "the observer's unloaded dynamics: a PARAMS.yaml of `payload-estimation identify` "
          "(coefficients with their friction and offsets) or the robot YAML/URDF of `identify --physical` (link set "
          "with its friction); empty: the robot description, no friction. A file that does not load or belongs to "
          "another robot model (joint names, kinematics) refuses the model (status ERROR)", read_only=True),
    Param("gains", [_MON.gains], "observer gain K_I (1/s), one value or one per joint (docs/collision.md)", low=0.0,
          high=1000.0, low_open=True, min_items=1, applies="next sample (after a collision is released)"),
    Param("thresholds", [_MON.thresholds], "N m (Gaz & De Luca 2017: 6 N m), one value or one per joint; from a "
          "contact-free recording of the arm's moves: ~/start_threshold_calibration ... "
          "~/finish_threshold_calibration, or payload-estimation residual --calibrate", low=0.0, high=200.0,
          low_open=True, min_items=1, applies="next sample (after a collision is released)"),
    Param("threshold_margin", [_MON.margin], "N m, model-error envelope at rest: th_j = max(thresholds_j, margin_j + "
          "speed_j |dq_j| + n_sigma sigma_r,j), one value or one per joint", low=0.0, high=200.0, min_items=1,
          applies="next sample (after a collision is released)"),
    Param("threshold_speed", [_MON.speed], "N m s/rad, speed-dependent part of that envelope", low=0.0, high=1000.0,
          min_items=1, applies="next sample (after a collision is released)"),
    Param("n_sigma", _MON.n_sigma, "standard deviations of the residual noise in the envelope", low=0.0, high=20.0,
          applies="next sample (after a collision is released)"),
    Param("sensor_torque_noise", [_MON.torque_noise],
          "N m, torque sensor noise std (0: not modelled)", low=0.0, high=100.0,
          min_items=1, applies="next sample (after a collision is released)"),
    Param("sensor_velocity_noise", [_MON.velocity_noise],
          "rad/s, velocity noise std (0: not modelled)", low=0.0, high=10.0,
          min_items=1, applies="next sample (after a collision is released)"),
    Param("quadrature", _MON.quadrature, "observer integration of the torque over a step (hold: sample-and-hold "
          "torques, e.g. a simulator)", choices=("trapezoid", "hold"), applies="next sample (after a collision is "
          "released)"),
    Param("contact_estimation", _MON.contact is not None,
          "estimate the contact link, force and point after each detection "
          "(~/contact_wrench, ~/contact_marker)", applies="next sample (after a collision is released)"),
    Param("sampling_threshold_factor", _WATCH.sampling_factor,
          "thresholds x this while the payload sampler is active (payload only "
          "provisionally known), plus 3 sigma of the torque of the payload not yet known", low=1.0, high=10.0,
          applies="next sampling run"),
    Param("payload_event_window", _WATCH.window,
          "s after an announced grasp or release (payload_estimator/grasped, "
          "released) in which a residual a payload change explains is not a collision (thresholds at least "
          "payload_event_floor in it)", low=0.0, high=60.0,
          low_open=True, applies="next announcement"),
    Param("payload_event_floor", _WATCH.window_floor, "N m, the least threshold per joint inside an announced "
          "grasp/release window: an object taken at once moves the arm before its inertia is known, and a grasp is in "
          "no threshold calibration (docs/collision.md §3); joints set higher keep theirs", low=0.0, high=200.0),
    Param("release_fraction", _MON.release_fraction,
          "a collision is released below this fraction of the threshold", low=0.0,
          high=1.0, low_open=True, applies="next sample (after a collision is released)"),
    Param("confirm_samples", _MON.confirm_samples,
          "consecutive samples above a threshold for a detection", low=1, high=1000,
          applies="next sample (after a collision is released)"),
    Param("policy", _REACTION.policy, "reaction to a collision", choices=POLICIES,
          applies="next sample (after a stop has ended)"),
    Param("resume_delay", _REACTION.resume_delay, "s after the release before resuming (Gaz & De Luca 2017: 2 s)",
          low=0.0, high=600.0, applies="next sample (after a stop has ended)"),
    Param("hold_time", _STOP.hold_time, "s, minimum time_from_start of the stop point (tolerates stale state)", low=0.0,
          high=10.0, low_open=True),
    Param("stop_deceleration", _STOP.stop_deceleration,
          "rad/s^2: the stop ramps the current joint velocities down", low=0.0,
          high=1000.0, low_open=True),
    Param("residual_decimation", 1, "publish every k-th residual", low=1, high=1000),
    Param("resume_velocity_scale", _STOP.resume_velocity_scale,
          "peak speed of a resumed trajectory's first segment as a fraction of "
          "the velocity limit", low=0.0, high=1.0, low_open=True),
    Param("resume_min_duration", _STOP.resume_min_duration,
          "s, shortest first segment of a resumed trajectory", low=0.0, high=10.0,
          low_open=True),
    Param("payload_as_point_mass", _PAYLOAD.payload_as_point_mass,
          "a gravity-only estimate also enters M and C as a point mass at its CoM "
          "(false: gravity only, eq. 48 of Gaz & De Luca, IROS 2017)", applies="next estimate"),
    Param("threshold_calibration_safety", _CAL.safety, "~/finish_threshold_calibration sets each threshold "
          "to max(threshold_calibration_minimum, this x the largest |residual| recorded since "
          "~/start_threshold_calibration)", low=1.0, high=10.0, applies="next finish"),
    Param("threshold_calibration_minimum", _CAL.minimum, "N m, the lowest threshold a calibration sets (a margin "
          "for what a recording does not show)", low=0.0, high=50.0, low_open=True, applies="next finish"),
    Param("threshold_calibration_file", "", "where ~/finish_threshold_calibration also writes the calibrated "
          "thresholds as a parameter file for this node (--params-file); empty: they are applied, not written",
          path="file",
          applies="next finish"),
    Param("payload_lost_stop", _LOSS.payload_lost_stop, "while an estimated payload is carried after an announced "
          "grasp (payload_estimator/grasped), a residual step matching its own torque is reported as payload lost "
          "(WARN, ~/payload_lost, status), the observer goes back to the unloaded arm and the arm is not stopped; "
          "true: a payload loss stops the arm as a collision does",
          applies="next payload loss"),
])
MONITOR_KEYS = {"gains", "thresholds", "release_fraction", "confirm_samples", "threshold_margin", "threshold_speed",
                "n_sigma", "sensor_torque_noise", "sensor_velocity_noise", "quadrature", "contact_estimation"}
REACTION_KEYS = {"policy", "resume_delay"}
CALIBRATION_KEYS = {"threshold_calibration_safety", "threshold_calibration_minimum", "threshold_calibration_file"}
"""Read by ~/finish_threshold_calibration (:func:`calibration_config`; the file is the node's own)."""


def monitor_configs(values: dict) -> tuple[MonitorConfig, SupervisorConfig]:
    """The core's configs from the node's parameter values by name (:data:`PARAMS`; lists of one value or
    one per joint): the monitor's (observer, detector, contact) and the supervisor's."""

    def vec(k):
        a = np.asarray(values[k], float)
        return float(a[0]) if a.size == 1 else tuple(a.tolist())

    mon = MonitorConfig(gains=vec("gains"), thresholds=vec("thresholds"), margin=vec("threshold_margin"),
                        speed=vec("threshold_speed"), n_sigma=float(values["n_sigma"]),
                        torque_noise=vec("sensor_torque_noise"), velocity_noise=vec("sensor_velocity_noise"),
                        release_fraction=float(values["release_fraction"]),
                        confirm_samples=int(values["confirm_samples"]), quadrature=str(values["quadrature"]))
    if not values["contact_estimation"]:
        mon = replace(mon, contact=None)
    return mon, SupervisorConfig(**{f.name: type(f.default)(values[f.name]) for f in fields(SupervisorConfig)})


def calibration_config(values: dict) -> CalibrationConfig:
    """The rule of ``~/finish_threshold_calibration`` from the node's parameter values by name."""
    return CalibrationConfig(safety=float(values["threshold_calibration_safety"]),
                             minimum=float(values["threshold_calibration_minimum"]))


def per_joint_check(n: int | None):
    """The whole-set check of the per-joint parameters for a model of ``n`` joints (None: no model yet)."""

    def check(values: dict) -> str | None:
        if 0.0 in values["torque_gain"]:
            return "torque_gain: gains must be non-zero (N m per unit of effort; -1 flips its sign)"
        if n is None:
            return None
        for k in ("torque_gain", "gains", "thresholds", "threshold_margin", "threshold_speed", "sensor_torque_noise",
                  "sensor_velocity_noise"):
            err = per_joint_problem(k, values[k], n)
            if err:
                return err
        return None

    return check


def per_joint_problem(name: str, value: list, n: int) -> str | None:
    """Why ``value`` of the per-joint parameter ``name`` does not fit an arm of ``n`` joints (None: it does)."""
    return None if len(value) in (1, n) else f"{name}: give one value or {n} (one per joint), got {len(value)}"


__all__ = ["CALIBRATION_KEYS", "MONITOR_KEYS", "PARAMS", "REACTION_KEYS", "calibration_config", "monitor_configs",
           "per_joint_check", "per_joint_problem"]
