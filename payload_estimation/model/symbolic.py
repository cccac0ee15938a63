"""Symbolic dynamic coefficients (sympy) of a :class:`RobotDescription`, paper 000 (Gaz & De Luca).

The coefficients are the package's one notion of base parameters (:mod:`.base_parameters`: the same
columns, decided numerically in joint-frame parameters, inertias then first moments then masses,
last link first), written as exact expressions in the standard-parameter symbols:

* the gravity dynamic coefficients ``pi_g = K_g p_g`` (``m7``, ``c7y*m7`` ... as in eq. 38) and the
  symbolic base regressor ``Y_gb(q)`` with ``g(q) = Y_gb(q) pi_g`` (:mod:`.symbolic_regressor`);
* the full dynamic coefficients ``pi = K p`` (10 per link; ``J{i}xx`` .. about the link-frame origin),
  with the symbolic base regressor ``Y_b(q, dq, ddq)`` for chains of up to
  ``SYMBOLIC_FULL_MAX_JOINTS`` joints (K only for longer chains: the "numeric mapping");
* the payload terms: ``eps(p_L) = pi_L - pi`` (eq. 21), its non-zero rows and the payload Jacobian
  ``J_eps = d eps / d p_L`` (eq. 27), ``p_L = (mL, cLx*mL, cLy*mL, cLz*mL, JLxx, .., JLzz)`` in the
  payload frame (merged into the last link through ``desc.payload_frame``, eqs. 16-17).

Combination coefficients are snapped to exact short decimals (kinematic constants such as d1 = 0.4,
d1*d2 = 0.156) when within 1e-9 of one. Results are cached on disk (:mod:`.symbolic_cache`).
Units: SI (kg, m, kg m^2, N m); gravity coefficients multiply ``Y_g`` which already contains g0.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import sympy as sp

from .base_parameters import KINDS, compute_base_parameters, joint_frame_maps, per_link
from .description import RobotDescription
from .parameters import params_transform_matrix
from .symbolic_cache import cache_dir, cache_key, read_entry, write_entry
from .symbolic_regressor import (
    SymbolicModelError,
    body_parameter_symbols,
    exact_matrix,
    exact_number,
    joint_symbols,
    parameter_symbols,
    rate_symbols,
    regressor_ring,
)

log = logging.getLogger(__name__)

SYMBOLIC_FULL_MAX_JOINTS = 3  # full coefficients by the symbolic Lagrangian up to this many joints
BASE_SAMPLES = 200  # random states the base columns are decided on (compute_base_parameters)


def _per_link(kind: str) -> int:
    if kind not in KINDS:
        raise SymbolicModelError(f"kind must be one of {KINDS}, got {kind!r}")
    return per_link(kind)


def _mapping_matrix(n_cols: int, indep: np.ndarray, b: np.ndarray) -> sp.Matrix:
    """Exact-ish K (r x P): pi = K p, identity on the independent columns, B on the dependent ones."""
    dep = np.setdiff1d(np.arange(n_cols), indep)
    k = sp.zeros(len(indep), n_cols)
    for row, col in enumerate(indep):
        k[row, int(col)] = sp.Integer(1)
        for j, dcol in enumerate(dep):
            k[row, int(dcol)] = exact_number(b[row, j], tol=1e-9)
    return k


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


def _to_cache(sc: SymbolicCoefficients) -> dict:
    return {
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

    The columns and combinations are :func:`.base_parameters.compute_base_parameters`' (decided on
    ``n_samples`` random states, default :data:`BASE_SAMPLES`), made exact. The base regressor comes
    from the potential energy (gravity) or the Lagrangian (full, ``method`` "symbolic"); "numeric"
    (the default for full models of more than ``SYMBOLIC_FULL_MAX_JOINTS`` joints) gives K only.
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
    entry = read_entry(path) if use_cache else None
    if entry is not None:
        try:
            return _from_cache(entry, q, desc.name)
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            log.warning("ignoring unusable symbolic cache %s (re-deriving): %s", path, exc)

    from .dynamics import RigidBodyDynamics

    n = desc.n
    base = compute_base_parameters(RigidBodyDynamics(desc), kind, n_samples or BASE_SAMPLES, seed)
    t, t_inv = joint_frame_maps(desc, kind)
    from scipy.linalg import block_diag

    indep = base.independent
    dep = np.setdiff1d(np.arange(per * n), indep)
    b = (base.K @ block_diag(*t_inv))[:, dep]  # K = K_joint T: back to the joint-frame combinations
    selection = sp.diag(*[exact_matrix(x) for x in t_inv])[:, [int(i) for i in indep]]
    if kind == "gravity":
        base_regressor = regressor_ring(desc, q, gravity_only=True).times(selection).to_sympy()
        how = "symbolic potential energy; base columns of model.base_parameters"
    elif method == "symbolic":
        base_regressor = regressor_ring(desc, q).times(selection).to_sympy()
        how = "symbolic Lagrangian (eq. 6 kinetic energy); base columns of model.base_parameters"
    else:
        base_regressor = None
        how = "numeric mapping (pinocchio regressor), coefficients snapped to exact decimals"
    k = _mapping_matrix(per * n, indep, b) * sp.diag(*[exact_matrix(x) for x in t])
    t_l = exact_matrix(params_transform_matrix(desc.payload_frame)[:per, :per])
    sc = SymbolicCoefficients(desc.name, kind, n, q, indep, k, t_l, selection, base_regressor, how)
    if use_cache:
        write_entry(path, _to_cache(sc))
    return sc


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
    "BASE_SAMPLES",
    "SYMBOLIC_FULL_MAX_JOINTS",
    "SymbolicCoefficients",
    "SymbolicModelError",
    "derive",
    "group_terms",
]
