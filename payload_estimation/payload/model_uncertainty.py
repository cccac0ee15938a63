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

In motion the same holds with R(q, dq, ddq), the regressor of the whole inverse dynamics (a data-sheet
model's link inertias are uncertain too; an identified model's friction coefficients are part of its
kept coefficients). A motion fit is ordinary least squares over thousands of rows, so the model error
is propagated rather than weighed: :func:`propagated_covariance` adds S Σ Sᵀ with S the fit's
sensitivity to the model's parameters and offsets. A differential motion fit's one error term (the model's
torque of the tracking difference between its runs) is fitted with the payload within its σ instead
(:func:`.motion.fit_payload_rows`, ``estimate_error``).

Units: torques N m, angles rad; payload parameters (m, m cx, m cy, m cz) kg and kg m.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from scipy.linalg import solve_triangular

from ..errors import PayloadEstimationError
from ..identification.least_squares import solve_least_squares
from ..model.dynamics import RigidBodyDynamics
from ..model.parameters import vec6_from_sym

# Default declared 1-σ relative error of a data-sheet link model (mass, first moments). Published
# LWR/iiwa models are fits or CAD values; errors of several percent are common (docs/user_guide.md).
DATASHEET_RELATIVE = 0.05
# CoM scale floor (m): a link whose CoM lies on a frame axis still has an uncertain CoM.
COM_FLOOR = 0.01


class ModelUncertaintyError(PayloadEstimationError):
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
    motion_regressor: Callable[[np.ndarray, np.ndarray, np.ndarray], np.ndarray] | None = None
    """(q, dq, ddq) (N, n) each -> stacked R (N n x p) in motion, same parameters as ``regressor``;
    None when the model's error in motion is not declared (a gravity-only model)."""

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
    """A nominal (data-sheet) model's uncertainty: every link's mass, CoM and inertia off by
    ``relative`` (1 σ), independent per parameter (:func:`declared_link_std`).

    ``offset_std`` (N m, one or n values): constant sensor offsets not in the model. Covers the
    10 standard parameters per link (``dyn.regressor``'s columns); at rest only the first four matter.
    """
    if not (np.isfinite(relative) and relative >= 0):
        raise ModelUncertaintyError(f"relative model uncertainty must be a number >= 0, got {relative}")
    std = np.concatenate([declared_link_std(body, relative, com_floor) for body in dyn.desc.links])
    cov = np.diag(std ** 2)
    o = _offsets(offset_std, dyn.n)
    zero = np.zeros(dyn.n)

    def at_rest(q: np.ndarray) -> np.ndarray:
        return dyn.regressor(q, zero, zero)

    def in_motion(q: np.ndarray, dq: np.ndarray, ddq: np.ndarray) -> np.ndarray:
        return np.vstack([dyn.regressor(a, b, c) for a, b, c in zip(q, dq, ddq)])

    return ModelUncertainty(at_rest, cov, o, declared_source(relative, float(np.max(o))), in_motion)


def declared_link_std(body, relative: float, com_floor: float = COM_FLOOR) -> np.ndarray:
    """1-σ errors (10) of one link's standard parameters (m, m c, J about the frame origin; seeds' order)
    when its mass, CoM and inertia are each off by ``relative``.

    σ(m) = u m; σ(m c_j) = u m sqrt(c_j² + s²) with s = max(|c|, com_floor) (the mass error moves every
    first moment, the CoM error scales with the CoM's distance); σ(J_ij) = u (|I_ij| + tr I / 6 +
    m |c|² + 2 m |c| s): the inertia about the CoM I off by u of itself (at least u tr I / 6, so a
    zero product of inertia is not certain), plus what the mass and CoM errors do to m S(c)ᵀ S(c).
    """
    m = float(body.mass)
    c = np.asarray(body.com, float)
    i_c = np.asarray(body.inertia_com, float)
    dist = float(np.linalg.norm(c))
    scale = max(dist, com_floor)
    moments = np.abs(vec6_from_sym(i_c)) + np.trace(i_c) / 6 + m * dist ** 2 + 2 * m * dist * scale
    return relative * np.concatenate([[m], m * np.sqrt(c ** 2 + scale ** 2), moments])


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

    def in_motion(q: np.ndarray, dq: np.ndarray, ddq: np.ndarray) -> np.ndarray:
        return model.regressor(dyn, q, dq, ddq)

    cov = np.asarray(model.covariance, float)
    return ModelUncertainty(regressor, 0.5 * (cov + cov.T), _offsets(offset_std, n),
                            f"identified model {label} (its coefficient covariance)",
                            None if model.kind == "gravity" else in_motion)


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


def motion_error_rows(unc: ModelUncertainty, q: np.ndarray, dq: np.ndarray, ddq: np.ndarray) -> np.ndarray:
    """Stacked [R(q_k, dq_k, ddq_k) | I_n] (N n x (p + n)): the model error's rows over a motion's
    samples (N, n each), the last n columns the constant offsets. A gravity-only model (no
    ``motion_regressor``) contributes its error at rest, a lower bound of its error in motion."""
    q = np.atleast_2d(np.asarray(q, float))
    if unc.motion_regressor is not None:
        r = unc.motion_regressor(q, np.atleast_2d(dq), np.atleast_2d(ddq))
    else:
        r = np.vstack([unc.regressor(qk) for qk in q])
    return np.hstack([r, np.tile(np.eye(q.shape[1]), (q.shape[0], 1))])


def propagated_covariance(y: np.ndarray, w: np.ndarray, rows: np.ndarray, unc: ModelUncertainty) -> np.ndarray:
    """Covariance (k x k) the model error adds to the weighted least-squares fit ``rhs ~ y p`` (rows
    weighted ``w``) when ``rhs`` carries ``rows`` δ (rows from :func:`motion_error_rows`; zero rows
    where the reference was measured): S blockdiag(Σ, σ_o²) Sᵀ, S = (yᵀ W y)⁻¹ yᵀ W rows."""
    yw = y * w[:, None]
    sens = np.linalg.solve(y.T @ yw, yw.T @ rows)
    p = unc.covariance.shape[0]
    k = sens[:, :p]
    o = sens[:, p:]
    cov = k @ unc.covariance @ k.T + (o * unc.offset_std ** 2) @ o.T
    return 0.5 * (cov + cov.T)


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
           "COM_FLOOR", "declared_link_std", "motion_error_rows", "propagated_covariance"]
