"""The dynamic sampling run as a state machine: record, one excitation from q0 back to q0, estimate.

:class:`ExcitationSequence` is the ``mode: dynamic`` counterpart of :class:`.sequence.SamplingSequence`
(same interface for :class:`.sampling_run.SamplingRun`):

1. **record** — ask the estimator to start recording the joint-state stream (:class:`Record`; the
   arm is at rest at q0, so the recording starts at rest);
2. **gate** — wait for ``clear_to_move`` (the collision monitor has cleared the grasp) at most
   ``clear_timeout`` s;
3. **excite** — command the planned excitation (:class:`Excite`: every point checked against the
   envelope and the velocity limits before it is handed out), which ends at rest at q0; arrived when
   its duration has passed and every joint is within ``arrival_tolerance`` of q0, ``arrival_timeout``
   s later it is "not reached";
4. **tail** — ``tail`` s more at rest at q0 (the fit's filter settles on data after the motion);
5. **estimate** — ask for the estimate (or, for a reference run, to store the recording) and finish
   with its answer. The arm is already back at q0: there is no return move.

Times in s of the caller's clock, angles in rad.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .payload_excitation import POINT_RATE, ExcitationPlan
from .poses import MotionLimitError
from .run_states import ExcitePhase, Outcome
from .sequence import Done, Estimate, PhaseTimings, SequenceAborted, SequenceConfig, Wait

TAIL = 0.05
"""s at rest at q0 after the excitation before the estimate: 2.5 time constants of the fit's 8 Hz filter
after the planned end, whose last ~0.06 s move less than 0.05° (the recordings' motion ends 0.09-0.15 s
before they do). It was 0.1 s; the accuracy with 0.05 s is docs/bench/dynamic.md's."""

REFERENCE_TAIL = 0.25
"""s at rest after a reference run's excitation: the loaded run is fitted only where both recordings overlap, and
the loaded arm's motion may end later than the reference's (its tracking lags with the payload: 12 ms past the
reference's end with ``TAIL`` in a loaded CI run, which the estimator rejected). The reference run's time does not
count towards the ``sample`` call's."""


@dataclass(frozen=True)
class Record:
    """Ask the estimator to start recording the joint-state stream; answer with :meth:`ExcitationSequence.recorded`."""


@dataclass(frozen=True)
class Excite:
    """Command the excitation: ``points`` [(time_from_start s, q rad, dq rad/s)], ``duration`` s."""

    points: list[tuple[float, np.ndarray, np.ndarray]]
    duration: float
    label: str = "excitation"


class ExcitationSequence:
    """Record, excite, estimate (module docstring); one instance per run. ``check(point)`` is the
    run's last-line envelope check, applied to every commanded point."""

    def __init__(self, plan: ExcitationPlan, config: SequenceConfig | None = None, check=None,
                 tail: float = TAIL, point_rate: float = POINT_RATE):
        self.plan = plan
        self.cfg = config or SequenceConfig()
        self.timings = PhaseTimings(motion="excitation")
        self.tail = tail
        self.point_rate = point_rate
        self._check = check
        self.wants_static = False
        self._phase = ExcitePhase.RECORD
        self._t0: float | None = None
        self._t_gate: float | None = None
        self._t_cmd = 0.0
        self._t_arrive = 0.0
        self._t_estimate = 0.0
        self._recorded: tuple[bool, str] | None = None
        self._estimate: tuple[bool, str] | None = None

    @property
    def phase(self) -> str:
        return self._phase

    @property
    def progress(self) -> str:
        return {ExcitePhase.RECORD: "starting", ExcitePhase.RECORDING: "starting the recording",
                ExcitePhase.GATE: "waiting for the collision gate",
                ExcitePhase.EXCITE: f"excitation ({self.plan.duration:.2f} s)",
                ExcitePhase.TAIL: "at rest after the excitation", ExcitePhase.ESTIMATE: "estimating",
                ExcitePhase.DONE: "done"}[self._phase]

    # ------------------------------------------------------------------ answers
    def recorded(self, ok: bool, text: str, t: float) -> None:
        """Answer to :class:`Record` at ``t`` s; a refusal aborts the run (nothing has moved)."""
        if not ok:
            raise SequenceAborted(f"the estimator did not start recording: {text}", hold=False,
                                  code=Outcome.ESTIMATE_REJECTED)
        self._recorded = (True, text)

    @property
    def estimate_answer(self) -> tuple[bool, str] | None:
        """The estimator's answer to this run's estimate request (ok, its text), None before it came."""
        return self._estimate

    def estimated(self, ok: bool, text: str, t: float) -> None:
        """Answer to the :class:`Estimate` request at ``t`` s."""
        self._estimate = (bool(ok), str(text))
        self.timings.estimate = t - self._t_estimate

    # ------------------------------------------------------------------ the machine
    def update(self, t: float, q: np.ndarray, static: bool = False, clear_to_move: bool = True,
               dq: np.ndarray | None = None):
        """Next action at ``t`` s with measured ``q`` rad: Record, Excite, Estimate, Wait or Done (``dq``:
        as :meth:`.sequence.SamplingSequence.update`; the excitation starts at rest and ignores it)."""
        q = np.asarray(q, dtype=float)
        if self._t0 is None:
            self._t0 = t
            self._phase = ExcitePhase.RECORDING
            return Record()
        if self._phase is ExcitePhase.RECORDING:
            if self._recorded is None:
                return Wait()
            self._phase, self._t_gate = ExcitePhase.GATE, t
        if self._phase is ExcitePhase.GATE:
            if not clear_to_move:
                if t - self._t_gate > self.cfg.clear_timeout:
                    raise SequenceAborted(f"not clear to start the excitation after {self.cfg.clear_timeout:.2f} s",
                                          hold=False, code=Outcome.GATE)
                return Wait()
            self.timings.gate = t - self._t_gate
            return self._excite(t)
        if self._phase is ExcitePhase.EXCITE:
            if not self._arrived(t, q):
                return Wait()
            self.timings.moves.append(t - self._t_cmd)
            self._phase, self._t_arrive = ExcitePhase.TAIL, t
        if self._phase is ExcitePhase.TAIL:
            if t - self._t_arrive < self.tail:
                return Wait()
            self.timings.settles.append(t - self._t_arrive)
            self.timings.attempts.append(1)
            self._phase, self._t_estimate = ExcitePhase.ESTIMATE, t
            return Estimate()
        if self._phase is ExcitePhase.ESTIMATE:
            if self._estimate is None:
                return Wait()
            self.timings.ret = 0.0
            self.timings.finish = t - self._t_estimate
            self.timings.total = t - self._t0
            self._phase = ExcitePhase.DONE
        ok, text = self._estimate
        return Done(ok, text)

    def _excite(self, t: float) -> Excite:
        points = self.plan.points(self.point_rate)
        try:
            for _, q, dq in points:
                if self._check is not None:
                    self._check(q)
                over = np.abs(dq) > self.plan.velocity_budget + 1e-9
                if np.any(over):
                    raise MotionLimitError(f"excitation velocity {np.max(np.abs(dq)):.3f} rad/s above the budget")
        except MotionLimitError as e:
            raise SequenceAborted(f"refusing to command the excitation: {e}", code=Outcome.MOTION_LIMIT) from e
        self._phase, self._t_cmd = ExcitePhase.EXCITE, t
        return Excite(points, self.plan.duration)

    def _arrived(self, t: float, q: np.ndarray) -> bool:
        err = np.abs(q - self.plan.envelope.q0)
        if t - self._t_cmd >= self.plan.duration and np.max(err) < self.cfg.arrival_tolerance:
            return True
        if t - self._t_cmd > self.plan.duration + self.cfg.arrival_timeout:
            j = int(np.argmax(err))
            names = self.plan.trajectory.joint_names
            joint = names[j] if len(names) == len(err) else f"{j + 1}"
            raise SequenceAborted(f"the excitation did not end at the pick configuration within "
                                  f"{self.cfg.arrival_timeout:.2f} s of its planned end: joint {joint} is "
                                  f"{np.degrees(err[j]):.2f} deg off (tolerance "
                                  f"{np.degrees(self.cfg.arrival_tolerance):.2f} deg); check that the controller "
                                  "follows joint_trajectory", code=Outcome.NOT_REACHED)
        return False


__all__ = ["ExcitationSequence", "Excite", "Record", "POINT_RATE", "TAIL"]
