"""``payload_estimator``: static captures from joint_states -> payload mass and CoM (paper 000, VI-A).

Interface (names relative to the node namespace, all remappable):

- subscribes ``joint_states`` (sensor_msgs/JointState; effort = measured joint torque);
- services ``~/capture``, ``~/capture_unloaded``, ``~/estimate``, ``~/reset``, ``~/clear_captures``
  (std_srvs/Trigger; clear_captures forgets loaded captures only, used at the start of a sampling run);
- publishes ``payload/estimate`` (geometry_msgs/InertiaStamped, reliable + transient local;
  frame_id = payload frame; inertia about the CoM, 0 when only gravity parameters are estimated),
  ``~/status`` and ``/diagnostics`` (diagnostic_msgs/DiagnosticArray).

Parameters: ``robot`` (name or robot file), ``joint_names`` (message joint names in model order,
empty = the model's), ``method`` (one-shot | differential), ``max_payload`` (kg),
``max_com_radius`` (m), ``window`` (s, static-check window), ``max_velocity`` (rad/s),
``max_position_spread`` (rad), ``max_torque_std`` (N m), ``max_torque_drift`` (N m), ``stale_timeout``
(s), ``torque_drift_relative``, ``min_average_samples`` and ``max_window`` (s) (motion.settle);
``anchor_samples`` and ``anchor_window`` (s): the same two for ``~/capture_unloaded`` (its noise is
common to every pose of the differential fit, so it averages longer; it costs no motion);
``torque_noise`` (N m) and ``gravity_model_uncertainty`` (relative) for the per-joint weights
(:func:`identification.payload.gravity_joint_weights`).
"""

from __future__ import annotations

import sys
import threading
from dataclasses import replace

import numpy as np
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue
from geometry_msgs.msg import InertiaStamped
from rclpy.node import Node
from sensor_msgs.msg import JointState
from std_srvs.srv import Trigger

from ..identification.estimate import NO_PAYLOAD, PayloadEstimate
from ..identification.payload import (
    PayloadLimits,
    estimate_payload_anchored,
    estimate_payload_gravity,
    gravity_joint_weights,
)
from ..model.dynamics import RigidBodyDynamics
from ..model.robot_file import load_robot
from ..motion.settle import SampleWindow, SettleConfig, check_static
from .messages import JointStateConverter, estimate_to_msg
from .qos import LATCHED_QOS, SENSOR_LATEST_QOS

METHODS = ("one-shot", "differential")
THROTTLE_S = 2.0


def format_estimate(est: PayloadEstimate) -> str:
    """One line an operator can read: mass, CoM (mm), std, condition number, residual."""
    s = est.std or {}
    com_mm = np.asarray(est.com, float) * 1e3
    std_com = [s.get(k, float("nan")) * 1e3 for k in ("cx", "cy", "cz")]
    return (f"mass {est.mass:.4f} kg (std {s.get('mass', float('nan')):.4f}), CoM [{com_mm[0]:.1f}, {com_mm[1]:.1f}, "
            f"{com_mm[2]:.1f}] mm (std [{std_com[0]:.1f}, {std_com[1]:.1f}, {std_com[2]:.1f}]) in {est.frame}, "
            f"cond {est.condition_number:.3g}, residual RMS {est.residual_rms:.3g} N m, {est.samples} samples, "
            f"method {est.method}")


class PayloadEstimatorNode(Node):
    """Thin node around :func:`identification.payload.estimate_payload_gravity`."""

    def __init__(self, **kwargs):
        super().__init__("payload_estimator", **kwargs)
        self.declare_parameter("robot", "lwr4")
        self.declare_parameter("joint_names", [""])
        self.declare_parameter("method", "one-shot")
        self.declare_parameter("max_payload", 15.0)
        self.declare_parameter("max_com_radius", 0.5)
        self.declare_parameter("window", 0.12)
        self.declare_parameter("max_velocity", 0.005)
        self.declare_parameter("max_position_spread", 5e-4)
        self.declare_parameter("max_torque_std", 0.5)
        self.declare_parameter("max_torque_drift", 0.1)
        self.declare_parameter("torque_drift_relative", 0.005)
        self.declare_parameter("min_average_samples", 30)
        self.declare_parameter("max_window", 0.4)
        self.declare_parameter("anchor_samples", 150)
        self.declare_parameter("anchor_window", 1.0)
        self.declare_parameter("stale_timeout", 0.5)
        self.declare_parameter("torque_noise", 0.05)
        self.declare_parameter("gravity_model_uncertainty", 0.005)
        p = self.get_parameter
        self.desc = load_robot(p("robot").value)
        self.dyn = RigidBodyDynamics(self.desc)
        names = [n for n in p("joint_names").value if n]
        if names and len(names) != self.desc.n:
            raise ValueError(f"joint_names has {len(names)} names, robot {self.desc.name} has {self.desc.n} joints")
        self.joint_names = tuple(names) if names else self.desc.joint_names
        self.method = str(p("method").value)
        if self.method not in METHODS:
            raise ValueError(f"method must be one of {METHODS}, got {self.method!r}")
        self.max_payload = float(p("max_payload").value)
        self.max_com_radius = float(p("max_com_radius").value)
        self.settle = SettleConfig(window=float(p("window").value), max_velocity=float(p("max_velocity").value),
                                   max_position_spread=float(p("max_position_spread").value),
                                   max_torque_std=float(p("max_torque_std").value),
                                   max_torque_drift=float(p("max_torque_drift").value),
                                   torque_drift_relative=float(p("torque_drift_relative").value),
                                   min_average_samples=int(p("min_average_samples").value),
                                   max_window=float(p("max_window").value))
        self.stale_timeout = float(p("stale_timeout").value)
        self.torque_noise = float(p("torque_noise").value)
        self.model_uncertainty = float(p("gravity_model_uncertainty").value)
        if not (self.torque_noise > 0 and self.model_uncertainty >= 0):
            raise ValueError("torque_noise must be > 0 N m and gravity_model_uncertainty >= 0")

        self._lock = threading.Lock()
        self._conv = JointStateConverter(self.joint_names, require_velocity=False)
        self.anchor_settle = replace(self.settle, min_average_samples=int(p("anchor_samples").value),
                                     max_window=float(p("anchor_window").value))
        # longer than any max_window: a history shorter than max_window reads as "collecting samples"
        self._window = SampleWindow(horizon=max(0.5, 2 * self.settle.window, 1.25 * self.settle.max_window,
                                                1.25 * self.anchor_settle.max_window))
        self._last_rx = None  # node-clock time (s) of the last good joint_states
        self._loaded: list[tuple[np.ndarray, np.ndarray]] = []
        self._unloaded: list[tuple[np.ndarray, np.ndarray]] = []
        self.current: PayloadEstimate = NO_PAYLOAD
        self.frame = self.desc.payload_frame_name

        # A capture must judge the arm *now*: the newest samples, not a backlog of a busy executor (a
        # depth-200 queue kept this node 0.2 s behind the arm; dropped samples only thin the window).
        self.create_subscription(JointState, "joint_states", self._on_joint_states, SENSOR_LATEST_QOS)
        self.pub_estimate = self.create_publisher(InertiaStamped, "payload/estimate", LATCHED_QOS)
        self.pub_status = self.create_publisher(DiagnosticArray, "~/status", LATCHED_QOS)
        self.pub_diag = self.create_publisher(DiagnosticArray, "/diagnostics", 10)
        self.create_service(Trigger, "~/capture", self._srv_capture)
        self.create_service(Trigger, "~/capture_unloaded", self._srv_capture_unloaded)
        self.create_service(Trigger, "~/estimate", self._srv_estimate)
        self.create_service(Trigger, "~/reset", self._srv_reset)
        self.create_service(Trigger, "~/clear_captures", self._srv_clear)
        # No estimate is published at start: a late-joining latched "0 kg" would overwrite a payload
        # the monitor already uses (e.g. its provisional one while sampling). ~/reset publishes 0 kg.
        self._status(DiagnosticStatus.OK, "unloaded (no payload estimated yet)", NO_PAYLOAD)
        self.get_logger().info(f"payload_estimator ready: robot {self.desc.name}, method {self.method}, "
                               f"joints {list(self.joint_names)}")

    # ------------------------------------------------------------------ input
    def _now(self) -> float:
        return self.get_clock().now().nanoseconds * 1e-9

    def _on_joint_states(self, msg: JointState) -> None:
        got = self._conv.receive(msg, self, THROTTLE_S)
        if got is None:
            return
        t, s = got
        with self._lock:
            self._window.append(t, s.q, s.dq, s.tau)
            self._last_rx = self._now()

    # ------------------------------------------------------------------ services
    def _static_sample(self, settle: SettleConfig | None = None) -> tuple[np.ndarray | None, np.ndarray | None, str]:
        with self._lock:
            last = self._last_rx
            t, q, dq, tau = self._window.arrays()
        if last is None:
            return None, None, "no valid joint_states received yet (check the topic and joint names)"
        age = self._now() - last
        if age > self.stale_timeout:
            return None, None, f"joint_states stale: last valid message {age:.2f} s ago"
        r = check_static(t, q, dq, tau, settle or self.settle, self.joint_names)
        if not r.static:
            return None, None, f"arm not static: {r.reason}"
        return r.q, r.tau, (f"torque std {r.torque_std:.3f} N m, spread {np.degrees(r.spread):.3f} deg over "
                            f"{r.samples} samples, newest {1e3 * (self._now() - t[-1]):.0f} ms old")

    def _capture(self, store: list, what: str, response: Trigger.Response,
                 settle: SettleConfig | None = None) -> Trigger.Response:
        q, tau, info = self._static_sample(settle)
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
        return self._capture(self._unloaded, "unloaded capture", response, self.anchor_settle)

    def _srv_estimate(self, request, response):
        with self._lock:
            loaded = list(self._loaded)
            unloaded = list(self._unloaded)
        if not loaded:
            response.success, response.message = False, "estimate rejected: no samples captured (call ~/capture)"
            return response
        if self.method == "differential" and not unloaded:
            response.success = False
            response.message = ("estimate rejected: method differential needs an unloaded capture at the pick "
                                "configuration (call ~/capture_unloaded before grasping)")
            return response
        q = np.array([s[0] for s in loaded])
        tau = np.array([s[1] for s in loaded])
        tau_u = np.array([s[1] for s in unloaded]) if unloaded else None
        q_u = np.array([s[0] for s in unloaded]) if unloaded else None
        try:
            est = self._fit(q, tau, q_u, tau_u)
        except ValueError as e:  # PayloadRejected is a ValueError
            msg = f"estimate rejected: {e}; previous payload kept ({self.current.mass:.3f} kg)"
            self.get_logger().error(msg)
            self._status(DiagnosticStatus.WARN, msg, self.current)
            response.success, response.message = False, msg
            return response
        with self._lock:
            self._loaded.clear()  # next sampling run starts fresh; unloaded anchor is kept
        self._publish(est, DiagnosticStatus.OK, "payload estimated")
        response.success = True
        response.message = format_estimate(est)
        self.get_logger().info(f"payload estimate: {response.message}")
        return response

    def _fit(self, q, tau, q_u, tau_u) -> PayloadEstimate:
        """Call the core: ``differential`` = :func:`identification.payload.estimate_payload_anchored`
        (the unloaded captures anchor the model locally), ``one-shot`` = the model's gravity."""
        limits = PayloadLimits(max_payload=self.max_payload, max_com_radius=self.max_com_radius)
        weights = gravity_joint_weights(self.dyn, q, self.torque_noise, self.model_uncertainty)
        if self.method == "differential":
            est = estimate_payload_anchored(self.dyn, q, tau, q_u, tau_u, weights=weights, limits=limits)
        else:
            est = estimate_payload_gravity(self.dyn, q, tau, None, "one-shot", weights=weights, limits=limits)
        return replace(est, frame=self.frame)

    def _srv_clear(self, request, response):
        with self._lock:
            k = len(self._loaded)
            self._loaded.clear()
        response.success, response.message = True, f"cleared {k} loaded capture(s); payload and unloaded anchor kept"
        return response

    def _srv_reset(self, request, response):
        with self._lock:
            self._loaded.clear()
            self._unloaded.clear()
        self._publish(NO_PAYLOAD, DiagnosticStatus.OK, "reset: unloaded")
        response.success, response.message = True, "payload reset: unloaded (0 kg); captures cleared"
        self.get_logger().info(response.message)
        return response

    # ------------------------------------------------------------------ output
    def _publish(self, est: PayloadEstimate, level: int, text: str) -> None:
        self.current = est
        self.pub_estimate.publish(estimate_to_msg(est, self.get_clock().now().to_msg(), self.frame))
        self._status(level, text, est)

    def _status(self, level: int, text: str, est: PayloadEstimate) -> None:
        st = DiagnosticStatus(level=level, name=f"{self.get_name()}: payload", message=text,
                              hardware_id=self.desc.name)
        vals = {"mass": est.mass, "com_x": est.com[0], "com_y": est.com[1], "com_z": est.com[2],
                "condition_number": est.condition_number, "residual_rms": est.residual_rms,
                "samples": est.samples, "captures": len(self._loaded), "unloaded_captures": len(self._unloaded)}
        vals.update({f"std_{k}": v for k, v in (est.std or {}).items()})
        st.values = [KeyValue(key=k, value=f"{v:.6g}" if isinstance(v, float) else str(v)) for k, v in vals.items()]
        st.values.append(KeyValue(key="method", value=est.method))
        st.values.append(KeyValue(key="frame", value=self.frame))
        arr = DiagnosticArray(status=[st])
        arr.header.stamp = self.get_clock().now().to_msg()
        self.pub_status.publish(arr)
        self.pub_diag.publish(arr)


def main(args=None) -> int:
    from .bringup import run_node

    return run_node(PayloadEstimatorNode, args)


if __name__ == "__main__":
    sys.exit(main())
