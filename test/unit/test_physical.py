"""Physically consistent parameter retrieval (paper 003 eqs. 15-18): parametrisation, analytic
Jacobian, retrieval of the MuJoCo arm's hidden truth from its coefficients, exported robot files."""

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # before numpy: BLAS threads thrash on a shared machine


import numpy as np
import pytest

from payload_estimation.files.robot_writer import write_identified_robot
from payload_estimation.identification.physical import (
    CoefficientTarget,
    PhysicalRetrieval,
    PhysicalRetrievalError,
    bodies_from_theta,
    default_bounds,
    min_mass_matrix_eigenvalue,
    params_from_theta,
    params_jacobian,
    theta_from_body,
)
from payload_estimation.model.base_parameters import compute_base_parameters
from payload_estimation.model.dynamics import RigidBodyDynamics, link_params
from payload_estimation.model.parameters import check_consistency
from payload_estimation.model.robot_file import load_robot
from payload_estimation.model.urdf import load_urdf


@pytest.fixture(scope="module")
def iiwa():
    return load_robot("iiwa14")


def test_parametrisation_roundtrip(iiwa):
    theta = np.concatenate([theta_from_body(b) for b in iiwa.links])
    np.testing.assert_allclose(params_from_theta(theta), link_params(iiwa), atol=1e-13)
    for b, b2 in zip(iiwa.links, bodies_from_theta(theta)):
        assert b2.mass == pytest.approx(b.mass)
        np.testing.assert_allclose(b2.inertia_com, b.inertia_com, atol=1e-12)


def test_every_theta_is_physically_consistent():
    rng = np.random.default_rng(0)
    for _ in range(300):
        th = rng.normal(scale=[1, 2, 2, 2, 1, 1, 1, 1, 1, 1])
        body = bodies_from_theta(th)[0]
        rep = check_consistency(body, tol=0.0)
        assert rep.ok, rep.problems
        a, b, c = rep.principal_moments
        assert a + b >= c


def test_analytic_jacobian_matches_finite_differences():
    rng = np.random.default_rng(1)
    x = rng.normal(size=30) * 0.5
    eps = 1e-6
    num = np.stack([(params_from_theta(x + eps * e) - params_from_theta(x - eps * e)) / (2 * eps)
                    for e in np.eye(30)], axis=1)
    np.testing.assert_allclose(params_jacobian(x), num, atol=1e-7)


def test_retrieves_simulator_truth_coefficients(iiwa, tmp_path):
    from payload_estimation.sim import SimConfig, SimulatedArm

    truth = SimulatedArm(iiwa, SimConfig(seed=4, model_error=0.05)).true_description
    dyn = RigidBodyDynamics(iiwa)
    base = compute_base_parameters(dyn)
    pi_true = base.K @ link_params(truth)
    std = 1e-3 * np.abs(pi_true) + 1e-4
    rng = np.random.default_rng(2)
    pi_hat = pi_true + std * rng.standard_normal(pi_true.size)
    target = CoefficientTarget(pi_hat, np.diag(std**2), base.K, rss=4.0, sigma2=0.01)
    res = PhysicalRetrieval(iiwa, target).solve(starts=2, max_nfev=80, progress=False)
    assert res.problems == ()
    # the coefficients are reproduced to their uncertainty (chi2 ~ number of coefficients or less)
    assert res.chi2 < 3 * pi_true.size
    assert np.all(np.abs(res.coefficients - pi_true) < 6 * std)
    assert res.objective_nm == pytest.approx(np.sqrt(4.0 + 0.01 * res.chi2))
    ident = res.description(iiwa)
    for body in ident.links:
        assert check_consistency(body).ok
    assert min_mass_matrix_eigenvalue(ident, 300) > 0
    # same base coefficients -> same inverse dynamics as the truth, up to the coefficient error
    q, dq, ddq = (rng.uniform(-1, 1, 7) for _ in range(3))
    np.testing.assert_allclose(RigidBodyDynamics(ident).inverse_dynamics(q, dq, ddq),
                               RigidBodyDynamics(truth).inverse_dynamics(q, dq, ddq), atol=0.05)

    written = write_identified_robot("iiwa14", iiwa, res.bodies, tmp_path / "iiwa_identified.yaml")
    assert [p.suffix for p in written] == [".yaml", ".urdf"]
    from_yaml = load_robot(written[0])
    from_urdf = load_urdf(written[1].read_text())
    for d in (from_yaml, from_urdf):
        np.testing.assert_allclose(RigidBodyDynamics(d).mass_matrix(q), RigidBodyDynamics(ident).mass_matrix(q),
                                   atol=1e-9)


def test_friction_and_total_mass_bounds(iiwa):
    dyn = RigidBodyDynamics(iiwa)
    base = compute_base_parameters(dyn, "gravity")
    bounds = default_bounds(iiwa, total_mass_factor=(0.95, 1.05))
    k = np.hstack([base.K[:, :4 * 7], np.zeros((base.rank, 0))])
    # gravity-only target built on full 10-per-link K: expand the 4-per-link map
    kf = np.zeros((base.rank, 70))
    for j in range(7):
        kf[:, 10 * j:10 * j + 4] = k[:, 4 * j:4 * j + 4]
    p = link_params(iiwa)
    pi = kf @ p
    f_true = np.array([0.5, 0.3])
    kf2 = np.vstack([kf, np.zeros((2, 70))])
    fmap = np.vstack([np.zeros((base.rank, 2)), np.eye(2)])
    target = CoefficientTarget(np.concatenate([pi, f_true]), np.eye(base.rank + 2) * 1e-6, kf2, fmap)
    res = PhysicalRetrieval(iiwa, target, bounds).solve(starts=1, max_nfev=60, progress=False)
    assert res.problems == ()
    np.testing.assert_allclose(res.friction, f_true, atol=5e-3)
    total = sum(b.mass for b in res.bodies)
    assert bounds.total_mass[0] * (1 - 1e-6) <= total <= bounds.total_mass[1] * (1 + 1e-6)


def test_bad_input(iiwa):
    k = np.zeros((3, 70))
    with pytest.raises(PhysicalRetrievalError, match="shapes disagree"):
        CoefficientTarget(np.zeros(3), np.eye(2), k)
    with pytest.raises(PhysicalRetrievalError, match="NaN"):
        CoefficientTarget(np.array([0, np.nan, 0]), np.eye(3), k)
    with pytest.raises(PhysicalRetrievalError, match="expected 70"):
        PhysicalRetrieval(iiwa, CoefficientTarget(np.zeros(3), np.eye(3), np.zeros((3, 40))))
    with pytest.raises(PhysicalRetrievalError, match="not positive definite"):
        PhysicalRetrieval(iiwa, CoefficientTarget(np.zeros(3), -np.eye(3), k))
    with pytest.raises(PhysicalRetrievalError, match="starts"):
        PhysicalRetrieval(iiwa, CoefficientTarget(np.zeros(3), np.eye(3), k)).solve(starts=0)


def test_nearest_consistent_body_keeps_mass_com_and_no_consistent_body_is_nearer():
    """The Gaz 2016 LWR link 1 (principal moments -5.8e-3, 0, 2.8e-2 kg m^2): projected, it is
    consistent with the same mass and CoM, and no random consistent body (same mass, CoM) has a second
    moment about the CoM nearer to the original's (Frobenius)."""
    from payload_estimation.identification.physical import nearest_consistent_body
    from payload_estimation.model.parameters import BodyInertia

    bad = BodyInertia(4.19, np.array([0.0, -0.03, 0.12]),
                      np.array([[0.0213, 0.0, 0.0], [0.0, -0.0058, 0.0003], [0.0, 0.0003, 0.0005]]))
    assert not check_consistency(bad).ok
    near = nearest_consistent_body(bad, margin=0.0)
    assert check_consistency(near).ok and near.mass == bad.mass and np.array_equal(near.com, bad.com)
    assert check_consistency(nearest_consistent_body(bad)).ok  # with the default margin, strictly inside

    def sigma(b):
        return 0.5 * np.trace(b.inertia_com) * np.eye(3) - b.inertia_com

    d_near = np.linalg.norm(sigma(near) - sigma(bad))
    rng = np.random.default_rng(5)
    for _ in range(2000):
        a = rng.normal(scale=0.05, size=(3, 3))
        other = sigma(bad) + a @ a.T - 0.02 * np.eye(3)
        w, v = np.linalg.eigh(other)
        if w.min() < 0:
            continue
        assert np.linalg.norm(other - sigma(bad)) >= d_near - 1e-12
    for body in load_robot("iiwa14").links:  # consistent bodies are left alone
        np.testing.assert_array_equal(nearest_consistent_body(body, 0.0).inertia_com, body.inertia_com)
