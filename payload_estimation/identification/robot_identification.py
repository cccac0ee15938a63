"""Identification of the unloaded robot from recorded motion (paper 003 Sec. II, paper 001).

1. preprocessing (:mod:`.preprocessing`): a periodic excitation is period-averaged and
   differentiated in the DFT domain; any other recording is made uniform, low-passed (zero phase)
   and differentiated by central differences;
2. base regressor Y_b plus the friction terms (viscous, Coulomb, constant offset per joint --
   chosen from the data's residual with ``friction="auto"``), least squares with RSD (eq. 7),
   optional essential parameters (iterative RSD elimination);
3. validation: per-joint RMS torque error on other recordings (:func:`validate_model`), with the
   compared torques kept so that they can be plotted and written out.

The gravity-only variant fits pi_g = K_g p_g from static samples (:func:`identify_gravity`).
Results are :class:`~.identified_model.IdentifiedModel` records, saved/loaded as PARAMS.yaml.
"""

from __future__ import annotations

import itertools
import logging
from dataclasses import dataclass, replace

import numpy as np

from ..model.base_parameters import BaseParameters, compute_base_parameters
from ..model.description import RobotDescription
from ..model.dynamics import RigidBodyDynamics
from ..model.parameters import N_GRAVITY_PARAMS
from ..signals.preprocessing import (
    Preprocessed,
    PreprocessingError,
    align_to_trajectory,
    periodic_rate,
    preprocess_filtered,
    preprocess_periodic,
    uniform_recording,
)
from ..signals.resample import MAX_GAP
from ..signals.samples import Samples
from .identified_model import IdentificationError, IdentifiedModel, base_regressor_rows, standard_parameter_names
from .least_squares import (
    FRICTION_TERMS,
    LSResult,
    RankDeficientError,
    TorqueError,
    essential_parameters,
    friction_names,
    friction_regressor,
    solve_least_squares,
    torque_error,
)

log = logging.getLogger(__name__)


# --- friction models -------------------------------------------------------------------------------

def friction_terms(spec: bool | str) -> tuple[bool, bool, bool]:
    """(viscous, coulomb, offset) of a friction spec: False/"none", True (viscous + Coulomb), or
    terms joined by '+' ("viscous", "coulomb", "offset", e.g. "viscous+coulomb+offset")."""
    if spec is True:
        return True, True, False
    if spec is False or spec in ("none", "", None):
        return False, False, False
    parts = [p.strip() for p in str(spec).split("+")]
    bad = [p for p in parts if p not in FRICTION_TERMS]
    if bad:
        raise IdentificationError(f"unknown friction term(s) {', '.join(bad)}: use 'none', 'auto' or terms of "
                                  f"{', '.join(FRICTION_TERMS)} joined by '+'")
    return tuple(t in parts for t in FRICTION_TERMS)  # type: ignore[return-value]


def friction_label(terms: tuple[bool, bool, bool]) -> str:
    """'viscous+coulomb+offset', or 'none'."""
    return "+".join(t for t, on in zip(FRICTION_TERMS, terms) if on) or "none"


@dataclass(frozen=True)
class FrictionCandidate:
    """One friction model tried by ``friction="auto"``: its fit residual and Bayesian information
    criterion BIC = N ln(RSS / N) + k ln N on the same rows (lower is better); not ``admissible``
    when its friction comes out significantly non-dissipative (:func:`_choose_friction`)."""

    terms: tuple[bool, bool, bool]
    columns: int
    residual_rms: float
    bic: float
    admissible: bool = True

    @property
    def label(self) -> str:
        return friction_label(self.terms)


# --- identification -------------------------------------------------------------------------------

@dataclass(frozen=True)
class IdentificationOptions:
    """Options of :func:`identify_robot`.

    ``friction``: the friction terms per joint (:func:`friction_terms`; True = viscous + Coulomb),
    or "auto": every combination of viscous, Coulomb and offset is fitted and the one with the
    lowest BIC on the same rows is kept (the candidates are in the model's ``info``). Link-side
    torque sensors still see the friction of the joint's own output bearing and seals; motor-current
    torques see all of it. ``essential``: drop poorly identified coefficients (|pi| < ``min_abs``
    and RSD > ``max_rsd`` %). ``decimate``: use every k-th preprocessed sample for the regression;
    ``None`` picks k = fs / (4 torque_cutoff) so that the rows are about as many as the low-passed
    data have independent samples. Filtering makes neighbouring residuals correlated; keeping every
    row would understate std and RSD (eq. 7 assumes independent errors) by about sqrt(k) while
    barely changing the estimate. ``velocity``: "positions", "recorded" or "auto"
    (:func:`preprocessing.preprocess_filtered`); ``rate`` (Hz) and ``max_gap`` (s): resampling of
    irregular recordings (:func:`recording.resample`).
    """

    friction: bool | str = False
    essential: bool = False
    min_abs: float = 0.01
    max_rsd: float = 40.0
    torque_cutoff: float = 6.0
    filter_order: int = 4
    skip_periods: int = 0
    decimate: int | None = None
    min_coulomb_speed: float = 0.02
    velocity: str = "positions"
    rate: float | None = None
    max_gap: float = MAX_GAP


def _base_names(base: BaseParameters, n: int) -> tuple[str, ...]:
    std = standard_parameter_names(n, base.kind)
    return tuple(f"{std[i]}R" if np.count_nonzero(base.K[r]) > 1 else std[i]
                 for r, i in enumerate(base.independent))


def _decimation(data: Preprocessed, options: IdentificationOptions) -> int:
    step = options.decimate
    if step is None:
        step = max(1, int(data.fs / (4.0 * options.torque_cutoff))) if data.fs > 0 else 1
        step = max(1, min(step, data.q.shape[0] // 100))  # keep at least ~100 samples
    return max(1, int(step))


def _check_motion(data: Preprocessed) -> None:
    """User words for data that cannot identify dynamics: an arm at rest."""
    rms_speed = np.sqrt(np.mean(data.dq ** 2, axis=0))
    if rms_speed.max() < 1e-2:
        raise IdentificationError(
            f"the arm hardly moves in this recording (fastest joint: RMS speed {rms_speed.max():.2g} rad/s): "
            "identifying the dynamics needs an excitation motion (see `payload-estimation excite`); "
            "for a recording of static poses use --gravity-only")


def _fit(y, t, names, weights, options: IdentificationOptions):
    try:
        if options.essential:
            return essential_parameters(y, t, names, min_abs=options.min_abs, max_rsd=options.max_rsd,
                                        weights=weights)
        return np.arange(len(names)), solve_least_squares(y, t, weights=weights, names=names)
    except RankDeficientError as exc:
        raise IdentificationError(
            f"the motion does not determine every coefficient ({', '.join(exc.columns[:8])}"
            f"{' ...' if len(exc.columns) > 8 else ''}): record a richer motion (an `excite` trajectory) "
            "or keep only the determined ones with --essential") from exc


def fit_coefficients(desc: RobotDescription, data: Preprocessed,
                     options: IdentificationOptions = IdentificationOptions(), base: BaseParameters | None = None,
                     dyn: RigidBodyDynamics | None = None) -> IdentifiedModel:
    """Least squares (+ friction choice, + essential parameters) of the base coefficients from
    preprocessed data."""
    dyn = dyn or RigidBodyDynamics(desc)
    base = base or compute_base_parameters(dyn)
    _check_motion(data)
    rows = regression_rows(dyn, base, data, options)
    candidates: list[FrictionCandidate] = []
    if options.friction == "auto":
        terms = _choose_friction(rows.y_b, rows.dq, rows.t, rows.slow, candidates)
    else:
        terms = friction_terms(options.friction)
    info = {"method": data.method, "periods": data.periods, "fs": data.fs, "samples": int(rows.dq.shape[0]),
            "decimate": int(rows.step), "essential": bool(options.essential), "velocity": data.velocity,
            "friction": friction_label(terms)}
    if data.cutoff:
        info["cutoff_hz"] = float(data.cutoff)
    if candidates:
        info["friction_candidates"] = [{"terms": c.label, "residual_rms": c.residual_rms, "bic": c.bic,
                                        "admissible": c.admissible} for c in candidates]
    return fit_rows(desc, base, rows, terms, options, info)


@dataclass(frozen=True)
class RegressionRows:
    """The regression of one preprocessed recording: every ``step``-th sample's base regressor ``y_b``
    (N n x r), velocities ``dq`` (N x n, rad/s), stacked torques ``t`` (N n, N m) and ``slow`` rows
    (|dq| below the Coulomb speed: no weight when Coulomb friction is fitted; None: none are)."""

    y_b: np.ndarray
    dq: np.ndarray
    t: np.ndarray
    slow: np.ndarray | None
    step: int = 1

    def subset(self, samples: np.ndarray) -> RegressionRows:
        """The rows of the samples ``samples`` (indices or a mask over the N samples)."""
        n = self.dq.shape[1]
        idx = np.flatnonzero(np.asarray(samples)) if np.asarray(samples).dtype == bool else np.asarray(samples)
        r = (idx[:, None] * n + np.arange(n)).reshape(-1)
        return RegressionRows(self.y_b[r], self.dq[idx], self.t[r], None if self.slow is None else self.slow[r],
                              self.step)

    def regressor(self, terms: tuple[bool, bool, bool]) -> np.ndarray:
        """Base regressor with the columns of the friction ``terms``."""
        return np.hstack([self.y_b, friction_regressor(self.dq, *terms)])


def regression_rows(dyn: RigidBodyDynamics, base: BaseParameters, data: Preprocessed,
                    options: IdentificationOptions) -> RegressionRows:
    """The decimated regression rows of ``data`` (:class:`IdentificationOptions` ``decimate``)."""
    step = _decimation(data, options)
    sl = slice(None, None, step)
    dq = data.dq[sl]
    y_b = base_regressor_rows(dyn, base.selection, data.q[sl], dq, data.ddq[sl])
    slow = (np.abs(dq) < options.min_coulomb_speed).reshape(-1) if options.min_coulomb_speed > 0 else None
    return RegressionRows(y_b, dq, data.tau[sl].reshape(-1), slow, step)


def fit_rows(desc: RobotDescription, base: BaseParameters, rows: RegressionRows, terms: tuple[bool, bool, bool],
             options: IdentificationOptions, info: dict) -> IdentifiedModel:
    """Least squares (+ essential parameters) of the base coefficients and the friction ``terms``."""
    n = desc.n
    y = rows.regressor(terms)
    names = list(_base_names(base, n)) + list(friction_names(n, *terms))
    weights = None
    if terms[1] and rows.slow is not None:
        # Coulomb's sign(dq) is unreliable near zero speed: those rows get no weight.
        weights = (~rows.slow).astype(float)
    kept, res = _fit(y, rows.t, names, weights, options)
    return _model_from_fit(desc, base, kept, res, terms, y, rows.t, weights, info)


def _choose_friction(y_b, dq, t, slow, out: list) -> tuple[bool, bool, bool]:
    """Fit every combination of friction terms on the same rows (slow rows excluded, as Coulomb
    needs) and return the lowest-BIC admissible one; the candidates are appended to ``out``.

    A candidate whose friction is significantly non-dissipative -- the friction torque at the lowest
    or the highest recorded speed of a joint, Fc + Fv |dq|, below -3 std -- is not admissible: it
    fits model error, not friction (a saturating real friction may still give a slightly negative
    Fv next to a larger Fc)."""
    rows = ~slow if slow is not None else np.ones(t.size, bool)
    n_rows = int(rows.sum())
    n = dq.shape[1]
    r = y_b.shape[1]
    v_max = np.abs(dq).max(axis=0)
    for terms in itertools.product((False, True), repeat=3):
        y = np.hstack([y_b, friction_regressor(dq, *terms)])[rows]
        try:
            res = solve_least_squares(y, t[rows])
        except RankDeficientError:
            continue
        rss = res.residual_rms ** 2 * n_rows
        out.append(FrictionCandidate(terms, y.shape[1], res.residual_rms,
                                     n_rows * float(np.log(rss / n_rows)) + y.shape[1] * float(np.log(n_rows)),
                                     _dissipative(res, r, n, terms, v_max)))
    ok = [c for c in out if c.admissible]
    if not ok:
        raise IdentificationError("the motion does not determine the rigid-body coefficients with any friction "
                                  "model: record a richer motion (an `excite` trajectory)")
    best = min(ok, key=lambda c: c.bic)
    log.info("friction model: %s (BIC %.1f; %s)", best.label, best.bic,
             ", ".join(f"{c.label} {c.residual_rms:.4g} N m{'' if c.admissible else ' (negative friction)'}"
                       for c in out))
    return best.terms


def _dissipative(res: LSResult, r: int, n: int, terms, v_max: np.ndarray) -> bool:
    """Whether Fc_j + Fv_j |dq| >= -3 std at |dq| = 0+ and at each joint's highest speed."""
    viscous, coulomb, _ = terms
    if not (viscous or coulomb):
        return True
    iv = r + np.arange(n) if viscous else None
    ic = r + n * int(viscous) + np.arange(n) if coulomb else None
    for speed in (np.zeros(n), v_max):
        for j in range(n):
            a = np.zeros(res.params.size)
            if ic is not None:
                a[ic[j]] = 1.0
            if iv is not None:
                a[iv[j]] = speed[j]
            if not a.any():
                continue
            if a @ res.params < -3.0 * np.sqrt(max(a @ res.covariance @ a, 0.0)):
                return False
    return True


def _model_from_fit(desc, base, kept, res: LSResult, terms, y, t, weights, info) -> IdentifiedModel:
    resid = t - y[:, kept] @ res.params
    if weights is not None:
        resid = resid * np.sqrt(weights)
    n = desc.n
    per_joint = np.sqrt(np.mean(resid.reshape(-1, n) ** 2, axis=0))
    viscous, coulomb, offset = terms
    return IdentifiedModel(desc.name, base.kind, desc.joint_names, base.K, base.independent,
                           _base_names(base, n), viscous, coulomb, np.asarray(kept, int), res.params, res.std,
                           res.rsd, res.covariance, res.sigma2, res.n_rows, res.residual_rms, res.condition_number,
                           float(resid @ resid), per_joint, info, offset)


def preprocess(samples: Samples, options: IdentificationOptions = IdentificationOptions(),
               period: float | None = None, harmonics: int | None = None,
               q_desired_period: np.ndarray | None = None, start_index: int | None = None) -> Preprocessed:
    """The preprocessing :func:`identify_robot` applies (periodic with ``period``, else filtered); a
    recording it cannot use is an :class:`IdentificationError`."""
    try:
        return _preprocess(samples, options, period, harmonics, q_desired_period, start_index)
    except PreprocessingError as exc:
        raise IdentificationError(str(exc)) from exc


def _preprocess(samples: Samples, options: IdentificationOptions, period: float | None, harmonics: int | None,
                q_desired_period: np.ndarray | None, start_index: int | None) -> Preprocessed:
    if period is None:
        return preprocess_filtered(samples, options.torque_cutoff, options.filter_order, options.velocity,
                                   options.rate, options.max_gap)
    if harmonics is None:
        raise IdentificationError("periodic identification needs the number of excited harmonics")
    res = uniform_recording(samples)
    if res.resampled or len(res.segments) > 1:
        fs = periodic_rate(samples, period)
        res = uniform_recording(samples, fs, options.max_gap)
        if len(res.segments) > 1:
            raise IdentificationError(f"periodic processing needs one continuous recording: {res.describe()}")
        log.info("periodic recording: %s", res.describe())
        samples = res.segments[0]
    if start_index is None:
        start_index = 0 if q_desired_period is None else align_to_trajectory(samples, q_desired_period, res.rate)
    return preprocess_periodic(samples, period, harmonics, options.torque_cutoff, options.filter_order,
                               start_index, options.skip_periods)


def identify_robot(desc: RobotDescription, samples: Samples,
                   options: IdentificationOptions = IdentificationOptions(), period: float | None = None,
                   harmonics: int | None = None, q_desired_period: np.ndarray | None = None,
                   start_index: int | None = None) -> IdentifiedModel:
    """Identify the base coefficients of ``desc`` from a recording.

    With ``period`` (s) and ``harmonics`` (the excitation's L) the data are treated as periodic
    (alignment by ``q_desired_period`` -- one period of desired positions at the recording's rate --
    or ``start_index``); otherwise filtered numerical differentiation is used.
    """
    samples = samples.check_robot(desc)
    data = preprocess(samples, options, period, harmonics, q_desired_period, start_index)
    return fit_coefficients(desc, data, options)


def identify_gravity(desc: RobotDescription, samples: Samples, essential: bool = False, min_abs: float = 0.01,
                     max_rsd: float = 40.0, offset: bool = False) -> IdentifiedModel:
    """Gravity coefficients pi_g from static samples (one row block per sample; average each pose's
    window before, e.g. 500 random configurations as paper 001 does on the LWR). ``offset``: also fit a
    constant torque per joint (a torque sensor's bias, N m), which the gravity coefficients cannot
    represent; the model then predicts it and its covariance includes it."""
    samples = samples.check_robot(desc)
    n_offsets = desc.n if offset else 0
    if samples.n_samples * desc.n < 2 * N_GRAVITY_PARAMS * desc.n + 2 * n_offsets:
        raise IdentificationError(f"{samples.n_samples} static samples are too few for the gravity model; "
                                  f"use at least {2 * N_GRAVITY_PARAMS + (2 if offset else 0)} well-spread poses")
    dyn = RigidBodyDynamics(desc)
    base = compute_base_parameters(dyn, "gravity")
    y = np.vstack([base.base_regressor(dyn.gravity_regressor(q)) for q in samples.q])
    names = list(_base_names(base, desc.n))
    if offset:
        y = np.hstack([y, friction_regressor(np.zeros_like(samples.q), False, False, True)])
        names += list(friction_names(desc.n, False, False, True))
    t = samples.tau.reshape(-1)
    kept, res = _fit(y, t, names, None, IdentificationOptions(essential=essential, min_abs=min_abs, max_rsd=max_rsd))
    return _model_from_fit(desc, base, kept, res, (False, False, offset), y, t, None,
                           {"method": "static", "samples": samples.n_samples, "essential": bool(essential)})


OFFSET_DETERMINED = 0.1
"""N m: a torque offset counts as determined when 3 σ of it is at most this (the size of an offset that
matters for a payload fit; a sweep over a small box cannot tell some joints' offset from their gravity)."""


def describe_offsets(model: IdentifiedModel, joint_names: tuple[str, ...] | None = None,
                     determined: float = OFFSET_DETERMINED) -> str:
    """Each joint's identified torque offset with its σ (N m), and the ones the data did not determine
    (3 σ > ``determined``), e.g. ``A1 -0.413 ± 0.002, A2 -0.294 ± 0.051 (not determined), ...``."""
    names = joint_names or model.joint_names
    offsets = model.friction_terms()[2]
    std = dict(zip(model.names, model.std))
    parts, loose = [], []
    for j, name in enumerate(names):
        s = std.get(f"Fo{j + 1}", float("nan"))
        flag = not (3 * s <= determined)
        loose += [name] if flag else []
        parts.append(f"{name} {offsets[j]:+.3f} ± {s:.3f}" + (" (not determined)" if flag else ""))
    text = "offsets " + ", ".join(parts) + " N m (1 σ)"
    if loose:
        text += (f"; not determined by these poses (3 σ above {determined:g} N m): {', '.join(loose)} — their offset "
                 "and gravity look alike here: a wider sweep (sweep_amplitude_deg) or more poses separate them")
    return text


# --- validation -------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Validation(TorqueError):
    """Torque error of a model along a recording, and what was compared: times ``t`` (s), measured
    and predicted torques (N x n, N m, after the filtering that ``processing`` describes)."""

    t: np.ndarray | None = None
    measured: np.ndarray | None = None
    predicted: np.ndarray | None = None
    processing: str = ""

    @property
    def n_samples(self) -> int:
        return 0 if self.measured is None else int(self.measured.shape[0])


def validate_model(model, desc: RobotDescription, samples: Samples, cutoff: float = 6.0, order: int = 4,
                   velocity: str | None = None, rate: float | None = None, max_gap: float = MAX_GAP) -> Validation:
    """Per-joint RMS error between the (low-pass filtered) measured torque and the model's prediction
    along a recording (velocities/accelerations by filtered differentiation; static for gravity).

    ``model``: an :class:`IdentifiedModel` or any object with ``kind``, ``check_robot(desc)`` and
    ``predict(dyn, q, dq, ddq)`` (e.g. :class:`.torque_models.DescriptionModel`). ``velocity``
    defaults to the source the model was identified with (``info["velocity"]``), else positions.
    """
    model.check_robot(desc)
    samples = samples.check_robot(desc)
    dyn = RigidBodyDynamics(desc)
    if model.kind == "gravity":
        pred = model.predict(dyn, samples.q)
        err = torque_error(samples.tau, pred)
        return Validation(**vars(err), t=samples.t, measured=samples.tau, predicted=pred,
                          processing=f"{samples.n_samples} static samples, unfiltered")
    if velocity is None:
        velocity = getattr(model, "info", {}).get("velocity", "positions")
    try:
        data = preprocess_filtered(samples, cutoff, order, velocity, rate, max_gap)
    except PreprocessingError as exc:
        raise IdentificationError(str(exc)) from exc
    pred = model.predict(dyn, data.q, data.dq, data.ddq)
    err = torque_error(data.tau, pred)
    return Validation(**vars(err), t=data.t, measured=data.tau, predicted=pred, processing=data.describe())


# --- trajectories and poses for identification experiments -------------------------------------------

def random_configurations(desc: RobotDescription, count: int, seed: int = 0, margin: float = 0.1) -> np.ndarray:
    """``count`` uniform random configurations (rad) within the limits shrunk by ``margin`` rad."""
    lo, hi = desc.limits.position[:, 0] + margin, desc.limits.position[:, 1] - margin
    if np.any(lo >= hi):
        raise IdentificationError(f"margin {margin} rad leaves no range at some joint")
    return np.random.default_rng(seed).uniform(lo, hi, size=(count, desc.n))


def cosine_trajectory(desc: RobotDescription, amplitude=None, b: float = 0.1, omega: float = 0.03,
                      duration: float = 20.0, rate: float = 50.0, center=None) -> list[tuple]:
    """Paper 003's validation trajectory q(t) = center + A (cos(w t) - B) as points [(t, q, dq, ddq)];
    A defaults to (pi/12, pi/6, ...) alternating. ``omega`` in rad/s (paper: 0.03 -- very slow; pass a
    larger one for a dynamic check)."""
    n = desc.n
    a = np.asarray(amplitude, float) if amplitude is not None else np.array(
        [np.pi / 12 if j % 2 == 0 else np.pi / 6 for j in range(n)])
    c = np.zeros(n) if center is None else np.asarray(center, float)
    t = np.arange(int(round(duration * rate)) + 1) / rate
    q = c + a * (np.cos(omega * t)[:, None] - b)
    dq = -a * omega * np.sin(omega * t)[:, None]
    ddq = -a * omega ** 2 * np.cos(omega * t)[:, None]
    return [(float(t[k]), q[k], dq[k], ddq[k]) for k in range(len(t))]


def full_model_options(options: IdentificationOptions, model: IdentifiedModel) -> IdentificationOptions:
    """Options that refit ``model``'s friction terms without essential elimination (for the
    physically consistent set, which must reproduce every coefficient)."""
    return replace(options, essential=False,
                   friction=friction_label((model.viscous, model.coulomb, model.offset)))


__all__ = [
    "FrictionCandidate",
    "IdentificationError",
    "IdentificationOptions",
    "IdentifiedModel",
    "Preprocessed",
    "Validation",
    "cosine_trajectory",
    "RegressionRows",
    "fit_coefficients",
    "fit_rows",
    "friction_label",
    "friction_terms",
    "full_model_options",
    "describe_offsets",
    "identify_gravity",
    "identify_robot",
    "preprocess",
    "random_configurations",
    "regression_rows",
    "validate_model",
]
