"""``payload_estimator``: static captures from joint_states -> payload mass and CoM (paper 000, VI-A).

Interface (names relative to the node namespace, all remappable):

- subscribes ``joint_states`` (sensor_msgs/JointState; effort = measured joint torque) and, with an
  empty ``robot`` parameter, ``robot_description``;
- services ``~/start_recording``, ``~/store_reference`` and ``~/estimate_motion`` (std_srvs/Trigger:
  the sampler's dynamic mode; record the joint-state stream over one excitation, keep it as the
  unloaded reference run, or fit all ten payload parameters from it, differential against the
  reference when there is one: :func:`identification.payload_dynamic.estimate_payload_dynamic`);
- services ``~/grasped`` and ``~/released`` (std_srvs/Trigger): the user or the gripper driver announces
  that an object was grasped or released; each publishes ``~/payload_event`` (std_msgs/String
  ``grasped`` / ``released``, reliable, volatile) so the collision monitor learns the change instead of
  stopping the arm; ``~/released`` also forgets the payload as ``~/reset`` does (0 kg published);
- services ``~/capture``, ``~/capture_unloaded``, ``~/estimate``, ``~/reset``, ``~/clear_captures``
  (std_srvs/Trigger; clear_captures forgets loaded and calibration captures, used at the start of a run),
  ``~/capture_calibration`` and ``~/calibrate`` (std_srvs/Trigger: static captures of the unloaded arm
  across a pose sweep, then its gravity model with offsets identified, written to ``calibration_file``
  and loaded as ``gravity_model``);
- publishes ``payload/estimate`` (geometry_msgs/InertiaStamped, reliable + transient local;
  frame_id = payload frame; inertia about the CoM, 0 when only gravity parameters are estimated),
  ``~/status`` and ``/diagnostics`` (diagnostic_msgs/DiagnosticArray, on events and every second).

joint_states are taken by a thread of their own (:mod:`.dedicated_subscription`, a deep queue): a
recording gets every sample and a static capture judges the newest ones even while a fit runs.
A capture is rejected when joint_states are stale — judged on the wall clock, also under
``use_sim_time`` — or the arm is not static (motion.settle); a stream restart (stamps starting over)
empties the sample window. Parameters: see :data:`PARAMS` and docs/ros_interface.md.
"""

from __future__ import annotations

import os
import sys
import threading
from dataclasses import replace
from pathlib import Path

import numpy as np
from diagnostic_msgs.msg import DiagnosticStatus
from geometry_msgs.msg import InertiaStamped
from rclpy.node import Node
from rclpy.parameter import Parameter
from sensor_msgs.msg import JointState
from std_msgs.msg import String
from std_srvs.srv import Trigger

from ..files.exports import write_exports
from ..identification.identified_model import IdentificationError, IdentifiedModel
from ..identification.robot_identification import describe_offsets, identify_gravity
from ..model.dynamics import RigidBodyDynamics
from ..model.robot_file import FINGERPRINT_KEY, kinematics_fingerprint
from ..payload.dynamic import DynamicFitConfig, MotionRecording, check_recording, estimate_payload_dynamic
from ..payload.estimate import NO_PAYLOAD, PayloadEstimate
from ..payload.gravity import PayloadLimits
from ..payload.model_uncertainty import declared_source
from ..payload.recordings import CURRENT_WARNING
from ..payload.static import (
    STATIC_METHODS,
    StaticFitConfig,
    UnloadedModel,
    estimate_payload_static,
    precision_problem,
    unloaded_model,
)
from ..signals.samples import SampleDataError, Samples
from ..signals.settle import SampleWindow, SettleConfig, check_static
from ..signals.torque_gains import effort_to_torque, torque_gains
from ..stream import StampVerdict
from .dedicated_subscription import create_dedicated_subscription
from .messages import estimate_to_msg
from .node_support import (
    LIMIT_PARAMS,
    ROBOT_PARAMS,
    SETTLE_PARAMS,
    STREAM_PARAMS,
    THROTTLE_S,
    JointStateInput,
    RobotModelSource,
    StatusReporter,
    joint_names_for,
    settle_config,
)
from .parameters import Param, ParameterError, ParameterTable
from .qos import EVENT_QOS, LATCHED_QOS, SENSOR_QOS

PARAMS = ROBOT_PARAMS + STREAM_PARAMS + SETTLE_PARAMS + LIMIT_PARAMS + ParameterTable([
    Param("method", "auto", "auto: differential when ~/capture_unloaded captures exist, else one-shot; one-shot: "
          "the model's unloaded torques; differential: anchored on ~/capture_unloaded captures taken before the "
          "grasp (docs/bench/uncertainty.md: 10-20x smaller σ)", choices=STATIC_METHODS, applies="next estimate"),
    Param("anchor_samples", 150, "~/capture_unloaded averages at least this many samples ...", low=1, high=100000,
          applies="next capture"),
    Param("anchor_window", 1.0, "... or this many s (its noise is common to every pose of the differential fit)",
          low=0.0, high=30.0, low_open=True, applies="next capture"),
    Param("torque_noise", 0.05, "N m, standard deviation of a static mean torque (fit weights)", low=0.0,
          high=10.0, low_open=True, applies="next estimate"),
    Param("gravity_model", "", "PARAMS.yaml of the unloaded robot identified by `payload-estimation identify "
          "--gravity-only` (or a full model): used instead of the description's gravity, its covariance in σ; "
          "empty: the calibration file if one belongs to the robot model, else the description with "
          "model_uncertainty. A file that does not load or belongs to another robot model (joint names, kinematics "
          "fingerprint) is refused (at start: status ERROR, estimates refused)", applies="next estimate"),
    Param("calibration_file", "", "where ~/calibrate writes the identified gravity model (empty: "
          "$ROS_HOME/payload_estimation/gravity_<robot>.yaml, ROS_HOME defaulting to ~/.ros); it is then loaded "
          "as gravity_model. With gravity_model empty, a file found here at start is used if it belongs to the "
          "robot model (joint names, kinematics fingerprint), else refused at ERROR and the nominal model used "
          "(status key calibration)",
          applies="next calibrate (found at start)", path="file"),
    Param("model_uncertainty", 0.05, "relative 1-σ error of the robot model's link masses and CoMs; propagated "
          "into the estimate's σ (a data-sheet model: a few percent; not used with gravity_model)", low=0.0,
          high=1.0, applies="next estimate"),
    Param("torque_offset_std", 0.5, "N m, 1-σ joint-torque sensor offset the model lacks (one-shot only; the "
          "differential method cancels it)", low=0.0, high=100.0, applies="next estimate"),
    Param("max_mass_std", 0.1, "kg: an estimate with a larger mass σ is published at level WARN with the reason",
          low=0.0, low_open=True, high=100.0, applies="next estimate"),
    Param("max_com_std", 0.02, "m: an estimate with a larger CoM σ (any axis) is published at level WARN",
          low=0.0, low_open=True, high=10.0, applies="next estimate"),
    Param("torque_gain", [1.0], "N m per unit of joint_states effort, one value for all joints or one per joint: "
          "set it when the drive reports motor current ([1.0]: effort is torque in N m; a ROS list parameter "
          "cannot default to empty). Current-based torque includes the drive's friction, which grows with the "
          "load: prefer method differential", low=0.0, low_open=True, min_items=1, applies="next sample"),
    Param("max_recording", 30.0, "s, longest joint-state recording of a dynamic run (a longer one is cut and "
          "refused)", low=1.0, high=600.0, applies="next recording"),
    Param("export_dir", "", "directory to write each new estimate into as payload.urdf (<inertial> link), "
          "payload.yaml, payload.kuka.txt (KUKA load data) and payload.franka.yaml (setLoad arguments); "
          "empty: nothing written", applies="next estimate", path="dir"),
])


def format_estimate(est: PayloadEstimate) -> str:
    """One line an operator can read: mass, CoM (mm), std, condition number, residual."""
    s = est.std or {}
    com_mm = np.asarray(est.com, float) * 1e3
    std_com = [s.get(k, float("nan")) * 1e3 for k in ("cx", "cy", "cz")]
    return (f"mass {est.mass:.4f} kg (std {s.get('mass', float('nan')):.4f}), CoM [{com_mm[0]:.1f}, {com_mm[1]:.1f}, "
            f"{com_mm[2]:.1f}] mm (std [{std_com[0]:.1f}, {std_com[1]:.1f}, {std_com[2]:.1f}]) in {est.frame}, "
            f"cond {est.condition_number:.3g}, residual RMS {est.residual_rms:.3g} N m, {est.samples} samples, "
            f"method {est.method}" + "".join(f"; {note}" for note in est.notes))


class PayloadEstimatorNode(Node):
    """Thin node around :func:`identification.payload.estimate_payload_gravity`."""

    def __init__(self, **kwargs):
        super().__init__("payload_estimator", **kwargs)
        self.dyn: RigidBodyDynamics | None = None
        self.gain = np.ones(1)
        self.values = PARAMS.declare(self, check=self._check_params, on_change=self._on_params)
        self._lock = threading.Lock()
        self.joint_names: tuple[str, ...] = ()
        self.input: JointStateInput | None = None
        self._window: SampleWindow | None = None
        self._loaded: list[tuple[np.ndarray, np.ndarray]] = []
        self._unloaded: list[tuple[np.ndarray, np.ndarray]] = []
        self._calibration: list[tuple[np.ndarray, np.ndarray]] = []
        self.current: PayloadEstimate = NO_PAYLOAD
        self.frame = ""
        self.gravity_model: UnloadedModel | None = None
        self._gravity_error = ""  # why gravity_model did not load (estimates are refused meanwhile)
        self._calibration_note = ""  # which calibration is used, or why the one found was refused (status)
        self._calibration_refused = False
        self._export_failures = 0
        self._export_error = ""  # why the newest failed export failed
        self._last = (DiagnosticStatus.OK, "unloaded (no payload estimated yet)")
        self._recording: list | None = None  # (t, q, dq, tau) rows while recording a dynamic run
        self._recording_overflow = False
        self._reference: MotionRecording | None = None
        self._input_lock = threading.Lock()

        self.pub_estimate = self.create_publisher(InertiaStamped, "payload/estimate", LATCHED_QOS)
        self.status = StatusReporter(self, "payload", self._snapshot)
        # Its own thread: a capture judges the newest samples (an executor-served depth-200 queue kept
        # this node 0.2 s behind the arm) and a recording gets every sample (a shallow one dropped them).
        self._joint_states = create_dedicated_subscription(self, JointState, "joint_states", self._on_joint_states,
                                                           SENSOR_QOS, self._input_lock)
        self.create_service(Trigger, "~/capture", self._srv_capture)
        self.create_service(Trigger, "~/capture_unloaded", self._srv_capture_unloaded)
        self.create_service(Trigger, "~/estimate", self._srv_estimate)
        self.create_service(Trigger, "~/reset", self._srv_reset)
        self.create_service(Trigger, "~/clear_captures", self._srv_clear)
        self.create_service(Trigger, "~/capture_calibration", self._srv_capture_calibration)
        self.create_service(Trigger, "~/calibrate", self._srv_calibrate)
        self.create_service(Trigger, "~/start_recording", self._srv_start_recording)
        self.create_service(Trigger, "~/store_reference", self._srv_store_reference)
        self.create_service(Trigger, "~/estimate_motion", self._srv_estimate_motion)
        # announced grasp / release: the collision monitor learns the change instead of stopping the arm
        self.pub_event = self.create_publisher(String, "~/payload_event", EVENT_QOS)
        self.create_service(Trigger, "~/grasped", self._srv_grasped)
        self.create_service(Trigger, "~/released", self._srv_released)
        # a changed robot_description while a dynamic run is recorded is taken when the recording ends
        self.model = RobotModelSource(self, self.values, self._on_model, busy=lambda: self._recording is not None)
        # No estimate is published at start: a late-joining latched "0 kg" would overwrite a payload
        # the monitor already uses (e.g. its provisional one while sampling). ~/reset publishes 0 kg.
        self.status.publish()

    # ------------------------------------------------------------------ configuration
    def _check_params(self, values: dict) -> str | None:
        if self.dyn is None:
            return None
        try:
            torque_gains(values["torque_gain"], self.dyn.n, self.dyn.desc.joint_names)
        except SampleDataError as e:
            return f"torque_gain: {e}"
        if values["gravity_model"] != self.values["gravity_model"] and values["gravity_model"]:
            try:
                checked_gravity_model(self.dyn, values["gravity_model"])
            except (OSError, ValueError) as e:  # IdentificationError is a ValueError
                return f"gravity_model {values['gravity_model']} refused: {e}"
        return None

    def _load_gravity_model(self, dyn: RigidBodyDynamics) -> None:
        """Load ``gravity_model`` for ``dyn``: a file that does not load or belong to ``dyn``'s model refuses
        estimates, at ERROR. Empty: the calibration file (:meth:`_load_calibration`)."""
        path = str(self.values["gravity_model"])
        self.gravity_model, self._gravity_error = None, ""
        self._calibration_note, self._calibration_refused = "", False
        if not path:
            self._load_calibration(dyn)
            return
        try:
            self.gravity_model, note = checked_gravity_model(dyn, path)
        except (OSError, ValueError) as e:
            self._gravity_error = f"gravity_model {path} did not load: {e}"
            self.get_logger().error(f"{self._gravity_error}; estimates are refused until it loads (set gravity_model "
                                    "to a file identified for this robot model, or to '' for the nominal model)")
            return
        self._calibration_note = f"gravity_model {path} ({note})"
        self.get_logger().info(f"unloaded model: {self.gravity_model.uncertainty.source} from {path} ({note})")

    def _load_calibration(self, dyn: RigidBodyDynamics) -> None:
        """Use the calibration file at ``calibration_file`` (default path) when there is one that belongs to
        ``dyn``'s model; one that does not is refused at ERROR and the nominal model used (said in the status)."""
        path = self._calibration_path(dyn.desc.name)
        if not path.is_file():
            self._calibration_note = f"none at {path}: nominal model (payload_sampler/sweep calibrates)"
            return
        try:
            self.gravity_model, note = checked_gravity_model(dyn, path)
        except (OSError, ValueError) as e:
            self._calibration_note = f"REFUSED {path}: {e}; the nominal model is used"
            self._calibration_refused = True
            self.get_logger().error(f"calibration file {path} refused: {e}. The nominal model is used: calibrate "
                                    "this robot model again (payload_sampler/sweep), or set calibration_file or "
                                    "gravity_model to a file of this robot model")
            return
        self._calibration_note = f"using {path} ({note})"
        self.get_logger().info(f"calibrated gravity model found at {path} and used ({note})")

    def _set_gain(self, desc) -> None:
        """Per-joint effort-to-torque gains (core :func:`torque_gains`); warn when effort is not torque."""
        try:
            gain = torque_gains(self.values["torque_gain"], desc.n, desc.joint_names)
        except SampleDataError as e:
            raise ParameterError(f"torque_gain: {e}") from e
        self.gain = gain
        if np.any(gain != 1.0):
            self.get_logger().warning(f"torque_gain {gain.tolist()} N m per unit applied to joint_states effort; "
                                      f"{CURRENT_WARNING}")

    def _on_model(self, desc) -> None:
        names = joint_names_for(desc, self.values["joint_names"])
        self._set_gain(desc)
        dyn = RigidBodyDynamics(desc)
        self._load_gravity_model(dyn)
        with self._lock:
            self.dyn = dyn
            self.joint_names = names
            self.frame = desc.payload_frame_name
            self.input = JointStateInput(self, names, self.values, require_velocity=False)
            self._loaded.clear()
            self._unloaded.clear()
            self._new_window()
        self.status.hardware_id = desc.name
        self.get_logger().info(f"payload_estimator ready: robot {desc.name}, method {self.values['method']}, "
                               f"joints {list(names)}")

    def _settle(self, anchor: bool = False) -> SettleConfig:
        s = settle_config(self.values)
        if anchor:
            s = replace(s, min_average_samples=int(self.values["anchor_samples"]),
                        max_window=float(self.values["anchor_window"]))
        return s

    def _new_window(self) -> None:
        s, a = self._settle(), self._settle(anchor=True)
        # longer than any max_window: a history shorter than max_window reads as "collecting samples"
        self._window = SampleWindow(horizon=max(0.5, 2 * s.window, 1.25 * s.max_window, 1.25 * a.max_window))

    def _on_params(self, names: set[str]) -> None:
        self.values.update(PARAMS.values(self, names))
        if self.input is not None and names & set(STREAM_PARAMS.by_name):
            self.input.configure(self.values)
        if self.dyn is not None and "torque_gain" in names:
            self._set_gain(self.dyn.desc)
        if self.dyn is not None and "gravity_model" in names:
            self._load_gravity_model(self.dyn)
            self.status.publish()
        if self.dyn is not None and names & (set(SETTLE_PARAMS.by_name) | {"anchor_window"}):
            with self._lock:
                self._new_window()
        self.get_logger().info(f"parameters changed: {sorted(names)}")

    # ------------------------------------------------------------------ input
    def _on_joint_states(self, msg: JointState) -> None:
        if self.input is None:
            return
        got = self.input.receive(msg)
        if got is None:
            return
        verdict, t, s = got
        if verdict is StampVerdict.HOLD:
            return
        with self._lock:
            if verdict is StampVerdict.RESTART:
                self._window.clear()
            tau = effort_to_torque(s.tau, self.gain)
            self._window.append(t, s.q, s.dq, tau)
            if self._recording is not None and s.dq is not None:
                if len(self._recording) and t - self._recording[0][0] > float(self.values["max_recording"]):
                    self._recording_overflow = True
                else:
                    self._recording.append((t, s.q.copy(), s.dq.copy(), tau.copy()))

    # ------------------------------------------------------------------ services
    def _unavailable(self) -> str | None:
        if self.dyn is None:
            return f"no robot model ({self.model.error})"
        age = self.input.age()
        if age is None:
            return "no valid joint_states received yet (check the topic and joint names)"
        if self.input.lost():
            return f"joint_states stale: last valid message {age:.2f} s ago (wall clock)"
        return None

    def _static_sample(self, settle: SettleConfig) -> tuple[np.ndarray | None, np.ndarray | None, str]:
        why = self._unavailable()
        if why:
            return None, None, why
        with self._lock:
            t, q, dq, tau = self._window.arrays()
        r = check_static(t, q, dq, tau, settle, self.joint_names)
        if not r.static:
            return None, None, f"arm not static: {r.reason}"
        return r.q, r.tau, (f"torque std {r.torque_std:.3f} N m, spread {np.degrees(r.spread):.3f} deg over "
                            f"{r.samples} samples, newest {1e3 * self.input.age():.0f} ms old")

    def _capture(self, store: list, what: str, response: Trigger.Response, anchor: bool = False):
        q, tau, info = self._static_sample(self._settle(anchor))
        if q is None:
            response.success, response.message = False, f"{what} rejected: {info}"
            self.get_logger().warning(response.message, throttle_duration_sec=THROTTLE_S)
            return response
        with self._lock:
            store.append((q, tau))
            k = len(store)
        response.success = True
        response.message = f"{what} {k} at q = {np.round(np.degrees(q), 2).tolist()} deg ({info})"
        return response

    def _srv_capture(self, request, response):
        return self._capture(self._loaded, "capture", response)

    def _srv_capture_unloaded(self, request, response):
        return self._capture(self._unloaded, "unloaded capture", response, anchor=True)

    def _srv_capture_calibration(self, request, response):
        return self._capture(self._calibration, "calibration capture", response)

    def _calibration_path(self, robot: str | None = None) -> Path:
        """``calibration_file``, or the default path for ``robot`` (default: the current model's name) under
        ``$ROS_HOME`` (ROS 2's per-user directory, default ~/.ros)."""
        path = str(self.values["calibration_file"])
        ros_home = Path(os.environ.get("ROS_HOME") or Path.home() / ".ros").expanduser()
        return Path(path).expanduser() if path else (ros_home / "payload_estimation" /
                                                     f"gravity_{robot or self.dyn.desc.name}.yaml")

    def _srv_calibrate(self, request, response):
        """Identify the unloaded gravity model (with offsets) from the calibration captures, write it and use it."""
        if self.dyn is None:
            response.success, response.message = False, f"calibrate rejected: no robot model ({self.model.error})"
            return response
        with self._lock:
            captures = list(self._calibration)
        if not captures:
            response.success, response.message = False, ("calibrate rejected: no calibration captures (call "
                                                          "payload_sampler/sweep, which captures them, or "
                                                          "~/capture_calibration at each pose of your own)")
            return response
        path = self._calibration_path()
        try:
            samples = Samples(np.array([c[0] for c in captures]).reshape(-1, self.dyn.n),
                              np.array([c[1] for c in captures]).reshape(-1, self.dyn.n))
            model = identify_gravity(self.dyn.desc, samples, offset=True)
            model.info[FINGERPRINT_KEY] = kinematics_fingerprint(self.dyn.desc)  # checked when it is loaded
            path.parent.mkdir(parents=True, exist_ok=True)
            model.save(path)
        except (OSError, ValueError) as e:  # IdentificationError, SampleDataError are ValueErrors
            response.success, response.message = False, f"calibrate rejected: {e} ({len(captures)} captures kept)"
            self.get_logger().error(response.message)
            return response
        res = self.set_parameters([Parameter("gravity_model", value=str(path))])[0]
        if not res.successful:
            response.success, response.message = False, f"calibrate: {path} written but not loaded: {res.reason}"
            self.get_logger().error(response.message)
            return response
        with self._lock:
            self._calibration.clear()
        response.success = True
        response.message = (f"gravity model identified from {len(captures)} poses: {len(model.values)} coefficients, "
                            f"residual RMS {model.residual_rms:.3g} N m, cond {model.condition_number:.3g}, "
                            f"{describe_offsets(model, self.joint_names)}; written to {path} and loaded as "
                            "gravity_model (found there and checked against the robot model on the next start)")
        self.get_logger().info(response.message)
        return response

    def _srv_estimate(self, request, response):
        if self.dyn is None:
            response.success, response.message = False, f"estimate rejected: no robot model ({self.model.error})"
            return response
        with self._lock:
            loaded, unloaded = list(self._loaded), list(self._unloaded)
        if not loaded:
            response.success, response.message = False, "estimate rejected: no samples captured (call ~/capture)"
            return response
        if self._gravity_error:
            response.success, response.message = False, f"estimate rejected: {self._gravity_error}"
            return response
        q = np.array([s[0] for s in loaded])
        tau = np.array([s[1] for s in loaded])
        q_u = np.array([s[0] for s in unloaded]) if unloaded else None
        tau_u = np.array([s[1] for s in unloaded]) if unloaded else None
        cfg = self._fit_config()
        try:
            est = estimate_payload_static(self.dyn, q, tau, q_u, tau_u, cfg, self.gravity_model)
            est = replace(est, frame=self.frame)
        except ValueError as e:  # PayloadRejected is a ValueError
            return self._rejected(e, response)
        with self._lock:
            self._loaded.clear()  # next sampling run starts fresh; unloaded anchor is kept
        return self._accept(est, cfg, response)

    def _rejected(self, e: Exception, response):
        msg = f"estimate rejected: {e}; previous payload kept ({self.current.mass:.3f} kg)"
        self.get_logger().error(msg)
        self._last = (DiagnosticStatus.WARN, msg)
        self.status.publish()
        response.success, response.message = False, msg
        return response

    def _accept(self, est: PayloadEstimate, cfg: StaticFitConfig, response):
        """Publish ``est`` (flagged when imprecise), export it and answer."""
        imprecise = precision_problem(est, cfg.max_mass_std, cfg.max_com_std)
        if imprecise:
            self._publish(est, DiagnosticStatus.WARN, f"payload estimated, imprecise: {imprecise}")
            self.get_logger().warning(f"payload estimate is imprecise: {imprecise}; {format_estimate(est)}")
        else:
            self._publish(est, DiagnosticStatus.OK, "payload estimated")
        failures = self._export_failures
        exported = self._export(est)
        if self._export_failures > failures:  # published, but not where the user expects it: WARN, not OK
            self._last = (DiagnosticStatus.WARN, f"{self._last[1]}; export FAILED: {self._export_error}")
            self.status.publish()
        response.success = True
        response.message = (f"IMPRECISE ({imprecise}): " if imprecise else "") + format_estimate(est) + exported
        self.get_logger().info(f"payload estimate: {response.message}")
        return response

    # ------------------------------------------------------------------ dynamic runs
    def _srv_start_recording(self, request, response):
        why = self._unavailable()
        if why:
            response.success, response.message = False, f"recording rejected: {why}"
            return response
        with self._lock:
            self._recording, self._recording_overflow = [], False
        response.success, response.message = True, "recording joint_states"
        return response

    def _take_recording(self) -> tuple[MotionRecording | None, str]:
        """(the recording, '') and recording stopped; (None, why) when there is none or it is unusable."""
        with self._lock:
            rows, overflow = self._recording, self._recording_overflow
            self._recording = None
        if rows is None:
            return None, "nothing recorded (call ~/start_recording first)"
        if overflow:
            return None, f"the recording exceeded max_recording ({self.values['max_recording']} s)"
        try:
            return MotionRecording.from_rows(rows), ""
        except ValueError as e:
            return None, str(e)

    def _srv_store_reference(self, request, response):
        rec, why = self._take_recording()
        if rec is None:
            response.success, response.message = False, f"reference rejected: {why}"
            return response
        try:  # what the fit will demand of it, checked now: a bad reference is found before the grasp
            rec = check_recording(rec, len(self.joint_names), "reference run", DynamicFitConfig().max_gap)
            start, end = rec.motion_span()
        except ValueError as e:
            response.success, response.message = False, f"reference rejected: {e}; record it again"
            self.get_logger().error(response.message, throttle_duration_sec=2.0)
            return response
        self._reference = rec
        response.success = True
        response.message = (f"reference run stored: {rec.t.size} samples over {rec.duration:.2f} s, motion "
                            f"{end - start:.2f} s{_stream_gaps(rec)}")
        self.get_logger().info(response.message)
        self.status.publish()
        return response

    def _srv_estimate_motion(self, request, response):
        if self.dyn is None:
            response.success, response.message = False, f"estimate rejected: no robot model ({self.model.error})"
            return response
        rec, why = self._take_recording()
        if rec is None:
            response.success, response.message = False, f"estimate rejected: {why}"
            return response
        cfg = self._fit_config()
        dyn_cfg = DynamicFitConfig(model_uncertainty=cfg.model_uncertainty, torque_offset_std=cfg.torque_offset_std,
                                   limits=cfg.limits)
        try:
            est = estimate_payload_dynamic(self.dyn, rec, self._reference, dyn_cfg, previous=self.current)
        except ValueError as e:
            return self._rejected(e, response)
        est = replace(est, frame=self.frame, notes=est.notes + (f"{rec.t.size} samples{_stream_gaps(rec)}",))
        return self._accept(est, cfg, response)

    def _model_label(self) -> str:
        """Which unloaded model the estimates use and how its uncertainty was made (for status)."""
        if self.dyn is None:
            return "none"
        v = self.values
        head = f"{self.dyn.desc.name} ({v['robot'] or 'robot_description'}): "
        if self._gravity_error:
            return head + f"NONE ({self._gravity_error})"
        if self.gravity_model is not None:
            return head + f"{self.gravity_model.uncertainty.source}, {self.gravity_model.source}"
        return head + declared_source(float(v["model_uncertainty"]), float(v["torque_offset_std"]))

    def _fit_config(self) -> StaticFitConfig:
        """The core fit's settings from the parameters (:func:`identification.static_fit.estimate_payload_static`)."""
        v = self.values
        limits = PayloadLimits(max_payload=float(v["max_payload"]), max_com_radius=float(v["max_com_radius"]))
        return StaticFitConfig(method=str(v["method"]), torque_noise=float(v["torque_noise"]),
                               model_uncertainty=float(v["model_uncertainty"]),
                               torque_offset_std=float(v["torque_offset_std"]), max_mass_std=float(v["max_mass_std"]),
                               max_com_std=float(v["max_com_std"]), limits=limits)

    def _srv_clear(self, request, response):
        with self._lock:
            k, c = len(self._loaded), len(self._calibration)
            self._loaded.clear()
            self._calibration.clear()
        response.success, response.message = True, (f"cleared {k} loaded and {c} calibration capture(s); payload and "
                                                     "unloaded anchor kept")
        return response

    def _srv_reset(self, request, response):
        with self._lock:
            self._loaded.clear()
            self._unloaded.clear()
        if self.dyn is None:
            response.success, response.message = False, f"reset rejected: no robot model ({self.model.error})"
            return response
        self._publish(NO_PAYLOAD, DiagnosticStatus.OK, "reset: unloaded")
        response.success, response.message = True, "payload reset: unloaded (0 kg); captures cleared"
        self.get_logger().info(response.message)
        return response

    def _announce(self, event: str) -> str:
        """Publish ``event`` on ~/payload_event (the collision monitor's cue); a warning phrase if nobody listens."""
        self.pub_event.publish(String(data=event))
        if self.pub_event.get_subscription_count() == 0:
            return ("; WARNING: no collision monitor listens on payload_estimator/payload_event (is it running in "
                    "this namespace?)")
        return ""

    def _srv_grasped(self, request, response):
        """An object was grasped: its payload is unknown until estimated; the monitor learns it provisionally."""
        with self._lock:
            self._loaded.clear()  # the unloaded anchor, taken before the grasp, is kept
        prev = self.current.mass
        response.success = True
        response.message = ("grasp announced: payload being learned by the collision monitor; call "
                            "payload_sampler/sample for an estimate" + self._announce("grasped"))
        if prev > 0:
            response.message += (f"; the published estimate ({prev:.3f} kg) described the load before this grasp: "
                                 "announce ~/released when an object is put down")
        self._last = (DiagnosticStatus.OK, "grasp announced: payload unknown until estimated")
        self.get_logger().info(response.message)
        self.status.publish()
        return response

    def _srv_released(self, request, response):
        """The object was released: forget the payload (as ~/reset); the monitor expects its torque to vanish."""
        listening = self._announce("released")  # before the 0 kg estimate: the monitor opens its window first
        self._srv_reset(request, response)
        if response.success:
            response.message = ("release announced: payload forgotten (0 kg), captures cleared; the collision "
                                "monitor expects the payload's torque to disappear" + listening)
            self._last = (DiagnosticStatus.OK, "release announced: unloaded")
            self.get_logger().info(response.message)
            self.status.publish()
        else:
            response.message = f"release announced to the collision monitor, but {response.message}{listening}"
        return response

    # ------------------------------------------------------------------ output
    def _export(self, est: PayloadEstimate) -> str:
        """Write the estimate's exports into ``export_dir`` (if set); a phrase for the response."""
        directory = str(self.values["export_dir"])
        if not directory:
            return ""
        try:
            robot = str(self.values["robot"])
            # the model the estimate was made with places the flange (base_link/tip_link included)
            paths = write_exports(est, directory, model=robot or "robot_description",
                                  robot=self.dyn.desc if robot and self.dyn is not None else None)
        except (OSError, ValueError) as e:
            self._export_failures += 1
            self._export_error = f"{directory}: {e} (check export_dir)"
            self.get_logger().error(f"export to {directory} failed: {e}; the estimate is published but not "
                                    "written: set export_dir to a directory this node can write")
            return f"; export to {directory} FAILED: {e}"
        return f"; exported to {paths[0].parent}"

    def _publish(self, est: PayloadEstimate, level: int, text: str) -> None:
        self.current = est
        self.pub_estimate.publish(estimate_to_msg(est, self.get_clock().now().to_msg(), self.frame))
        self._last = (level, text)
        self.status.publish()

    def _snapshot(self) -> tuple[int, str, dict]:
        est = self.current
        level, text = self._last
        if self.dyn is None:
            level, text = DiagnosticStatus.ERROR, f"no robot model ({self.model.error})"
        elif self._gravity_error:
            level, text = DiagnosticStatus.ERROR, f"{self._gravity_error}: estimates refused"
        elif self._calibration_refused:
            level = DiagnosticStatus.ERROR if level == DiagnosticStatus.ERROR else DiagnosticStatus.WARN
            text = f"{text}; calibration file refused, nominal model used: {self._calibration_note}"
        elif self.input is not None and self.input.age() is not None and self.input.lost():
            level, text = DiagnosticStatus.WARN, f"{text}; joint_states lost: captures rejected"
        vals = {"mass": est.mass, "com_x": est.com[0], "com_y": est.com[1], "com_z": est.com[2],
                "condition_number": est.condition_number, "residual_rms": est.residual_rms,
                "samples": est.samples, "captures": len(self._loaded),
                "calibration_captures": len(self._calibration), "unloaded_captures": len(self._unloaded),
                "method": est.method, "frame": self.frame, "configured_method": self.values["method"],
                "reference_run": "" if self._reference is None else
                f"{self._reference.t.size} samples, {self._reference.duration:.2f} s",
                "undetermined": ", ".join(est.undetermined),
                "model": self._model_label(), "calibration": self._calibration_note,
                "export_failures": self._export_failures,
                "last_export_error": self._export_error}
        vals.update({f"std_{k}": v for k, v in (est.std or {}).items()})
        if self.input is not None:
            vals.update(self.input.counters())
        return level, text, vals

    def destroy_node(self) -> None:
        subscription = getattr(self, "_joint_states", None)  # None when the constructor failed before it
        if subscription is not None:
            subscription.destroy()
        super().destroy_node()


def checked_gravity_model(dyn: RigidBodyDynamics, path: str | Path) -> tuple[UnloadedModel, str]:
    """The identified model file at ``path`` as ``dyn``'s unloaded model, and how far its belonging was checked.

    Refused (:class:`IdentificationError` with the reason) unless it loads and was identified for this
    robot model: the same robot name and joint names, and the same kinematics fingerprint when the file
    has one (files written before fingerprints: joint names only, said in the note)."""
    p = Path(path).expanduser()
    if not p.is_file():
        raise IdentificationError(f"{p} does not exist")
    model = IdentifiedModel.load(p)
    desc = dyn.desc
    if tuple(model.joint_names) != desc.joint_names:
        raise IdentificationError(f"it was identified for joints {list(model.joint_names)}, this robot model "
                                  f"({desc.name}) has {list(desc.joint_names)}: it belongs to another robot model")
    here, there = kinematics_fingerprint(desc), model.info.get(FINGERPRINT_KEY)
    if there and there != here:
        raise IdentificationError(f"it was identified on other kinematics (fingerprint {there}, this robot model "
                                  f"{here}): its coefficients do not apply to these link frames")
    note = ("joint names and kinematics fingerprint match" if there else "joint names match; the kinematics could "
            "not be checked: the file has no kinematics fingerprint, it was written before they were recorded")
    return unloaded_model(dyn, model, p.name, str(p)), note


def _stream_gaps(rec: MotionRecording) -> str:
    """', N samples missing (x %)' of a recording whose stamps skip (judged on the median interval)."""
    dt = np.diff(rec.t)
    if dt.size == 0:
        return ""
    step = float(np.median(dt))
    missing = int(np.sum(np.maximum(np.round(dt / step) - 1, 0)))
    return f", {missing} samples missing ({100 * missing / (missing + rec.t.size):.1f} %)" if missing else ""


def main(args=None) -> int:
    from .bringup import run_node

    return run_node(PayloadEstimatorNode, args)


if __name__ == "__main__":
    sys.exit(main())
