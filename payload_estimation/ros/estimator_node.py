"""``payload_estimator``: static captures and recorded runs from joint_states -> payload mass and CoM (paper 000, VI-A).

Its services (``~/capture``, ``~/estimate``, ``~/grasped``, ... std_srvs/Trigger), topics (``payload/estimate``
geometry_msgs/InertiaStamped latched, inertia about the CoM; ``~/payload_event``, ``~/online_estimate``, ``~/status``)
and parameters (:mod:`.estimator_params`) are listed with their types, QoS and meaning in docs/ros_interface.md.

The node is thin: every rule (captures, recordings, the reference run, the unloaded model, the fits, the online
estimate of issue 32, answers, the exports' outcome, the status) is :class:`payload.estimator.PayloadEstimator`'s;
this node turns messages, services and parameters into its calls and its answers into responses, the estimate,
logs and status. joint_states have a thread of their own (:mod:`.dedicated_subscription`, a deep queue, taken in
batches of :data:`JOINT_STATES_BATCH` s): a recording gets every sample, a capture judges the newest even while a fit
runs (the samples waiting are taken first; age on the wall clock).
"""

from __future__ import annotations

import json
import sys
import threading
import time
import traceback

from geometry_msgs.msg import InertiaStamped
from rclpy.node import Node
from sensor_msgs.msg import JointState
from std_msgs.msg import Bool, String

from ..errors import PayloadEstimationError
from ..model.dynamics import RigidBodyDynamics
from ..payload.estimate import NO_PAYLOAD, PayloadEstimate
from ..payload.estimator import PREPARE_PERIOD, PayloadEstimator
from ..payload.online_session import OnlineSession
from ..stream import StampVerdict
from .dedicated_subscription import create_dedicated_subscription
from .estimator_params import PARAMS, estimator_config
from .estimator_services import NO_LISTENER as NO_LISTENER  # the answer's phrase, imported from here by tests
from .estimator_services import EstimatorServices
from .joint_state_input import JointStateInput
from .messages import clock_stamp, estimate_to_msg
from .node_support import (
    STREAM_PARAMS,
    THROTTLE_S,
    StatusReporter,
    clock_off_executor,
    joint_names_for,
    log_notes,
    steady_timer,
)
from .parameters import ParameterError
from .qos import EVENT_QOS, LATCHED_QOS, SENSOR_QOS
from .robot_model_source import RobotModelSource

JOINT_STATES_BATCH = 0.02
"""s joint_states gather before the estimator's thread takes them (every sample is taken, 20 at a time at 1 kHz: one
wake-up instead of 20, issue 48); a service that reads the samples takes those waiting first."""

ONLINE_PERIOD = 0.05
"""s between solves of the online estimate (20 Hz on the wall clock: a solve takes 1-3 ms; at 10 Hz a 2.5 s move
got 8-10 estimates per second of motion, issue 46 asks >= 10; idle, a tick without a grasp returns at once). A
recording's model terms are computed on a thread of their own, every :data:`.payload.estimator.PREPARE_PERIOD` s."""


class PayloadEstimatorNode(Node):
    """Messages, services and parameters <-> :class:`payload.estimator.PayloadEstimator`."""

    def __init__(self, **kwargs):
        super().__init__("payload_estimator", **kwargs)
        self.core: PayloadEstimator | None = None  # _check_params runs while the parameters are declared
        self.values = PARAMS.declare(self, check=self._check_params, on_change=self._on_params)
        self.core = core = PayloadEstimator(estimator_config(self.values),
                                            online=OnlineSession(bool(self.values["online_estimation"])))
        self.input: JointStateInput | None = None
        self._input_lock = threading.Lock()

        self.pub_estimate = self.create_publisher(InertiaStamped, "payload/estimate", LATCHED_QOS)
        self.status = StatusReporter(self, "payload", self._snapshot)
        # Its own thread: a capture judges the newest samples (an executor-served depth-200 queue kept
        # this node 0.2 s behind the arm) and a recording gets every sample (a shallow one dropped them).
        self._joint_states = create_dedicated_subscription(self, JointState, "joint_states", self._on_joint_states,
                                                           SENSOR_QOS, self._input_lock, batch=JOINT_STATES_BATCH,
                                                           raw=True)  # decoded by the converter: no Python message
        self.trigger_services = EstimatorServices(self, self._flush)  # ~/capture, ~/estimate, ~/grasped, ...
        self.pub_event = self.create_publisher(String, "~/payload_event", EVENT_QOS)
        self.pub_online = self.create_publisher(String, "~/online_estimate", LATCHED_QOS)
        self.create_subscription(Bool, "payload_sampler/active", lambda m: core.online.set_sampling(bool(m.data)),
                                 LATCHED_QOS)
        self.create_subscription(String, "collision_monitor/payload_lost", self._on_payload_lost, LATCHED_QOS)
        self.create_subscription(Bool, "collision_monitor/collision", self._on_collision, LATCHED_QOS)
        steady_timer(self, ONLINE_PERIOD, self._online_tick)
        # the recording's model terms on a thread of their own: under a loaded interpreter a call waits far longer
        # than its budget for the GIL, and on the executor it held up this node's services and descriptions
        self.ahead_faults = 0
        self.online_faults = 0  # online estimate ticks that raised (logged with their traceback)
        self._ahead_stop = threading.Event()
        self._ahead = threading.Thread(target=self._work_ahead, name="payload_estimator:work_ahead", daemon=True)
        self._ahead.start()
        # a changed robot_description while a dynamic run is recorded is taken when the recording ends
        self.model = RobotModelSource(self, self.values, self._on_model, busy=lambda: core.recording)
        self._clock_thread = clock_off_executor(self)  # /clock (sim time) off the executor: node_support
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

    def _on_model(self, desc) -> None:
        names = joint_names_for(desc, self.values["joint_names"])
        try:
            log_notes(self.get_logger(), self.core.take_robot(RigidBodyDynamics(desc), names))
        except PayloadEstimationError as e:  # the torque gains do not fit this robot
            raise ParameterError(f"torque_gain: {e}") from e
        with self._input_lock:
            self.input = JointStateInput(self, names, self.values, require_velocity=False)
        self.status.hardware_id = desc.name
        self.get_logger().info(f"payload_estimator ready: robot {desc.name}, method {self.values['method']}, "
                               f"joints {list(names)}")

    def _on_params(self, names: set[str]) -> None:
        self.values.update(PARAMS.values(self, names))
        if self.input is not None and names & set(STREAM_PARAMS.by_name):
            self.input.configure(self.values)
        online = bool(self.values["online_estimation"])
        log_notes(self.get_logger(), self.core.reconfigure(estimator_config(self.values), names, online))
        if self.dyn is not None and "gravity_model" in names:
            self.status.publish()
        self.get_logger().info(f"parameters changed: {sorted(names)}")

    # ------------------------------------------------------------------ input
    def _on_joint_states(self, msg: JointState | bytes) -> None:
        got = None if self.input is None else self.input.receive(msg)
        if got is None or got[0] is StampVerdict.HOLD:
            return
        verdict, t, s = got
        if verdict is StampVerdict.RESTART:
            self.core.restart()
        error = self.core.add_sample(t, s.q, s.dq, s.tau)
        if error:
            self.get_logger().error(error, throttle_duration_sec=THROTTLE_S)

    # ------------------------------------------------------------------ services
    def _flush(self) -> None:
        """Take the joint_states waiting in the subscription's batch now (a request reads the newest samples)."""
        if self._joint_states is not None:
            self._joint_states.flush()

    # ------------------------------------------------------------------ online estimate
    def _on_payload_lost(self, msg: String) -> None:
        """The collision monitor reports the carried payload lost: the online estimate ends, 0 kg is published."""
        if self.core.payload_lost():
            self.publish_estimate(NO_PAYLOAD)
            self.get_logger().warning("payload lost (collision_monitor): online estimate ended, 0 kg published")

    def _on_collision(self, msg: Bool) -> None:
        """The collision monitor's collision flag: a contact is left out of the online estimate."""
        note = self.core.contact(bool(msg.data))
        if note:
            self.get_logger().info(note)

    def _work_ahead(self) -> None:
        """Every PREPARE_PERIOD s: the model terms of what has been recorded so far (the fit then waits only for
        its solve). A failure is counted (status ``work_ahead_faults``) and logged; the fit computes the rest."""
        while not self._ahead_stop.wait(PREPARE_PERIOD):
            try:
                self.core.prepare_recording()
            except Exception as e:  # noqa: BLE001 -- the fit recomputes what is missing; the thread must go on
                self.ahead_faults += 1
                self.get_logger().error(f"computing the recording's model terms ahead failed ({type(e).__name__}: "
                                        f"{e}); the fit will compute them", throttle_duration_sec=THROTTLE_S)

    def _online_tick(self) -> None:
        """20 Hz: an announcement no collision monitor heard, again once one listens; solve the online estimate;
        publish it (and its gravity uncertainty for the monitor) when new."""
        event, notes = self.core.relay_announcement(self.pub_event.get_subscription_count(), time.monotonic())
        if event is not None:
            self.pub_event.publish(String(data=event))
        log_notes(self.get_logger(), notes)
        if self.dyn is None:
            return
        if self.input is not None:
            self.input.awake(ONLINE_PERIOD)  # late itself: the silence meanwhile is this node's, not the stream's
        log_notes(self.get_logger(), self.core.use_online_model())
        try:
            tick = self.core.online_tick()
        except Exception as e:  # noqa: BLE001 -- a fault of the online estimate must not take the services down
            self.online_faults += 1
            self.get_logger().error(f"the online estimate failed ({type(e).__name__}: {e}); the estimate last "
                                    "published stays, the node's services go on (status online_faults)\n"
                                    f"{traceback.format_exc()}", throttle_duration_sec=THROTTLE_S)
            return
        if tick is None:
            return
        if tick.uncertainty is not None:  # first: the monitor matches it with the estimate that follows
            self.pub_online.publish(String(data=json.dumps(tick.uncertainty)))
        if tick.estimate is not None:
            self.pub_estimate.publish(estimate_to_msg(tick.estimate, clock_stamp(self), self.core.frame))
        if tick.note:
            self.get_logger().info(tick.note)
            self.status.publish()

    # ------------------------------------------------------------------ output
    def publish_estimate(self, est: PayloadEstimate) -> None:
        """``est`` on payload/estimate (latched) and the status."""
        self.pub_estimate.publish(estimate_to_msg(est, clock_stamp(self), self.core.frame))
        self.status.publish()

    def _snapshot(self) -> tuple[bytes, str, dict]:
        stream = "" if self.input is None else self.input.problem()
        level, text, vals = self.core.status(self.model.error, stream, self.values["robot"] or "robot_description")
        faults = {"work_ahead_faults": self.ahead_faults, "online_faults": self.online_faults}
        return bytes([level]), text, vals | faults | (self.input.counters() if self.input is not None else {})

    def destroy_node(self) -> None:
        stop = getattr(self, "_ahead_stop", None)
        if stop is not None:
            stop.set()
            self._ahead.join(timeout=2.0)
        clock = getattr(self, "_clock_thread", None)
        if clock is not None:
            clock.destroy()
        subscription = getattr(self, "_joint_states", None)  # None when the constructor failed before it
        if subscription is not None:
            subscription.destroy()
        super().destroy_node()


def main(args=None) -> int:
    from .bringup import run_node

    return run_node(PayloadEstimatorNode, args)


if __name__ == "__main__":
    sys.exit(main())
