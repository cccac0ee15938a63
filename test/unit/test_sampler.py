"""The payload_sampler's core (sampling.sampler) without ROS: parameters to a run, the mode of ~/sample,
what outlives a run (anchor, reference plan), the services' refusals, the status and its levels.

Requests are carried out here as the node carries them out (sampling_run's kinematic arm, the estimator
answering at once); these rules were only tested over DDS before (test_nodes, test_sampler_planning).
"""

from __future__ import annotations

import threading

import numpy as np
import pytest
from test_sampling_run import DT, Q0, KinematicArm

from payload_estimation.errors import PayloadEstimationError
from payload_estimation.model.dynamics import RigidBodyDynamics
from payload_estimation.model.robot_file import load_robot
from payload_estimation.ros.node_support import settle_config
from payload_estimation.ros.sampler_params import PARAMS, change_note, sampler_config
from payload_estimation.sampling.bare_run import BareRunConfig
from payload_estimation.sampling.excitation_sequence import Excite, Record
from payload_estimation.sampling.poses import MoveTiming, PosePlanConfig
from payload_estimation.sampling.sampler import (
    ERROR,
    MONITOR_STATUS_AGE,
    OK,
    WARN,
    PlanWorker,
    Sampler,
    SamplerConfig,
    SamplerRefused,
    answer_text,
    commanded_points,
    compute_plan,
    outcome_level,
    run_spec,
    sample_mode,
)
from payload_estimation.sampling.sampling_run import (
    Finished,
    Hold,
    PlanMotion,
    PlannedMotion,
    RunMode,
    RunSpec,
    SetActive,
)
from payload_estimation.sampling.sequence import Capture, Estimate, Move, SequenceConfig

DEFAULTS = {p.name: p.default for p in PARAMS.params}
"""The node's parameter values as declared (its ParameterTable)."""
FAST = {**DEFAULTS, "n_poses": 6, "dwell": 0.3, "pick_rest_timeout": 1.0, "monitor_fit_delay": 0.05}


@pytest.fixture(scope="module")
def dyn():
    return RigidBodyDynamics(load_robot("lwr4"))


def sampler_at(dyn, q=Q0, t: float = 0.0) -> Sampler:
    """A sampler configured as the node's defaults that has seen the arm at rest at ``q`` until ``t``."""
    sampler = Sampler()
    sampler.configure(settle_config(DEFAULTS), dyn.desc.joint_names)
    rest(sampler, q, t)
    return sampler


def rest(sampler: Sampler, q, t: float) -> None:
    """joint_states at rest at ``q`` over the 0.2 s before ``t``."""
    for tk in np.arange(t - 0.2, t + 1e-9, DT):
        sampler.joint_state(float(tk), np.asarray(q, float), np.zeros(len(q)), np.zeros(len(q)))


def serve(sampler: Sampler, request: str, dyn, arm: KinematicArm, t: float, values: dict | None = None,
          fault: dict | None = None, max_t: float = 30.0) -> tuple[Finished, float]:
    """One ``request`` through ``sampler`` as the node carries it out: (the answered outcome, t at its end).
    ``fault``: ``cancel_at`` or ``collision_at`` (s into the run), or ``cancel_after_estimate`` (True)."""
    fault = dict(fault or {})
    rest(sampler, arm.q, t)
    run, _ = sampler.start(request, sampler_config(values or FAST), dyn, "", t, t)
    t_start, pending = t, None
    while t - t_start < max_t:
        t += DT
        arm.step(t)
        if t - t_start >= fault.get("cancel_at", np.inf):
            sampler.cancel()
            del fault["cancel_at"]
        sampler.collision_flag(t - t_start >= fault.get("collision_at", np.inf))
        if pending is not None and t >= pending[1]:
            run.answered(pending[0], True, "answer", t)
            if pending[0] == "estimate" and fault.pop("cancel_after_estimate", False):
                fault["cancel_at"] = t - t_start + DT
            pending = None
        sampler.joint_state(t, arm.q.copy(), arm.dq.copy(), np.zeros(arm.q.size))  # the static check's window
        obs = sampler.observation(t, t, 0.0, True, False)
        for act in run.update(obs):
            if isinstance(act, PlanMotion):
                res, trace = compute_plan(act)
                assert not trace, trace
                run.planned(res)
            elif isinstance(act, (Move, Hold)):
                arm.command(act.target, act.duration, t)
            elif isinstance(act, Excite):  # rest to rest at q0: the arm ends where it started
                arm.command(act.points[-1][1], act.points[-1][0], t)
            elif isinstance(act, (Capture, Estimate, Record)):
                kind = "capture" if isinstance(act, Capture) else "record" if isinstance(act, Record) else "estimate"
                pending = (kind, t + 0.01)
            elif isinstance(act, Finished):
                return sampler.finish(act, t, t), t
    raise AssertionError(f"run did not finish within {max_t} s (phase {run.phase})")


# ---------------------------------------------------------------------- parameters -> run


def test_run_spec_takes_every_parameter_into_the_run():
    values = {**DEFAULTS, "n_poses": 12, "amplitude_deg": 5.0, "limit_margin_deg": 2.0, "velocity_scale": 0.7,
              "min_duration": 0.4, "arrival_tolerance_deg": 0.8, "arrival_timeout": 3.0, "dwell": 1.5,
              "capture_period": 0.01, "collision_clear_timeout": 2.0, "monitor_fit_delay": 0.5,
              "pick_rest_timeout": 4.0, "joint_state_timeout": 0.7, "service_timeout": 5.0, "monitor_timeout": 9.0,
              "sweep_poses": 20, "sweep_amplitude_deg": 15.0, "sweep_velocity_scale": 0.3,
              "excitation_duration": 2.0, "excitation_harmonics": 4, "excitation_velocity_scale": 0.6,
              "excitation_max_acceleration": 20.0}
    spec = run_spec(sampler_config(values), RunMode.STATIC)
    p, s, r = spec.plan, spec.sequence, spec.run
    assert spec.mode is RunMode.STATIC and spec.excitation is None and spec.reference_plan is None
    assert (p.n_poses, p.amplitude_deg, p.limit_margin_deg, p.velocity_scale, p.min_duration) == (12, 5.0, 2.0, 0.7,
                                                                                                  0.4)
    assert p.max_candidates == PosePlanConfig.max_candidates
    assert (s.velocity_scale, s.min_duration, s.arrival_timeout, s.dwell, s.capture_period) == (0.7, 0.4, 3.0, 1.5,
                                                                                                0.01)
    assert s.arrival_tolerance == pytest.approx(np.radians(0.8)) and s.clear_timeout == pytest.approx(2.5)
    assert (r.pick_rest_timeout, r.monitor_fit_delay, r.joint_state_timeout, r.service_timeout, r.monitor_timeout) == (
        4.0, 0.5, 0.7, 5.0, 9.0)
    assert r.start_tolerance == pytest.approx(np.radians(0.8))
    sweep = run_spec(sampler_config(values), RunMode.SWEEP)
    assert (sweep.plan.n_poses, sweep.plan.amplitude_deg, sweep.plan.velocity_scale) == (20, 15.0, 0.3)
    assert sweep.sequence.velocity_scale == 0.3 and sweep.plan.max_candidates == 1000 and sweep.excitation is None
    for mode in (RunMode.DYNAMIC, RunMode.RECORD_REFERENCE):
        e = run_spec(sampler_config(values), mode).excitation
        assert (e.duration, e.amplitude_deg, e.limit_margin_deg, e.velocity_scale, e.max_acceleration,
                e.harmonics) == (2.0, 5.0, 2.0, 0.6, 20.0, 4)


def test_the_node_defaults_are_a_valid_run_of_every_mode():
    for mode in RunMode:
        spec = run_spec(sampler_config(DEFAULTS), mode)
        assert spec.mode is mode and (spec.excitation is not None) == mode.excites
    assert run_spec(sampler_config(DEFAULTS), RunMode.STATIC).plan.n_poses == 10  # the paper's 10 poses, ±7°
    assert run_spec(sampler_config(DEFAULTS), RunMode.STATIC).plan.amplitude_deg == 7.0


def test_a_run_spec_refuses_a_mode_without_its_settings():
    static = run_spec(sampler_config(DEFAULTS), RunMode.STATIC)
    dynamic = run_spec(sampler_config(DEFAULTS), RunMode.DYNAMIC)
    with pytest.raises(PayloadEstimationError, match="dynamic run needs excitation"):
        RunSpec(RunMode.DYNAMIC, static.plan, static.sequence)
    with pytest.raises(PayloadEstimationError, match="static run takes no excitation"):
        RunSpec(RunMode.STATIC, static.plan, static.sequence, excitation=dynamic.excitation)
    assert RunMode.SWEEP.unloaded and RunMode.RECORD_REFERENCE.unloaded and not RunMode.DYNAMIC.unloaded


def test_the_node_parameter_tables_defaults_are_the_sampler_config_and_the_bare_runs():
    """One copy of the defaults: SamplerConfig() is what the node builds from its table's defaults (the shared
    joint_state_timeout row included), and a bare run (the benches' ground truth) runs the node's plan, sequence
    and run timing (it waited 1.0 s for the grasp detection to clear where the node waits 1.25 s)."""
    node = sampler_config(DEFAULTS)
    assert SamplerConfig() == node
    spec, bare = run_spec(node, RunMode.DYNAMIC), BareRunConfig()
    assert (bare.plan, bare.sequence, bare.run) == (spec.plan, spec.sequence, spec.run)
    assert bare.sequence.clear_timeout == pytest.approx(DEFAULTS["collision_clear_timeout"]
                                                        + DEFAULTS["monitor_fit_delay"])
    assert spec.excitation == node.excitation()
    assert sampler_config({**DEFAULTS, "n_poses": 12, "require_monitor": False}).n_poses == 12
    assert "parameters changed: dwell, n_poses (applies from the next ~/sample)" in change_note({"n_poses", "dwell"})


def test_a_moves_timing_has_one_home_the_nodes():
    """velocity_scale and min_duration were 0.9 / 0.25 s (the node), 0.7 / 0.35 s (the sequence) and 0.5 / 0.4 s (the
    pose plan): a script building the low-level configs ran other moves than the node (issue 49)."""
    home = MoveTiming()
    node = sampler_config(DEFAULTS)
    for cfg in (node, PosePlanConfig(), SequenceConfig(), node.pose_plan(), node.sequence()):
        assert (cfg.velocity_scale, cfg.min_duration) == (home.velocity_scale, home.min_duration), cfg
    assert (DEFAULTS["velocity_scale"], DEFAULTS["min_duration"]) == (home.velocity_scale, home.min_duration)


# ---------------------------------------------------------------------- the mode of ~/sample


def test_auto_samples_dynamically_only_at_the_reference_runs_pick_configuration(dyn):
    sampler = sampler_at(dyn)
    assert sample_mode("auto", None, Q0, np.radians(0.5))[0] is RunMode.STATIC
    mode, plan, how = sample_mode("dynamic", None, Q0, np.radians(0.5))
    assert mode is RunMode.DYNAMIC and plan is None and "one-shot" in how
    fin, t = serve(sampler, "~/record_reference", dyn, KinematicArm(Q0), 0.0)
    assert fin.ok and fin.text.startswith("reference recorded from a 1.60 s excitation"), fin.text
    ref = sampler.reference_plan
    assert ref is not None and np.allclose(ref.envelope.q0, Q0) and sampler.last_reference_duration > 1.6
    assert sample_mode("auto", ref, Q0 + np.radians(0.4), np.radians(0.5))[:2] == (RunMode.DYNAMIC, ref)
    assert sample_mode("auto", ref, Q0 + np.radians(0.6), np.radians(0.5))[:2] == (RunMode.STATIC, None)
    assert sample_mode("static", ref, Q0, np.radians(0.5))[:2] == (RunMode.STATIC, None)
    assert sample_mode("dynamic", ref, Q0 + np.radians(0.6), np.radians(0.5))[:2] == (RunMode.DYNAMIC, None)
    run, how = sampler.start("~/sample", sampler_config(FAST), dyn, "", t, t)
    assert run.mode is RunMode.DYNAMIC and run.reference_plan is ref and how.startswith("dynamic, differential")
    vals = sampler.status(None, False, "auto")[2]
    assert vals["reference_pick_configuration_deg"] == str(np.round(np.degrees(Q0), 3).tolist())


def test_a_failed_reference_run_keeps_the_earlier_reference(dyn):
    sampler = sampler_at(dyn)
    serve(sampler, "~/record_reference", dyn, KinematicArm(Q0), 0.0)
    ref = sampler.reference_plan
    fin, _ = serve(sampler, "~/record_reference", dyn, KinematicArm(Q0), 10.0, fault={"cancel_at": 0.0})
    assert fin.code == "cancelled" and sampler.reference_plan is ref


# ---------------------------------------------------------------------- services and what outlives a run


def test_one_run_at_a_time_and_none_without_a_robot_model(dyn):
    sampler = sampler_at(dyn)
    with pytest.raises(SamplerRefused, match="no robot model \\(robot 'x' not found\\)"):
        sampler.start("~/sample", sampler_config(FAST), None, "robot 'x' not found", 0.0, 0.0)
    with pytest.raises(SamplerRefused, match="nothing to cancel: the sampler is idle"):
        sampler.cancel()
    sampler.start("~/sweep", sampler_config(FAST), dyn, "", 0.0, 0.0)
    with pytest.raises(SamplerRefused, match="already in progress \\(call ~/cancel to stop it\\)"):
        sampler.start("~/sample", sampler_config(FAST), dyn, "", 0.0, 0.0)
    with pytest.raises(SamplerRefused, match="in progress \\(call ~/cancel first\\)"):
        sampler.forget_pick()
    assert sampler.run.mode is RunMode.SWEEP and sampler.run.unloaded


def test_a_cancel_is_a_warning_and_the_next_run_keeps_its_pick_configuration_until_forgotten(dyn):
    sampler, arm = sampler_at(dyn), KinematicArm(Q0)
    assert sampler.status(None, False, "auto")[:2] == (OK, "idle")
    fin, t = serve(sampler, "~/sample", dyn, arm, 0.0, fault={"cancel_at": 0.9})
    assert fin.code == "cancelled" and answer_text(fin) == fin.text  # the user's: no "aborted:"
    assert "s node-clock time" in fin.text and "s wall" in fin.text and "nan" not in fin.text, fin.text
    level, text, vals = sampler.status(None, False, "auto")
    assert level == WARN and text.startswith("cancelled by the user") and vals["last_outcome"] == "cancelled"
    assert "nan" not in str(vals) and vals["busy"] is False
    assert np.array_equal(sampler.anchor.q0, Q0)
    assert vals["pick_anchor_deg"] == str(np.round(np.degrees(Q0), 3).tolist())
    rest(sampler, Q0 + np.radians(3.0), t + 1.0)
    run, _ = sampler.start("~/sample", sampler_config(FAST), dyn, "", t + 1.0, t + 1.0)
    assert run.anchor is sampler.anchor  # the retry keeps the aborted run's pick configuration
    sampler.finish(Finished(False, "refused: x", sampler.anchor, "refused"), t, t)
    dropped, text = sampler.forget_pick()
    assert dropped and "forgot the pick configuration [10.0, 40.0, -5.0, -70.0, 15.0, 50.0, 20.0] deg" in text
    assert sampler.anchor is None and sampler.status(None, False, "auto")[2]["pick_anchor_deg"] == ""
    assert sampler.forget_pick() == (False, "no pick configuration was kept: the next ~/sample samples around the "
                                            "current pose")


def test_a_cancel_after_the_estimate_says_the_estimate_is_published_and_in_use(dyn):
    """The estimate overlaps the return: a cancel that comes after its answer cannot take back what the estimator
    published and the monitor applied, and the answer says so instead of a bare "cancelled" (a user saw the
    monitor switch to the new payload while ~/sample answered "cancelled")."""
    sampler, arm = sampler_at(dyn), KinematicArm(Q0)
    fin, _ = serve(sampler, "~/sample", dyn, arm, 0.0, fault={"cancel_after_estimate": True})
    assert fin.code == "cancelled" and not fin.ok
    assert fin.text.startswith("cancelled by the user (~/cancel) after the estimate was published and taken into "
                               "use (answer); the run still returns to the pick configuration"), fin.text
    fin, _ = serve(sampler_at(dyn), "~/sample", dyn, KinematicArm(Q0), 0.0, fault={"cancel_at": 0.9})
    assert "after the estimate" not in fin.text  # a cancel before it: the plain words


def test_a_past_fault_is_a_warning_while_idle_and_success_drops_the_anchor(dyn):
    """Issue 47's decision: after an aborted run the idle sampler's status is WARN with the reason (a past fault;
    the run's own log line was ERROR when it happened), ERROR only while a fault persists (no robot model)."""
    sampler, arm = sampler_at(dyn), KinematicArm(Q0)
    fin, t = serve(sampler, "~/sample", dyn, arm, 0.0, fault={"collision_at": 0.9})
    assert fin.code == "collision" and answer_text(fin).startswith("aborted: collision reported")
    assert outcome_level(fin) == ERROR  # the outcome's log severity
    level, text, vals = sampler.status(None, False, "auto")
    assert level == WARN and text.startswith("aborted: collision reported"), text
    assert vals["last_outcome"] == "collision" and vals["last_ok"] is False
    assert sampler.status("no robot_description received", False, "auto")[0] == ERROR  # a fault that persists
    assert sampler.collisions == 1 and sampler.anchor is not None
    sampler.collision_flag(False)
    fin, _ = serve(sampler, "~/sample", dyn, arm, t)  # returns to q0 first, then samples
    assert fin.ok and sampler.anchor is None, fin.text
    level, text, vals = sampler.status(None, False, "auto")
    assert level == OK and text.startswith("done: estimated from 6 poses") and vals["last_ok"] is True
    assert vals["attempts"] >= 6 and vals["sequence_s"] > 0
    assert vals["last_pick_configuration_deg"] == str(np.round(np.degrees(Q0), 4).tolist())


def test_status_names_the_missing_model_the_lost_stream_and_the_phase(dyn):
    sampler = sampler_at(dyn)
    assert sampler.status("no robot_description received", False, "auto")[:2] == (ERROR,
                                                                                   "no robot_description received")
    assert sampler.status(None, True, "auto")[0] == WARN
    sampler.start("~/sample", sampler_config(FAST), dyn, "", 0.0, 0.0)
    level, text, vals = sampler.status(None, True, "static")
    assert (level, text) == (OK, "sampling: waiting for joint_states, the estimator and the collision monitor")
    assert vals["busy"] is True and vals["phase"] == "waiting" and vals["mode"] == "static"


def test_the_node_clock_going_back_leaves_the_duration_unknown(dyn):
    sampler = sampler_at(dyn)
    sampler.start("~/sample", sampler_config(FAST), dyn, "", 100.0, 5.0)
    fin = sampler.finish(Finished(False, "the clock went back", None, "clock_restart"), 2.0, 7.5)
    assert fin.text.endswith("(took node-clock time unknown: the clock went back, 2.50 s wall)"), fin.text
    assert sampler.last_duration is None and sampler.last_wall_duration == 2.5 and sampler.run is None


# ---------------------------------------------------------------------- inputs


def test_the_collision_monitor_counts_while_its_status_is_fresh_and_below_error():
    sampler = Sampler()
    assert not sampler.monitor_ready(True, 0.0) and sampler.monitor_ready(False, 0.0)
    sampler.monitor_status(False, 10.0)
    assert sampler.monitor_ready(True, 10.0 + MONITOR_STATUS_AGE)
    assert not sampler.monitor_ready(True, 10.01 + MONITOR_STATUS_AGE)  # silent: it may have died
    sampler.monitor_status(True, 11.0, "not monitoring: joint_states lost for 0.62 s (collision detection is blind)")
    assert not sampler.monitor_ready(True, 11.0)
    obs = sampler.observation(11.0, 11.0, 0.0, True, True)
    assert not obs.monitor_ready and obs.monitor_says.startswith("not monitoring: joint_states lost")
    sampler.monitor_status(False, 12.0, "monitoring (unloaded)")
    assert sampler.observation(12.0, 12.0, 0.0, True, True).monitor_says == ""  # said only while it is ERROR


def test_collisions_count_rising_edges_of_the_flag():
    sampler = Sampler()
    for flag in (True, True, False, True, False, False):
        sampler.collision_flag(flag)
    obs = sampler.observation(0.0, 0.0, 0.0, True, False)
    assert sampler.collisions == 2 and obs.collisions == 2 and not obs.collision


def test_a_planning_bug_ends_the_run_with_its_traceback():
    class Broken:
        def compute(self):
            return np.zeros(3) @ np.zeros(4)  # a shape bug: not a refusal, not swallowed as one

    res, trace = compute_plan(Broken())
    assert res.plan is None and res.error.startswith("planning failed unexpectedly (ValueError: ")
    assert "Please report this" in res.error and "Traceback" in trace and "matmul" in trace


def test_the_plan_worker_plans_off_the_callers_thread_and_hands_over_only_to_the_current_run():
    """The node's planning: computed on the worker thread, ``notify`` from there, the result taken on the
    caller's thread; a run that ended meanwhile gets nothing; a planning bug is a failed plan with its trace."""
    woke, threads = threading.Semaphore(0), []

    class Job:
        def __init__(self, error: str):
            self.error = error

        def compute(self):
            threads.append(threading.current_thread().name)
            if self.error == "bug":
                raise ZeroDivisionError("a planning bug")
            return PlannedMotion(None, error=self.error)

    worker = PlanWorker(woke.release)
    ended, current = object(), object()
    try:
        worker.submit(ended, Job("for the run that ended"))
        worker.submit(current, Job("for the current run"))
        worker.submit(current, Job("bug"))
        assert all(woke.acquire(timeout=10.0) for _ in range(3))
        got = worker.take(current)
    finally:
        worker.shutdown()
    assert threads == ["payload_sampler_planning_0"] * 3
    assert [None if r is None else r.error for r, _ in got[:2]] == [None, "for the current run"]
    assert got[2][0].error.startswith("planning failed unexpectedly (ZeroDivisionError") and "Traceback" in got[2][1]
    assert worker.take(current) == []


def test_the_commanded_trajectory_of_a_move_and_of_an_excitation():
    """A move or a hold: one point, no velocity (zero at the end); an excitation: its points after the start
    (where the arm is), with their velocities: what the node publishes and the bare run's arm follows."""
    q = np.arange(7.0)
    assert commanded_points(Move(q, 0.8, "pose 1")) == [(0.8, q, None)]
    assert commanded_points(Hold(q, 0.2, "hold")) == [(0.2, q, None)]
    pts = [(0.0, q, 0 * q), (0.5, q + 1, q), (1.0, q, 0 * q)]
    assert commanded_points(Excite(pts, 1.0)) == pts[1:]


def test_the_first_action_of_a_payload_run_raises_active_and_an_unloaded_one_does_not(dyn):
    for request, raised in (("~/sample", True), ("~/sweep", False), ("~/record_reference", False)):
        sampler = sampler_at(dyn)
        run, _ = sampler.start(request, sampler_config(FAST), dyn, "", 0.0, 0.0)
        out = run.update(sampler.observation(0.0, 0.0, 0.0, True, False))
        assert any(isinstance(a, SetActive) and a.active for a in out) == raised, (request, out)


def test_a_reference_run_that_failed_for_a_stream_gap_is_tried_once_more_and_says_so():
    """Issue 48: the demo's first record_reference on a loaded machine failed with the estimator's 'the stream has a
    372 ms gap'. A reference run that failed for a real gap in joint_states (a recording refused for a gap, or the
    run's watchdog) is tried once more by itself; anything else (a collision, a cancel, a second failure, another
    request) is the answer as it is."""
    from payload_estimation.sampling.sampler import (
        AUTO_STREAM_TIMEOUT,
        RETRIED_NOTE,
        retried,
        retry_reason,
        stream_fault,
    )
    from payload_estimation.stream.watchdog import AUTO_MIN

    gap = Finished(False, "estimator rejected the fit: reference run: the stream has a 372 ms gap at 1.204 s (more "
                          "than 50 ms: the motion cannot be filtered across it) (arm returned to the pick "
                          "configuration)", code="estimate_rejected")
    lost = Finished(False, "joint_states lost for 0.53 s (joint_state_timeout 0.50 s); nothing more was commanded",
                    code="stream_lost")
    assert retry_reason("~/record_reference", gap, 1) == "the stream has a 372 ms gap"
    assert retry_reason("~/record_reference", lost, 1) == "joint_states lost for 0.53 s"
    assert retry_reason("~/record_reference", gap, 2) == ""  # once
    assert retry_reason("~/sweep", lost, 1) == "joint_states lost for 0.53 s"  # the unloaded calibration sweep too
    assert retry_reason("~/sample", gap, 1) == "" and retry_reason("~/sample", lost, 1) == ""  # its caller decides
    for other in (Finished(False, "collision reported by the collision monitor", code="collision"),
                  Finished(False, "estimator rejected the fit: mass σ too large", code="estimate_rejected"),
                  Finished(False, "cancelled (joint_states lost for 0.60 s)", code="cancelled"),
                  Finished(True, "reference recorded from a 1.60 s excitation")):
        assert retry_reason("~/record_reference", other, 1) == ""
    # the collision monitor blind because joint_states were lost to it (its status quoted): the stream's gap too;
    # a monitor that went silent, or blind for another reason, is not retried
    blind = Finished(False, "the collision monitor stopped monitoring (collision_monitor/status ERROR or silent): not "
                            "monitoring: joint_states lost for 0.62 s (collision detection is blind); holding",
                     code="monitor_lost")
    assert retry_reason("~/record_reference", blind, 1) == "joint_states lost for 0.62 s"
    silent = Finished(False, "the collision monitor stopped monitoring (collision_monitor/status ERROR or silent)",
                      code="monitor_lost")
    assert retry_reason("~/record_reference", silent, 1) == ""
    second = Finished(True, "reference recorded from a 1.60 s excitation around q0 = [...] deg")
    both = retried(gap, second)
    assert both.ok and both.text.startswith(second.text) and RETRIED_NOTE in both.text and "372 ms gap" in both.text
    assert stream_fault(both.text) == "the stream has a 372 ms gap"  # a caller sees it was retried: RETRIED_NOTE
    assert stream_fault(lost.text) and not stream_fault("joint_states lost for a while")
    # the automatic stream timeout of a run without a measured rate is the watchdog's
    assert AUTO_STREAM_TIMEOUT == AUTO_MIN and SamplerConfig().joint_state_timeout == 0.0
    assert SamplerConfig().run_config().joint_state_timeout == AUTO_MIN
    assert SamplerConfig(joint_state_timeout=2.0).run_config().joint_state_timeout == 2.0
