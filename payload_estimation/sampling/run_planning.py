"""The motion of a sampling run, planned off the thread that handles joint_states.

:class:`PlanMotion` is the action a :class:`.sampling_run.SamplingRun` hands out once the arm rests at q0: the
static poses (or the sweep's) or one excitation (the reference run's re-centred, or a new one scaled for the
payload's mass not yet seen at rest), computed on any thread with its own dynamics model;
:class:`PlannedMotion` is its result (the plan, or why there is none).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace

import numpy as np

from ..errors import PayloadEstimationError
from ..model.description import RobotDescription
from ..model.dynamics import RigidBodyDynamics
from ..model.parameters import BodyInertia
from ..node_limits import MAX_PAYLOAD
from .payload_excitation import (
    ExcitationPlan,
    ExcitationPlanConfig,
    UnknownPayload,
    UnsafeExcitation,
    check_excitation,
    plan_payload_excitation,
    plan_tilted_excitation,
    unknown_mass_std,
    unknown_payload_torque,
)
from .poses import Envelope, PosePlan, PosePlanConfig
from .run_states import Outcome, RunMode


@dataclass(frozen=True, eq=False)
class PlannedMotion:
    """What :meth:`PlanMotion.compute` found: the ``plan`` (static poses or an excitation; None when
    nothing could be planned), ``fallback`` (why a dynamic run takes the static poses; "" if it does
    not), ``error`` (why nothing could be planned: the run ends with it; "" if planned), the ``code`` of
    that failure and ``seconds`` (wall) of computing."""

    plan: PosePlan | ExcitationPlan | None
    fallback: str = ""
    error: str = ""
    code: Outcome = Outcome.PLAN_FAILED
    seconds: float = 0.0


@dataclass(frozen=True, eq=False)
class PlanMotion:
    """Action: compute the run's motion with :meth:`compute` — CPU-bound, up to about a second (longer on
    a loaded machine) — on a thread that does not handle joint_states or the stream watchdog, and hand
    the result to :meth:`.sampling_run.SamplingRun.planned`; keep calling
    :meth:`.sampling_run.SamplingRun.update` meanwhile. The inputs are copies and the computation uses its own
    dynamics model: it may run on any thread.

    q0 (rad) and ``envelope``: the pick configuration and its box; ``poses``: the static pose set;
    ``mode`` the run's; ``excitation``: the plan configuration of an excitation (None: static poses),
    ``reference_plan``: the reference run's excitation to repeat; ``unknown_payload_torque`` (N m) and
    ``mass_limit`` (kg) as :class:`.sampling_run.RunConfig`."""

    desc: RobotDescription
    payload: BodyInertia | None
    q0: np.ndarray
    envelope: Envelope
    poses: PosePlanConfig
    mode: RunMode = RunMode.STATIC
    excitation: ExcitationPlanConfig | None = None
    reference_plan: ExcitationPlan | None = None
    unknown_payload_torque: float = 3.0
    mass_limit: float = MAX_PAYLOAD

    def compute(self) -> PlannedMotion:
        """The motion of the run (never raises for a motion that cannot be planned: see ``error``)."""
        start = time.perf_counter()
        dyn = RigidBodyDynamics(self.desc, self.payload)  # its own pinocchio data: this may run on another thread
        return replace(self._compute(dyn), seconds=time.perf_counter() - start)

    def _compute(self, dyn: RigidBodyDynamics) -> PlannedMotion:
        fallback = ""
        if self.excitation is not None:
            try:
                return PlannedMotion(self._excitation_plan(dyn))
            except UnsafeExcitation as e:
                if self.mode is RunMode.RECORD_REFERENCE:
                    return PlannedMotion(None, error=f"no reference recorded: {e}; sample uses the static poses at "
                                         "this pick configuration")
                fallback = f"static poses instead of the excitation: {e}"
            except PayloadEstimationError as e:
                return PlannedMotion(None, error=f"cannot plan the excitation at this pick configuration: {e}")
        try:
            sweep = self.mode is RunMode.SWEEP
            return PlannedMotion(plan_within(dyn, self.q0, self.poses, self.envelope, sweep), fallback)
        except PayloadEstimationError as e:
            return PlannedMotion(None, fallback, error=f"cannot plan poses at this pick configuration: {e}")

    def _excitation_plan(self, dyn: RigidBodyDynamics) -> ExcitationPlan:
        """Plan the excitation (or re-centre the reference run's) for the payload's mass not yet known at
        rest at q0 (e.g. stretched up, :class:`UnsafeExcitation`): its inertial torque along the motion
        could exceed ``unknown_payload_torque`` and read as a collision. A reference run plans for the
        payload it will be compared with (the same bound: it depends on q0 alone)."""
        unknown = UnknownPayload(unknown_mass_std(dyn, self.q0[None], self.mass_limit), self.unknown_payload_torque)
        if self.reference_plan is not None:
            plan = self.reference_plan.recentred(self.envelope)
            std = unknown_mass_std(dyn, plan.rest_poses, self.mass_limit)  # with a tilt: seen there too
            torque = unknown_payload_torque(dyn, plan.trajectory, std, unknown.k_sigma)
            if torque > unknown.torque_budget:
                raise UnsafeExcitation(f"the payload's mass does not show at rest here as it did where the "
                                       f"reference was recorded: its torque along the excitation could "
                                       f"reach {torque:.1f} N m (3 σ)")
        else:
            try:
                plan = plan_payload_excitation(dyn, self.q0, self.excitation, self.envelope, unknown)
            except UnsafeExcitation as e:  # stretched up: tilt first, where the mass shows
                plan = plan_tilted_excitation(dyn, self.excitation, self.envelope, unknown, self.mass_limit, str(e))
        check_excitation(plan, self.desc)
        return plan


def plan_within(dyn, q0: np.ndarray, config: PosePlanConfig, envelope: Envelope, sweep: bool = False) -> PosePlan:
    """plan_poses (or plan_sweep) around q0; the plan's envelope is the run's (identical unless anchored)."""
    from .poses import plan_poses
    from .sweep import plan_sweep

    if sweep:
        return plan_sweep(dyn, q0, config, envelope)
    plan = plan_poses(dyn, q0, config)
    return replace(plan, envelope=envelope) if plan.envelope is not envelope else plan


__all__ = ["PlanMotion", "PlannedMotion", "plan_within"]
