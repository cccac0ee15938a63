"""Payload estimation against paper 000's numbers and pinocchio data with a known payload."""

from __future__ import annotations

import numpy as np
import pytest

from payload_estimation.identification.least_squares import RankDeficientError
from payload_estimation.model.base_parameters import compute_base_parameters, payload_jacobian
from payload_estimation.model.description import JointLimits, RobotDescription, joints_from_dh, validate
from payload_estimation.model.dynamics import RigidBodyDynamics
from payload_estimation.model.parameters import BodyInertia
from payload_estimation.model.robot_file import load_robot
from payload_estimation.payload.estimate import PayloadEstimate
from payload_estimation.payload.gravity import (
    InertiaNotExcited,
    PayloadDataError,
    PayloadLimits,
    PayloadRejected,
    anchored_gravity,
    estimate_payload_anchored,
    estimate_payload_gravity,
    estimate_payload_two_stage,
    estimate_payload_two_stage_from_data,
    gravity_from_coefficients,
    identify_coefficients,
)
from payload_estimation.payload.model_uncertainty import declared_uncertainty
from payload_estimation.payload.motion import block_jackknife_covariance, estimate_payload_full, estimate_payload_motion
from payload_estimation.payload.result import GRAVITY_NAMES, build_estimate

DEG = np.pi / 180
PICK = np.array([0, 30, 0, -60, 0, 60, 0]) * DEG  # paper-like pick configuration


def _body(m, c, izz_about_frame, ixx=None):
    """Planar body with J_zz about the frame origin given (paper 000 eq. 5)."""
    c = np.asarray(c, float)
    izz = izz_about_frame - m * (c[0] ** 2 + c[1] ** 2)
    ixx = izz if ixx is None else ixx
    return BodyInertia(m, c, np.diag([ixx, ixx, izz]))


def planar_2r() -> RobotDescription:
    """Paper 000 Sec. IV: a1=1, a2=0.5, classical DH, gravity (0, -g0) in the motion plane."""
    joints = joints_from_dh(["j1", "j2"], [[1.0, 0.0, 0.0, 0.0], [0.5, 0.0, 0.0, 0.0]])
    links = (_body(3.0, [-0.6, 0.01, 0.0], 1.3303), _body(2.0, [-0.2, 0.02, 0.0], 0.1225))
    limits = JointLimits(np.array([[-10.0, 10.0], [-10.0, 10.0]]), np.array([10.0, 10.0]), np.array([500.0, 500.0]))
    return validate(RobotDescription("planar_2r", joints, links, limits, gravity=np.array([0.0, -9.81, 0.0])))


PAYLOAD_2R = _body(1.5, [0.3, 0.1, 0.0], 0.1813)


def _sinusoids(n_samples, amps, freqs, phases, dt=0.01):
    t = np.arange(n_samples) * dt
    a, w, ph = (np.asarray(v, float) for v in (amps, freqs, phases))
    w = 2 * np.pi * w
    q = a * np.sin(np.outer(t, w) + ph)
    dq = a * w * np.cos(np.outer(t, w) + ph)
    ddq = -a * w**2 * np.sin(np.outer(t, w) + ph)
    return q, dq, ddq


def _torques(dyn, q, dq, ddq, sigma, rng):
    tau = np.array([dyn.inverse_dynamics(a, b, c) for a, b, c in zip(q, dq, ddq)])
    return tau + rng.normal(0.0, sigma, tau.shape)


def test_paper_2r_two_stage_reproduces_eq35():
    """Sec. IV: identify pi (unloaded) and pi_L (loaded) from noisy sinusoidal motion, then eq. (28)."""
    rng = np.random.default_rng(0)
    dyn = RigidBodyDynamics(planar_2r())
    loaded = dyn.with_payload(PAYLOAD_2R)
    q0, dq0, ddq0 = _sinusoids(600, [2.0, 1.5], [0.2, 0.5], [0.0, 0.7])
    q1, dq1, ddq1 = _sinusoids(600, [1.5, 2.5], [0.3, 0.4], [0.4, 0.0])
    sigma = 0.01  # "slightly noisy"
    unl = {"q": q0, "dq": dq0, "ddq": ddq0, "tau": _torques(dyn, q0, dq0, ddq0, sigma, rng)}
    lod = {"q": q1, "dq": dq1, "ddq": ddq1, "tau": _torques(loaded, q1, dq1, ddq1, sigma, rng)}
    est = estimate_payload_two_stage_from_data(dyn, unl, lod, kind="full")
    p = est.params
    # eq. (35): p_L = (1.5, 0.45, 0.15, 0.1814); the planar arm determines only these four.
    assert set(p) == {"m", "mcx", "mcy", "Jzz"}
    got = np.array([p["m"], p["mcx"], p["mcy"], p["Jzz"]])
    np.testing.assert_allclose(got, [1.5, 0.45, 0.15, 0.1814], atol=2e-3)
    std = np.array([est.std[k] for k in ("m", "mcx", "mcy", "Jzz")])
    truth = np.array([1.5, 0.45, 0.15, 0.1813])
    assert np.all(np.abs(got - truth) < 4 * std + 1e-12)
    np.testing.assert_allclose(est.com[:2], [0.3, 0.1], atol=2e-3)
    assert np.isnan(est.std["cz"]) and est.inertia is None  # not identifiable in the plane
    # eq. (31)-(34): the paper's epsilon_nz = J_eps,nz p_L (eq. 32) for these parameters.
    a1, a2 = 1.0, 0.5
    j_paper = np.array([[a2**2 / 2, a2, 0, 0.5], [a2, 1, 0, 0], [0, 0, 1, 0], [a1**2 / 2, 0, 0, 0], [a1, 0, 0, 0]])
    np.testing.assert_allclose(j_paper @ got, [0.5032, 1.2, 0.15, 0.75, 1.5], atol=3e-3)


def test_paper_2r_base_coefficients_match_truth():
    """pi_hat from data equals K p of the true links (our base coefficients), within reported std."""
    rng = np.random.default_rng(1)
    dyn = RigidBodyDynamics(planar_2r())
    base = compute_base_parameters(dyn, "full")
    assert base.rank == 6  # paper 000 eq. (29): six dynamic coefficients
    q, dq, ddq = _sinusoids(400, [2.0, 1.5], [0.2, 0.5], [0.0, 0.7])
    res = identify_coefficients(dyn, base, q, dq, ddq, _torques(dyn, q, dq, ddq, 0.05, rng))
    truth = base.coefficients(np.concatenate([b.to_params() for b in dyn.desc.links]))
    assert np.all(np.abs(res.params - truth) < 4 * res.std)


def test_paper_lwr_eq43_gives_eq44():
    """Sec. V: the printed epsilon_g,nz of eq. (43) and its payload Jacobian give eq. (44)."""
    d1, d2 = 0.4, 0.39
    # rows (c_Ly m_L, c_Lx m_L, c_Lz m_L, d2 m_L, d1 m_L), columns (m, m cx, m cy, m cz)
    j = np.array([[0, 0, 1, 0], [0, 1, 0, 0], [0, 0, 0, 1], [d2, 0, 0, 0], [d1, 0, 0, 0]], float)
    eps = np.array([0.0016, -8.13e-4, 0.3667, 1.1914, 1.2316])
    est = estimate_payload_two_stage(np.zeros(5), eps, j)
    assert est.mass == pytest.approx(3.067, abs=5e-4)
    # printed to 2, 1 and 4 significant digits (cx = -8.13e-4 / 3.067 = -2.65e-4: within one unit)
    assert est.com[0] == pytest.approx(-2.6e-4, abs=1e-5)
    assert est.com[1] == pytest.approx(5e-4, abs=0.5e-4)
    assert est.com[2] == pytest.approx(0.1196, abs=0.5e-4)
    assert est.method == "two-stage"


@pytest.mark.parametrize("robot", ["lwr4", "iiwa14"])
def test_two_stage_gravity_from_static_data(robot):
    """Sec. V procedure: pi_g and pi_L,g identified from random static poses, then eq. (28)."""
    dyn = RigidBodyDynamics(load_robot(robot))
    base = compute_base_parameters(dyn, "gravity", n_samples=30)
    rng = np.random.default_rng(14)
    q0, q1 = rng.uniform(-1.5, 1.5, (100, 7)), rng.uniform(-1.5, 1.5, (100, 7))
    est = estimate_payload_two_stage_from_data(
        dyn, {"q": q0, "tau": _static(dyn, q0, 0.1, rng)},
        {"q": q1, "tau": _static(dyn.with_payload(TRUE_PAYLOAD), q1, 0.1, rng)}, kind="gravity", base=base)
    assert est.method == "two-stage" and est.samples == 200
    err = np.abs(_est_vector(est) - _truth_vector(TRUE_PAYLOAD))
    assert np.all(err < 4 * _std_vector(est)), (err, _std_vector(est))
    assert err[0] < 0.05


@pytest.mark.parametrize("robot", ["lwr4", "iiwa14"])
def test_payload_regressor_equals_base_regressor_times_jacobian(robot):
    """Y_Lg(q) = Y_g,b(q) J_eps,g (eq. 22 + 27) and Y_L = Y_b J_eps for the full dynamics."""
    dyn = RigidBodyDynamics(load_robot(robot))
    rng = np.random.default_rng(2)
    base_g = compute_base_parameters(dyn, "gravity", n_samples=30)
    base_f = compute_base_parameters(dyn, "full", n_samples=30)
    jg, jf = payload_jacobian(base_g, dyn), payload_jacobian(base_f, dyn)
    for _ in range(5):
        q, dq, ddq = rng.uniform(-2, 2, 7), rng.uniform(-1, 1, 7), rng.uniform(-3, 3, 7)
        np.testing.assert_allclose(dyn.payload_gravity_regressor(q),
                                   base_g.base_regressor(dyn.gravity_regressor(q)) @ jg, atol=1e-9)
        np.testing.assert_allclose(dyn.payload_regressor(q, dq, ddq),
                                   base_f.base_regressor(dyn.regressor(q, dq, ddq)) @ jf, atol=1e-8)


def pick_poses(dyn, q0=PICK, n_poses=10, seed=0):
    """n_poses static poses: +-7 deg on one joint at a time, then random +-7 deg combinations."""
    rng = np.random.default_rng(seed)
    out = []
    for k in range(n_poses):
        d = np.zeros(dyn.n)
        if k < 2 * dyn.n and k < 7:
            d[k % dyn.n] = 7 * DEG * (1 if k % 2 == 0 else -1)
        else:
            d = rng.choice([-1.0, 1.0], dyn.n) * 7 * DEG
        out.append(q0 + d)
    return np.array(out)


TRUE_PAYLOAD = BodyInertia(3.028, np.array([0.004, -0.006, 0.119]), np.diag([0.02, 0.021, 0.006]))


def _static(dyn, q, sigma, rng, offset=None):
    tau = np.array([dyn.gravity(qk) for qk in q]) + rng.normal(0.0, sigma, (len(q), dyn.n))
    return tau if offset is None else tau + offset


def _truth_vector(body):
    return np.concatenate([[body.mass], body.com])


def _est_vector(est):
    return np.concatenate([[est.mass], est.com])


def _std_vector(est):
    return np.array([est.std[k] for k in ("mass", "cx", "cy", "cz")])


@pytest.mark.parametrize("robot", ["lwr4", "iiwa14"])
@pytest.mark.parametrize("method", ["one-shot", "differential"])
def test_static_estimate_within_reported_std(robot, method):
    dyn = RigidBodyDynamics(load_robot(robot))
    loaded = dyn.with_payload(TRUE_PAYLOAD)
    rng = np.random.default_rng(3)
    q = pick_poses(dyn, n_poses=20)
    tau_l = _static(loaded, q, 0.2, rng)
    tau_u = _static(dyn, q, 0.2, rng) if method == "differential" else None
    est = estimate_payload_gravity(dyn, q, tau_l, tau_u)
    assert est.method == f"gravity {method}" and est.samples == 20
    err = np.abs(_est_vector(est) - _truth_vector(TRUE_PAYLOAD))
    assert np.all(err < 4 * _std_vector(est)), (err, _std_vector(est))
    assert err[0] < 0.05 and np.all(err[1:] < 0.02)  # 20 poses, 0.2 N m noise: a few cm at most
    assert est.residual_rms == pytest.approx(0.2 * (np.sqrt(2) if method == "differential" else 1), rel=0.3)
    d = est.to_dict()
    assert set(d) >= {"mass", "com", "inertia", "frame", "std", "condition_number", "residual_rms", "samples",
                      "method"}
    assert PayloadEstimate.from_dict(d).mass == est.mass


@pytest.mark.parametrize("error", ["model", "offsets"])
def test_differential_cancels_model_error_and_offsets_one_shot_does_not(error):
    """A 5 % wrong link-mass model, or joint-torque sensor offsets, bias one-shot; differential
    (same poses without payload) cancels both."""
    desc = load_robot("lwr4")
    true = RigidBodyDynamics(desc)
    model, offset = true, None
    if error == "model":
        model = RigidBodyDynamics(desc.with_links([BodyInertia(b.mass * 1.05, b.com, b.inertia_com)
                                                   for b in desc.links]))
    else:
        offset = np.array([0.3, -0.8, 0.2, 0.6, -0.3, 0.2, 0.1])
    rng = np.random.default_rng(4)
    q = pick_poses(true, n_poses=10)
    tau_l = _static(true.with_payload(TRUE_PAYLOAD), q, 0.05, rng, offset)
    tau_u = _static(true, q, 0.05, rng, offset)
    diff = estimate_payload_gravity(model, q, tau_l, tau_u)
    one = estimate_payload_gravity(model, q, tau_l, check=False)
    truth = _truth_vector(TRUE_PAYLOAD)
    assert np.all(np.abs(_est_vector(diff) - truth) < 4 * _std_vector(diff))
    assert np.max(np.abs(_est_vector(one) - truth) / _std_vector(one)) > 10


def test_one_shot_offsets_estimated_with_spread_poses():
    dyn = RigidBodyDynamics(load_robot("lwr4"))
    rng = np.random.default_rng(5)
    q = rng.uniform(-1.5, 1.5, (60, 7))
    offset = np.array([0.3, -0.8, 0.2, 0.6, -0.3, 0.2, 0.1])
    tau_l = _static(dyn.with_payload(TRUE_PAYLOAD), q, 0.05, rng, offset)
    est = estimate_payload_gravity(dyn, q, tau_l, estimate_offsets=True)
    off_std = np.array([est.std[f"offset_{j}"] for j in dyn.desc.joint_names])
    assert np.all(np.abs(est.offsets - offset) < 4 * off_std)
    assert abs(est.mass - TRUE_PAYLOAD.mass) < 4 * est.std["mass"]
    assert est.method == "gravity one-shot + offsets"


def test_one_shot_with_identified_gravity_coefficients():
    """The unloaded torque may come from identified coefficients instead of the nominal links."""
    dyn = RigidBodyDynamics(load_robot("iiwa14"))
    base = compute_base_parameters(dyn, "gravity")
    rng = np.random.default_rng(6)
    q_id = rng.uniform(-1.5, 1.5, (80, 7))
    res = identify_coefficients(dyn, base, q_id, tau=_static(dyn, q_id, 0.05, rng))
    q = pick_poses(dyn, n_poses=10)
    tau_l = _static(dyn.with_payload(TRUE_PAYLOAD), q, 0.05, rng)
    est = estimate_payload_gravity(dyn, q, tau_l, unloaded_gravity=gravity_from_coefficients(dyn, base, res.params))
    # measured: 25 g and 3.4 mm (seeded); the identified coefficients' own error is not in σ here
    assert abs(est.mass - TRUE_PAYLOAD.mass) < 0.04
    np.testing.assert_allclose(est.com, TRUE_PAYLOAD.com, atol=0.006)


@pytest.mark.parametrize("method", ["one-shot", "differential"])
def test_monte_carlo_unbiased_and_std_honest(method):
    """300 noisy repetitions: mean error within 3 standard errors, reported std ~ empirical spread."""
    dyn = RigidBodyDynamics(load_robot("lwr4"))
    loaded = dyn.with_payload(TRUE_PAYLOAD)
    q = pick_poses(dyn, n_poses=10)
    g_l = np.array([loaded.gravity(qk) for qk in q])
    g_u = np.array([dyn.gravity(qk) for qk in q])
    rng = np.random.default_rng(7)
    sigma, runs = 0.3, 300
    ests, stds = [], []
    for _ in range(runs):
        tau_l = g_l + rng.normal(0, sigma, g_l.shape)
        tau_u = g_u + rng.normal(0, sigma, g_u.shape) if method == "differential" else None
        e = estimate_payload_gravity(dyn, q, tau_l, tau_u, check=False)
        ests.append(_est_vector(e))
        stds.append(_std_vector(e))
    ests, stds = np.array(ests), np.array(stds)
    err = ests - _truth_vector(TRUE_PAYLOAD)
    spread = err.std(axis=0, ddof=1)
    assert np.all(np.abs(err.mean(axis=0)) < 3 * spread / np.sqrt(runs)), (err.mean(axis=0), spread)
    ratio = stds.mean(axis=0) / spread
    assert np.all(np.abs(ratio - 1) < 0.2), ratio


def test_weighted_fit_with_per_joint_noise():
    """Joint noise from 0.05 to 1 N m: weights 1/sigma_j^2 give honest, smaller std than unweighted."""
    dyn = RigidBodyDynamics(load_robot("iiwa14"))
    loaded = dyn.with_payload(TRUE_PAYLOAD)
    q = pick_poses(dyn, n_poses=10)
    g = np.array([loaded.gravity(qk) for qk in q])
    sig = np.array([1.0, 0.05, 1.0, 0.1, 1.0, 0.1, 0.05])
    rng = np.random.default_rng(13)
    w_est, u_est, w_std = [], [], []
    for _ in range(200):
        tau = g + rng.normal(0, sig, g.shape)
        e = estimate_payload_gravity(dyn, q, tau, weights=1 / sig**2, check=False)
        w_est.append(_est_vector(e))
        w_std.append(_std_vector(e))
        u_est.append(_est_vector(estimate_payload_gravity(dyn, q, tau, check=False)))
    w_spread, u_spread = np.std(w_est, axis=0, ddof=1), np.std(u_est, axis=0, ddof=1)
    assert np.all(np.abs(np.mean(w_std, axis=0) / w_spread - 1) < 0.2)
    assert np.all(w_spread < 0.8 * u_spread)


def test_full_payload_from_dynamic_motion():
    """All ten parameters from an exciting 7-joint motion (differential) plus static rows (eq. 45)."""
    dyn = RigidBodyDynamics(load_robot("lwr4"))
    loaded = dyn.with_payload(TRUE_PAYLOAD)
    rng = np.random.default_rng(8)
    q, dq, ddq = _sinusoids(300, [1.2, 0.6, 1.0, 0.8, 1.2, 1.0, 1.5], [0.11, 0.17, 0.23, 0.19, 0.29, 0.31, 0.37],
                            rng.uniform(0, np.pi, 7), dt=0.05)
    q = q + PICK
    tau_l, tau_u = _torques(loaded, q, dq, ddq, 0.05, rng), _torques(dyn, q, dq, ddq, 0.05, rng)
    qs = pick_poses(dyn, n_poses=10)
    est = estimate_payload_full(dyn, q, dq, ddq, tau_l, tau_u, static_q=qs,
                                static_tau_loaded=_static(loaded, qs, 0.05, rng),
                                static_tau_unloaded=_static(dyn, qs, 0.05, rng))
    assert est.method == "full differential + 10 static"
    truth_i = np.array([0.02, 0, 0, 0.021, 0, 0.006])
    std_i = np.array([est.std[k] for k in ("Ixx", "Ixy", "Ixz", "Iyy", "Iyz", "Izz")])
    assert np.all(np.abs(est.inertia - truth_i) < 4 * std_i + 1e-9), (est.inertia, std_i)
    assert np.all(std_i < 0.002)  # so that a zero inertia (truth 0.006-0.021 kg m²) cannot pass the line above
    diag = [0, 3, 5]
    np.testing.assert_allclose(est.inertia[diag], truth_i[diag], rtol=0.1)
    assert abs(est.mass - TRUE_PAYLOAD.mass) < 4 * est.std["mass"]
    np.testing.assert_allclose(est.inertia_about_frame(), TRUE_PAYLOAD.to_params()[4:], atol=0.03)


def test_full_payload_refuses_motion_that_does_not_excite_inertia():
    dyn = RigidBodyDynamics(load_robot("lwr4"))
    loaded = dyn.with_payload(TRUE_PAYLOAD)
    rng = np.random.default_rng(9)
    n_s = 200
    q = np.tile(PICK, (n_s, 1))
    q[:, 1] += 0.05 * np.sin(np.linspace(0, 2 * np.pi, n_s))  # a tiny slow motion of one joint
    dq = np.gradient(q, 0.05, axis=0)
    ddq = np.gradient(dq, 0.05, axis=0)
    tau_l, tau_u = _torques(loaded, q, dq, ddq, 0.05, rng), _torques(dyn, q, dq, ddq, 0.05, rng)
    with pytest.raises(InertiaNotExcited, match="does not excite the payload inertia") as info:
        estimate_payload_full(dyn, q, dq, ddq, tau_l, tau_u)
    assert info.value.columns
    qs = pick_poses(dyn, n_poses=10)
    flagged = estimate_payload_full(dyn, q, dq, ddq, tau_l, tau_u, static_q=qs,
                                    static_tau_loaded=_static(loaded, qs, 0.05, rng),
                                    static_tau_unloaded=_static(dyn, qs, 0.05, rng), on_not_excited="gravity")
    assert "inertia not excited" in flagged.method and flagged.inertia is None
    assert abs(flagged.mass - TRUE_PAYLOAD.mass) < 4 * flagged.std["mass"]


# ---------------------------------------------------------------------------------------- bad input

@pytest.fixture(scope="module")
def lwr():
    dyn = RigidBodyDynamics(load_robot("lwr4"))
    q = pick_poses(dyn, n_poses=10)
    rng = np.random.default_rng(10)
    return dyn, q, _static(dyn.with_payload(TRUE_PAYLOAD), q, 0.1, rng), _static(dyn, q, 0.1, rng)


def test_nan_torque_is_rejected_with_sample_and_joint(lwr):
    dyn, q, tau_l, _ = lwr
    bad = tau_l.copy()
    bad[3, 4] = np.nan
    with pytest.raises(PayloadDataError, match="tau_loaded is NaN/inf at sample 3, joint 5"):
        estimate_payload_gravity(dyn, q, bad)
    bad[3, 4] = np.inf
    with pytest.raises(PayloadDataError, match="sample 3, joint 5"):
        estimate_payload_gravity(dyn, q, bad)


def test_wrong_shapes_are_rejected(lwr):
    dyn, q, tau_l, tau_u = lwr
    with pytest.raises(PayloadDataError, match="6 joints per sample, the robot has 7"):
        estimate_payload_gravity(dyn, q[:, :6], tau_l)
    with pytest.raises(PayloadDataError, match="9 samples, expected 10"):
        estimate_payload_gravity(dyn, q, tau_l, tau_u[:9])
    with pytest.raises(PayloadDataError, match="method must be one of"):
        estimate_payload_gravity(dyn, q, tau_l, method="magic")


def test_moving_capture_detected(lwr):
    from payload_estimation.signals.samples import NotStaticError

    dyn, q, tau_l, _ = lwr
    dq = np.zeros_like(q)
    dq[6, 3] = -0.1
    with pytest.raises(NotStaticError, match="sample 6 is not static: joint A3 moves at 0.1 rad/s"):
        estimate_payload_gravity(dyn, q, tau_l, dq=dq)
    dq[6, 3] = 0.001
    assert estimate_payload_gravity(dyn, q, tau_l, dq=dq).samples == 10


def test_identical_poses_are_rank_deficient(lwr):
    dyn, q, tau_l, _ = lwr
    same = np.tile(q[0], (10, 1))
    with pytest.raises(RankDeficientError, match="rank deficient") as info:
        estimate_payload_gravity(dyn, same, tau_l)
    assert info.value.columns and set(info.value.columns) <= {"m", "mcx", "mcy", "mcz"}


def test_rank_deficiency_names_as_many_unknowns_as_it_counts(lwr):
    """One pose leaves 1 direction of the 4 gravity parameters undetermined, a combination of two of them:
    the message must not read 'only 3 of the 4 ... not determined: mcx, mcz' (two named, one missing)."""
    dyn, q, tau_l, _ = lwr
    with pytest.raises(RankDeficientError) as info:
        estimate_payload_gravity(dyn, np.tile(q[0], (5, 1)), np.tile(tau_l[0], (5, 1)))
    msg, cols = str(info.value), info.value.columns
    assert "1 distinct pose (5 samples) determine only 3 of the 4 gravity parameters" in msg
    assert len(cols) == 2 and f"1 combination of {', '.join(cols)} is not determined" in msg, msg


def test_the_scatter_note_says_by_how_much_sigma_was_scaled_and_only_when_it_was():
    """The generalized fit scales σ by sqrt(χ²/dof) when the torques scatter more than declared. Torque
    noise 10 % above the declared 0.05 N m scales it by under 5 %: no note (it read 'scatter 1x more');
    0.5 N m: the note's factor is the σ ratio to an unscaled fit of the same poses."""
    dyn = RigidBodyDynamics(load_robot("lwr4"))
    q = pick_poses(dyn, n_poses=10)
    g = np.array([dyn.with_payload(TRUE_PAYLOAD).gravity(x) for x in q])
    unc = declared_uncertainty(dyn, 0.05, 0.5)

    def fit(sigma, misfit_chi2=None):
        noise = np.random.default_rng(0).normal(0, sigma, g.shape)
        return estimate_payload_gravity(dyn, q, g + noise, model_uncertainty=unc, misfit_chi2=misfit_chi2)

    unscaled, slight, noisy = fit(0.05), fit(0.055), fit(0.5, misfit_chi2=np.inf)  # the scaling alone
    assert not [n for n in unscaled.notes + slight.notes if "scal" in n or "scatter" in n]
    assert not unscaled.misfit and not slight.misfit
    checked = fit(0.5)  # 10x the declared noise: the data disagree with the noise model, said and σ widened further
    assert checked.misfit and checked.std["mass"] > noisy.std["mass"]
    assert 1.0 < slight.std["mass"] / unscaled.std["mass"] < 1.05  # scaled, a little
    note = next(n for n in noisy.notes if n.startswith("σ scaled up by "))
    factor = float(note.removeprefix("σ scaled up by ").split("x")[0])
    assert factor == pytest.approx(noisy.std["mass"] / unscaled.std["mass"], rel=0.01) and factor > 2


def test_negative_mass_rejected(lwr):
    dyn, q, tau_l, tau_u = lwr
    with pytest.raises(PayloadRejected, match="is not above 0"):  # loaded/unloaded swapped
        estimate_payload_gravity(dyn, q, tau_u, tau_l)


def test_mass_above_limit_rejected(lwr):
    dyn, q, tau_l, tau_u = lwr
    with pytest.raises(PayloadRejected, match="exceeds the limit of 2.0 kg"):
        estimate_payload_gravity(dyn, q, tau_l, tau_u, limits=PayloadLimits(max_payload=2.0))


def test_com_beyond_radius_rejected():
    dyn = RigidBodyDynamics(load_robot("lwr4"))
    q = pick_poses(dyn, n_poses=10)
    far = BodyInertia(1.0, np.array([0.0, 0.0, 1.5]), np.diag([0.01, 0.01, 0.01]))
    rng = np.random.default_rng(11)
    tau_l = _static(dyn.with_payload(far), q, 0.01, rng)
    with pytest.raises(PayloadRejected, match="beyond max_com_radius 1.0 m"):
        estimate_payload_gravity(dyn, q, tau_l)
    assert estimate_payload_gravity(dyn, q, tau_l, limits=PayloadLimits(max_com_radius=2.0)).com[2] > 1.4


def test_impossible_inertia_rejected():
    good = BodyInertia(2.0, np.array([0.01, 0.0, 0.1]), np.diag([0.02, 0.02, 0.01])).to_params()
    eye = np.eye(10)
    assert estimate_payload_two_stage(np.zeros(10), good, eye).inertia is not None
    not_pd = good.copy()
    not_pd[4] -= 0.05  # Jxx about the frame too small: I_c,xx < 0
    with pytest.raises(PayloadRejected, match="not positive definite"):
        estimate_payload_two_stage(np.zeros(10), not_pd, eye)
    triangle = BodyInertia(2.0, np.zeros(3), np.diag([0.01, 0.01, 0.05])).to_params()
    with pytest.raises(PayloadRejected, match="triangle inequality"):
        estimate_payload_two_stage(np.zeros(10), triangle, eye)


def test_non_finite_coefficients_rejected():
    with pytest.raises(PayloadDataError, match="pi_hat_L contains NaN"):
        estimate_payload_two_stage(np.zeros(4), np.array([1.0, np.nan, 0, 0]), np.eye(4))


def test_cli_estimate_on_shipped_example(capsys):
    """The shipped MuJoCo example (bench/make_examples.py): differential within 4 std of the truth."""
    import json
    from pathlib import Path

    from payload_estimation.cli import main

    ex = Path(__file__).resolve().parents[2] / "examples"
    truth = json.loads((ex / "lwr4_truth.json").read_text())
    rc = main(["estimate", "--robot", "lwr4", "--samples", str(ex / "lwr4_loaded_samples.csv"),
               "--unloaded", str(ex / "lwr4_unloaded_samples.csv"), "--json"])
    assert rc == 0
    d = json.loads(capsys.readouterr().out)
    assert d["method"] == "gravity differential" and d["samples"] == 10 and d["frame"] == "lwr4_dh_frame_7"
    assert abs(d["mass"] - truth["mass"]) < 4 * d["std"]["mass"]
    for i, ax in enumerate("xyz"):
        assert abs(d["com"][i] - truth["com"][i]) < 4 * d["std"]["c" + ax]
    assert main(["estimate", "--robot", "lwr4", "--samples", str(ex / "lwr4_loaded_samples.csv")]) == 0
    assert "gravity one-shot" in capsys.readouterr().out
    rc = main(["estimate", "--robot", "lwr4", "--samples", str(ex / "lwr4_loaded_samples.csv"),
               "--max-payload", "1"])
    assert rc == 1 and "exceeds the limit of 1.0 kg" in capsys.readouterr().err


def test_cli_table_says_no_payload_and_gives_each_offset_with_its_sigma(capsys):
    """Nothing held (the unloaded captures twice): no CoM of nothing and no 'inertia not determined (cx, cy,
    cz)'; fitted offsets are named by joint with their σ."""
    from pathlib import Path

    from payload_estimation.cli import main

    ex = Path(__file__).resolve().parents[2] / "examples"
    unloaded = str(ex / "lwr4_unloaded_samples.csv")
    assert main(["estimate", "--robot", "lwr4", "--samples", unloaded, "--unloaded", unloaded]) == 0
    out = capsys.readouterr().out
    assert "no payload detected: CoM and inertia do not apply" in out
    assert "CoM x" not in out and "not determined (cx" not in out
    assert main(["estimate", "--robot", "lwr4", "--samples", str(ex / "lwr4_loaded_samples.csv"), "--offsets"]) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if x.strip().startswith("offsets"))
    joints = load_robot("lwr4").joint_names
    assert [p.split()[0] for p in line.split("offsets", 1)[1].removesuffix(" N m").split(",")] == list(joints)
    assert line.count("+-") == len(joints)


def test_cli_rejects_moving_capture(tmp_path, capsys):
    from payload_estimation.cli import main
    from payload_estimation.files.csv_samples import write_samples_csv
    from payload_estimation.signals.samples import Samples

    dyn = RigidBodyDynamics(load_robot("lwr4"))
    q = pick_poses(dyn, n_poses=10)
    dq = np.zeros_like(q)
    dq[4, 2] = 0.3
    tau = _static(dyn.with_payload(TRUE_PAYLOAD), q, 0.05, np.random.default_rng(12))
    write_samples_csv(Samples(q, tau, dq=dq), tmp_path / "moving.csv")
    assert main(["estimate", "--robot", "lwr4", "--samples", str(tmp_path / "moving.csv")]) == 1
    assert "sample 4 is not static" in capsys.readouterr().err


@pytest.mark.parametrize("robot", ["lwr4", "iiwa14"])
def test_mujoco_static_samples(robot):
    """Torques from MuJoCo (an engine we did not write), 10 % link-model error, noisy filtered sensor:
    the differential estimate is within 4 reported std of the attached payload."""
    from payload_estimation.sim import SensorConfig, SimConfig, SimulatedArm, true_links

    desc = load_robot(robot)
    dyn = RigidBodyDynamics(desc)
    q = pick_poses(dyn, n_poses=10)
    links = true_links(desc, 0.1, 5)
    samples = {}
    for label, payload in (("unloaded", None), ("loaded", TRUE_PAYLOAD)):
        cfg = SimConfig(seed=20 + (payload is not None), true_links=links,
                        sensor=SensorConfig(noise_std=0.3, offset=0.2, lowpass_hz=10.0))
        arm = SimulatedArm(desc, cfg)
        if payload is not None:
            arm.attach_payload(payload)
        rows = []
        for qk in q:
            arm.reset(qk)
            arm.step(200)  # 0.2 s at rest: let the filtered noise decorrelate
            rows.append(arm.state())
        samples[label] = (np.array([r.q for r in rows]), np.array([r.tau for r in rows]))
    np.testing.assert_allclose(samples["loaded"][0], q, atol=1e-6)
    est = estimate_payload_gravity(dyn, q, samples["loaded"][1], samples["unloaded"][1])
    err = np.abs(_est_vector(est) - _truth_vector(TRUE_PAYLOAD))
    assert np.all(err < 4 * _std_vector(est)), (err, _std_vector(est))
    assert err[0] < 0.05 and np.all(err[1:] < 0.01)


def test_cli_full_from_dynamic_csv(tmp_path, capsys):
    import json

    from payload_estimation.cli import main
    from payload_estimation.files.csv_samples import write_samples_csv
    from payload_estimation.signals.samples import Samples

    dyn = RigidBodyDynamics(load_robot("lwr4"))
    loaded = dyn.with_payload(TRUE_PAYLOAD)
    rng = np.random.default_rng(15)
    q, dq, ddq = _sinusoids(300, [1.2, 0.6, 1.0, 0.8, 1.2, 1.0, 1.5], [0.11, 0.17, 0.23, 0.19, 0.29, 0.31, 0.37],
                            rng.uniform(0, np.pi, 7), dt=0.05)
    q = q + PICK
    write_samples_csv(Samples(q, _torques(loaded, q, dq, ddq, 0.02, rng), dq, ddq), tmp_path / "l.csv")
    write_samples_csv(Samples(q, _torques(dyn, q, dq, ddq, 0.02, rng), dq, ddq), tmp_path / "u.csv")
    assert main(["estimate", "--robot", "lwr4", "--samples", str(tmp_path / "l.csv"), "--unloaded",
                 str(tmp_path / "u.csv"), "--full", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["method"] == "motion differential" and d["inertia"] is not None and d["kind"] == "motion"
    np.testing.assert_allclose(d["inertia"], [0.02, 0, 0, 0.021, 0, 0.006], atol=4 * max(d["std"]["Ixx"], 1e-4))
    write_samples_csv(Samples(q, _torques(loaded, q, dq, ddq, 0.02, rng)), tmp_path / "static_only.csv")
    assert main(["estimate", "--robot", "lwr4", "--samples", str(tmp_path / "static_only.csv"), "--full"]) == 1
    assert "a motion needs time stamps" in capsys.readouterr().err


def test_anchored_differential_cancels_a_local_model_error_with_one_unloaded_capture():
    """One unloaded capture at the pick configuration anchors a 5 % wrong link model (and sensor
    offsets) over the ±7° poses: anchored estimate within 1 % / 5 mm, the one-shot CoM well off."""
    desc = load_robot("lwr4")
    true = RigidBodyDynamics(desc)
    model = RigidBodyDynamics(desc.with_links([BodyInertia(b.mass * 1.05, b.com, b.inertia_com) for b in desc.links]))
    offset = np.array([0.3, -0.8, 0.2, 0.6, -0.3, 0.2, 0.1])
    rng = np.random.default_rng(7)
    q = pick_poses(true, n_poses=10)
    tau_l = _static(true.with_payload(TRUE_PAYLOAD), q, 0.02, rng, offset)
    q_u = PICK[None]
    tau_u = _static(true, q_u, 0.02, rng, offset)
    g = anchored_gravity(model, q_u, tau_u)
    np.testing.assert_allclose(g(PICK), tau_u[0], atol=1e-12)  # exact at the anchor
    np.testing.assert_allclose(g(q[3]) - model.gravity(q[3]), tau_u[0] - model.gravity(PICK), atol=1e-12)
    unc = declared_uncertainty(model, 0.05)
    est = estimate_payload_anchored(model, q, tau_l, q_u, tau_u, model_uncertainty=unc)
    one = estimate_payload_gravity(model, q, tau_l, check=False)
    assert est.method == "gravity differential (anchored by 1 unloaded capture(s))"
    assert abs(est.mass - TRUE_PAYLOAD.mass) / TRUE_PAYLOAD.mass < 0.01
    assert np.linalg.norm(est.com - TRUE_PAYLOAD.com) < 0.005
    # the unanchored model puts the CoM several mm off (measured: 7.0 mm vs 1.4 mm anchored)
    assert np.linalg.norm(one.com - TRUE_PAYLOAD.com) > 3 * np.linalg.norm(est.com - TRUE_PAYLOAD.com)
    with pytest.raises(PayloadDataError):
        anchored_gravity(model, np.empty((0, 7)), np.empty((0, 7)))


def test_no_payload_is_a_zero_result_also_when_the_poses_hardly_see_the_mass():
    """Empty gripper: the fitted mass is noise around 0 and its CoM noise / ~0 (metres away). Confidently
    below PayloadLimits.no_payload_below it is 'no payload' (0 kg, with the note), not a rejection. A mass
    the data cannot tell from 0 (|m| <= 3 σ) is 'no payload' too when it is not positive or its CoM is
    implausible, with σ kept and the payload such data would miss said (issue 47: an empty-gripper sample
    at a stretched pose aborted with '-0.0007613 kg (std 0.2) is not above 0.0 kg'); a mass clearly below
    0 (loaded and unloaded swapped, test_negative_mass_rejected) is still refused."""
    dyn = RigidBodyDynamics(load_robot("lwr4"))
    rng = np.random.default_rng(11)
    q = pick_poses(dyn)
    est = estimate_payload_gravity(dyn, q, _static(dyn, q, 0.05, rng))
    assert est.mass == 0.0 and est.method.endswith("(no payload)") and "no payload detected" in est.notes[0]
    assert 0 < est.std["mass"] < 0.02 and "within 0.05 kg of 0 at 3 σ" in est.notes[0]
    noisy = estimate_payload_gravity(dyn, q, _static(dyn, q, 5.0, rng))  # 5 N m noise: +0.43 ± 0.39 kg, CoM 1.9 m
    assert noisy.mass == 0.0 and noisy.method.endswith("(no payload)") and noisy.std["mass"] > 0.3
    assert "would miss a payload of up to 1.2 kg (3 σ)" in noisy.notes[0]
    stretched = pick_poses(dyn, q0=np.zeros(dyn.n))
    for seed in (1, 2, 3):  # nothing held; fitted -0.009, +0.025 (CoM implausible) and -0.049 kg, σ 0.03-0.04 kg
        rng = np.random.default_rng(seed)
        est = estimate_payload_gravity(dyn, stretched, _static(dyn, stretched, 0.05, rng),
                                       _static(dyn, stretched, 0.05, rng))
        assert est.mass == 0.0 and est.method == "gravity differential (no payload)", seed
        assert est.notes[0].startswith("no payload detected: mass ") and "not distinguishable from 0" in est.notes[0]
    m, s = -0.0007613, 0.2  # the numbers, through the rule every fit ends in
    out = build_estimate(np.array([m, 0.0, 0.0, 0.01 * m]), np.diag([s * s, 1e-4, 1e-4, 1e-4]), np.ones(4, bool),
                         GRAVITY_NAMES, method="static", frame="f", samples=10, condition_number=10.0,
                         residual_rms=0.1, limits=PayloadLimits())
    assert out.mass == 0.0 and out.std["mass"] == pytest.approx(s) and "up to 0.6 kg" in out.notes[0]
    with pytest.raises(PayloadRejected, match="is not above 0"):  # 4 σ below 0: not an empty gripper
        build_estimate(np.array([-0.8, 0.0, 0.0, -0.008]), np.diag([s * s, 1e-4, 1e-4, 1e-4]), np.ones(4, bool),
                       GRAVITY_NAMES, method="static", frame="f", samples=10, condition_number=10.0,
                       residual_rms=0.1, limits=PayloadLimits())


def test_motion_fit_with_nothing_held_says_no_payload():
    """A motion fit of a run with nothing attached keeps the no-payload note (it was overwritten by the fit's
    own notes, so the offline motion path printed notes about the inertia of nothing)."""
    dyn = RigidBodyDynamics(load_robot("lwr4"))
    rng = np.random.default_rng(12)
    q, dq, ddq = _sinusoids(300, [1.2, 0.6, 1.0, 0.8, 1.2, 1.0, 1.5], [0.11, 0.17, 0.23, 0.19, 0.29, 0.31, 0.37],
                            rng.uniform(0, np.pi, 7), dt=0.05)
    q = q + PICK
    dtau = _torques(dyn, q, dq, ddq, 0.05, rng) - _torques(dyn, q, dq, ddq, 0.05, rng)
    est = estimate_payload_motion(dyn, q, dq, ddq, dtau)
    assert est.mass == 0.0
    assert any(n.startswith("no payload detected") for n in est.notes), est.notes
    assert not any("inertia" in n for n in est.notes), est.notes


def test_the_block_jackknife_is_the_fits_with_each_stretch_left_out():
    # rows in time order, 7 per sample, weighted, with a residual that drifts over the motion (what it is for)
    rng = np.random.default_rng(3)
    n, n_s = 7, 400
    y = rng.normal(size=(n * n_s, 10)) * np.logspace(0, 2, 10)
    w = rng.uniform(0.5, 2.0, size=n * n_s)
    rhs = y @ rng.normal(size=10) + 0.1 * rng.normal(size=n * n_s) + np.repeat(np.sin(np.arange(n_s) / 40), n)
    sw = np.sqrt(w)
    fits = []
    for part in np.array_split(np.arange(n_s), 10):  # the definition: ten weighted fits without one stretch each
        rows = np.repeat(~np.isin(np.arange(n_s), part), n)
        fits.append(np.linalg.lstsq(y[rows] * sw[rows, None], rhs[rows] * sw[rows], rcond=None)[0])
    d = np.array(fits) - np.mean(fits, axis=0)
    np.testing.assert_allclose(block_jackknife_covariance(y, rhs, w, n), 0.9 * d.T @ d, rtol=1e-8, atol=1e-14)
    assert block_jackknife_covariance(y[:n * 150], rhs[:n * 150], w[:n * 150], n) is None  # < 20 samples a stretch
