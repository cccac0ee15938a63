"""The sampling run as a state machine: visit the planned poses, capture at each, estimate, return.

:class:`SamplingSequence` decides *what* to do next from observations (time s, measured q rad,
whether the arm reads static); the caller (the ``payload_sampler`` node, a script on the bare
simulator) does it: publish a move, ask for a capture, ask for the estimate. Per pose:

1. **move** — a rest-to-rest command to the pose, its duration from the velocity limits
   (:func:`.poses.move_duration` from the *measured* q), validated against the envelope, the joint
   limits and the velocity limits before it is handed out (pose 1 is normally q0 itself: no move);
   arrived once the planned duration has passed and every joint is within ``arrival_tolerance``;
   ``arrival_timeout`` s later it is "not reached";
2. **settle/capture** — from arrival on, a capture is requested whenever the arm reads static
   (at most every ``capture_period`` s); rejected captures are retried until ``dwell`` s after
   arrival, then one last request and the run aborts ("no static sample").

After the last capture the estimate is requested *and* the return move to q0 commanded at once:
the fit does not need the arm, so its latency hides behind the return move. The run is done when
the arm is back at q0 and at rest (static, or ``dwell`` s after arrival) and the estimate has
answered. The first move waits for ``clear_to_move``
(the caller's gate, e.g. the collision monitor has cleared the grasp) for at most ``clear_timeout``
s; the capture at q0 does not wait for it. Phase timings are kept in :class:`PhaseTimings`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..errors import PayloadEstimationError
from ..model.description import RobotDescription
from .poses import MotionLimitError, MoveTiming, PosePlan, checked_move
from .run_states import Outcome, PosePhase


class SequenceAborted(RuntimeError):
    """The run cannot go on; ``hold`` says whether the arm should be held where it is; ``code`` names
    the cause for programs (an :class:`.run_states.Outcome`: ``no_static``, ``gate``, ``motion_limit``,
    ``not_reached``, ...)."""

    def __init__(self, message: str, hold: bool = True, code: Outcome | str = Outcome.ABORTED):
        super().__init__(message)
        self.hold = hold
        self.code = Outcome(code)


@dataclass(frozen=True)
class SequenceConfig:
    """Timing and tolerances of a run (s, rad).

    velocity_scale, min_duration: move timing (defaults: :class:`.poses.MoveTiming`, the node's);
    arrival_tolerance (rad) and arrival_timeout (s beyond the planned duration) for "reached";
    dwell: max s from arrival to an accepted capture (paper: 1 s at every pose);
    capture_period: min s between two capture requests at a pose; clear_timeout: max s the first
    move waits for ``clear_to_move``.
    """

    velocity_scale: float = MoveTiming.velocity_scale
    min_duration: float = MoveTiming.min_duration
    arrival_tolerance: float = float(np.radians(0.5))
    arrival_timeout: float = 2.0
    dwell: float = 1.0
    capture_period: float = 0.005
    clear_timeout: float = 1.0

    def __post_init__(self):
        for k in ("velocity_scale", "min_duration", "arrival_tolerance", "arrival_timeout", "dwell", "clear_timeout"):
            v = getattr(self, k)
            if not (np.isfinite(v) and v > 0):
                raise PayloadEstimationError(f"sequence {k} must be > 0, got {v}")
        if not (np.isfinite(self.capture_period) and self.capture_period >= 0):
            raise PayloadEstimationError(f"sequence capture_period must be >= 0 s, got {self.capture_period}")


@dataclass(frozen=True)
class Move:
    """Command a rest-to-rest move to ``target`` (rad) taking ``duration`` s; ``label`` for messages."""

    target: np.ndarray
    duration: float
    label: str


@dataclass(frozen=True)
class Capture:
    """Ask for a static capture at pose ``pose`` (0-based); answer with :meth:`SamplingSequence.captured`."""

    pose: int


@dataclass(frozen=True)
class Estimate:
    """Ask for the estimate; answer with :meth:`SamplingSequence.estimated`."""


@dataclass(frozen=True)
class Wait:
    """Nothing to do now; observe again."""


@dataclass(frozen=True)
class Done:
    """Back at q0 and the estimate answered: ``ok`` and its ``text``."""

    ok: bool
    text: str


Action = Move | Capture | Estimate | Wait | Done


@dataclass
class PhaseTimings:
    """Where a run's time went (s, the caller's clock).

    startup: caller's set-up before the sequence started, planning included (filled in by the caller);
    planning: the part of start-up spent computing the motion (filled in by the caller);
    moves[k] / settles[k]: command -> arrival and arrival -> accepted capture at pose k (move 0 when
    the pose is q0); gate: first move held back by ``clear_to_move``; estimate: request -> answer;
    ret: return command -> at rest at q0; finish: last capture -> done (max of estimate and return);
    total: sequence start -> done; attempts[k]: capture requests at pose k; motion: "poses" or
    "excitation" (then moves[0] is the excitation, settles[0] the rest after it). NaN: did not happen.
    """

    startup: float = 0.0
    planning: float = 0.0
    moves: list[float] = field(default_factory=list)
    settles: list[float] = field(default_factory=list)
    attempts: list[int] = field(default_factory=list)
    gate: float = 0.0
    estimate: float = float("nan")
    ret: float = float("nan")
    finish: float = float("nan")
    total: float = float("nan")
    motion: str = "poses"

    def summary(self) -> str:
        """One line with the phases that happened: start-up (planning), the poses (or the excitation),
        gate, estimate, return, total; a run that ended early shows only what it did."""
        parts = [f"start-up {self.startup:.2f} s" + (f" (planning {self.planning:.2f} s)" if self.planning > 0 else "")]
        if self.motion == "excitation" and self.moves:
            parts.append(f"excitation {self.moves[0]:.2f} s" + (f" + {self.settles[0]:.2f} s at rest" if self.settles
                                                                 else ""))
        elif self.settles:
            mv = [m for m in self.moves if m > 0]
            parts.append(f"{len(self.settles)} pose(s) captured: move {np.mean(mv) if mv else 0:.2f} s + "
                         f"settle/capture {np.mean(self.settles):.2f} s per pose (sum "
                         f"{sum(self.moves) + sum(self.settles):.2f} s)")
        if self.gate > 0:
            parts.append(f"gate {self.gate:.2f} s")
        if np.isfinite(self.estimate):
            parts.append(f"estimate {self.estimate:.2f} s")
        if self.motion != "excitation" and np.isfinite(self.ret):
            parts.append(f"return {self.ret:.2f} s" + (f" (overlapped with the estimate: {self.finish:.2f} s)"
                                                       if np.isfinite(self.finish) else ""))
        if np.isfinite(self.total):
            parts.append(f"total {self.startup + self.total:.2f} s")
        return ", ".join(parts)

    def as_dict(self) -> dict[str, float]:
        """Flat figures (s) for status messages and benchmarks."""
        mv = [m for m in self.moves if m > 0]
        return {"startup_s": self.startup, "planning_s": self.planning,
                "move_mean_s": float(np.mean(mv)) if mv else 0.0,
                "move_sum_s": float(sum(self.moves)), "settle_mean_s": float(np.mean(self.settles)) if self.settles
                else 0.0, "settle_sum_s": float(sum(self.settles)), "gate_s": self.gate,
                "estimate_s": self.estimate, "return_s": self.ret, "finish_s": self.finish,
                "sequence_s": self.total, "attempts": float(sum(self.attempts))}


class SamplingSequence:
    """Pose-by-pose sampling run (see the module docstring); one instance per run.

    Call :meth:`update` with every observation; it returns the next :class:`Action` or raises
    :class:`SequenceAborted`. Report capture and estimate answers with :meth:`captured` and
    :meth:`estimated`. Every :class:`Move` it hands out has passed :func:`.poses.checked_move`.
    """

    def __init__(self, plan: PosePlan, desc: RobotDescription, config: SequenceConfig | None = None,
                 joint_names: tuple[str, ...] | None = None):
        self.plan = plan
        self.desc = desc
        self.cfg = config or SequenceConfig()
        self.names = tuple(joint_names or desc.joint_names)
        self.timings = PhaseTimings()
        self.duration_floor = None
        """Optional ``(q_from, q_to, pose_index) -> s``: a lower bound on each move's duration (the run
        slows moves while the payload mass is unknown)."""
        self.n = len(plan.poses)
        self._k = 0
        self._phase = PosePhase.START
        self._t0: float | None = None
        self._target: np.ndarray | None = None
        self._duration = 0.0
        self._t_cmd = 0.0
        self._t_arrive = 0.0
        self._t_request = -np.inf
        self._t_gate: float | None = None
        self._pending_capture = False
        self._last_reason = "the arm never became static"
        self._t_last_capture = 0.0
        self._estimate: tuple[bool, str] | None = None
        self._estimate_requested = False
        self._t_estimate = 0.0
        self._return_commanded = False
        self._returned = False
        self._t_back: float | None = None
        self._dq: np.ndarray | None = None

    @property
    def pose(self) -> int:
        """0-based index of the pose being visited (n once all are captured)."""
        return self._k

    @property
    def wants_static(self) -> bool:
        """True when :meth:`update` looks at ``static`` (the caller may skip the check otherwise)."""
        if self._phase is PosePhase.FINISH:
            return self._t_back is not None and not self._returned
        return self._phase is PosePhase.SETTLE and not self._pending_capture

    @property
    def phase(self) -> PosePhase:
        return self._phase

    @property
    def progress(self) -> str:
        """Where the run is, for status: ``pose k/n``."""
        return f"pose {min(self._k, self.n - 1) + 1}/{self.n}"

    # ------------------------------------------------------------------ answers
    def captured(self, ok: bool, reason: str, t: float) -> None:
        """Answer to a :class:`Capture` request at time ``t`` (s)."""
        if not self._pending_capture:
            raise RuntimeError("captured() without a pending Capture")
        self._pending_capture = False
        self.timings.attempts[self._k] += 1
        if ok:
            self.timings.settles.append(t - self._t_arrive)
            self._t_last_capture = t
            self._k += 1
            self._phase = PosePhase.NEXT if self._k < self.n else PosePhase.FINISH
            return
        self._last_reason = reason
        if t - self._t_arrive > self.cfg.dwell:
            raise SequenceAborted(f"pose {self._k + 1}/{self.n}: no static sample within {self.cfg.dwell:.2f} s: "
                                  f"{reason}", code=Outcome.NO_STATIC)

    @property
    def estimate_answer(self) -> tuple[bool, str] | None:
        """The estimator's answer to this run's estimate request (ok, its text), None before it came."""
        return self._estimate

    def estimated(self, ok: bool, text: str, t: float) -> None:
        """Answer to the :class:`Estimate` request at time ``t`` (s)."""
        if not self._estimate_requested or self._estimate is not None:
            raise RuntimeError("estimated() without a pending Estimate")
        self._estimate = (bool(ok), str(text))
        self.timings.estimate = t - self._t_estimate

    # ------------------------------------------------------------------ the machine
    def update(self, t: float, q: np.ndarray, static: bool = False, clear_to_move: bool = True,
               dq: np.ndarray | None = None) -> Action:
        """Next action given time ``t`` (s), measured ``q`` (rad, model order), ``static`` and, when known,
        the measured velocity ``dq`` (rad/s: a move starts from it, :func:`.poses.checked_move`)."""
        q = np.asarray(q, dtype=float)
        self._dq = None if dq is None else np.asarray(dq, dtype=float)
        if self._t0 is None:
            self._t0 = t
            self._phase = PosePhase.NEXT
        if self._phase is PosePhase.NEXT:
            return self._next_pose(t, q, static, clear_to_move)
        if self._phase is PosePhase.MOVE:
            if self._arrived(t, q):
                self.timings.moves.append(t - self._t_cmd)
                self._enter_settle(t)
            else:
                return Wait()
        if self._phase is PosePhase.SETTLE:
            if self._pending_capture:
                return Wait()
            expired = t - self._t_arrive > self.cfg.dwell
            if (static or expired) and t - self._t_request >= self.cfg.capture_period:
                self._pending_capture = True
                self._t_request = t
                return Capture(self._k)
            return Wait()
        if self._phase is PosePhase.FINISH:
            return self._finish(t, q, static)
        if self._phase is PosePhase.DONE:
            ok, text = self._estimate
            return Done(ok, text)
        raise RuntimeError(f"unknown phase {self._phase!r}")

    def _next_pose(self, t: float, q: np.ndarray, static: bool, clear_to_move: bool) -> Action:
        target = self.plan.poses[self._k]
        self.timings.attempts.append(0)
        if np.max(np.abs(q - target)) < 0.1 * self.cfg.arrival_tolerance:
            self.timings.moves.append(0.0)  # already there (pose 1 = q0): capture right away
            self._enter_settle(t)
            return self.update(t, q, static, clear_to_move)
        if not clear_to_move:
            self.timings.attempts.pop()
            if self._t_gate is None:
                self._t_gate = t
            if t - self._t_gate > self.cfg.clear_timeout:
                raise SequenceAborted(f"not clear to move to pose {self._k + 1}/{self.n} after "
                                      f"{self.cfg.clear_timeout:.2f} s", hold=False, code=Outcome.GATE)
            return Wait()
        if self._t_gate is not None:
            self.timings.gate += t - self._t_gate
            self._t_gate = None
        return self._command(t, q, target, f"pose {self._k + 1}/{self.n}", PosePhase.MOVE)

    def _command(self, t: float, q: np.ndarray, target: np.ndarray, label: str, phase: PosePhase) -> Move:
        try:
            floor = self.cfg.min_duration
            if self.duration_floor is not None:
                floor = max(floor, float(self.duration_floor(q, target, self._k)))
            duration = checked_move(q, target, self.plan.envelope, self.desc, self.cfg.velocity_scale, floor,
                                    self.names, self._dq)
        except MotionLimitError as e:
            raise SequenceAborted(f"refusing to command {label}: {e}", code=Outcome.MOTION_LIMIT) from e
        self._target, self._duration, self._t_cmd = np.array(target, dtype=float), duration, t
        self._phase = phase
        return Move(self._target.copy(), duration, label)

    def _arrived(self, t: float, q: np.ndarray) -> bool:
        err = np.abs(q - self._target)
        if t - self._t_cmd >= self._duration and np.max(err) < self.cfg.arrival_tolerance:
            return True
        if t - self._t_cmd > self._duration + self.cfg.arrival_timeout:
            j = int(np.argmax(err))
            what = f"pose {self._k + 1}/{self.n}" if self._phase is PosePhase.MOVE else "pick configuration"
            raise SequenceAborted(
                f"timeout after {self._duration + self.cfg.arrival_timeout:.2f} s: {what} not reached: joint "
                f"{self.names[j]} is {np.degrees(err[j]):.2f} deg off (tolerance "
                f"{np.degrees(self.cfg.arrival_tolerance):.2f} deg)", code=Outcome.NOT_REACHED)
        return False

    def _enter_settle(self, t: float) -> None:
        self._phase = PosePhase.SETTLE
        self._t_arrive = t
        self._t_request = -np.inf
        self._last_reason = "the arm never became static"

    def _finish(self, t: float, q: np.ndarray, static: bool) -> Action:
        if not self._estimate_requested:
            self._estimate_requested = True
            self._t_estimate = t
            return Estimate()
        if not self._return_commanded:
            self._return_commanded = True
            if np.max(np.abs(q - self.plan.q0)) >= 0.1 * self.cfg.arrival_tolerance:
                return self._command(t, q, self.plan.q0, "pick configuration", PosePhase.FINISH)
            self.timings.ret = 0.0
            self._returned = True
        if not self._returned and self._t_back is None and self._arrived(t, q):
            self._t_back = t
        if not self._returned and self._t_back is not None and (static or t - self._t_back > self.cfg.dwell):
            self.timings.ret = t - self._t_cmd  # back and at rest (or dwell s after arrival: done anyway)
            self._returned = True
        if self._returned and self._estimate is not None:
            self.timings.finish = t - self._t_last_capture
            self.timings.total = t - self._t0
            self._phase = PosePhase.DONE
            ok, text = self._estimate
            return Done(ok, text)
        return Wait()


__all__ = ["SamplingSequence", "SequenceConfig", "SequenceAborted", "PhaseTimings", "Move", "Capture", "Estimate",
           "Wait", "Done", "Action"]
