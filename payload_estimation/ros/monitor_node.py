"""``collision_monitor``: payload-aware momentum-observer residual, detection, contact estimate and stop/resume.

Subscribes ``joint_states`` (on a thread of its own), ``payload/estimate``, ``joint_trajectory`` (what to resume
after a stop), ``payload_sampler/active``, ``payload_estimator/payload_event`` and, with an empty ``robot``
parameter, ``robot_description``; publishes ``~/residual``, ``~/collision``, ``~/status`` and ``/diagnostics``,
the stop and the resumed remainder on ``joint_trajectory``, and after each detection the contact estimate on
``~/contact`` (JSON: link, probability, force and its range), ``~/contact_wrench`` and ``~/contact_marker``
(docs/ros_interface.md has every topic with its type, QoS and meaning). ``payload_estimator/online_estimate``
(JSON) gives the online estimate's σ (thresholds widened by it); a payload loss is reported on the latched
``~/payload_lost`` (JSON), not as a collision.

The rules are the core's (:class:`collision.supervisor.MonitorSupervisor`, configured by
:func:`ros.monitor_params.monitor_configs`); this node translates messages and reports. Never silently blind:
the status is ERROR without a robot model, before the first joint_states and after ``joint_state_timeout`` s
without them (wall time, also under ``use_sim_time``); time faults, refused estimates and events are counted,
logged and shown in the status.
"""

from __future__ import annotations

import functools
import json
import sys
import threading
from array import array

import numpy as np
from diagnostic_msgs.msg import DiagnosticStatus
from geometry_msgs.msg import InertiaStamped, WrenchStamped
from rclpy.node import Node
from sensor_msgs.msg import JointState
from std_msgs.msg import Bool, String
from trajectory_msgs.msg import JointTrajectory
from visualization_msgs.msg import Marker

from ..collision.contact import ContactEstimate
from ..collision.observer import identified_friction
from ..collision.payload_change import GRASP, RELEASE
from ..collision.reaction import Action
from ..collision.supervisor import MonitorSupervisor, status_values
from ..errors import PayloadEstimationError
from ..identification.dynamic_model import load_dynamic_model
from ..payload.limits import check_payload
from ..sampling.poses import move_duration, stop_point
from ..stream import StampVerdict
from .contact_messages import contact_json, contact_marker, contact_wrench
from .dedicated_subscription import create_dedicated_subscription
from .messages import (
    clock_seconds,
    estimate_from_msg,
    joint_state_msg,
    time_to_sec,
    trajectory_from_msg,
    trajectory_msg,
)
from .monitor_params import MONITOR_KEYS, PARAMS, REACTION_KEYS, monitor_configs, per_joint_check
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
from .qos import COMMAND_QOS, EVENT_QOS, LATCHED_QOS, SENSOR_QOS

HOLD_MARK = "collision_monitor/hold"
"""header.frame_id of the monitor's own trajectories (so it does not learn them as 'active')."""

WATCHDOG_PERIOD = 0.1
"""s between wall-clock checks of the joint_states stream."""

EVENTS = {"grasped": GRASP, "released": RELEASE}
"""payload_estimator/payload_event texts -> the announced change."""


def _locked(method):
    """Run a callback under the node's state lock (joint_states arrives on its own thread)."""

    @functools.wraps(method)
    def wrapper(self, *args):
        with self._state_lock:
            return method(self, *args)

    return wrapper


class CollisionMonitorNode(Node):
    """Thin node: messages -> :class:`collision.supervisor.MonitorSupervisor` -> messages."""

    def __init__(self, **kwargs):
        super().__init__("collision_monitor", **kwargs)
        self._state_lock = threading.RLock()  # status snapshots are taken inside locked callbacks too
        self._n: int | None = None
        self.values = PARAMS.declare(self, check=lambda v: per_joint_check(self._n)(v), on_change=self._on_params)
        self.dyn = None
        self.sup: MonitorSupervisor | None = None
        self._dynamic_note = "no robot model yet"
        self.input: JointStateInput | None = None
        self.joint_names: tuple[str, ...] = ()
        self._changed: set[str] = set()  # parameter names changed since everything was last applied
        self._count = 0
        self._collision = False
        self._sampling = False  # the payload sampler's active flag (also before a model exists)
        self._refused = {"estimates": 0, "events": 0}
        self._last_refusal = ""
        self._blind_logged = False
        self._joint_states = None
        self._deferred = None  # a detection waiting for the payload-loss check's verdict
        self.pub_residual = self.create_publisher(JointState, "~/residual", EVENT_QOS)
        self.pub_collision = self.create_publisher(Bool, "~/collision", LATCHED_QOS)
        self.pub_traj = self.create_publisher(JointTrajectory, "joint_trajectory", COMMAND_QOS)
        self.pub_wrench = self.create_publisher(WrenchStamped, "~/contact_wrench", EVENT_QOS)
        self.pub_marker = self.create_publisher(Marker, "~/contact_marker", EVENT_QOS)
        self.pub_contact = self.create_publisher(String, "~/contact", LATCHED_QOS)
        self.pub_lost = self.create_publisher(String, "~/payload_lost", LATCHED_QOS)
        self.status = StatusReporter(self, "collision", self._snapshot)
        self.create_subscription(InertiaStamped, "payload/estimate", self._on_estimate, LATCHED_QOS)
        self.create_subscription(JointTrajectory, "joint_trajectory", self._on_trajectory, COMMAND_QOS)
        self.create_subscription(Bool, "payload_sampler/active", self._on_sampling, LATCHED_QOS)
        self.create_subscription(String, "payload_estimator/payload_event", self._on_payload_event, EVENT_QOS)
        self.create_subscription(String, "payload_estimator/online_estimate", self._on_online, LATCHED_QOS)
        self.pub_collision.publish(Bool(data=False))
        self.model = RobotModelSource(self, self.values, self._on_model)
        steady_timer(self, WATCHDOG_PERIOD, self._watchdog)
        self.status.publish()

    @property
    def mon(self):
        """The core monitor (observer, detector, contact), None before a robot model."""
        return None if self.sup is None else self.sup.mon

    @property
    def reaction(self):
        return None if self.sup is None else self.sup.reaction

    # ------------------------------------------------------------------ configuration
    def _on_model(self, desc) -> None:
        names = joint_names_for(desc, self.values["joint_names"])
        err = per_joint_check(desc.n)(self.values)
        if err:
            raise ParameterError(err)
        spec = self.values["dynamic_model"]
        try:
            dm = load_dynamic_model(spec or None, desc)
        except (OSError, PayloadEstimationError) as exc:
            raise ParameterError(f"dynamic_model {spec!r}: {exc}") from exc
        with self._state_lock:
            self.dyn = dm.dynamics()
            friction = identified_friction(dm.friction.viscous, dm.friction.coulomb, dm.friction.offset)
            sup = MonitorSupervisor(self.dyn, *monitor_configs(self.values), frame=desc.payload_frame_name,
                                    limit_check=check_payload, friction=friction, sampling=self._sampling,
                                    link_names=tuple(desc.link_frame_name(k) for k in range(1, desc.n + 1)))
            if self.sup is not None:
                sup.adopt(self.sup)
            self.sup, self._dynamic_note, self._n, self.joint_names = sup, dm.note, desc.n, names
            self.input = JointStateInput(self, names, self.values)
            self._residual_msg = joint_state_msg(names, tau=np.zeros(desc.n))  # reused: stamp and effort change
            self.status.hardware_id = desc.name
        if self._joint_states is None:
            # joint_states (1 kHz) is served by its own thread, not the executor: see dedicated_subscription.py
            self._joint_states = create_dedicated_subscription(self, JointState, "joint_states",
                                                               self._on_joint_states, SENSOR_QOS, self._state_lock)
        self.get_logger().info(f"collision_monitor ready: robot {desc.name}, thresholds {self.values['thresholds']} "
                               f"N m, policy {self.values['policy']}; {dm.note}")

    @_locked
    def _on_params(self, names: set[str]) -> None:
        self.values.update(PARAMS.values(self, names))
        if self.input is not None and names & set(STREAM_PARAMS.by_name):
            self.input.configure(self.values)
        self._changed |= names
        if self.sup is not None:
            self.sup.configure(*monitor_configs(self.values))
            self._log(self.sup.apply_pending())
        pending = self._pending()
        self.get_logger().info(f"parameters changed: {sorted(names)}"
                               + (f" ({sorted(pending)} wait for a safe point)" if pending else ""))

    def _pending(self) -> set[str]:
        """Changed parameters not applied yet (monitor settings during a collision, the reaction's while stopped)."""
        waits = self.sup.pending if self.sup is not None else {"monitor", "reaction"}
        self._changed = {k for k in self._changed if ("monitor" in waits and k in MONITOR_KEYS)
                         or ("reaction" in waits and k in REACTION_KEYS)}
        return self._changed

    def _log(self, notes) -> None:
        for level, text in notes:  # one call site per severity: rclpy refuses a call site that changes it
            if level == "warning":
                self.get_logger().warning(text)
            else:
                self.get_logger().info(text)
        if notes:
            self.status.publish()

    # ------------------------------------------------------------------ 1 kHz path
    def _on_joint_states(self, msg: JointState) -> None:
        if self.input is None:
            return
        got = self.input.receive(msg)
        if got is None or got[0] is StampVerdict.HOLD:
            return
        verdict, t, s = got
        if verdict is StampVerdict.RESTART:
            self._restart()
        step = self.sup.update(t, s.q, s.dq, s.tau)
        self._log(step.notes)
        ev = step.monitor.event
        if ev is not None and ev.active and self.sup.loss.body is not None and step.loss is None:
            self._deferred = ev  # an estimated payload is carried: a collision or a payload loss? (<= 60 ms)
        elif ev is not None:
            self._on_event(ev)
        if step.loss is not None:
            deferred, self._deferred = self._deferred, None
            if step.loss.lost:
                self._on_lost(step.loss)
            elif deferred is not None:
                self._on_event(deferred)
        r = step.monitor.residual
        self._count += 1
        if self._count % int(self.values["residual_decimation"]) == 0:
            out = self._residual_msg
            out.header.stamp = msg.header.stamp
            out.effort = array("d", r)  # array.array skips the generated setter's per-element checks
            self.pub_residual.publish(out)
        if step.monitor.contact is not None:
            self._on_contact(step.monitor.contact, msg.header.stamp)
        if step.action is Action.HOLD_POSITION:
            self._hold(s.q, s.dq, max(0.0, self._now() - t))
        elif step.action is Action.RESUME:
            self._resume(s.q)

    def _restart(self) -> None:
        """The stream started over: re-initialise from its new samples, keep the payload."""
        self.sup.restart()
        if self._collision:
            self._collision = False
            self.pub_collision.publish(Bool(data=False))
        self.status.publish()

    def _now(self) -> float:
        return clock_seconds(self)

    # ------------------------------------------------------------------ events
    def _on_event(self, ev) -> None:
        text = self.sup.describe(ev, self.joint_names)
        self.get_logger().warning(text) if ev.active else self.get_logger().info(text)
        if ev.active != self._collision:
            self._collision = ev.active
            self.pub_collision.publish(Bool(data=ev.active))
            self.status.publish()

    def _on_contact(self, c: ContactEstimate, stamp) -> None:
        """The contact estimate of the active event: the log, ~/contact (JSON: link, probability, force range),
        ~/contact_wrench and ~/contact_marker in the contact link's frame, the status."""
        self.get_logger().warning(  # one answer per contact, the core's own words (link, p, force and its range)
            c.summary() + ("" if c.point is None else f", point {np.round(c.point, 3).tolist()} m (base frame)")
            + f", fit residual {c.fit_residual:.2f} N m")
        self.pub_contact.publish(String(data=contact_json(c, time_to_sec(stamp))))
        w = contact_wrench(c, stamp)
        if w is not None:  # else no link explains the torque: nothing to show
            self.pub_wrench.publish(w)
            self.pub_marker.publish(contact_marker(c, stamp))
        self.status.publish()

    def _on_lost(self, v) -> None:
        """A payload loss (the core logged it): ~/payload_lost (JSON, latched) and the status."""
        self.pub_lost.publish(String(data=json.dumps({
            "verdict": v.verdict, "time": v.time, "detection_time": v.detection_time, "fraction": v.fraction,
            "lost_mass": v.lost_mass, "reason": v.reason, "stopped": bool(self.sup.cfg.payload_lost_stop)})))
        self.status.publish()

    def _hold(self, q: np.ndarray, dq: np.ndarray, lead: float) -> None:
        kept = self.sup.stop(self._now())
        cfg = self.sup.cfg
        q_stop, t_stop = stop_point(self.dyn.desc, q, dq, cfg.stop_deceleration, cfg.hold_time, min(lead, 0.2))
        self._command(q_stop[None, :], [t_stop], velocities=np.zeros((1, q.size)))
        self.get_logger().warning("stopping: holding the current position"
                                  + (" (trajectory remainder kept for resume)" if kept else ""))

    def _resume(self, q: np.ndarray) -> None:
        cfg, vlim = self.sup.cfg, self.dyn.desc.limits.velocity
        plan = self.sup.resume(self._now(), lambda q0: move_duration(q, q0, vlim, cfg.resume_velocity_scale,
                                                                     cfg.resume_min_duration))
        if plan is None:
            self.get_logger().info("resuming: no interrupted trajectory to continue (released)")
            return
        t, qs = plan
        self._command(qs, t)
        self.get_logger().info(f"resuming the interrupted trajectory: {len(t)} point(s), {t[-1]:.2f} s")

    def _command(self, qs, t, velocities=None) -> None:
        msg = trajectory_msg(self.joint_names, qs, t, velocities=velocities)
        msg.header.frame_id = HOLD_MARK
        self.pub_traj.publish(msg)

    # ------------------------------------------------------------------ other inputs
    @_locked
    def _on_trajectory(self, msg: JointTrajectory) -> None:
        if msg.header.frame_id == HOLD_MARK or self.sup is None:
            return
        try:
            t, q = trajectory_from_msg(msg, self.joint_names)
        except PayloadEstimationError as e:
            self.get_logger().error(f"ignoring joint_trajectory for resume: {e}", throttle_duration_sec=THROTTLE_S)
            return
        if self.sup.commanded(self._now(), t, q):
            self.get_logger().info("a new joint_trajectory supersedes the interrupted one: it will not be resumed")

    @_locked
    def _on_estimate(self, msg: InertiaStamped) -> None:
        try:
            if self.sup is None:
                raise ParameterError("no robot model yet")
            self._log(self.sup.estimate(estimate_from_msg(msg), msg.header.frame_id))
        except PayloadEstimationError as e:
            self._refused["estimates"] += 1
            self._last_refusal = str(e)
            p = None if self.sup is None else self.sup.payload
            kept = "unloaded" if p is None else f"{p.mass:.3f} kg"
            self.get_logger().warning(f"refusing payload/estimate: {e}; the previous payload model ({kept}) is kept")
            self.status.publish()

    @_locked
    def _on_online(self, msg: String) -> None:
        """The online estimate's gravity covariance (payload_estimator/online_estimate): thresholds widened by it."""
        try:
            if self.sup is None:
                raise ParameterError("no robot model yet")
            d = json.loads(msg.data)
            self.sup.uncertainty(float(d["mass"]), d["com"], d["gravity_covariance"])
        except (PayloadEstimationError, ValueError, KeyError, TypeError) as e:
            self._refused["estimates"] += 1
            self._last_refusal = f"online estimate uncertainty: {e}"
            self.get_logger().warning(f"ignoring payload_estimator/online_estimate: {e}; thresholds not widened by "
                                      "its σ", throttle_duration_sec=THROTTLE_S)

    @_locked
    def _on_sampling(self, msg: Bool) -> None:
        active = bool(msg.data)
        if active != self._sampling:
            self.get_logger().info(f"payload sampler {'active' if active else 'idle'}")
        self._sampling = active
        if self.sup is not None:  # active: the load is learnt at each rest pose of the run, with a wider margin
            self.sup.set_sampling(active)

    @_locked
    def _on_payload_event(self, msg: String) -> None:
        """``grasped`` / ``released`` (payload_estimator's services): the payload changes now."""
        kind = EVENTS.get(msg.data.strip().lower())
        if kind is None or self.sup is None:
            self._refused["events"] += 1
            why = "no robot model yet" if kind is not None else (f"unknown event '{msg.data[:40]}' (expected "
                                                                   "'grasped' or 'released')")
            self.get_logger().warning(f"ignoring payload_estimator/payload_event: {why}; the collision monitor "
                                      "keeps its payload model", throttle_duration_sec=THROTTLE_S)
            self.status.publish()
            return
        self._log([("info", self.sup.announce(kind))])

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
            sup = self.sup
            vals = {**status_values(sup, self.values["policy"]), "collision": self._collision,
                    "sampling": self._sampling, "estimates_refused": self._refused["estimates"],
                    "last_refusal": self._last_refusal, "payload_events_refused": self._refused["events"],
                    "pending_parameters": ",".join(sorted(self._pending())), "dynamic_model": self._dynamic_note}
            if sup is not None:
                lost = sup.lost
                vals.update({"threshold_scale": round(sup.widening, 3), "payload_sigma": sup.sigma_in_use,
                             "payload_losses": sup.losses, "payload_lost": "" if lost is None else lost.reason})
            if sup is None:
                level, text = DiagnosticStatus.ERROR, f"not monitoring: no robot model ({self.model.error})"
            elif self.input.age() is None:
                level, text = DiagnosticStatus.ERROR, "not monitoring: no joint_states received yet"
            elif self.input.lost():
                level, text = (DiagnosticStatus.ERROR, f"not monitoring: joint_states lost for "
                               f"{self.input.age():.2f} s (collision detection is blind)")
            elif self._collision:
                level, text = DiagnosticStatus.WARN, f"collision on {vals.get('link', '?')}"
            else:
                level, text = DiagnosticStatus.OK, f"monitoring ({_payload_words(sup.payload)})"
                if sup.watch.announced is not None:
                    text += f"; {sup.watch.announced.kind} announced: payload being learned"
            if vals["policy"] == "none" and level == DiagnosticStatus.OK:
                text += "; reaction disabled (policy none)"
            if self.input is not None:
                vals.update(self.input.counters())
        return level, text, vals

    def destroy_node(self) -> None:
        if self._joint_states is not None:
            self._joint_states.destroy()
        super().destroy_node()


def _payload_words(p) -> str:
    return "unloaded" if p is None else f"{p.method} payload {p.mass:.3f} kg"


def main(args=None) -> int:
    from .bringup import run_node

    return run_node(CollisionMonitorNode, args)


if __name__ == "__main__":
    sys.exit(main())
