"""The payload from recordings as they are: a loaded run against an unloaded run of the same motion, or
against a torque model (an identified one with its friction), static captures or any motion.

* :func:`torque_gains` / :func:`apply_torque_gain` -- drives that report motor current: tau = G i
  per joint (N m per unit), applied on load (and by the estimator node);
* :func:`find_time_shift` / :func:`align_recordings` -- two recordings of one motion with different
  start times, lengths, rates and stamp jitter: the time shift that minimises the mean squared
  joint-position difference over their overlap (every lag at once by FFT cross-correlation, then a
  parabolic and a continuous refinement), the common span resampled to one grid, and the residual
  position mismatch; a mismatch too large is not the same motion and is refused;
* :func:`estimate_payload_recordings` -- static captures (gravity: mass and CoM) or a motion
  (positions low-passed and differentiated by :func:`.preprocessing.preprocess_filtered`; mass, CoM
  and, where the motion determines it, the inertia: :func:`.payload_motion.estimate_payload_motion`).

Time convention: ``shift`` is what is added to the unloaded recording's stamps to put the same point
of the motion at the loaded recording's stamp (loaded clock).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from ..model.dynamics import RigidBodyDynamics
from ..signals.alignment import MAX_MISMATCH, MIN_OVERLAP, Alignment, AlignmentError, align_recordings
from ..signals.preprocessing import Preprocessed, preprocess_filtered
from ..signals.resample import MAX_GAP, stamp_report
from ..signals.samples import (
    STREAM_MAX_STEP,
    SampleDataError,
    Samples,
    near_zero_velocity_mask,
    position_speeds,
    require_static,
)
from .estimate import PayloadEstimate
from .gravity import PayloadLimits, estimate_payload_gravity
from .model_uncertainty import DATASHEET_RELATIVE, ModelUncertainty, declared_uncertainty, identified_uncertainty
from .motion import INERTIA_RSD, estimate_payload_motion

CURRENT_WARNING = (
    "torques computed from motor currents (--torque-gain / torque_gain) include the drive's friction, and "
    "gear friction grows with the load: against a model or the nominal description the payload then absorbs "
    "the change; an unloaded recording of the same motion (differential) cancels the unloaded part only")
"""Printed whenever a torque gain is applied."""

"""rad: largest RMS joint-position difference of two aligned recordings that still counts as one motion."""
"""Fraction of the shorter recording that two aligned recordings must share."""
"""Hz: the coarse shift search runs at most at this rate (refined continuously afterwards)."""
COULOMB_MIN_SPEED = 0.02
"""rad/s: joint rows slower than this get no weight against a model with Coulomb friction (sign(dq)
is unreliable there), as in identification."""


# ------------------------------------------------------------------------------------ torque gain


# -------------------------------------------------------------------------------------- alignment


# ------------------------------------------------------------------------------- the whole estimate

@dataclass(frozen=True)
class PayloadOptions:
    """How recordings become a payload estimate.

    ``cutoff`` Hz / ``order``: zero-phase Butterworth low-pass of q and tau before differentiation
    (motions); ``velocity``: "auto" (recorded dq when present), "positions" or "recorded";
    ``rate``/``max_gap``: resampling (Hz, s); ``max_speed`` rad/s: a recording whose joints all stay
    slower counts as static captures; ``motion``: treat it as a motion regardless; ``max_mismatch``
    rad / ``min_overlap``: alignment limits; ``transport``: move the unloaded torque to the loaded run's
    states with the robot model (first-order correction of the residual tracking difference);
    ``offsets``: fit joint-torque offsets (static one-shot only); ``inertia_rsd``: see
    :data:`.payload_motion.INERTIA_RSD`; ``limits``: plausibility limits. Static captures against a model:
    its error enters σ (:mod:`.model_uncertainty`): an identified model's covariance, else the nominal
    description's declared ``model_uncertainty`` (relative, 1 σ) and ``torque_offset_std`` (N m).
    """

    cutoff: float = 6.0
    order: int = 4
    velocity: str = "auto"
    rate: float | None = None
    max_gap: float = MAX_GAP
    max_speed: float = 0.02
    motion: bool = False
    max_mismatch: float = MAX_MISMATCH
    min_overlap: float = MIN_OVERLAP
    transport: bool = True
    offsets: bool = False
    inertia_rsd: float = INERTIA_RSD
    limits: PayloadLimits = field(default_factory=PayloadLimits)
    model_uncertainty: float = DATASHEET_RELATIVE
    torque_offset_std: float = 0.5


@dataclass(frozen=True)
class PayloadResult:
    """An estimate and how it was obtained: ``kind`` "static" or "motion"; ``reference`` what the
    unloaded torque came from; ``lines`` what was done, in words; ``alignment`` of two runs, if any."""

    estimate: PayloadEstimate
    kind: str
    reference: str
    lines: tuple[str, ...] = ()
    alignment: Alignment | None = None

    def to_dict(self) -> dict:
        d = self.estimate.to_dict()
        d["kind"] = self.kind
        d["reference"] = self.reference
        d["processing"] = list(self.lines)
        d["alignment"] = None if self.alignment is None else self.alignment.to_dict()
        return d


def is_motion(samples: Samples, max_speed: float) -> bool:
    """True when ``samples`` are a stream (time stamps, or dq and ddq columns) in which some joint moves
    faster than ``max_speed`` rad/s (recorded dq, else positions over time stamps); captures without time
    stamps are static captures (a moving one is refused as such)."""
    if samples.t is None and samples.ddq is None:
        return False
    if samples.dq is not None:
        return bool(np.any(np.abs(samples.dq) > max_speed))
    if samples.t is None:
        return False
    return bool(np.any(position_speeds(samples)[0] > max_speed))


def _stream(samples: Samples) -> bool:
    """Time-stamped samples logged as a stream (median step below data.STREAM_MAX_STEP), not captures."""
    return samples.t is not None and samples.n_samples >= 4 and stamp_report(samples.t).median_step <= STREAM_MAX_STEP


def _model_reference(model, dyn: RigidBodyDynamics, q, dq=None, ddq=None) -> np.ndarray:
    if getattr(model, "kind", "full") == "gravity":
        if dq is not None and np.any(np.abs(dq) > 0):
            raise SampleDataError("a gravity-only model (identify --gravity-only) cannot predict the torques of a "
                                  "motion: give static captures, or a model identified from a motion")
        return np.asarray(model.predict(dyn, q), float)
    z = np.zeros_like(q)
    return np.asarray(model.predict(dyn, q, z if dq is None else dq, z if ddq is None else ddq), float)


def _coulomb_weights(model, dq: np.ndarray) -> np.ndarray | None:
    """Zero weight on joint rows slower than COULOMB_MIN_SPEED when the model has Coulomb friction."""
    coulomb = False
    if hasattr(model, "friction_terms"):
        coulomb = bool(getattr(model, "coulomb", False))
    elif hasattr(model, "friction"):
        coulomb = bool(np.any(np.asarray(model.friction.coulomb) != 0))
    if not coulomb:
        return None
    return np.where(near_zero_velocity_mask(dq, COULOMB_MIN_SPEED), 0.0, 1.0)


def _inverse_dynamics(dyn: RigidBodyDynamics, pre: Preprocessed) -> np.ndarray:
    return np.array([dyn.inverse_dynamics(a, b, c) for a, b, c in zip(pre.q, pre.dq, pre.ddq)])


def _preprocess(samples: Samples, opt: PayloadOptions, rate: float | None = None) -> Preprocessed:
    velocity = opt.velocity if samples.dq is not None or opt.velocity != "auto" else "positions"
    return preprocess_filtered(samples, opt.cutoff, opt.order, velocity, rate if rate is not None else opt.rate,
                               opt.max_gap)


def estimate_payload_recordings(dyn: RigidBodyDynamics, loaded: Samples, unloaded: Samples | None = None,
                                model=None, options: PayloadOptions | None = None,
                                model_label: str = "model") -> PayloadResult:
    """Payload from a loaded recording and one reference: an ``unloaded`` recording of the same poses
    or motion (differential), a torque ``model`` with its friction and offsets (anything with
    ``predict(dyn, q, dq, ddq)``, e.g. :func:`.torque_models.load_torque_model`), or neither (the
    nominal description of ``dyn``, one-shot).

    Static captures (no joint faster than ``options.max_speed``) give mass and CoM from gravity; a
    motion gives mass, CoM and, where determined, the inertia (:func:`.payload_motion.estimate_payload_motion`):
    two runs are aligned first (:func:`align_recordings`), velocities and accelerations derived when
    not recorded. Errors are exceptions naming what to do.
    """
    opt = options if options is not None else PayloadOptions()
    if unloaded is not None and model is not None:
        raise SampleDataError("give either an unloaded recording or a model as the reference, not both")
    ref = "unloaded recording" if unloaded is not None else (model_label if model is not None else "nominal model")
    moving = opt.motion or is_motion(loaded, opt.max_speed) or (unloaded is not None
                                                                and is_motion(unloaded, opt.max_speed))
    if not moving and unloaded is not None and unloaded.n_samples != loaded.n_samples and _stream(loaded) \
            and _stream(unloaded):
        moving = True  # two logged streams of different length cannot be paired row by row: align them in time
    if not moving:
        return _static(dyn, loaded, unloaded, model, opt, ref)
    if opt.offsets:
        raise SampleDataError("--offsets applies to static captures; in a motion, offsets cancel against an unloaded "
                              "run or come with the model (identify --friction ...+offset)")
    lines: list[str] = []
    alignment = None
    if loaded.t is None:
        if loaded.dq is None or loaded.ddq is None:
            raise SampleDataError("a motion needs time stamps (CSV column 't' or the bag's stamps) to derive "
                                  "velocities and accelerations, or dq1.., ddq1.. columns")
        q, dq, ddq, tau = loaded.q, loaded.dq, loaded.ddq, loaded.tau
        lines.append(f"{loaded.n_samples} samples with recorded dq and ddq, used as they are (no time stamps)")
        if unloaded is not None:
            if unloaded.n_samples != loaded.n_samples or unloaded.dq is None or unloaded.ddq is None:
                raise SampleDataError("without time stamps the unloaded samples must match the loaded ones row by "
                                      "row (same count, with dq and ddq columns)")
            reference = unloaded.tau
        elif model is not None:
            reference = _model_reference(model, dyn, q, dq, ddq)
        else:
            reference = np.array([dyn.inverse_dynamics(a, b, c) for a, b, c in zip(q, dq, ddq)])
        weights = _coulomb_weights(model, dq) if model is not None else None
    elif unloaded is not None:
        alignment = align_recordings(loaded, unloaded, opt.rate, opt.max_gap, opt.max_mismatch, opt.min_overlap)
        lines.append(alignment.describe())
        pre_l = _preprocess(alignment.loaded, opt, alignment.rate)
        pre_u = _preprocess(alignment.unloaded, opt, alignment.rate)
        if pre_l.t.shape != pre_u.t.shape or not np.allclose(pre_l.t, pre_u.t, atol=1e-9):
            raise AlignmentError("the aligned recordings were filtered onto different grids (internal error)")
        lines.append("preprocessing (both runs alike): " + pre_l.describe())
        q, dq, ddq, tau = pre_l.q, pre_l.dq, pre_l.ddq, pre_l.tau
        reference = pre_u.tau
        if opt.transport:
            reference = reference + _inverse_dynamics(dyn, pre_l) - _inverse_dynamics(dyn, pre_u)
            lines.append("unloaded torque moved to the loaded run's q, dq, ddq with the robot model "
                         "(first-order correction of the remaining tracking difference)")
        weights = None
    else:
        pre = _preprocess(loaded, opt)
        lines.append("preprocessing: " + pre.describe())
        q, dq, ddq, tau = pre.q, pre.dq, pre.ddq, pre.tau
        if model is not None:
            reference = _model_reference(model, dyn, q, dq, ddq)
            weights = _coulomb_weights(model, dq)
            lines.append(f"unloaded torque predicted by {model_label} (rigid body, friction and offsets)"
                         + ("; joint rows slower than 0.02 rad/s left out (Coulomb friction)"
                            if weights is not None else ""))
        else:
            reference = _inverse_dynamics(dyn, pre)
            weights = None
            lines.append("unloaded torque from the nominal description (no friction): use an unloaded recording "
                         "or --model for real drives")
    how = "differential" if unloaded is not None else ("model" if model is not None else "one-shot")
    unc = None if unloaded is not None else _reference_uncertainty(dyn, model, opt, ref)
    est = estimate_payload_motion(dyn, q, dq, ddq, tau - reference, weights=weights, method=f"motion {how}",
                                  limits=opt.limits, inertia_rsd=opt.inertia_rsd, model_uncertainty=unc)
    return PayloadResult(est, "motion", ref, tuple(lines), alignment)


def _reference_uncertainty(dyn: RigidBodyDynamics, model, opt: PayloadOptions, label: str) -> ModelUncertainty:
    """How wrong the reference model may be: an identified model's covariance, else the nominal
    description's declared ``opt.model_uncertainty``; offsets the model did not fit (and the fit does
    not estimate) are declared as ``opt.torque_offset_std``."""
    fitted = opt.offsets or bool(getattr(model, "offset", False))
    offsets = 0.0 if fitted else opt.torque_offset_std
    if model is not None and getattr(model, "covariance", None) is not None:
        return identified_uncertainty(dyn, model, label, offsets)
    return declared_uncertainty(dyn, opt.model_uncertainty, offsets)


def _static(dyn, loaded: Samples, unloaded: Samples | None, model, opt: PayloadOptions, ref: str) -> PayloadResult:
    require_static(loaded, opt.max_speed)
    if unloaded is not None:
        require_static(unloaded, opt.max_speed)
    lines = [f"static captures: every joint slower than {opt.max_speed:g} rad/s in {loaded.n_samples} samples"]
    if unloaded is not None:
        if unloaded.n_samples != loaded.n_samples:
            raise SampleDataError(
                f"static captures: {unloaded.n_samples} unloaded samples for {loaded.n_samples} loaded ones; the "
                "differential method compares the same poses row by row -- capture the unloaded arm at the same "
                "poses in the same order, or record both runs as one motion (they are then aligned in time)")
        gap = float(np.abs(unloaded.q - loaded.q).max())
        if gap > 1e-2:
            raise SampleDataError(f"static captures: unloaded poses differ from the loaded ones by up to {gap:.3g} "
                                  "rad; capture both at the same poses in the same order")
        est = estimate_payload_gravity(dyn, loaded.q, loaded.tau, unloaded.tau, limits=opt.limits)
    elif model is not None:
        # the model's prediction at rest plays the part of the measured unloaded torque
        unc = _reference_uncertainty(dyn, model, opt, ref)
        est = estimate_payload_gravity(dyn, loaded.q, loaded.tau, None, "one-shot", estimate_offsets=opt.offsets,
                                       limits=opt.limits, model_uncertainty=unc,
                                       unloaded_gravity=lambda qk: _model_reference(model, dyn, qk[None])[0])
        est = replace(est, method=est.method.replace("one-shot", "against the model"))
        lines.append(f"unloaded torque at rest predicted by {ref} (gravity and offsets)")
    else:
        unc = _reference_uncertainty(dyn, None, opt, ref)
        est = estimate_payload_gravity(dyn, loaded.q, loaded.tau, None, estimate_offsets=opt.offsets,
                                       limits=opt.limits, model_uncertainty=unc)
    return PayloadResult(est, "static", ref, tuple(lines))


__all__ = ["CURRENT_WARNING", "PayloadOptions", "PayloadResult", "estimate_payload_recordings", "is_motion"]
