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

``mode`` dynamic: one excitation (:mod:`sampling.payload_excitation`, one multi-point ``joint_trajectory``
with velocities) within the same envelope instead of the static poses; ``~/record_reference`` runs it on
the unloaded arm before the grasp and keeps its plan for the next dynamic ``~/sample`` at that pick
configuration (the estimator fits the difference). Where the object's mass, unseen at rest there, could
put more than ``unknown_payload_torque`` on a joint at 3 σ, the excitation is scaled down; below 30 %
``~/record_reference`` refuses and ``~/sample`` uses the static poses. ``~/sweep`` calibrates the unloaded arm's gravity
model (:func:`sampling.sweep.plan_sweep`). Both run without raising ``~/active``. After an abort, the
next ``~/sample`` keeps that run's pick configuration (``~/forget_pick`` drops it).

The node only translates: what a request does — its mode, start-up, the motion, every abort, where the
arm ends up, what is kept for the next run, the status — is :class:`sampling.sampler.Sampler` and its
:class:`sampling.sampling_run.SamplingRun`. In a single-threaded executor the service callback awaits
the run, which advances on every joint_states sample, collision flag, estimator answer and a 20 Hz
steady-clock tick (a lost stream is noticed while ``/clock`` stands still). Motion planning (up to
about a second of CPU) runs on a worker thread whose result wakes the executor through a guard
condition, so joint_states and the watchdog are handled throughout and ``~/cancel`` ends a planning run.
"""

from __future__ import annotations

import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
from diagnostic_msgs.msg import DiagnosticArray
from rclpy.callback_groups import ReentrantCallbackGroup
from rclpy.exceptions import InvalidHandle
from rclpy.node import Node
from rclpy.task import Future
from sensor_msgs.msg import JointState
from std_msgs.msg import Bool
from std_srvs.srv import Trigger
from trajectory_msgs.msg import JointTrajectory

from ..errors import PayloadEstimationError
from ..model.dynamics import RigidBodyDynamics
from ..sampling.excitation_sequence import Excite, Record
from ..sampling.sampler import ERROR, OK, Sampler, answer_text, compute_plan, estimate_note, outcome_level
from ..sampling.sampling_run import (
    ClearCaptures,
    Finished,
    Hold,
    PlanMotion,
    PlannedMotion,
    RunMode,
    SamplingRun,
    SetActive,
)
from ..sampling.sequence import Capture, Estimate, Move
from ..stream import StampVerdict
from .messages import clock_seconds, diagnostic_level, trajectory_msg
from .node_support import (
    SETTLE_PARAMS,
    STREAM_PARAMS,
    JointStateInput,
    RobotModelSource,
    StatusReporter,
    joint_names_for,
    settle_config,
    steady_timer,
)
from .qos import COMMAND_QOS, LATCHED_QOS, SENSOR_LATEST_QOS
from .sampler_params import PARAMS

ESTIMATOR_SERVICES = {RunMode.STATIC: ("capture", "estimate"), RunMode.SWEEP: ("capture_calibration", "calibrate"),
                      RunMode.DYNAMIC: ("start_recording", "estimate_motion"),
                      RunMode.RECORD_REFERENCE: ("start_recording", "store_reference")}
"""payload_estimator's (capture or record, estimate) services of each run mode (a mode may change while
planning: a dynamic run that falls back to the static poses)."""

TICK_PERIOD = 0.05
"""s; steady-clock tick of a run (stream loss, timeouts) between joint_states samples."""


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
        self._futures: list = []
        self.pub_traj = self.create_publisher(JointTrajectory, "joint_trajectory", COMMAND_QOS)
        self.pub_active = self.create_publisher(Bool, "~/active", LATCHED_QOS)
        self.status = StatusReporter(self, "sampling", self._snapshot)
        self.model = RobotModelSource(self, self.values, self._on_model, busy=lambda: self._run is not None)
        # the current state, not every sample: arrival and rest are judged on fresh data
        self._js_sub = self.create_subscription(JointState, "joint_states", self._on_joint_states, SENSOR_LATEST_QOS)
        self.create_subscription(Bool, "collision_monitor/collision", self._on_collision, LATCHED_QOS)
        self.create_subscription(DiagnosticArray, "collision_monitor/status", self._on_monitor_status, LATCHED_QOS)
        services = ReentrantCallbackGroup()  # ~/sample awaits its run: the other callbacks must go on meanwhile
        names = sorted({"clear_captures", *(n for pair in ESTIMATOR_SERVICES.values() for n in pair)})
        self.estimator = {n: self.create_client(Trigger, f"payload_estimator/{n}", callback_group=services)
                          for n in names}
        for name, callback in (("sample", self._srv_sample), ("sweep", self._srv_sweep),
                               ("record_reference", self._srv_record_reference), ("cancel", self._srv_cancel),
                               ("forget_pick", self._srv_forget_pick)):
            self.create_service(Trigger, f"~/{name}", callback, callback_group=services)
        steady_timer(self, TICK_PERIOD, self._on_timer)
        # planning runs on this worker; its result wakes the executor (a guard condition may be triggered
        # from any thread: rcl/guard_condition.h) and is taken there, in _on_planned
        self._planner = ThreadPoolExecutor(max_workers=1, thread_name_prefix="payload_sampler_planning")
        self._plan_lock = threading.Lock()
        self._plan_results: list[tuple[SamplingRun, PlannedMotion, str]] = []
        self._plan_guard = self.create_guard_condition(self._on_planned)
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
        when: dict[str, list[str]] = {}
        for name in sorted(names):
            p = PARAMS.by_name.get(name)
            when.setdefault("at once" if p is None or p.applies == "immediately" else f"from the {p.applies}",
                            []).append(name)
        self.get_logger().info("parameters changed: " + "; ".join(f"{', '.join(n)} (applies {w})"
                                                                  for w, n in when.items()))

    # ------------------------------------------------------------------ inputs
    def _now(self) -> float:
        return clock_seconds(self)

    def _on_joint_states(self, msg: JointState) -> None:
        got = None if self.input is None else self.input.receive(msg)
        if got is None or got[0] is StampVerdict.HOLD:
            return
        verdict, t, s = got
        self.core.joint_state(t, s.q, s.dq, s.tau, restart=verdict is StampVerdict.RESTART)
        if self._run is not None:
            self._tick()

    def _on_monitor_status(self, msg: DiagnosticArray) -> None:
        if msg.status:
            self.core.monitor_status(diagnostic_level(msg.status[0].level) >= ERROR, time.monotonic())

    def _on_collision(self, msg: Bool) -> None:
        self.core.collision_flag(bool(msg.data))
        if self._run is not None:
            self._tick()

    def _estimator_pair(self, run: SamplingRun) -> tuple:
        """(capture or record, estimate) clients of ``run``'s mode."""
        return tuple(self.estimator[n] for n in ESTIMATOR_SERVICES[run.mode])

    # ------------------------------------------------------------------ services
    async def _srv_sample(self, request, response):
        return await self._start(response, "~/sample")

    async def _srv_sweep(self, request, response):
        return await self._start(response, "~/sweep")

    async def _srv_record_reference(self, request, response):
        return await self._start(response, "~/record_reference")

    async def _start(self, response, request: str):
        """Run one ``request`` to its end and answer with its outcome."""
        try:
            _, how = self.core.start(request, self.values, self.dyn, self.model.error, self._now(), time.monotonic())
        except PayloadEstimationError as e:
            response.success, response.message = False, str(e)
            return response
        self.get_logger().info(f"{request}: {how}")
        self._done = Future()
        self._tick()
        fin: Finished = await self._done
        response.success, response.message = fin.ok, answer_text(fin)
        return response

    def _srv_cancel(self, request, response):
        if self._answer(response, self.core.cancel):
            self._tick()
        return response

    def _srv_forget_pick(self, request, response):
        if self._answer(response, self.core.forget_pick):
            self.get_logger().warning(response.message)
            self.status.publish()
        return response

    @staticmethod
    def _answer(response, call) -> bool:
        """Answer with ``call()``'s (changed something, message) or its refusal; True if it changed something."""
        try:
            changed, response.message = call()
        except PayloadEstimationError as e:
            changed, response.message = False, str(e)
            response.success = False
        else:
            response.success = True
        return changed

    # ------------------------------------------------------------------ the run
    def _on_timer(self) -> None:
        """The steady-clock tick. rclpy runs ready timers before ready subscriptions: after the executor
        could not run for a while (a starved process, a long callback of another node in the same
        executor), this tick would see the stream as lost while its next sample already waits. Take that
        sample first; the run sees a lost stream only when none is there."""
        if self._run is not None and self.input is not None and self._stream_stale() and self._take_joint_state():
            return  # _on_joint_states advanced the run with it
        self._tick()

    def _stream_stale(self) -> bool:
        age = self.input.age()
        return age is None or age > float(self.values["joint_state_timeout"])

    def _take_joint_state(self) -> bool:
        """Take a joint_states message waiting in the subscription's queue, if any (True: one was handled)."""
        try:
            with self._js_sub.handle:
                got = self._js_sub.handle.take_message(self._js_sub.msg_type, self._js_sub.raw)
        except InvalidHandle:  # being destroyed
            return False
        if got is None:
            return False
        self._on_joint_states(got[0])
        return True

    def _tick(self) -> None:
        run = self._run
        if run is None:
            if self.input is not None and self.input.lost() and self.status.last_level == bytes([OK]):
                self.status.publish()
            return
        obs = self.core.observation(self._now(), time.monotonic(), self.input.age() if self.input else None,
                                    all(c.service_is_ready() for c in self._estimator_pair(run)),
                                    bool(self.values["require_monitor"]))
        for act in run.update(obs):
            self._do(act)

    def _plan(self, job: PlanMotion) -> None:
        """Compute ``job`` on the worker thread; :meth:`_on_planned` hands the result to the run."""
        run = self._run

        def work() -> None:
            res, trace = compute_plan(job)
            with self._plan_lock:
                self._plan_results.append((run, res, trace))
            self._plan_guard.trigger()

        self._planner.submit(work)

    def _on_planned(self) -> None:
        """Executor thread: hand finished plans to their run (a run that ended meanwhile ignores it)."""
        with self._plan_lock:
            results, self._plan_results = self._plan_results, []
        for run, res, trace in results:
            if trace:
                self.get_logger().error(f"motion planning raised:\n{trace}")
            if run is not self._run:
                continue
            self.get_logger().info(f"motion planned in {res.seconds:.2f} s" if res.plan is not None else
                                   f"motion planning failed after {res.seconds:.2f} s: {res.error}")
            run.planned(res)
            self._tick()

    def destroy_node(self) -> None:
        self._planner.shutdown(wait=True, cancel_futures=True)  # no trigger after the guard is destroyed
        super().destroy_node()

    def _do(self, act) -> None:
        if isinstance(act, PlanMotion):
            self._plan(act)
        elif isinstance(act, SetActive):
            self.pub_active.publish(Bool(data=act.active))
        elif isinstance(act, ClearCaptures):
            if self.estimator["clear_captures"].service_is_ready():
                self.estimator["clear_captures"].call_async(Trigger.Request())
        elif isinstance(act, (Move, Hold)):
            vel = np.zeros((1, act.target.size)) if isinstance(act, Hold) else None
            self.pub_traj.publish(trajectory_msg(self.joint_names, act.target[None, :], [act.duration], velocities=vel))
            if isinstance(act, Hold):
                self.get_logger().warning("holding the current position")
            elif act.label.startswith("pose"):
                self.status.publish()
        elif isinstance(act, Excite):
            points = [p for p in act.points if p[0] > 0]
            self.pub_traj.publish(trajectory_msg(self.joint_names, np.array([p[1] for p in points]),
                                                 [p[0] for p in points], velocities=np.array([p[2] for p in points])))
            self.status.publish()
        elif isinstance(act, (Capture, Estimate, Record)):
            self._request(act)
        elif isinstance(act, Finished):
            self._finished(act)

    def _request(self, act: Capture | Estimate | Record) -> None:
        """Ask the estimator for a capture, the start of a recording or the estimate."""
        run = self._run
        capture_client, estimate_client = self._estimator_pair(run)
        kind, client = (("estimate", estimate_client) if isinstance(act, Estimate) else
                        ("record" if isinstance(act, Record) else "capture", capture_client))
        future = client.call_async(Trigger.Request())
        self._futures.append((client, future))
        future.add_done_callback(lambda f, k=kind: self._answered(k, f))
        if kind == "estimate":
            self.get_logger().info(estimate_note(run.mode))
            if not run.mode.excites:
                self.status.publish()

    def _answered(self, kind: str, future) -> None:
        run = self._run
        if run is None or future.cancelled():
            return
        res = future.result()
        if kind == "capture" and res.success and run.sequence is not None:
            self.get_logger().info(f"pose {run.sequence.pose + 1}/{run.sequence.n}: {res.message}")
        run.answered(kind, bool(res.success), str(res.message), self._now())
        self._tick()

    def _finished(self, fin: Finished) -> None:
        for client, future in self._futures:
            if not future.done():
                try:
                    client.remove_pending_request(future)
                except Exception:  # noqa: BLE001 - the server went away: nothing left to clean up
                    pass
        self._futures.clear()
        fin = self.core.finish(fin, self._now(), time.monotonic())
        level = outcome_level(fin)
        if level == OK:  # one severity per call site: rclpy refuses a call site that changes it
            self.get_logger().info(f"sampling done: {fin.text}")
        elif level == ERROR:
            self.get_logger().error(f"sampling aborted: {fin.text}")
        else:  # what the user asked for, or nothing moved
            self.get_logger().warning(f"sampling aborted: {fin.text}")
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
        return bytes([level]), text, vals


def main(args=None) -> int:
    from .bringup import run_node

    return run_node(PayloadSamplerNode, args)


if __name__ == "__main__":
    sys.exit(main())
