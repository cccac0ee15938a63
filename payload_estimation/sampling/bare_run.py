"""A sampling run on the MuJoCo arm without ROS: what the three nodes do, stepped in one loop.

For benches and tests that need many runs (random pick configurations, Monte-Carlo): the
``payload_sampler`` logic (:class:`.sampling_run.SamplingRun`), the ``payload_estimator`` captures
and fit (:func:`identification.static_fit.estimate_payload_static`) and the
``collision_monitor`` rules (:class:`collision.supervisor.MonitorSupervisor`: residual, provisional payload
and thresholds while sampling, estimate acceptance; no reaction: the run's collision gate handles a
detection) — the same core calls the nodes make, at the simulator's rate, with no DDS in between. It
reports the estimate, the run's outcome, every commanded point and the peak residual relative to the
sampling threshold (what would have raised a false collision).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from ..collision.monitor import MonitorConfig
from ..collision.supervisor import EstimateRefused, MonitorSupervisor, SupervisorConfig
from ..model.dynamics import RigidBodyDynamics
from ..model.parameters import BodyInertia
from ..payload.dynamic import DynamicFitConfig, MotionRecording, estimate_payload_dynamic
from ..payload.estimate import PayloadEstimate
from ..payload.limits import check_payload
from ..payload.static import StaticFitConfig, estimate_payload_static
from ..signals.settle import SampleWindow, SettleConfig
from ..sim import SensorConfig, SimConfig, SimulatedArm
from .excitation_sequence import Excite, Record
from .payload_excitation import ExcitationPlan, ExcitationPlanConfig
from .poses import PosePlanConfig
from .sampling_run import ClearCaptures, Finished, Hold, Observation, PlanMotion, RunConfig, SamplingRun, SetActive
from .sequence import Capture, Estimate, Move, SequenceConfig


@dataclass(frozen=True)
class BareRunConfig:
    """Everything of a bare run: plan/sequence/run as the sampler's parameters, the estimator's fit
    (method, noise, model uncertainty), the monitor and its rules (the node's defaults, no reaction), the
    simulated sensor (noise N m, offsets N m) and the model error."""

    plan: PosePlanConfig = field(default_factory=lambda: PosePlanConfig(velocity_scale=0.9, min_duration=0.25))
    sequence: SequenceConfig = field(default_factory=lambda: SequenceConfig(velocity_scale=0.9, min_duration=0.25))
    run: RunConfig = field(default_factory=RunConfig)
    settle: SettleConfig = field(default_factory=SettleConfig)
    fit: StaticFitConfig = field(default_factory=StaticFitConfig)
    monitor: MonitorConfig = field(default_factory=lambda: MonitorConfig(contact=None, quadrature="hold"))
    supervisor: SupervisorConfig = field(default_factory=lambda: SupervisorConfig(policy="none"))
    noise_std: float = 0.1
    offsets: np.ndarray | float = 0.0
    model_error: float = 0.03
    seed: int = 0
    grasp_settle: float = 0.5
    excitation: ExcitationPlanConfig | None = None
    reference: bool = True
    dynamic_fit: DynamicFitConfig = field(default_factory=DynamicFitConfig)


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
    ``cfg.reference``."""
    cfg = cfg or BareRunConfig()
    dyn = RigidBodyDynamics(desc)
    arm = SimulatedArm(desc, SimConfig(seed=cfg.seed, model_error=cfg.model_error,
                                       sensor=SensorConfig(noise_std=cfg.noise_std, offset=cfg.offsets)))
    arm.reset(q_pick)
    win = SampleWindow(horizon=max(0.5, 2 * cfg.settle.window, 1.25 * cfg.settle.max_window, 1.25))
    sup = MonitorSupervisor(dyn, cfg.monitor, cfg.supervisor, frame=desc.payload_frame_name,
                            limit_check=check_payload)
    # the run's view of the monitor: sampling flag, collisions raised while sampling, peak |r| / threshold from
    # when the residual counts (the grasp's own residual before the first provisional fit is a legitimate
    # detection that the run's collision gate handles)
    state = {"active": False, "collisions": 0, "peak": 0.0, "count_from": None, "refused": ""}

    def step(seconds: float) -> None:
        for s in arm.run(seconds):
            win.append(s.t, s.q, s.dq, s.tau)
            st = sup.update(s.t, s.q, s.dq, s.tau)
            if st.fit is not None and state["count_from"] is None:
                state["count_from"] = s.t + sup.settle  # the residual has converged to the fit
            ev = st.monitor.event
            if ev is not None and ev.active and state["active"]:
                state["collisions"] += 1
            if state["active"] and state["count_from"] is not None and s.t >= state["count_from"]:
                det = sup.mon.detector
                state["peak"] = max(state["peak"], float(np.max(np.abs(st.monitor.residual) / det.thresholds)))

    buffer: dict[str, list | None] = {"rows": None}  # the estimator's recording of (t, q, dq, tau)

    def advance() -> None:
        step(arm.dt)
        if buffer["rows"] is not None:
            s = arm.state()
            buffer["rows"].append((s.t, s.q, s.dq, s.tau))

    def drive(run: SamplingRun, commands: list[np.ndarray], reference: MotionRecording | None = None
              ) -> tuple[Finished, PayloadEstimate | MotionRecording | None]:
        """Carry out ``run``'s actions until it finishes: (outcome, estimate or stored reference recording)."""
        captures: list[tuple[np.ndarray, np.ndarray]] = []
        result = None
        pending: tuple[str, bool, str] | None = None
        while True:
            s = arm.state()
            if pending is not None:
                run.answered(pending[0], pending[1], pending[2], s.t)
                pending = None
            static = run.wants_static and win.check_static(cfg.settle).static
            obs = Observation(t=s.t, wall=s.t, q=s.q, dq=s.dq, static=static, stream_age=0.0,
                              collision=sup.mon.detector.in_collision, collisions=state["collisions"])
            for act in run.update(obs):
                if isinstance(act, SetActive):
                    state["active"] = act.active
                    sup.set_sampling(act.active)
                elif isinstance(act, ClearCaptures):
                    captures.clear()
                elif isinstance(act, PlanMotion):  # inline: the simulated arm waits (no stream to starve)
                    run.planned(act.compute())
                elif isinstance(act, (Move, Hold)):
                    commands.append(np.asarray(act.target, float).copy())
                    arm.set_trajectory([(act.duration, act.target, None)])
                elif isinstance(act, Excite):
                    commands.extend(np.asarray(p[1], float).copy() for p in act.points)
                    arm.set_trajectory([p for p in act.points if p[0] > 0])
                elif isinstance(act, Record):
                    buffer["rows"] = []
                    pending = ("record", True, "recording")
                elif isinstance(act, Capture):
                    r = win.check_static(cfg.settle)
                    if r.static:
                        captures.append((r.q, r.tau))
                    pending = ("capture", r.static, r.reason)
                elif isinstance(act, Estimate):
                    result, pending = estimate(run, captures, reference)
                elif isinstance(act, Finished):
                    buffer["rows"] = None
                    return act, result
            advance()

    def estimate(run: SamplingRun, captures: list, reference: MotionRecording | None):
        """What the estimator answers to the run's estimate request: (result, pending answer)."""
        try:
            if run.excitation is not None:
                rec = MotionRecording.from_rows(buffer["rows"])
                buffer["rows"] = None
                if run.reference:
                    return rec, ("estimate", True, "reference stored")
                est = estimate_payload_dynamic(dyn, rec, reference, cfg.dynamic_fit)
            else:
                q = np.array([c[0] for c in captures])
                tau = np.array([c[1] for c in captures])
                est = estimate_payload_static(dyn, q, tau, unloaded.q[None], unloaded.tau[None], cfg.fit)
        except ValueError as e:
            return None, ("estimate", False, str(e))
        try:
            sup.estimate(est, est.frame)  # the monitor's payload from now on, as the node takes a published one
        except EstimateRefused as e:  # the monitor keeps its provisional payload, as the node does
            state["refused"] = str(e)
        return est, ("estimate", True, "estimated")

    step(1.0)
    unloaded = win.check_static(replace(cfg.settle, min_average_samples=150, max_window=1.0))
    commands: list[np.ndarray] = []
    reference: MotionRecording | None = None
    reference_plan: ExcitationPlan | None = None
    reference_duration: float | None = None
    excitation, reference_error = cfg.excitation, ""
    if cfg.excitation is not None and cfg.reference:
        t_ref = arm.time
        run = SamplingRun(dyn, cfg.plan, cfg.sequence, cfg.run, arm.time, arm.time, excitation=cfg.excitation,
                          reference=True)
        fin, reference = drive(run, commands)
        reference_duration = arm.time - t_ref
        if fin.ok:
            reference_plan = run.excitation_plan
        elif fin.code == "plan_failed":  # no safe excitation here: the sampler's auto mode samples static poses
            excitation, reference_error = None, fin.text
        else:
            return BareRunResult(fin, None, 0.0, commands, state["collisions"], state["peak"], run.q0,
                                 reference_duration, run.excitation_plan, fin.text)
    if payload is not None:
        arm.attach_payload(payload)
    step(cfg.grasp_settle)
    t_start = arm.time
    run = SamplingRun(dyn, cfg.plan, cfg.sequence, cfg.run, arm.time, arm.time, excitation=excitation,
                      reference_plan=reference_plan)
    fin, est = drive(run, commands, reference)
    return BareRunResult(fin, est if isinstance(est, PayloadEstimate) else None, arm.time - t_start, commands,
                         state["collisions"], state["peak"], run.q0, reference_duration, run.excitation_plan,
                         reference_error, state["refused"])


__all__ = ["bare_run", "BareRunConfig", "BareRunResult"]
