"""``payload_sampler``: visit the ±7° static poses around the pick configuration and estimate.

Interface (relative names, remappable):

- subscribes ``joint_states`` (sensor_msgs/JointState), ``collision_monitor/collision``
  (std_msgs/Bool, transient local), ``collision_monitor/status`` and, with an empty ``robot``
  parameter, ``robot_description``;
- publishes ``joint_trajectory`` (trajectory_msgs/JointTrajectory, one point per move, zero end
  velocity), ``~/active`` (std_msgs/Bool, transient local: True while sampling; the collision
  monitor takes a provisional payload on its rising edge), ``~/status`` and ``/diagnostics``;
- services ``~/sample``, ``~/sweep``, ``~/record_reference``, ``~/cancel`` and ``~/forget_pick``
  (std_srvs/Trigger);
- calls ``payload_estimator/clear_captures``, ``payload_estimator/capture`` and
  ``payload_estimator/estimate`` (std_srvs/Trigger); for ``~/sweep``,
  ``payload_estimator/capture_calibration`` and ``payload_estimator/calibrate`` instead; for a dynamic
  run ``payload_estimator/start_recording`` and ``payload_estimator/estimate_motion`` (or
  ``payload_estimator/store_reference`` for ``~/record_reference``).

The node only translates: what a request does — its mode (``mode`` dynamic, ``~/record_reference``,
``~/sweep``: see :mod:`sampling.sampler`), start-up, the motion, every abort, where the arm ends up, what is
kept for the next run, the status — is :class:`sampling.sampler.Sampler` and its
:class:`sampling.sampling_run.SamplingRun`. In a single-threaded executor the service callback awaits
the run, which advances on every joint_states sample, collision flag, estimator answer and a 20 Hz
steady-clock tick (a lost stream is noticed while ``/clock`` stands still). joint_states are taken from a
subscription the executor does not wait on (:class:`.dedicated_subscription.PolledSubscription`): every sample
while a run is active, the newest at each tick while idle (the current pose for ``~/sample``'s mode, the watchdog
for the status), so an idle sampler costs next to nothing at 1 kHz (issue 48). Motion planning (up to
about a second of CPU) runs on a worker thread whose result wakes the executor through a guard
condition, so joint_states and the watchdog are handled throughout and ``~/cancel`` ends a planning run.
"""

from __future__ import annotations

import sys
import time
from dataclasses import replace
from functools import partial

from diagnostic_msgs.msg import DiagnosticArray
from rclpy.callback_groups import ReentrantCallbackGroup
from rclpy.node import Node
from rclpy.task import Future
from sensor_msgs.msg import JointState
from std_msgs.msg import Bool
from std_srvs.srv import Trigger
from trajectory_msgs.msg import JointTrajectory

from ..errors import PayloadEstimationError
from ..model.dynamics import RigidBodyDynamics
from ..sampling.excitation_sequence import Excite
from ..sampling.sampler import (
    ERROR,
    OK,
    REQUESTS,
    TICK_PERIOD,
    PlanWorker,
    Sampler,
    SamplerConfig,
    answer_text,
    plan_note,
    request_kind,
    retried,
    retry_reason,
    stream_stale,
)
from ..sampling.sampling_run import ClearCaptures, Finished, Hold, PlanMotion, SetActive
from ..sampling.sequence import Move
from ..stream import StampVerdict
from .dedicated_subscription import PolledSubscription
from .joint_state_input import JointStateInput
from .messages import clock_seconds, diagnostic_level
from .node_support import (
    SETTLE_PARAMS,
    STREAM_PARAMS,
    StatusReporter,
    answer,
    clock_off_executor,
    joint_names_for,
    settle_config,
    steady_timer,
)
from .qos import COMMAND_QOS, LATCHED_QOS, SENSOR_LATEST_QOS
from .robot_model_source import RobotModelSource
from .sampler_estimator_clients import EstimatorClients
from .sampler_params import PARAMS, change_note, sampler_config
from .sampler_support import log_outcome, motion_msg

IDLE_PERIOD = 0.25
"""s between the idle ticks (the newest joint_states for the watchdog and the status; a request polls them itself):
each wake-up of the executor costs ~0.6 ms for the node's entities, 20 a second were 1.9 % of a core (issue 48).
A run ticks every TICK_PERIOD."""

JOINT_STATES_BATCH = 0.005
"""s joint_states gather during a run before the executor takes them (SENSOR_LATEST_QOS's depth 5 at 1 kHz): every
sample goes into the core, the run advances once per batch, at most this much later (issue 48)."""


class PayloadSamplerNode(Node):
    """Messages <-> :class:`sampling.sampler.Sampler` and its :class:`sampling.sampling_run.SamplingRun`."""

    def __init__(self, **kwargs):
        super().__init__("payload_sampler", **kwargs)
        self.values = PARAMS.declare(self, on_change=self._on_params)
        self.core = Sampler()
        self.dyn: RigidBodyDynamics | None = None
        self.joint_names: tuple[str, ...] = ()
        self.input: JointStateInput | None = None
        self._done: Future | None = None
        self.pub_traj = self.create_publisher(JointTrajectory, "joint_trajectory", COMMAND_QOS)
        self.pub_active = self.create_publisher(Bool, "~/active", LATCHED_QOS)
        self.status = StatusReporter(self, "sampling", self._snapshot)
        self.model = RobotModelSource(self, self.values, self._on_model, busy=lambda: self._run is not None)
        # the current state, not every sample: arrival and rest are judged on fresh data; taken by the executor only
        # while a run is active (the polling thread wakes it through the guard condition), polled while idle
        self._js = PolledSubscription(self, JointState, "joint_states", SENSOR_LATEST_QOS,
                                      self.create_guard_condition(self._on_joint_states_waiting).trigger,
                                      batch=JOINT_STATES_BATCH)
        self.create_subscription(Bool, "collision_monitor/collision", self._on_collision, LATCHED_QOS)
        self.create_subscription(DiagnosticArray, "collision_monitor/status", self._on_monitor_status, LATCHED_QOS)
        services = ReentrantCallbackGroup()  # ~/sample awaits its run: the other callbacks must go on meanwhile
        self.estimator = EstimatorClients(self, services, lambda: self._run, self._tick)
        callbacks = {**{r[2:]: partial(self._start, r) for r in REQUESTS}, "cancel": self._srv_cancel,
                     "forget_pick": self._srv_forget_pick}
        for name, callback in callbacks.items():
            self.create_service(Trigger, f"~/{name}", callback, callback_group=services)
        self._idle_timer = steady_timer(self, IDLE_PERIOD, partial(self._on_timer, IDLE_PERIOD))
        self._run_timer = steady_timer(self, TICK_PERIOD, partial(self._on_timer, TICK_PERIOD))
        self._run_timer.cancel()  # ticks every TICK_PERIOD while a run is active only
        # planning runs on a worker thread; its result wakes the executor (a guard condition may be triggered
        # from any thread: rcl/guard_condition.h) and is taken there, in _on_planned
        self._planner = PlanWorker(self.create_guard_condition(self._on_planned).trigger)
        self._clock_thread = clock_off_executor(self)  # /clock (sim time) off the executor: node_support
        self.pub_active.publish(Bool(data=False))
        self.status.publish()
        self.get_logger().info(f"payload_sampler ready: {self.values['n_poses']} poses, "
                               f"±{self.values['amplitude_deg']} deg")

    _run = property(lambda self: self.core.run)
    last_timings = property(lambda self: self.core.last_timings)
    last_duration = property(lambda self: self.core.last_duration)  # s, node clock (sim time when use_sim_time)

    # ------------------------------------------------------------------ configuration
    def _on_model(self, desc) -> None:
        names = joint_names_for(desc, self.values["joint_names"])
        self.dyn = RigidBodyDynamics(desc)
        self.joint_names = names
        self.input = JointStateInput(self, names, self.values, require_velocity=False, require_effort=False)
        self.core.configure(settle_config(self.values), names)
        self.status.hardware_id = desc.name

    def _on_params(self, names: set[str]) -> None:
        self.values.update(PARAMS.values(self, names))
        if self.input is not None and names & set(STREAM_PARAMS.by_name):
            self.input.configure(self.values)
        if names & set(SETTLE_PARAMS.by_name):
            self.core.configure(settle_config(self.values), new_window=self._run is None)
        self.get_logger().info(change_note(names))

    # ------------------------------------------------------------------ inputs
    def _on_joint_states_waiting(self) -> None:
        """joint_states wait (a run is active): each into the core in turn, the run advanced once, on the newest."""
        msgs = self._js.take_all()
        for msg in msgs[:-1]:
            self._sample_in(msg)
        if msgs:
            self._on_joint_states(msgs[-1])

    def _poll(self) -> None:
        """Idle: the newest joint_states (the others waiting are dropped), outside the stream's sequence: the pose
        for the next ~/sample, the watchdog for the status."""
        msgs = self._js.take_all()
        s = self.input.note(msgs[-1]) if msgs and self.input is not None else None
        if s is not None:
            self.core.joint_state(s.stamp, s.q, s.dq, s.tau)

    def _on_joint_states(self, msg: JointState) -> bool:
        """A sample for the core; True when it advanced the run."""
        if not self._sample_in(msg) or self._run is None:
            return False
        self._tick()
        return True

    def _sample_in(self, msg: JointState) -> bool:
        """A sample into the core (the run not advanced); False when the input refused or held it."""
        got = None if self.input is None else self.input.receive(msg)
        if got is None or got[0] is StampVerdict.HOLD:
            return False
        verdict, t, s = got
        self.core.joint_state(t, s.q, s.dq, s.tau, restart=verdict is StampVerdict.RESTART)
        return True

    def _on_monitor_status(self, msg: DiagnosticArray) -> None:
        if msg.status:
            st = msg.status[0]
            self.core.monitor_status(diagnostic_level(st.level) >= ERROR, time.monotonic(), st.message)

    def _on_collision(self, msg: Bool) -> None:
        self.core.collision_flag(bool(msg.data))
        if self._run is not None:
            self._tick()

    # ------------------------------------------------------------------ services
    async def _start(self, request: str, _, response):
        """``~/sample``, ``~/sweep``, ``~/record_reference``: run one ``request`` to its end, answer its outcome.
        A ``~/record_reference`` or ``~/sweep`` whose run failed for a real gap in joint_states is tried once more by
        itself (:func:`sampling.sampler.retry_reason`), and the answer says so."""
        first: Finished | None = None
        for attempt in (1, 2):
            idle = self._run is None
            if idle:
                self._poll()  # the current pose decides the mode; the run judges rest on samples taken from now on
                self.core.configure(self.core.settle, new_window=True)
            try:
                _, how = self.core.start(request, self._config(), self.dyn, self.model.error,
                                         clock_seconds(self), time.monotonic())
            except PayloadEstimationError as e:
                fin = Finished(False, str(e), code="refused")
                break
            if idle and self.input is not None:
                self.input.resume()  # the samples polled while idle were no sequence
            self._js.arm()
            self._idle_timer.cancel()
            self._run_timer.reset()
            self.get_logger().info(f"{request}: {how}" + (" (the second attempt)" if first else ""))
            self._done = Future()
            self._tick()
            fin = await self._done
            why = retry_reason(request, fin, attempt)
            if not why:
                break
            self.get_logger().warning(f"{request} failed ({why}): trying once more by itself")
            first = fin
        if first is not None:
            fin = retried(first, fin)
        response.success, response.message = fin.ok, answer_text(fin)
        return response

    def _config(self) -> SamplerConfig:
        """The run's settings from the parameters, its stream timeout the one the watchdog uses (the parameter's, or
        from the stream's measured rate when it is 0)."""
        cfg = sampler_config(self.values)
        return cfg if self.input is None else replace(cfg, joint_state_timeout=self.input.watchdog.timeout)

    def _srv_cancel(self, request, response):
        if answer(response, self.core.cancel):
            self._tick()
        return response

    def _srv_forget_pick(self, request, response):
        if answer(response, self.core.forget_pick):
            self.get_logger().warning(response.message)
            self.status.publish()
        return response

    # ------------------------------------------------------------------ the run
    def _on_timer(self, period: float) -> None:
        """The steady-clock tick. rclpy runs ready timers before ready subscriptions: after the executor
        could not run for a while (a starved process, a long callback of another node in the same
        executor), this tick would see the stream as lost while its next sample already waits. Take that
        sample first; the run sees a lost stream only when none is there."""
        if self.input is not None:
            self.input.awake(period)  # late itself: the silence meanwhile is this node's, not the stream's
        stale = self._run is not None and self.input is not None and stream_stale(
            self.input.age(), self.input.watchdog.timeout)
        waiting = self._js.take_all() if stale else []
        # a waiting sample advances the run; one the input refuses (e.g. another arm's joints) must not stop the
        # ticks, or the run would never see that no usable joint_states arrive (~/sample never answered)
        if not [m for m in waiting if self._on_joint_states(m)]:
            self._tick()

    def _tick(self) -> None:
        run = self._run
        if run is None:
            self._poll()
            if self.input is not None and self.input.lost() and self.status.last_level == bytes([OK]):
                self.status.publish()
            return
        obs = self.core.observation(clock_seconds(self), time.monotonic(), self.input.silent() if self.input else None,
                                    self.estimator.ready(run),
                                    bool(self.values["require_monitor"]))
        for act in run.update(obs):
            self._do(act)

    def _plan(self, job: PlanMotion) -> None:
        """Compute ``job`` on the worker thread; :meth:`_on_planned` hands the result to the run."""
        self._planner.submit(self._run, job)

    def _on_planned(self) -> None:
        """Executor thread: hand finished plans to the run (a run that ended meanwhile does not get it)."""
        for res, trace in self._planner.take(self._run):
            if trace:
                self.get_logger().error(f"motion planning raised:\n{trace}")
            if res is not None:
                self.get_logger().info(plan_note(res))
                self._run.planned(res)
                self._tick()

    def destroy_node(self) -> None:
        planner = getattr(self, "_planner", None)  # None when the constructor failed before it
        if planner is not None:
            planner.shutdown()  # no trigger after the guard is destroyed
        clock = getattr(self, "_clock_thread", None)
        if clock is not None:
            clock.destroy()
        js = getattr(self, "_js", None)
        if js is not None:
            js.destroy()
        super().destroy_node()

    def _do(self, act) -> None:
        if isinstance(act, PlanMotion):
            self._plan(act)
        elif isinstance(act, SetActive):
            self.pub_active.publish(Bool(data=act.active))
        elif isinstance(act, ClearCaptures):
            self.estimator.clear()
        elif isinstance(act, (Move, Hold, Excite)):
            self.pub_traj.publish(motion_msg(self.joint_names, act))
            if isinstance(act, Hold):
                self.get_logger().warning("holding the current position")
            elif isinstance(act, Excite) or act.label.startswith("pose"):
                self.status.publish()
        elif isinstance(act, Finished):
            self._finished(act)
        elif request_kind(act):
            self.estimator.request(request_kind(act))

    def _finished(self, fin: Finished) -> None:
        self._js.disarm()
        self._run_timer.cancel()
        self._idle_timer.reset()
        self.estimator.drop_pending()
        fin = self.core.finish(fin, clock_seconds(self), time.monotonic())
        log_outcome(self.get_logger(), fin)
        self.status.publish()
        self.model.retry()
        if self._done is not None and not self._done.done():
            self._done.set_result(fin)

    # ------------------------------------------------------------------ status
    def _snapshot(self) -> tuple[bytes, str, dict]:
        level, text, vals = self.core.status(self.model.error if self.dyn is None else None,
                                             self.input is not None and self.input.lost(), self.values["mode"])
        if self.input is not None:
            vals.update(self.input.counters())
        vals["joint_states_taken"] = ("every sample (a run is active)" if self._js.armed else
                                      f"the newest every {IDLE_PERIOD:g} s (idle; stream_rate_hz and repeated_states "
                                      "are those of the last run)")
        return bytes([level]), text, vals


def main(args=None) -> int:
    from .bringup import run_node

    return run_node(PayloadSamplerNode, args)


if __name__ == "__main__":
    sys.exit(main())
