"""The payload estimator's static fit as the node runs it: method choice, noise, model uncertainty, checks.

One call from loaded captures (and the unloaded ones taken before the grasp) to an estimate whose σ
covers noise *and* the unloaded model's error (:mod:`.model_uncertainty`), plus the verdict whether
that σ is small enough for its use. ``payload_estimator`` and ``motion.bare_run`` (benches) both call
:func:`fit_static_payload`, so a bench measures what the node does.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from ..model.dynamics import RigidBodyDynamics
from .estimate import PayloadEstimate
from .model_uncertainty import DATASHEET_RELATIVE, ModelUncertainty, declared_uncertainty
from .payload import PayloadDataError, PayloadLimits, estimate_payload_anchored, estimate_payload_gravity

# auto: anchored on the unloaded captures when there are any, else one-shot against the model.
STATIC_METHODS = ("auto", "one-shot", "differential")
NO_REFERENCE_NOTE = ("no unloaded reference: one-shot against the model (call payload_estimator/capture_unloaded "
                     "at the pick configuration before the grasp for the differential method, typically 10-20x "
                     "smaller σ; docs/bench/uncertainty.md)")


@dataclass(frozen=True)
class StaticFitConfig:
    """``method`` (one of STATIC_METHODS); ``torque_noise`` N m, std of a static mean torque;
    ``model_uncertainty`` relative 1-σ error of the nominal link masses/CoMs; ``torque_offset_std`` N m,
    sensor offsets the model lacks (one-shot only); ``max_mass_std`` kg and ``max_com_std`` m: an
    estimate less precise than these is flagged (:func:`precision_problem`)."""

    method: str = "auto"
    torque_noise: float = 0.05
    model_uncertainty: float = DATASHEET_RELATIVE
    torque_offset_std: float = 0.5
    max_mass_std: float = 0.1
    max_com_std: float = 0.02
    limits: PayloadLimits = PayloadLimits()


def precision_problem(est: PayloadEstimate, max_mass_std: float, max_com_std: float) -> str:
    """'' if the estimate's 1-σ mass and CoM uncertainties are within the limits (kg, m), else why not."""
    s = est.std or {}
    out = []
    sm = s.get("mass", float("nan"))
    if not sm <= max_mass_std:
        out.append(f"mass σ {sm:.3g} kg > max_mass_std {max_mass_std:g} kg")
    sc = max((s.get(k, 0.0) for k in ("cx", "cy", "cz")), default=0.0)
    if est.mass > 0 and not sc <= max_com_std:
        out.append(f"CoM σ {1e3 * sc:.3g} mm > max_com_std {1e3 * max_com_std:g} mm")
    return "; ".join(out)


def fit_static_payload(dyn: RigidBodyDynamics, q: np.ndarray, tau: np.ndarray, q_unloaded: np.ndarray | None,
                       tau_unloaded: np.ndarray | None, config: StaticFitConfig,
                       uncertainty: ModelUncertainty | None = None) -> PayloadEstimate:
    """Payload (mass, CoM) from loaded static captures q, tau (N, n) rad/N m and unloaded ones (K, n) or None.

    ``uncertainty``: the unloaded model's (default: :func:`declared_uncertainty` from ``config``).
    Raises :class:`PayloadDataError` (e.g. differential without unloaded captures) and the estimators'
    errors; a σ above the config's limits is not an error (see :func:`precision_problem`).
    """
    cfg = config
    if cfg.method not in STATIC_METHODS:
        raise PayloadDataError(f"method must be one of {STATIC_METHODS}, got {cfg.method!r}")
    have_ref = q_unloaded is not None and len(q_unloaded) > 0
    if cfg.method == "differential" and not have_ref:
        raise PayloadDataError("method differential needs an unloaded capture at the pick configuration "
                               "(call ~/capture_unloaded before grasping)")
    if not (np.isfinite(cfg.torque_noise) and cfg.torque_noise > 0):
        raise PayloadDataError(f"torque_noise must be > 0 N m, got {cfg.torque_noise}")
    weights = np.full(dyn.n, 1.0 / cfg.torque_noise ** 2)
    anchored = cfg.method == "differential" or (cfg.method == "auto" and have_ref)
    if uncertainty is None:
        uncertainty = declared_uncertainty(dyn, cfg.model_uncertainty, 0.0 if anchored else cfg.torque_offset_std)
    if anchored:
        return estimate_payload_anchored(dyn, q, tau, q_unloaded, tau_unloaded, weights=weights, limits=cfg.limits,
                                         model_uncertainty=uncertainty)
    est = estimate_payload_gravity(dyn, q, tau, None, "one-shot", weights=weights, limits=cfg.limits,
                                   model_uncertainty=uncertainty)
    return replace(est, notes=est.notes + (NO_REFERENCE_NOTE,)) if cfg.method == "auto" else est


__all__ = ["StaticFitConfig", "fit_static_payload", "precision_problem", "STATIC_METHODS", "NO_REFERENCE_NOTE"]
