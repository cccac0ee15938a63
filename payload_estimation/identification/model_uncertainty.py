"""How wrong the unloaded torque model may be, and what that does to a payload estimate.

A static payload fit compares measured torques with an unloaded model ĝ(q). The true robot differs by

    e(q) = R(q) δ + o,    δ ~ N(0, Σ),   o ~ N(0, diag σ_o²)

with R(q) the model's regressor at rest (n x p: the link gravity parameters (m, m c) per link for a
data-sheet model, the kept coefficients for an identified one), δ its parameter error and o constant
joint-torque offsets the model does not contain (a sensor's bias). The error is *systematic*: the same
at every capture near a pose, so it does not average out and the fit's residual cannot reveal the
part of it that looks like a payload. :func:`generalized_fit` weighs the captures by C, the stacked
covariance of e over them (:func:`error_covariance`) plus the noise, and reports (Yᵀ C⁻¹ Y)⁻¹.

* one-shot: e(q_k) itself;
* anchored on unloaded captures at q_u: e(q_k) − mean_u e(q_u) (offsets cancel, and near the anchor
  the link error nearly does);
* differential (unloaded captures at every pose): 0.

Units: torques N m, angles rad; payload parameters (m, m cx, m cy, m cz) kg and kg m.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from scipy.linalg import solve_triangular

from ..model.dynamics import RigidBodyDynamics
from ..model.parameters import N_GRAVITY_PARAMS
from .least_squares import solve_least_squares

# Default declared 1-σ relative error of a data-sheet link model (mass, first moments). Published
# LWR/iiwa models are fits or CAD values; errors of several percent are common (docs/user_guide.md).
DATASHEET_RELATIVE = 0.05
# CoM scale floor (m): a link whose CoM lies on a frame axis still has an uncertain CoM.
COM_FLOOR = 0.01


class ModelUncertaintyError(ValueError):
    """A declared model uncertainty that cannot be used (negative, NaN, wrong shape)."""


@dataclass(frozen=True)
class ModelUncertainty:
    """The unloaded model's torque error e(q) = R(q) δ + o at rest (module docstring).

    ``regressor``: q (n,) rad -> R(q) (n x p); ``covariance`` Σ (p x p) of δ; ``offset_std`` σ_o (n,)
    N m; ``source``: one phrase saying which model and how its uncertainty was made (shown in status).
    """

    regressor: Callable[[np.ndarray], np.ndarray]
    covariance: np.ndarray
    offset_std: np.ndarray
    source: str

    def torque_std(self, q: np.ndarray) -> np.ndarray:
        """1-σ model torque error per joint at the pose ``q`` (N m), offsets included."""
        r = self.regressor(np.asarray(q, float))
        return np.sqrt(np.einsum("ij,jk,ik->i", r, self.covariance, r) + self.offset_std ** 2)


def _offsets(offset_std, n: int) -> np.ndarray:
    o = np.broadcast_to(np.asarray(offset_std, float), (n,)).copy() if np.ndim(offset_std) == 0 else \
        np.asarray(offset_std, float).reshape(-1)
    if o.shape != (n,) or not np.all(np.isfinite(o)) or np.any(o < 0):
        raise ModelUncertaintyError(f"torque offset std must be one value or {n} values >= 0 N m, got {offset_std}")
    return o


def declared_uncertainty(dyn: RigidBodyDynamics, relative: float = DATASHEET_RELATIVE, offset_std=0.0,
                         com_floor: float = COM_FLOOR) -> ModelUncertainty:
    """A nominal (data-sheet) model's uncertainty: every link's mass and CoM off by ``relative`` (1 σ).

    σ(m) = u m; σ(m c_j) = u m sqrt(c_j² + max(|c|, com_floor)²): the mass error moves every first
    moment, and the CoM error scales with the CoM's distance (at least ``com_floor`` m). Independent
    per parameter. ``offset_std`` (N m, one or n values): constant sensor offsets not in the model.
    """
    if not (np.isfinite(relative) and relative >= 0):
        raise ModelUncertaintyError(f"relative model uncertainty must be a number >= 0, got {relative}")
    var = []
    for body in dyn.desc.links:
        m = float(body.mass)
        c = np.asarray(body.com, float)
        scale = max(float(np.linalg.norm(c)), com_floor)
        var += [(relative * m) ** 2, *((relative * m) ** 2 * (c ** 2 + scale ** 2))]
    cov = np.diag(np.asarray(var, float))
    assert cov.shape[0] == N_GRAVITY_PARAMS * dyn.n
    o = _offsets(offset_std, dyn.n)
    return ModelUncertainty(dyn.gravity_regressor, cov, o, declared_source(relative, float(np.max(o))))


def declared_source(relative: float, offset_std: float = 0.0) -> str:
    """The :attr:`ModelUncertainty.source` phrase of :func:`declared_uncertainty` (offset_std N m)."""
    src = f"nominal model, declared {100 * relative:g} % (1 σ) link mass/CoM uncertainty"
    return src + (f", torque offsets {offset_std:g} N m" if offset_std > 0 else "")


def identified_uncertainty(dyn: RigidBodyDynamics, model, label: str, offset_std=0.0) -> ModelUncertainty:
    """An identified model's uncertainty: its kept coefficients' covariance (``model`` an
    :class:`~.identified_model.IdentifiedModel`; a fitted torque offset is part of it)."""
    n = dyn.n
    zero = np.zeros((1, n))

    def regressor(q: np.ndarray) -> np.ndarray:
        if model.kind == "gravity":
            return model.regressor(dyn, q[None])
        return model.regressor(dyn, q[None], zero, zero)

    cov = np.asarray(model.covariance, float)
    return ModelUncertainty(regressor, 0.5 * (cov + cov.T), _offsets(offset_std, n),
                            f"identified model {label} (its coefficient covariance)")


def error_covariance(unc: ModelUncertainty, q: np.ndarray, anchor: np.ndarray | None = None) -> np.ndarray:
    """Covariance (N n x N n, N m²) of the stacked model error at the poses ``q`` (N, n), rows as
    ``stack_rows``; with ``anchor`` (K, n) the poses of the unloaded captures the model is anchored on."""
    q = np.atleast_2d(np.asarray(q, float))
    r = np.vstack([unc.regressor(qk) for qk in q])  # (N n, p)
    if anchor is not None:
        a = np.atleast_2d(np.asarray(anchor, float))
        r_anchor = np.mean([unc.regressor(qa) for qa in a], axis=0)
        r = r - np.tile(r_anchor, (q.shape[0], 1))
    c = r @ unc.covariance @ r.T
    if anchor is None:
        c = c + np.kron(np.ones((q.shape[0], q.shape[0])), np.diag(unc.offset_std ** 2))
    return 0.5 * (c + c.T)


@dataclass(frozen=True)
class GeneralizedFit:
    """A generalized least-squares fit: ``params``, their ``covariance``, the unwhitened residual RMS
    (N m) and ``scale`` = χ²/dof of the whitened residual (> 1: the data scatter more than declared,
    and the covariance was scaled up by it)."""

    params: np.ndarray
    covariance: np.ndarray
    residual_rms: float
    scale: float


def generalized_fit(y: np.ndarray, dtau: np.ndarray, c: np.ndarray, names) -> GeneralizedFit:
    """Best linear unbiased fit of ``dtau ~ y p`` when ``dtau`` carries an error of covariance ``c``
    (noise plus model error): p = (yᵀ C⁻¹ y)⁻¹ yᵀ C⁻¹ dtau, covariance (yᵀ C⁻¹ y)⁻¹ times
    max(1, χ²/dof). Rows whose error the model shares (a link error seen at every pose) are discounted
    together, which a per-row weight cannot do. Raises the least-squares errors (rank, shape)."""
    chol = np.linalg.cholesky(c)
    yw = solve_triangular(chol, y, lower=True)
    tw = solve_triangular(chol, dtau, lower=True)
    res = solve_least_squares(yw, tw, None, names)
    s2 = float(res.sigma2)
    cov = res.covariance * (max(1.0, s2) / s2) if s2 > 0 else res.covariance
    resid = dtau - y @ res.params
    return GeneralizedFit(res.params, cov, float(np.sqrt(np.mean(resid ** 2))), s2)


__all__ = ["ModelUncertainty", "ModelUncertaintyError", "declared_uncertainty", "declared_source",
           "identified_uncertainty", "error_covariance", "generalized_fit", "GeneralizedFit", "DATASHEET_RELATIVE",
           "COM_FLOOR"]
