"""``collision_monitor``: payload-aware momentum-observer residual, detection, contact estimate and stop/resume.

It subscribes ``joint_states`` (on a thread of its own), ``payload/estimate``, ``joint_trajectory`` (what to resume
after a stop), ``payload_sampler/active`` and ``payload_estimator/payload_event`` / ``online_estimate``; it publishes
``~/residual``, ``~/collision``, the contact estimate (``~/contact``, ``~/contact_wrench``, ``~/contact_marker``),
``~/payload_lost``, the stop and the resumed remainder on ``joint_trajectory``, ``~/status`` and ``/diagnostics``;
its services ``~/start_threshold_calibration``, ``~/finish_threshold_calibration`` and
``~/cancel_threshold_calibration`` (std_srvs/Trigger) set ``thresholds`` from the arm's own moves
(docs/ros_interface.md has every topic and service with its type, QoS and meaning).

The rules are the core's (:class:`collision.supervisor.MonitorSupervisor`, configured by
:func:`ros.monitor_params.monitor_configs`: what is reported when, stop and resume, refusals, the status); this
node translates messages and reports. Never silently blind: the status is ERROR without a robot model, before
the first joint_states and after ``joint_state_timeout`` s without them (wall time, also under ``use_sim_time``).
"""

from __future__ import annotations

import functools
import sys
import threading
from array import array

import numpy as np
from builtin_interfaces.msg import Time
from geometry_msgs.msg import InertiaStamped
from rclpy.node import Node
from sensor_msgs.msg import JointState
from std_msgs.msg import Bool, String
from trajectory_msgs.msg import JointTrajectory

from ..collision.reaction import Action
from ..collision.supervisor import MonitorInputs, MonitorSupervisor, monitor_status
from ..errors import PayloadEstimationError
from ..signals.torque_gains import torque_gains
from ..stream import StampVerdict
from .dedicated_subscription import create_dedicated_subscription
from .joint_state_input import JointStateInput
from .messages import (
    SAMPLER_MARK,
    clock_seconds,
    estimate_from_msg,
    joint_state_msg,
    sec_to_time,
    trajectory_from_msg,
    trajectory_velocities,
)
from .monitor_outputs import HOLD_MARK, MonitorOutputs
from .monitor_params import PARAMS, monitor_configs, per_joint_check
from .monitor_setup import PendingParameters, monitor_supervisor
from .node_support import (
    STREAM_PARAMS,
    THROTTLE_S,
    StatusReporter,
    clock_off_executor,
    joint_names_for,
    log_notes,
    steady_timer,
)
from .qos import COMMAND_QOS, EVENT_QOS, LATCHED_QOS, SENSOR_QOS
from .robot_model_source import RobotModelSource
from .threshold_calibration_services import ThresholdCalibrationServices

WATCHDOG_PERIOD = 0.1
"""s between wall-clock checks of the joint_states stream."""


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
        self._changed = PendingParameters()
        self._count = 0
        self._decimation = int(self.values["residual_decimation"])
        self._residual_listened = True  # ~/residual has a subscriber (checked by the watchdog timer)
        self.inputs = MonitorInputs()  # the sampler's flag, estimates and events (also before a model exists)
        self._joint_states = None
        self.out = MonitorOutputs(self)
        self.status = StatusReporter(self, "collision", self._snapshot)
        self.create_subscription(InertiaStamped, "payload/estimate", self._on_estimate, LATCHED_QOS)
        self.create_subscription(JointTrajectory, "joint_trajectory", self._on_trajectory, COMMAND_QOS)
        self.create_subscription(Bool, "payload_sampler/active", self._on_sampling, LATCHED_QOS)
        self.create_subscription(String, "payload_estimator/payload_event", self._on_payload_event, EVENT_QOS)
        self.create_subscription(String, "payload_estimator/online_estimate", self._on_online, LATCHED_QOS)
        self.calibration = ThresholdCalibrationServices(self, self._state_lock, self._changed)
        self.out.collision.publish(Bool(data=False))
        self.model = RobotModelSource(self, self.values, self._on_model)
        self._clock_thread = clock_off_executor(self)  # /clock (sim time) off the executor: node_support
        steady_timer(self, WATCHDOG_PERIOD, self._watchdog)
        self.status.publish()

    mon = property(lambda self: None if self.sup is None else self.sup.mon,
                   doc="The core monitor (observer, detector, contact), None before a robot model.")
    reaction = property(lambda self: None if self.sup is None else self.sup.reaction, doc="The stop/resume state.")

    # ------------------------------------------------------------------ configuration
    def _on_model(self, desc) -> None:
        names = joint_names_for(desc, self.values["joint_names"])
        sup, note = monitor_supervisor(desc, self.values, self.inputs.sampling)
        with self._state_lock:
            if self.sup is not None:
                sup.adopt(self.sup)
            self.sup, self.dyn, self._dynamic_note, self._n, self.joint_names = sup, sup.dyn, note, desc.n, names
            self.input = JointStateInput(self, names, self.values)
            sup.set_torque_gain(torque_gains(list(self.values["torque_gain"]), desc.n, names))
            self._residual_msg = joint_state_msg(names, tau=np.zeros(desc.n))  # reused: stamp and effort change
            self.status.hardware_id = desc.name
        if self._joint_states is None:
            # joint_states (1 kHz) is served by its own thread, not the executor: see dedicated_subscription.py
            # taken serialized: the converter decodes stamp, names and the three fields, no Python message is built
            self._joint_states = create_dedicated_subscription(self, JointState, "joint_states",
                                                               self._on_joint_states, SENSOR_QOS, self._state_lock,
                                                               raw=True)
            # one wake-up per sample: 2 ms batches saved ~4 % of a core but put the receive-to-decision p99 at
            # 10-19 ms and the max at 60-70 ms under load (0.9-2 / 3-25 ms without; docs/bench/cpu.md, issue 48)
        self.get_logger().info(f"collision_monitor ready: robot {desc.name}, thresholds {self.values['thresholds']} "
                               f"N m, policy {self.values['policy']}; {note}")

    @_locked
    def _on_params(self, names: set[str]) -> None:
        self.values.update(PARAMS.values(self, names))
        self._decimation = int(self.values["residual_decimation"])
        if self.input is not None and names & set(STREAM_PARAMS.by_name):
            self.input.configure(self.values)
        if self.sup is not None and "torque_gain" in names:
            self.sup.set_torque_gain(torque_gains(list(self.values["torque_gain"]), self._n, self.joint_names))
        self._changed.changed(names)
        if self.sup is not None:
            self.sup.configure(*monitor_configs(self.values))
            self._log(self.sup.apply_pending())
        pending = self._changed.waiting(self.sup)
        self.get_logger().info(f"parameters changed: {sorted(names)}"
                               + (f" ({sorted(pending)} wait for a safe point)" if pending else ""))

    def _log(self, notes) -> None:
        if log_notes(self.get_logger(), notes):
            self.status.publish()

    # ------------------------------------------------------------------ 1 kHz path
    def _on_joint_states(self, msg: JointState | bytes) -> None:
        """A joint_states sample (a message, or serialized as the dedicated subscription takes it)."""
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
        for report in step.reports:
            self.out.event(self.sup.describe(report.event, self.joint_names), report.event.active, report.changed)
        if step.loss is not None and step.loss.lost:
            self.out.payload_lost(self.sup.loss_report(step.loss))
        r = step.monitor.residual
        sec, nanosec = self.input.converter.last_stamp  # the message's own stamp, to the nanosecond
        self._count += 1
        if self._count % self._decimation == 0:
            out = self._residual_msg
            stamp = out.header.stamp
            stamp.sec, stamp.nanosec = sec, nanosec
            out.effort = array("d", r)  # array.array skips the generated setter's per-element checks
            if self._residual_listened:
                self.out.residual.publish(out)
        for c in step.contacts:  # held with its detection until the loss check says collision; none for a loss
            self.out.contact(c, Time(sec=sec, nanosec=nanosec) if c.time == t else sec_to_time(c.time))
        if step.action is not Action.NOTHING:
            now = clock_seconds(self)
            command, note = self.sup.react(step.action, now, s.q, s.dq, max(0.0, now - t))
            if command is not None:
                self.out.command(self.joint_names, command)
            self._log([note] if note else [])

    def _restart(self) -> None:
        """The stream started over: re-initialise from its new samples, keep the payload."""
        if self.sup.restart():
            self.out.collision.publish(Bool(data=False))
        self.status.publish()

    # ------------------------------------------------------------------ other inputs
    @_locked
    def _on_trajectory(self, msg: JointTrajectory) -> None:
        if msg.header.frame_id == HOLD_MARK or self.sup is None:
            return
        try:
            t, q = trajectory_from_msg(msg, self.joint_names)
            v = trajectory_velocities(msg, self.joint_names)
        except PayloadEstimationError as e:
            self.get_logger().error(f"ignoring joint_trajectory for resume: {e}", throttle_duration_sec=THROTTLE_S)
            return
        if self.sup.commanded(clock_seconds(self), t, q, v, resumable=msg.header.frame_id != SAMPLER_MARK):
            self.get_logger().info("a new joint_trajectory supersedes the interrupted one: it will not be resumed")

    @_locked
    def _on_estimate(self, msg: InertiaStamped) -> None:
        self._log(self.inputs.estimate(self.sup, lambda: (estimate_from_msg(msg), msg.header.frame_id)))

    @_locked
    def _on_online(self, msg: String) -> None:
        """The online estimate's gravity covariance (payload_estimator/online_estimate): thresholds widened by it."""
        refused = self.inputs.uncertainty(self.sup, msg.data)
        if refused:
            self.get_logger().warning(refused, throttle_duration_sec=THROTTLE_S)

    @_locked
    def _on_sampling(self, msg: Bool) -> None:
        note = self.inputs.set_sampling(self.sup, bool(msg.data))
        if note:
            self.get_logger().info(note)

    @_locked
    def _on_payload_event(self, msg: String) -> None:
        """``grasped`` / ``released`` (payload_estimator's services): the payload changes now."""
        notes, refused = self.inputs.event(self.sup, msg.data)
        if refused:
            self.get_logger().warning(refused, throttle_duration_sec=THROTTLE_S)
            self.status.publish()
        self._log(notes)

    # ------------------------------------------------------------------ status
    def _watchdog(self) -> None:
        # ~/residual is published for every sample only while someone subscribes (a publish with nobody listening is
        # a tenth of the per-sample cost); a new subscriber gets it within WATCHDOG_PERIOD
        self._residual_listened = self.out.residual.get_subscription_count() > 0
        if self.input is None:
            return
        self.input.awake(WATCHDOG_PERIOD)  # late itself: the silence meanwhile is this node's, not the stream's
        silent = self.input.silent()
        if self._joint_states is not None and (silent is None or silent > self.input.watchdog.timeout):
            self._joint_states.flush()  # samples waiting unread (the joint_states thread starved) are not a loss
        change = self.input.lost_changed()
        if change is None or not self.context.ok():  # shutting down: the stream ends with the node, not a fault
            return
        age = self.input.age()
        if change:
            self.get_logger().error("no joint_states received yet: not monitoring" if age is None else
                                    f"joint_states lost for {age:.2f} s: collision detection is blind")
        else:
            self.get_logger().info("joint_states back: monitoring")
        self.status.publish()

    def _snapshot(self) -> tuple[bytes, str, dict]:
        with self._state_lock:
            age, lost = (None, False) if self.input is None else (self.input.age(), self.input.lost())
            level, text, vals = monitor_status(self.sup, self.values["policy"], self.inputs, self.model.error, age,
                                               lost)
            vals.update({"pending_parameters": ",".join(sorted(self._changed.waiting(self.sup))),
                         "dynamic_model": self._dynamic_note, **(self.input.counters() if self.input else {})})
        return bytes([level]), text, vals

    def destroy_node(self) -> None:
        clock = getattr(self, "_clock_thread", None)
        if clock is not None:
            clock.destroy()
        subscription = getattr(self, "_joint_states", None)  # None when the constructor failed before it
        if subscription is not None:
            subscription.destroy()
        super().destroy_node()


def main(args=None) -> int:
    from .bringup import run_node

    return run_node(CollisionMonitorNode, args)


if __name__ == "__main__":
    sys.exit(main())
