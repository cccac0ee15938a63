"""The payload estimator's static fit as the node runs it: method choice, noise, model uncertainty, checks.

One call from loaded captures (and the unloaded ones taken before the grasp) to an estimate whose σ
covers noise *and* the unloaded model's error (:mod:`.model_uncertainty`), plus the verdict whether
that σ is small enough for its use. ``payload_estimator`` and ``sampling.bare_run`` (benches) both call
:func:`estimate_payload_static`, so a bench measures what the node does.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from ..identification.identified_model import IdentificationError, IdentifiedModel
from ..model.description import require_masses
from ..model.dynamics import RigidBodyDynamics
from .estimate import PayloadEstimate
from .gravity import (
    CAPTURE_ACCELERATION_STD,
    PayloadDataError,
    PayloadLimits,
    estimate_payload_anchored,
    estimate_payload_gravity,
)
from .model_uncertainty import DATASHEET_RELATIVE, ModelUncertainty, declared_uncertainty, identified_uncertainty

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
    estimate less precise than these is flagged (:func:`precision_problem`); ``capture_acceleration_std`` rad/s²:
    the residual motion a settled capture may carry, its torque in σ (:data:`.gravity.CAPTURE_ACCELERATION_STD`);
    ``misfit_chi2``: the fit's χ²/ν above which σ is widened and the estimate says the poses have torque the model
    does not explain (:mod:`..signals.misfit`; None: the χ² that fitting data exceed once in 1000; inf: never)."""

    method: str = "auto"
    torque_noise: float = 0.05
    model_uncertainty: float = DATASHEET_RELATIVE
    torque_offset_std: float = 0.5
    max_mass_std: float = 0.1
    max_com_std: float = 0.02
    limits: PayloadLimits = PayloadLimits()
    capture_acceleration_std: float = CAPTURE_ACCELERATION_STD
    misfit_chi2: float | None = None


@dataclass(frozen=True)
class UnloadedModel:
    """An identified unloaded model in place of the nominal description: its torque at rest
    ``gravity(q)`` (N m of q rad, sensor offsets included when it fitted them), its error
    (``uncertainty``, from its coefficient covariance) and ``source`` (path, for status)."""

    gravity: Callable[[np.ndarray], np.ndarray]
    uncertainty: ModelUncertainty
    source: str
    offsets: bool


def load_unloaded_model(dyn: RigidBodyDynamics, path: str | Path) -> UnloadedModel:
    """The PARAMS.yaml at ``path`` (``identify --gravity-only`` or a full model) for ``dyn``'s robot.

    Raises :class:`~.identified_model.IdentificationError` with the reason (missing or malformed file,
    another robot, another joint layout)."""
    p = Path(path).expanduser()
    if not p.is_file():
        raise IdentificationError(f"gravity model file {p} does not exist")
    model = IdentifiedModel.load(p)
    return unloaded_model(dyn, model, p.name, str(p))


def unloaded_model(dyn: RigidBodyDynamics, model: IdentifiedModel, label: str, source: str = "") -> UnloadedModel:
    """An identified model (in memory) as the unloaded model of ``dyn``'s robot; ``label`` names it in
    σ's note, ``source`` in the status (default: the label). Raises IdentificationError for another robot."""
    model.check_robot(dyn.desc)
    zero = np.zeros((1, dyn.n))

    def gravity(q: np.ndarray) -> np.ndarray:
        q = np.asarray(q, float)[None]
        return model.predict(dyn, q)[0] if model.kind == "gravity" else model.predict(dyn, q, zero, zero)[0]

    return UnloadedModel(gravity, identified_uncertainty(dyn, model, label), source or label, bool(model.offset))


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


def estimate_payload_static(dyn: RigidBodyDynamics, q: np.ndarray, tau: np.ndarray, q_unloaded: np.ndarray | None,
                       tau_unloaded: np.ndarray | None, config: StaticFitConfig,
                       model: UnloadedModel | None = None) -> PayloadEstimate:
    """Payload (mass, CoM) from loaded static captures q, tau (N, n) rad/N m and unloaded ones (K, n) or None.

    ``model``: an identified unloaded model (:func:`load_unloaded_model`) in place of the nominal
    description and its declared uncertainty (``config.model_uncertainty``); sensor offsets it did not
    fit are declared by ``config.torque_offset_std``. Raises :class:`PayloadDataError` (e.g.
    differential without unloaded captures) and the estimators' errors; a σ above the config's limits
    is not an error (see :func:`precision_problem`).
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
    offsets = 0.0 if anchored else cfg.torque_offset_std  # anchoring cancels them
    if model is None:
        unc, gravity = declared_uncertainty(dyn, cfg.model_uncertainty, offsets), None
    else:
        unc = model.uncertainty if model.offsets else replace(model.uncertainty,
                                                               offset_std=np.full(dyn.n, float(offsets)))
        gravity = model.gravity
    fit = dict(acceleration_std=cfg.capture_acceleration_std, misfit_chi2=cfg.misfit_chi2)
    if anchored:
        return estimate_payload_anchored(dyn, q, tau, q_unloaded, tau_unloaded, weights=weights, limits=cfg.limits,
                                         model_uncertainty=unc, unloaded_gravity=gravity, **fit)
    if model is None:
        require_masses(dyn.desc, "a one-shot payload estimate against the robot description (no unloaded captures)")
    est = estimate_payload_gravity(dyn, q, tau, None, "one-shot", weights=weights, limits=cfg.limits,
                                   model_uncertainty=unc, unloaded_gravity=gravity, **fit)
    return replace(est, notes=est.notes + (NO_REFERENCE_NOTE,)) if cfg.method == "auto" and model is None else est


__all__ = ["StaticFitConfig", "UnloadedModel", "estimate_payload_static", "load_unloaded_model", "precision_problem",
           "unloaded_model", "STATIC_METHODS", "NO_REFERENCE_NOTE"]
