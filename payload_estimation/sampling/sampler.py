"""The ``payload_sampler`` node's core: which run a request starts, what outlives a run, what is reported.

:class:`Sampler` holds what is kept between :class:`.sampling_run.SamplingRun` s — the pick anchor of
an aborted run, the reference run's excitation, the last outcome and its timing — and the inputs a run
observes that arrive as events (the collision monitor's flag and status, ``~/cancel``). It answers the
node's services (``~/sample``, ``~/sweep``, ``~/record_reference``, ``~/cancel``, ``~/forget_pick``)
and makes its status; the node turns messages into these calls and the answers into messages.
:func:`run_spec` maps the node's parameter values to the configuration of a run.
Times: ``t`` is the node clock (s), ``wall`` a monotonic clock (s), as in :class:`.sampling_run.Observation`.
"""

from __future__ import annotations

import traceback
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

import numpy as np

from ..errors import PayloadEstimationError
from ..model.dynamics import RigidBodyDynamics
from ..signals.settle import SampleWindow, SettleConfig, check_static
from .payload_excitation import ExcitationPlan, ExcitationPlanConfig
from .poses import PosePlanConfig
from .sampling_run import (
    Finished,
    Observation,
    PickAnchor,
    PlanMotion,
    PlannedMotion,
    RunConfig,
    RunMode,
    RunSpec,
    SamplingRun,
)
from .sequence import PhaseTimings, SequenceConfig

OK, WARN, ERROR = 0, 1, 2
"""Status levels (those of diagnostic_msgs/DiagnosticStatus)."""

NOT_FAULTS = ("refused", "cancelled")
"""Outcomes that are no fault: a refusal (nothing moved) and the user's ~/cancel: WARN, not ERROR."""

MONITOR_STATUS_AGE = 3.0
"""s (wall clock): a collision_monitor/status older than this does not count (the monitor publishes at 1 Hz)."""

PHASES = {"waiting": "waiting for joint_states, the estimator and the collision monitor",
          "return_first": "returning to the pick configuration of the aborted run",
          "startup": "waiting for the arm to rest at the pick configuration",
          "rest": "waiting for the arm to rest at the pick configuration", "planning": "planning the motion",
          "abort_return": "aborted, returning to the pick configuration"}
"""Status words for the run's phases outside its pose or excitation sequence."""

REQUESTS = {"~/sample": None, "~/sweep": RunMode.SWEEP, "~/record_reference": RunMode.RECORD_REFERENCE}
"""The services that start a run and their mode (``~/sample``: by the ``mode`` parameter, :func:`sample_mode`)."""


class SamplerRefused(PayloadEstimationError):
    """The sampler refuses a request in its present state (the message says why and what to do)."""


def run_spec(values: Mapping[str, Any], mode: RunMode, reference_plan: ExcitationPlan | None = None) -> RunSpec:
    """The configuration of a ``mode`` run from the payload_sampler's parameter values (by the names and
    units of its parameter table: deg, s, fractions). SWEEP takes ``sweep_poses``, ``sweep_amplitude_deg``
    and ``sweep_velocity_scale``; DYNAMIC and RECORD_REFERENCE the ``excitation_*`` values."""
    v = values
    sweep = mode is RunMode.SWEEP
    plan = PosePlanConfig(n_poses=int(v["sweep_poses" if sweep else "n_poses"]),
                          amplitude_deg=float(v["sweep_amplitude_deg" if sweep else "amplitude_deg"]),
                          limit_margin_deg=float(v["limit_margin_deg"]),
                          velocity_scale=float(v["sweep_velocity_scale" if sweep else "velocity_scale"]),
                          min_duration=float(v["min_duration"]),
                          max_candidates=1000 if sweep else PosePlanConfig.max_candidates)
    seq = SequenceConfig(velocity_scale=plan.velocity_scale, min_duration=plan.min_duration,
                         arrival_tolerance=float(np.radians(v["arrival_tolerance_deg"])),
                         arrival_timeout=float(v["arrival_timeout"]), dwell=float(v["dwell"]),
                         retry_period=float(v["capture_period"]),
                         clear_timeout=float(v["collision_clear_timeout"]) + float(v["monitor_fit_delay"]))
    run = RunConfig(pick_rest_timeout=float(v["pick_rest_timeout"]), monitor_fit_delay=float(v["monitor_fit_delay"]),
                    stream_timeout=float(v["joint_state_timeout"]), service_timeout=float(v["service_timeout"]),
                    start_tolerance=float(np.radians(v["arrival_tolerance_deg"])),
                    monitor_timeout=float(v["monitor_timeout"]))
    excitation = None
    if mode.excites:
        excitation = ExcitationPlanConfig(duration=float(v["excitation_duration"]),
                                          amplitude_deg=float(v["amplitude_deg"]),
                                          limit_margin_deg=float(v["limit_margin_deg"]),
                                          velocity_scale=float(v["excitation_velocity_scale"]),
                                          max_acceleration=float(v["excitation_max_acceleration"]),
                                          harmonics=int(v["excitation_harmonics"]))
    return RunSpec(mode, plan, seq, run, excitation, reference_plan)


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

    def monitor_status(self, error: bool, wall: float) -> None:
        """A collision_monitor/status arrived at ``wall``; ``error``: its level is ERROR (or worse)."""
        self._monitor = (error, wall)

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
                           estimator_ready=estimator_ready, monitor_ready=self.monitor_ready(monitor_required, wall))

    # ------------------------------------------------------------------ services
    def start(self, request: str, values: Mapping[str, Any], dyn: RigidBodyDynamics | None, model_error: str,
              t: float, wall: float) -> tuple[SamplingRun, str]:
        """Start the run of ``request`` (a key of :data:`REQUESTS`) with the parameter ``values``: (the run,
        what it does, for the log). Raises :class:`SamplerRefused` while a run is in progress or without a
        robot model (``model_error`` says why)."""
        if self.run is not None:
            raise SamplerRefused("rejected: a sampling run is already in progress (call ~/cancel to stop it)")
        if dyn is None:
            raise SamplerRefused(f"rejected: no robot model ({model_error})")
        mode, reference_plan = REQUESTS[request], None
        if mode is None:
            mode, reference_plan, how = sample_mode(values["mode"], self.reference_plan, self.q,
                                                    float(np.radians(values["arrival_tolerance_deg"])))
        else:
            how = "sweep" if mode is RunMode.SWEEP else "reference run"
        spec = run_spec(values, mode, reference_plan)
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
        is one); ``stream_lost``: joint_states are lost; ``mode``: the ``mode`` parameter."""
        run, res = self.run, self.last
        if model_error is not None:
            level, text = ERROR, model_error
        elif run is not None:
            seq = run.sequence
            where = seq.progress if seq is not None and run.phase == "sequence" else PHASES.get(run.phase, run.phase)
            level, text = OK, f"sampling: {where}"
        elif stream_lost:
            level, text = WARN, "joint_states lost: cannot sample (check the robot driver)"
        elif res is not None and not res.ok:
            level = outcome_level(res)
            text = f"aborted: {res.text}" if level == ERROR else res.text
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


__all__ = ["Sampler", "SamplerRefused", "run_spec", "sample_mode", "compute_plan", "answer_text", "outcome_level",
           "estimate_note", "REQUESTS", "NOT_FAULTS", "MONITOR_STATUS_AGE", "OK", "WARN", "ERROR"]
