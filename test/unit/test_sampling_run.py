"""The sampling run (sampling.sampling_run) on a kinematic arm: sequence, aborts, return, anchor, envelope.

The arm here follows every commanded move with a quintic profile (or stops following when the test
says it is blocked); the estimator answers at once. The property test draws random pick
configurations (some near the joint limits) and random faults, then a second run from wherever the
first one left the arm: no command of either run leaves the first run's envelope or the limits.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from payload_estimation.errors import PayloadEstimationError
from payload_estimation.model.dynamics import RigidBodyDynamics
from payload_estimation.model.robot_file import load_robot
from payload_estimation.sampling.payload_excitation import ExcitationPlanConfig
from payload_estimation.sampling.poses import PosePlanConfig, make_envelope
from payload_estimation.sampling.sampling_run import (
    ClearCaptures,
    Finished,
    Hold,
    Observation,
    PlanMotion,
    RunConfig,
    RunMode,
    RunRefused,
    RunSpec,
    SamplingRun,
    SetActive,
)
from payload_estimation.sampling.sequence import Capture, Estimate, Move, SequenceConfig

DT = 0.004
PLAN = PosePlanConfig(n_poses=6, amplitude_deg=7.0, limit_margin_deg=1.0, velocity_scale=0.9, min_duration=0.25,
                      max_candidates=400)
SEQ = SequenceConfig(velocity_scale=0.9, min_duration=0.25, dwell=0.3)
RUN = RunConfig(pick_rest_timeout=1.0, monitor_fit_delay=0.05)
SPEC = RunSpec(RunMode.STATIC, PLAN, SEQ, RUN)


@pytest.fixture(scope="module")
def dyn():
    return RigidBodyDynamics(load_robot("lwr4"))


class KinematicArm:
    """Follows moves with a quintic profile; static 0.05 s after a move ends; can be blocked."""

    def __init__(self, q0):
        self.q = np.array(q0, float)
        self.dq = np.zeros_like(self.q)
        self.move: tuple[np.ndarray, np.ndarray, float, float] | None = None  # (from, to, t0, T)
        self.t_still = -1.0
        self.blocked = False

    def command(self, target, duration, t):
        self.move = (self.q.copy(), np.asarray(target, float), t, float(duration))

    def step(self, t):
        if self.move is None or self.blocked:
            self.dq[:] = 0.0
            return
        a, b, t0, T = self.move
        s = min(max((t - t0) / T, 0.0), 1.0)
        shape = 10 * s**3 - 15 * s**4 + 6 * s**5
        q_new = a + (b - a) * shape
        self.dq = (q_new - self.q) / DT
        self.q = q_new
        if s >= 1.0:
            self.move, self.t_still = None, t

    def static(self, t):
        return self.move is None and t - self.t_still > 0.05


def drive(run: SamplingRun, arm: KinematicArm, t: float, fault: dict | None = None, log: list | None = None,
          max_t: float = 30.0):
    """Run until Finished; returns (Finished, t). ``fault``: what goes wrong and when (s into the run)."""
    fault = fault or {}
    t_start = t
    pending = None  # (kind, answer at)
    collisions = 0
    q_seen = None  # the last joint state before a stream gap
    caught_up, t_observed = False, t
    while t - t_start < max_t:
        t += DT
        rel = t - t_start
        arm.blocked = "block_at" in fault and rel >= fault["block_at"]
        arm.step(t)
        collision = ("collision_at" in fault and rel >= fault["collision_at"]) or rel < fault.get("grasp_until", 0.0)
        if collision and collisions == 0:
            collisions = 1
        lost = "lost_at" in fault and rel >= fault["lost_at"]
        t_node = t - (30.0 if rel >= fault.get("clock_back_at", 1e9) else 0.0)  # a simulator restarted: /clock at 0
        gap = fault.get("gap", (1e9, 1e9))  # (from, until) s into the run: neither joint_states nor /clock
        frozen = fault.get("clock_frozen", gap)  # (from, until) s into the run: /clock stands still
        if frozen[0] <= rel < frozen[1]:
            t_node = t_start + frozen[0]  # exactly: a clock that stands still
        elif rel >= frozen[1]:
            t_node -= frozen[1] - frozen[0]
        if gap[0] <= rel < gap[1]:
            q_seen = q_seen if q_seen is not None else arm.q.copy()
        else:
            q_seen = None
        starved = fault.get("starved", (1e9, 1e9))  # (from, until) s into the run: the caller cannot observe
        if starved[0] <= rel < starved[1]:
            continue
        if rel >= starved[1] and not caught_up:  # the first observation after: the newest sample, /clock not yet
            caught_up, t_node = True, t_observed
        t_observed = t_node
        stream_age = (rel - fault["lost_at"]) if lost else (rel - gap[0]) if q_seen is not None else 0.0
        obs = Observation(t=t_node, wall=t, q=arm.q.copy() if q_seen is None else q_seen, dq=arm.dq.copy(),
                          static=arm.static(t) and q_seen is None, stream_age=stream_age, collision=collision,
                          collisions=collisions, cancel="cancel_at" in fault and rel >= fault["cancel_at"],
                          monitor_ready=fault.get("monitor_ready_at", 0.0) <= rel < fault.get("monitor_lost_at", 1e9),
                          monitor_says=fault.get("monitor_says", "") if rel >= fault.get("monitor_lost_at", 1e9)
                          else "")
        if pending is not None and t >= pending[1]:
            ok = not (pending[0] == "capture" and fault.get("captures_fail_after") is not None
                      and rel >= fault["captures_fail_after"])
            run.answered(pending[0], ok, "answer", t_node)
            pending = None
        for act in run.update(obs):
            if log is not None:
                log.append(act)
            if isinstance(act, PlanMotion):
                run.planned(act.compute())  # inline: this loop has no stream to starve
            elif isinstance(act, (Move, Hold)):
                arm.command(act.target, act.duration, t)
            elif isinstance(act, (Capture, Estimate)):
                silent = "silent_after" in fault and rel >= fault["silent_after"]
                pending = None if silent else ("capture" if isinstance(act, Capture) else "estimate", t + 0.01)
            elif isinstance(act, Finished):
                return act, t
    raise AssertionError(f"run did not finish within {max_t} s (phase {run.phase})")


def start(dyn, q, t=0.0, anchor=None):
    """A run requested at ``t`` (the arm is at ``q``); raises RunRefused if its first observation refuses it."""
    run = SamplingRun(dyn, SPEC, t, t, anchor)
    probe = SamplingRun(dyn, SPEC, t, t, anchor)
    probe.update(Observation(t=t, wall=t, q=np.asarray(q, float), static=True, stream_age=0.0))
    if probe.finished is not None:
        raise RunRefused(probe.finished.text)
    return run


Q0 = np.radians([10, 40, -5, -70, 15, 50, 20])


def test_clean_run_visits_every_pose_and_returns(dyn):
    arm = KinematicArm(Q0)
    log = []
    fin, _ = drive(start(dyn, Q0), arm, 0.0, log=log)
    assert fin.ok and fin.anchor is None and fin.code == "done", fin.text
    assert isinstance(log[0], SetActive) and log[0].active
    assert sum(isinstance(a, ClearCaptures) for a in log) == 1
    assert sum(isinstance(a, Capture) for a in log) == PLAN.n_poses
    assert sum(isinstance(a, Estimate) for a in log) == 1
    assert np.allclose(arm.q, Q0, atol=1e-9)
    assert isinstance(log[-2], SetActive) and not log[-2].active


BLIND = "not monitoring: joint_states lost for 0.62 s (collision detection is blind)"
"""The collision monitor's status message when joint_states stopped reaching it."""


@pytest.mark.parametrize("fault,returns,code", [
    ({"cancel_at": 0.9}, True, "cancelled"),
    ({"block_at": 0.9}, False, "not_reached"),           # the arm is blocked: it cannot return either
    ({"captures_fail_after": 0.9}, True, "no_static"),
    ({"silent_after": 0.9}, True, "estimator_timeout"),
    ({"collision_at": 0.9}, False, "collision"),         # the monitor holds; this run commands nothing
    ({"lost_at": 0.9}, False, "stream_lost"),            # no state feedback: no stale hold, the move ends
    ({"monitor_lost_at": 0.9}, False, "monitor_lost"),   # no collision detection: no further motion
    ({"monitor_lost_at": 0.9, "monitor_says": BLIND}, False, "monitor_lost"),  # its words in the answer (issue 48)
    ({"clock_back_at": 0.9}, False, "clock_restart"),    # its durations were on the old clock: it stopped waiting
    ({"clock_frozen": (0.9, 1e9)}, False, "clock_stopped"),  # its moves are timed on a clock that stands still
])
def test_every_abort_returns_or_holds_and_says_where(dyn, fault, returns, code):
    arm = KinematicArm(Q0)
    log = []
    fin, t = drive(start(dyn, Q0), arm, 0.0, fault=fault, log=log)
    assert not fin.ok and fin.code == code, fin
    assert ("monitor_says" in fault) == (BLIND in fin.text), fin.text
    back = np.max(np.abs(arm.q - Q0)) < np.radians(0.5)
    assert fin.anchor is not None and np.array_equal(fin.anchor.q0, Q0), "a retry must keep this pick configuration"
    if returns:
        assert back and "returned to the pick configuration" in fin.text, fin.text
    else:
        assert not back, "the fault was meant to strike away from q0"
        assert "deg from the pick configuration" in fin.text
        cmds_after = log[log.index(next(a for a in log if isinstance(a, Capture))):]
        if "collision_at" in fault or "lost_at" in fault:  # a hold to a stale position would jerk the arm back
            assert not any(isinstance(a, Hold) for a in cmds_after)


def test_a_node_clock_that_stands_still_ends_the_run_instead_of_stalling_it(dyn):
    """Issue 27 (chaos seed 4): after a simulator restart /clock stood at the old sim time (38 s) for ~30 s
    of wall time while joint_states flowed; a ~/sample requested meanwhile waited silently between pose 1
    and pose 2 (every wait of a run is on the node clock) until the clock ran again. The run ends after
    clock_timeout s of wall time instead, saying why, with nothing moved."""
    arm = KinematicArm(Q0)
    log = []
    fin, t = drive(start(dyn, Q0, t=38.0), arm, 38.0, fault={"clock_frozen": (0.0, 28.0)}, log=log)
    assert not fin.ok and fin.code == "clock_stopped", fin.text
    assert t - 38.0 < RUN.clock_timeout + 0.5, f"the run stalled {t - 38.0:.1f} s of wall time"
    assert "stood still" in fin.text and "/clock" in fin.text and "the arm is at the pick configuration" in fin.text
    assert not any(isinstance(a, Move) for a in log) and np.max(np.abs(arm.q - Q0)) < 1e-9


def test_a_short_stall_of_the_node_clock_is_no_fault(dyn):
    """A /clock that stands still for less than clock_timeout (a starved simulator) only slows the run."""
    fin, _ = drive(start(dyn, Q0), KinematicArm(Q0), 0.0, fault={"clock_frozen": (0.9, 0.9 + 0.6 * RUN.clock_timeout)})
    assert fin.ok and fin.code == "done", fin.text


@pytest.mark.parametrize("fault,stream_timeout", [({"gap": (0.9, 3.4)}, 3.0), ({"starved": (0.9, 3.4)}, 0.5)])
def test_a_stream_gap_or_a_starved_caller_is_no_clock_fault(dyn, fault, stream_timeout):
    """/clock stops with the stream (a gap shorter than a raised joint_state_timeout), or the caller could not
    observe for longer than clock_timeout and sees the newest sample before /clock catches up: neither is a
    node clock that stood still while joint_states arrived."""
    assert fault[next(iter(fault))][1] - fault[next(iter(fault))][0] > RUN.clock_timeout
    cfg = RunConfig(pick_rest_timeout=1.0, monitor_fit_delay=0.05, joint_state_timeout=stream_timeout)
    run = SamplingRun(dyn, RunSpec(RunMode.STATIC, PLAN, SEQ, cfg), 0.0, 0.0)
    fin, _ = drive(run, KinematicArm(Q0), 0.0, fault=fault)
    assert fin.ok and fin.code == "done", fin.text


@pytest.mark.parametrize("cancel_at", [0.0, 0.9])
def test_a_cancel_is_the_users_and_the_summary_shows_only_what_happened(dyn, cancel_at):
    """Issue 30.6: cancelled at once (nothing moved) or between poses: the answer says the user cancelled,
    and the timing summary names no phase the run did not reach (it printed 'estimate nan s | return nan
    s ... total nan')."""
    arm = KinematicArm(Q0)
    run = start(dyn, Q0)
    fin, _ = drive(run, arm, 0.0, fault={"cancel_at": cancel_at})
    assert fin.code == "cancelled" and fin.text.startswith("cancelled by the user"), fin.text
    summary = run.timings.summary()
    assert "nan" not in summary and "estimate" not in summary and "total" not in summary, summary
    if cancel_at > 0:
        assert "pose(s) captured" in summary, summary


def test_a_fault_while_returning_after_a_cancel_is_reported_as_that_fault(dyn):
    """The user's cancel is not the outcome when the arm then cannot get back: the fault is."""
    arm = KinematicArm(Q0)
    fin, _ = drive(start(dyn, Q0), arm, 0.0, fault={"cancel_at": 0.9, "block_at": 0.9})
    assert fin.code == "not_reached" and "cancelled by the user" in fin.text and "while returning" in fin.text, fin


def test_next_run_after_an_abort_returns_first_and_keeps_the_pick_configuration(dyn):
    arm = KinematicArm(Q0)
    fin, t = drive(start(dyn, Q0), arm, 0.0, fault={"collision_at": 0.9})
    assert fin.anchor is not None
    q_away = arm.q.copy()
    run = start(dyn, q_away, t, anchor=fin.anchor)
    log = []
    fin2, _ = drive(run, arm, t, log=log)
    assert fin2.ok, fin2.text
    first = next(a for a in log if isinstance(a, Move))
    assert np.allclose(first.target, Q0)
    assert np.allclose(run.q0, Q0)


@pytest.mark.parametrize("ready_at", [2.0, 1e9])
def test_the_arm_does_not_move_before_the_collision_monitor_is_monitoring(dyn, ready_at):
    """A monitor still loading its model (or not running) must not see the arm move: the run waits up to
    monitor_timeout for it, then refuses with the reason, without a single command."""
    class Arm(KinematicArm):
        first_command = None

        def command(self, target, duration, t):
            self.first_command = t if self.first_command is None else self.first_command
            super().command(target, duration, t)

    arm = Arm(Q0)
    log: list = []
    fin, t_end = drive(start(dyn, Q0), arm, 0.0, fault={"monitor_ready_at": ready_at}, log=log)
    moves = [a for a in log if isinstance(a, (Move, Hold))]
    if ready_at < RUN.monitor_timeout:
        assert fin.ok, fin.text
        assert moves and arm.first_command >= ready_at
    else:
        assert not fin.ok and fin.code == "refused" and "collision monitor is not monitoring" in fin.text
        assert not moves and RUN.monitor_timeout <= t_end < RUN.monitor_timeout + 0.1


def test_after_an_aborted_run_a_grasp_at_its_pick_configuration_does_not_strand_the_sampler(dyn):
    """Issue 27.3: a cancelled run returned to q0; the grasp there raises a collision (as it does before any
    first run). The next run needs no return: it starts at q0 as a fresh run, the grasp's collision is
    handled by the gate, and it samples in the aborted run's envelope."""
    arm = KinematicArm(Q0)
    fin, t = drive(start(dyn, Q0), arm, 0.0, fault={"cancel_at": 0.9})
    assert fin.code == "cancelled" and fin.anchor is not None and np.max(np.abs(arm.q - Q0)) < np.radians(0.5)
    arm.q = arm.q + np.radians(0.3)  # the grasp nudged the arm, within the arrival tolerance
    run = SamplingRun(dyn, SPEC, t, t, fin.anchor)
    log: list = []
    fin2, _ = drive(run, arm, t, fault={"grasp_until": 0.2}, log=log)
    assert fin2.ok and fin2.anchor is None, fin2.text
    assert np.array_equal(run.q0, Q0)  # the aborted run's pick configuration and envelope are kept
    assert all(fin.anchor.envelope.contains(a.target) for a in log if isinstance(a, (Move, Hold)))


@pytest.mark.parametrize("sag_deg", [0.3, 0.9, 3.9])
@pytest.mark.parametrize("clears", [True, False])
def test_a_grasp_that_moved_the_arm_off_the_anchor_is_learnt_then_the_run_returns(dyn, clears, sag_deg):
    """CI: after a cancelled run an unannounced grasp was detected and the monitor's stop held the arm where the
    grasp's weight and the stop took it: 0.5-1 deg off q0, once 3.9 deg (the run refused: stranded), once 0.4 deg
    (within the arrival tolerance: the run started its excitation from q0 without a return, its first point 10 ms
    ahead needed 1.33 rad/s and the controller refused it). Anywhere inside the envelope the run raises active first
    (the monitor learns the load), commands nothing while the collision is reported, then returns to q0 and only
    then samples; a collision that never clears ends it with nothing moved."""
    arm = KinematicArm(Q0)
    fin, t = drive(start(dyn, Q0), arm, 0.0, fault={"cancel_at": 0.9})
    assert fin.code == "cancelled" and fin.anchor is not None
    arm.q = fin.anchor.q0 + np.radians(sag_deg) * np.array([0.0, 1.0, 0.0, -0.7, 0.0, 0.5, 0.0])
    run = SamplingRun(dyn, SPEC, t, t, fin.anchor)
    log: list = []
    fin2, t2 = drive(run, arm, t, fault={"grasp_until": 0.4 if clears else 1e9}, log=log)
    commands = [a for a in log if isinstance(a, (Move, Hold))]
    assert isinstance(log[0], SetActive) and log[0].active  # before anything else: the monitor learns the load
    if clears:
        assert fin2.ok and fin2.anchor is None, fin2.text
        first = next(a for a in log if isinstance(a, Move))
        assert np.allclose(first.target, Q0) and np.array_equal(run.q0, Q0)  # back to the aborted run's q0 first
        assert all(fin.anchor.envelope.contains(a.target) for a in commands)
    else:
        assert not fin2.ok and fin2.code == "gate" and commands == [], fin2.text
        assert "payload_estimator/grasped" in fin2.text and "nothing was moved" in fin2.text
        assert t2 - t <= SEQ.clear_timeout + 0.1
        assert np.array_equal(fin2.anchor.q0, Q0)  # kept: the next run still samples around the aborted run's q0


def test_a_changed_amplitude_reaches_the_kept_pick_configurations_envelope(dyn):
    """Chaos schedule (issue 47): a ``sample`` cancelled at amplitude_deg 5, then amplitude_deg set back to 7:
    every later ``sample`` aborted at pose 2, "commanded A1 = 16.490 deg is outside the sampling envelope
    [18.490, 28.490] deg" (the anchor's ±5° envelope against ±7° poses). The next run keeps the anchor's q0 and
    makes its envelope from its own settings: it samples ±7° and succeeds; narrowed again to 5°, an arm held 6°
    away is refused with the way out (forget_pick) instead of a motion abort."""
    narrow = replace(SPEC, plan=replace(PLAN, amplitude_deg=5.0))
    arm = KinematicArm(Q0)
    fin, t = drive(SamplingRun(dyn, narrow, 0.0, 0.0), arm, 0.0, fault={"cancel_at": 0.9})
    assert fin.code == "cancelled" and fin.anchor is not None
    log: list = []
    run = SamplingRun(dyn, SPEC, t, t, fin.anchor)
    fin2, t2 = drive(run, arm, t, log=log)
    assert fin2.ok and fin2.code == "done", fin2.text
    assert np.array_equal(run.q0, Q0)
    wide = make_envelope(dyn.desc, Q0, 7.0, PLAN.limit_margin_deg)
    targets = np.array([a.target for a in log if isinstance(a, Move)])
    assert np.all([wide.contains(q) for q in targets])
    assert np.max(np.abs(targets - Q0)) > np.radians(5.5)  # the ±7° poses, outside the kept ±5° envelope

    arm = KinematicArm(Q0)
    fin, t = drive(SamplingRun(dyn, SPEC, 0.0, 0.0), arm, 0.0, fault={"cancel_at": 0.9})
    with pytest.raises(RunRefused, match="outside its envelope.*payload_sampler/forget_pick"):
        probe = SamplingRun(dyn, narrow, t, t, fin.anchor)
        probe.update(Observation(t=t, wall=t, q=Q0 + np.radians([6.0, 0, 0, 0, 0, 0, 0]), static=True,
                                 stream_age=0.0))
        raise RunRefused(probe.finished.text)


def test_an_arm_within_the_arrival_tolerance_of_the_anchor_is_returned_before_any_motion_starts(dyn):
    """CI: 0.4 deg off the anchored q0 (within the 0.5 deg arrival tolerance) the run started its excitation from q0
    without a return; its first point, 10 ms ahead, needed 1.33 rad/s on A4 and the controller refused it (a real
    controller might jerk there instead). The run now returns first: a rest-to-rest move to q0, at least
    min_duration long; only an arm within a tenth of the tolerance starts there."""
    from payload_estimation.sampling.sampling_run import PickAnchor

    anchor = PickAnchor(Q0, make_envelope(dyn.desc, Q0, 7.0, 1.0), "cancelled by ~/cancel")
    off = Q0 + np.radians([0.0, 0.0, 0.0, 0.4, 0.0, 0.0, 0.0])
    out = SamplingRun(dyn, SPEC, 0.0, 0.0, anchor).update(
        Observation(t=0.0, wall=0.0, q=off, static=True, stream_age=0.0))
    moves = [a for a in out if isinstance(a, Move)]
    assert len(moves) == 1 and np.array_equal(moves[0].target, Q0) and moves[0].duration >= SEQ.min_duration, out
    there = SamplingRun(dyn, SPEC, 0.0, 0.0, anchor)
    out = there.update(Observation(t=0.0, wall=0.0, q=Q0 + np.radians(0.04), static=True, stream_age=0.0))
    assert not [a for a in out if isinstance(a, Move)] and there.phase != "return_first"


def test_a_run_far_from_the_anchor_is_refused(dyn):
    env = make_envelope(dyn.desc, Q0, 7.0, 1.0)
    from payload_estimation.sampling.sampling_run import PickAnchor

    anchor = PickAnchor(Q0, env, "collision")
    with pytest.raises(RunRefused, match="outside its envelope.*payload_sampler/forget_pick"):
        start(dyn, Q0 + np.radians(14.0), anchor=anchor)


def test_a_request_while_the_arm_moves_is_refused_at_rest(dyn):
    arm = KinematicArm(Q0)
    run = start(dyn, Q0)
    arm.command(Q0 + np.radians(3.0), 0.3, 0.0)  # someone else moves the arm after the request
    fin, _ = drive(run, arm, 0.0)
    assert not fin.ok and fin.code == "moved_at_start", fin.text


def _random_pick(rng, desc):
    lim = desc.limits.position
    q = rng.uniform(lim[:, 0] + np.radians(2), lim[:, 1] - np.radians(2))
    k = rng.integers(0, 3)
    for j in rng.choice(desc.n, size=k, replace=False):  # some joints within 10 deg of a limit
        side = rng.integers(0, 2)
        q[j] = lim[j, side] + (1 - 2 * side) * np.radians(rng.uniform(1.5, 10.0))
    return q


def test_property_no_command_leaves_the_first_envelope(dyn):
    desc = dyn.desc
    rng = np.random.default_rng(7)
    kinds = ["cancel_at", "block_at", "captures_fail_after", "silent_after", "collision_at", "lost_at",
             "monitor_lost_at"]
    tol = 1e-9
    lim = desc.limits.position
    for _ in range(12):
        q0 = _random_pick(rng, desc)
        env = make_envelope(desc, q0, PLAN.amplitude_deg, PLAN.limit_margin_deg)
        arm = KinematicArm(q0)
        log = []
        fault = {kinds[rng.integers(len(kinds))]: float(rng.uniform(0.2, 3.0))}
        fin, t = drive(start(dyn, q0), arm, 0.0, fault=fault, log=log)
        if fin.anchor is not None:
            try:
                run = start(dyn, arm.q, t, anchor=fin.anchor)
            except RunRefused:
                run = None
            if run is not None:
                drive(run, arm, t, fault={kinds[rng.integers(len(kinds))]: float(rng.uniform(0.2, 2.0))}, log=log)
        for a in log:
            if isinstance(a, (Move, Hold)):
                assert env.contains(a.target, tol), (fault, np.degrees(a.target - q0))
                assert np.all(a.target >= lim[:, 0] - tol) and np.all(a.target <= lim[:, 1] + tol)


def test_a_bug_in_planning_is_not_reported_as_a_pick_configuration_that_cannot_be_planned(dyn):
    """Issue 28.4: a numpy shape error inside planning (here an envelope of the wrong size, a programming
    error) used to be caught as a ValueError and answered "cannot plan poses at this pick configuration";
    only the package's refusals (PayloadEstimationError) are such answers now, the rest reaches the
    caller (the node ends the run with "planning failed unexpectedly" and logs the traceback)."""
    env = make_envelope(dyn.desc, Q0, 7.0, 1.0)
    broken = replace(env, lower=env.lower[:3])
    with pytest.raises(ValueError) as err:
        PlanMotion(dyn.desc, None, Q0, broken, PLAN, RunMode.SWEEP).compute()
    assert not isinstance(err.value, PayloadEstimationError)
    far = PlanMotion(dyn.desc, None, Q0, env, replace(PLAN, n_poses=2), RunMode.SWEEP).compute()
    assert far.plan is None and far.error.startswith("cannot plan poses at this pick configuration: a sweep needs")


def test_a_run_spec_says_which_settings_its_mode_needs():
    with pytest.raises(PayloadEstimationError, match="dynamic run needs excitation"):
        RunSpec(RunMode.DYNAMIC, PLAN, SEQ, RUN)
    with pytest.raises(PayloadEstimationError, match="sweep run takes no excitation"):
        RunSpec(RunMode.SWEEP, PLAN, SEQ, RUN, ExcitationPlanConfig())
    assert [m for m in RunMode if m.unloaded] == [RunMode.SWEEP, RunMode.RECORD_REFERENCE]
    assert [m for m in RunMode if m.excites] == [RunMode.DYNAMIC, RunMode.RECORD_REFERENCE]
