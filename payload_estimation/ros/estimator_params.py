"""``payload_estimator``'s parameters: the one table of defaults, ranges and docs, and its map to the core.

:data:`PARAMS` declares every parameter (docs/ros_interface.md and config/payload_estimation.yaml are generated
from it); :func:`estimator_config` turns its values into the core's
:class:`payload.estimator.EstimatorConfig`. The defaults of this node's own rows are that config's (one copy,
also what a bare run uses); the shared rows (static test, limits) equal it (test_bare_run checks).
"""

from __future__ import annotations

from ..node_limits import MAX_COM_RADIUS
from ..payload.estimator import MIN_COM_PRIOR_STD, EstimatorConfig
from ..payload.gravity import PayloadLimits
from ..payload.online import MIN_INERTIA_PRIOR_STD
from ..payload.static import STATIC_METHODS, StaticFitConfig
from .node_support import LIMIT_PARAMS, ROBOT_PARAMS, SETTLE_PARAMS, STREAM_PARAMS, TORQUE_PARAMS, settle_config
from .parameters import Param, ParameterTable

_D = EstimatorConfig()  # the defaults

NO_PRIOR = [0.0]
"""``grasp_com_prior``'s and ``grasp_inertia_prior``'s value for no prior (a ROS list parameter cannot be empty: [] is
not a list of numbers)."""

PARAMS = ROBOT_PARAMS + STREAM_PARAMS + TORQUE_PARAMS + SETTLE_PARAMS + LIMIT_PARAMS + ParameterTable([
    Param("method", _D.fit.method,
          "auto: differential when ~/capture_unloaded captures exist, else one-shot; one-shot: "
          "the model's unloaded torques; differential: anchored on ~/capture_unloaded captures taken before the "
          "grasp (docs/bench/uncertainty.md: 10-20x smaller σ)", choices=STATIC_METHODS, applies="next estimate"),
    Param("anchor_samples", _D.anchor_samples,
          "~/capture_unloaded averages at least this many samples ...", low=1, high=100000,
          applies="next capture"),
    Param("anchor_window", _D.anchor_window,
          "... or this many s (its noise is common to every pose of the differential fit)",
          low=0.0, high=30.0, low_open=True, applies="next capture"),
    Param("torque_noise", _D.fit.torque_noise, "N m, standard deviation of a static mean torque (fit weights)", low=0.0,
          high=10.0, low_open=True, applies="next estimate"),
    Param("gravity_model", _D.gravity_model,
          "PARAMS.yaml of the unloaded robot identified by `payload-estimation identify "
          "--gravity-only` (or a full model): used instead of the description's gravity, its covariance in σ; "
          "empty: the calibration file if one belongs to the robot model, else the description with "
          "model_uncertainty. A file that does not load or belongs to another robot model (joint names, kinematics "
          "fingerprint) is refused (at start: status ERROR, estimates refused)", applies="next estimate"),
    Param("calibration_file", _D.calibration_file, "where ~/calibrate writes the identified gravity model (empty: "
          "$ROS_HOME/payload_estimation/gravity_<robot>.yaml, ROS_HOME defaulting to ~/.ros); it is then loaded "
          "as gravity_model. With gravity_model empty, a file found here at start is used if it belongs to the "
          "robot model (joint names, kinematics fingerprint), else refused at ERROR and the nominal model used "
          "(status key calibration)",
          applies="next calibrate (found at start)", path="file"),
    Param("model_uncertainty", _D.fit.model_uncertainty,
          "relative 1-σ error of the robot model's link masses and CoMs, in the estimate's σ: propagated (static "
          "fits), fitted with the payload within it (online estimate, dynamic sample) (a data-sheet model: a few "
          "percent; not used with gravity_model)", low=0.0,
          high=1.0, applies="next estimate"),
    Param("torque_offset_std", _D.fit.torque_offset_std,
          "N m, 1-σ joint-torque sensor offset the model lacks (one-shot only; the "
          "differential method cancels it)", low=0.0, high=100.0, applies="next estimate"),
    Param("max_mass_std", _D.fit.max_mass_std,
          "kg: an estimate with a larger mass σ is published at level WARN with the reason",
          low=0.0, low_open=True, high=100.0, applies="next estimate"),
    Param("max_com_std", _D.fit.max_com_std, "m: an estimate with a larger CoM σ (any axis) is published at level WARN",
          low=0.0, low_open=True, high=10.0, applies="next estimate"),
    Param("max_recording", _D.max_recording,
          "s, longest joint-state recording of a dynamic run (a longer one is cut and "
          "refused)", low=1.0, high=600.0, applies="next recording"),
    Param("export_dir", "", "directory to write each new estimate into as payload.urdf (<inertial> link), "
          "payload.yaml, payload.kuka.txt (KUKA load data) and payload.franka.yaml (setLoad arguments); "
          "empty: nothing written", applies="next estimate", path="dir"),
    Param("online_estimation", True,
          "after ~/grasped, estimate the payload online from whatever motion follows (issue 32: no sampling "
          "motion) and publish it on payload/estimate at 20 Hz once the arm moves (and at rest after a move until "
          "converged), its gravity uncertainty on ~/online_estimate (status keys online_*); nothing is published "
          "at rest before the first move, while payload_sampler runs or after ~/released", applies="next grasp"),
    Param("grasp_com_prior", list(_D.grasp_com_prior) or NO_PRIOR,
          "m, [x, y, z] in the payload frame (the frame of the estimate's CoM): what the gripper knows of the grasped "
          "part's CoM (e.g. the grasp point plus half the part's height along the flange axis), given to the online "
          "estimate at ~/grasped: it bounds the CoM component the motion has not separated yet (along the vertical "
          f"until the part is tilted); [0.0]: no prior. Within max_com_radius ({MAX_COM_RADIUS:g} m by default)",
          low=-10.0, high=10.0, min_items=1, applies="next grasp"),
    Param("grasp_com_prior_std", _D.grasp_com_prior_std,
          "m, 1-σ of grasp_com_prior (each axis): how far the true CoM may be from it. Refused below "
          f"{MIN_COM_PRIOR_STD:g} m (a tighter prior would claim a CoM the gripper cannot know); too small a value "
          "makes the estimate and its σ wrong until the motion separates the CoM",
          low=0.0, low_open=True, high=1.0, applies="next grasp"),
    Param("grasp_inertia_prior", list(_D.grasp_inertia_prior) or NO_PRIOR,
          "kg m^2, [Ixx, Ixy, Ixz, Iyy, Iyz, Izz] about the part's own CoM, payload frame axes: what the part's data "
          "(CAD, a data sheet) say of the grasped part's inertia, given to the online estimate at ~/grasped: until "
          "the motion tilts the part, its accelerations show the CoM along the vertical only together with the "
          "inertia (docs/bench/online_ceiling.md); [0.0]: no prior. Must be a physical inertia (positive definite, "
          "triangle inequality)", low=-100.0, high=100.0, min_items=1, applies="next grasp"),
    Param("grasp_inertia_prior_std", _D.grasp_inertia_prior_std,
          f"1-σ of every grasp_inertia_prior component, a fraction of its largest moment. Refused below "
          f"{MIN_INERTIA_PRIOR_STD:g} (a part's data do not give its inertia better than ~10 %)",
          low=0.0, low_open=True, high=10.0, applies="next grasp"),
])


def estimator_config(values: dict) -> EstimatorConfig:
    """The core's settings (:class:`payload.estimator.EstimatorConfig`) from this node's parameter values."""
    v = values
    limits = PayloadLimits(max_payload=float(v["max_payload"]), max_com_radius=float(v["max_com_radius"]))
    fit = StaticFitConfig(method=str(v["method"]), torque_noise=float(v["torque_noise"]),
                          model_uncertainty=float(v["model_uncertainty"]),
                          torque_offset_std=float(v["torque_offset_std"]), max_mass_std=float(v["max_mass_std"]),
                          max_com_std=float(v["max_com_std"]), limits=limits)
    return EstimatorConfig(settle=settle_config(v), anchor_samples=int(v["anchor_samples"]),
                           anchor_window=float(v["anchor_window"]), fit=fit,
                           torque_gain=tuple(float(g) for g in v["torque_gain"]),
                           max_recording=float(v["max_recording"]), gravity_model=str(v["gravity_model"]),
                           calibration_file=str(v["calibration_file"]),
                           grasp_com_prior=prior_values(v["grasp_com_prior"]),
                           grasp_com_prior_std=float(v["grasp_com_prior_std"]),
                           grasp_inertia_prior=prior_values(v["grasp_inertia_prior"]),
                           grasp_inertia_prior_std=float(v["grasp_inertia_prior_std"]))


def prior_values(value) -> tuple[float, ...]:
    """``grasp_com_prior`` or ``grasp_inertia_prior`` for the core: () for :data:`NO_PRIOR`, else its values (the core
    checks them)."""
    values = [float(x) for x in value]
    return () if values == NO_PRIOR else tuple(values)


__all__ = ["NO_PRIOR", "PARAMS", "prior_values", "estimator_config"]
