"""Base parameters (dynamic coefficients) of any serial chain: the one choice of columns that every
algorithm and the symbolic coefficients (:mod:`.symbolic`) share.

For a stacked regressor W (N n x P) of the standard link parameters p (seeds' order, link frames),
the base parameters are pi = K p (r x P) with W p = W_b pi for every p, W_b = W S the base regressor
(S, ``selection``: P x r).

Which r columns: each link's parameters are re-expressed about its *joint frame* (``link_{i-1} @
pre_i``, which turns with joint i about its axis), p_joint = T p, and the independent joint-frame
columns are picked greedily in :func:`preference_order` -- inertia entries first, then first moments,
then masses, the last link first. The coefficients then come out as the physical regroupings of the
Lagrangian (inertia and first moment about the joint axis, masses folded into the previous link):
the form of paper 000's eqs. (29) and (38). K = K_joint T with K_joint the identity on the
independent joint-frame columns and B on the others (W_joint,dep = W_joint,indep B); S = T^-1[:, indep].

The payload enters only the last link's parameters, so epsilon = K E_n T_L p_L = J_eps p_L (paper 000
eqs. 21 and 27) with the numeric payload Jacobian J_eps of :func:`payload_jacobian`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy.linalg import block_diag

from ..errors import PayloadEstimationError
from .description import RobotDescription
from .dynamics import RigidBodyDynamics
from .parameters import N_GRAVITY_PARAMS, N_PARAMS, params_transform_matrix
from .transforms import invert

KINDS = ("full", "gravity")


class BaseParameterError(PayloadEstimationError):
    """The base-parameter decomposition cannot be made (bad kind, inconsistent regressor)."""


def per_link(kind: str) -> int:
    """Standard parameters per link of ``kind`` (full: 10, gravity: m, m c = 4)."""
    if kind not in KINDS:
        raise BaseParameterError(f"kind must be 'full' or 'gravity', got {kind!r}")
    return N_PARAMS if kind == "full" else N_GRAVITY_PARAMS


@dataclass(frozen=True)
class BaseParameters:
    """Mapping from standard parameters p (P, link frames) to dynamic coefficients pi = K p (r).

    ``kind`` is ``"full"`` (10 per link) or ``"gravity"`` (4 per link: m, m c). ``independent``: the
    joint-frame standard parameters (indices into p's layout) whose columns form the base regressor,
    in selection order; ``selection`` (P x r): Y_b = Y @ selection for a link-frame regressor Y.
    """

    kind: str
    K: np.ndarray
    independent: np.ndarray
    selection: np.ndarray
    n_links: int

    @property
    def rank(self) -> int:
        return int(self.K.shape[0])

    @property
    def per_link(self) -> int:
        return per_link(self.kind)

    def coefficients(self, p: np.ndarray) -> np.ndarray:
        """Dynamic coefficients pi = K p of stacked standard parameters p."""
        return self.K @ np.asarray(p, dtype=float)

    def base_regressor(self, y: np.ndarray) -> np.ndarray:
        """Base regressor Y_b (rows x r) from a standard-parameter regressor Y (rows x P)."""
        return np.asarray(y, float) @ self.selection


def preference_order(n: int, kind: str) -> list[int]:
    """Order in which joint-frame columns are tried as independent: the inertia entries of all links
    (full only), then all first moments, then all masses (best folded into the others, as in
    eq. 38); within each group the last link first."""
    per = per_link(kind)
    groups = ([[9, 4, 7, 5, 6, 8]] if per == N_PARAMS else []) + [[1, 2, 3], [0]]
    return [per * link + k for group in groups for link in range(n - 1, -1, -1) for k in group]


def select_base(w: np.ndarray, order: Sequence[int], rtol: float = 1e-8) -> tuple[np.ndarray, np.ndarray]:
    """Greedy independent-column selection of the stacked regressor ``w`` in ``order``.

    Returns (independent column indices in selection order, B) with ``w[:, dep] = w[:, indep] @ B``
    for ``dep`` = the remaining columns in increasing order. Raises :class:`BaseParameterError` when
    the dependent columns are not combinations of the independent ones.
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
        raise BaseParameterError(f"base-parameter decomposition is inconsistent (residual {resid:.3g})")
    return indep_arr, b


def joint_frame_maps(desc: RobotDescription, kind: str) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Per-joint blocks of T (p_joint = T p_link) and of T^-1, ``per_link(kind)`` square each."""
    per = per_link(kind)
    t = [params_transform_matrix(j.post)[:per, :per] for j in desc.joints]
    t_inv = [params_transform_matrix(invert(j.post))[:per, :per] for j in desc.joints]
    return t, t_inv


def random_configurations(desc: RobotDescription, count: int, seed: int) -> np.ndarray:
    """``count`` configurations (count x n, rad) uniform within the limits (clipped to ±π)."""
    rng = np.random.default_rng(seed)
    lo = np.maximum(desc.limits.position[:, 0], -np.pi)
    hi = np.minimum(desc.limits.position[:, 1], np.pi)
    return rng.uniform(lo, hi, size=(count, desc.n))


def sample_regressor(dyn: RigidBodyDynamics, kind: str, n_samples: int, seed: int) -> np.ndarray:
    """Stacked link-frame regressor of ``kind`` at ``n_samples`` random states (speeds ±2 rad/s,
    accelerations ±5 rad/s²; at rest for gravity)."""
    rng = np.random.default_rng(seed)
    qs = random_configurations(dyn.desc, n_samples, seed)
    if kind == "gravity":
        return np.vstack([dyn.gravity_regressor(q) for q in qs])
    return np.vstack([dyn.regressor(q, rng.uniform(-2, 2, dyn.n), rng.uniform(-5, 5, dyn.n)) for q in qs])


def compute_base_parameters(dyn: RigidBodyDynamics, kind: str = "full", n_samples: int = 200,
                            seed: int = 0, rtol: float = 1e-8) -> BaseParameters:
    """Base parameters of ``dyn`` (``kind``: full | gravity) decided on ``n_samples`` random states
    (module docstring: joint-frame columns in :func:`preference_order`)."""
    per = per_link(kind)
    t, t_inv = joint_frame_maps(dyn.desc, kind)
    t_inv_all = block_diag(*t_inv)
    w = sample_regressor(dyn, kind, n_samples, seed) @ t_inv_all
    indep, b = select_base(w, preference_order(dyn.n, kind), rtol)
    b[np.abs(b) < 1e-10] = 0.0
    dep = np.setdiff1d(np.arange(per * dyn.n), indep)
    k_joint = np.zeros((indep.size, per * dyn.n))
    k_joint[np.arange(indep.size), indep] = 1.0
    k_joint[:, dep] = b
    return BaseParameters(kind, k_joint @ block_diag(*t), indep, t_inv_all[:, indep], dyn.n)


def payload_jacobian(base: BaseParameters, dyn: RigidBodyDynamics) -> np.ndarray:
    """Numeric payload Jacobian J_eps (r x 10, or r x 4 for gravity): epsilon = J_eps p_L.

    p_L in the payload frame (seeds' order), paper 000 eq. (27).
    """
    per = base.per_link
    t = params_transform_matrix(dyn.desc.payload_frame)[:per, :per]
    cols = slice(per * (dyn.n - 1), per * dyn.n)
    return base.K[:, cols] @ t


__all__ = ["BaseParameters", "BaseParameterError", "KINDS", "compute_base_parameters", "joint_frame_maps",
           "payload_jacobian", "per_link", "preference_order", "random_configurations", "sample_regressor",
           "select_base"]
