"""Numeric base parameters (dynamic coefficients) of any serial chain, by QR on random samples.

For a stacked regressor W (N n x P) of the standard parameters p, a column-pivoted QR gives the
rank r, the independent columns (indices ``independent``) and the dependent ones as linear
combinations of them, so that  W p = W_b pi  with  pi = K p  (K: r x P, identity on the
independent columns). ``pi`` are the dynamic coefficients (base parameters).
The payload enters only the last link's parameters, so  epsilon = K E_n T_L p_L = J_eps p_L
(paper 000 eqs. 21 and 27) with the numeric payload Jacobian J_eps of :func:`payload_jacobian`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.linalg

from .dynamics import RigidBodyDynamics
from .parameters import N_GRAVITY_PARAMS, N_PARAMS, params_transform_matrix


@dataclass(frozen=True)
class BaseParameters:
    """Mapping from standard parameters p (P) to dynamic coefficients pi = K p (r).

    ``kind`` is ``"full"`` (10 per link) or ``"gravity"`` (4 per link: m, m c).
    ``independent`` are the indices of p whose regressor columns form the base regressor.
    """

    kind: str
    K: np.ndarray
    independent: np.ndarray
    n_links: int

    @property
    def rank(self) -> int:
        return int(self.K.shape[0])

    @property
    def per_link(self) -> int:
        return N_PARAMS if self.kind == "full" else N_GRAVITY_PARAMS

    def coefficients(self, p: np.ndarray) -> np.ndarray:
        """Dynamic coefficients pi = K p of stacked standard parameters p."""
        return self.K @ np.asarray(p, dtype=float)

    def base_regressor(self, y: np.ndarray) -> np.ndarray:
        """Base regressor Y_b (rows x r) from a standard-parameter regressor Y (rows x P)."""
        return y[..., self.independent]


def _sample_regressor(dyn: RigidBodyDynamics, kind: str, n_samples: int, rng) -> np.ndarray:
    lo, hi = dyn.desc.limits.position[:, 0], dyn.desc.limits.position[:, 1]
    rows = []
    for _ in range(n_samples):
        q = rng.uniform(np.maximum(lo, -np.pi), np.minimum(hi, np.pi))
        if kind == "gravity":
            rows.append(dyn.gravity_regressor(q))
        else:
            dq, ddq = rng.uniform(-2, 2, dyn.n), rng.uniform(-5, 5, dyn.n)
            rows.append(dyn.regressor(q, dq, ddq))
    return np.vstack(rows)


def compute_base_parameters(dyn: RigidBodyDynamics, kind: str = "full", n_samples: int = 200,
                            seed: int = 0, rtol: float = 1e-8) -> BaseParameters:
    """Base parameters of ``dyn`` from ``n_samples`` random states (``kind``: full | gravity).

    Columns are scaled to unit norm before the QR so that the rank decision is unit-independent.
    """
    if kind not in ("full", "gravity"):
        raise ValueError(f"kind must be 'full' or 'gravity', got {kind!r}")
    rng = np.random.default_rng(seed)
    w = _sample_regressor(dyn, kind, n_samples, rng)
    norms = np.linalg.norm(w, axis=0)
    nonzero = norms > rtol * max(norms.max(), 1.0)
    ws = np.where(nonzero, w / np.where(nonzero, norms, 1.0), 0.0)
    _, r, piv = scipy.linalg.qr(ws, mode="economic", pivoting=True)
    diag = np.abs(np.diag(r))
    rank = int(np.sum(diag > rtol * diag[0]))
    indep = np.sort(piv[:rank])
    dep = np.setdiff1d(np.arange(w.shape[1]), indep)
    # W_dep = W_indep B  (least squares, exact up to round-off): pi = p_indep + B p_dep.
    b, *_ = np.linalg.lstsq(w[:, indep], w[:, dep], rcond=None)
    b[np.abs(b) < 1e-10] = 0.0
    k = np.zeros((rank, w.shape[1]))
    k[np.arange(rank), indep] = 1.0
    k[:, dep] = b
    return BaseParameters(kind, k, indep, dyn.n)


def payload_jacobian(base: BaseParameters, dyn: RigidBodyDynamics) -> np.ndarray:
    """Numeric payload Jacobian J_eps (r x 10, or r x 4 for gravity): epsilon = J_eps p_L.

    p_L in the payload frame (seeds' order), paper 000 eq. (27).
    """
    per = base.per_link
    t = params_transform_matrix(dyn.desc.payload_frame)[:per, :per]
    cols = slice(per * (dyn.n - 1), per * dyn.n)
    return base.K[:, cols] @ t
