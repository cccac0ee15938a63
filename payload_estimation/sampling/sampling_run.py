"""One sampling run around the user's pick configuration: start-up, the pose program, every abort.

:class:`SamplingRun` is what the ``payload_sampler`` node does between a ``~/sample`` request and
its answer, without ROS: the node feeds it an :class:`Observation` (clock, joint state, whether the
arm reads static, the collision monitor's flag, answers of the estimator) and carries out the
actions it returns (publish ``active``, a move or a hold, ask the estimator for a capture, an
estimate, to clear captures) until :class:`Finished`.

Motion stays bounded by the pick configuration q0:

- q0 is where ``~/sample`` was called on a robot at rest. A run that fails hands its q0 on (the
  :class:`PickAnchor`): the next run refuses to start anywhere but inside the envelope of that q0 (made
  from the settings of the new run: a changed ``amplitude_deg`` applies),
  returns to the anchored q0 first if the arm is elsewhere (with a collision reported, e.g. the monitor's
  stop after an unannounced grasp, it raises ``active`` and commands nothing until the monitor has cleared
  it; a collision that does not clear ends the run with nothing moved), and samples around it — never
  around a perturbed pose. An arm already at the anchored q0 needs no return: the run starts there as a
  fresh one does (a collision reported then is the grasp, see the gate). A successful run (or
  ``~/forget_pick``) drops the anchor.
- Every commanded point passes :func:`.poses.checked_move` against the envelope of q0 (±amplitude,
  joint limits with their margin, velocity limits); holds are clipped to the envelope.
- Every abort ends with the arm commanded back to q0 when that is safe (fresh joint_states, no
  collision reported, a checked move) — on cancel, a pose not reached, no static sample, the
  estimator failing — and otherwise holding: after a collision the monitor holds the arm (this run
  commands nothing), after a lost stream the run holds at the last known position. The answer says
  where the arm is and why; the anchor makes the next run return first.

Start-up: ``active`` is raised at once (the collision monitor fits its provisional payload from the
residual at rest), the arm must be at rest at q0 within ``pick_rest_timeout``, then the motion (pose set
or excitation) is planned. Planning takes up to about a second of CPU: the run hands it out as a
:class:`PlanMotion` action for the caller to compute away from the thread that handles joint_states and
the stream watchdog (the node: a worker thread; a plain loop: inline), and waits in phase ``planning``
for :meth:`SamplingRun.planned`, supervising as ever (stream, monitor, collision, cancel): planning
time never reads as a lost stream, and ``~/cancel`` ends a run that is still planning. The collision
gate: a collision reported before the arm came to rest at q0 is the grasp, not a collision of this
run; once that flag has cleared, any collision aborts the run. The first move waits until the gate
is armed and ``monitor_fit_delay`` s have passed since ``active``.
Times: ``t`` is the node clock (robot time, sim time under ``use_sim_time``), ``wall`` a monotonic
clock for stream loss and service answers (a stopped simulator stops ``t`` too).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from ..errors import PayloadEstimationError
from ..model.description import RobotDescription
from ..node_limits import MAX_PAYLOAD
from .excitation_sequence import REFERENCE_TAIL, TAIL, ExcitationSequence, Excite, Record
from .payload_excitation import ExcitationPlan, ExcitationPlanConfig, unknown_payload_floor
from .pick_return import PickReturn
from .poses import Envelope, MotionLimitError, PosePlan, PosePlanConfig, make_envelope, stop_point
from .run_planning import PlanMotion, PlannedMotion
from .run_requests import EstimatorRequests
from .run_states import TRANSITIONS, Ending, Outcome, Phase, RunMode, check_transition
from .run_supervision import CLOCK_BACK_TOLERANCE, CollisionGate, Fault, StreamClock
from .sequence import (
    Capture,
    Done,
    Estimate,
    Move,
    PhaseTimings,
    SamplingSequence,
    SequenceAborted,
    SequenceConfig,
    Wait,
)

GRASP_ADVICE = ("If it is the grasp (the object's weight read as a contact), announce it: call "
                "payload_estimator/grasped, then ~/sample again; otherwise check that nothing touches the arm")
"""What to do when the collision monitor keeps reporting a collision at the pick configuration."""

CANCELLED = "cancelled by the user (~/cancel)"
"""The reason of a run ended by ``~/cancel``: what the user asked for, not a fault."""


class RunRefused(PayloadEstimationError):
    """The run cannot start (the message says why and what to do); nothing was commanded."""


@dataclass(frozen=True)
class RunConfig:
    """Start-up, gate and supervision timing of a run (s).

    pick_rest_timeout: max wait for rest at q0 (node clock); monitor_fit_delay: min time from
    ``active`` to the first move; joint_state_timeout: wall s without joint_states that abort the run (the node's
    parameter, its automatic 0 resolved: > 0 here);
    service_timeout: wall s the estimator may take to answer; start_tolerance: rad the arm may move
    between the request and rest at q0 (more means it was not at rest where it was asked);
    mass_limit (kg) and unknown_payload_torque (N m): while the poses captured so far leave the payload
    mass or CoM uncertain (:func:`collision.provisional.payload_gravity_posterior`, the mass at most
    mass_limit), moves are slowed so that 3 sigma of its inertial torque stays below unknown_payload_torque;
    monitor_timeout: wall s a run waits for the collision monitor to be monitoring before it refuses;
    clock_timeout: wall s the node clock may stand still while joint_states keep arriving (every wait of
    the run is on the node clock: a /clock that stopped would stall it silently) before the run aborts; a
    stream gap or a starved process (no observation for joint_state_timeout) does not count.
    """

    pick_rest_timeout: float = 3.0
    monitor_fit_delay: float = 0.1
    joint_state_timeout: float = 0.5
    service_timeout: float = 3.0
    start_tolerance: float = float(np.radians(0.5))
    mass_limit: float = MAX_PAYLOAD
    unknown_payload_torque: float = 3.0
    monitor_timeout: float = 10.0
    clock_timeout: float = 2.0

    def __post_init__(self):
        for k in ("pick_rest_timeout", "joint_state_timeout", "service_timeout", "start_tolerance", "mass_limit",
                  "unknown_payload_torque", "monitor_timeout", "clock_timeout"):
            if not (np.isfinite(getattr(self, k)) and getattr(self, k) > 0):
                raise PayloadEstimationError(f"run {k} must be > 0, got {getattr(self, k)}")
        if not (np.isfinite(self.monitor_fit_delay) and self.monitor_fit_delay >= 0):
            raise PayloadEstimationError(f"run monitor_fit_delay must be >= 0 s, got {self.monitor_fit_delay}")


@dataclass(frozen=True, eq=False)
class RunSpec:
    """What one run does and with which settings: its ``mode``, the pose ``plan`` configuration (the sweep's
    for SWEEP), the ``sequence`` and ``run`` timing, ``excitation`` (the plan configuration of a DYNAMIC or
    RECORD_REFERENCE run, None otherwise) and ``reference_plan`` (DYNAMIC: the reference run's excitation
    to repeat re-centred on q0, so that the estimator fits the difference; None: one-shot against the
    model)."""

    mode: RunMode
    plan: PosePlanConfig
    sequence: SequenceConfig
    run: RunConfig = field(default_factory=RunConfig)
    excitation: ExcitationPlanConfig | None = None
    reference_plan: ExcitationPlan | None = None

    def __post_init__(self):
        if self.mode.excites != (self.excitation is not None):
            raise PayloadEstimationError(f"a {self.mode.value} run {'needs' if self.mode.excites else 'takes no'} "
                                         "excitation configuration")
        if self.reference_plan is not None and self.mode is not RunMode.DYNAMIC:
            raise PayloadEstimationError(f"only a dynamic run repeats a reference plan, not a {self.mode.value} run")


@dataclass(frozen=True)
class PickAnchor:
    """The pick configuration of an aborted run that left the arm elsewhere (rad), its envelope, and why (the
    next run keeps ``q0`` and makes its own envelope around it from its settings)."""

    q0: np.ndarray
    envelope: Envelope
    reason: str


@dataclass(frozen=True)
class Observation:
    """What the node sees at one instant.

    t: node clock (s); wall: monotonic clock (s); q, dq: newest joint state (rad, rad/s; None before
    the first); static: the node's static pre-check on its recent window; stream_age: wall s since
    the newest joint_states (None: none yet); collision: the monitor's flag now; collisions: rising
    edges of that flag seen so far; cancel: ``~/cancel`` was requested; estimator_ready: the
    estimator's services are available; monitor_ready: the collision monitor says it is monitoring (a
    run never moves the arm while the safety function is blind or absent, unless the node opts out);
    monitor_says: the monitor's status message while it reports ERROR ("" otherwise; an abort quotes it).
    """

    t: float
    wall: float
    q: np.ndarray | None
    dq: np.ndarray | None = None
    static: bool = False
    stream_age: float | None = None
    collision: bool = False
    collisions: int = 0
    cancel: bool = False
    estimator_ready: bool = True
    monitor_ready: bool = True
    monitor_says: str = ""


@dataclass(frozen=True)
class SetActive:
    """Publish the sampler's ``active`` flag."""

    active: bool


@dataclass(frozen=True)
class ClearCaptures:
    """Ask the estimator to forget earlier loaded captures (no answer needed)."""


@dataclass(frozen=True)
class Hold:
    """Command a stop at ``target`` (rad) reached in ``duration`` s with zero velocity."""

    target: np.ndarray
    duration: float
    label: str


@dataclass(frozen=True)
class Finished:
    """The run is over: ``ok``, the answer ``text``, the anchor the next run must respect (or None), and
    ``code``, the outcome for programs: ``done``, ``refused``, ``cancelled``, ``collision``, ``stream_lost``,
    ``monitor_lost``, ``not_reached``, ``no_static``, ``estimator_timeout``, ``estimate_rejected``, ``gate``,
    ``rest_timeout``, ``moved_at_start``, ``plan_failed``, ``clock_restart``,
    ``clock_stopped`` or ``motion_limit`` (:class:`.run_states.Outcome`; a word is taken as its Outcome)."""

    ok: bool
    text: str
    anchor: PickAnchor | None = None
    code: Outcome = Outcome.DONE

    def __post_init__(self):
        object.__setattr__(self, "code", Outcome(self.code))

RunAction = SetActive | ClearCaptures | PlanMotion | Move | Hold | Capture | Estimate | Record | Excite | Finished


class SamplingRun:
    """One ``~/sample`` request (see the module docstring): create it when the request arrives, then
    call :meth:`update` with every observation and carry out what it returns.

    The run is a table of phases (:data:`.run_states.TRANSITIONS`) and one handler per phase (:attr:`_HANDLERS`);
    its parts each do one job: :class:`.run_supervision.StreamClock` (clock and stream faults),
    :class:`.run_supervision.CollisionGate` (which collisions are this run's), :class:`.run_requests.EstimatorRequests`
    (the request waiting for the estimator), :class:`.pick_return.PickReturn`
    (moves back to q0), :class:`.run_planning.PlanMotion` (the motion, off the caller's thread) and the
    sequence (:class:`.sequence.SamplingSequence` or :class:`.excitation_sequence.ExcitationSequence`)."""

    def __init__(self, dyn, spec: RunSpec, t: float, wall: float, anchor: PickAnchor | None = None,
                 joint_names: tuple[str, ...] | None = None):
        """``spec``: what the run does (:class:`RunSpec`); ``t``, ``wall``: the request's node-clock and
        monotonic times (s); ``anchor``: the pick configuration of an aborted run to keep.

        A DYNAMIC run whose excitation cannot be made safe here samples the static poses instead: its
        ``mode`` becomes STATIC and ``fallback`` says why."""
        self.dyn = dyn
        self.spec = spec
        self.mode = spec.mode
        self.reference_plan = spec.reference_plan
        self.excitation_plan: ExcitationPlan | None = None
        self.fallback = ""  # why a dynamic run sampled the static poses instead
        self.desc: RobotDescription = dyn.desc
        self.plan_config = spec.plan
        self.seq_config = spec.sequence
        self.cfg = spec.run
        self.names = tuple(joint_names or self.desc.joint_names)
        self.anchor = anchor
        self.q_request: np.ndarray | None = None
        self.q0: np.ndarray | None = None
        self.envelope: Envelope | None = None
        self.timings = PhaseTimings()
        self.plan: PosePlan | None = None
        self.sequence: SamplingSequence | ExcitationSequence | None = None
        self.phase = Phase.WAITING
        self.abort_reason: str | None = None
        self.clock = StreamClock(t, wall, self.cfg.joint_state_timeout, self.cfg.clock_timeout)
        self.gate = CollisionGate()
        self.pick_return = PickReturn(self.desc, self.seq_config, self.names)
        self._t_start, self._wall_start = t, wall
        self._t_active: float | None = None
        self._t_phase = t
        self._t_plan = t
        self._planned: PlannedMotion | None = None
        self.requests = EstimatorRequests(self.cfg.service_timeout)
        self._q_last: np.ndarray | None = None
        self._active_sent = False
        self._abort_code: Outcome | None = None
        self._finished: Finished | None = None

    @property
    def unloaded(self) -> bool:
        """Nothing is grasped (a sweep or a reference run): ``active`` is not raised."""
        return self.mode.unloaded

    @property
    def sweep(self) -> bool:
        return self.mode is RunMode.SWEEP

    @property
    def reference(self) -> bool:
        """The reference run: its recording is stored as the reference instead of estimated."""
        return self.mode is RunMode.RECORD_REFERENCE

    @property
    def excitation(self) -> ExcitationPlanConfig | None:
        """The excitation's plan configuration of a run that excites (None: static poses)."""
        return self.spec.excitation if self.mode.excites else None

    @property
    def wants_static(self) -> bool:
        """True when :meth:`update` looks at ``Observation.static`` (the node may skip the check otherwise)."""
        return self.phase is Phase.REST or (self.phase is Phase.SEQUENCE and self.sequence.wants_static)

    def _go(self, phase: Phase) -> None:
        """Enter ``phase`` (a transition of :data:`.run_states.TRANSITIONS`, else a bug: ``RuntimeError``)."""
        check_transition(self.phase, phase)
        self.phase = phase

    # ------------------------------------------------------------------ start
    def _waiting(self, obs: Observation, out: list[RunAction]) -> None:
        """Wait (``service_timeout`` wall s) for joint_states and the estimator and (``monitor_timeout``)
        for the collision monitor, then fix q0 or refuse."""
        fresh = obs.q is not None and obs.stream_age is not None and obs.stream_age <= self.cfg.joint_state_timeout
        if fresh and obs.estimator_ready and obs.monitor_ready:
            try:
                self._begin(obs)
            except RunRefused as e:
                out.extend(self._finish(False, f"refused: {e}", self.anchor, Outcome.REFUSED))
            return
        waited = obs.wall - self._wall_start
        if not (fresh and obs.estimator_ready) and waited > self.cfg.service_timeout:
            what = ("no valid joint_states received (check that the robot driver publishes joint_states with this "
                    "robot's joint names)" if obs.q is None else
                    f"joint_states stopped {obs.stream_age:.1f} s ago (check the robot driver)" if not fresh else
                    "the estimator is not available (payload_estimator's services do not answer: start it, or check "
                    "that it runs in this namespace)")
            out.extend(self._finish(False, f"refused after {waited:.1f} s: {what}; the arm was not moved", self.anchor,
                                    Outcome.REFUSED))
        elif waited > self.cfg.monitor_timeout:
            out.extend(self._finish(
                False, "refused: the collision monitor is not monitoring (no collision_monitor/status below ERROR: "
                "not running, no robot model or no joint_states); the arm was not moved. Start it, or set "
                "require_monitor false to sample without collision detection", self.anchor, Outcome.REFUSED))

    def _begin(self, obs: Observation) -> None:
        """Fix q0 and the envelope from the first usable observation, or raise :class:`RunRefused`.

        With an anchor, the arm already at its q0 (:meth:`.pick_return.PickReturn.at`) starts there as a fresh run
        does (a collision reported now is the grasp: see the gate), keeping the anchor's q0; the envelope around it is
        made from the settings now (a run cancelled at ``amplitude_deg`` 5 kept a ±5° envelope that the next run's ±7°
        poses left: every later ``~/sample`` aborted at its second pose). Elsewhere inside that envelope the run
        returns there first (the motion starts from q0: its first point comes within 10 ms), and with a collision
        reported it raises ``active`` and commands nothing until the collision has cleared (``clear_first``: the
        monitor's stop after an unannounced grasp holds the arm wherever its weight and the stop took it, 0.5-3.9 deg
        away in CI)."""
        q = np.asarray(obs.q, dtype=float)
        anchor = self.anchor
        at_anchor = anchor is not None and self.pick_return.at(q, anchor.q0)
        centre = q if anchor is None else anchor.q0
        try:
            envelope = make_envelope(self.desc, centre, self.plan_config.amplitude_deg,
                                     self.plan_config.limit_margin_deg)
        except MotionLimitError as e:
            kept = "" if anchor is None else (" (the kept pick configuration of the aborted run: call "
                                              "payload_sampler/forget_pick to sample around the current pose)")
            raise RunRefused(f"cannot sample at this pick configuration{kept}: {e}") from e
        if anchor is not None and not at_anchor and not envelope.contains(q, tol=self.cfg.start_tolerance):
            far = np.degrees(np.max(np.abs(q - anchor.q0)))
            raise RunRefused(f"the arm is {far:.1f} deg from the pick configuration "
                             f"{np.round(np.degrees(anchor.q0), 2).tolist()} deg of the aborted run ({anchor.reason}) "
                             "and outside its envelope; nothing was moved. Move the arm back there, or call "
                             "payload_sampler/forget_pick to sample around the current pose instead")
        self.q_request = q.copy()
        self.q0, self.envelope = centre.copy(), envelope
        if anchor is None or at_anchor:
            self._go(Phase.STARTUP)
        else:  # near q0 with the grasp's collision reported: learn the load where it is, return once it clears
            self._go(Phase.CLEAR_FIRST if obs.collision else Phase.RETURN_FIRST)


    # ------------------------------------------------------------------ answers
    def planned(self, result: PlannedMotion) -> None:
        """The result of this run's :class:`PlanMotion`, taken at the next :meth:`update` (ignored once the
        run has ended, e.g. cancelled while planning)."""
        if self.phase is Phase.PLANNING and self._planned is None:
            self._planned = result

    def answered(self, kind: str, ok: bool, text: str, t: float) -> None:
        """The estimator answered the pending ``kind`` request ("capture" or "estimate") at ``t`` (s)."""
        if not self.requests.take(kind):
            return  # an answer after an abort: nothing waits for it any more
        if self._finished is not None or self.sequence is None:
            return
        if kind in ("capture", "record"):
            try:
                if kind == "record":
                    self.sequence.recorded(ok, text, t)
                else:
                    self.sequence.captured(ok, text, t)
            except SequenceAborted as e:
                self.requests.deferred = e  # ends the run at the next update (no static sample at a pose)
        else:
            self.sequence.estimated(ok, text, t)

    @property
    def pending(self) -> str | None:
        """The kind of request waiting for an answer, or None."""
        return self.requests.kind

    @property
    def finished(self) -> Finished | None:
        return self._finished

    # ------------------------------------------------------------------ the machine
    def update(self, obs: Observation) -> list[RunAction]:
        """The actions to carry out now, given ``obs``; ends with a :class:`Finished` once."""
        if self._finished is not None:
            return []
        if obs.q is not None:
            self._q_last = np.asarray(obs.q, dtype=float)
        self.clock.observe(obs.t, obs.wall)
        fault = None if self.phase is Phase.WAITING else self._supervise(obs)
        if fault is not None:
            return self._abort(obs, *fault)
        out: list[RunAction] = []
        try:
            self._step(obs, out)
        except SequenceAborted as e:
            text = str(e)
            if self.phase is Phase.SEQUENCE and e.code is Outcome.GATE and not self.gate.armed:
                text = (f"the collision monitor still reports a collision at the pick configuration ({e}); nothing "
                        f"was moved. {GRASP_ADVICE}")
            ending = Ending.RETURN if e.hold else Ending.NONE
            if self.phase in (Phase.RETURN_FIRST, Phase.ABORT_RETURN):
                ending = Ending.HOLD
            return out + self._abort(obs, text, ending, e.code)
        return out

    def _step(self, obs: Observation, out: list[RunAction]) -> None:
        """The handler of the run's phase, then of each phase it enters, within this one observation."""
        while (handler := self._HANDLERS.get(self.phase)) is not None:
            phase = self.phase
            handler(self, obs, out)
            if self.phase is phase:
                return

    def _supervise(self, obs: Observation) -> Fault | None:
        """(reason, how to end, code) of an abort the observation forces, or None."""
        fault = self.clock.fault(obs.t, obs.wall, obs.stream_age)
        if fault is not None:
            return fault
        if not obs.monitor_ready:  # the safety function went blind or away: no further motion without it
            why = (f"collision_monitor/status ERROR: {obs.monitor_says}" if obs.monitor_says else
                   "collision_monitor/status ERROR or silent")
            return f"the collision monitor stopped monitoring ({why})", Ending.HOLD, Outcome.MONITOR_LOST
        if self.gate.collision(obs.collision, obs.collisions, self.phase is Phase.RETURN_FIRST):
            return ("collision reported by the collision monitor (the monitor stops the arm)", Ending.NONE,
                    Outcome.COLLISION)
        if self.phase is Phase.ABORT_RETURN:
            return None
        if (deferred := self.requests.deferred_fault()) is not None:
            return deferred
        if obs.cancel:
            done = None if self.sequence is None else self.sequence.estimate_answer
            if done is not None and done[0]:  # the estimate is published and in use: a cancel cannot take it back
                return (f"{CANCELLED} after the estimate was published and taken into use ({done[1]}); the run "
                        "still returns to the pick configuration", Ending.RETURN, Outcome.CANCELLED)
            return CANCELLED, Ending.RETURN, Outcome.CANCELLED
        return self.requests.timeout_fault(obs.wall)

    # ------------------------------------------------------------------ the phases' handlers
    def _clear_first(self, obs: Observation, out: list[RunAction]) -> None:
        """Near the anchor with the grasp's collision reported: raise ``active`` (the monitor learns the load at
        rest and clears the collision), then return to q0; nothing moves while the collision is reported."""
        if not self._active_sent:
            self._active_sent, self._t_phase = True, obs.t
            if not self.unloaded:
                out.append(SetActive(True))
        if not obs.collision:
            self._go(Phase.RETURN_FIRST)
            return
        if obs.t - self._t_phase > self.seq_config.clear_timeout:
            off = np.degrees(np.max(np.abs(np.asarray(obs.q, float) - self.anchor.q0)))
            raise SequenceAborted(
                f"the collision monitor still reports a collision {self.seq_config.clear_timeout:.2f} s after the "
                f"sampler raised active, with the arm {off:.1f} deg from the pick configuration of the aborted run; "
                f"nothing was moved. {GRASP_ADVICE}",
                hold=False, code=Outcome.GATE)

    def _return_first(self, obs: Observation, out: list[RunAction]) -> None:
        if self.pick_return.commanded is None:
            out.extend(self._command_return(obs, "pick configuration of the aborted run"))
            if self.pick_return.commanded is None:  # already there
                self._go(Phase.STARTUP)
            return
        if self.pick_return.arrived(obs.q, obs.t):
            self.pick_return.commanded = None
            self._go(Phase.STARTUP)

    def _startup(self, obs: Observation, out: list[RunAction]) -> None:
        """Raise ``active`` (once: not again after CLEAR_FIRST) and wait for rest at q0 from now."""
        self._t_active = obs.t
        self._t_phase = obs.t
        if not self.unloaded and not self._active_sent:
            out.append(SetActive(True))
        self._active_sent = True
        self._go(Phase.REST)

    def _rest(self, obs: Observation, out: list[RunAction]) -> None:
        if not obs.static:
            if obs.t - self._t_phase > self.cfg.pick_rest_timeout:
                raise SequenceAborted(f"the arm did not come to rest at the pick configuration within "
                                      f"{self.cfg.pick_rest_timeout:.2f} s (pick_rest_timeout): is something still "
                                      "moving it? Call ~/sample again with the arm at rest", hold=False,
                                      code=Outcome.REST_TIMEOUT)
            return
        q = np.asarray(obs.q, dtype=float)
        moved = float(np.max(np.abs(q - self.q0)))
        if moved > self.cfg.start_tolerance:
            raise SequenceAborted(f"the arm came to rest {np.degrees(moved):.2f} deg from where sampling was "
                                  "requested: call ~/sample with the arm at rest at the pick configuration", hold=False,
                                  code=Outcome.MOVED_AT_START)
        if self.anchor is None:
            self.q0 = q.copy()  # the rest pose itself (within start_tolerance of the request)
            self.envelope = make_envelope(self.desc, self.q0, self.plan_config.amplitude_deg,
                                          self.plan_config.limit_margin_deg)
        self.gate.allow()  # a collision reported until now is the grasp, not this run's
        self._t_plan = obs.t
        self._go(Phase.PLANNING)
        out.append(PlanMotion(self.desc, getattr(self.dyn, "payload", None), self.q0.copy(), self.envelope,
                              self.plan_config, self.mode, self.excitation, self.reference_plan,
                              self.cfg.unknown_payload_torque, self.cfg.mass_limit))

    def _planning(self, obs: Observation, out: list[RunAction]) -> None:
        """Wait for :meth:`planned`, then start the sequence (or end the run with the planning's reason)."""
        res = self._planned
        if res is None:
            return
        moved = float(np.max(np.abs(np.asarray(obs.q, dtype=float) - self.q0)))
        if moved > self.cfg.start_tolerance:
            raise SequenceAborted(f"the arm moved {np.degrees(moved):.2f} deg from the pick configuration while the "
                                  "motion was planned: call ~/sample again with the arm at rest at the pick "
                                  "configuration", hold=False, code=Outcome.MOVED_AT_START)
        if res.plan is None:
            raise SequenceAborted(res.error, hold=False, code=res.code)
        if isinstance(res.plan, ExcitationPlan):
            self.excitation_plan = res.plan
            if not self.reference:
                out.append(ClearCaptures())
            self.sequence = ExcitationSequence(res.plan, self.seq_config, check=self._check,
                                               tail=REFERENCE_TAIL if self.reference else TAIL)
        else:
            if res.fallback:
                self.fallback, self.mode = res.fallback, RunMode.STATIC
            self.plan = res.plan
            out.append(ClearCaptures())
            self.sequence = SamplingSequence(self.plan, self.desc, self.seq_config, self.names)
            if not self.sweep:
                self.sequence.duration_floor = self._unknown_payload_floor
        self.sequence.timings.startup = obs.t - self._t_start
        self.sequence.timings.planning = obs.t - self._t_plan
        self.timings = self.sequence.timings
        self._go(Phase.SEQUENCE)

    def _sequence(self, obs: Observation, out: list[RunAction]) -> None:
        seq = self.sequence
        if self.requests.kind in ("capture", "record"):
            return
        clear = self.gate.armed and obs.t - self._t_active >= self.cfg.monitor_fit_delay
        act = seq.update(obs.t, obs.q, seq.wants_static and obs.static, clear_to_move=clear, dq=obs.dq)
        if isinstance(act, Move):
            self._check(act.target)
            out.append(act)
        elif isinstance(act, Excite):
            out.append(act)
        elif isinstance(act, (Capture, Estimate, Record)):
            kind = "capture" if isinstance(act, Capture) else "record" if isinstance(act, Record) else "estimate"
            self.requests.sent(kind, obs.wall)
            out.append(act)
            if isinstance(act, Estimate) and self.excitation is None:  # the return move is commanded at once
                ret = seq.update(obs.t, obs.q, False, clear_to_move=True, dq=obs.dq)
                if isinstance(ret, Move):
                    self._check(ret.target)
                    out.append(ret)
        elif isinstance(act, Done):
            what = (f"a {seq.plan.duration:.2f} s excitation{_tilted(seq.plan, self.names)}{_scaled(seq.plan)}"
                    if self.excitation is not None
                    else f"{seq.n} poses")
            if self.fallback:
                what += f" ({self.fallback})"
            verb = "reference recorded" if self.reference else "calibrated" if self.sweep else "estimated"
            text = (f"{verb} from {what} around q0 = {np.round(np.degrees(self.q0), 2).tolist()} deg (back there "
                    f"now): {act.text}") if act.ok else (
                f"estimator rejected the fit: {act.text} (arm returned to the pick configuration)")
            out.extend(self._finish(act.ok, text, None if act.ok else self._anchor(act.text),
                                    Outcome.DONE if act.ok else Outcome.ESTIMATE_REJECTED))

    # ------------------------------------------------------------------ aborts
    def _abort(self, obs: Observation, reason: str, ending: Ending, code: Outcome) -> list[RunAction]:
        """End the run after ``reason``: RETURN to q0 if that is safe, else HOLD; NONE commands nothing (the
        monitor holds after a collision; before any motion nothing moved)."""
        if self.phase is Phase.ABORT_RETURN:  # a second fault while returning: hold where it is
            reason = f"{self.abort_reason}; then, while returning: {reason}"
            # the fault is what the outcome reports, not the user's cancel before it
            ending = Ending.NONE if ending is Ending.NONE else Ending.HOLD
            code = code if self._abort_code is Outcome.CANCELLED else self._abort_code
        self._abort_code = code
        if ending is Ending.RETURN and self.phase.before_motion:
            ending = Ending.NONE  # this run has not moved the arm
        elif ending is Ending.RETURN and self.phase is Phase.RETURN_FIRST:
            ending = Ending.HOLD
        self.abort_reason = reason
        self.requests.drop()
        if ending is Ending.RETURN and self._q_last is not None:
            try:
                out = self._command_return(obs, "pick configuration (abort)")
            except SequenceAborted as e:
                reason, ending = f"{reason}; {e}", Ending.HOLD
            else:
                if self.pick_return.commanded is None:
                    return self._finish(False, f"{reason}; the arm is at the pick configuration", self._anchor(reason),
                                        code)
                self._go(Phase.ABORT_RETURN)
                return out
        out: list[RunAction] = []
        if (ending is not Ending.NONE and self._q_last is not None
                and self.phase not in (Phase.STARTUP, Phase.REST, Phase.PLANNING)):
            dq = None if "lost" in reason else obs.dq  # a lost stream's last velocity is stale
            q_stop, t_stop = stop_point(self.desc, self._q_last, dq, envelope=self.envelope)
            out.append(Hold(q_stop, t_stop, "hold"))
        return out + self._finish(False, f"{reason}; {self._where()}", self._anchor(reason), code)

    def _abort_return(self, obs: Observation, out: list[RunAction]) -> None:
        if self.pick_return.arrived(obs.q, obs.t):
            out.extend(self._finish(False, f"{self.abort_reason}; returned to the pick configuration",
                                    self._anchor(self.abort_reason), self._abort_code))

    def _anchor(self, reason: str) -> PickAnchor | None:
        """The pick configuration a retry must keep (None before it was fixed): every run that fails
        after fixing q0 hands it on, so retries never re-centre on wherever the arm stopped."""
        if self.q0 is None:
            return self.anchor
        return PickAnchor(self.q0.copy(), self.envelope, reason)

    def _where(self) -> str:
        if self._q_last is None:
            return "the arm's position is unknown (no joint_states)"
        if self._abort_code is Outcome.STREAM_LOST:
            return ("nothing more was commanded: the arm ends the move it was given, at rest inside the envelope, "
                    f"last seen {np.degrees(np.max(np.abs(self._q_last - self.q0))):.1f} deg from the pick "
                    f"configuration {np.round(np.degrees(self.q0), 2).tolist()} deg; the next ~/sample returns there "
                    "first")
        off = float(np.degrees(np.max(np.abs(self._q_last - self.q0))))
        if off <= np.degrees(self.seq_config.arrival_tolerance):
            return "the arm is at the pick configuration"
        return (f"holding {off:.1f} deg from the pick configuration {np.round(np.degrees(self.q0), 2).tolist()} "
                "deg; the next ~/sample returns there first")

    def _finish(self, ok: bool, text: str, anchor: PickAnchor | None, code: Outcome) -> list[RunAction]:
        self._go(Phase.DONE)
        self._finished = Finished(ok, text, anchor, code)
        raised = self._t_active is not None and not self.unloaded
        return [SetActive(False), self._finished] if raised else [self._finished]


    # ------------------------------------------------------------------ moves
    def _command_return(self, obs: Observation, label: str) -> list[RunAction]:
        """The move from the last known position back to q0 ([] when the arm is there)."""
        return self.pick_return.command(self._q_last, self.q0, self.envelope, obs.t, obs.dq, label)

    def _unknown_payload_floor(self, q_from: np.ndarray, q_to: np.ndarray, k: int) -> float:
        """Move duration floor (s) while the captured poses leave the payload's mass or CoM uncertain."""
        visited = self.plan.poses[:k] if k > 0 else self.q0[None]
        return unknown_payload_floor(self.dyn, visited, q_from, q_to, self.cfg.mass_limit,
                                     self.cfg.unknown_payload_torque)

    def _check(self, target: np.ndarray) -> None:
        """Last line of defence: nothing leaves the envelope of q0, whatever the program hands out."""
        if not self.envelope.contains(target):
            raise SequenceAborted("refusing a command outside the envelope of the pick configuration", hold=True,
                                  code=Outcome.MOTION_LIMIT)

    _HANDLERS: dict[Phase, Callable[[SamplingRun, Observation, list[RunAction]], None]] = {
        Phase.WAITING: _waiting,
        Phase.CLEAR_FIRST: _clear_first,
        Phase.RETURN_FIRST: _return_first,
        Phase.STARTUP: _startup,
        Phase.REST: _rest,
        Phase.PLANNING: _planning,
        Phase.SEQUENCE: _sequence,
        Phase.ABORT_RETURN: _abort_return,
    }
    """Phase -> what the run does in it (DONE: nothing); the phases it may go to: :data:`.run_states.TRANSITIONS`."""



def _tilted(plan: ExcitationPlan, names) -> str:
    """' (tilted first: ...)' for an excitation that starts with a tilt; '' if not."""
    if plan.tilt is None:
        return ""
    step = np.degrees(plan.tilt.q - plan.envelope.q0)
    moved = ", ".join(f"{names[j]} {step[j]:+.1f} deg" for j in np.flatnonzero(np.abs(step) > 1e-6))
    return (f" (tilted first, {moved}, where the mass does not show at rest: {plan.tilt.move:.2f} s there, "
            f"{plan.tilt.hold:.2f} s held, {plan.tilt.back:.2f} s back)")


def _scaled(plan: ExcitationPlan) -> str:
    """' at N % of its limits (...)' for an excitation scaled down for the unseen payload; '' if not."""
    if plan.scale >= 1.0:
        return ""
    return (f" at {100 * plan.scale:.0f} % of its limits (3 σ of the payload's mass not seen at rest here adds up "
            f"to {plan.unknown_torque:.1f} N m along it)")


__all__ = ["SamplingRun", "RunMode", "Phase", "Outcome", "TRANSITIONS", "CLOCK_BACK_TOLERANCE", "RunSpec", "RunConfig",
           "RunRefused", "PickAnchor", "Observation", "SetActive", "ClearCaptures", "PlanMotion", "PlannedMotion",
           "Hold", "Finished", "RunAction", "Wait", "Record", "Excite"]
