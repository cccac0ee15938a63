"""Reaction to a detected collision: a small ROS-independent state machine.

Policies (paper 000, Sec. VI-B: stop for 2 s, then resume):

- ``none``: never command anything (monitoring only);
- ``stop``: on a collision hold the current position and stay stopped until :meth:`clear`;
- ``stop_and_resume``: hold, and resume once ``resume_delay`` seconds have passed since the stop
  *and* the residual has been released.

States ``MOVING -> STOPPED -> RESUMING -> MOVING``. :meth:`update` returns the :class:`Action` the
caller must command *now*; an action is returned once, on the transition (HOLD_POSITION when
stopping, RESUME when resuming), otherwise NOTHING. A collision while RESUMING stops again.
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass

from ..errors import PayloadEstimationError

POLICIES = ("none", "stop", "stop_and_resume")


class ReactionState(enum.Enum):
    MOVING = "moving"
    STOPPED = "stopped"
    RESUMING = "resuming"


class Action(enum.Enum):
    NOTHING = "nothing"
    HOLD_POSITION = "hold_position"
    RESUME = "resume"


class ReactionPolicyError(PayloadEstimationError):
    """Bad reaction configuration; the message names the value."""


@dataclass(frozen=True)
class ReactionConfig:
    """Named as the monitor node's parameters (these defaults are its defaults): the ``policy`` (:data:`POLICIES`)
    and ``resume_delay`` s after the release before resuming (Gaz & De Luca 2017: 2 s)."""

    policy: str = "stop_and_resume"
    resume_delay: float = 2.0


class ReactionStateMachine:
    """Stop / resume logic. ``resume_delay`` (s) >= 0; ``resume_grace`` (s): time spent in RESUMING
    before the state is MOVING again (the motion ramps back up; a collision then stops again)."""

    def __init__(self, policy: str = ReactionConfig.policy, resume_delay: float = ReactionConfig.resume_delay,
                 resume_grace: float = 0.5):
        if policy not in POLICIES:
            raise ReactionPolicyError(f"unknown reaction policy {policy!r}; use one of {', '.join(POLICIES)}")
        if not (math.isfinite(resume_delay) and resume_delay >= 0):
            raise ReactionPolicyError(f"resume_delay must be a finite number >= 0 s, got {resume_delay}")
        if not (math.isfinite(resume_grace) and resume_grace >= 0):
            raise ReactionPolicyError(f"resume_grace must be a finite number >= 0 s, got {resume_grace}")
        self.policy = policy
        self.resume_delay = float(resume_delay)
        self.resume_grace = float(resume_grace)
        self.state = ReactionState.MOVING
        self.stop_time: float | None = None
        self.resume_time: float | None = None
        self.stops = 0

    def update(self, t: float, in_collision: bool) -> Action:
        """Advance to time ``t`` (s) with the detector's current collision flag; return the action."""
        if self.policy == "none":
            return Action.NOTHING
        if self.state is ReactionState.MOVING or self.state is ReactionState.RESUMING:
            if in_collision:
                self.state = ReactionState.STOPPED
                self.stop_time = t
                self.stops += 1
                return Action.HOLD_POSITION
            if self.state is ReactionState.RESUMING and t - self.resume_time >= self.resume_grace:
                self.state = ReactionState.MOVING
            return Action.NOTHING
        # STOPPED
        if self.policy == "stop_and_resume" and not in_collision and t - self.stop_time >= self.resume_delay:
            self.state = ReactionState.RESUMING
            self.resume_time = t
            return Action.RESUME
        return Action.NOTHING

    def clear(self) -> Action:
        """Operator acknowledgement (policy ``stop``) or manual resume: RESUME if stopped, else NOTHING."""
        if self.state is ReactionState.STOPPED:
            self.state = ReactionState.MOVING
            self.resume_time = None
            return Action.RESUME
        return Action.NOTHING

    def reset(self) -> None:
        self.state = ReactionState.MOVING
        self.stop_time = self.resume_time = None


__all__ = ["Action", "ReactionConfig", "ReactionState", "ReactionStateMachine", "ReactionPolicyError", "POLICIES"]
