"""Symbolic dynamic coefficients (sympy) of a :class:`RobotDescription`, paper 000 (Gaz & De Luca).

What this module derives, for any convention (DH, MDH, URDF; it only uses each joint's
``pre @ Rot(axis, q) @ post``, with numeric entries snapped to exact 0, +-1 and short decimals):

* the gravity regressor ``Y_g(q)`` (n x 4n), symbolically from the potential energy
  ``U = -sum_i gamma^T (m_i p_i + R_i m_i c_i)`` (linear in ``m_i`` and ``m_i c_i``), ``g = dU/dq``;
* the gravity dynamic coefficients ``pi_g = K_g p_g`` (base parameters) as expressions in the
  standard-parameter symbols (``m7``, ``c7y*m7`` ... as in eq. 38) and the symbolic base regressor
  ``Y_gb(q)`` with ``g(q) = Y_gb(q) pi_g``;
* the full dynamic coefficients ``pi = K p`` (10 per link; ``J{i}xx`` .. about the link-frame origin):
  for chains of up to ``SYMBOLIC_FULL_MAX_JOINTS`` joints from the symbolic Lagrangian (kinetic
  energy of eq. 6, with the symbolic base regressor ``Y_b(q, dq, ddq)``), for longer chains from the
  numeric regressor of :class:`RigidBodyDynamics` (the "numeric mapping"; K only);
* the payload terms: ``eps(p_L) = pi_L - pi`` (eq. 21), its non-zero rows and the payload Jacobian
  ``J_eps = d eps / d p_L`` (eq. 27), ``p_L = (mL, cLx*mL, cLy*mL, cLz*mL, JLxx, .., JLzz)`` in the
  payload frame (merged into the last link through ``desc.payload_frame``, eqs. 16-17).

Regressors are built as polynomials in s_i = sin q_i, c_i = cos q_i (and dq, ddq) in a sympy
polynomial ring, where products and derivatives are cheap, then turned into sympy expressions.
Which regressor columns are independent, and the linear combinations of the dependent ones, are
decided numerically on random states, in *joint-frame* parameters (each link's parameters about its
own joint axis), taking columns greedily in a fixed preference order (inertias, then first moments,
then masses, last link first; see :func:`select_base`): the coefficients then come out as the
Lagrangian's natural regroupings (inertia / first moment about the joint axis, masses folded into
the previous link), i.e. in the form of eqs. (29) and (38). Combination coefficients are snapped to
exact short decimals (kinematic constants such as d1 = 0.4, d1*d2 = 0.156) when within 1e-9 of one.

Results are cached on disk (``$PAYLOAD_ESTIMATION_CACHE`` or ``~/.cache/payload_estimation``) as pickles
of the sympy matrices (a cache is code-trusting like ``__pycache__``: keep it in a directory only you
can write), keyed by a hash of the kinematics, gravity, payload frame, kind, method, sympy version and
this module's version; an unreadable entry is re-derived. Inertias are not part of the key: the
coefficients are symbolic in them.
Units: SI (kg, m, kg m^2, N m); gravity coefficients multiply ``Y_g`` which already contains g0.
"""

from __future__ import annotations

import hashlib
import logging
import os
import pickle
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import sympy as sp

from .description import RobotDescription
from .parameters import N_GRAVITY_PARAMS, N_PARAMS, params_transform_matrix

log = logging.getLogger(__name__)

SYMBOLIC_VERSION = 1
KINDS = ("gravity", "full")
SYMBOLIC_FULL_MAX_JOINTS = 3  # full coefficients by the symbolic Lagrangian up to this many joints
_SNAP_TOL = 1e-12
_INERTIA_NAMES = ("xx", "xy", "xz", "yy", "yz", "zz")


class SymbolicModelError(ValueError):
    """The symbolic derivation failed (e.g. the numeric base-parameter decomposition is inconsistent)."""


# ----------------------------------------------------------------------------------------------
# Numbers and symbols
# ----------------------------------------------------------------------------------------------
def exact_number(x: float, tol: float = _SNAP_TOL) -> sp.Expr:
    """A sympy number for the float ``x``: 0 and +-1 snapped within ``tol``, short decimals as exact
    rationals (0.39 -> 39/100), anything else a sympy Float."""
    x = float(x)
    if not np.isfinite(x):
        raise SymbolicModelError(f"cannot turn the non-finite number {x} into a symbolic constant")
    if abs(x) < tol:
        return sp.Integer(0)
    for v in (1, -1):
        if abs(x - v) < tol:
            return sp.Integer(v)
    for digits in range(0, 10):
        r = round(x, digits)
        if abs(x - r) <= tol * max(1.0, abs(x)):
            return sp.Rational(repr(r))
    return sp.Float(x, 17)


def exact_matrix(a: np.ndarray, tol: float = _SNAP_TOL) -> sp.Matrix:
    """Elementwise :func:`exact_number` of a numeric matrix."""
    a = np.atleast_2d(np.asarray(a, dtype=float))
    return sp.Matrix(a.shape[0], a.shape[1], [exact_number(v, tol) for v in a.ravel()])


def joint_symbols(n: int) -> tuple[sp.Symbol, ...]:
    """Joint angle symbols q1..qn (rad)."""
    return tuple(sp.symbols(f"q1:{n + 1}", real=True)) if n > 1 else (sp.Symbol("q1", real=True),)


def body_parameter_symbols(tag: str | int, per: int = N_PARAMS) -> tuple[sp.Expr, ...]:
    """Standard parameters of one body as expressions: (m, cx*m, cy*m, cz*m, Jxx, Jxy, Jxz, Jyy, Jyz, Jzz).

    ``tag`` is the link number (1-based) or ``"L"`` for the payload; ``per`` = 4 keeps (m, m c) only.
    """
    m = sp.Symbol(f"m{tag}", real=True)
    c = [sp.Symbol(f"c{tag}{a}", real=True) for a in "xyz"]
    j = [sp.Symbol(f"J{tag}{a}", real=True) for a in _INERTIA_NAMES]
    full = (m, c[0] * m, c[1] * m, c[2] * m, *j)
    return full[:per]


def parameter_symbols(n: int, per: int = N_PARAMS) -> tuple[sp.Expr, ...]:
    """Stacked standard-parameter expressions of links 1..n (``per`` = 10 or 4 per link)."""
    return tuple(e for i in range(1, n + 1) for e in body_parameter_symbols(i, per))


def _per_link(kind: str) -> int:
    if kind not in KINDS:
        raise SymbolicModelError(f"kind must be one of {KINDS}, got {kind!r}")
    return N_GRAVITY_PARAMS if kind == "gravity" else N_PARAMS


# ----------------------------------------------------------------------------------------------
# Symbolic kinematics and gravity regressor
# ----------------------------------------------------------------------------------------------
def _rot_axis_sym(axis: np.ndarray, q: sp.Symbol) -> sp.Matrix:
    k = [exact_number(v) for v in np.asarray(axis, float) / np.linalg.norm(axis)]
    c, s = sp.cos(q), sp.sin(q)
    for idx in range(3):
        if k[idx] in (1, -1) and all(k[j] == 0 for j in range(3) if j != idx):
            sgn = k[idx]
            s = sgn * s
            if idx == 0:
                r = [[1, 0, 0], [0, c, -s], [0, s, c]]
            elif idx == 1:
                r = [[c, 0, s], [0, 1, 0], [-s, 0, c]]
            else:
                r = [[c, -s, 0], [s, c, 0], [0, 0, 1]]
            break
    else:
        kx = sp.Matrix([[0, -k[2], k[1]], [k[2], 0, -k[0]], [-k[1], k[0], 0]])
        r = (sp.eye(3) + s * kx + (1 - c) * kx * kx).tolist()
    t = sp.eye(4)
    t[:3, :3] = sp.Matrix(r)
    return t


def link_transforms(desc: RobotDescription, q: Sequence[sp.Symbol] | None = None) -> list[sp.Matrix]:
    """Symbolic poses (4x4) of link frames 1..n in the base frame; constants snapped to exact values."""
    q = joint_symbols(desc.n) if q is None else q
    out = []
    t = sp.eye(4)
    for joint, qi in zip(desc.joints, q):
        t = t * exact_matrix(joint.pre) * _rot_axis_sym(joint.axis, qi) * exact_matrix(joint.post)
        t = t.applyfunc(sp.expand)
        out.append(t)
    return out


def potential_regressor(desc: RobotDescription, q: Sequence[sp.Symbol] | None = None) -> sp.Matrix:
    """Row u(q) (1 x 4n) with the potential energy U = u(q) p_g (J), p_g = (m_i, m_i c_i) stacked."""
    q = joint_symbols(desc.n) if q is None else q
    gamma = exact_matrix(np.asarray(desc.gravity, float).reshape(3, 1))
    u = []
    for t in link_transforms(desc, q):
        p, r = t[:3, 3], t[:3, :3]
        u.append(sp.expand(-(gamma.T * p)[0]))
        for k in range(3):
            u.append(sp.expand(-(gamma.T * r[:, k])[0]))
    return sp.Matrix(1, len(u), u)


def gravity_regressor_symbolic(desc: RobotDescription, q: Sequence[sp.Symbol] | None = None,
                               fast: bool = True) -> sp.Matrix:
    """Symbolic Y_g(q) (n x 4n) with g(q) = Y_g(q) p_g = dU/dq (N m per unit parameter).

    ``fast``: computed in the polynomial ring of sin/cos (see :func:`_full_regressor_ring`); otherwise by
    sympy's own differentiation of :func:`potential_regressor` (slower; kept as an independent check).
    """
    q = joint_symbols(desc.n) if q is None else q
    if fast:
        return _full_regressor_ring(desc, q, gravity_only=True).to_sympy()
    u = potential_regressor(desc, q)
    return sp.Matrix(desc.n, u.shape[1], lambda j, c: sp.expand(sp.diff(u[c], q[j])))


def rate_symbols(n: int) -> tuple[tuple[sp.Symbol, ...], tuple[sp.Symbol, ...]]:
    """Joint velocity and acceleration symbols (dq1.., ddq1..; rad/s, rad/s^2)."""
    return (tuple(sp.Symbol(f"dq{i}", real=True) for i in range(1, n + 1)),
            tuple(sp.Symbol(f"ddq{i}", real=True) for i in range(1, n + 1)))


def full_regressor_symbolic(desc: RobotDescription, q: Sequence[sp.Symbol] | None = None) -> sp.Matrix:
    """Symbolic Y(q, dq, ddq) (n x 10n), tau = Y p, by Euler-Lagrange on L = T - U (paper 000 eqs. 6-8);
    see :func:`_full_regressor_ring` (intended for small chains)."""
    return _full_regressor_ring(desc, q).to_sympy()


def _full_regressor_ring(desc: RobotDescription, q: Sequence[sp.Symbol] | None = None,
                         gravity_only: bool = False) -> _RingRegressor:
    """Y(q, dq, ddq) (n x 10n) as ring polynomials, by Euler-Lagrange on L = T - U (eqs. 6-8);
    with ``gravity_only`` Y_g(q) (n x 4n) = dU/dq alone.

    Kinetic energy of link i in link frame i (eq. 6): T_i = 1/2 m v.v + (v x w).(m c) + 1/2 w^T J w, with
    v, w the link-frame origin's linear and the angular velocity (propagated recursively); both energies
    are linear in p_i = (m, m c, J), so each regressor column is the Euler-Lagrange operator applied to
    that parameter's coefficient. Everything is computed in the polynomial ring of s_i = sin q_i,
    c_i = cos q_i, dq_i, ddq_i (d/dq_i = c_i d/ds_i - s_i d/dc_i). Intended for small chains.
    """
    from sympy.polys.domains import QQ, RR
    from sympy.polys.rings import ring

    n = desc.n
    q = joint_symbols(n) if q is None else q
    dq, ddq = rate_symbols(n)
    sn = sp.symbols(f"s_1:{n + 1}")
    cs = sp.symbols(f"c_1:{n + 1}")
    consts = [exact_number(v) for j in desc.joints for a in (j.pre, j.post, j.axis) for v in np.ravel(a)]
    consts += [exact_number(v) for v in desc.gravity]
    dom = QQ if all(c.is_Rational for c in consts) else RR
    _, *gens = ring([*sn, *cs, *dq, *ddq], dom)
    s_, c_, dq_, ddq_ = gens[:n], gens[n:2 * n], gens[2 * n:3 * n], gens[3 * n:]
    zero = gens[0] * 0

    def num(x: float):
        return zero + dom.from_sympy(exact_number(x))

    def mat(a: np.ndarray) -> list[list]:
        return [[num(v) for v in row] for row in np.asarray(a, float)]

    def mul(a, b):
        return [[sum((a[r][k] * b[k][col] for k in range(len(b))), zero) for col in range(len(b[0]))]
                for r in range(len(a))]

    def tr(a):
        return [list(col) for col in zip(*a)]

    def cross(a, b):
        return [a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0]]

    def dot(a, b):
        return sum((x * y for x, y in zip(a, b)), zero)

    def d_q(poly, m: int):
        return poly.diff(s_[m]) * c_[m] - poly.diff(c_[m]) * s_[m]

    def rot(axis: np.ndarray, i: int) -> list[list]:
        k = np.asarray(axis, float) / np.linalg.norm(axis)
        kx = mat([[0, -k[2], k[1]], [k[2], 0, -k[0]], [-k[1], k[0], 0]])
        kx2 = mul(kx, kx)
        one = mat(np.eye(3))
        return [[one[r][col] + s_[i] * kx[r][col] + (1 - c_[i]) * kx2[r][col] for col in range(3)] for r in range(3)]

    gamma = [num(g) for g in desc.gravity]
    r0, p0 = mat(np.eye(3)), [zero, zero, zero]
    w, v = [zero] * 3, [zero] * 3
    lag = []
    for i, joint in enumerate(desc.joints):
        pre, post = np.asarray(joint.pre, float), np.asarray(joint.post, float)
        rj = rot(joint.axis, i)
        r = mul(mul(mat(pre[:3, :3]), rj), mat(post[:3, :3]))
        p = [x[0] + num(t) for x, t in zip(mul(mat(pre[:3, :3]), mul(rj, mat(post[:3, 3:4]))), pre[:3, 3])]
        rt = tr(r)
        dp = [d_q(x, i) * dq_[i] for x in p]
        wxp = cross(w, p)
        v = [x[0] for x in mul(rt, [[a + b + c] for a, b, c in zip(v, wxp, dp)])]
        unit = np.asarray(joint.axis, float) / np.linalg.norm(joint.axis)
        axis_i = mul(tr(mat(post[:3, :3])), [[num(a)] for a in unit])
        w = [x[0] + a[0] * dq_[i] for x, a in zip(mul(rt, [[x] for x in w]), axis_i)]
        p0 = [a + b[0] for a, b in zip(p0, mul(r0, [[x] for x in p]))]
        r0 = mul(r0, r)
        pot = [-dot(gamma, p0)] + [-dot(gamma, [r0[0][k], r0[1][k], r0[2][k]]) for k in range(3)]
        if gravity_only:
            lag += [-u for u in pot]
            continue
        vxw = cross(v, w)
        half = dom.from_sympy(sp.Rational(1, 2))
        kin = [dot(v, v) * half, vxw[0], vxw[1], vxw[2], w[0] ** 2 * half, w[0] * w[1], w[0] * w[2],
               w[1] ** 2 * half, w[1] * w[2], w[2] ** 2 * half]
        lag += [a - b for a, b in zip(kin, pot + [zero] * 6)]

    rows = []
    for j in range(n):
        row = []
        for lk in lag:
            d_dq = lk.diff(dq_[j])
            expr = -d_q(lk, j)
            for m in range(n if not gravity_only else 0):
                expr += d_q(d_dq, m) * dq_[m] + d_dq.diff(dq_[m]) * ddq_[m]
            row.append(expr)
        rows.append(row)
    return _RingRegressor(rows, dom, gens, tuple(q), (*sn, *cs))


@dataclass
class _RingRegressor:
    """A regressor as polynomials in (s_1..s_n, c_1..c_n, dq_1.., ddq_1..) over ``dom``; rows[j][k]."""

    rows: list[list]
    dom: object
    gens: list
    q: tuple[sp.Symbol, ...]
    trig: tuple[sp.Symbol, ...]  # the ring's s_1..s_n, c_1..c_n symbols

    def times(self, sel: sp.Matrix) -> _RingRegressor:
        """Y @ sel for an exact constant matrix ``sel`` (P x r)."""
        zero = self.gens[0] * 0
        consts = [[self.dom.from_sympy(v) for v in sel.row(k)] for k in range(sel.shape[0])]
        rows = [[sum((row[k] * consts[k][c] for k in range(len(row)) if consts[k][c]), zero)
                 for c in range(sel.shape[1])] for row in self.rows]
        return _RingRegressor(rows, self.dom, self.gens, self.q, self.trig)

    def to_sympy(self) -> sp.Matrix:
        n = len(self.q)
        back = {}
        for i, qi in enumerate(self.q):
            back[self.trig[i]], back[self.trig[n + i]] = sp.sin(qi), sp.cos(qi)
        return sp.Matrix([[e.as_expr().xreplace(back) for e in row] for row in self.rows])

    def evaluate(self, qs: np.ndarray, dqs: np.ndarray, ddqs: np.ndarray) -> np.ndarray:
        """Numeric rows stacked over samples: (N n) x P, via the monomials (no code generation)."""
        x = np.hstack([np.sin(qs), np.cos(qs), dqs, ddqs])  # N x 4n
        n = len(self.q)
        out = np.zeros((x.shape[0], n, len(self.rows[0])))
        for j, row in enumerate(self.rows):
            for k, poly in enumerate(row):
                terms = poly.terms()
                if not terms:
                    continue
                exps = np.array([t[0] for t in terms], dtype=float)
                coef = np.array([float(self.dom.to_sympy(t[1])) for t in terms])
                out[:, j, k] = np.prod(x[:, None, :] ** exps[None, :, :], axis=2) @ coef
        return out.reshape(-1, out.shape[2])


# ----------------------------------------------------------------------------------------------
# Base-parameter selection (numeric decision, exact-ish coefficients)
# ----------------------------------------------------------------------------------------------
def preference_order(n: int, kind: str) -> list[int]:
    """Order in which regressor columns are tried as independent: the inertia entries of all links
    (full only), then all first moments, then all masses (best folded into the others, as in
    eq. 38); within each group the last link first."""
    per = _per_link(kind)
    groups = ([[9, 4, 7, 5, 6, 8]] if per == N_PARAMS else []) + [[1, 2, 3], [0]]
    return [per * link + k for group in groups for link in range(n - 1, -1, -1) for k in group]


def select_base(w: np.ndarray, order: Sequence[int], rtol: float = 1e-8) -> tuple[np.ndarray, np.ndarray]:
    """Greedy independent-column selection of the stacked regressor ``w`` in ``order``.

    Returns (independent column indices in selection order, B) with ``w[:, dep] = w[:, indep] @ B``
    for ``dep`` = the remaining columns in increasing order.
    """
    norms = np.linalg.norm(w, axis=0)
    scale = max(float(norms.max()), 1.0)
    basis: list[np.ndarray] = []
    indep: list[int] = []
    for col in order:
        if norms[col] <= rtol * scale:
            continue
        v = w[:, col] / norms[col]
        r = v.copy()
        for _ in range(2):  # re-orthogonalise once for round-off
            for b in basis:
                r -= (b @ r) * b
        if np.linalg.norm(r) > rtol * 1e2:
            basis.append(r / np.linalg.norm(r))
            indep.append(col)
    indep_arr = np.array(indep, dtype=int)
    dep = np.setdiff1d(np.arange(w.shape[1]), indep_arr)
    b, *_ = np.linalg.lstsq(w[:, indep_arr], w[:, dep], rcond=None)
    resid = np.linalg.norm(w[:, dep] - w[:, indep_arr] @ b) if dep.size else 0.0
    if resid > 1e-7 * scale:
        raise SymbolicModelError(f"base-parameter decomposition is inconsistent (residual {resid:.3g})")
    return indep_arr, b


def _mapping_matrix(n_cols: int, indep: np.ndarray, b: np.ndarray) -> sp.Matrix:
    """Exact-ish K (r x P): pi = K p, identity on the independent columns, B on the dependent ones."""
    dep = np.setdiff1d(np.arange(n_cols), indep)
    k = sp.zeros(len(indep), n_cols)
    for row, col in enumerate(indep):
        k[row, int(col)] = sp.Integer(1)
        for j, dcol in enumerate(dep):
            k[row, int(dcol)] = exact_number(b[row, j], tol=1e-9)
    return k


def _joint_frame_maps(desc: RobotDescription, per: int) -> tuple[np.ndarray, list[sp.Matrix], list[sp.Matrix]]:
    """Block-diagonal inverse of T (p_joint = T p_link; numeric) and the exact blocks of T and T^-1."""
    from scipy.linalg import block_diag

    from .transforms import invert

    blocks = [params_transform_matrix(j.post)[:per, :per] for j in desc.joints]
    inv_blocks = [params_transform_matrix(invert(j.post))[:per, :per] for j in desc.joints]
    return block_diag(*inv_blocks), [exact_matrix(b) for b in blocks], [exact_matrix(b) for b in inv_blocks]


def _random_configurations(desc: RobotDescription, count: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    lo = np.maximum(desc.limits.position[:, 0], -np.pi)
    hi = np.minimum(desc.limits.position[:, 1], np.pi)
    return rng.uniform(lo, hi, size=(count, desc.n))


# ----------------------------------------------------------------------------------------------
# The result record
# ----------------------------------------------------------------------------------------------
@dataclass
class SymbolicCoefficients:
    """Dynamic coefficients of one robot, symbolic in the standard parameters (see module docstring).

    ``kind``: ``"gravity"`` (p_g: 4 per link) or ``"full"`` (10 per link). ``K`` (r x P) maps the stacked
    standard parameters (link frames) to the coefficients: ``coefficients = K * parameters``.
    ``independent`` are the indices of the *joint-frame* standard parameters (each link's parameters
    expressed in the frame ``link_i @ post_i^-1``, which turns with joint i about its axis) whose regressor
    columns form the base regressor.
    ``selection`` (P x r) turns a link-frame standard regressor Y (e.g. ``RigidBodyDynamics.regressor``)
    into the base regressor: Y_b = Y @ selection, and Y p = Y_b K p for every p.
    ``base_regressor`` is the symbolic n x r Y_gb(q) = Y_g(q) selection (g = Y_gb pi_g) for kind='gravity',
    Y_b(q, dq, ddq) for kind='full' of small chains, and None for the numeric mapping.
    ``payload_jacobian`` (r x 4 or r x 10) is J_eps: epsilon = J_eps p_L (eq. 27).
    """

    robot: str
    kind: str
    n: int
    q: tuple[sp.Symbol, ...]
    independent: np.ndarray
    K: sp.Matrix
    payload_transform: sp.Matrix
    selection: sp.Matrix
    base_regressor: sp.Matrix | None = None
    method: str = ""
    _funcs: dict = field(default_factory=dict, repr=False)

    # --- symbolic views ---------------------------------------------------------------------
    @property
    def per_link(self) -> int:
        return _per_link(self.kind)

    @property
    def rank(self) -> int:
        return int(self.K.shape[0])

    @property
    def parameters(self) -> tuple[sp.Expr, ...]:
        """Stacked standard parameters (symbols/products), P = per_link * n."""
        return parameter_symbols(self.n, self.per_link)

    @property
    def coefficients(self) -> list[sp.Expr]:
        """pi = K p, the dynamic coefficients of the unloaded robot (eq. 38 style products)."""
        p = sp.Matrix(self.parameters)
        return [sp.expand(e) for e in self.K * p]

    @property
    def payload_parameters(self) -> tuple[sp.Expr, ...]:
        """p_L = (mL, cLx*mL, cLy*mL, cLz*mL[, JLxx..JLzz]) in the payload frame (eq. 20)."""
        return body_parameter_symbols("L", self.per_link)

    @property
    def payload_jacobian(self) -> sp.Matrix:
        """J_eps (r x per_link) = K_n T_L: epsilon = J_eps p_L (eq. 27)."""
        per = self.per_link
        k_last = self.K[:, per * (self.n - 1):]
        return k_last * self.payload_transform

    @property
    def epsilon(self) -> list[sp.Expr]:
        """eps(p_L) = pi_L - pi (eq. 21)."""
        return [sp.expand(e) for e in self.payload_jacobian * sp.Matrix(self.payload_parameters)]

    @property
    def loaded_coefficients(self) -> list[sp.Expr]:
        """pi_L: the coefficients with the payload merged into the last link (eqs. 16-19)."""
        return [sp.expand(a + b) for a, b in zip(self.coefficients, self.epsilon)]

    @property
    def nonzero(self) -> list[int]:
        """Indices (0-based) of the non-zero components of epsilon (eps_nz)."""
        jac = self.payload_jacobian
        return [i for i in range(jac.shape[0]) if any(v != 0 for v in jac.row(i))]

    @property
    def payload_jacobian_nz(self) -> sp.Matrix:
        """J_eps,nz: the rows of J_eps of the non-zero components."""
        jac = self.payload_jacobian
        return sp.Matrix([list(jac.row(i)) for i in self.nonzero])

    # --- numeric evaluation -----------------------------------------------------------------
    def K_numeric(self) -> np.ndarray:
        """K as floats (r x P)."""
        if "K" not in self._funcs:
            self._funcs["K"] = np.array(self.K.tolist(), dtype=float)
        return self._funcs["K"]

    def selection_numeric(self) -> np.ndarray:
        """``selection`` as floats (P x r): Y_b = Y @ selection."""
        if "S" not in self._funcs:
            self._funcs["S"] = np.array(self.selection.tolist(), dtype=float)
        return self._funcs["S"]

    def payload_jacobian_numeric(self, nonzero_only: bool = False) -> np.ndarray:
        jac = self.payload_jacobian_nz if nonzero_only else self.payload_jacobian
        return np.array(jac.tolist(), dtype=float)

    def coefficient_values(self, params: np.ndarray) -> np.ndarray:
        """pi = K p for numeric stacked standard parameters p (length P)."""
        p = np.asarray(params, dtype=float)
        if p.shape != (self.K.shape[1],):
            raise SymbolicModelError(f"expected {self.K.shape[1]} standard parameters, got shape {p.shape}")
        return self.K_numeric() @ p

    def base_regressor_function(self) -> Callable[..., np.ndarray]:
        """Fast numeric base regressor from the lambdified symbolic one: ``f(q)`` -> Y_gb (n x r) for
        kind='gravity'; ``f(q, dq, ddq)`` -> Y_b for kind='full' derived symbolically (small chains)."""
        if self.base_regressor is None:
            raise SymbolicModelError(
                "no symbolic base regressor: it exists for kind='gravity' and for kind='full' of chains with "
                f"at most {SYMBOLIC_FULL_MAX_JOINTS} joints (use RigidBodyDynamics.regressor @ selection)")
        if "yb" not in self._funcs:
            # Polynomial in s_i = sin(q_i), c_i = cos(q_i): evaluate those once, the rest with plain floats.
            s = sp.symbols(f"s_1:{self.n + 1}")
            c = sp.symbols(f"c_1:{self.n + 1}")
            rep = {}
            for qi, si, ci in zip(self.q, s, c):
                rep[sp.sin(qi)], rep[sp.cos(qi)] = si, ci
            rates = [*rate_symbols(self.n)[0], *rate_symbols(self.n)[1]] if self.kind == "full" else []
            f = sp.lambdify([*s, *c, *rates], self.base_regressor.xreplace(rep).tolist(), modules="math", cse=True)
            n, r, full = self.n, self.rank, self.kind == "full"

            def vec(x, what: str) -> list[float]:
                x = np.asarray(x, dtype=float)
                if x.shape != (n,):
                    raise SymbolicModelError(f"{what} must have {n} joint values, got shape {x.shape}")
                return x.tolist()

            def yb(q: np.ndarray, dq: np.ndarray | None = None, ddq: np.ndarray | None = None) -> np.ndarray:
                qv = np.array(vec(q, "q (rad)"))
                args = [*np.sin(qv).tolist(), *np.cos(qv).tolist()]
                if full:
                    if dq is None or ddq is None:
                        raise SymbolicModelError("the full base regressor needs q, dq and ddq")
                    args += vec(dq, "dq (rad/s)") + vec(ddq, "ddq (rad/s^2)")
                return np.array(f(*args), dtype=float).reshape(n, r)

            self._funcs["yb"] = yb
        return self._funcs["yb"]

    def gravity(self, q: np.ndarray, coefficients: np.ndarray) -> np.ndarray:
        """g(q) = Y_gb(q) pi_g (N m) for numeric gravity coefficients."""
        return self.base_regressor_function()(q) @ np.asarray(coefficients, dtype=float)


# ----------------------------------------------------------------------------------------------
# Derivation, caching
# ----------------------------------------------------------------------------------------------
def cache_dir() -> Path:
    """``$PAYLOAD_ESTIMATION_CACHE`` or ``$XDG_CACHE_HOME/payload_estimation`` (~/.cache/...)."""
    env = os.environ.get("PAYLOAD_ESTIMATION_CACHE")
    if env:
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "payload_estimation"


def cache_key(desc: RobotDescription, kind: str) -> str:
    """Hash of everything the derivation depends on (kinematics, gravity, payload frame, versions)."""
    h = hashlib.sha256()
    h.update(f"v{SYMBOLIC_VERSION};sympy{sp.__version__};{kind};n{desc.n};".encode())
    for j in desc.joints:
        for a in (j.pre, j.axis, j.post):
            h.update(np.ascontiguousarray(np.asarray(a, dtype=np.float64)).tobytes())
    for a in (desc.gravity, desc.payload_frame):
        h.update(np.ascontiguousarray(np.asarray(a, dtype=np.float64)).tobytes())
    if kind == "full":  # the full mapping is decided on the description's joint limits' samples
        h.update(np.ascontiguousarray(desc.limits.position, dtype=np.float64).tobytes())
    return h.hexdigest()[:32]


def _to_cache(sc: SymbolicCoefficients) -> dict:
    return {
        "version": SYMBOLIC_VERSION,
        "sympy": sp.__version__,
        "kind": sc.kind,
        "n": sc.n,
        "method": sc.method,
        "independent": [int(i) for i in sc.independent],
        "K": sc.K,
        "payload_transform": sc.payload_transform,
        "selection": sc.selection,
        "base_regressor": sc.base_regressor,
    }


def _from_cache(d: dict, q: tuple[sp.Symbol, ...], robot: str) -> SymbolicCoefficients:
    if d.get("version") != SYMBOLIC_VERSION or d.get("sympy") != sp.__version__:
        raise ValueError("cache entry of another version")
    base = d["base_regressor"]
    if base is not None and not base.free_symbols <= set(q).union(*rate_symbols(len(q))):
        raise ValueError("cache entry with foreign joint symbols")
    return SymbolicCoefficients(
        robot=robot, kind=d["kind"], n=int(d["n"]), q=q,
        independent=np.array(d["independent"], dtype=int), K=d["K"],
        payload_transform=d["payload_transform"], selection=d["selection"], base_regressor=base,
        method=d["method"] + " (cached)",
    )


def derive(desc: RobotDescription, kind: str = "gravity", n_samples: int | None = None, seed: int = 0,
           use_cache: bool = True, method: str = "auto") -> SymbolicCoefficients:
    """Symbolic dynamic coefficients of ``desc`` (``kind``: gravity | full), cached on disk.

    gravity: Y_g(q) from the potential energy (sympy), base columns decided on ``n_samples`` random
    configurations of the lambdified Y_g. full: the numeric regressor of pinocchio
    (:class:`RigidBodyDynamics`) on random states, i.e. the numeric mapping, exact-ified.
    """
    per = _per_link(kind)
    if method not in ("auto", "symbolic", "numeric"):
        raise SymbolicModelError(f"method must be 'auto', 'symbolic' or 'numeric', got {method!r}")
    if method == "auto":
        method = "symbolic" if kind == "gravity" or desc.n <= SYMBOLIC_FULL_MAX_JOINTS else "numeric"
    if kind == "gravity" and method == "numeric":
        raise SymbolicModelError("gravity coefficients are always derived symbolically (method='symbolic')")
    q = joint_symbols(desc.n)
    path = cache_dir() / f"coefficients-{kind}-{method}-{cache_key(desc, kind)}.pickle"
    if use_cache and path.is_file():
        try:
            with path.open("rb") as fh:
                return _from_cache(pickle.load(fh), q, desc.name)
        except (OSError, ValueError, KeyError, TypeError, AttributeError, EOFError, pickle.UnpicklingError) as exc:
            log.warning("ignoring unreadable symbolic cache %s (re-deriving): %s", path, exc)

    n = desc.n
    t_l = exact_matrix(params_transform_matrix(desc.payload_frame)[:per, :per])
    order = preference_order(n, kind)
    # Decide the base in joint-frame parameters (each link's parameters about its own joint frame,
    # link_{i-1} @ pre_i): then the coefficients come out as the physical regroupings of the
    # Lagrangian (inertia and first moment about the joint axis, masses folded into the previous
    # link), i.e. the form of eqs. (29) and (38). K = K_joint T with p_joint = T p_link.
    t_inv_num, t_sym, t_inv_sym = _joint_frame_maps(desc, per)
    if kind == "gravity":
        yg = _full_regressor_ring(desc, q, gravity_only=True)
        qs = _random_configurations(desc, n_samples or max(40, 8 * n), seed)
        w = yg.evaluate(qs, np.zeros_like(qs), np.zeros_like(qs))
        indep, b = select_base(w @ t_inv_num, order)
        selection = sp.diag(*t_inv_sym)[:, [int(i) for i in indep]]
        base = yg.times(selection).to_sympy()
        how = "symbolic potential energy; base columns decided numerically"
    elif method == "symbolic":
        y = _full_regressor_ring(desc, q)
        rng = np.random.default_rng(seed)
        qs = _random_configurations(desc, n_samples or max(60, 12 * n), seed)
        w = y.evaluate(qs, rng.uniform(-2, 2, qs.shape), rng.uniform(-5, 5, qs.shape))
        indep, b = select_base(w @ t_inv_num, order)
        selection = sp.diag(*t_inv_sym)[:, [int(i) for i in indep]]
        base = y.times(selection).to_sympy()
        how = "symbolic Lagrangian (eq. 6 kinetic energy); base columns decided numerically"
    else:
        from .dynamics import RigidBodyDynamics

        dyn = RigidBodyDynamics(desc)
        rng = np.random.default_rng(seed)
        qs = _random_configurations(desc, n_samples or max(60, 12 * n), seed)
        w = np.vstack([dyn.regressor(qi, rng.uniform(-2, 2, n), rng.uniform(-5, 5, n)) for qi in qs])
        indep, b = select_base(w @ t_inv_num, order)
        selection = sp.diag(*t_inv_sym)[:, [int(i) for i in indep]]
        base = None
        how = "numeric mapping (pinocchio regressor), coefficients snapped to exact decimals"
    k = _mapping_matrix(per * n, indep, b) * sp.diag(*t_sym)
    sc = SymbolicCoefficients(desc.name, kind, n, q, indep, k, t_l, selection, base, how)
    if use_cache:
        _write_cache(path, _to_cache(sc))
    return sc


def _write_cache(path: Path, data: dict) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=".pickle")
        with os.fdopen(fd, "wb") as fh:
            pickle.dump(data, fh, protocol=pickle.HIGHEST_PROTOCOL)
        os.replace(tmp, path)
    except OSError as exc:  # a read-only home must not break the derivation
        log.warning("cannot write the symbolic cache %s: %s", path, exc)


def group_terms(expr: sp.Expr) -> str:
    """Readable form of a linear coefficient: terms with the same numeric factor grouped,
    e.g. ``c5y*m5 + c4z*m4 + 39/100*(m5 + m6 + m7)`` (display only; parse the plain str for math)."""
    expr = sp.expand(expr)
    if expr == 0:
        return "0"
    groups: dict[sp.Expr, list[sp.Expr]] = {}
    for term in sp.Add.make_args(expr):
        coeff, rest = term.as_coeff_Mul()
        groups.setdefault(coeff, []).append(rest)
    parts: list[tuple[bool, str]] = []  # (negative, text)
    for coeff, terms in sorted(groups.items(), key=lambda kv: (abs(kv[0]) != 1, -abs(kv[0]))):
        mag = abs(coeff)
        if mag == 1:
            parts += [(bool(coeff < 0), str(t)) for t in terms]
        elif len(terms) == 1:
            parts.append((bool(coeff < 0), f"{mag}*{terms[0]}"))
        else:
            parts.append((bool(coeff < 0), f"{mag}*(" + " + ".join(str(t) for t in terms) + ")"))
    parts.sort(key=lambda p: p[0])  # positive terms first
    out = ("-" if parts[0][0] else "") + parts[0][1]
    for neg, text in parts[1:]:
        out += (" - " if neg else " + ") + text
    return out


__all__ = [
    "SymbolicCoefficients",
    "SymbolicModelError",
    "body_parameter_symbols",
    "cache_dir",
    "cache_key",
    "derive",
    "exact_number",
    "gravity_regressor_symbolic",
    "group_terms",
    "joint_symbols",
    "link_transforms",
    "parameter_symbols",
    "potential_regressor",
    "full_regressor_symbolic",
    "preference_order",
    "rate_symbols",
    "select_base",
]
