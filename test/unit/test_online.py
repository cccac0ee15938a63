"""The online payload estimator (payload/online.py) on ordinary moves of the MuJoCo arm: the payload known from
the motion after an announced grasp, σ covering noise and model error, the states. Reference: the payload
MuJoCo carries (an engine we did not write); the unloaded model the estimator subtracts is the nominal
description (the true arm differs by the model error) or the exact one where the test says so."""

import numpy as np
import pytest

from payload_estimation.model.dynamics import RigidBodyDynamics
from payload_estimation.model.parameters import BodyInertia
from payload_estimation.model.robot_file import load_robot
from payload_estimation.payload.online import (
    CONVERGED,
    IDLE,
    NOT_EXCITED,
    ComPrior,
    InertiaPrior,
    OnlineConfig,
    OnlinePayloadEstimator,
)
from payload_estimation.payload.result import PayloadDataError
from payload_estimation.sim import SensorConfig, SimConfig, SimulatedArm

Q0 = np.radians([10, 35, -10, -75, 15, 45, 0])
MOVE = np.radians([40, -15, 20, 25, -30, 30, 20])  # 180 deg in total over 2 s: an ordinary point-to-point move
BOX = BodyInertia(2.5, np.array([0.03, -0.02, 0.09]), np.diag([0.012, 0.009, 0.006]))
KEYS = ("mass", "cx", "cy", "cz")


@pytest.fixture(scope="module")
def iiwa():
    return RigidBodyDynamics(load_robot("iiwa14"))


def _run(dyn, est, *, model_error=0.0, noise=0.0, offsets=0.0, seed=0, move=MOVE, duration=2.0, rest=0.6,
         grasp=True, body=BOX, record=(), prior=None, inertia=None):
    """Unloaded rest, the payload attached and the grasp announced, 0.2 s later the move, 0.2 s at rest after it;
    returns the estimator's status at the move-relative times in ``record`` (s) and at the end."""
    arm = SimulatedArm(dyn.desc, SimConfig(seed=seed, model_error=model_error,
                                           sensor=SensorConfig(noise_std=noise, offset=offsets)))
    arm.reset(Q0)
    k_grasp, k_move = round(rest * 1000), round((rest + 0.2) * 1000)
    marks = {k_move + round(1000 * r): r for r in record}
    out = {}
    for k in range(k_move + round((duration + 0.2) * 1000) if move is not None else k_move + 300):
        if k == k_grasp and grasp:
            arm.attach_payload(body)
            est.grasped(prior, inertia=inertia)
        if k == k_move and move is not None:
            arm.set_trajectory([(duration, Q0 + move, None)])
        arm.step(1)
        s = arm.state()
        est.update(s.t, s.q, s.dq, s.tau)
        if k in marks:
            out[marks[k]] = est.solve()
    out["end"] = est.solve()
    return out


def _errors(status, body=BOX):
    e = status.estimate
    err = np.array([e.mass - body.mass, *(e.com - body.com)])
    return err, np.array([e.std[k] for k in KEYS])


def test_exact_model_payload_known_during_an_ordinary_move(iiwa):
    # exact unloaded model, 0.1 N m noise: what is left is noise (σ ~ 1e-3 kg, < 1 mm) and, halfway through
    # the move, the payload's inertia not yet told apart from its CoM along the flange (σ of cz ~6 mm, the
    # inertia prior's share); at the end 0.5 % / 3 mm (issue 32's target)
    est = OnlinePayloadEstimator(iiwa, OnlineConfig(model_uncertainty=0.0, torque_offset_std=0.0))
    out = _run(iiwa, est, noise=0.1, record=(1.0,))
    early, early_std = _errors(out[1.0])
    err, std = _errors(out["end"])
    assert abs(early[0]) < 0.01 * BOX.mass and np.linalg.norm(early[1:]) < 0.01
    assert np.all(np.abs(early) <= 3 * early_std)
    assert abs(err[0]) < 0.005 * BOX.mass and np.linalg.norm(err[1:]) < 0.003
    assert np.all(np.abs(err) <= 3 * std)
    assert out["end"].state == CONVERGED
    # an ordinary move does not determine a 0.01 kg m^2 inertia to 25 %: reported as undetermined, and why
    e = out["end"].estimate
    assert e.inertia is None and "Ixx" in e.undetermined and any("inertia not determined" in n for n in e.notes)


def test_model_error_and_offsets_are_covered_by_sigma(iiwa):
    # 3 % link error and ±0.5 N m offsets against the nominal model: the estimator is anchored on the unloaded
    # rest before the grasp; the error must stay within 3σ of the propagated model uncertainty (declared 3 %)
    offsets = np.array([0.4, -0.5, 0.3, -0.2, 0.5, -0.4, 0.1])
    for seed in (1, 2):
        est = OnlinePayloadEstimator(iiwa, OnlineConfig(model_uncertainty=0.03))
        out = _run(iiwa, est, model_error=0.03, noise=0.1, offsets=offsets, seed=seed, record=(1.0,))
        for key in (1.0, "end"):
            err, std = _errors(out[key])
            assert np.all(np.abs(err) <= 3 * std), (seed, key, err, std)
            assert std[0] < 0.05 * BOX.mass and np.all(std[1:] < 0.02)  # σ covers, and is still useful
        assert out["end"].anchored


def test_the_model_error_fitted_with_the_payload_narrows_sigma_where_the_move_shows_it(iiwa):
    # the same streams, the model's error (3 % links, offsets) fitted with the payload within its declared σ or
    # only propagated into σ: fitted, σ at the end of the move is under half the propagated one and still covers
    # the error, and the estimate is closer to MuJoCo's payload
    offsets = np.array([0.4, -0.5, 0.3, -0.2, 0.5, -0.4, 0.1])
    for seed in (1, 2):
        out = {fit: _run(iiwa, OnlinePayloadEstimator(iiwa, OnlineConfig(model_uncertainty=0.03, fit_model_error=fit)),
                         model_error=0.03, noise=0.1, offsets=offsets, seed=seed, record=(1.0,))
               for fit in (True, False)}
        (err, std), (err_p, std_p) = _errors(out[True]["end"]), _errors(out[False]["end"])
        assert np.all(np.abs(err) <= 3 * std), (seed, err, std)
        assert np.all(std < 0.5 * std_p), (seed, std, std_p)
        assert np.linalg.norm(err[1:]) < np.linalg.norm(err_p[1:]), (seed, err, err_p)
        assert any("fitted with the payload" in n for n in out[True]["end"].estimate.notes)
        assert not any("fitted with the payload" in n for n in out[False]["end"].estimate.notes)


def test_the_offsets_are_propagated_not_fitted(iiwa):
    # an exact model leaves only the offsets uncertain (the anchor's noise): the offsets are not fitted (a constant is
    # what an unexcited CoM component looks like early in a move), so the estimate and σ are the propagated ones
    offsets = np.array([0.4, -0.5, 0.3, -0.2, 0.5, -0.4, 0.1])
    out = {fit: _run(iiwa, OnlinePayloadEstimator(iiwa, OnlineConfig(model_uncertainty=0.0, fit_model_error=fit)),
                     noise=0.1, offsets=offsets, seed=4, record=(1.0,))
           for fit in (True, False)}
    for key in (1.0, "end"):
        (err, std), (err_p, std_p) = _errors(out[True][key]), _errors(out[False][key])
        assert std == pytest.approx(std_p, rel=1e-4) and err == pytest.approx(err_p, rel=1e-4, abs=1e-9), key
    assert out[True]["end"].anchored


def test_a_broken_reference_is_not_covered(iiwa):
    # the same stream against an unloaded model with half the link masses: the estimate must be off by more
    # than its σ (what the two tests above rely on: the reference model matters, and σ is not just huge)
    light = iiwa.desc.with_links(tuple(BodyInertia(b.mass * 0.5, b.com, b.inertia_com * 0.5) for b in iiwa.desc.links))
    est = OnlinePayloadEstimator(RigidBodyDynamics(light), OnlineConfig(model_uncertainty=0.0, torque_offset_std=0.0,
                                                                        anchor=False))
    err, std = _errors(_run(iiwa, est, noise=0.1)["end"])
    assert np.any(np.abs(err) > 3 * std)


def test_at_rest_after_the_grasp_the_state_says_what_the_motion_has_not_separated(iiwa):
    est = OnlinePayloadEstimator(iiwa)
    assert est.status.state == IDLE and est.estimate is None
    out = _run(iiwa, est, noise=0.1, move=None)
    st = out["end"]
    assert st.state == NOT_EXCITED
    assert "CoM" in st.reason and "joints" in st.reason
    err, std = _errors(st)
    assert abs(err[0]) < 0.02 * BOX.mass  # the mass is known at one pose; the CoM along gravity is not
    est.reset()
    assert est.status.state == IDLE and est.estimate is None


def test_updates_at_ten_hertz_and_no_estimate_without_a_grasp(iiwa):
    est = OnlinePayloadEstimator(iiwa)
    _run(iiwa, est, grasp=False, move=None)
    assert est.estimate is None and est.status.state == IDLE
    est.grasped()
    states = []
    t0 = 100.0
    for k in range(600):
        q = Q0 + np.radians(20) * np.sin(0.5 * np.arange(1, 8) * k / 1000)
        dq = np.radians(20) * 0.5 * np.arange(1, 8) * np.cos(0.5 * np.arange(1, 8) * k / 1000)
        st = est.update(t0 + k / 1000, q, dq, iiwa.gravity(q))
        if not states or st is not states[-1]:
            states.append(st)
    assert 4 <= len(states) <= 7  # the filters restart at the jump to t0; 0.1 s settle, then a solve per 0.1 s
    restarts = est.restarts
    for k in range(350):  # the stream starts over (a restarted driver): the filters restart, solves go on
        q = Q0 + np.radians(20) * np.sin(0.5 * np.arange(1, 8) * k / 1000)
        dq = np.radians(20) * 0.5 * np.arange(1, 8) * np.cos(0.5 * np.arange(1, 8) * k / 1000)
        st = est.update(1.0 + k / 1000, q, dq, iiwa.gravity(q))
    assert est.restarts == restarts + 1 and st.t > 1.2 and st.rows > states[-1].rows


def test_config_is_checked():
    with pytest.raises(PayloadDataError, match="solve_period"):
        OnlineConfig(solve_period=0.0)


def test_a_release_at_rest_relearns_the_anchor_from_the_rest_that_follows(iiwa):
    """reset() while the arm stands still: the rest window starts over (it kept the old window's start with its
    sums emptied, so the next sample at rest raised TypeError in the node), and the anchor is learnt again."""
    arm = SimulatedArm(iiwa.desc, SimConfig(seed=0))
    arm.reset(Q0)
    est = OnlinePayloadEstimator(iiwa)

    def rest(seconds: float):
        for _ in range(round(1000 * seconds)):
            arm.step(1)
            s = arm.state()
            est.update(s.t, s.q, s.dq, s.tau)

    rest(1.0)
    est.reset()
    rest(1.5)
    est.grasped()
    assert est.status.anchored


def test_no_bias_from_the_payload_torque_step_at_the_grasp(iiwa):
    """Noise-free, exact unloaded model: what is left is the method's own error. The filters start from zero at
    the first row that counts, so the payload's torque step at the grasp leaves no transient in the rows (started in
    steady state they kept 0.7 % of the step 0.1 s later: 2 kg at 0.2 s and a CoM 4 mm off 1.0 s into the move)."""
    est = OnlinePayloadEstimator(iiwa, OnlineConfig(model_uncertainty=0.0, torque_offset_std=0.0))
    out = _run(iiwa, est, record=(0.0, 1.0))
    rest, _ = _errors(out[0.0])  # 0.1 s at rest after the grasp: the static wrench at one orientation
    assert abs(rest[0]) < 1e-3 * BOX.mass
    early, _ = _errors(out[1.0])
    assert np.linalg.norm(early[1:]) < 1e-3, early


def test_a_com_prior_from_the_gripper_determines_what_the_motion_has_not(iiwa):
    """At rest after the grasp the CoM along the vertical is not separated; a ComPrior (the gripper's geometry, σ
    20 mm, here 15 mm off the truth) bounds it, with σ that covers the prior's error; without it σ is the weak
    prior's and the few degrees the arm sagged under the load (> 30 mm)."""
    off = np.array([0.015, -0.01, 0.015])
    prior = ComPrior(tuple(BOX.com + off), 0.02)
    with_prior = _run(iiwa, OnlinePayloadEstimator(iiwa), noise=0.1, move=None, prior=prior)["end"]
    without = _run(iiwa, OnlinePayloadEstimator(iiwa), noise=0.1, move=None)["end"]
    err, std = _errors(with_prior)
    assert np.all(std[1:] <= 0.02) and np.all(np.abs(err) <= 3 * std), (err, std)
    assert np.max(_errors(without)[1][1:]) > 0.03
    assert with_prior.state == NOT_EXCITED  # the prior is not the motion: the state still says what to move


def test_an_inertia_prior_from_the_parts_data_separates_the_com_early_in_the_move(iiwa):
    """1.0 s into the move the CoM along the flange axis shows in the tool's accelerations only together with the
    payload's unknown inertia (m c x a against I α); the part's inertia from its data (here 15-20 % off the truth,
    σ 30 % of its largest moment) separates them: that component's σ shrinks, and every σ still covers its error.
    With the prior the inertia is reported (the prior is information), and the estimate's notes say so."""
    part = InertiaPrior((0.012 * 1.2, 0.0, 0.0, 0.009 * 0.85, 0.0, 0.006 * 1.15), 0.3)
    cfg = OnlineConfig(model_uncertainty=0.0, torque_offset_std=0.0)
    with_prior = _run(iiwa, OnlinePayloadEstimator(iiwa, cfg), noise=0.1, record=(1.0,), inertia=part)
    without = _run(iiwa, OnlinePayloadEstimator(iiwa, cfg), noise=0.1, record=(1.0,))
    for out in (with_prior, without):
        for when in (1.0, "end"):
            err, std = _errors(out[when])
            assert np.all(np.abs(err) <= 3 * std), (when, err, std)
    std_with, std_without = _errors(with_prior[1.0])[1], _errors(without[1.0])[1]
    print(f"σ at 1.0 s, mass and CoM (mm): with {1e3 * std_with[1:]}, without {1e3 * std_without[1:]}")
    assert std_with[3] < 0.6 * std_without[3], (std_with, std_without)
    assert std_with[0] <= std_without[0] * 1.01
    e = with_prior["end"].estimate
    assert any("the part's inertia prior (σ 30 % of its largest moment)" in n for n in e.notes)


def test_an_inertia_prior_is_checked():
    """Wrong count, NaN, not a body's inertia (the triangle inequality: a unit or order mistake), a σ no part's
    data support: each refused with what to give instead."""
    for values, std, words in (((0.01, 0.01, 0.01), 0.3, "has 3 value"),
                               ((0.01, 0.0, 0.0, float("nan"), 0.0, 0.01), 0.3, "not finite"),
                               ((0.001, 0.0, 0.0, 0.001, 0.0, 0.01), 0.3, "triangle inequality"),
                               ((0.01, 0.0, 0.0, 0.01, 0.0, -0.001), 0.3, "not positive definite"),
                               ((0.01, 0.0, 0.0, 0.01, 0.0, 0.01), 0.02, "better than ~10 %")):
        with pytest.raises(PayloadDataError, match=words):
            InertiaPrior(values, std)


def test_a_com_prior_is_checked():
    with pytest.raises(PayloadDataError, match="std"):
        ComPrior((0.0, 0.0, 0.1), 0.0)
    with pytest.raises(PayloadDataError, match="3 finite numbers"):
        ComPrior((0.0, 0.1), 0.02)


def test_the_first_estimate_comes_a_filter_time_constant_after_the_rows_start_and_is_plausible(iiwa):
    """The monitor carries the estimate from the first solve on, so it must come early (20 ms after the filters
    start, 0.12 s after the grasp, not a whole solve period later) and stay plausible while the CoM along the
    vertical is still free: a 0.8 kg box at rest, its weak CoM prior scaled to the mass found (scaled to the 15 kg
    limit its vertical CoM wandered to metres: 'not yet plausible', no estimate for the monitor)."""
    light = BodyInertia(0.8, np.array([0.01, 0.02, 0.07]), np.diag([0.002, 0.002, 0.001]))
    arm = SimulatedArm(iiwa.desc, SimConfig(seed=0, model_error=0.03, sensor=SensorConfig(noise_std=0.1, offset=0.3)))
    arm.reset(Q0)
    est = OnlinePayloadEstimator(iiwa, OnlineConfig(model_uncertainty=0.03))
    solves = []
    for k in range(1100):
        if k == 600:
            arm.attach_payload(light)
            est.grasped()
        arm.step(1)
        s = arm.state()
        old = est.status
        st = est.update(s.t, s.q, s.dq, s.tau)
        if st is not old and st.rows:
            solves.append(st)
    assert solves[0].t < 0.73 and solves[0].estimate is not None  # grasp at 0.6 s, rows from 0.7 s
    for st in solves:
        assert "not yet plausible" not in st.reason, (st.t, st.reason)
        err, std = _errors(st, light)
        assert np.all(np.abs(err) <= 3 * std), (st.t, err, std)


@pytest.mark.parametrize("announced", [True, False])
def test_a_grasp_announced_while_the_stream_lags_counts_rows_from_the_announcement(iiwa, announced):
    """The estimator handles the stream 0.2 s late (a loaded node): at the grasp call its next samples are still
    the unloaded arm's. With the announcement's time the rows count from it; without, from the next sample's stamp,
    and 0.1 s of the unloaded arm biases the estimate (the mass 1.0 s into the move 1.8 % low; 6.7 % before the rows
    at rest had a misfit check of their own) and the fit says it does not fit."""
    arm = SimulatedArm(iiwa.desc, SimConfig())
    arm.reset(Q0)
    est = OnlinePayloadEstimator(iiwa, OnlineConfig(model_uncertainty=0.0, torque_offset_std=0.0))
    lag, backlog = 200, []
    for k in range(2000):
        if k == 600:
            arm.attach_payload(BOX)  # the gripper closed and the grasp is announced at once
            est.grasped(at=arm.state().t if announced else None)
        if k == 800:
            arm.set_trajectory([(2.0, Q0 + MOVE, None)])
        arm.step(1)
        backlog.append(arm.state())
        if len(backlog) > lag:
            s = backlog.pop(0)
            est.update(s.t, s.q, s.dq, s.tau)
    st = est.solve()
    err, _ = _errors(st)  # 1.0 s into the move, as handled
    if announced:
        assert est.grasp_lag == pytest.approx(0.2, abs=2e-3)
        assert abs(err[0]) < 1e-3 * BOX.mass and np.linalg.norm(err[1:]) < 1e-3, err
    else:
        assert est.grasp_lag is None
        assert err[0] < -0.01 * BOX.mass, err
        assert st.misfit and st.misfit_ratio > 100, st.misfit_ratio
