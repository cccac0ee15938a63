"""Symbolic dynamic coefficients against the printed equations of paper 000 (Gaz & De Luca, IROS 2017).

References are the paper's own expressions (eqs. 29-32, 38, 43) and numbers (eqs. 34-35, 43-44),
pinocchio's numeric dynamics (a different algorithm: recursive Newton-Euler regressors) and the
numeric QR base parameters of base_parameters.py. The 2R coefficients come from our symbolic
Lagrangian (no pinocchio involved); the LWR gravity ones from the symbolic potential energy.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import sympy as sp

from payload_estimation.cli import main as cli_main
from payload_estimation.model.base_parameters import compute_base_parameters
from payload_estimation.model.description import joints_from_dh
from payload_estimation.model.dynamics import RigidBodyDynamics, gravity_params, link_params
from payload_estimation.model.parameters import BodyInertia
from payload_estimation.model.robot_file import load_robot
from payload_estimation.model.symbolic import SymbolicModelError, derive, group_terms
from payload_estimation.model.symbolic_cache import cache_key
from payload_estimation.model.symbolic_regressor import exact_number, gravity_regressor_symbolic, rate_symbols

DATA = Path(__file__).resolve().parents[1] / "data"
S = sp.Symbol


pytestmark = pytest.mark.usefixtures("private_symbolic_cache")


def _sym(text: str, **subs) -> sp.Expr:
    """Parse a paper expression with real symbols (as ours), substituting kinematic constants."""
    expr = sp.sympify(text)
    expr = expr.xreplace({s: S(s.name, real=True) for s in expr.free_symbols})
    return sp.expand(expr.subs({S(k, real=True): sp.nsimplify(v) for k, v in subs.items()}))


def _match(ours: list[sp.Expr], paper: list[sp.Expr], factors=(1, -1)) -> list[tuple[int, sp.Expr]]:
    """For every paper expression, the index of ours equal to it up to one of ``factors`` and that factor
    (ours = factor * paper). Fails unless the matching is one-to-one."""
    out = []
    for p in paper:
        hits = []
        for j, o in enumerate(ours):
            ratio = sp.cancel(o / p)
            if ratio.is_number and ratio in factors:
                hits.append((j, ratio))
        assert len(hits) == 1, f"paper coefficient {p} matches {len(hits)} of ours: {hits}"
        out.append(hits[0])
    assert len({j for j, _ in out}) == len(out), "two paper coefficients matched the same one of ours"
    return out


# ------------------------------------------------------------------------------------------------
# KUKA LWR 4+: eqs. (38), (43), (44)
# ------------------------------------------------------------------------------------------------
D = {"d1": 0.4, "d2": 0.39}
EQ38_LOADED = [
    "c7y*m7 + cLy*mL", "c7x*m7 + cLx*mL", "c6x*m6", "c6z*m6 + c7z*m7 + cLz*mL", "c5z*m5 - c6y*m6", "c5x*m5",
    "c5y*m5 + c4z*m4 + d2*(m5 + m6 + m7 + mL)", "c4x*m4", "c4y*m4 + c3z*m3", "c2x*m2", "c3x*m3",
    "c2z*m2 - c3y*m3 + d1*(m3 + m4 + m5 + m6 + m7 + mL)",
]


@pytest.fixture(scope="module")
def lwr_g():
    return derive(load_robot("lwr4"), "gravity")


def test_lwr_gravity_coefficients_are_eq38(lwr_g):
    assert lwr_g.rank == 12
    unloaded = [_sym(e, mL=0, **D) for e in EQ38_LOADED]
    matches = _match(lwr_g.coefficients, unloaded)
    assert all(abs(f) == 1 for _, f in matches), matches  # same expressions up to order and sign


def test_lwr_loaded_coefficients_are_eq38_with_payload(lwr_g):
    matches = _match(lwr_g.loaded_coefficients, [_sym(e, **D) for e in EQ38_LOADED])
    assert all(abs(f) == 1 for _, f in matches)


EQ43_ROWS = [0, 1, 3, 6, 11]  # eps_g,nz of eq. (43) = components 1, 2, 4, 7, 12 of eq. (38)
EQ43_EPS = ["cLy*mL", "cLx*mL", "cLz*mL", "d2*mL", "d1*mL"]
EQ43_HAT = [0.0016, -8.13e-4, 0.3667, 1.1914, 1.2316]


def _eps_rows(sc, paper_loaded, paper_rows, factors=(1, -1)):
    """(our index, factor) of each paper eps_nz row, mapped through the loaded coefficients' expressions."""
    matches = _match(sc.loaded_coefficients, paper_loaded, factors)
    return [matches[k] for k in paper_rows]


def test_lwr_epsilon_and_payload_jacobian_are_eq43(lwr_g):
    rows = _eps_rows(lwr_g, [_sym(e, **D) for e in EQ38_LOADED], EQ43_ROWS)
    assert sorted(j for j, _ in rows) == lwr_g.nonzero  # the same non-zero set, 5 components
    p_l = sp.Matrix(lwr_g.payload_parameters)
    for (j, factor), paper in zip(rows, EQ43_EPS):
        assert sp.expand(lwr_g.epsilon[j] - factor * _sym(paper, **D)) == 0
        # J_eps row: d eps_j / d p_L, i.e. the row of eq. (43)'s J_eps,g,nz up to the same sign
        paper_row = [sp.diff(_sym(paper, **D).subs(S("cLx", real=True), S("hx") / S("mL", real=True))
                             .subs(S("cLy", real=True), S("hy") / S("mL", real=True))
                             .subs(S("cLz", real=True), S("hz") / S("mL", real=True)), v)
                     for v in (S("mL", real=True), S("hx"), S("hy"), S("hz"))]
        assert list(lwr_g.payload_jacobian.row(j)) == [factor * v for v in paper_row]
    assert (lwr_g.payload_jacobian * p_l).applyfunc(sp.expand) == sp.Matrix(lwr_g.epsilon)


def test_lwr_payload_estimate_from_paper_eps_is_eq44(lwr_g):
    rows = _eps_rows(lwr_g, [_sym(e, **D) for e in EQ38_LOADED], EQ43_ROWS)
    jac = lwr_g.payload_jacobian_numeric()
    eps_hat = np.array([float(f) * v for (_, f), v in zip(rows, EQ43_HAT)])
    p_hat = np.linalg.pinv(jac[[j for j, _ in rows]]) @ eps_hat
    m_l = p_hat[0]
    r = p_hat[1:4] / m_l
    assert m_l == pytest.approx(3.067, abs=5e-4)
    assert r[0] == pytest.approx(-2.6e-4, abs=1e-5)  # printed to 1e-5 (we get -2.65e-4)
    assert r[1] == pytest.approx(5e-4, abs=5e-5)
    assert r[2] == pytest.approx(0.1196, abs=5e-5)


# ------------------------------------------------------------------------------------------------
# Planar 2R: eqs. (29)-(35)
# ------------------------------------------------------------------------------------------------
A = {"a1": 1.0, "a2": 0.5}
F2 = (1, -1, 2, -2)  # the paper's rows 1 and 4 of eqs. (29)-(32) carry a factor 1/2
EQ29 = ["(m2*a2**2 + J2zz)/2 + a2*c2x*m2", "c2x*m2 + a2*m2", "c2y*m2",
        "(J1zz + a1**2*m1 + a1**2*m2)/2 + a1*c1x*m1", "c1x*m1 + a1*m1 + a1*m2", "c1y*m1"]
EQ30 = ["(a2**2*(m2 + mL) + J2zz + JLzz)/2 + a2*(c2x*m2 + cLx*mL)", "c2x*m2 + cLx*mL + a2*(m2 + mL)",
        "c2y*m2 + cLy*mL", "(J1zz + a1**2*m1 + a1**2*(m2 + mL))/2 + a1*c1x*m1", "c1x*m1 + a1*m1 + a1*(m2 + mL)",
        "c1y*m1"]
EQ31_NZ = ["(a2**2*mL + JLzz)/2 + a2*cLx*mL", "cLx*mL + a2*mL", "cLy*mL", "a1**2*mL/2", "a1*mL"]
EQ32 = [["a2**2/2", "a2", "0", "1/2"], ["a2", "1", "0", "0"], ["0", "0", "1", "0"], ["a1**2/2", "0", "0", "0"],
        ["a1", "0", "0", "0"]]
P_L_2R = [0, 1, 2, 9]  # (mL, cLx mL, cLy mL, JLzz) within the 10 payload parameters, eq. (33)


@pytest.fixture(scope="module")
def planar():
    return derive(load_robot(DATA / "planar2r.yaml"), "full")


def test_planar_coefficients_are_eq29_and_eq30(planar):
    assert planar.rank == 6
    m29 = _match(planar.coefficients, [_sym(e, **A) for e in EQ29], F2)
    m30 = _match(planar.loaded_coefficients, [_sym(e, **A) for e in EQ30], F2)
    # the same one of ours for each paper row, with the same scale (the paper's rows 1 and 4 carry 1/2)
    assert [j for j, _ in m29] == [j for j, _ in m30]
    assert [f for _, f in m29] == [f for _, f in m30]


def test_planar_epsilon_and_jacobian_are_eq31_eq32(planar):
    rows = _eps_rows(planar, [_sym(e, **A) for e in EQ30], range(5), F2)
    assert sorted(j for j, _ in rows) == planar.nonzero and len(planar.epsilon) == 6
    jac = planar.payload_jacobian[:, P_L_2R]
    for (j, factor), paper_eps, paper_row in zip(rows, EQ31_NZ, EQ32):
        assert sp.expand(planar.epsilon[j] - factor * _sym(paper_eps, **A)) == 0
        assert list(jac.row(j)) == [factor * _sym(v, **A) for v in paper_row]
    # the other 6 payload parameters do not act on a planar arm
    others = [c for c in range(10) if c not in P_L_2R]
    assert planar.payload_jacobian[:, others].is_zero_matrix


def test_planar_estimate_from_paper_eps_is_eq35(planar):
    eps_hat_paper = [0.5032, 1.2, 0.15, 0.75, 1.5]  # eq. (34)
    rows = _eps_rows(planar, [_sym(e, **A) for e in EQ30], range(5), F2)
    eps_hat = np.array([float(f) * v for (_, f), v in zip(rows, eps_hat_paper)])
    jac = planar.payload_jacobian_numeric()[np.ix_([j for j, _ in rows], P_L_2R)]
    p_hat = np.linalg.pinv(jac) @ eps_hat
    np.testing.assert_allclose(p_hat, [1.5, 0.45, 0.15, 0.1814], atol=5e-5)


def test_planar_gravity_coefficients_are_the_gravity_part_of_eq29():
    sc = derive(load_robot(DATA / "planar2r.yaml"), "gravity")
    _match(sc.coefficients, [_sym(e, **A) for e in EQ29[1:3] + EQ29[4:]], F2)
    assert sc.rank == 4


# ------------------------------------------------------------------------------------------------
# Numeric agreement and superposition (eq. 22)
# ------------------------------------------------------------------------------------------------
PAYLOAD = BodyInertia(2.3, np.array([0.03, -0.02, 0.11]), np.diag([0.012, 0.015, 0.009]))


@pytest.mark.parametrize("robot", ["lwr4", "iiwa14", "lwr4@flange"])
def test_symbolic_gravity_equals_pinocchio_and_superposition(robot):
    desc = load_robot(robot.split("@")[0])
    if robot.endswith("@flange"):  # payload parameters in the flange frame, 0.078 m beyond frame 7
        desc = replace(desc, payload_frame=desc.flange, payload_frame_name="flange")
    sc = derive(desc, "gravity")
    dyn = RigidBodyDynamics(desc)
    loaded = dyn.with_payload(PAYLOAD)
    pi = sc.coefficient_values(gravity_params(desc))
    eps = sc.payload_jacobian_numeric() @ PAYLOAD.to_params()[:4]
    yb = sc.base_regressor_function()
    rng = np.random.default_rng(7)
    for _ in range(10):
        q = rng.uniform(-2.5, 2.5, desc.n)
        np.testing.assert_allclose(yb(q) @ pi, dyn.gravity(q), atol=1e-9)
        np.testing.assert_allclose(yb(q) @ (pi + eps), loaded.gravity(q), atol=1e-9)  # eq. (22)
        # the symbolic base regressor is the link-frame regressor times the selection
        np.testing.assert_allclose(yb(q), dyn.gravity_regressor(q) @ sc.selection_numeric(), atol=1e-9)


def test_ring_and_sympy_differentiation_give_the_same_gravity_regressor():
    """Y_g(q) from the polynomial-ring derivation equals sympy's own diff of the potential energy."""
    desc = load_robot("lwr4")
    q = sp.symbols("q1:8", real=True)
    fast = sp.lambdify([q], gravity_regressor_symbolic(desc, q))
    slow = sp.lambdify([q], gravity_regressor_symbolic(desc, q, fast=False))
    rng = np.random.default_rng(12)
    for _ in range(5):
        x = rng.uniform(-3, 3, 7)
        np.testing.assert_allclose(np.array(fast(x), float), np.array(slow(x), float), atol=1e-12)


def test_full_superposition_lwr4():
    desc = load_robot("lwr4")
    sc = derive(desc, "full")
    dyn = RigidBodyDynamics(desc)
    loaded = dyn.with_payload(PAYLOAD)
    pi = sc.coefficient_values(link_params(desc))
    eps = sc.payload_jacobian_numeric() @ PAYLOAD.to_params()
    sel = sc.selection_numeric()
    rng = np.random.default_rng(3)
    for _ in range(5):
        q, dq, ddq = rng.uniform(-2, 2, 7), rng.uniform(-1.5, 1.5, 7), rng.uniform(-3, 3, 7)
        yb = dyn.regressor(q, dq, ddq) @ sel
        np.testing.assert_allclose(yb @ pi, dyn.inverse_dynamics(q, dq, ddq), atol=1e-8)
        np.testing.assert_allclose(yb @ (pi + eps), loaded.inverse_dynamics(q, dq, ddq), atol=1e-8)


SMALL_PAYLOAD = BodyInertia(0.8, np.array([0.02, -0.01, 0.04]), np.array([[4e-3, 1e-4, 0], [1e-4, 5e-3, 2e-4],
                                                                         [0, 2e-4, 3e-3]]))


@pytest.mark.parametrize("robot", ["planar2r", "spatial3r"])
def test_full_lagrangian_equals_numeric_mapping_and_pinocchio(robot):
    """Small chains: the symbolic Lagrangian regressor (eq. 6) gives exactly the same K as the numeric
    mapping of pinocchio's regressor, and its base regressor reproduces pinocchio's inverse dynamics,
    unloaded and loaded (eq. 22; spatial3r has its payload frame at the flange)."""
    desc = load_robot(DATA / f"{robot}.yaml")
    sym = derive(desc, "full")
    num = derive(desc, "full", method="numeric")
    assert "Lagrangian" in sym.method and "numeric" in num.method
    assert sym.K == num.K and list(sym.independent) == list(num.independent)
    allowed = set(sym.q).union(*rate_symbols(desc.n))
    assert sym.base_regressor.free_symbols <= allowed  # only q, dq, ddq (spatial3r: Float constants)
    assert "cached" in derive(desc, "full").method
    dyn = RigidBodyDynamics(desc)
    loaded = dyn.with_payload(SMALL_PAYLOAD)
    pi = sym.coefficient_values(link_params(desc))
    eps = sym.payload_jacobian_numeric() @ SMALL_PAYLOAD.to_params()
    yb = sym.base_regressor_function()
    rng = np.random.default_rng(4)
    for _ in range(5):
        q, dq, ddq = rng.uniform(-2, 2, desc.n), rng.uniform(-2, 2, desc.n), rng.uniform(-4, 4, desc.n)
        y = yb(q, dq, ddq)
        np.testing.assert_allclose(y, dyn.regressor(q, dq, ddq) @ sym.selection_numeric(), atol=1e-10)
        np.testing.assert_allclose(y @ pi, dyn.inverse_dynamics(q, dq, ddq), atol=1e-10)
        np.testing.assert_allclose(y @ (pi + eps), loaded.inverse_dynamics(q, dq, ddq), atol=1e-10)
    with pytest.raises(SymbolicModelError, match="needs q, dq and ddq"):
        yb(np.zeros(desc.n))


@pytest.mark.parametrize("kind", ["gravity", "full"])
def test_the_base_columns_do_not_depend_on_the_random_states(kind):
    """The columns are decided on random states; other (and fewer) states decide the same ones."""
    dyn = RigidBodyDynamics(load_robot("lwr4"))
    a = compute_base_parameters(dyn, kind)
    b = compute_base_parameters(dyn, kind, n_samples=60, seed=9)
    assert list(a.independent) == list(b.independent)
    np.testing.assert_allclose(a.K, b.K, atol=1e-8)


# ------------------------------------------------------------------------------------------------
# Exact constants, cache, errors, CLI
# ------------------------------------------------------------------------------------------------
def test_exact_number_snaps_kinematic_constants():
    assert exact_number(6.123233995736766e-17) == 0
    assert exact_number(np.cos(np.pi)) == -1
    assert exact_number(0.39) == sp.Rational(39, 100)
    assert exact_number(0.4 * 0.39) == sp.Rational(39, 250)
    assert isinstance(exact_number(np.sqrt(2) / 2), sp.Float)
    with pytest.raises(SymbolicModelError, match="non-finite"):
        exact_number(float("nan"))


def test_cache_roundtrip_and_key(tmp_path, monkeypatch):
    monkeypatch.setenv("PAYLOAD_ESTIMATION_CACHE", str(tmp_path))
    desc = load_robot(DATA / "planar2r.yaml")
    first = derive(desc, "gravity")
    assert len(list(tmp_path.glob("coefficients-gravity-*.pickle"))) == 1
    second = derive(desc, "gravity")
    assert "cached" in second.method and "cached" not in first.method
    assert second.coefficients == first.coefficients
    assert second.base_regressor == first.base_regressor
    q = np.array([0.3, -1.1])
    np.testing.assert_allclose(second.base_regressor_function()(q), first.base_regressor_function()(q), rtol=1e-15)
    # other kinematics -> other key; other inertias -> same key (coefficients are symbolic in them)
    longer = replace(desc, joints=joints_from_dh(["j1", "j2"], [[1.0, 0, 0, 0], [0.6, 0, 0, 0]]))
    assert cache_key(longer, "gravity") != cache_key(desc, "gravity")
    assert cache_key(desc.with_links(reversed(desc.links)), "gravity") == cache_key(desc, "gravity")
    assert cache_key(desc, "full") != cache_key(desc, "gravity")
    # the full (Lagrangian) derivation is cached too, with its q, dq, ddq regressor
    full = derive(desc, "full")
    again = derive(desc, "full")
    assert "cached" in again.method and again.K == full.K and again.base_regressor == full.base_regressor


def test_bad_arguments_are_named():
    desc = load_robot(DATA / "planar2r.yaml")
    with pytest.raises(SymbolicModelError, match="kind"):
        derive(desc, "inertia")
    sc = derive(desc, "gravity")
    with pytest.raises(SymbolicModelError, match="must have 2 joint values"):
        sc.base_regressor_function()(np.zeros(3))
    with pytest.raises(SymbolicModelError, match="8 standard parameters"):
        sc.coefficient_values(np.zeros(5))
    with pytest.raises(SymbolicModelError, match="no symbolic base regressor"):
        derive(load_robot("lwr4"), "full").base_regressor_function()
    with pytest.raises(SymbolicModelError, match="method"):
        derive(desc, "full", method="magic")
    with pytest.raises(SymbolicModelError, match="always derived symbolically"):
        derive(desc, "gravity", method="numeric")


def test_flange_payload_frame_shifts_epsilon():
    """With p_L in the flange frame (0.078 m along z7), eps gains the 0.078 mL lever arm: cLz*mL + 39/500*mL."""
    desc = load_robot("lwr4")
    sc = derive(replace(desc, payload_frame=desc.flange, payload_frame_name="flange"), "gravity")
    m_l, c_lz = S("mL", real=True), S("cLz", real=True)
    assert sp.expand(c_lz * m_l + sp.Rational(39, 500) * m_l) in sc.epsilon
    assert cache_key(replace(desc, payload_frame=desc.flange), "gravity") != cache_key(desc, "gravity")


def test_group_terms_reads_like_the_paper(lwr_g):
    texts = [group_terms(c) for c in lwr_g.coefficients]
    assert "c4z*m4 + c5y*m5 + 39/100*(m5 + m6 + m7)" in texts
    for text, c in zip(texts, lwr_g.coefficients):
        assert sp.expand(sp.sympify(text) - c.xreplace({s: S(s.name) for s in c.free_symbols})) == 0


def test_cli_json_is_parsable_and_consistent(capsys, lwr_g):
    assert cli_main(["coefficients", "--robot", "lwr4", "--gravity", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    coeffs = [sp.sympify(c) for c in out["coefficients"]]
    ours = [c.xreplace({s: S(s.name) for s in c.free_symbols}) for c in lwr_g.coefficients]
    assert [sp.expand(a - b) for a, b in zip(coeffs, ours)] == [0] * 12
    pay = out["payload"]
    assert pay["parameters"] == ["mL", "cLx*mL", "cLy*mL", "cLz*mL"]
    assert pay["nonzero"] == lwr_g.nonzero
    jac = sp.Matrix([[sp.sympify(v) for v in row] for row in pay["jacobian"]])
    eps = jac * sp.Matrix([sp.sympify(p) for p in pay["parameters"]])
    assert [sp.expand(a - sp.sympify(b)) for a, b in zip(eps, pay["epsilon"])] == [0] * 12


def test_cli_table_and_bad_robot(capsys):
    assert cli_main(["coefficients", "--robot", str(DATA / "planar2r.yaml")]) == 0
    out = capsys.readouterr().out
    assert "6 dynamic coefficients" in out and "J2zz + c2x*m2 + 1/4*m2" in out
    assert "numeric base-parameter mapping" not in out  # 2R: symbolic Lagrangian
    assert cli_main(["coefficients", "--robot", str(DATA / "lwr4_hand.urdf"), "--gravity"]) == 0
    out = capsys.readouterr().out
    assert "12 gravity coefficients" in out and "payload frame: lwr_link_7" in out
    assert "numeric base-parameter mapping" not in out
    assert cli_main(["coefficients", "--robot", str(DATA / "bad_dh_row.yaml")]) == 1
    assert "kinematics.dh[1]" in capsys.readouterr().err


@pytest.mark.parametrize("robot", ["lwr4", "iiwa14"])
@pytest.mark.parametrize("kind", ["gravity", "full"])
def test_symbolic_coefficients_are_the_numeric_base_parameters(robot, kind):
    """One notion of base parameters: the symbolic coefficients are exactly the numeric ones every
    algorithm uses (same columns, same combinations), and the symbolic gravity base regressor (from the
    potential energy) equals pinocchio's regressor times the numeric selection."""
    desc = load_robot(robot)
    dyn = RigidBodyDynamics(desc)
    sym = derive(desc, kind)
    base = compute_base_parameters(dyn, kind)
    assert list(sym.independent) == list(base.independent)
    np.testing.assert_allclose(np.array(sym.K.tolist(), float), base.K, atol=1e-9)
    np.testing.assert_allclose(sym.selection_numeric(), base.selection, atol=1e-12)
    p = link_params(desc) if kind == "full" else np.concatenate([b.to_params()[:4] for b in desc.links])
    np.testing.assert_allclose(sym.coefficient_values(p), base.coefficients(p), rtol=1e-9, atol=1e-12)
    if kind == "gravity":
        yb = sym.base_regressor_function()
        for q in np.random.default_rng(2).uniform(-2, 2, (5, desc.n)):
            np.testing.assert_allclose(yb(q), base.base_regressor(dyn.gravity_regressor(q)), atol=1e-10)
