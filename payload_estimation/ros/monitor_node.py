"""``collision_monitor``: payload-aware momentum-observer residual, detection and stop/resume.

Interface (relative names, remappable):

- subscribes ``joint_states`` (sensor_msgs/JointState), ``payload/estimate``
  (geometry_msgs/InertiaStamped, transient local), ``joint_trajectory`` (to learn the active
  trajectory for resuming) and ``payload_sampler/active`` (std_msgs/Bool, transient local);
- publishes ``~/residual`` (sensor_msgs/JointState, effort = r in N m, same joint names),
  ``~/collision`` (std_msgs/Bool, transient local, published on every change), ``~/status``
  (diagnostic_msgs/DiagnosticArray), and on a stop a hold trajectory on ``joint_trajectory``.

While a payload sampler is active the payload is not yet known: on the sampler's rising edge the
monitor takes a *provisional* payload from the static residual at the pick configuration (the
min-norm least-squares p_L,g with Y_L,g(q0) p = r; the CoM component along gravity is unobservable
from one pose and small over ±7°), so the new load does not read as a collision. A published
estimate replaces it immediately; an estimate of 0 kg (estimator reset) returns to unloaded.

Parameters: ``robot``, ``joint_names``, ``gains`` (K_I, 1/s), ``thresholds`` (N m, one or n),
``release_fraction``, ``confirm_samples``, ``sampling_threshold_factor`` (thresholds x this while the
payload sampler is active and the payload only provisionally known), ``policy`` (none | stop | stop_and_resume),
``resume_delay`` (s), ``hold_time`` (s, minimum time_from_start of the stop point),
``stop_deceleration`` (rad/s^2: the stop ramps the current velocity down, motion.poses.stop_point),
``residual_decimation`` (publish every k-th residual), ``velocity_scale``/``min_duration`` (re-timing
of a resumed trajectory's first segment), ``payload_as_point_mass`` (default true: a gravity-only
estimate also enters M̂ and Ĉ as a point mass at its CoM; false = paper 000 eq. 48, ĝ only — the
payload's inertial torques then show in r during fast moves).
"""

from __future__ import annotations

import functools
import sys
import threading
from array import array

import numpy as np
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue
from geometry_msgs.msg import InertiaStamped
from rclpy.node import Node
from sensor_msgs.msg import JointState
from std_msgs.msg import Bool
from trajectory_msgs.msg import JointTrajectory

from ..collision.detector import CollisionDetector
from ..collision.observer import MomentumObserver
from ..collision.provisional import provisional_payload
from ..collision.reaction import Action, ReactionStateMachine
from ..identification.estimate import PayloadEstimate
from ..model.dynamics import RigidBodyDynamics
from ..model.robot_file import load_robot
from ..motion.poses import move_duration, stop_point
from .dedicated_subscription import create_dedicated_subscription
from .messages import (
    JointStateConverter,
    MessageError,
    estimate_from_msg,
    joint_state_msg,
    trajectory_from_msg,
    trajectory_msg,
)
from .qos import COMMAND_QOS, EVENT_QOS, LATCHED_QOS, SENSOR_QOS

THROTTLE_S = 2.0
HOLD_MARK = "collision_monitor/hold"
"""header.frame_id of the monitor's own trajectories (so it does not learn them as 'active')."""


def _locked(method):
    """Run a callback under the node's state lock (joint_states arrives on its own thread)."""

    @functools.wraps(method)
    def wrapper(self, *args):
        with self._state_lock:
            return method(self, *args)

    return wrapper


class CollisionMonitorNode(Node):
    """Thin node: messages -> MomentumObserver -> CollisionDetector -> ReactionStateMachine."""

    def __init__(self, **kwargs):
        super().__init__("collision_monitor", **kwargs)
        dp = self.declare_parameter
        dp("robot", "lwr4")
        dp("joint_names", [""])
        dp("gains", [25.0])
        dp("sampling_threshold_factor", 1.5)
        dp("thresholds", [6.0])
        dp("release_fraction", 0.5)
        dp("confirm_samples", 3)
        dp("policy", "stop_and_resume")
        dp("resume_delay", 2.0)
        dp("hold_time", 0.2)
        dp("stop_deceleration", 10.0)
        dp("residual_decimation", 1)
        dp("velocity_scale", 0.5)
        dp("min_duration", 0.5)
        dp("payload_as_point_mass", True)
        p = lambda k: self.get_parameter(k).value  # noqa: E731
        self.desc = load_robot(p("robot"))
        self.dyn = RigidBodyDynamics(self.desc)
        n = self.desc.n
        names = [x for x in p("joint_names") if x]
        if names and len(names) != n:
            raise ValueError(f"joint_names has {len(names)} names, robot {self.desc.name} has {n} joints")
        self.joint_names = tuple(names) if names else self.desc.joint_names
        gains = np.asarray(p("gains"), float)
        th = np.asarray(p("thresholds"), float)
        self.observer = MomentumObserver(self.dyn, gains[0] if gains.size == 1 else gains)
        self._min_gain = float(np.min(gains))
        self.sampling_threshold_factor = float(p("sampling_threshold_factor"))
        self.detector = CollisionDetector(n, th[0] if th.size == 1 else th,
                                          release_fraction=float(p("release_fraction")),
                                          confirm_samples=int(p("confirm_samples")))
        self.reaction = ReactionStateMachine(str(p("policy")), float(p("resume_delay")))
        self.hold_time = float(p("hold_time"))
        self.stop_deceleration = float(p("stop_deceleration"))
        self.decimation = max(1, int(p("residual_decimation")))
        self.velocity_scale = float(p("velocity_scale"))
        self.min_duration = float(p("min_duration"))
        self.point_mass = bool(p("payload_as_point_mass"))
        self.frame = self.desc.payload_frame_name

        self._conv = JointStateConverter(self.joint_names)
        self._count = 0
        self._q = None
        self._r = np.zeros(n)
        self._collision = False
        self._sampling = False
        self._provisional_at: float | None = None  # sample time from which to fit the provisional payload
        self._t_last = -np.inf  # stamp of the last processed joint_states sample (s)
        self._payload: PayloadEstimate | None = None
        self._active: tuple[float, np.ndarray, np.ndarray] | None = None  # (start s, t (m,), q (m, n))
        self._remainder: tuple[np.ndarray, np.ndarray] | None = None

        self.pub_residual = self.create_publisher(JointState, "~/residual", EVENT_QOS)
        self._residual_msg = joint_state_msg(self.joint_names, tau=np.zeros(n))  # reused: only stamp and effort change
        self.pub_collision = self.create_publisher(Bool, "~/collision", LATCHED_QOS)
        self.pub_status = self.create_publisher(DiagnosticArray, "~/status", LATCHED_QOS)
        self.pub_traj = self.create_publisher(JointTrajectory, "joint_trajectory", COMMAND_QOS)
        self._state_lock = threading.Lock()
        self.create_subscription(InertiaStamped, "payload/estimate", self._on_estimate, LATCHED_QOS)
        self.create_subscription(JointTrajectory, "joint_trajectory", self._on_trajectory, COMMAND_QOS)
        self.create_subscription(Bool, "payload_sampler/active", self._on_sampling, LATCHED_QOS)
        self.pub_collision.publish(Bool(data=False))
        self._status("monitoring (unloaded)")
        # joint_states (1 kHz) is served by its own thread, not the executor: see dedicated_subscription.py
        self._joint_states = create_dedicated_subscription(self, JointState, "joint_states", self._on_joint_states,
                                                           SENSOR_QOS, self._state_lock)
        self.get_logger().info(f"collision_monitor ready: robot {self.desc.name}, thresholds {th.tolist()} N m, "
                               f"policy {self.reaction.policy}")

    def destroy_node(self) -> None:
        if self._joint_states is not None:
            self._joint_states.destroy()
        super().destroy_node()

    def _now(self) -> float:
        return self.get_clock().now().nanoseconds * 1e-9

    # ------------------------------------------------------------------ 1 kHz path
    def _on_joint_states(self, msg: JointState) -> None:
        got = self._conv.receive(msg, self, THROTTLE_S)
        if got is None:
            return
        t, s = got
        r = self.observer.update(t, s.q, s.dq, s.tau)
        self._q, self._r, self._t_last = s.q, r, t
        if self._provisional_at is not None and t >= self._provisional_at:
            self._provisional_at = None
            prov = provisional_payload(self.dyn, s.q, r, self._payload, self.frame)
            self._set_payload(prov if prov.mass > 0 else None, "provisional")
        self._count += 1
        if self._count % self.decimation == 0:
            out = self._residual_msg
            out.header.stamp = msg.header.stamp
            out.effort = array("d", r)  # array.array skips the generated setter's per-element checks
            self.pub_residual.publish(out)
        ev = self.detector.update(t, r)
        if ev is not None:
            self._on_event(ev)
        action = self.reaction.update(t, self.detector.in_collision)
        if action is Action.HOLD_POSITION:
            self._hold(s.q, s.dq, max(0.0, self._now() - t))
        elif action is Action.RESUME:
            self._resume(s.q)

    # ------------------------------------------------------------------ events
    def _on_event(self, ev) -> None:
        flag = ev.active
        if flag:
            self.get_logger().warning(
                f"collision detected at t={ev.detection_time:.3f} s: link {ev.link_name} (contact on it or beyond), "
                f"peak |r| {ev.peak_max:.2f} N m at joint {self.joint_names[ev.peak_joint]}")
        else:
            self.get_logger().info(f"collision released at t={ev.release_time:.3f} s (link {ev.link_name}, "
                                   f"peak {ev.peak_max:.2f} N m)")
        if flag != self._collision:
            self._collision = flag
            self.pub_collision.publish(Bool(data=flag))
            self._status(("collision on " + ev.link_name) if flag else "monitoring", ev)

    def _hold(self, q: np.ndarray, dq: np.ndarray, lead: float) -> None:
        now = self._now()
        self._remainder = None
        if self._active is not None and not self._sampling:
            start, t, qs = self._active
            keep = t > now - start
            if keep.any():
                self._remainder = (t[keep] - (now - start), qs[keep])
        self._active = None
        q_stop, t_stop = stop_point(self.desc, q, dq, self.stop_deceleration, self.hold_time, min(lead, 0.2))
        msg = trajectory_msg(self.joint_names, q_stop[None, :], [t_stop], velocities=np.zeros((1, q.size)))
        msg.header.frame_id = HOLD_MARK
        self.pub_traj.publish(msg)
        self.get_logger().warning("stopping: holding the current position"
                                  + (" (trajectory remainder kept for resume)" if self._remainder else ""))

    def _resume(self, q: np.ndarray) -> None:
        if self._remainder is None:
            self.get_logger().info("resuming: no interrupted trajectory to continue (released)")
            return
        t, qs = self._remainder
        self._remainder = None
        first = max(float(t[0]), move_duration(q, qs[0], self.desc.limits.velocity, self.velocity_scale,
                                               self.min_duration))
        t = t - t[0] + first
        msg = trajectory_msg(self.joint_names, qs, t)
        msg.header.frame_id = HOLD_MARK
        self.pub_traj.publish(msg)
        self._active = (self._now(), t, qs)
        self.get_logger().info(f"resuming the interrupted trajectory: {len(t)} point(s), {t[-1]:.2f} s")

    # ------------------------------------------------------------------ other inputs
    @_locked
    def _on_trajectory(self, msg: JointTrajectory) -> None:
        if msg.header.frame_id == HOLD_MARK:
            return
        try:
            t, q = trajectory_from_msg(msg, self.joint_names)
        except MessageError as e:
            self.get_logger().error(f"ignoring joint_trajectory for resume: {e}", throttle_duration_sec=THROTTLE_S)
            return
        self._active = (self._now(), t, q)

    @_locked
    def _on_estimate(self, msg: InertiaStamped) -> None:
        try:
            est = estimate_from_msg(msg)
        except MessageError as e:
            self.get_logger().error(f"ignoring payload/estimate: {e}", throttle_duration_sec=THROTTLE_S)
            return
        self._set_payload(None if est.mass == 0.0 else est, "estimate")

    @_locked
    def _on_sampling(self, msg: Bool) -> None:
        active = bool(msg.data)
        if active != self._sampling:
            self.get_logger().info(f"payload sampler {'active' if active else 'idle'}")
        if active and not self._sampling:
            # Fit the provisional payload from a settled residual: 5 observer time constants of samples
            # after the last one processed here (this node may lag the stream on a loaded machine), not
            # from a residual that may still be converging.
            self._provisional_at = self._t_last + 5.0 / self._min_gain
        elif not active:
            self._provisional_at = None
        if active != self._sampling:
            # the payload is only provisionally known while sampling: a wider margin until the estimate
            self.detector.scale_thresholds(self.sampling_threshold_factor if active else 1.0)
        self._sampling = active

    def _set_payload(self, est: PayloadEstimate | None, source: str) -> None:
        self.observer.set_payload(est.as_point_mass() if est is not None and self.point_mass else est)
        self._payload = est
        text = "unloaded" if est is None else (f"{source} payload {est.mass:.3f} kg, CoM "
                                               f"{np.round(np.asarray(est.com) * 1e3, 1).tolist()} mm")
        self.get_logger().info(f"observer gravity model: {text}")
        self._status(f"monitoring ({text})")

    def _status(self, text: str, ev=None) -> None:
        level = DiagnosticStatus.WARN if self._collision else DiagnosticStatus.OK
        st = DiagnosticStatus(level=level, name=f"{self.get_name()}: collision", message=text,
                              hardware_id=self.desc.name)
        p = self._payload
        vals = {"payload_mass": 0.0 if p is None else p.mass, "payload_source": "none" if p is None else p.method,
                "collision": self._collision, "reaction_state": self.reaction.state.value,
                "events": len(self.detector.events), "sampling": self._sampling}
        if ev is not None:
            vals.update({"link": ev.link_name, "peak": ev.peak_max})
        st.values = [KeyValue(key=k, value=str(v)) for k, v in vals.items()]
        arr = DiagnosticArray(status=[st])
        arr.header.stamp = self.get_clock().now().to_msg()
        self.pub_status.publish(arr)


def main(args=None) -> int:
    from .bringup import run_node

    return run_node(CollisionMonitorNode, args)


if __name__ == "__main__":
    sys.exit(main())
