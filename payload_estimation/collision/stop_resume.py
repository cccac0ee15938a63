"""Stop and resume: the trajectory the collision monitor commands for the reaction's action.

:class:`StopResume` keeps the trajectory last commanded by someone else (:meth:`~StopResume.commanded`); on a
stop the remainder of it is kept (not while the payload sampler runs, and never the sampler's own trajectory: it
aborts and commands its own next move) and resumed after the release, with its velocities; a newer command
supersedes it (resuming the old remainder would drive the arm to a stale target). :meth:`~StopResume.react` turns
the reaction's :class:`.reaction.Action` into the :class:`Command` to send, with the caller's :class:`Planner`
(the sampling layer's motion rules: collision/ does not import sampling/).

Units: s, rad, rad/s, rad/s². ``now`` is the caller's clock, in which commanded trajectories run.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np

from ..errors import PayloadEstimationError
from ..levels import Note
from .reaction import Action

MAX_LEAD = 0.2
"""s: the most a stop point is moved ahead for the age of the sample it is computed from."""


@dataclass(frozen=True)
class StopResumeConfig:
    """Named as the monitor node's parameters (these defaults are its defaults): hold_time s and
    stop_deceleration rad/s² (the stop), resume_velocity_scale (of the velocity limits) and resume_min_duration s
    (the first segment of a resumed trajectory)."""

    hold_time: float = 0.2
    stop_deceleration: float = 10.0
    resume_velocity_scale: float = 0.5
    resume_min_duration: float = 0.5


@dataclass(frozen=True)
class Planner:
    """The motion rules a stop and a resume use, bound to the robot's limits: ``stop_point(q, dq, deceleration,
    min_time, lead) -> (q_stop rad, t s)``, ``move_duration(q_from, q_to, v_to, velocity_scale, min_duration)
    -> s``, the move from rest at q_from into q_to with velocity v_to (rad/s; None: to rest), and
    ``stop_duration(starts, q_stop, t) -> s``: ``t`` stretched until the controller's path to q_stop from every
    (q, dq) of ``starts`` stays within the velocity limits (sampling.poses)."""

    stop_point: Callable[[np.ndarray, np.ndarray, float, float, float], tuple[np.ndarray, float]]
    move_duration: Callable[[np.ndarray, np.ndarray, np.ndarray | None, float, float], float]
    stop_duration: Callable[[list, np.ndarray, float], float] = lambda starts, q_stop, t: t


@dataclass(frozen=True)
class Command:
    """A trajectory the monitor commands: times ``t`` (m,) s from now, points ``q`` (m, n) rad, ``velocities``
    (m, n) rad/s or None (0 at the last point only)."""

    t: np.ndarray
    q: np.ndarray
    velocities: np.ndarray | None = None


class StopResume:
    """The trajectory bookkeeping of a stop and a resume (module docstring); ``planner`` None: :meth:`react`
    refuses to command."""

    def __init__(self, config: StopResumeConfig | None = None, planner: Planner | None = None):
        self.cfg = config or StopResumeConfig()
        self.planner = planner
        self.active: tuple[float, Command, bool] | None = None  # (start s, the trajectory, resumable)
        self.remainder: Command | None = None

    def clear(self) -> None:
        """Forget the active trajectory and any remainder (a stream restart: nothing is resumed)."""
        self.active = self.remainder = None

    def adopt(self, old: StopResume) -> None:
        """Carry over ``old``'s trajectories (the same arm under a new model)."""
        self.active, self.remainder = old.active, old.remainder

    def commanded(self, now: float, t: np.ndarray, q: np.ndarray, velocities: np.ndarray | None = None,
                  resumable: bool = True) -> bool:
        """A trajectory (times s from ``now``, points (m, n) rad, their velocities (m, n) rad/s or None) was
        commanded by someone else: the one to resume after a stop, unless not ``resumable`` (the sampler's: it
        aborts on a collision and commands its own next move). Returns whether it supersedes an interrupted
        trajectory, which then is not resumed."""
        superseded = self.remainder is not None
        self.remainder = None
        v = None if velocities is None else np.asarray(velocities, float)
        self.active = (now, Command(np.asarray(t, float), np.asarray(q, float), v), resumable)
        return superseded

    def stop(self, now: float, keep: bool = True) -> bool:
        """The arm stops at ``now``: keep what remains of the active trajectory (``keep`` False: nothing is kept,
        e.g. while sampling); returns whether a remainder is kept for the resume."""
        self.remainder = None
        if self.active is not None and self.active[2] and keep:
            start, c, _ = self.active
            left = c.t > now - start
            if left.any():
                self.remainder = Command(c.t[left] - (now - start), c.q[left],
                                         None if c.velocities is None else c.velocities[left])
        self.active = None
        return self.remainder is not None

    def resume(self, now: float, first_segment: Callable[[np.ndarray, np.ndarray | None], float]) -> Command | None:
        """The trajectory to command at ``now`` (the remainder with its velocities), or None when nothing is left to
        resume (none was interrupted, or a newer command superseded it). ``first_segment(q_target, v_target)``: the
        shortest duration (s) of the move from the stopped arm to the remainder's first point, arriving there with
        its velocity (rad/s; None: at rest); the remainder is shifted to start so."""
        if self.remainder is None:
            return None
        c, self.remainder = self.remainder, None
        v0 = None if c.velocities is None else c.velocities[0]
        c = replace(c, t=c.t - c.t[0] + max(float(c.t[0]), float(first_segment(c.q[0], v0))))
        self.active = (now, c, True)
        return c

    def reach(self, q: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
        """Per-joint (lower, upper) rad of the measured ``q`` and the active trajectory's points, or None (none
        known). A stop point is extrapolated from the sample's velocity; the arm was decelerating towards the
        trajectory's points, so a stop beyond them (a sampling pose's move, a busy machine's 0.2 s lead) would
        leave the region the trajectory keeps to (the sampler's envelope): it is clipped to this box."""
        if self.active is None:
            return None
        pts = np.vstack([np.asarray(q, float)[None, :], self.active[1].q])
        return pts.min(axis=0), pts.max(axis=0)

    def react(self, action: Action, now: float, q: np.ndarray, dq: np.ndarray | None, lead: float,
              keep: bool = True) -> tuple[Command | None, Note | None]:
        """The trajectory to command at ``now`` for the reaction's ``action`` (None: none) and the line to log;
        (q rad, dq rad/s) is the sample ``lead`` s old; ``keep``: as :meth:`stop`. HOLD_POSITION: :meth:`stop`, then
        the stop point ramping the velocities down (``stop_deceleration``, at least ``hold_time`` s, the lead taken
        up to :data:`MAX_LEAD`), never beyond the active trajectory's points (:meth:`reach`); RESUME: :meth:`resume`
        with a first segment of at least ``move_duration`` at ``resume_velocity_scale``."""
        cfg, plan = self.cfg, self.planner
        if action not in (Action.HOLD_POSITION, Action.RESUME):
            return None, None
        if plan is None:
            raise PayloadEstimationError(f"the reaction asks for {action.value} but the monitor has no planner to "
                                         "command it: build MonitorSupervisor with planner=...")
        if action is Action.HOLD_POSITION:
            box = self.reach(q)
            kept = self.stop(now, keep)
            lead = min(lead, MAX_LEAD)
            q_stop, t_stop = plan.stop_point(q, dq, cfg.stop_deceleration, cfg.hold_time, lead)
            if box is not None:
                q_stop = np.clip(q_stop, *box)
            if dq is not None:  # the controller starts from the arm now: at its speed, or slowed down since the sample
                q, dq = np.asarray(q, float), np.asarray(dq, float)
                t_stop = plan.stop_duration([(q + dq * lead, dq), (q + 0.5 * dq * lead, 0.5 * dq)], q_stop, t_stop)
            return Command(np.array([t_stop]), np.asarray(q_stop)[None, :], np.zeros((1, len(q)))), (
                "warning", "stopping: holding the current position" + (" (trajectory remainder kept for resume)"
                                                                        if kept else ""))
        resumed = self.resume(now, lambda q0, v0: plan.move_duration(q, q0, v0, cfg.resume_velocity_scale,
                                                                      cfg.resume_min_duration))
        if resumed is None:
            return None, ("info", "resuming: no interrupted trajectory to continue (released)")
        return resumed, ("info", f"resuming the interrupted trajectory: {len(resumed.t)} point(s), "
                                 f"{resumed.t[-1]:.2f} s")


__all__ = ["Command", "MAX_LEAD", "Planner", "StopResume", "StopResumeConfig"]
