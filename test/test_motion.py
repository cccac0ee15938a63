"""motion/: pose planning inside envelope ∩ limits (seeded property test) and settle detection."""

import numpy as np
import pytest

from payload_estimation.model.dynamics import RigidBodyDynamics
from payload_estimation.model.robot_file import load_robot
from payload_estimation.motion.poses import (
    QUINTIC_PEAK,
    MotionLimitError,
    PosePlanConfig,
    check_command,
    check_move,
    make_envelope,
    plan_poses,
)
from payload_estimation.motion.settle import SampleWindow, SettleConfig, check_static


@pytest.fixture(scope="module", params=["lwr4", "iiwa14"])
def dyn(request):
    return RigidBodyDynamics(load_robot(request.param))


def _random_pick(desc, rng):
    """Random pick configurations, a third of the joints pushed to within 0..3 deg of a limit."""
    lim = desc.limits.position
    q = rng.uniform(lim[:, 0], lim[:, 1])
    near = rng.random(desc.n) < 0.35
    side = rng.integers(0, 2, desc.n)
    off = np.radians(rng.uniform(0.0, 3.0, desc.n))
    q = np.where(near & (side == 0), lim[:, 0] + off, q)
    q = np.where(near & (side == 1), lim[:, 1] - off, q)
    return q


def test_property_plans_stay_in_envelope_and_limits(dyn):
    desc = dyn.desc
    lim = desc.limits.position
    vmax = desc.limits.velocity
    rng = np.random.default_rng(1234)
    configs = [PosePlanConfig(), PosePlanConfig(n_poses=6, amplitude_deg=4.0, velocity_scale=1.0, min_duration=0.1),
               PosePlanConfig(n_poses=12, limit_margin_deg=0.0, max_candidates=200)]
    for trial in range(40):
        q0 = _random_pick(desc, rng)
        cfg = configs[trial % len(configs)]
        plan = plan_poses(dyn, q0, cfg)
        amp = np.radians(np.broadcast_to(np.asarray(cfg.amplitude_deg, float), (desc.n,)))
        assert plan.poses.shape == (cfg.n_poses, desc.n)
        np.testing.assert_allclose(plan.poses[0], q0)
        prev = q0
        for tgt, dur in plan.moves():
            # envelope: within amplitude of q0, inside limits (with the margin unless q0 itself is closer)
            assert np.all(np.abs(tgt - q0) <= amp + 1e-12)
            assert np.all(tgt >= lim[:, 0]) and np.all(tgt <= lim[:, 1])
            margin = np.radians(cfg.limit_margin_deg)
            assert np.all((tgt >= lim[:, 0] + margin - 1e-12) | (tgt >= q0 - 1e-12))
            assert np.all((tgt <= lim[:, 1] - margin + 1e-12) | (tgt <= q0 + 1e-12))
            # quintic peak speed within velocity_scale * limit
            peak = QUINTIC_PEAK * np.abs(tgt - prev) / dur
            assert np.all(peak <= cfg.velocity_scale * vmax * (1 + 1e-9))
            assert dur >= cfg.min_duration
            prev = tgt
        np.testing.assert_allclose(prev, q0)  # last move returns to the pick configuration
        # the validator rejects a point just outside the envelope on a random joint
        j = rng.integers(desc.n)
        bad = q0.copy()
        bad[j] = plan.envelope.upper[j] + 1e-4
        with pytest.raises(MotionLimitError, match=desc.joint_names[j]):
            check_command(bad, plan.envelope, desc)


def test_plan_is_well_conditioned(dyn):
    q0 = np.radians([0, 30, 0, -60, 0, 60, 0])
    plan = plan_poses(dyn, q0)
    assert np.isfinite(plan.logdet)
    assert plan.condition_number < 50  # the 4 gravity parameters are identifiable
    # D-optimal beats random poses in the same envelope
    rng = np.random.default_rng(0)
    env = plan.envelope
    rand = [q0] + [rng.uniform(env.lower, env.upper) for _ in range(9)]
    info = sum(dyn.payload_gravity_regressor(q).T @ dyn.payload_gravity_regressor(q) for q in rand)
    assert plan.logdet > np.linalg.slogdet(info)[1]


def test_envelope_and_move_validation(dyn):
    desc = dyn.desc
    lim = desc.limits.position
    with pytest.raises(MotionLimitError, match="outside its limits"):
        make_envelope(desc, lim[:, 1] + 0.01)
    with pytest.raises(MotionLimitError, match="finite"):
        make_envelope(desc, np.full(desc.n, np.nan))
    env = make_envelope(desc, np.zeros(desc.n))
    with pytest.raises(MotionLimitError, match="finite"):
        check_command(np.r_[np.zeros(desc.n - 1), np.nan], env, desc)
    with pytest.raises(MotionLimitError, match="rad/s"):
        check_move(np.zeros(desc.n), np.full(desc.n, 0.1), 0.01, desc.limits.velocity, desc.joint_names)
    with pytest.raises(ValueError):
        PosePlanConfig(amplitude_deg=45.0)


def _window(rng, n=7, rate=1000.0, dur=0.5, vel=0.0, tau_noise=0.05, q_noise=1e-5):
    t = np.arange(int(dur * rate)) / rate
    q = 0.3 + vel * t[:, None] + q_noise * rng.standard_normal((t.size, n))
    dq = vel + 1e-3 * rng.standard_normal((t.size, n))
    tau = 5.0 + tau_noise * rng.standard_normal((t.size, n))
    return t, q, dq, tau


def test_settle_static_and_reasons():
    rng = np.random.default_rng(3)
    cfg = SettleConfig()
    t, q, dq, tau = _window(rng)
    r = check_static(t, q, dq, tau, cfg)
    assert r.static and r.reason == "static"
    np.testing.assert_allclose(r.q, 0.3, atol=1e-5)
    np.testing.assert_allclose(r.tau, 5.0, atol=0.02)
    assert check_static(t, q, None, tau, cfg).static  # no velocity: slope of q
    moving = check_static(*_window(rng, vel=0.05), cfg)
    assert not moving.static and "velocity" in moving.reason
    tm, qm, _, taum = _window(rng, vel=0.05)
    slope = check_static(tm, qm, None, taum, cfg)  # no velocity field: detected from the q slope
    assert not slope.static and "velocity" in slope.reason
    noisy = check_static(*_window(rng, tau_noise=2.0), cfg, joint_names=tuple("ABCDEFG"))
    assert not noisy.static and "torque" in noisy.reason
    short = check_static(t[:5], q[:5], dq[:5], tau[:5], cfg)
    assert not short.static and "samples" in short.reason
    assert "no joint_states" in check_static([], [], None, [], cfg).reason
    jump = q.copy()
    jump[-50:, 2] += 0.01
    r = check_static(t, jump, np.zeros_like(dq), tau, cfg)
    assert not r.static and "spread" in r.reason


def test_sample_window_horizon_and_time_reset():
    w = SampleWindow(horizon=0.1)
    for k in range(500):
        w.append(k * 1e-3, np.zeros(2), np.zeros(2), np.ones(2))
    t, q, dq, tau = w.arrays()
    assert t[-1] == pytest.approx(0.499) and t[0] >= 0.399 - 1e-12
    w.append(0.0, np.zeros(2), None, np.ones(2))  # time went backwards: start over
    assert len(w) == 1 and w.arrays()[2] is None


def test_stop_point_ramps_velocity_down_within_limits(dyn):
    from payload_estimation.motion.poses import stop_point

    desc = dyn.desc
    lim = desc.limits.position
    q = np.zeros(desc.n)
    dq = np.linspace(-1.0, 1.0, desc.n)
    q_stop, t = stop_point(desc, q, dq, deceleration=10.0, min_time=0.05)
    assert t == pytest.approx(0.1)
    np.testing.assert_allclose(q_stop, 0.5 * dq * t)
    q_lead, _ = stop_point(desc, q, dq, deceleration=10.0, min_time=0.05, lead=0.02)
    np.testing.assert_allclose(q_lead, dq * (0.02 + 0.5 * t))  # the arm moved on while the sample aged
    # average speed of the ramp is |dq| / 2: never above the current speed
    assert np.all(np.abs(q_stop - q) / t <= np.abs(dq) / 2 + 1e-12)
    q_edge = lim[:, 1] - 1e-3
    q_stop, _ = stop_point(desc, q_edge, np.full(desc.n, 2.0))
    assert np.all(q_stop <= lim[:, 1])
    q_stop, t = stop_point(desc, q, None)
    assert t == 0.2 and np.all(q_stop == 0)


def test_settle_rejects_a_decaying_oscillation_and_a_torque_drift():
    rng = np.random.default_rng(5)
    cfg = SettleConfig()
    t, q, dq, tau = _window(rng)
    osc = dq + 0.01 * np.sin(2 * np.pi * 8 * t)[:, None]  # mean ~0, RMS 0.007 rad/s
    r = check_static(t, q, osc, tau, cfg)
    assert not r.static and "RMS velocity" in r.reason
    ramp = tau + np.outer(np.clip(0.4 - t, 0, None) * 6.0, np.ones(7))  # torque still settling
    r = check_static(t[:300], q[:300], dq[:300], ramp[:300], cfg)
    assert not r.static and "settling" in r.reason
