"""A sampling run on the MuJoCo arm without ROS: what the three nodes do, stepped in one loop.

For benches and tests that need many runs (random pick configurations, Monte-Carlo): the ``payload_sampler`` logic
(:class:`.sampling_run.SamplingRun`, the static pre-check of :class:`.sampler.Sampler`), the ``payload_estimator``
rules (:class:`payload.estimator.PayloadEstimator`: captures, recording, reference run, fits, with the node's
parameter defaults unless ``cfg.estimator`` changes them) and the ``collision_monitor`` rules
(:class:`collision.supervisor.MonitorSupervisor`: residual, provisional payload and thresholds while sampling,
estimate acceptance; no reaction: the run's collision gate handles a detection) — the same core calls the nodes
make, wired as the nodes are by :class:`.node_cores.NodeCores`, at the simulator's rate, with no DDS in between.
The estimator uses the robot description's model (no calibration file of this machine). It reports the estimate,
the run's outcome, every commanded point and the peak residual relative to the sampling threshold (what would have
raised a false collision).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..collision.monitor import MonitorConfig
from ..collision.supervisor import SupervisorConfig
from ..errors import PayloadEstimationError
from ..model.dynamics import RigidBodyDynamics
from ..model.parameters import BodyInertia
from ..payload.estimate import PayloadEstimate
from ..payload.estimator import UNLOADED, EstimatorConfig
from ..payload.limits import check_payload
from ..sim import SensorConfig, SimConfig, SimulatedArm
from .excitation_sequence import Excite
from .node_cores import NodeCores
from .payload_excitation import ExcitationPlan, ExcitationPlanConfig
from .poses import PosePlanConfig
from .run_states import Outcome
from .sampler import SamplerConfig, commanded_points
from .sampling_run import (
    Finished,
    Hold,
    Observation,
    PlanMotion,
    RunConfig,
    RunMode,
    RunSpec,
    SamplingRun,
)
from .sequence import Estimate, Move, SequenceConfig


@dataclass(frozen=True)
class BareRunConfig:
    """Everything of a bare run: plan/sequence/run (default: the sampler node's, :class:`.sampler.SamplerConfig`),
    the estimator's settings (default: the node's; its static test is also the sampler's pre-check), the monitor
    and its rules (the node's defaults, no reaction), the simulated sensor (noise N m, offsets N m) and the model
    error; ``excitation``: a dynamic run with this plan (the node's: ``SamplerConfig().excitation()``)."""

    plan: PosePlanConfig = field(default_factory=lambda: SamplerConfig().pose_plan())
    sequence: SequenceConfig = field(default_factory=lambda: SamplerConfig().sequence())
    run: RunConfig = field(default_factory=lambda: SamplerConfig().run_config())
    estimator: EstimatorConfig = field(default_factory=EstimatorConfig)
    monitor: MonitorConfig = field(default_factory=lambda: MonitorConfig(contact=None))
    supervisor: SupervisorConfig = field(default_factory=lambda: SupervisorConfig(policy="none"))
    noise_std: float = 0.1
    offsets: np.ndarray | float = 0.0
    model_error: float = 0.03
    seed: int = 0
    grasp_settle: float = 0.5
    excitation: ExcitationPlanConfig | None = None
    reference: bool = True


@dataclass
class BareRunResult:
    """Outcome, estimate (None if none), robot time of the ``sample`` call (s), commanded points (rad),
    collisions the monitor raised while sampling, and the peak |r| / threshold while sampling; for a
    dynamic run the robot time of its reference run (s, before the grasp; None without), the plan, and
    why the reference run failed ("" if it did not; where it found no safe excitation the sample uses
    the static poses, as the sampler's auto mode does), and why the monitor refused the estimate ("" if it
    took it)."""

    finished: Finished
    estimate: PayloadEstimate | None
    duration: float
    commands: list[np.ndarray]
    collisions: int
    peak_ratio: float
    q0: np.ndarray | None
    reference_duration: float | None = None
    plan: ExcitationPlan | None = None
    reference_error: str = ""
    monitor_refusal: str = ""


def bare_run(desc, q_pick: np.ndarray, payload: BodyInertia | None, cfg: BareRunConfig | None = None) -> BareRunResult:
    """Grasp ``payload`` at rest at ``q_pick`` (rad) on the simulated arm, then one ``~/sample`` request;
    with ``cfg.excitation`` a dynamic one, after a ``~/record_reference`` run before the grasp when
    ``cfg.reference``. An unloaded capture (``~/capture_unloaded``) is taken at rest before the grasp;
    :class:`PayloadEstimationError` if the arm is not static for it."""
    cfg = cfg or BareRunConfig()
    dyn = RigidBodyDynamics(desc)
    arm = SimulatedArm(desc, SimConfig(seed=cfg.seed, model_error=cfg.model_error,
                                       sensor=SensorConfig(noise_std=cfg.noise_std, offset=cfg.offsets)))
    arm.reset(q_pick)
    cores = NodeCores(dyn, cfg.estimator, cfg.monitor, cfg.supervisor, limit_check=check_payload)
    estimator, sampler, sup = cores.estimator, cores.sampler, cores.monitor
    # what the bare run measures of the monitor: collisions raised while sampling, peak |r| / threshold from when
    # the residual counts (the grasp's own residual before the first provisional fit is a legitimate detection
    # that the run's collision gate handles)
    state = {"collisions": 0, "peak": 0.0, "count_from": None}

    def step(seconds: float) -> None:
        for s in arm.run(seconds):
            st = cores.joint_state(s.t, s.q, s.dq, s.tau)
            if st.fit is not None and state["count_from"] is None:
                state["count_from"] = s.t + sup.settle  # the residual has converged to the fit
            ev = st.monitor.event
            if ev is not None and ev.active and cores.active:
                state["collisions"] += 1
            if cores.active and state["count_from"] is not None and s.t >= state["count_from"]:
                det = sup.mon.detector
                state["peak"] = max(state["peak"], float(np.max(np.abs(st.monitor.residual) / det.thresholds)))

    def drive(run: SamplingRun, commands: list[np.ndarray]) -> tuple[Finished, PayloadEstimate | None]:
        """Carry out ``run``'s actions until it finishes: (outcome, the estimate the estimator accepted)."""
        result = None
        pending: tuple[str, bool, str] | None = None
        while True:
            s = arm.state()
            if pending is not None:
                run.answered(pending[0], pending[1], pending[2], s.t)
                pending = None
            static = run.wants_static and sampler.static()
            obs = Observation(t=s.t, wall=s.t, q=s.q, dq=s.dq, static=static, stream_age=0.0,
                              collision=sup.mon.detector.in_collision, collisions=state["collisions"])
            for act in run.update(obs):
                if isinstance(act, PlanMotion):  # inline: the simulated arm waits (no stream to starve)
                    run.planned(act.compute())
                elif isinstance(act, (Move, Hold, Excite)):  # what the node commands
                    targets = [p[1] for p in act.points] if isinstance(act, Excite) else [act.target]
                    commands.extend(np.asarray(q, float).copy() for q in targets)
                    arm.set_trajectory(commanded_points(act))
                elif isinstance(act, Finished):
                    return act, result
                else:  # active, clear, capture, record, estimate: the other nodes' side
                    answer, est = cores.carry_out(run.mode, act)
                    if answer is not None:
                        pending = answer
                    if isinstance(act, Estimate):
                        result = est
            step(arm.dt)

    step(1.0)
    anchor = estimator.capture(UNLOADED, 0.0)
    if not anchor.ok:
        raise PayloadEstimationError(f"bare run at {np.round(np.degrees(q_pick), 2).tolist()} deg: {anchor.message}")
    commands: list[np.ndarray] = []
    reference_plan: ExcitationPlan | None = None
    reference_duration: float | None = None
    excitation, reference_error = cfg.excitation, ""
    if cfg.excitation is not None and cfg.reference:
        t_ref = arm.time
        run = SamplingRun(dyn, RunSpec(RunMode.RECORD_REFERENCE, cfg.plan, cfg.sequence, cfg.run, cfg.excitation),
                          arm.time, arm.time)
        fin, _ = drive(run, commands)
        reference_duration = arm.time - t_ref
        if fin.ok:
            reference_plan = run.excitation_plan
        elif fin.code is Outcome.PLAN_FAILED:  # no safe excitation here: the sampler's auto mode samples static poses
            excitation, reference_error = None, fin.text
        else:
            return BareRunResult(fin, None, 0.0, commands, state["collisions"], state["peak"], run.q0,
                                 reference_duration, run.excitation_plan, fin.text)
    if payload is not None:
        arm.attach_payload(payload)
    step(cfg.grasp_settle)
    t_start = arm.time
    mode = RunMode.STATIC if excitation is None else RunMode.DYNAMIC
    run = SamplingRun(dyn, RunSpec(mode, cfg.plan, cfg.sequence, cfg.run, excitation, reference_plan),
                      arm.time, arm.time)
    fin, est = drive(run, commands)
    return BareRunResult(fin, est, arm.time - t_start, commands, state["collisions"], state["peak"], run.q0,
                         reference_duration, run.excitation_plan, reference_error, cores.monitor_refusal)


__all__ = ["bare_run", "BareRunConfig", "BareRunResult"]
