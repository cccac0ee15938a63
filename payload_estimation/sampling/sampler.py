"""The ``payload_sampler`` node's core: which run a request starts, what outlives a run, what is reported.

:class:`Sampler` holds what is kept between :class:`.sampling_run.SamplingRun` s — the pick anchor of
an aborted run, the reference run's excitation, the last outcome and its timing — and the inputs a run
observes that arrive as events (the collision monitor's flag and status, ``~/cancel``). It answers the
node's services (``~/sample``, ``~/sweep``, ``~/record_reference``, ``~/cancel``, ``~/forget_pick``)
and makes its status; the node turns messages into these calls and the answers into messages.
:class:`SamplerConfig` holds the node's settings and their defaults (its parameter table reads them
from there); :func:`run_spec` turns them into the configuration of a run.
Times: ``t`` is the node clock (s), ``wall`` a monotonic clock (s), as in :class:`.sampling_run.Observation`.

``mode`` dynamic: one excitation (:mod:`.payload_excitation`, one multi-point ``joint_trajectory`` with
velocities) within the same envelope instead of the static poses; ``~/record_reference`` runs it on the
unloaded arm before the grasp and keeps its plan for the next dynamic ``~/sample`` at that pick configuration
(the estimator fits the difference). Where the object's mass, unseen at rest there, could put more than
``unknown_payload_torque`` on a joint at 3 σ, the excitation is scaled down; below 30 % ``~/record_reference``
refuses and ``~/sample`` uses the static poses. ``~/sweep`` calibrates the unloaded arm's gravity model
(:func:`.sweep.plan_sweep`). Both run without raising ``~/active``. After an abort, the next ``~/sample`` keeps
that run's pick configuration (``~/forget_pick`` drops it).
"""

from __future__ import annotations

import re
import threading
import traceback
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace

import numpy as np

from ..errors import PayloadEstimationError
from ..levels import ERROR, OK, WARN
from ..model.dynamics import RigidBodyDynamics
from ..signals.settle import SampleWindow, SettleConfig, check_static
from .excitation_sequence import Excite, Record
from .payload_excitation import ExcitationPlan, ExcitationPlanConfig
from .poses import MoveTiming, PosePlanConfig
from .sampling_run import (
    Finished,
    Hold,
    Observation,
    PickAnchor,
    PlanMotion,
    PlannedMotion,
    RunConfig,
    RunMode,
    RunSpec,
    SamplingRun,
)
from .sequence import Capture, Estimate, Move, PhaseTimings, SequenceConfig

NOT_FAULTS = ("refused", "cancelled")
"""Outcomes that are no fault: a refusal (nothing moved) and the user's ~/cancel: WARN, not ERROR."""

MONITOR_STATUS_AGE = 3.0
"""s (wall clock): a collision_monitor/status older than this does not count (the monitor publishes at 1 Hz)."""

PHASES = {"waiting": "waiting for joint_states, the estimator and the collision monitor",
          "clear_first": "waiting for the collision monitor to clear the grasp before returning to the pick "
                         "configuration of the aborted run",
          "return_first": "returning to the pick configuration of the aborted run",
          "startup": "waiting for the arm to rest at the pick configuration",
          "rest": "waiting for the arm to rest at the pick configuration", "planning": "planning the motion",
          "abort_return": "aborted, returning to the pick configuration"}
"""Status words for the run's phases outside its pose or excitation sequence."""

REQUESTS = {"~/sample": None, "~/sweep": RunMode.SWEEP, "~/record_reference": RunMode.RECORD_REFERENCE}
"""The services that start a run and their mode (``~/sample``: by the ``mode`` parameter, :func:`sample_mode`)."""

ESTIMATOR_SERVICES = {RunMode.STATIC: ("capture", "estimate"), RunMode.SWEEP: ("capture_calibration", "calibrate"),
                      RunMode.DYNAMIC: ("start_recording", "estimate_motion"),
                      RunMode.RECORD_REFERENCE: ("start_recording", "store_reference")}
"""payload_estimator's (capture or record, estimate) services of each run mode (a mode may change while
planning: a dynamic run that falls back to the static poses)."""
ESTIMATOR_CALLS = tuple(sorted({"clear_captures", *(n for pair in ESTIMATOR_SERVICES.values() for n in pair)}))
"""Every payload_estimator service the sampler calls."""

TICK_PERIOD = 0.05
"""s; steady-clock tick of a run (stream loss, timeouts) between joint_states samples."""


AUTO_STREAM_TIMEOUT = 0.5
"""s: a run's stream timeout when ``joint_state_timeout`` is 0 (automatic) and nothing measured it (a bare run, a
bench): stream.watchdog.AUTO_MIN (test_sampler checks; the node passes the one its watchdog uses)."""


RETRIED = ("~/record_reference", "~/sweep")
"""Requests whose run is tried once more by itself after a real gap in joint_states (:func:`stream_fault`): the
reference run and the calibration sweep move the unloaded arm within their envelope and keep nothing until they
succeed (the load test's sweep aborted on a 0.52 s gap while sim_node fell 0.81 s behind real time). A ``~/sample``
carries a payload: its caller decides (the demo tries once more)."""

STREAM_FAULT = re.compile(r"the stream has an? \d+ ms gap|joint_states lost for [\d.]+ s")
"""What an answer says when the run failed for a gap in joint_states: the estimator refusing a recording with a gap
(``payload.dynamic.check_recording``), the run's watchdog (``sampling_run``: code ``stream_lost``) or the collision
monitor's status quoted in a ``monitor_lost`` abort ('not monitoring: joint_states lost for 0.62 s ...')."""

RETRIED_NOTE = "tried once more by itself"
"""In an answer whose run was retried: a caller does not retry it again."""


def stream_fault(text: str) -> str:
    """The words of an answer ``text`` that say its run failed for a real gap in joint_states ("": it did not)."""
    m = STREAM_FAULT.search(text)
    return "" if m is None else m.group(0)


def retry_reason(request: str, fin: Finished, attempt: int) -> str:
    """Why the run of ``request`` that ended with ``fin`` on its ``attempt`` (1: the first) is tried once more by
    itself ("": it is not): a request of :data:`RETRIED` whose first attempt failed for a gap in the stream (lost,
    code ``stream_lost``; a recording the estimator refused for a gap, code ``estimate_rejected``; the collision
    monitor blind because joint_states were lost to it, code ``monitor_lost`` with its words). Any other failure is
    the answer: a collision, a cancel, an arm that did not rest, a monitor that went silent are not the stream's."""
    if fin.ok or attempt > 1 or request not in RETRIED or fin.code not in ("stream_lost", "estimate_rejected",
                                                                          "monitor_lost"):
        return ""
    return stream_fault(fin.text)


def retried(first: Finished, second: Finished) -> Finished:
    """The answer of a run tried twice: the second attempt's outcome, saying what ended the first."""
    return replace(second, text=f"{second.text} [{RETRIED_NOTE}: the first attempt failed: {first.text}]")


class SamplerRefused(PayloadEstimationError):
    """The sampler refuses a request in its present state (the message says why and what to do)."""


@dataclass(frozen=True)
class SamplerConfig:
    """The payload_sampler's settings, named and in the units of its parameters (deg, s, fractions of the velocity
    limits). The defaults are the node's: its parameter table (ros/sampler_params.py) takes them from here, the
    shared ``joint_state_timeout`` row must equal this one (test_sampler checks), so a bare run or a bench that
    builds ``SamplerConfig()`` runs the node's defaults. The static poses: ``n_poses`` (paper: 10) within
    ±``amplitude_deg`` (paper: 7°), ``limit_margin_deg`` from the position limits, moves at ``velocity_scale``
    taking at least ``min_duration`` (their home: :class:`.poses.MoveTiming`); arrival within
    ``arrival_tolerance_deg`` per joint at most ``arrival_timeout`` beyond the planned duration; ``dwell``: longest
    wait for a static sample at a pose; ``capture_period``: shortest time between capture requests; start-up and
    supervision: ``pick_rest_timeout``, ``monitor_fit_delay``, ``collision_clear_timeout``, ``joint_state_timeout``
    (wall), ``service_timeout`` (wall), ``monitor_timeout`` (wall), ``require_monitor``; ``~/sweep``:
    ``sweep_poses``, ``sweep_amplitude_deg``, ``sweep_velocity_scale``; ``mode`` of ``~/sample`` (auto, static,
    dynamic); the dynamic excitation: ``excitation_duration``, ``excitation_harmonics``,
    ``excitation_velocity_scale``, ``excitation_max_acceleration`` (rad/s²)."""

    n_poses: int = 10
    amplitude_deg: float = 7.0
    limit_margin_deg: float = 1.0
    velocity_scale: float = MoveTiming.velocity_scale
    min_duration: float = MoveTiming.min_duration
    arrival_tolerance_deg: float = 0.5
    arrival_timeout: float = 2.0
    dwell: float = 1.0
    pick_rest_timeout: float = 3.0
    capture_period: float = 0.005
    monitor_fit_delay: float = 0.1
    service_timeout: float = 3.0
    collision_clear_timeout: float = 1.0
    require_monitor: bool = True
    sweep_poses: int = 30
    sweep_amplitude_deg: float = 25.0
    sweep_velocity_scale: float = 0.5
    mode: str = "auto"
    excitation_duration: float = 1.6
    excitation_harmonics: int = 5
    excitation_velocity_scale: float = 0.8
    excitation_max_acceleration: float = 25.0
    monitor_timeout: float = 10.0
    joint_state_timeout: float = 0.0  # 0: the node's automatic one (the stream's rate), AUTO_STREAM_TIMEOUT without

    def pose_plan(self, sweep: bool = False) -> PosePlanConfig:
        """The static poses' plan (``sweep``: the ``~/sweep`` poses)."""
        return PosePlanConfig(n_poses=self.sweep_poses if sweep else self.n_poses,
                              amplitude_deg=self.sweep_amplitude_deg if sweep else self.amplitude_deg,
                              limit_margin_deg=self.limit_margin_deg,
                              velocity_scale=self.sweep_velocity_scale if sweep else self.velocity_scale,
                              min_duration=self.min_duration,
                              max_candidates=1000 if sweep else PosePlanConfig.max_candidates)

    def sequence(self, sweep: bool = False) -> SequenceConfig:
        """The pose sequence's timing (``sweep``: at the sweep's speed)."""
        return SequenceConfig(velocity_scale=self.sweep_velocity_scale if sweep else self.velocity_scale,
                              min_duration=self.min_duration,
                              arrival_tolerance=float(np.radians(self.arrival_tolerance_deg)),
                              arrival_timeout=self.arrival_timeout, dwell=self.dwell,
                              capture_period=self.capture_period,
                              clear_timeout=self.collision_clear_timeout + self.monitor_fit_delay)

    def run_config(self) -> RunConfig:
        """A run's start-up and supervision timing."""
        return RunConfig(pick_rest_timeout=self.pick_rest_timeout, monitor_fit_delay=self.monitor_fit_delay,
                         joint_state_timeout=self.joint_state_timeout or AUTO_STREAM_TIMEOUT,
                         service_timeout=self.service_timeout,
                         start_tolerance=float(np.radians(self.arrival_tolerance_deg)),
                         monitor_timeout=self.monitor_timeout)

    def excitation(self) -> ExcitationPlanConfig:
        """The dynamic excitation's plan, within the static poses' envelope."""
        return ExcitationPlanConfig(duration=self.excitation_duration, amplitude_deg=self.amplitude_deg,
                                    limit_margin_deg=self.limit_margin_deg,
                                    velocity_scale=self.excitation_velocity_scale,
                                    max_acceleration=self.excitation_max_acceleration,
                                    harmonics=self.excitation_harmonics)


def run_spec(cfg: SamplerConfig, mode: RunMode, reference_plan: ExcitationPlan | None = None) -> RunSpec:
    """The configuration of a ``mode`` run with the settings ``cfg``: SWEEP takes the ``sweep_*`` values,
    DYNAMIC and RECORD_REFERENCE the ``excitation_*`` values."""
    sweep = mode is RunMode.SWEEP
    return RunSpec(mode, cfg.pose_plan(sweep), cfg.sequence(sweep), cfg.run_config(),
                   cfg.excitation() if mode.excites else None, reference_plan)


def sample_mode(setting: str, reference_plan: ExcitationPlan | None, q: np.ndarray | None,
                tolerance: float) -> tuple[RunMode, ExcitationPlan | None, str]:
    """The mode of a ``~/sample`` run for the ``mode`` parameter (``auto``, ``static`` or ``dynamic``):
    (mode, the reference run's plan to repeat or None, what the run does, for the log). The reference
    counts where it was recorded within ``tolerance`` (rad, per joint) of the arm's ``q`` (rad)."""
    near = (reference_plan is not None and q is not None
            and float(np.max(np.abs(q - reference_plan.envelope.q0))) <= tolerance)
    if setting == "static" or (setting == "auto" and not near):
        return RunMode.STATIC, None, "static"
    if near:
        return RunMode.DYNAMIC, reference_plan, "dynamic, differential against the reference run"
    return RunMode.DYNAMIC, None, "dynamic, no reference run at this pick configuration: one-shot against the model"


def compute_plan(job: PlanMotion) -> tuple[PlannedMotion, str]:
    """``job.compute()`` (on any thread) and "", or for an unexpected exception (a bug) a failed plan that
    ends the run, with the traceback to log."""
    try:
        return job.compute(), ""
    except Exception as e:  # noqa: BLE001 - a planning bug must end the run, not leave it planning
        return PlannedMotion(None, error=f"planning failed unexpectedly ({type(e).__name__}: {e}); the arm was not "
                             "moved. Please report this with the sampler's log"), traceback.format_exc()


class PlanWorker:
    """Motion planning off the caller's thread, one job at a time: :meth:`submit` computes a run's
    :class:`.sampling_run.PlanMotion` on a worker thread and calls ``notify()`` from there when its result
    waits; :meth:`take` hands the results over on the caller's thread."""

    def __init__(self, notify: Callable[[], None]):
        self._notify = notify
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="payload_sampler_planning")
        self._lock = threading.Lock()
        self._results: list[tuple[SamplingRun | None, PlannedMotion, str]] = []

    def submit(self, run: SamplingRun | None, job: PlanMotion) -> None:
        """Compute ``job`` for ``run`` (:func:`compute_plan`: a planning bug gives a failed plan)."""
        def work() -> None:
            res, trace = compute_plan(job)
            with self._lock:
                self._results.append((run, res, trace))
            self._notify()

        self._pool.submit(work)

    def take(self, current: SamplingRun | None) -> list[tuple[PlannedMotion | None, str]]:
        """The finished plans: (the plan, or None for a run other than ``current``, which ended meanwhile;
        the traceback of a planning bug or "")."""
        with self._lock:
            results, self._results = self._results, []
        return [(res if run is current and run is not None else None, trace) for run, res, trace in results]

    def shutdown(self) -> None:
        """Wait for a job in progress, drop those waiting: no ``notify()`` after this returns."""
        self._pool.shutdown(wait=True, cancel_futures=True)


def plan_note(res: PlannedMotion) -> str:
    """What the planning did (for the log)."""
    return (f"motion planned in {res.seconds:.2f} s" if res.plan is not None else
            f"motion planning failed after {res.seconds:.2f} s: {res.error}")


def commanded_points(act: Move | Hold | Excite) -> list[tuple[float, np.ndarray, np.ndarray | None]]:
    """The trajectory to command for ``act``: [(time from now s, q rad, dq rad/s or None: 0 at the end)]; an
    excitation's points after its start (the arm is there)."""
    if isinstance(act, Excite):
        return [p for p in act.points if p[0] > 0]
    return [(act.duration, act.target, None)]


def request_kind(act) -> str:
    """The estimator request an action asks for: "capture", "record", "estimate", or "" (none)."""
    return ("capture" if isinstance(act, Capture) else "record" if isinstance(act, Record) else
            "estimate" if isinstance(act, Estimate) else "")


def stream_stale(age: float | None, timeout: float) -> bool:
    """joint_states count as lost: none yet (``age`` None) or the newest older than ``timeout`` (wall s)."""
    return age is None or age > timeout


def capture_note(run: SamplingRun, message: str) -> str:
    """A capture the estimator took at the current pose of ``run``'s sequence, with its answer (for the log)."""
    return f"pose {run.sequence.pose + 1}/{run.sequence.n}: {message}"


def answer_text(fin: Finished) -> str:
    """The service answer for the outcome ``fin``."""
    return fin.text if fin.ok or fin.code in NOT_FAULTS else f"aborted: {fin.text}"


def outcome_level(fin: Finished) -> int:
    """OK for a run that succeeded, WARN for one the user cancelled or that was refused (nothing moved),
    ERROR for a fault."""
    return OK if fin.ok else WARN if fin.code in NOT_FAULTS else ERROR


def estimate_note(mode: RunMode) -> str:
    """What the run does once its motion is done and the estimator was asked (for the log)."""
    if mode.excites:
        return "excitation done; " + ("storing the reference run" if mode is RunMode.RECORD_REFERENCE else "estimating")
    return (f"all poses captured; {'calibrating' if mode is RunMode.SWEEP else 'estimating'} while returning to the "
            "pick configuration")


def _deg(q: np.ndarray, decimals: int) -> str:
    return str(np.round(np.degrees(q), decimals).tolist())


class Sampler:
    """The payload_sampler without ROS: at most one :class:`SamplingRun` at a time and what outlives it."""

    def __init__(self):
        self.run: SamplingRun | None = None
        self.anchor: PickAnchor | None = None  # the pick configuration of the last aborted run
        self.reference_plan: ExcitationPlan | None = None  # the excitation of the last ~/record_reference
        self.last: Finished | None = None
        self.last_q0: np.ndarray | None = None  # rad, pick configuration of the last run
        self.last_timings: PhaseTimings | None = None
        self.last_duration: float | None = None  # s, node clock (None: it went back during the run)
        self.last_wall_duration: float | None = None
        self.last_reference_duration: float | None = None  # s, node clock
        self.q: np.ndarray | None = None  # rad, rad/s: the newest joint state
        self.dq: np.ndarray | None = None
        self.settle = SettleConfig()
        self.joint_names: tuple[str, ...] = ()
        self.window = SampleWindow(horizon=1.0)
        self._static_cache: tuple[float | None, bool] = (None, False)
        self.collision = False
        self.collisions = 0  # rising edges of the monitor's flag
        self.cancel_requested = False
        self._monitor: tuple[bool, float] | None = None  # (reports ERROR, wall time received)
        self._monitor_says = ""  # the monitor's status message while it reports ERROR
        self._t_request = (0.0, 0.0)

    # ------------------------------------------------------------------ inputs
    def configure(self, settle: SettleConfig, joint_names: tuple[str, ...] | None = None, new_window: bool = True
                  ) -> None:
        """The static pre-check's ``settle`` values (those of the estimator) from now on, with a new window
        when ``new_window`` (not during a run: it would lose the run's history)."""
        self.settle = settle
        self.joint_names = self.joint_names if joint_names is None else tuple(joint_names)
        if new_window:  # longer than max_window: a history shorter than max_window reads as "collecting samples"
            self.window = SampleWindow(horizon=max(1.5 * settle.window, 1.25 * settle.max_window))
            self._static_cache = (None, False)

    def joint_state(self, t: float, q: np.ndarray, dq: np.ndarray | None, tau: np.ndarray | None,
                    restart: bool = False) -> None:
        """A joint_states sample at ``t`` (the stream's time, s); ``restart``: the stream started over."""
        if restart:
            self.window.clear()
        self.q, self.dq = q, dq
        self.window.append(t, q, dq, tau)

    def static(self) -> bool:
        """The static pre-check on the recent window, evaluated once per new sample."""
        last = self.window.last_time
        if last is not None and self._static_cache[0] == last:
            return self._static_cache[1]
        t, q, dq, tau = self.window.arrays()
        static = check_static(t, q, dq, tau, self.settle, self.joint_names).static
        self._static_cache = (last, static)
        return static

    def collision_flag(self, flag: bool) -> None:
        """The collision monitor's flag now."""
        if flag and not self.collision:
            self.collisions += 1
        self.collision = bool(flag)

    def monitor_status(self, error: bool, wall: float, message: str = "") -> None:
        """A collision_monitor/status arrived at ``wall``; ``error``: its level is ERROR (or worse); ``message``: its
        text (an abort for a monitor that stopped monitoring says it)."""
        self._monitor = (error, wall)
        self._monitor_says = message if error else ""

    def monitor_ready(self, required: bool, wall: float) -> bool:
        """The collision monitor is monitoring (a status below ERROR, newer than MONITOR_STATUS_AGE), or it
        is not ``required``."""
        st = self._monitor
        return not required or (st is not None and not st[0] and wall - st[1] <= MONITOR_STATUS_AGE)

    def observation(self, t: float, wall: float, stream_age: float | None, estimator_ready: bool,
                    monitor_required: bool) -> Observation:
        """What the run sees now: the inputs kept here and the node's ``stream_age`` (wall s since the newest
        joint_states, None: none yet) and whether the estimator's services are available."""
        run = self.run
        static = bool(run is not None and run.wants_static and self.q is not None and self.static())
        return Observation(t=t, wall=wall, q=self.q, dq=self.dq, static=static, stream_age=stream_age,
                           collision=self.collision, collisions=self.collisions, cancel=self.cancel_requested,
                           estimator_ready=estimator_ready, monitor_ready=self.monitor_ready(monitor_required, wall),
                           monitor_says=self._monitor_says)

    # ------------------------------------------------------------------ services
    def start(self, request: str, cfg: SamplerConfig, dyn: RigidBodyDynamics | None, model_error: str,
              t: float, wall: float) -> tuple[SamplingRun, str]:
        """Start the run of ``request`` (a key of :data:`REQUESTS`) with the settings ``cfg``: (the run,
        what it does, for the log). Raises :class:`SamplerRefused` while a run is in progress or without a
        robot model (``model_error`` says why)."""
        if self.run is not None:
            raise SamplerRefused("rejected: a sampling run is already in progress (call ~/cancel to stop it)")
        if dyn is None:
            raise SamplerRefused(f"rejected: no robot model ({model_error})")
        mode, reference_plan = REQUESTS[request], None
        if mode is None:
            mode, reference_plan, how = sample_mode(cfg.mode, self.reference_plan, self.q,
                                                    float(np.radians(cfg.arrival_tolerance_deg)))
        else:
            how = "sweep" if mode is RunMode.SWEEP else "reference run"
        spec = run_spec(cfg, mode, reference_plan)
        self.cancel_requested = False
        self._t_request = (t, wall)
        self.run = SamplingRun(dyn, spec, t, wall, self.anchor, self.joint_names or None)
        return self.run, how

    def cancel(self) -> tuple[bool, str]:
        """``~/cancel``: the run stops at its next update: (True, the answer); :class:`SamplerRefused` when idle."""
        if self.run is None:
            raise SamplerRefused("nothing to cancel: the sampler is idle")
        self.cancel_requested = True
        return True, ("cancel requested: the run stops (an arm that left the pick configuration is moved back "
                      "there); its ~/sample call answers with where the arm is")

    def forget_pick(self) -> tuple[bool, str]:
        """``~/forget_pick``: (an anchor was dropped, the answer); :class:`SamplerRefused` during a run."""
        if self.run is not None:
            raise SamplerRefused("rejected: a sampling run is in progress (call ~/cancel first)")
        if self.anchor is None:
            return False, "no pick configuration was kept: the next ~/sample samples around the current pose"
        q0, self.anchor = _deg(self.anchor.q0, 2), None
        return True, f"forgot the pick configuration {q0} deg of the aborted run: the next ~/sample samples around " \
                     "the arm's current pose"

    def finish(self, fin: Finished, t: float, wall: float) -> Finished:
        """The run ended with ``fin`` at ``t``, ``wall``: keep what the next run needs (its anchor; the plan
        of a reference run that succeeded), its outcome and timing; the outcome with the timing appended."""
        run, self.run = self.run, None
        self.last = fin
        t_request, wall_request = self._t_request
        if run.reference and fin.ok:
            self.reference_plan = run.excitation_plan
            self.last_reference_duration = t - t_request
        self.last_q0 = None if run.q0 is None else run.q0.copy()
        self.anchor = fin.anchor
        self.last_timings = run.timings if run.sequence is not None else None
        elapsed = t - t_request
        self.last_duration = elapsed if elapsed >= 0 else None  # the node clock went back (a restart)
        self.last_wall_duration = wall - wall_request
        node_clock = (f"{elapsed:.2f} s node-clock time" if elapsed >= 0 else
                      "node-clock time unknown: the clock went back")
        timing = (f" (took {node_clock}, {self.last_wall_duration:.2f} s wall"
                  + (f"; {self.last_timings.summary()})" if self.last_timings else ")"))
        return replace(fin, text=fin.text + timing)

    # ------------------------------------------------------------------ status
    def status(self, model_error: str | None, stream_lost: bool, mode: str) -> tuple[int, str, dict]:
        """(level, message, values) of ``~/status``; ``model_error``: why there is no robot model (None: there
        is one); ``stream_lost``: joint_states are lost; ``mode``: the ``mode`` parameter. ERROR only while a
        fault persists (no robot model); the last run's abort, a past fault, is WARN with its reason while idle
        (``last_outcome`` says which); the next run that succeeds makes it OK."""
        run, res = self.run, self.last
        if model_error is not None:
            level, text = ERROR, model_error
        elif run is not None:
            seq = run.sequence
            where = seq.progress if seq is not None and run.phase == "sequence" else PHASES.get(run.phase, run.phase)
            level, text = OK, f"sampling: {where}"
        elif stream_lost:
            level, text = WARN, "joint_states lost: cannot sample (check the robot driver)"
        elif res is not None and not res.ok:  # a past fault: WARN with its reason (ERROR only while one persists)
            level, text = WARN, f"aborted: {res.text}" if outcome_level(res) == ERROR else res.text
        else:
            level, text = OK, "idle" if res is None else f"done: {res.text}"
        ref = self.reference_plan
        vals = {"busy": run is not None, "phase": "idle" if run is None else run.phase,
                "last_outcome": "" if res is None else res.code,
                "last_pick_configuration_deg": "" if self.last_q0 is None else _deg(self.last_q0, 4),
                "pick_anchor_deg": "" if self.anchor is None else _deg(self.anchor.q0, 3),
                "last_ok": "" if res is None else res.ok,
                "last_duration_s": self.last_duration, "last_wall_duration_s": self.last_wall_duration,
                "mode": mode, "reference_run_s": self.last_reference_duration,
                "reference_pick_configuration_deg": "" if ref is None else _deg(ref.envelope.q0, 3),
                "excitation_scale": "" if ref is None else f"{ref.scale:.2f}"}
        if self.last_timings is not None:  # a phase the run did not reach is empty, not "nan"
            vals.update({k: "" if isinstance(v, float) and not np.isfinite(v) else v
                         for k, v in self.last_timings.as_dict().items()})
        return level, text, vals


__all__ = ["Sampler", "SamplerConfig", "SamplerRefused", "run_spec", "sample_mode", "compute_plan", "answer_text",
           "outcome_level", "estimate_note", "PlanWorker", "plan_note", "capture_note", "stream_stale",
           "commanded_points", "request_kind", "ESTIMATOR_SERVICES", "ESTIMATOR_CALLS", "TICK_PERIOD", "REQUESTS",
           "NOT_FAULTS", "MONITOR_STATUS_AGE", "OK", "WARN", "ERROR", "AUTO_STREAM_TIMEOUT", "RETRIED",
           "RETRIED_NOTE", "stream_fault", "retry_reason", "retried"]
