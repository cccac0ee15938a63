"""``payload_sampler``: visit the ±7° static poses around the pick configuration and estimate.

Interface (relative names, remappable):

- subscribes ``joint_states`` (sensor_msgs/JointState), ``collision_monitor/collision``
  (std_msgs/Bool, transient local) and, with an empty ``robot`` parameter, ``robot_description``;
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

``mode`` dynamic: one excitation (:mod:`motion.payload_excitation`, one multi-point
``joint_trajectory`` with velocities) within the same envelope instead of the static poses, with the
same collision gate, aborts and return. ``~/record_reference`` runs that excitation on the unloaded arm
before the grasp (``active`` is not raised) and keeps its plan: the next dynamic ``~/sample`` at the
same pick configuration repeats exactly that motion and the estimator fits the difference. The plan
is scaled down where the object's mass, unseen at rest at the pick configuration, could put more
than ``unknown_payload_torque`` on a joint at 3 σ along it; where less than 30 % would remain
(stretched up) ``~/record_reference`` refuses and ``~/sample`` uses the static poses.

``~/sweep`` calibrates the unloaded arm's gravity model: ``sweep_poses`` static poses within
±``sweep_amplitude_deg`` of the current configuration (:func:`motion.sweep.plan_sweep`), run like a
sampling run (same limits, collision gate, aborts and return) but without raising ``~/active``.

The node is thin: what a ``~/sample`` request does — start-up, the poses, every abort and where the
arm ends up — is :class:`motion.sampling_run.SamplingRun`; this node turns messages into its
observations and carries out its actions. It runs in a single-threaded executor: the service
callback awaits the run, which advances on every joint_states sample, collision flag, estimator
answer and a 20 Hz steady-clock tick (so a lost stream is noticed while ``/clock`` stands still).
Nothing blocks that executor: the run's motion planning (up to about a second of CPU) is computed on a
worker thread, whose result wakes the executor through a guard condition, so joint_states and the
stream watchdog are handled throughout and ``~/cancel`` ends a run that is still planning.
After an abort, the next ``~/sample`` keeps that run's pick configuration: it starts there when the
arm is there (a grasp meanwhile is handled as on a first run), returns there first when the arm is
elsewhere inside that run's envelope, and is refused, naming ``~/forget_pick`` (which drops it), when
the arm is outside the envelope or a collision is reported away from it.
"""

from __future__ import annotations

import sys
import threading
import time
import traceback
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace

import numpy as np
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus
from rclpy.callback_groups import ReentrantCallbackGroup
from rclpy.exceptions import InvalidHandle
from rclpy.node import Node
from rclpy.task import Future
from sensor_msgs.msg import JointState
from std_msgs.msg import Bool
from std_srvs.srv import Trigger
from trajectory_msgs.msg import JointTrajectory

from ..model.dynamics import RigidBodyDynamics
from ..sampling.excitation_sequence import Excite, Record
from ..sampling.payload_excitation import ExcitationPlan, ExcitationPlanConfig
from ..sampling.poses import PosePlanConfig
from ..sampling.sampling_run import (
    ClearCaptures,
    Finished,
    Hold,
    Observation,
    PickAnchor,
    PlanMotion,
    PlannedMotion,
    RunConfig,
    SamplingRun,
    SetActive,
)
from ..sampling.sequence import Capture, Estimate, Move, PhaseTimings, SequenceConfig
from ..signals.settle import SampleWindow, check_static
from ..stream import StampVerdict
from .messages import clock_seconds, diagnostic_level, trajectory_msg
from .node_support import (
    ROBOT_PARAMS,
    SETTLE_PARAMS,
    STREAM_PARAMS,
    JointStateInput,
    RobotModelSource,
    StatusReporter,
    joint_names_for,
    settle_config,
    steady_timer,
)
from .parameters import Param, ParameterTable
from .qos import COMMAND_QOS, LATCHED_QOS, SENSOR_LATEST_QOS

NEXT_RUN = "next ~/sample"

PARAMS = ROBOT_PARAMS + STREAM_PARAMS + SETTLE_PARAMS + ParameterTable([
    Param("n_poses", 10, "static samples including the pick configuration (paper: 10)", low=4, high=50,
          applies=NEXT_RUN),
    Param("amplitude_deg", 7.0, "deg, per-joint perturbation around the pick configuration (paper: ±7°)",
          low=0.0, high=10.0, low_open=True, applies=NEXT_RUN),
    Param("limit_margin_deg", 1.0, "deg kept from the joint position limits", low=0.0, high=20.0, applies=NEXT_RUN),
    Param("velocity_scale", 0.9, "peak joint speed of a move as a fraction of the velocity limit (quintic)",
          low=0.0, high=1.0, low_open=True, applies=NEXT_RUN),
    Param("min_duration", 0.25, "s, shortest move", low=0.0, high=10.0, low_open=True, applies=NEXT_RUN),
    Param("arrival_tolerance_deg", 0.5, "deg per joint for 'arrived'", low=0.0, high=5.0, low_open=True,
          applies=NEXT_RUN),
    Param("arrival_timeout", 2.0, "s beyond a move's planned duration before 'not reached'", low=0.0, high=60.0,
          low_open=True, applies=NEXT_RUN),
    Param("dwell", 1.0, "s, longest wait for a static sample at a pose (paper: 1 s)", low=0.0, high=30.0,
          low_open=True, applies=NEXT_RUN),
    Param("pick_rest_timeout", 3.0, "s, longest wait for rest at the pick configuration (after the grasp)",
          low=0.0, high=60.0, low_open=True, applies=NEXT_RUN),
    Param("capture_period", 0.005, "s, shortest time between two capture requests at a pose", low=0.0, high=1.0,
          applies=NEXT_RUN),
    Param("monitor_fit_delay", 0.25, "s after ~/active before the first move (the monitor fits its provisional "
          "payload after 5/K_I)", low=0.0, high=10.0, applies=NEXT_RUN),
    Param("service_timeout", 3.0, "s (wall clock) the estimator may take to answer", low=0.0, high=60.0,
          low_open=True, applies=NEXT_RUN),
    Param("collision_clear_timeout", 1.0, "s the first move waits for the monitor's grasp detection to clear",
          low=0.0, high=60.0, low_open=True, applies=NEXT_RUN),
    Param("require_monitor", True, "move only while the collision monitor reports that it is monitoring "
          "(collision_monitor/status below ERROR, newer than 3 s); false: sample without collision detection",
          applies=NEXT_RUN),
    Param("sweep_poses", 30, "~/sweep: static poses of the unloaded arm for its gravity model", low=8, high=200,
          applies="next ~/sweep"),
    Param("sweep_amplitude_deg", 25.0, "~/sweep: deg per joint around the current configuration (the workspace "
          "the sweep may use: keep it free of obstacles)", low=0.0, high=30.0, low_open=True, applies="next ~/sweep"),
    Param("sweep_velocity_scale", 0.5, "~/sweep: peak joint speed of a move as a fraction of the velocity limit",
          low=0.0, high=1.0, low_open=True, applies="next ~/sweep"),
    Param("mode", "auto", "static: the ±amplitude_deg static poses (mass and CoM, about 6 s); dynamic: one "
          "excitation within the same envelope (mass, CoM and inertia, about 2.5 s; docs/bench/dynamic.md), "
          "differential against the ~/record_reference run when there is one at this pick configuration, else "
          "one-shot against the model (coarse, flagged); auto: dynamic when ~/record_reference was recorded at "
          "this pick configuration, else static", choices=("auto", "static", "dynamic"), applies=NEXT_RUN),
    Param("excitation_duration", 1.6, "s, planned duration of the dynamic excitation (one Fourier period, rest to "
          "rest at the pick configuration)", low=0.5, high=20.0, applies="next ~/record_reference"),
    Param("excitation_harmonics", 5, "harmonics of the excitation (more: faster content within the same ±amplitude)",
          low=2, high=10, applies="next ~/record_reference"),
    Param("excitation_velocity_scale", 0.8, "peak joint speed of the excitation as a fraction of the velocity limit",
          low=0.0, high=1.0, low_open=True, applies="next ~/record_reference"),
    Param("excitation_max_acceleration", 25.0, "rad/s^2 per joint, acceleration budget of the excitation (robot "
          "descriptions carry no acceleration limits: set it to what your controller allows)", low=0.0, high=50.0,
          low_open=True, applies="next ~/record_reference"),
    Param("monitor_timeout", 10.0, "s (wall clock) ~/sample waits for the collision monitor to be monitoring "
          "before it refuses", low=0.0, high=120.0, low_open=True, applies=NEXT_RUN),
])

_ERROR = diagnostic_level(DiagnosticStatus.ERROR)
_PHASES = {"waiting": "waiting for joint_states, the estimator and the collision monitor",
           "return_first": "returning to the pick configuration of the aborted run",
           "startup": "waiting for the arm to rest at the pick configuration",
           "rest": "waiting for the arm to rest at the pick configuration", "planning": "planning the motion",
           "abort_return": "aborted, returning to the pick configuration"}
"""Status words for the run's phases outside its pose or excitation sequence."""
_NOT_FAULTS = ("refused", "cancelled")
"""Outcomes that are no fault: a refusal (nothing moved) and the user's ~/cancel: WARN, not ERROR."""
MONITOR_STATUS_AGE = 3.0
"""s (wall clock): a collision_monitor/status older than this does not count (the monitor publishes at 1 Hz)."""

TICK_PERIOD = 0.05
"""s; steady-clock tick of a run (stream loss, timeouts) between joint_states samples."""


class PayloadSamplerNode(Node):
    """Messages <-> :class:`motion.sampling_run.SamplingRun`."""

    def __init__(self, **kwargs):
        super().__init__("payload_sampler", **kwargs)
        self.values = PARAMS.declare(self, on_change=self._on_params)
        self.dyn: RigidBodyDynamics | None = None
        self.joint_names: tuple[str, ...] = ()
        self.input: JointStateInput | None = None
        self._window: SampleWindow | None = None
        self._q = self._dq = None
        self._collision = False
        self._collisions = 0
        self._cancel = False
        self._run: SamplingRun | None = None
        self._done: Future | None = None
        self._futures: list = []
        self._anchor: PickAnchor | None = None
        self._static_cache: tuple[float | None, bool] = (None, False)
        self.last_result: Finished | None = None
        self.last_q0: np.ndarray | None = None  # rad, pick configuration of the last run
        self.last_timings: PhaseTimings | None = None
        self.last_duration: float | None = None  # s, node clock (sim time when use_sim_time)
        self.last_wall_duration: float | None = None
        self._t_request = (0.0, 0.0)
        self.reference_plan: ExcitationPlan | None = None  # the excitation of the last ~/record_reference
        self.last_reference_duration: float | None = None  # s, node clock

        self.pub_traj = self.create_publisher(JointTrajectory, "joint_trajectory", COMMAND_QOS)
        self.pub_active = self.create_publisher(Bool, "~/active", LATCHED_QOS)
        self.status = StatusReporter(self, "sampling", self._snapshot)
        self.model = RobotModelSource(self, self.values, self._on_model, busy=lambda: self._run is not None)
        # the current state, not every sample: arrival and rest are judged on fresh data
        self._js_sub = self.create_subscription(JointState, "joint_states", self._on_joint_states, SENSOR_LATEST_QOS)
        self.create_subscription(Bool, "collision_monitor/collision", self._on_collision, LATCHED_QOS)
        self._monitor_status: tuple[int, float] | None = None  # (level, wall time received)
        self.create_subscription(DiagnosticArray, "collision_monitor/status", self._on_monitor_status, LATCHED_QOS)
        services = ReentrantCallbackGroup()  # ~/sample awaits its run: the other callbacks must go on meanwhile
        self.cli_clear = self.create_client(Trigger, "payload_estimator/clear_captures", callback_group=services)
        self.cli_capture = self.create_client(Trigger, "payload_estimator/capture", callback_group=services)
        self.cli_estimate = self.create_client(Trigger, "payload_estimator/estimate", callback_group=services)
        self.cli_capture_cal = self.create_client(Trigger, "payload_estimator/capture_calibration",
                                                  callback_group=services)
        self.cli_calibrate = self.create_client(Trigger, "payload_estimator/calibrate", callback_group=services)
        self.cli_record = self.create_client(Trigger, "payload_estimator/start_recording", callback_group=services)
        self.cli_estimate_motion = self.create_client(Trigger, "payload_estimator/estimate_motion",
                                                      callback_group=services)
        self.cli_store_reference = self.create_client(Trigger, "payload_estimator/store_reference",
                                                      callback_group=services)
        self.create_service(Trigger, "~/sample", self._srv_sample, callback_group=services)
        self.create_service(Trigger, "~/sweep", self._srv_sweep, callback_group=services)
        self.create_service(Trigger, "~/record_reference", self._srv_record_reference, callback_group=services)
        self.create_service(Trigger, "~/cancel", self._srv_cancel, callback_group=services)
        self.create_service(Trigger, "~/forget_pick", self._srv_forget_pick, callback_group=services)
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

    # ------------------------------------------------------------------ configuration
    def _on_model(self, desc) -> None:
        names = joint_names_for(desc, self.values["joint_names"])
        self.dyn = RigidBodyDynamics(desc)
        self.joint_names = names
        self.input = JointStateInput(self, names, self.values, require_velocity=False, require_effort=False)
        self._new_window()
        self.status.hardware_id = desc.name

    def _new_window(self) -> None:
        s = settle_config(self.values)
        # longer than max_window: a history shorter than max_window reads as "collecting samples"
        self._window = SampleWindow(horizon=max(1.5 * s.window, 1.25 * s.max_window))

    def _on_params(self, names: set[str]) -> None:
        self.values.update(PARAMS.values(self, names))
        if self.input is not None and names & set(STREAM_PARAMS.by_name):
            self.input.configure(self.values)
        if names & set(SETTLE_PARAMS.by_name) and self._run is None:
            self._new_window()
        when: dict[str, list[str]] = {}
        for name in sorted(names):
            p = PARAMS.by_name.get(name)
            when.setdefault("at once" if p is None or p.applies == "immediately" else f"from the {p.applies}",
                            []).append(name)
        self.get_logger().info("parameters changed: " + "; ".join(f"{', '.join(n)} (applies {w})"
                                                                  for w, n in when.items()))

    def _configs(self, sweep: bool = False) -> tuple[PosePlanConfig, SequenceConfig, RunConfig]:
        v = self.values
        prefix = "sweep_" if sweep else ""
        plan = PosePlanConfig(n_poses=int(v[f"{prefix}poses" if sweep else "n_poses"]),
                              amplitude_deg=float(v[f"{prefix}amplitude_deg"]),
                              limit_margin_deg=float(v["limit_margin_deg"]),
                              velocity_scale=float(v[f"{prefix}velocity_scale"]), min_duration=float(v["min_duration"]),
                              max_candidates=1000 if sweep else PosePlanConfig.max_candidates)
        seq = SequenceConfig(velocity_scale=plan.velocity_scale, min_duration=plan.min_duration,
                             arrival_tolerance=float(np.radians(v["arrival_tolerance_deg"])),
                             arrival_timeout=float(v["arrival_timeout"]), dwell=float(v["dwell"]),
                             retry_period=float(v["capture_period"]),
                             clear_timeout=float(v["collision_clear_timeout"]) + float(v["monitor_fit_delay"]))
        run = RunConfig(pick_rest_timeout=float(v["pick_rest_timeout"]),
                        monitor_fit_delay=float(v["monitor_fit_delay"]),
                        stream_timeout=float(v["joint_state_timeout"]), service_timeout=float(v["service_timeout"]),
                        start_tolerance=float(np.radians(v["arrival_tolerance_deg"])),
                        monitor_timeout=float(v["monitor_timeout"]))
        return plan, seq, run

    # ------------------------------------------------------------------ inputs
    def _now(self) -> float:
        return clock_seconds(self)

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
            self._window.clear()
        self._q, self._dq = s.q, s.dq
        self._window.append(t, s.q, s.dq, s.tau)
        if self._run is not None:
            self._tick()

    def _on_monitor_status(self, msg: DiagnosticArray) -> None:
        if msg.status:
            self._monitor_status = (diagnostic_level(msg.status[0].level), time.monotonic())

    def _monitor_ready(self) -> bool:
        """The collision monitor is monitoring (or the node was told not to require it)."""
        if not self.values["require_monitor"]:
            return True
        st = self._monitor_status
        return st is not None and st[0] < _ERROR and time.monotonic() - st[1] <= MONITOR_STATUS_AGE

    def _on_collision(self, msg: Bool) -> None:
        if msg.data and not self._collision:
            self._collisions += 1
        self._collision = bool(msg.data)
        if self._run is not None:
            self._tick()

    def _static(self) -> bool:
        """This node's static pre-check on its window, evaluated once per new sample."""
        last = self._window.last_time
        if last is not None and self._static_cache[0] == last:
            return self._static_cache[1]
        t, q, dq, tau = self._window.arrays()
        static = check_static(t, q, dq, tau, settle_config(self.values), self.joint_names).static
        self._static_cache = (last, static)
        return static

    def _run_clients(self, run: SamplingRun | None) -> tuple:
        """(capture or record, estimate) clients of ``run``: the payload's, the calibration's for a sweep,
        the recording's for a dynamic run."""
        if run is not None and run.excitation is not None:
            return self.cli_record, (self.cli_store_reference if run.reference else self.cli_estimate_motion)
        if run is not None and run.sweep:
            return self.cli_capture_cal, self.cli_calibrate
        return self.cli_capture, self.cli_estimate

    def _excitation(self, reference: bool) -> tuple[ExcitationPlanConfig | None, ExcitationPlan | None, str]:
        """(plan configuration or None for static, the reference run's plan to repeat or None, why) of
        the next run."""
        v = self.values
        cfg = ExcitationPlanConfig(duration=float(v["excitation_duration"]), amplitude_deg=float(v["amplitude_deg"]),
                                   limit_margin_deg=float(v["limit_margin_deg"]),
                                   velocity_scale=float(v["excitation_velocity_scale"]),
                                   max_acceleration=float(v["excitation_max_acceleration"]),
                                   harmonics=int(v["excitation_harmonics"]))
        if reference:
            return cfg, None, "reference run"
        ref = self.reference_plan
        near = (ref is not None and self._q is not None
                and float(np.max(np.abs(self._q - ref.envelope.q0))) <= float(np.radians(v["arrival_tolerance_deg"])))
        if v["mode"] == "static" or (v["mode"] == "auto" and not near):
            return None, None, "static"
        if near:
            return cfg, ref, "dynamic, differential against the reference run"
        return cfg, None, "dynamic, no reference run at this pick configuration: one-shot against the model"

    def _observe(self) -> Observation:
        run = self._run
        ready = all(c.service_is_ready() for c in self._run_clients(run))
        return Observation(t=self._now(), wall=time.monotonic(), q=self._q, dq=self._dq,
                           static=bool(run is not None and run.wants_static and self._q is not None and self._static()),
                           stream_age=self.input.age() if self.input else None, collision=self._collision,
                           collisions=self._collisions, cancel=self._cancel, estimator_ready=ready,
                           monitor_ready=self._monitor_ready())

    # ------------------------------------------------------------------ services
    async def _srv_sample(self, request, response):
        return await self._start(response, sweep=False)

    async def _srv_sweep(self, request, response):
        return await self._start(response, sweep=True)

    async def _srv_record_reference(self, request, response):
        return await self._start(response, sweep=False, reference=True)

    async def _start(self, response, sweep: bool, reference: bool = False):
        """Run one ``~/sample`` (or ``~/sweep``) to its end and answer with its outcome."""
        if self._run is not None:
            response.success = False
            response.message = "rejected: a sampling run is already in progress (call ~/cancel to stop it)"
            return response
        if self.dyn is None:
            response.success, response.message = False, f"rejected: no robot model ({self.model.error})"
            return response
        plan, seq, run = self._configs(sweep)
        excitation, reference_plan, how = self._excitation(reference) if not sweep else (None, None, "sweep")
        self._cancel = False
        self._t_request = (self._now(), time.monotonic())
        self.get_logger().info(f"{'~/record_reference' if reference else '~/sweep' if sweep else '~/sample'}: {how}")
        self._run = SamplingRun(self.dyn, plan, seq, run, *self._t_request, self._anchor, self.joint_names, sweep=sweep,
                                excitation=excitation, reference=reference, reference_plan=reference_plan)
        self._done = Future()
        self._tick()
        fin: Finished = await self._done
        response.success = fin.ok
        response.message = fin.text if fin.ok or fin.code in _NOT_FAULTS else f"aborted: {fin.text}"
        return response

    def _srv_cancel(self, request, response):
        if self._run is None:
            response.success, response.message = False, "nothing to cancel: the sampler is idle"
            return response
        self._cancel = True
        self._tick()
        response.success = True
        response.message = ("cancel requested: the run stops (an arm that left the pick configuration is moved back "
                            "there); its ~/sample call answers with where the arm is")
        return response

    def _srv_forget_pick(self, request, response):
        if self._run is not None:
            response.success = False
            response.message = "rejected: a sampling run is in progress (call ~/cancel first)"
        elif self._anchor is None:
            response.success = True
            response.message = "no pick configuration was kept: the next ~/sample samples around the current pose"
        else:
            q0 = np.round(np.degrees(self._anchor.q0), 2).tolist()
            self._anchor = None
            response.success = True
            response.message = (f"forgot the pick configuration {q0} deg of the aborted run: the next ~/sample "
                                "samples around the arm's current pose")
            self.get_logger().warning(response.message)
            self.status.publish()
        return response

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
            if self.input is not None and self.input.lost() and self.status.last_level == DiagnosticStatus.OK:
                self.status.publish()
            return
        for act in run.update(self._observe()):
            self._do(act)

    def _plan(self, job: PlanMotion) -> None:
        """Compute ``job`` on the worker thread; :meth:`_on_planned` hands the result to the run."""
        run = self._run

        def work() -> None:
            trace = ""
            try:
                res = job.compute()
            except Exception as e:  # noqa: BLE001 - a planning bug must end the run, not leave it planning
                trace = traceback.format_exc()
                res = PlannedMotion(None, error=f"planning failed unexpectedly ({type(e).__name__}: {e}); the arm "
                                    "was not moved. Please report this with the sampler's log")
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
            if self.cli_clear.service_is_ready():
                self.cli_clear.call_async(Trigger.Request())
        elif isinstance(act, (Move, Hold)):
            vel = np.zeros((1, act.target.size)) if isinstance(act, Hold) else None
            self.pub_traj.publish(trajectory_msg(self.joint_names, act.target[None, :], [act.duration], velocities=vel))
            if isinstance(act, Hold):
                self.get_logger().warning("holding the current position")
            elif act.label.startswith("pose"):
                self.status.publish()
        elif isinstance(act, Excite):
            times = [p[0] for p in act.points if p[0] > 0]
            pos = np.array([p[1] for p in act.points if p[0] > 0])
            vel = np.array([p[2] for p in act.points if p[0] > 0])
            self.pub_traj.publish(trajectory_msg(self.joint_names, pos, times, velocities=vel))
            self.status.publish()
        elif isinstance(act, (Capture, Estimate, Record)):
            capture_client, estimate_client = self._run_clients(self._run)
            kind, client = (("estimate", estimate_client) if isinstance(act, Estimate) else
                            ("record" if isinstance(act, Record) else "capture", capture_client))
            future = client.call_async(Trigger.Request())
            self._futures.append((client, future))
            future.add_done_callback(lambda f, k=kind: self._answered(k, f))
            if kind == "estimate" and self._run.excitation is not None:
                self.get_logger().info("excitation done; " + ("storing the reference run" if self._run.reference
                                                              else "estimating"))
            elif kind == "estimate":
                self.get_logger().info(f"all poses captured; {'calibrating' if self._run.sweep else 'estimating'} "
                                       "while returning to the pick configuration")
                self.status.publish()
        elif isinstance(act, Finished):
            self._finished(act)

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
        run = self._run
        for client, future in self._futures:
            if not future.done():
                try:
                    client.remove_pending_request(future)
                except Exception:  # noqa: BLE001 - the server went away: nothing left to clean up
                    pass
        self._futures.clear()
        self.last_result = fin
        if run.reference and fin.ok:
            self.reference_plan = run.excitation_plan
            self.last_reference_duration = self._now() - self._t_request[0]
        self.last_q0 = None if run.q0 is None else run.q0.copy()
        self._anchor = fin.anchor
        self.last_timings = run.timings if run.sequence is not None else None
        elapsed = self._now() - self._t_request[0]
        self.last_duration = elapsed if elapsed >= 0 else None  # the node clock went back (a restart)
        self.last_wall_duration = time.monotonic() - self._t_request[1]
        node_clock = (f"{elapsed:.2f} s node-clock time" if elapsed >= 0 else
                      "node-clock time unknown: the clock went back")
        timing = (f" (took {node_clock}, {self.last_wall_duration:.2f} s wall"
                  + (f"; {self.last_timings.summary()})" if self.last_timings else ")"))
        fin = replace(fin, text=fin.text + timing)
        if fin.ok:  # one severity per call site: rclpy refuses a call site that changes it
            self.get_logger().info(f"sampling done: {fin.text}")
        elif fin.code in _NOT_FAULTS:  # what the user asked for, or nothing moved
            self.get_logger().warning(f"sampling aborted: {fin.text}")
        else:
            self.get_logger().error(f"sampling aborted: {fin.text}")
        self._run = None
        self.status.publish()
        self.model.retry()
        if self._done is not None and not self._done.done():
            self._done.set_result(fin)

    # ------------------------------------------------------------------ status
    def _snapshot(self) -> tuple[int, str, dict]:
        run, res = self._run, self.last_result
        if self.dyn is None:
            level, text = DiagnosticStatus.ERROR, self.model.error
        elif run is not None:
            seq = run.sequence
            where = seq.progress if seq is not None and run.phase == "sequence" else _PHASES.get(run.phase, run.phase)
            level, text = DiagnosticStatus.OK, f"sampling: {where}"
        elif self.input is not None and self.input.lost():
            level, text = DiagnosticStatus.WARN, "joint_states lost: cannot sample (check the robot driver)"
        elif res is not None and not res.ok and res.code not in _NOT_FAULTS:
            level, text = DiagnosticStatus.ERROR, f"aborted: {res.text}"
        elif res is not None and not res.ok:
            level, text = DiagnosticStatus.WARN, res.text
        else:
            level, text = DiagnosticStatus.OK, "idle" if res is None else f"done: {res.text}"
        vals = {"busy": run is not None, "phase": "idle" if run is None else run.phase,
                "last_outcome": "" if res is None else res.code,
                "last_pick_configuration_deg": "" if self.last_q0 is None else
                str(np.round(np.degrees(self.last_q0), 4).tolist()),
                "pick_anchor_deg": "" if self._anchor is None else
                str(np.round(np.degrees(self._anchor.q0), 3).tolist()),
                "last_ok": "" if res is None else res.ok,
                "last_duration_s": self.last_duration, "last_wall_duration_s": self.last_wall_duration,
                "mode": self.values["mode"], "reference_run_s": self.last_reference_duration,
                "reference_pick_configuration_deg": "" if self.reference_plan is None else
                str(np.round(np.degrees(self.reference_plan.envelope.q0), 3).tolist()),
                "excitation_scale": "" if self.reference_plan is None else f"{self.reference_plan.scale:.2f}"}
        if self.last_timings is not None:  # a phase the run did not reach is empty, not "nan"
            vals.update({k: "" if isinstance(v, float) and not np.isfinite(v) else v
                         for k, v in self.last_timings.as_dict().items()})
        if self.input is not None:
            vals.update(self.input.counters())
        return level, text, vals


def main(args=None) -> int:
    from .bringup import run_node

    return run_node(PayloadSamplerNode, args)


if __name__ == "__main__":
    sys.exit(main())
