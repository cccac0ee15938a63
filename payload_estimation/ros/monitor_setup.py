"""The collision monitor's core for a robot model and its parameter values, and the changed parameters that wait.

:func:`monitor_supervisor` builds :class:`collision.supervisor.MonitorSupervisor` as the ``collision_monitor`` node
runs it: the observer's dynamics and friction from ``dynamic_model``
(:func:`identification.dynamic_model.load_dynamic_model`), the settings from :func:`.monitor_params.monitor_configs`
and :func:`.monitor_params.calibration_config`,
the payload layer's limit check and the sampling layer's stop and resume rules
(:class:`collision.stop_resume.Planner`), layers collision/ does not import. :class:`PendingParameters` says which
changed parameters wait for a safe point. No ROS here: both run in unit tests.
"""

from __future__ import annotations

from functools import partial

from ..collision.observer import identified_friction
from ..collision.stop_resume import Planner
from ..collision.supervisor import MonitorSupervisor
from ..errors import PayloadEstimationError
from ..identification.dynamic_model import load_dynamic_model
from ..model import RobotDescription, require_masses
from ..payload.limits import check_payload
from ..sampling.poses import MotionLimitError, executed_duration, move_duration, stop_point
from .monitor_params import MONITOR_KEYS, REACTION_KEYS, calibration_config, monitor_configs, per_joint_check
from .parameters import ParameterError

STOP_MARGIN = 0.01
"""Of the velocity limits: how far below them the controller's path into a stop point stays."""


def planner(desc: RobotDescription) -> Planner:
    """The stop point and the resume's first segment of ``desc``'s arm (sampling.poses, its limits): the first
    segment at most ``scale`` of the velocity limits from rest to rest, stretched until the path the controller
    follows into the remainder's first point (with its velocity) stays within the limits."""
    def first_segment(q_from, q_to, v_to, scale: float, least: float) -> float:
        rest_to_rest = move_duration(q_from, q_to, desc.limits.velocity, scale, least)
        return executed_duration(desc, q_from, None, q_to, rest_to_rest, target_velocity=v_to)

    def stop_duration(starts, q_stop, t: float) -> float:
        """The stop's duration ``t`` (s), stretched until the controller's path from each start to ``q_stop`` stays
        within the velocity limits (chaos seed 1: a stop from a move near the limit needed 2.243 of E1's 2.234 rad/s
        in 0.2 s, the arm slower than in the sample the stop point came from, and the simulator refused it)."""
        try:
            return max(executed_duration(desc, q0, v0, q_stop, t, margin=STOP_MARGIN, max_duration=max(2.0, 4 * t))
                       for q0, v0 in starts)
        except MotionLimitError:  # already above the limits: nothing slower helps
            return t

    return Planner(partial(stop_point, desc), first_segment, stop_duration)


def monitor_supervisor(desc: RobotDescription, values: dict, sampling: bool = False) -> tuple[MonitorSupervisor, str]:
    """The monitor's core for ``desc`` and the node's parameter ``values``, and the note saying which dynamic model
    the observer uses. ``sampling``: the sampler's active flag now. Raises :class:`ParameterError` (nothing built)
    for per-joint parameters of another length or a ``dynamic_model`` that does not load or fit ``desc``."""
    err = per_joint_check(desc.n)(values)
    if err:
        raise ParameterError(err)
    spec = values["dynamic_model"]
    try:
        if spec in ("", "nominal"):
            require_masses(desc, "the collision monitor with dynamic_model '' (the robot description)")
        dm = load_dynamic_model(spec or None, desc)
    except (OSError, PayloadEstimationError) as exc:
        raise ParameterError(f"dynamic_model {spec!r}: {exc}") from exc
    f = dm.friction
    sup = MonitorSupervisor(dm.dynamics(), *monitor_configs(values), frame=desc.payload_frame_name,
                            limit_check=check_payload, friction=identified_friction(f.viscous, f.coulomb, f.offset),
                            link_names=tuple(desc.link_frame_name(k) for k in range(1, desc.n + 1)),
                            sampling=sampling, planner=planner(desc), calibration=calibration_config(values))
    return sup, dm.note


class PendingParameters:
    """Parameter names changed and not applied yet: the monitor's settings wait while a collision is reported, the
    reaction's while the arm is stopped or resuming (:attr:`collision.supervisor.MonitorSupervisor.pending`)."""

    def __init__(self):
        self.names: set[str] = set()

    def changed(self, names: set[str]) -> None:
        self.names |= set(names)

    def waiting(self, sup: MonitorSupervisor | None) -> set[str]:
        """The changed names still waiting (all of the monitor's and the reaction's before a robot model)."""
        waits = {"monitor", "reaction"} if sup is None else sup.pending
        self.names = {k for k in self.names if ("monitor" in waits and k in MONITOR_KEYS)
                      or ("reaction" in waits and k in REACTION_KEYS)}
        return self.names


__all__ = ["PendingParameters", "monitor_supervisor", "planner"]
