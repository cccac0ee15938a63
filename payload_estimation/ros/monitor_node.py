"""``collision_monitor``: payload-aware momentum-observer residual, detection and stop/resume.

Interface (relative names, remappable):

- subscribes ``joint_states`` (sensor_msgs/JointState, on a thread of its own), ``payload/estimate``
  (geometry_msgs/InertiaStamped, transient local), ``joint_trajectory`` (to learn the active
  trajectory for resuming), ``payload_sampler/active`` (std_msgs/Bool, transient local),
  ``payload_estimator/payload_event`` (std_msgs/String, reliable, volatile: ``grasped`` or ``released``, sent
  by the estimator's ``~/grasped`` / ``~/released`` services) and, with an empty ``robot`` parameter,
  ``robot_description``;
- publishes ``~/residual`` (sensor_msgs/JointState, effort = r in N m, same joint names),
  ``~/collision`` (std_msgs/Bool, transient local, published on every change), ``~/status`` and
  ``/diagnostics`` (diagnostic_msgs/DiagnosticArray, on events and every second), on a stop a
  hold trajectory on ``joint_trajectory``, and ~10 ms after each detection the estimated contact
  (:class:`collision.contact.ContactLocator`): ``~/contact_wrench`` (geometry_msgs/WrenchStamped in the
  contact link's frame: force N, torque about its origin N m) and ``~/contact_marker``
  (visualization_msgs/Marker arrow for RViz; orange when the link or force is ambiguous).

The per-sample work is :class:`collision.monitor.CollisionMonitor` (observer, detector with the
speed- and noise-dependent envelope, contact tracker); this node adds the ROS I/O, the reaction,
the provisional payload while sampling and the checks of what feeds the model.

Never silently blind: the status goes to ERROR when there is no robot model, no joint_states yet,
or none for ``joint_state_timeout`` s of wall time (also under ``use_sim_time``), and back to OK
when they return. Time faults (a stamp far ahead, a step back, a stream that starts over: see
:class:`stream.StampGuard`) are held out of the observer, counted and logged; a restart
re-initialises observer, detector and reaction from the new samples and keeps the payload (the
object is still in the gripper). Estimates on ``payload/estimate`` outside ``max_payload`` /
``max_com_radius``, or in another frame than the model's payload frame, are refused with a warning
and the previous payload kept.

While a payload sampler is active the payload is not yet known: from the sampler's rising edge on,
the monitor learns a *provisional* payload from the static torques at every rest pose
(:class:`collision.provisional.ProvisionalPayload`), so the new load does not read as a collision,
and its thresholds are ``sampling_threshold_factor`` x the configured ones plus 3 sigma of the torque
of the payload it does not know yet (large only while the mass is undetermined, e.g. before the
first move from the stretched-up pose). A published estimate replaces the provisional payload;
0 kg returns to unloaded.

Announced grasps and releases (``payload_estimator/grasped``, ``payload_estimator/released``): for
``payload_event_window`` s the detector judges the residual minus the part a payload change explains
(mass 0..``max_payload``, or up to the carried mass for a release; CoM within ``max_com_radius``) against
the configured thresholds, and the payload is re-learnt provisionally at rest (gravity only, not while a
collision is reported); a contact a payload cannot explain is still detected. After a
grasp the provisional payload stays (thresholds widened by its uncertainty) until an estimate arrives;
after a release with nothing left to carry the monitor returns to the unloaded model
(:class:`collision.payload_change.PayloadWatch`). A 0 kg estimate (``~/reset``, or the one ``~/released``
sends, which may arrive before the event) while a payload is carried opens the same release window.
"""

from __future__ import annotations

import functools
import sys
import threading
from array import array
from dataclasses import replace

import numpy as np
from diagnostic_msgs.msg import DiagnosticStatus
from geometry_msgs.msg import InertiaStamped, Point, WrenchStamped
from rclpy.node import Node
from sensor_msgs.msg import JointState
from std_msgs.msg import Bool, String
from trajectory_msgs.msg import JointTrajectory
from visualization_msgs.msg import Marker

from ..collision.contact import ContactEstimate
from ..collision.monitor import CollisionMonitor, MonitorConfig
from ..collision.observer import JointFriction, identified_friction
from ..collision.payload_change import GRASP, RELEASE, PayloadWatch, WatchConfig
from ..collision.provisional import ProvisionalFit
from ..collision.reaction import POLICIES, Action, ReactionState, ReactionStateMachine
from ..identification.dynamic_model import load_dynamic_model
from ..model.dynamics import RigidBodyDynamics
from ..payload.estimate import PayloadEstimate
from ..sampling.poses import move_duration, stop_point
from ..stream import StampVerdict
from .dedicated_subscription import create_dedicated_subscription
from .messages import (
    MessageError,
    clock_seconds,
    estimate_from_msg,
    joint_state_msg,
    trajectory_from_msg,
    trajectory_msg,
)
from .node_support import (
    LIMIT_PARAMS,
    ROBOT_PARAMS,
    STREAM_PARAMS,
    THROTTLE_S,
    JointStateInput,
    RobotModelSource,
    StatusReporter,
    joint_names_for,
    steady_timer,
)
from .parameters import Param, ParameterError, ParameterTable
from .qos import COMMAND_QOS, EVENT_QOS, LATCHED_QOS, SENSOR_QOS

HOLD_MARK = "collision_monitor/hold"
"""header.frame_id of the monitor's own trajectories (so it does not learn them as 'active')."""

WATCHDOG_PERIOD = 0.1
"""s between wall-clock checks of the joint_states stream."""

PARAMS = ROBOT_PARAMS + STREAM_PARAMS + LIMIT_PARAMS + ParameterTable([
    Param("dynamic_model", "", "the observer's unloaded dynamics: a PARAMS.yaml of `payload-estimation identify` "
          "(coefficients with their friction and offsets) or the robot YAML/URDF of `identify --physical` (link set "
          "with its friction); empty: the robot description, no friction. A file that does not load or belongs to "
          "another robot model (joint names, kinematics) refuses the model (status ERROR)", read_only=True),
    Param("gains", [150.0], "observer gain K_I (1/s), one value or one per joint (docs/collision.md)", low=0.0,
          high=1000.0, low_open=True, min_items=1, applies="next sample (after a collision is released)"),
    Param("thresholds", [6.0], "N m (paper: 6 N m), one value or one per joint", low=0.0, high=200.0,
          low_open=True, min_items=1, applies="next sample (after a collision is released)"),
    Param("threshold_margin", [0.0], "N m, model-error envelope at rest: th_j = max(thresholds_j, margin_j + "
          "speed_j |dq_j| + n_sigma sigma_r,j), one value or one per joint", low=0.0, high=200.0, min_items=1,
          applies="next sample (after a collision is released)"),
    Param("threshold_speed", [0.0], "N m s/rad, speed-dependent part of that envelope", low=0.0, high=1000.0,
          min_items=1, applies="next sample (after a collision is released)"),
    Param("n_sigma", 5.0, "standard deviations of the residual noise in the envelope", low=0.0, high=20.0,
          applies="next sample (after a collision is released)"),
    Param("sensor_torque_noise", [0.0], "N m, torque sensor noise std (0: not modelled)", low=0.0, high=100.0,
          min_items=1, applies="next sample (after a collision is released)"),
    Param("sensor_velocity_noise", [0.0], "rad/s, velocity noise std (0: not modelled)", low=0.0, high=10.0,
          min_items=1, applies="next sample (after a collision is released)"),
    Param("quadrature", "trapezoid", "observer integration of the torque over a step (hold: sample-and-hold "
          "torques, e.g. a simulator)", choices=("trapezoid", "hold"), applies="next sample (after a collision is "
          "released)"),
    Param("contact_estimation", True, "estimate the contact link, force and point after each detection "
          "(~/contact_wrench, ~/contact_marker)", applies="next sample (after a collision is released)"),
    Param("sampling_threshold_factor", 1.5, "thresholds x this while the payload sampler is active (payload only "
          "provisionally known), plus 3 sigma of the torque of the payload not yet known", low=1.0, high=10.0,
          applies="next sampling run"),
    Param("payload_event_window", 5.0, "s after an announced grasp or release (payload_estimator/grasped, "
          "released) in which a residual a payload change explains is not a collision", low=0.0, high=60.0,
          low_open=True, applies="next announcement"),
    Param("release_fraction", 0.5, "a collision is released below this fraction of the threshold", low=0.0,
          high=1.0, low_open=True, applies="next sample (after a collision is released)"),
    Param("confirm_samples", 3, "consecutive samples above a threshold for a detection", low=1, high=1000,
          applies="next sample (after a collision is released)"),
    Param("policy", "stop_and_resume", "reaction to a collision", choices=POLICIES,
          applies="next sample (after a stop has ended)"),
    Param("resume_delay", 2.0, "s after the release before resuming (paper: 2 s)", low=0.0, high=600.0,
          applies="next sample (after a stop has ended)"),
    Param("hold_time", 0.2, "s, minimum time_from_start of the stop point (tolerates stale state)", low=0.0,
          high=10.0, low_open=True),
    Param("stop_deceleration", 10.0, "rad/s^2: the stop ramps the current joint velocities down", low=0.0,
          high=1000.0, low_open=True),
    Param("residual_decimation", 1, "publish every k-th residual", low=1, high=1000),
    Param("resume_velocity_scale", 0.5, "peak speed of a resumed trajectory's first segment as a fraction of "
          "the velocity limit", low=0.0, high=1.0, low_open=True),
    Param("resume_min_duration", 0.5, "s, shortest first segment of a resumed trajectory", low=0.0, high=10.0,
          low_open=True),
    Param("payload_as_point_mass", True, "a gravity-only estimate also enters M and C as a point mass at its CoM "
          "(false: paper 000 eq. 48, gravity only)", applies="next estimate"),
])
MONITOR_KEYS = {"gains", "thresholds", "release_fraction", "confirm_samples", "threshold_margin", "threshold_speed",
                "n_sigma", "sensor_torque_noise", "sensor_velocity_noise", "quadrature", "contact_estimation"}
REACTION_KEYS = {"policy", "resume_delay"}


def _locked(method):
    """Run a callback under the node's state lock (joint_states arrives on its own thread)."""

    @functools.wraps(method)
    def wrapper(self, *args):
        with self._state_lock:
            return method(self, *args)

    return wrapper


def _per_joint_check(n: int | None):
    def check(values: dict) -> str | None:
        if n is None:
            return None
        for k in ("gains", "thresholds", "threshold_margin", "threshold_speed", "sensor_torque_noise",
                  "sensor_velocity_noise"):
            if len(values[k]) not in (1, n):
                return f"{k}: give one value or {n} (one per joint), got {len(values[k])}"
        return None

    return check


class CollisionMonitorNode(Node):
    """Thin node: messages -> MomentumObserver -> CollisionDetector -> ReactionStateMachine."""

    def __init__(self, **kwargs):
        super().__init__("collision_monitor", **kwargs)
        self._state_lock = threading.RLock()  # status snapshots are taken inside locked callbacks too
        self._n: int | None = None
        self.values = PARAMS.declare(self, check=lambda v: _per_joint_check(self._n)(v), on_change=self._on_params)
        self.dyn: RigidBodyDynamics | None = None
        self._friction: JointFriction | None = None  # the dynamic model's joint friction (observer)
        self._dynamic_note = "no robot model yet"
        self.mon: CollisionMonitor | None = None
        self.reaction = ReactionStateMachine(self.values["policy"], float(self.values["resume_delay"]))
        self.input: JointStateInput | None = None
        self.joint_names: tuple[str, ...] = ()
        self.frame = ""
        self._pending_changes: set[str] = set()
        self._count = 0
        self._r = None
        self._collision = False
        self.watch: PayloadWatch | None = None  # provisional payload, announced grasp/release (collision core)
        self._sampling = False  # the payload sampler's active flag (also before a model exists)
        self._events_refused = 0
        self._logged_mass: float | None = None  # provisional mass last logged (a refit every rest block is not news)
        self._t_last = -np.inf  # stamp of the last processed joint_states sample (s)
        self._payload: PayloadEstimate | ProvisionalFit | None = None
        self._estimates_refused = 0
        self._last_refusal = ""
        self._active: tuple[float, np.ndarray, np.ndarray] | None = None  # (start s, t (m,), q (m, n))
        self._remainder: tuple[np.ndarray, np.ndarray] | None = None
        self._blind_logged = False
        self._joint_states = None

        self.pub_residual = self.create_publisher(JointState, "~/residual", EVENT_QOS)
        self.pub_collision = self.create_publisher(Bool, "~/collision", LATCHED_QOS)
        self.pub_traj = self.create_publisher(JointTrajectory, "joint_trajectory", COMMAND_QOS)
        self.pub_wrench = self.create_publisher(WrenchStamped, "~/contact_wrench", EVENT_QOS)
        self.pub_marker = self.create_publisher(Marker, "~/contact_marker", EVENT_QOS)
        self._contact: ContactEstimate | None = None
        self.status = StatusReporter(self, "collision", self._snapshot)
        self.create_subscription(InertiaStamped, "payload/estimate", self._on_estimate, LATCHED_QOS)
        self.create_subscription(JointTrajectory, "joint_trajectory", self._on_trajectory, COMMAND_QOS)
        self.create_subscription(Bool, "payload_sampler/active", self._on_sampling, LATCHED_QOS)
        self.create_subscription(String, "payload_estimator/payload_event", self._on_payload_event, EVENT_QOS)
        self.pub_collision.publish(Bool(data=False))
        self.model = RobotModelSource(self, self.values, self._on_model)
        steady_timer(self, WATCHDOG_PERIOD, self._watchdog)
        self.status.publish()

    # ------------------------------------------------------------------ configuration
    def _on_model(self, desc) -> None:
        names = joint_names_for(desc, self.values["joint_names"])
        err = _per_joint_check(desc.n)(self.values)
        if err:
            raise ParameterError(err)
        spec = self.values["dynamic_model"]
        try:
            dm = load_dynamic_model(spec or None, desc)
        except (OSError, ValueError) as exc:
            raise ParameterError(f"dynamic_model {spec!r}: {exc}") from exc
        with self._state_lock:
            self.dyn = dm.dynamics()
            self._friction = identified_friction(dm.friction.viscous, dm.friction.coulomb, dm.friction.offset)
            self._dynamic_note = dm.note
            self._n = desc.n
            self.joint_names = names
            self.frame = desc.payload_frame_name
            self.input = JointStateInput(self, names, self.values)
            self._base_th = np.broadcast_to(np.asarray(self.values["thresholds"], float), (self._n,)).copy()
            self.watch = PayloadWatch(self.dyn, self._base_th, self._watch_config())
            self.watch.set_sampling(self._sampling)
            self.mon = self._new_monitor()
            self._r = np.zeros(desc.n)
            self._residual_msg = joint_state_msg(names, tau=np.zeros(desc.n))  # reused: stamp and effort change
            self._apply_payload(self._payload)
            self.status.hardware_id = desc.name
        if self._joint_states is None:
            # joint_states (1 kHz) is served by its own thread, not the executor: see dedicated_subscription.py
            self._joint_states = create_dedicated_subscription(self, JointState, "joint_states",
                                                               self._on_joint_states, SENSOR_QOS, self._state_lock)
        self.get_logger().info(f"collision_monitor ready: robot {desc.name}, thresholds {self.values['thresholds']} "
                               f"N m, policy {self.reaction.policy}; {dm.note}")

    def _new_monitor(self) -> CollisionMonitor:
        """Observer, detector and contact tracker from the current parameters (core: collision.monitor)."""
        v = self.values

        def vec(k):
            a = np.asarray(v[k], float)
            return float(a[0]) if a.size == 1 else tuple(a.tolist())

        self._base_th = np.broadcast_to(np.asarray(v["thresholds"], float), (self._n,)).copy()
        cfg = MonitorConfig(gains=vec("gains"), thresholds=vec("thresholds"), margin=vec("threshold_margin"),
                            speed=vec("threshold_speed"), n_sigma=float(v["n_sigma"]),
                            torque_noise=vec("sensor_torque_noise"), velocity_noise=vec("sensor_velocity_noise"),
                            release_fraction=float(v["release_fraction"]), confirm_samples=int(v["confirm_samples"]),
                            quadrature=v["quadrature"])
        if not v["contact_estimation"]:
            cfg = replace(cfg, contact=None)
        desc = self.dyn.desc
        mon = CollisionMonitor(self.dyn, cfg, friction=self._friction,
                               link_names=tuple(desc.link_frame_name(k) for k in range(1, desc.n + 1)))
        self.watch.configure(self._watch_config(), self._base_th)
        mon.detector.scale_thresholds(self.watch.scale())
        mon.explain = self.watch.explain
        payload = self._payload
        if payload is not None:
            mon.set_payload(*payload.observer_model(bool(v["payload_as_point_mass"])))
        return mon

    def _watch_config(self) -> WatchConfig:
        v = self.values
        return WatchConfig(window=float(v["payload_event_window"]),
                           sampling_factor=float(v["sampling_threshold_factor"]),
                           max_payload=float(v["max_payload"]), max_com_radius=float(v["max_com_radius"]))

    @_locked
    def _on_params(self, names: set[str]) -> None:
        self.values.update(PARAMS.values(self, names))
        if self.input is not None and names & set(STREAM_PARAMS.by_name):
            self.input.configure(self.values)
        self._pending_changes |= names
        self._apply_changes()
        self.get_logger().info(f"parameters changed: {sorted(names)}"
                               + (f" ({sorted(self._pending_changes)} wait for a safe point)"
                                  if self._pending_changes else ""))

    def _apply_changes(self) -> None:
        """Apply changed parameters that are safe to apply now (under the state lock)."""
        todo = self._pending_changes
        if self.dyn is None:
            return
        if todo & MONITOR_KEYS and not self.mon.detector.in_collision:
            self.mon = self._new_monitor()
            todo -= MONITOR_KEYS
        if todo & REACTION_KEYS and self.reaction.state is ReactionState.MOVING:
            self.reaction = ReactionStateMachine(self.values["policy"], float(self.values["resume_delay"]))
            if self.reaction.policy == "none":
                self.get_logger().warning("collision reaction disabled (policy none): collisions are only reported")
            todo -= REACTION_KEYS
        if "payload_as_point_mass" in todo:
            self._apply_payload(self._payload)
        if todo & {"payload_event_window", "sampling_threshold_factor", "max_payload", "max_com_radius"}:
            self.watch.configure(self._watch_config(), self._base_th)
        todo -= {k for k in todo if k not in MONITOR_KEYS | REACTION_KEYS}

    # ------------------------------------------------------------------ 1 kHz path
    def _on_joint_states(self, msg: JointState) -> None:
        if self.input is None:
            return
        got = self.input.receive(msg)
        if got is None:
            return
        verdict, t, s = got
        if verdict is StampVerdict.HOLD:
            return
        if verdict is StampVerdict.RESTART:
            self._restart()
        if self._pending_changes:
            self._apply_changes()
        step = self.mon.update(t, s.q, s.dq, s.tau)
        r = step.residual
        self._r, self._t_last = r, t
        # the provisional payload: thresholds x sampling_threshold_factor plus 3 sigma of its torque
        ev = self.mon.detector.current
        w = self.watch.update(t, s.q, s.dq, s.tau, settle=5.0 / float(np.min(self.values["gains"])),
                              detected=None if ev is None else ev.detection_time)
        if w.fit is not None and self.watch.learning:
            self._set_payload(w.fit, "provisional")
        elif w.fit is not None:  # learning stops only when a release completed: back to the unloaded model
            self._set_payload(None, "release")
        if w.scale is not None:
            self.mon.detector.scale_thresholds(w.scale)
        if w.note:
            self.get_logger().info(w.note)
            self.status.publish()
        self._count += 1
        if self._count % int(self.values["residual_decimation"]) == 0:
            out = self._residual_msg
            out.header.stamp = msg.header.stamp
            out.effort = array("d", r)  # array.array skips the generated setter's per-element checks
            self.pub_residual.publish(out)
        if step.event is not None:
            self._on_event(step.event)
        if step.contact is not None:
            self._on_contact(step.contact, msg.header.stamp)
        action = self.reaction.update(t, self.mon.detector.in_collision)
        if action is Action.HOLD_POSITION:
            self._hold(s.q, s.dq, max(0.0, self._now() - t))
        elif action is Action.RESUME:
            self._resume(s.q)

    def _restart(self) -> None:
        """The stream started over: re-initialise from its new samples, keep the payload."""
        self.mon.reset(keep_residual=True)  # a load or contact still there stays visible
        self.mon.detector.reset()
        self.reaction.reset()
        self._active = self._remainder = None
        self.watch.restart()
        if self._collision:
            self._collision = False
            self.pub_collision.publish(Bool(data=False))
        self.status.publish()

    def _now(self) -> float:
        return clock_seconds(self)

    # ------------------------------------------------------------------ events
    def _on_event(self, ev) -> None:
        flag = ev.active
        if flag:
            self._contact = None
            inside = ""
            if self.watch is not None and self.watch.announced is not None:
                inside = (f" (during the announced {self.watch.announced.kind}: beyond what a payload change explains, "
                          f"{np.max(np.abs(self.watch.explained_last)):.2f} N m of it explained)")
            self.get_logger().warning(
                f"collision detected at t={ev.detection_time:.3f} s: on link {ev.link_name} or beyond, "
                f"peak |r| {ev.peak_max:.2f} N m at joint {self.joint_names[ev.peak_joint]}{inside}")
        else:
            self.get_logger().info(f"collision released at t={ev.release_time:.3f} s (link {ev.link_name}, "
                                   f"peak {ev.peak_max:.2f} N m)")
        if flag != self._collision:
            self._collision = flag
            self.pub_collision.publish(Bool(data=flag))
            self.status.publish()

    def _on_contact(self, c: ContactEstimate, stamp) -> None:
        """The contact estimate of the active event: ~/contact_wrench and ~/contact_marker in the contact link's
        frame (force N, torque about the frame origin N m), the log and the status."""
        self._contact = c
        self.get_logger().warning(  # one answer per contact, the core's own words (link, p, force and its range)
            c.summary() + ("" if c.point is None else f", point {np.round(c.point, 3).tolist()} m (base frame)")
            + f", fit residual {c.fit_residual:.2f} N m")
        point = c.point_link if c.point_link is not None else c.best_point_link
        if c.force_link is None or point is None:  # no link explains the torque: nothing to show
            self.status.publish()
            return
        w = WrenchStamped()  # the best fit, also when ambiguous (the status and the marker's colour say so)
        w.header.stamp, w.header.frame_id = stamp, c.link_name
        f, m = c.force_link, np.cross(point, c.force_link)
        w.wrench.force.x, w.wrench.force.y, w.wrench.force.z = (float(x) for x in f)
        w.wrench.torque.x, w.wrench.torque.y, w.wrench.torque.z = (float(x) for x in m)
        self.pub_wrench.publish(w)
        self.pub_marker.publish(contact_marker(c, stamp))
        self.status.publish()

    def _hold(self, q: np.ndarray, dq: np.ndarray, lead: float) -> None:
        now = self._now()
        self._remainder = None
        if self._active is not None and not self._sampling:
            start, t, qs = self._active
            keep = t > now - start
            if keep.any():
                self._remainder = (t[keep] - (now - start), qs[keep])
        self._active = None
        q_stop, t_stop = stop_point(self.dyn.desc, q, dq, float(self.values["stop_deceleration"]),
                                    float(self.values["hold_time"]), min(lead, 0.2))
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
        first = max(float(t[0]), move_duration(q, qs[0], self.dyn.desc.limits.velocity,
                                               float(self.values["resume_velocity_scale"]),
                                               float(self.values["resume_min_duration"])))
        t = t - t[0] + first
        msg = trajectory_msg(self.joint_names, qs, t)
        msg.header.frame_id = HOLD_MARK
        self.pub_traj.publish(msg)
        self._active = (self._now(), t, qs)
        self.get_logger().info(f"resuming the interrupted trajectory: {len(t)} point(s), {t[-1]:.2f} s")

    # ------------------------------------------------------------------ other inputs
    @_locked
    def _on_trajectory(self, msg: JointTrajectory) -> None:
        if msg.header.frame_id == HOLD_MARK or self.dyn is None:
            return
        try:
            t, q = trajectory_from_msg(msg, self.joint_names)
        except MessageError as e:
            self.get_logger().error(f"ignoring joint_trajectory for resume: {e}", throttle_duration_sec=THROTTLE_S)
            return
        if self._remainder is not None:
            # a newer command (e.g. the payload sampler's next move) supersedes the interrupted one: resuming
            # the old remainder after the release would override it and drive the arm to a stale target
            self._remainder = None
            self.get_logger().info("a new joint_trajectory supersedes the interrupted one: it will not be resumed")
        self._active = (self._now(), t, q)

    @_locked
    def _on_estimate(self, msg: InertiaStamped) -> None:
        try:
            est = estimate_from_msg(msg)
        except MessageError as e:
            return self._refuse_estimate(str(e))
        if self.dyn is None:
            return self._refuse_estimate("no robot model yet")
        if est.mass == 0.0:
            carried = self._payload is not None and self._payload.mass > 0
            if carried and self.watch.announced is None:
                # ~/released publishes the event and then 0 kg, but they may arrive in either order; a plain
                # ~/reset while an object is still held is the same change: the payload's torque may now show
                self.get_logger().info(f"0 kg estimate while carrying a payload: {self.watch.announce(RELEASE)}")
                self.mon.detector.scale_thresholds(self.watch.scale())
            elif self.watch.estimate(0.0):
                self.mon.detector.scale_thresholds(self.watch.scale())
            return self._set_payload(None, "estimate")
        if msg.header.frame_id != self.frame:
            return self._refuse_estimate(f"frame '{msg.header.frame_id}' is not this model's payload frame "
                                         f"'{self.frame}'")
        limit, radius = float(self.values["max_payload"]), float(self.values["max_com_radius"])
        if est.mass > limit:
            return self._refuse_estimate(f"mass {est.mass:.3f} kg is above max_payload {limit:g} kg")
        r = float(np.linalg.norm(est.com))
        if r > radius:
            return self._refuse_estimate(f"CoM {1e3 * r:.0f} mm from the payload frame is beyond max_com_radius "
                                         f"{1e3 * radius:.0f} mm")
        self.watch.estimate(est.mass)  # an estimate replaces the provisional payload
        self.mon.detector.scale_thresholds(self.watch.scale())
        self._set_payload(est, "estimate")

    def _refuse_estimate(self, why: str) -> None:
        self._estimates_refused += 1
        self._last_refusal = why
        kept = "unloaded" if self._payload is None else f"{self._payload.mass:.3f} kg"
        self.get_logger().warning(f"refusing payload/estimate: {why}; the previous payload model ({kept}) is kept")
        self.status.publish()

    @_locked
    def _on_sampling(self, msg: Bool) -> None:
        active = bool(msg.data)
        if active != self._sampling:
            self.get_logger().info(f"payload sampler {'active' if active else 'idle'}")
        self._sampling = active
        if self.watch is None:
            return
        # active: learn the grasped load from the static torques at each rest pose of the run, with a wider margin
        scale = self.watch.set_sampling(active)
        if scale is not None:
            self.mon.detector.scale_thresholds(scale)

    @_locked
    def _on_payload_event(self, msg: String) -> None:
        """``grasped`` / ``released`` (payload_estimator's services): the payload changes now."""
        kind = {"grasped": GRASP, "released": RELEASE}.get(msg.data.strip().lower())
        if kind is None or self.watch is None:
            self._events_refused += 1
            why = "no robot model yet" if kind is not None else (f"unknown event '{msg.data[:40]}' (expected "
                                                                   "'grasped' or 'released')")
            self.get_logger().warning(f"ignoring payload_estimator/payload_event: {why}; the collision monitor "
                                      "keeps its payload model", throttle_duration_sec=THROTTLE_S)
            self.status.publish()
            return
        text = self.watch.announce(kind)
        self._logged_mass = None
        self.mon.detector.scale_thresholds(self.watch.scale())
        self.get_logger().info(text)
        self.status.publish()

    def _set_payload(self, est: PayloadEstimate | ProvisionalFit | None, source: str) -> None:
        self._payload = est
        self._apply_payload(est)
        if self.watch is not None:
            self.watch.carried(self.mon.observer.payload if self.mon is not None else None)
        if source == "provisional" and self._quiet_refit(est):
            return
        what = est.method if est is not None and source == "provisional" else source
        text = "unloaded" if est is None else (f"{what} payload {est.mass:.3f} kg, CoM "
                                               f"{np.round(np.asarray(est.com) * 1e3, 1).tolist()} mm")
        self.get_logger().info(f"observer model: {text}")
        self.status.publish()

    def _quiet_refit(self, est: ProvisionalFit) -> bool:
        """A provisional refit within 0.05 kg and 5 % of the mass last logged is not logged (one per rest block)."""
        last, self._logged_mass = self._logged_mass, est.mass
        if last is not None and abs(est.mass - last) <= 0.05 + 0.05 * last:
            self._logged_mass = last
            return True
        return False

    def _apply_payload(self, est: PayloadEstimate | ProvisionalFit | None) -> None:
        if self.mon is None:
            return
        point_mass = bool(self.values["payload_as_point_mass"])
        if isinstance(est, ProvisionalFit):
            self.mon.set_payload(*self.watch.observer_model(est, point_mass))
        else:
            self.mon.set_payload(*(est.observer_model(point_mass) if est is not None else (None, False)))

    # ------------------------------------------------------------------ status
    def _watchdog(self) -> None:
        if self.input is None:
            return
        lost = self.input.lost()
        if lost and not self._blind_logged:
            self._blind_logged = True
            age = self.input.age()
            self.get_logger().error("no joint_states received yet: not monitoring" if age is None else
                                    f"joint_states lost for {age:.2f} s: collision detection is blind")
            self.status.publish()
        elif not lost and self._blind_logged:
            self._blind_logged = False
            self.get_logger().info("joint_states back: monitoring")
            self.status.publish()

    def _snapshot(self) -> tuple[int, str, dict]:
        with self._state_lock:
            p = self._payload
            payload = "unloaded" if p is None else f"{p.method} payload {p.mass:.3f} kg"
            if self.dyn is None:
                level, text = DiagnosticStatus.ERROR, f"not monitoring: no robot model ({self.model.error})"
            elif self.input.age() is None:
                level, text = DiagnosticStatus.ERROR, "not monitoring: no joint_states received yet"
            elif self.input.lost():
                level, text = (DiagnosticStatus.ERROR, f"not monitoring: joint_states lost for "
                               f"{self.input.age():.2f} s (collision detection is blind)")
            elif self._collision:
                ev = self.mon.detector.current
                level, text = DiagnosticStatus.WARN, f"collision on {ev.link_name if ev else '?'}"
            else:
                level, text = DiagnosticStatus.OK, f"monitoring ({payload})"
                if self.watch.announced is not None:
                    text += f"; {self.watch.announced.kind} announced: payload being learned"
            if self.reaction.policy == "none" and level == DiagnosticStatus.OK:
                text += "; reaction disabled (policy none)"
            vals = {"payload_mass": 0.0 if p is None else p.mass, "payload_source": "none" if p is None else p.method,
                    "collision": self._collision, "reaction_state": self.reaction.state.value,
                    "policy": self.reaction.policy, "sampling": self._sampling,
                    "estimates_refused": self._estimates_refused, "last_refusal": self._last_refusal,
                    "payload_event": "" if self.watch is None else self.watch.last_change,
                    "payload_event_open": self.watch is not None and self.watch.announced is not None,
                    "payload_learning": self.watch is not None and self.watch.learning,
                    "payload_events_refused": self._events_refused,
                    "pending_parameters": ",".join(sorted(self._pending_changes)),
                    "dynamic_model": self._dynamic_note}
            if self.mon is not None:
                det, obs = self.mon.detector, self.mon.observer
                vals["events"] = len(det.events)
                ev = det.current
                if ev is not None:
                    vals.update({"link": ev.link_name, "peak": ev.peak_max, "onset_time": ev.onset_time,
                                 "detection_time": ev.detection_time})
                c = self._contact
                if c is not None:
                    lo, hi = c.force_range
                    vals.update({"contact": c.summary(), "contact_link": c.link_name,
                                 "link_probability": c.link_probability, "link_ambiguous": c.link_ambiguous,
                                 "force_norm": c.force_norm, "force_ambiguous": c.force_ambiguous,
                                 "force_range_N": f"{lo:.1f}..{hi:.1f}" if np.isfinite(hi) else
                                 f"{lo:.1f}..unbounded", "fit_residual": c.fit_residual})
                vals.update({"observer_gaps": obs.gaps, "samples_skipped": obs.skipped})
            if self.input is not None:
                vals.update(self.input.counters())
        return level, text, vals

    def destroy_node(self) -> None:
        if self._joint_states is not None:
            self._joint_states.destroy()
        super().destroy_node()


def contact_marker(c: ContactEstimate, stamp, scale: float = 0.01) -> Marker:
    """An RViz arrow ending at the contact point, along the force (``scale`` m per N), in the link frame."""
    m = Marker()
    m.header.stamp, m.header.frame_id = stamp, c.link_name
    m.ns, m.id, m.type, m.action = "contact", 0, Marker.ARROW, Marker.ADD
    tip = np.asarray(c.point_link if c.point_link is not None else c.best_point_link, float)
    tail = tip - scale * np.asarray(c.force_link, float)
    m.points = [Point(x=float(a), y=float(b), z=float(z)) for a, b, z in (tail, tip)]
    m.scale.x, m.scale.y, m.scale.z = 0.01, 0.02, 0.03  # shaft and head diameters, head length (m)
    m.color.r, m.color.a = 1.0, 1.0
    m.color.g = 0.6 if c.force_ambiguous or c.link_ambiguous else 0.0  # orange: ambiguous
    m.lifetime.sec = 5
    return m


def main(args=None) -> int:
    from .bringup import run_node

    return run_node(CollisionMonitorNode, args)


if __name__ == "__main__":
    sys.exit(main())
