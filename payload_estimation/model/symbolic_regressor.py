"""Symbolic regressors (sympy) of a :class:`RobotDescription`, paper 000 (Gaz & De Luca).

For any convention (DH, MDH, URDF; only each joint's ``pre @ Rot(axis, q) @ post`` is used, with
numeric entries snapped to exact 0, +-1 and short decimals):

* the gravity regressor ``Y_g(q)`` (n x 4n) from the potential energy
  ``U = -sum_i gamma^T (m_i p_i + R_i m_i c_i)`` (linear in ``m_i`` and ``m_i c_i``), ``g = dU/dq``;
* the full regressor ``Y(q, dq, ddq)`` (n x 10n) from the Lagrangian (kinetic energy of eq. 6), for
  short chains.

Regressors are built as polynomials in s_i = sin q_i, c_i = cos q_i (and dq, ddq) in a sympy
polynomial ring, where products and derivatives are cheap, then turned into sympy expressions.
Units: SI (kg, m, kg m^2, N m); ``Y_g`` contains g0.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import sympy as sp

from ..errors import PayloadEstimationError
from .description import RobotDescription
from .parameters import N_PARAMS

_SNAP_TOL = 1e-12
_INERTIA_NAMES = ("xx", "xy", "xz", "yy", "yz", "zz")


class SymbolicModelError(PayloadEstimationError):
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

    ``fast``: computed in the polynomial ring of sin/cos (see :func:`regressor_ring`); otherwise by
    sympy's own differentiation of :func:`potential_regressor` (slower; kept as an independent check).
    """
    q = joint_symbols(desc.n) if q is None else q
    if fast:
        return regressor_ring(desc, q, gravity_only=True).to_sympy()
    u = potential_regressor(desc, q)
    return sp.Matrix(desc.n, u.shape[1], lambda j, c: sp.expand(sp.diff(u[c], q[j])))


def rate_symbols(n: int) -> tuple[tuple[sp.Symbol, ...], tuple[sp.Symbol, ...]]:
    """Joint velocity and acceleration symbols (dq1.., ddq1..; rad/s, rad/s^2)."""
    return (tuple(sp.Symbol(f"dq{i}", real=True) for i in range(1, n + 1)),
            tuple(sp.Symbol(f"ddq{i}", real=True) for i in range(1, n + 1)))


def full_regressor_symbolic(desc: RobotDescription, q: Sequence[sp.Symbol] | None = None) -> sp.Matrix:
    """Symbolic Y(q, dq, ddq) (n x 10n), tau = Y p, by Euler-Lagrange on L = T - U (paper 000 eqs. 6-8);
    see :func:`regressor_ring` (intended for small chains)."""
    return regressor_ring(desc, q).to_sympy()


def regressor_ring(desc: RobotDescription, q: Sequence[sp.Symbol] | None = None,
                         gravity_only: bool = False) -> RingRegressor:
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
    return RingRegressor(rows, dom, gens, tuple(q), (*sn, *cs))


@dataclass
class RingRegressor:
    """A regressor as polynomials in (s_1..s_n, c_1..c_n, dq_1.., ddq_1..) over ``dom``; rows[j][k]."""

    rows: list[list]
    dom: object
    gens: list
    q: tuple[sp.Symbol, ...]
    trig: tuple[sp.Symbol, ...]  # the ring's s_1..s_n, c_1..c_n symbols

    def times(self, sel: sp.Matrix) -> RingRegressor:
        """Y @ sel for an exact constant matrix ``sel`` (P x r)."""
        zero = self.gens[0] * 0
        consts = [[self.dom.from_sympy(v) for v in sel.row(k)] for k in range(sel.shape[0])]
        rows = [[sum((row[k] * consts[k][c] for k in range(len(row)) if consts[k][c]), zero)
                 for c in range(sel.shape[1])] for row in self.rows]
        return RingRegressor(rows, self.dom, self.gens, self.q, self.trig)

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


__all__ = [
    "RingRegressor",
    "SymbolicModelError",
    "body_parameter_symbols",
    "exact_matrix",
    "exact_number",
    "full_regressor_symbolic",
    "gravity_regressor_symbolic",
    "joint_symbols",
    "link_transforms",
    "parameter_symbols",
    "potential_regressor",
    "rate_symbols",
    "regressor_ring",
]
