"""The move back to the pick configuration q0: before a run (an aborted run's q0) and after an abort.

:class:`PickReturn` commands one checked rest-to-rest move to q0 (:func:`.poses.checked_move` inside the
envelope) and says when the arm has arrived, or raises ``not_reached`` when it does not come within
``arrival_timeout`` s beyond the move's duration.
"""

from __future__ import annotations

import numpy as np

from ..model.description import RobotDescription
from .poses import Envelope, MotionLimitError, checked_move
from .run_states import Outcome
from .sequence import Move, SequenceAborted, SequenceConfig


class PickReturn:
    """One run's return moves to q0 (rad) with the sequence's timing and tolerances."""

    def __init__(self, desc: RobotDescription, config: SequenceConfig, joint_names: tuple[str, ...]):
        self.desc = desc
        self.cfg = config
        self.names = joint_names
        self.commanded: tuple[np.ndarray, float, float] | None = None  # (target, duration, t commanded)

    def at(self, q: np.ndarray, q0: np.ndarray) -> bool:
        """Whether the arm at ``q`` is at ``q0`` for a motion that starts there (rad): within a tenth of the
        arrival tolerance, so that a trajectory whose first point is q0 10 ms ahead stays within the velocity
        limits (CI: 0.4-0.5 deg off, the excitation needed 1.33 rad/s on A4 and the controller refused it)."""
        return float(np.max(np.abs(q - q0))) < 0.1 * self.cfg.arrival_tolerance

    def command(self, q: np.ndarray, q0: np.ndarray, envelope: Envelope, t: float, dq: np.ndarray | None,
                label: str) -> list[Move]:
        """The move from ``q`` (velocity ``dq``) to ``q0`` commanded at ``t`` ([] and nothing commanded when the
        arm is at q0); :class:`.sequence.SequenceAborted` (``motion_limit``) when it is not safe."""
        q = np.asarray(q, dtype=float)
        if self.at(q, q0):
            self.commanded = None
            return []
        try:
            duration = checked_move(q, q0, envelope, self.desc, self.cfg.velocity_scale, self.cfg.min_duration,
                                    self.names, dq)
        except MotionLimitError as e:
            raise SequenceAborted(f"refusing to command the return: {e}", code=Outcome.MOTION_LIMIT) from e
        self.commanded = (q0.copy(), duration, t)
        return [Move(q0.copy(), duration, label)]

    def arrived(self, q: np.ndarray, t: float) -> bool:
        """The commanded return has ended at q0 (``q`` at ``t``); ``not_reached`` when it does not in time."""
        target, duration, t_cmd = self.commanded
        err = np.abs(np.asarray(q, float) - target)
        if t - t_cmd >= duration and np.max(err) < self.cfg.arrival_tolerance:
            return True
        if t - t_cmd > duration + self.cfg.arrival_timeout:
            j = int(np.argmax(err))
            raise SequenceAborted(f"the pick configuration was not reached: joint {self.names[j]} is "
                                  f"{np.degrees(err[j]):.2f} deg off", hold=True, code=Outcome.NOT_REACHED)
        return False


__all__ = ["PickReturn"]
