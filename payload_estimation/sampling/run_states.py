"""The sampling run's modes, phases (the run's and its sequences'), outcome codes and transitions, in one place.

Phases and outcomes are :class:`enum.StrEnum` s whose values are the words a user and a program read (the
sampler's status ``phase`` and ``last_outcome``, :attr:`.sampling_run.Finished.code`): ``Outcome.DONE ==
"done"``, so a caller comparing with the string keeps working. :data:`TRANSITIONS` is the run's state
machine as a table; :class:`.sampling_run.SamplingRun` refuses (``RuntimeError``, a bug) any transition
that is not in it, and ``test_sampling_run`` checks that its scenarios make every transition of the table.
"""

from __future__ import annotations

import enum


class RunMode(enum.Enum):
    """What a run does, one per sampler service.

    STATIC (``~/sample``): the static poses around q0 (mass and CoM); DYNAMIC (``~/sample``): one
    excitation around q0 (mass, CoM and inertia), repeating the reference run's when there is one;
    SWEEP (``~/sweep``): the unloaded arm's gravity calibration poses (:func:`.sweep.plan_sweep`);
    RECORD_REFERENCE (``~/record_reference``): the excitation on the unloaded arm before the grasp,
    stored as the reference of the next DYNAMIC run."""

    STATIC = "static"
    DYNAMIC = "dynamic"
    SWEEP = "sweep"
    RECORD_REFERENCE = "record_reference"

    @property
    def unloaded(self) -> bool:
        """Nothing is grasped: ``active`` is not raised (the monitor must not learn a provisional payload)
        and moves are not slowed for an unknown payload."""
        return self in (RunMode.SWEEP, RunMode.RECORD_REFERENCE)

    @property
    def excites(self) -> bool:
        """The run plans an excitation (:class:`.excitation_sequence.ExcitationSequence`), not static poses."""
        return self in (RunMode.DYNAMIC, RunMode.RECORD_REFERENCE)



class Phase(enum.StrEnum):
    """Where a run is (the sampler's status ``phase``).

    WAITING for joint_states, the estimator and the monitor; CLEAR_FIRST: near an aborted run's pick
    configuration with the grasp's collision reported, waiting for it to clear; RETURN_FIRST: returning there;
    STARTUP: ``active`` raised now (passes through at once); REST: waiting for rest at q0; PLANNING: the motion
    computed off the caller's thread; SEQUENCE: the poses or the excitation; ABORT_RETURN: aborted, returning
    to q0; DONE: finished (:class:`.sampling_run.Finished` handed out)."""

    WAITING = "waiting"
    CLEAR_FIRST = "clear_first"
    RETURN_FIRST = "return_first"
    STARTUP = "startup"
    REST = "rest"
    PLANNING = "planning"
    SEQUENCE = "sequence"
    ABORT_RETURN = "abort_return"
    DONE = "done"

    def __repr__(self) -> str:
        return repr(self.value)  # a record holding a phase prints as it did when phases were words

    @property
    def before_motion(self) -> bool:
        """The run has not moved the arm yet: an abort commands nothing (no return, no hold)."""
        return self in (Phase.WAITING, Phase.CLEAR_FIRST, Phase.STARTUP, Phase.REST, Phase.PLANNING)


class PosePhase(enum.StrEnum):
    """Where a pose sequence (:class:`.sequence.SamplingSequence`) is: START (before the first update), NEXT (the next
    pose's move to command), MOVE (moving to it), SETTLE (captures at it), FINISH (estimate and return to q0),
    DONE."""

    START = "start"
    NEXT = "next"
    MOVE = "move"
    SETTLE = "settle"
    FINISH = "finish"
    DONE = "done"


class ExcitePhase(enum.StrEnum):
    """Where an excitation sequence (:class:`.excitation_sequence.ExcitationSequence`) is: RECORD (ask the estimator
    to record), RECORDING (its answer awaited), GATE (waiting to be clear to move), EXCITE (the excitation), TAIL (at
    rest after it), ESTIMATE (its answer awaited), DONE."""

    RECORD = "record"
    RECORDING = "recording"
    GATE = "gate"
    EXCITE = "excite"
    TAIL = "tail"
    ESTIMATE = "estimate"
    DONE = "done"


class Outcome(enum.StrEnum):
    """How a run ended (:attr:`.sampling_run.Finished.code`, the sampler's status ``last_outcome``)."""

    DONE = "done"
    REFUSED = "refused"
    CANCELLED = "cancelled"
    COLLISION = "collision"
    STREAM_LOST = "stream_lost"
    MONITOR_LOST = "monitor_lost"
    NOT_REACHED = "not_reached"
    NO_STATIC = "no_static"
    ESTIMATOR_TIMEOUT = "estimator_timeout"
    ESTIMATE_REJECTED = "estimate_rejected"
    GATE = "gate"
    REST_TIMEOUT = "rest_timeout"
    MOVED_AT_START = "moved_at_start"
    PLAN_FAILED = "plan_failed"
    CLOCK_RESTART = "clock_restart"
    CLOCK_STOPPED = "clock_stopped"
    MOTION_LIMIT = "motion_limit"
    ABORTED = "aborted"  # a SequenceAborted that names no cause (none does today)

    def __repr__(self) -> str:
        return repr(self.value)  # Finished(..., code='done') prints as it did when codes were words


class Ending(enum.Enum):
    """How an abort leaves the arm: RETURN to q0 when that is safe, HOLD where it is, NONE: command nothing (the
    monitor holds after a collision; before any motion nothing moved; a lost stream's last command ends at rest)."""

    RETURN = "return"
    HOLD = "hold"
    NONE = "none"


TRANSITIONS: dict[Phase, frozenset[Phase]] = {
    Phase.WAITING: frozenset({Phase.STARTUP, Phase.CLEAR_FIRST, Phase.RETURN_FIRST, Phase.DONE}),
    Phase.CLEAR_FIRST: frozenset({Phase.RETURN_FIRST, Phase.DONE}),
    Phase.RETURN_FIRST: frozenset({Phase.STARTUP, Phase.DONE}),
    Phase.STARTUP: frozenset({Phase.REST}),
    Phase.REST: frozenset({Phase.PLANNING, Phase.DONE}),
    Phase.PLANNING: frozenset({Phase.SEQUENCE, Phase.DONE}),
    Phase.SEQUENCE: frozenset({Phase.ABORT_RETURN, Phase.DONE}),
    Phase.ABORT_RETURN: frozenset({Phase.DONE}),
    Phase.DONE: frozenset(),
}
"""Phase -> the phases a run may go to next. Within one update a run only moves forward in this order (the
handlers run one after another while the phase changes); ABORT_RETURN and DONE are entered by an abort or the
end from the phase the run is in:

- WAITING -> STARTUP (fresh, or already at the anchored q0), CLEAR_FIRST / RETURN_FIRST (near the anchored q0,
  with / without a collision reported), DONE (refused);
- CLEAR_FIRST -> RETURN_FIRST (the collision cleared); RETURN_FIRST -> STARTUP (back at q0);
- STARTUP -> REST (``active`` raised); REST -> PLANNING (at rest at q0); PLANNING -> SEQUENCE (planned);
- SEQUENCE -> ABORT_RETURN (an abort with the arm away from q0: it is commanded back);
- any -> DONE: the end (an abort before the arm moved, a hold, the answer)."""


def check_transition(old: Phase, new: Phase) -> None:
    """Raise ``RuntimeError`` (a bug in the run) when ``old`` -> ``new`` is not in :data:`TRANSITIONS`."""
    if new not in TRANSITIONS[old]:
        raise RuntimeError(f"sampling run: no transition {old.value} -> {new.value} in run_states.TRANSITIONS")


__all__ = ["RunMode", "Phase", "PosePhase", "ExcitePhase", "Outcome", "Ending", "TRANSITIONS", "check_transition"]
