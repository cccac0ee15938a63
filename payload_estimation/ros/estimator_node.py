"""``payload_estimator``: static captures from joint_states -> payload mass and CoM (paper 000, VI-A).

Interface (names relative to the node namespace, all remappable):

- subscribes ``joint_states`` (sensor_msgs/JointState; effort = measured joint torque) and, with an
  empty ``robot`` parameter, ``robot_description``;
- services ``~/start_recording``, ``~/store_reference`` and ``~/estimate_motion`` (std_srvs/Trigger:
  the sampler's dynamic mode; record the joint-state stream over one excitation, keep it as the
  unloaded reference run, or fit all ten payload parameters from it, differential against the
  reference when there is one: :func:`payload.dynamic.estimate_payload_dynamic`);
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
  ``~/status`` and ``/diagnostics`` (diagnostic_msgs/DiagnosticArray, on events and every second);
- online estimate (issue 32, parameter ``online_estimation``): after ``~/grasped`` the payload is estimated from
  whatever motion follows (:class:`payload.online_session.OnlineSession`: fed in the joint_states thread, solved
  on a 10 Hz timer, 1-3 ms per solve) and published on ``payload/estimate`` at 10 Hz once the arm moves, its
  gravity uncertainty on ``~/online_estimate`` (std_msgs/String JSON, latched: the collision monitor widens its
  thresholds by it); ``payload_sampler/active`` (std_msgs/Bool) ends it while a sampling run is active, the
  monitor's ``collision_monitor/payload_lost`` (std_msgs/String) ends it and publishes 0 kg.

The node is thin: every rule (captures, recordings, the reference run, the unloaded model, the fits) is
:class:`payload.estimator.PayloadEstimator`; this node turns messages, services and parameters
(:mod:`.estimator_params`, docs/ros_interface.md) into its calls, and its answers into responses, the
estimate, logs and status. joint_states are taken by a thread of their own (:mod:`.dedicated_subscription`,
a deep queue): a recording gets every sample and a static capture judges the newest ones even while a fit
runs. A capture is refused when joint_states are stale — judged on the wall clock, also under
``use_sim_time``; a stream restart (stamps starting over) empties the sample window.
"""

from __future__ import annotations

import json
import sys
import threading

from diagnostic_msgs.msg import DiagnosticStatus
from geometry_msgs.msg import InertiaStamped
from rclpy.node import Node
from rclpy.parameter import Parameter
from sensor_msgs.msg import JointState
from std_msgs.msg import Bool, String
from std_srvs.srv import Trigger

from ..errors import PayloadEstimationError
from ..files.exports import write_exports
from ..model.dynamics import RigidBodyDynamics
from ..payload.estimate import NO_PAYLOAD, PayloadEstimate
from ..payload.estimator import (
    CALIBRATION,
    CAPTURE_WORDS,
    LOADED,
    UNLOADED,
    Answer,
    EstimateOutcome,
    ModelChoice,
    PayloadEstimator,
    format_estimate,
)
from ..payload.online import OnlineConfig
from ..payload.online_session import OnlineSession
from ..payload.recordings import CURRENT_WARNING
from ..signals.torque_gains import effort_to_torque
from ..stream import StampVerdict
from .dedicated_subscription import create_dedicated_subscription
from .estimator_params import PARAMS, estimator_config
from .messages import estimate_to_msg
from .node_support import (
    STREAM_PARAMS,
    THROTTLE_S,
    JointStateInput,
    RobotModelSource,
    StatusReporter,
    joint_names_for,
    steady_timer,
)
from .parameters import ParameterError
from .qos import EVENT_QOS, LATCHED_QOS, SENSOR_QOS

ONLINE_PERIOD = 0.1
"""s between solves of the online estimate (10 Hz; on the wall clock: a solve takes 1-3 ms)."""


class PayloadEstimatorNode(Node):
    """Messages, services and parameters <-> :class:`payload.estimator.PayloadEstimator`."""

    def __init__(self, **kwargs):
        super().__init__("payload_estimator", **kwargs)
        self.core: PayloadEstimator | None = None  # _check_params runs while the parameters are declared
        self.values = PARAMS.declare(self, check=self._check_params, on_change=self._on_params)
        self.core = PayloadEstimator(estimator_config(self.values))
        self.online = OnlineSession(bool(self.values["online_estimation"]))
        self._online_errors = 0
        self.input: JointStateInput | None = None
        self._export_failures = 0
        self._export_error = ""  # why the newest failed export failed
        self._last = (DiagnosticStatus.OK, "unloaded (no payload estimated yet)")
        self._input_lock = threading.Lock()

        self.pub_estimate = self.create_publisher(InertiaStamped, "payload/estimate", LATCHED_QOS)
        self.status = StatusReporter(self, "payload", self._snapshot)
        # Its own thread: a capture judges the newest samples (an executor-served depth-200 queue kept
        # this node 0.2 s behind the arm) and a recording gets every sample (a shallow one dropped them).
        self._joint_states = create_dedicated_subscription(self, JointState, "joint_states", self._on_joint_states,
                                                           SENSOR_QOS, self._input_lock)
        core = self.core
        services = {"capture": lambda q, r: self._capture(LOADED, r),
                    "capture_unloaded": lambda q, r: self._capture(UNLOADED, r),
                    "estimate": lambda q, r: self._estimate(core.estimate, r),
                    "reset": self._srv_reset, "clear_captures": lambda q, r: self._reply(core.clear(), r),
                    "capture_calibration": lambda q, r: self._capture(CALIBRATION, r),
                    "calibrate": self._srv_calibrate, "start_recording": self._srv_start_recording,
                    "store_reference": self._srv_store_reference,
                    "estimate_motion": lambda q, r: self._estimate(core.estimate_motion, r),
                    # announced grasp / release: the collision monitor learns the change instead of stopping the arm
                    "grasped": self._srv_grasped, "released": self._srv_released}
        for name, callback in services.items():
            self.create_service(Trigger, f"~/{name}", callback)
        self.pub_event = self.create_publisher(String, "~/payload_event", EVENT_QOS)
        self.pub_online = self.create_publisher(String, "~/online_estimate", LATCHED_QOS)
        self.create_subscription(Bool, "payload_sampler/active", self._on_sampling, LATCHED_QOS)
        self.create_subscription(String, "collision_monitor/payload_lost", self._on_payload_lost, LATCHED_QOS)
        steady_timer(self, ONLINE_PERIOD, self._online_tick)
        # a changed robot_description while a dynamic run is recorded is taken when the recording ends
        self.model = RobotModelSource(self, self.values, self._on_model, busy=lambda: core.recording)
        # No estimate is published at start: a late-joining latched "0 kg" would overwrite a payload
        # the monitor already uses (e.g. its provisional one while sampling). ~/reset publishes 0 kg.
        self.status.publish()

    dyn = property(lambda self: self.core.dyn, doc="The robot model's dynamics (None until there is one).")
    gain = property(lambda self: self.core.gain, doc="N m per unit of joint_states effort, per joint.")
    current = property(lambda self: self.core.current, doc="The estimate in use (the one published last).")
    joint_names = property(lambda self: self.core.joint_names, doc="joint_states names in model order.")

    # ------------------------------------------------------------------ configuration
    def _check_params(self, values: dict) -> str | None:
        return None if self.core is None else self.core.check(estimator_config(values))

    def _log_model(self, choice: ModelChoice | None) -> None:
        if choice is not None and choice.refused:
            self.get_logger().error(choice.text)
        elif choice is not None and choice.text:
            self.get_logger().info(choice.text)

    def _warn_gain(self) -> None:
        if self.core.gain_warning():
            self.get_logger().warning(f"torque_gain {self.core.gain.tolist()} N m per unit applied to joint_states "
                                      f"effort; {CURRENT_WARNING}")

    def _on_model(self, desc) -> None:
        names = joint_names_for(desc, self.values["joint_names"])
        try:
            choice = self.core.set_robot(RigidBodyDynamics(desc), names)
        except PayloadEstimationError as e:  # the torque gains do not fit this robot
            raise ParameterError(f"torque_gain: {e}") from e
        self._warn_gain()
        self._log_model(choice)
        self._use_online_model()
        with self._input_lock:
            self.input = JointStateInput(self, names, self.values, require_velocity=False)
        self.status.hardware_id = desc.name
        self.get_logger().info(f"payload_estimator ready: robot {desc.name}, method {self.values['method']}, "
                               f"joints {list(names)}")

    def _on_params(self, names: set[str]) -> None:
        self.values.update(PARAMS.values(self, names))
        if self.input is not None and names & set(STREAM_PARAMS.by_name):
            self.input.configure(self.values)
        self.core.configure(estimator_config(self.values))
        if self.dyn is not None and "torque_gain" in names:
            self._warn_gain()
        if self.dyn is not None and "gravity_model" in names:  # also the same name: the file may be new
            self._log_model(self.core.load_model())
            self.status.publish()
        if "online_estimation" in names:
            self.online.set_enabled(bool(self.values["online_estimation"]))
        self._use_online_model()
        self.get_logger().info(f"parameters changed: {sorted(names)}")

    # ------------------------------------------------------------------ input
    def _on_joint_states(self, msg: JointState) -> None:
        got = None if self.input is None else self.input.receive(msg)
        if got is None or got[0] is StampVerdict.HOLD:
            return
        verdict, t, s = got
        if verdict is StampVerdict.RESTART:
            self.core.restart()
        self.core.add_sample(t, s.q, s.dq, s.tau)
        try:  # cheap: no solve here; a failure must not cost the captures and recordings above
            self.online.add_sample(t, s.q, s.dq, effort_to_torque(s.tau, self.core.gain))
        except (PayloadEstimationError, ValueError, TypeError, ArithmeticError) as e:
            self._online_errors += 1
            self.get_logger().error(f"online estimate: sample not taken ({type(e).__name__}: {e}); counted in "
                                    "status online_errors", throttle_duration_sec=THROTTLE_S)

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

    @staticmethod
    def _reply(answer: Answer, response):
        response.success, response.message = answer.ok, answer.message
        return response

    def _capture(self, kind: str, response):
        why = self._unavailable()
        what = CAPTURE_WORDS[kind]
        a = Answer(False, f"{what} rejected: {why}") if why else self.core.capture(kind, self.input.age())
        if not a.ok:
            self.get_logger().warning(a.message, throttle_duration_sec=THROTTLE_S)
        return self._reply(a, response)

    def _no_model(self, what: str, response):
        return self._reply(Answer(False, f"{what} rejected: no robot model ({self.model.error})"), response)

    def _srv_calibrate(self, request, response):
        """Identify the unloaded gravity model (with offsets) from the calibration captures, write it and use it."""
        if self.dyn is None:
            return self._no_model("calibrate", response)
        path = self.core.calibration_path()
        a = self.core.calibrate(path)
        if a.ok:
            res = self.set_parameters([Parameter("gravity_model", value=str(path))])[0]
            if res.successful:
                self.core.calibrated()
                self.get_logger().info(a.message)
                return self._reply(a, response)
            a = Answer(False, f"calibrate: {path} written but not loaded: {res.reason}", fault=True)
        if a.fault:
            self.get_logger().error(a.message)
        return self._reply(a, response)

    def _estimate(self, fit, response):
        """``fit()`` (the core's static or motion fit): publish an accepted estimate (flagged when imprecise),
        export it and answer; a rejected fit keeps the previous payload, logged and in the status."""
        if self.dyn is None:
            return self._no_model("estimate", response)
        out: EstimateOutcome = fit()
        response.success, response.message = out.ok, out.message
        if out.fit_failed:
            self.get_logger().error(out.message)
            self._last = (DiagnosticStatus.WARN, out.message)
            self.status.publish()
        if not out.ok:
            return response
        est = out.estimate
        if out.imprecise:
            self._publish(est, DiagnosticStatus.WARN, f"payload estimated, imprecise: {out.imprecise}")
            self.get_logger().warning(f"payload estimate is imprecise: {out.imprecise}; {format_estimate(est)}")
        else:
            self._publish(est, DiagnosticStatus.OK, "payload estimated")
        self.online.superseded("an estimate from captures or a sampling run was published")
        failures = self._export_failures
        response.message += self._export(est)
        if self._export_failures > failures:  # published, but not where the user expects it: WARN, not OK
            self._last = (DiagnosticStatus.WARN, f"{self._last[1]}; export FAILED: {self._export_error}")
            self.status.publish()
        self.get_logger().info(f"payload estimate: {response.message}")
        return response

    def _srv_start_recording(self, request, response):
        why = self._unavailable()
        return self._reply(Answer(False, f"recording rejected: {why}") if why else self.core.start_recording(),
                           response)

    def _srv_store_reference(self, request, response):
        a = self.core.store_reference()
        if a.fault:
            self.get_logger().error(a.message, throttle_duration_sec=2.0)
        elif a.ok:
            self.get_logger().info(a.message)
            self.status.publish()
        return self._reply(a, response)

    def _srv_reset(self, request, response):
        self.core.reset()
        self.online.released()
        if self.dyn is None:
            return self._no_model("reset", response)
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
        earlier = self.core.grasped()
        self._use_online_model()
        online = self.online.grasped()
        response.success = True
        response.message = ("grasp announced: payload being learned by the collision monitor; "
                            + (f"{online}; or call payload_sampler/sample" if self.online.active else
                               f"call payload_sampler/sample for an estimate ({online})")
                            + self._announce("grasped") + earlier)
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

    # ------------------------------------------------------------------ online estimate
    def _online_config(self) -> OnlineConfig:
        v = self.values
        limits = self.core.config.fit.limits
        return OnlineConfig(model_uncertainty=float(v["model_uncertainty"]),
                            torque_offset_std=float(v["torque_offset_std"]), limits=limits)

    def _use_online_model(self) -> None:
        """The online estimate runs against the core's unloaded model (calibrated gravity model or nominal)."""
        if self.online.use(self.core.dyn, self.core.gravity_model, self._online_config()) and self.dyn is not None:
            which = "nominal" if self.core.gravity_model is None else self.core.gravity_model.uncertainty.source
            self.get_logger().info(f"online estimate uses the unloaded model: {which}")

    def _on_sampling(self, msg: Bool) -> None:
        self.online.set_sampling(bool(msg.data))

    def _on_payload_lost(self, msg: String) -> None:
        """The collision monitor reports the carried payload lost: the online estimate ends, 0 kg is published."""
        if not self.online.active:  # e.g. the latched report of an earlier loss
            return
        self.online.superseded("payload lost (collision_monitor/payload_lost)")
        self.core.reset()
        self._publish(NO_PAYLOAD, DiagnosticStatus.WARN, "payload lost (collision monitor): unloaded; announce "
                      "~/released, then ~/grasped when a new object is held")
        self.get_logger().warning("payload lost (collision_monitor): online estimate ended, 0 kg published")

    def _online_tick(self) -> None:
        """10 Hz: solve the online estimate; publish it (and its gravity uncertainty for the monitor) when new."""
        if self.dyn is None:
            return
        self._use_online_model()
        tick = self.online.tick()
        if tick.note:
            self.get_logger().info(tick.note)
        if tick.estimate is None:
            if tick.note:
                self.status.publish()
            return
        unc = self.online.uncertainty()
        if unc is not None:  # first: the monitor matches it with the estimate that follows
            self.pub_online.publish(String(data=json.dumps(unc)))
        self.pub_estimate.publish(estimate_to_msg(tick.estimate, self.get_clock().now().to_msg(), self.core.frame))
        self._last = (DiagnosticStatus.OK, f"online estimate {tick.status.state}: {format_estimate(tick.estimate)}")
        if tick.note:
            self.status.publish()

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
        except (OSError, PayloadEstimationError) as e:
            self._export_failures += 1
            self._export_error = f"{directory}: {e} (check export_dir)"
            self.get_logger().error(f"export to {directory} failed: {e}; the estimate is published but not "
                                    "written: set export_dir to a directory this node can write")
            return f"; export to {directory} FAILED: {e}"
        return f"; exported to {paths[0].parent}"

    def _publish(self, est: PayloadEstimate, level: int, text: str) -> None:
        self.pub_estimate.publish(estimate_to_msg(est, self.get_clock().now().to_msg(), self.core.frame))
        self._last = (level, text)
        self.status.publish()

    def _snapshot(self) -> tuple[int, str, dict]:
        core, est = self.core, self.core.current
        level, text = self._last
        if self.dyn is None:
            level, text = DiagnosticStatus.ERROR, f"no robot model ({self.model.error})"
        elif core.gravity_error:
            level, text = DiagnosticStatus.ERROR, f"{core.gravity_error}: estimates refused"
        elif core.calibration_refused:
            level = DiagnosticStatus.ERROR if level == DiagnosticStatus.ERROR else DiagnosticStatus.WARN
            text = f"{text}; calibration file refused, nominal model used: {core.calibration_note}"
        elif self.input is not None and self.input.age() is not None and self.input.lost():
            level, text = DiagnosticStatus.WARN, f"{text}; joint_states lost: captures rejected"
        vals = {"mass": est.mass, "com_x": est.com[0], "com_y": est.com[1], "com_z": est.com[2],
                "condition_number": est.condition_number, "residual_rms": est.residual_rms,
                "samples": est.samples, **core.status_values(),
                "method": est.method, "frame": core.frame, "configured_method": self.values["method"],
                "undetermined": ", ".join(est.undetermined),
                "model": core.model_label(self.values["robot"] or "robot_description"),
                "export_failures": self._export_failures, "last_export_error": self._export_error,
                **{f"std_{k}": v for k, v in (est.std or {}).items()}, **self.online.status_values(),
                "online_errors": self._online_errors}
        return level, text, vals | (self.input.counters() if self.input is not None else {})

    def destroy_node(self) -> None:
        subscription = getattr(self, "_joint_states", None)  # None when the constructor failed before it
        if subscription is not None:
            subscription.destroy()
        super().destroy_node()


def main(args=None) -> int:
    from .bringup import run_node

    return run_node(PayloadEstimatorNode, args)


if __name__ == "__main__":
    sys.exit(main())
