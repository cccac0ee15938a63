"""Least squares, RSD and essential parameters against closed forms and Monte-Carlo truth."""

from __future__ import annotations

import numpy as np
import pytest

from payload_estimation.identification.least_squares import (
    LeastSquaresError,
    RankDeficientError,
    essential_parameters,
    friction_names,
    friction_regressor,
    full_rank_columns,
    solve_least_squares,
    stack_rows,
    torque_error,
)
from payload_estimation.model.dynamics import RigidBodyDynamics
from payload_estimation.model.robot_file import load_robot


def _problem(rng, n_rows=200, p=(1.0, -2.0, 0.5), sigma=0.1):
    y = rng.normal(size=(n_rows, len(p)))
    return y, y @ np.asarray(p) + rng.normal(0, sigma, n_rows)


def test_matches_normal_equations_and_paper_003_eq7():
    rng = np.random.default_rng(0)
    y, tau = _problem(rng)
    res = solve_least_squares(y, tau, names=("a", "b", "c"))
    p_ref = np.linalg.solve(y.T @ y, y.T @ tau)
    np.testing.assert_allclose(res.params, p_ref, rtol=1e-10)
    s2 = np.sum((tau - y @ p_ref) ** 2) / (200 - 3)  # eq. (7): ||tau - Y pi||^2 / (Kn - b)
    assert res.sigma2 == pytest.approx(s2, rel=1e-10)
    cov = s2 * np.linalg.inv(y.T @ y)
    np.testing.assert_allclose(res.covariance, cov, rtol=1e-9)
    np.testing.assert_allclose(res.std, np.sqrt(np.diag(cov)), rtol=1e-9)
    np.testing.assert_allclose(res.rsd, 100 * np.sqrt(np.diag(cov)) / np.abs(p_ref), rtol=1e-9)
    assert res.residual_rms == pytest.approx(np.sqrt(np.mean((tau - y @ p_ref) ** 2)))
    assert res.condition_number == pytest.approx(np.linalg.cond(y))
    assert res.n_rows == 200 and res.names == ("a", "b", "c")
    assert res.as_dict()["b"] == pytest.approx(-2.0, abs=0.05)


def test_monte_carlo_std_matches_spread():
    rng = np.random.default_rng(21)
    y = rng.normal(size=(60, 3))
    truth = np.array([1.0, -2.0, 0.5])
    runs = [solve_least_squares(y, y @ truth + rng.normal(0, 0.3, 60)) for _ in range(400)]
    est = np.array([r.params for r in runs])
    spread = est.std(axis=0, ddof=1)
    assert np.all(np.abs(est.mean(axis=0) - truth) < 3 * spread / np.sqrt(400))
    np.testing.assert_allclose(np.mean([r.std for r in runs], axis=0) / spread, 1.0, atol=0.15)


def test_weights_give_gauss_markov_covariance():
    """Heteroscedastic rows weighted by 1/s^2: sigma2 ~ 1 and std matches the weighted spread."""
    rng = np.random.default_rng(2)
    y = rng.normal(size=(300, 2))
    s = np.where(np.arange(300) % 2 == 0, 0.05, 1.0)
    truth = np.array([0.7, 1.3])
    runs = [solve_least_squares(y, y @ truth + rng.normal(0, s), weights=1 / s**2) for _ in range(300)]
    est = np.array([r.params for r in runs])
    assert np.mean([r.sigma2 for r in runs]) == pytest.approx(1.0, rel=0.05)
    np.testing.assert_allclose(np.mean([r.std for r in runs], axis=0) / est.std(axis=0, ddof=1), 1, atol=0.15)
    unweighted = np.array([solve_least_squares(y, y @ truth + rng.normal(0, s)).params for _ in range(300)])
    assert np.all(est.std(axis=0) < 0.5 * unweighted.std(axis=0))


def test_rank_deficiency_names_the_columns():
    rng = np.random.default_rng(3)
    y = rng.normal(size=(50, 3))
    y = np.column_stack([y, 2 * y[:, 0], np.zeros(50)])
    with pytest.raises(RankDeficientError, match="rank 3 < 5") as info:
        solve_least_squares(y, rng.normal(size=50), names=["a", "b", "c", "twice_a", "zero"])
    assert "zero" in info.value.columns and len(info.value.columns) == 2
    assert set(info.value.columns) - {"zero"} <= {"a", "twice_a"}
    np.testing.assert_array_equal(full_rank_columns(y), [0, 1, 2])


def test_full_rank_columns_on_robot_regressor_finds_base_count():
    """Pruning the stacked LWR gravity regressor keeps as many columns as its rank."""
    dyn = RigidBodyDynamics(load_robot("lwr4"))
    rng = np.random.default_rng(4)
    w = stack_rows([dyn.gravity_regressor(rng.uniform(-2, 2, 7)) for _ in range(40)])
    cols = full_rank_columns(w)
    assert cols.size == np.linalg.matrix_rank(w) == 12  # paper 000 eq. (38): 12 gravity coefficients
    assert np.linalg.matrix_rank(w[:, cols]) == cols.size


@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_non_finite_input_rejected(bad):
    y, tau = _problem(np.random.default_rng(5))
    y[7, 1] = bad
    with pytest.raises(LeastSquaresError, match="row 7, column 1"):
        solve_least_squares(y, tau)
    y[7, 1] = 0.0
    tau[9] = bad
    with pytest.raises(LeastSquaresError, match="tau contains NaN/inf.*row 9"):
        solve_least_squares(y, tau)


def test_shape_errors():
    y, tau = _problem(np.random.default_rng(6))
    with pytest.raises(LeastSquaresError, match="Y has 200 rows but tau has 199"):
        solve_least_squares(y, tau[:-1])
    with pytest.raises(LeastSquaresError, match="2 parameter names given for 3"):
        solve_least_squares(y, tau, names=["a", "b"])
    with pytest.raises(LeastSquaresError, match="199 weights given for 200 rows"):
        solve_least_squares(y, tau, weights=np.ones(199))
    with pytest.raises(LeastSquaresError, match="more equations than parameters"):
        solve_least_squares(y[:3], tau[:3])
    with pytest.raises(LeastSquaresError, match="must be >= 0"):
        solve_least_squares(y, tau, weights=-np.ones(200))


def test_essential_parameters_drops_small_poorly_identified():
    rng = np.random.default_rng(7)
    y = rng.normal(size=(300, 5))
    truth = np.array([1.0, -0.8, 0.5, 0.0, 0.001])  # d, e: below the noise (std ~ 0.003)
    tau = y @ truth + rng.normal(0, 0.05, 300)
    kept, res = essential_parameters(y, tau, ["a", "b", "c", "d", "e"])
    assert list(kept) == [0, 1, 2]
    assert res.names == ("a", "b", "c") and np.all(res.rsd <= 40)
    np.testing.assert_allclose(res.params, truth[:3], atol=0.02)
    # A large parameter with a large RSD is kept under the paper's (AND) rule, dropped by RSD alone.
    y2 = y.copy()
    y2[:, 2] *= 1e-3  # c = 0.5 barely excited: std ~ 3
    tau2 = y2 @ truth + rng.normal(0, 0.05, 300)
    k_and, _ = essential_parameters(y2, tau2, list("abcde"))
    k_rsd, _ = essential_parameters(y2, tau2, list("abcde"), min_abs=None)
    assert 2 in k_and and 2 not in k_rsd


def test_friction_regressor_layout_matches_stack_rows():
    dq = np.array([[0.5, -1.0, 0.0], [-2.0, 0.3, 1.0]])
    f = friction_regressor(dq)
    fv, fc = np.array([0.1, 0.2, 0.3]), np.array([1.0, 2.0, 3.0])
    tau = f @ np.concatenate([fv, fc])
    expected = fv * dq + fc * np.sign(dq)  # tau_f,j = Fv_j dq_j + Fc_j sign(dq_j)
    np.testing.assert_allclose(tau, expected.reshape(-1))
    blocks = [np.hstack([np.diag(d), np.diag(np.sign(d))]) for d in dq]
    np.testing.assert_array_equal(f, stack_rows(blocks))
    assert friction_regressor(dq, coulomb=False).shape == (6, 3)
    assert friction_names(3) == ("Fv1", "Fv2", "Fv3", "Fc1", "Fc2", "Fc3")
    with pytest.raises(LeastSquaresError, match="block 1 has shape"):
        stack_rows([np.zeros((3, 2)), np.zeros((3, 3))])


def test_torque_error_by_hand():
    m = np.array([[1.0, 2.0], [3.0, -2.0]])
    p = np.array([[1.5, 2.0], [2.0, -2.0]])
    e = torque_error(m, p)
    np.testing.assert_allclose(e.per_joint_rms, [np.sqrt((0.25 + 1.0) / 2), 0.0])
    np.testing.assert_allclose(e.per_joint_relative, [np.sqrt(0.625) / np.sqrt(5.0), 0.0])
    np.testing.assert_allclose(e.max_abs, [1.0, 0.0])
    assert e.total_rms == pytest.approx(np.sqrt(1.25 / 4))
    with pytest.raises(LeastSquaresError, match="must both be"):
        torque_error(m, p[:1])


def test_zero_weight_rows_are_ignored():
    """Rows with weight 0 neither change the fit nor count as degrees of freedom."""
    rng = np.random.default_rng(8)
    y, tau = _problem(rng, n_rows=40)
    y_all = np.vstack([y, rng.normal(size=(20, 3))])
    tau_all = np.concatenate([tau, rng.normal(100, 1, 20)])  # garbage rows
    w = np.concatenate([np.ones(40), np.zeros(20)])
    a, b = solve_least_squares(y_all, tau_all, weights=w), solve_least_squares(y, tau)
    np.testing.assert_allclose(a.params, b.params, rtol=1e-10)
    assert a.sigma2 == pytest.approx(b.sigma2, rel=1e-10)
    np.testing.assert_allclose(a.std, b.std, rtol=1e-10)
