"""The collision monitor's parts, each alone (collision.estimate_gate, estimate_sigma, loss_gate, stop_resume,
live_calibration), and their configs' defaults against the node's parameter table.

References: the payload layer's limit check, pinocchio's gravity of the arm with a payload attached (the σ
widening, by Monte-Carlo), hand-made trajectories whose remainders are known, and the node's parameter table.
"""

import numpy as np
import pytest

from payload_estimation.collision.detector import CollisionEvent
from payload_estimation.collision.estimate_gate import EstimateGate, EstimateGateConfig, EstimateRefused
from payload_estimation.collision.estimate_sigma import EstimateSigma, SigmaConfig
from payload_estimation.collision.live_calibration import CalibrationConfig, CalibrationRefused, LiveCalibration
from payload_estimation.collision.loss_gate import LossGate, LossGateConfig
from payload_estimation.collision.observer_payload import ObserverPayload, ObserverPayloadConfig
from payload_estimation.collision.payload_change import WatchConfig
from payload_estimation.collision.payload_loss import COLLISION, LOST, LossVerdict
from payload_estimation.collision.provisional import ProvisionalFit
from payload_estimation.collision.reaction import Action, ReactionConfig, ReactionStateMachine
from payload_estimation.collision.stop_resume import Command, Planner, StopResume, StopResumeConfig
from payload_estimation.collision.supervisor import SupervisorConfig
from payload_estimation.model.dynamics import RigidBodyDynamics
from payload_estimation.model.parameters import BodyInertia
from payload_estimation.model.robot_file import load_robot
from payload_estimation.payload.estimate import PayloadEstimate
from payload_estimation.payload.limits import check_payload

Q0 = np.radians([10, 40, -5, -70, 15, 50, 20])


@pytest.fixture(scope="module")
def desc():
    return load_robot("lwr4")


@pytest.fixture(scope="module")
def dyn(desc):
    return RigidBodyDynamics(desc)


def estimate(desc, mass=2.0, com=(0.02, -0.01, 0.08), frame=None) -> PayloadEstimate:
    return PayloadEstimate(mass, np.array(com), None, frame=desc.payload_frame_name if frame is None else frame,
                           method="message")


# ------------------------------------------------------------------ defaults: one home each, the node's
def test_each_parts_defaults_are_the_nodes():
    from payload_estimation.ros.monitor_params import PARAMS, calibration_config

    values = {p.name: p.default for p in PARAMS.params}
    sup = SupervisorConfig()
    assert sup.stop_resume() == StopResumeConfig()
    assert sup.reaction() == ReactionConfig()
    assert sup.loss_gate() == LossGateConfig()
    assert sup.gate() == EstimateGateConfig()
    assert sup.watch() == WatchConfig()
    assert sup.observer_payload() == ObserverPayloadConfig()
    assert calibration_config(values) == CalibrationConfig()
    machine = ReactionStateMachine()  # the reaction's own defaults are its config's
    assert (machine.policy, machine.resume_delay) == (ReactionConfig.policy, ReactionConfig.resume_delay)
    assert values["hold_time"] == StopResumeConfig.hold_time and values["policy"] == ReactionConfig.policy
    assert values["payload_event_floor"] == WatchConfig.window_floor
    assert values["max_payload"] == EstimateGateConfig.max_payload
    assert values["payload_as_point_mass"] == ObserverPayloadConfig.payload_as_point_mass


# ------------------------------------------------------------------ estimate gate
def test_the_gate_refuses_another_frame_an_implausible_payload_a_lost_one_and_during_classification(desc):
    gate = EstimateGate(desc.payload_frame_name, check_payload)
    gate.check(estimate(desc), desc.payload_frame_name)  # plausible: taken
    with pytest.raises(EstimateRefused, match="frame 'tool0' is not this model's payload frame"):
        gate.check(estimate(desc), "tool0")
    with pytest.raises(EstimateRefused, match="15"):  # above max_payload (node_limits: 15 kg)
        gate.check(estimate(desc, mass=20.0), desc.payload_frame_name)
    with pytest.raises(EstimateRefused, match="0.5"):  # CoM beyond max_com_radius
        gate.check(estimate(desc, com=(0.0, 0.0, 0.7)), desc.payload_frame_name)
    EstimateGate(desc.payload_frame_name, check_payload, EstimateGateConfig(max_payload=25.0)).check(
        estimate(desc, mass=20.0), desc.payload_frame_name)  # the config's limit is the one applied
    with pytest.raises(EstimateRefused, match="being classified"):
        gate.check(estimate(desc), desc.payload_frame_name, classifying=True)
    gate.blocked = True
    with pytest.raises(EstimateRefused, match="the payload was lost"):
        gate.check(estimate(desc), desc.payload_frame_name)


# ------------------------------------------------------------------ an estimate's σ
def test_sigma_is_the_spread_of_the_payloads_gravity_torque_pinocchio_monte_carlo(desc, dyn):
    est = estimate(desc, mass=3.0, com=(0.03, -0.02, 0.10))
    p0 = np.array([3.0, 0.09, -0.06, 0.30])
    a = np.diag([0.05, 0.004, 0.004, 0.008])
    cov = a @ np.array([[1, 0.3, 0, 0], [0.3, 1, 0, 0], [0, 0, 1, -0.2], [0, 0, -0.2, 1]]) @ a
    s = EstimateSigma(dyn)
    s.received(3.0, [0.03, -0.02, 0.10], cov)
    assert s.match(est) and s.cov is not None
    std = s.due(0.0, Q0)
    rng = np.random.default_rng(4)
    g0 = dyn.gravity(Q0)
    taus = []
    for p in rng.multivariate_normal(p0, cov, size=1500):
        body = BodyInertia(float(p[0]), p[1:] / p[0], np.diag([0.01, 0.01, 0.01]))
        taus.append(dyn.with_payload(body).gravity(Q0) - g0)
    mc = np.std(np.array(taus), axis=0)
    np.testing.assert_allclose(std, mc, rtol=0.08, atol=1e-3)


def test_sigma_pairs_a_covariance_with_its_estimate_and_is_recomputed_per_period(desc, dyn):
    s = EstimateSigma(dyn, SigmaConfig(period=0.05))
    with pytest.raises(EstimateRefused, match="4 x 4"):
        s.received(2.0, [0, 0, 0.1], np.eye(3))
    with pytest.raises(EstimateRefused, match="finite"):
        s.received(2.0, [0, 0, 0.1], np.full((4, 4), np.nan))
    first = estimate(desc, mass=2.0, com=(0.0, 0.0, 0.1))
    s.received(2.0, [0.0, 0.0, 0.1], np.eye(4) * 1e-4)
    assert s.match(first)
    kept = s.cov
    assert not s.match(estimate(desc, mass=2.5))  # a newer estimate keeps the previous σ until its own arrives
    assert s.cov is kept
    prov = ProvisionalFit(1.0, np.array([0.0, 0.0, 0.1]), 0.01, 4)
    assert not s.match(prov) and s.cov is None  # a provisional payload: no estimate's σ
    assert s.match(first)
    assert s.due(1.0, Q0) is not None
    assert s.due(1.02, Q0) is None  # within the period
    assert s.due(1.06, Q0) is not None
    s.forget()
    assert s.cov is None and s.due(2.0, Q0) is None


# ------------------------------------------------------------------ loss gate
def event(active=True, t=1.0) -> CollisionEvent:
    return CollisionEvent(onset_time=t - 0.003, detection_time=t, peak=np.full(7, 8.0), peak_max=8.0, peak_joint=1,
                          link=6, link_name="link_6", joints_above=(1,),
                          release_time=None if active else t + 0.5)


def verdict(kind: str, t=1.05) -> LossVerdict:
    return LossVerdict(kind, t, 1.0, 1.0 if kind == LOST else 0.1, 2.0 if kind == LOST else 0.0, "test verdict")


def test_without_an_announced_grasp_every_detection_is_reported_at_once(desc, dyn):
    gate = LossGate(dyn)
    gate.arm(estimate(desc), point_mass=True, cov=None)  # carried, but nobody announced a grasp
    assert not gate.judging
    on = gate.reports(event(), None)
    assert [(r.event.active, r.changed) for r in on] == [(True, True)] and gate.collision
    assert gate.stopping(True, event())
    off = gate.reports(event(active=False), None)
    assert [(r.event.active, r.changed) for r in off] == [(False, True)] and not gate.collision


def test_after_a_grasp_a_detection_waits_for_the_verdict_and_a_loss_is_not_a_collision(desc, dyn):
    gate = LossGate(dyn)
    gate.grasp_announced = True
    gate.arm(estimate(desc), point_mass=True, cov=None)
    assert gate.judging
    ev = event()
    assert gate.reports(ev, None) == () and not gate.stopping(True, ev)  # held: collision or payload lost?
    assert gate.contacts(None) == ()
    gate.verdict = verdict(COLLISION)
    rep = gate.reports(None, gate.verdict)
    assert [r.event for r in rep] == [ev] and gate.collision and gate.stopping(True, ev)

    lost = LossGate(dyn, LossGateConfig(payload_lost_stop=False))
    lost.grasp_announced = True
    lost.arm(estimate(desc), point_mass=True, cov=None)
    lost.reports(event(), None)
    lost.verdict = verdict(LOST)
    assert lost.reports(None, lost.verdict) == () and not lost.collision  # reported on its own, not as a collision
    assert not lost.stopping(True, event())
    assert "the arm is not stopped" in lost.on_lost(lost.verdict)
    assert (lost.losses, lost.grasp_announced) == (1, False)
    assert lost.loss_report(lost.verdict)["stopped"] is False
    stop = LossGate(dyn, LossGateConfig(payload_lost_stop=True))
    stop.verdict = verdict(LOST)
    assert stop.stopping(True, event()) and stop.loss_report(stop.verdict)["stopped"] is True


def test_a_provisional_payload_is_never_judged_for_a_loss(dyn):
    gate = LossGate(dyn)
    gate.grasp_announced = True
    gate.arm(ProvisionalFit(1.0, np.array([0.0, 0.0, 0.1]), 0.01, 4), True, None)
    assert not gate.judging


# ------------------------------------------------------------------ stop and resume
def planner() -> Planner:
    return Planner(stop_point=lambda q, dq, dec, t_min, lead: (np.asarray(q, float) + 0.01, max(t_min, 0.3)),
                   move_duration=lambda q0, q1, v1, scale, least: max(least, 1.0))


def test_a_stop_keeps_the_rest_of_the_trajectory_and_the_resume_continues_it():
    m = StopResume(StopResumeConfig(), planner())
    t, q = np.array([1.0, 2.0, 3.0]), np.array([[0.1] * 7, [0.2] * 7, [0.3] * 7])
    assert not m.commanded(10.0, t, q)
    cmd, note = m.react(Action.HOLD_POSITION, 11.5, np.full(7, 0.15), np.zeros(7), lead=0.0)
    assert "remainder kept" in note[1]
    np.testing.assert_allclose(cmd.q[0], np.minimum(np.full(7, 0.16), 0.3))  # the planner's stop point, in reach
    np.testing.assert_allclose(m.remainder.t, [0.5, 1.5])  # the points not reached at the stop, from the stop
    resumed, note = m.react(Action.RESUME, 20.0, np.full(7, 0.16), None, lead=0.0)
    np.testing.assert_allclose(resumed.t, [1.0, 2.0])  # shifted to start after the first segment's 1 s
    np.testing.assert_allclose(resumed.q, q[1:])
    assert "resuming the interrupted trajectory: 2 point(s)" in note[1]


def test_a_stop_point_never_goes_beyond_the_trajectory_and_nothing_is_kept_while_sampling_or_superseded():
    m = StopResume(planner=Planner(stop_point=lambda q, dq, dec, t_min, lead: (np.full(7, 9.0), 0.2),
                                   move_duration=lambda *a: 1.0))
    m.commanded(0.0, np.array([1.0]), np.full((1, 7), 0.3))
    cmd, _ = m.react(Action.HOLD_POSITION, 0.5, np.full(7, 0.1), np.zeros(7), lead=0.0, keep=False)
    np.testing.assert_allclose(cmd.q[0], 0.3)  # clipped to the box of the arm and the trajectory's points
    assert m.remainder is None
    m.commanded(0.0, np.array([1.0, 2.0]), np.full((2, 7), 0.3))
    assert m.stop(0.5)
    assert m.commanded(1.0, np.array([1.0]), np.full((1, 7), 0.4))  # a newer command supersedes the remainder
    assert m.resume(2.0, lambda q, v: 0.0) is None
    with pytest.raises(Exception, match="no planner"):
        StopResume().react(Action.HOLD_POSITION, 0.0, np.zeros(7), None, 0.0)
    assert StopResume().react(Action.NOTHING, 0.0, np.zeros(7), None, 0.0) == (None, None)
    assert isinstance(cmd, Command)


# ------------------------------------------------------------------ live calibration
def test_live_calibration_refuses_without_a_recording_and_applies_its_configured_rule():
    cal = LiveCalibration(2, CalibrationConfig(safety=3.0, minimum=1.0))
    with pytest.raises(CalibrationRefused, match="no threshold calibration in progress"):
        cal.finish()
    with pytest.raises(CalibrationRefused, match="starts one"):
        cal.cancel()
    assert "started" in cal.start()
    assert "was discarded" in cal.start()
    rng = np.random.default_rng(0)
    r_peak = np.array([0.8, 0.5])
    for k in range(6000):  # 6 s of contact-free residual within +-r_peak, moving
        cal.add(k * 1e-3, r_peak * np.sin(k * 1e-3 * 7.0 + rng.uniform(0, 0.01)), np.full(2, 0.5))
    out = cal.finish()
    assert cal.recorder is None
    np.testing.assert_allclose(out.thresholds, np.maximum(1.0, 3.0 * r_peak), rtol=0.01)


# ------------------------------------------------------------------ the observer's payload
def test_a_provisional_refit_is_news_only_beyond_50_g_and_5_percent_and_a_restart_falls_back_to_the_estimate(desc):
    op = ObserverPayload()
    est = estimate(desc, mass=2.0)
    assert op.take(est, "estimate") is None and op.estimated is est
    assert op.note(None, est, "estimate") == [("info", "observer model: estimate payload 2.000 kg, CoM "
                                                        "[20.0, -10.0, 80.0] mm")]
    fits = [ProvisionalFit(m, np.array([0.0, 0.0, 0.1]), 0.01, 3) for m in (1.0, 1.09, 1.11, 1.2)]
    previous = op.take(fits[0], "provisional")
    assert op.estimated is est and op.note(previous, fits[0], "provisional")  # a change of source: news
    assert op.note(op.take(fits[1], "provisional"), fits[1], "provisional") == []  # 0.09 kg <= 0.05 + 5 % of 1.0
    assert op.note(op.take(fits[2], "provisional"), fits[2], "provisional") != []  # 0.11 kg: news
    assert op.note(op.take(fits[3], "provisional"), fits[3], "provisional") == []  # from 1.11: 0.09 kg
    assert op.restart_note(fits[3]) == (
        "warning", "stream restarted: the provisional payload 1.200 kg learnt from the old stream is dropped (never "
                   "confirmed by an estimate); the observer uses the estimate in use, 2.000 kg (if the gripper is "
                   "empty now, publish a 0 kg estimate or call payload_estimator/reset)")
    op.take(None, "release")
    assert op.restart_note(None) == ("info", "stream restarted: the observer keeps the unloaded model")
