"""Physically consistent identification, judged on motion the fit has not seen (the `identify` default).

Unconstrained least squares fits the training motion best and may generalize worst: the coefficients
that the recording barely excites take whatever values lower the training residual. On a real LWR 4+
(docs/bench/identification_unseen.md) the least-squares coefficients of one excitation predicted its
repetition to 0.23 N m but another excitation only to 0.98 N m; the physically consistent link set
fitted to the same coefficients (:mod:`.physical`) predicted both to 0.25 / 0.30 N m.

So the coefficients written by default are those *of* a physically consistent link set,
pi = K p(mu) + F f (:class:`~.physical.PhysicalRetrieval`, from the prior projected onto the consistent
set when it is not consistent), and choices are made on held-out data instead of the training residual:

* **blocked cross-validation**: the recording's regression rows are cut into ``blocks`` contiguous time
  blocks; each block is predicted by the fit on the others (all its rows, slow ones included, as
  ``validate`` compares);
* **friction terms** (``friction="auto"``): every combination of viscous, Coulomb and offset is
  cross-validated as unconstrained least squares (cheap); the ``shortlist`` best are cross-validated
  as consistent fits (each fold's retrieval started from the whole recording's solution), and the
  fewest terms within one standard error of the lowest held-out error win (a term must measurably
  help on held-out data to be kept);
* **sigma**: the coefficients' covariance is the least-squares one (the noise of the rows) plus the
  delete-a-block jackknife covariance of the consistent coefficients, (B - 1)/B sum_b (pi_b - mean)
  (pi_b - mean)^T over the B fits that each left one block out: how far they move when part of the
  motion is missing, which the row noise alone does not tell (LWR: the difference between
  identifications from two excitations within 2 std for 31 % of the coefficients with the least-squares
  std, 94 % with this one). :attr:`ConsistentFit.cv_rms` is the torque RMS to expect on data the fit did
  not see (of the same kind of motion).
"""

from __future__ import annotations

import itertools
import logging
import math
from dataclasses import dataclass, replace

import numpy as np

from ..model.base_parameters import BaseParameters, compute_base_parameters
from ..model.description import RobotDescription
from ..model.dynamics import RigidBodyDynamics
from ..signals.preprocessing import Preprocessed
from .identified_model import IdentificationError, IdentifiedModel
from .least_squares import RankDeficientError
from .physical import PRIOR_WEIGHT, CoefficientTarget, PhysicalResult, PhysicalRetrieval
from .robot_identification import (
    IdentificationOptions,
    RegressionRows,
    _check_motion,
    fit_rows,
    friction_label,
    friction_terms,
    regression_rows,
)

log = logging.getLogger(__name__)

CV_BLOCKS = 5       # contiguous time blocks of the cross-validation
SHORTLIST = 3       # friction models cross-validated as consistent fits
_FOLD_NFEV = 40     # evaluations of a fold's retrieval (warm-started at the whole recording's solution)


@dataclass(frozen=True)
class FrictionCV:
    """One friction model judged on held-out blocks: torque RMS (N m) of the unconstrained least
    squares (``ls_rms``) and of the consistent fit (``consistent_rms``, NaN when not short-listed)."""

    terms: tuple[bool, bool, bool]
    ls_rms: float
    consistent_rms: float = float("nan")

    @property
    def label(self) -> str:
        return friction_label(self.terms)


EVIDENCE_FACTOR = 1.5
"""The consistent fit is rejected by its own evidence when its held-out RMS exceeds least squares' by this factor
(and by EVIDENCE_MARGIN): a real LBR Med 7 log with its torque sign reversed gave 15.07 against 0.43 N m."""
EVIDENCE_MARGIN = 0.2
"""N m: ... and by at least this much (two nearly equal small figures are not evidence)."""
POOR_FIT_RMS = 1.0
"""N m: a written model whose held-out torque RMS exceeds this is flagged loudly."""


@dataclass(frozen=True)
class ConsistentFit:
    """The result of :func:`identify_consistent`.

    ``model``: the consistent coefficients (what `identify` writes); ``least_squares``: the
    unconstrained fit with the same friction terms (the retrieval's target); ``physical``: the link
    set; ``candidates``: the friction models tried; ``cv_rms``: the chosen model's held-out torque RMS
    (N m); ``jackknife``: the delete-a-block jackknife covariance added to the least-squares one."""

    model: IdentifiedModel
    least_squares: IdentifiedModel
    physical: PhysicalResult
    candidates: tuple[FrictionCV, ...]
    cv_rms: float
    jackknife: np.ndarray
    blocks: int

    @property
    def rejected(self) -> bool:
        """True when the consistent coefficients predict held-out data far worse than least squares do."""
        ls = self.least_squares_cv_rms
        return self.cv_rms > EVIDENCE_FACTOR * ls and self.cv_rms - ls > EVIDENCE_MARGIN

    def rejection(self) -> str:
        """Why the least-squares coefficients are written instead (when :attr:`rejected`)."""
        ls = self.least_squares_cv_rms
        return (f"the physically consistent fit misses held-out data by {self.cv_rms:.3f} N m RMS against "
                f"{ls:.3f} N m for least squares ({self.cv_rms / ls:.0f}x): the description's link parameters, "
                "its prior, cannot explain this arm's torques (a torque sign or gain that is wrong, masses far "
                "off, or a load on the flange); written instead: the least-squares coefficients with the same "
                "friction terms (as --unconstrained)")

    @property
    def least_squares_cv_rms(self) -> float:
        """Held-out torque RMS (N m) of the unconstrained least squares with the chosen friction terms."""
        return next(c.ls_rms for c in self.candidates if c.label == self.model.info["friction"])

    def describe_choice(self) -> str:
        """One line: the friction model and why."""
        if len(self.candidates) == 1:
            return (f"friction: {self.candidates[0].label} (as requested); held-out RMS of the consistent fit "
                    f"{self.cv_rms:.4f} N m ({self.blocks}-block cross-validation)")
        ranked = sorted(self.candidates, key=lambda c: c.ls_rms)
        chosen = self.model.info["friction"]
        parts = [f"{c.label} {c.ls_rms:.4f}" + ("" if math.isnan(c.consistent_rms) else f" / {c.consistent_rms:.4f}")
                 + (" <-" if c.label == chosen else "") for c in ranked]
        return (f"friction: {chosen} chosen by {self.blocks}-block cross-validation (the fewest terms within one "
                "standard error of the best); held-out torque RMS in N m (least squares / consistent fit) per "
                "candidate: " + ", ".join(parts))


def identify_consistent(desc: RobotDescription, data: Preprocessed,
                        options: IdentificationOptions | None = None,
                        prior_weight: float = PRIOR_WEIGHT, starts: int = 5, seed: int = 0,
                        blocks: int = CV_BLOCKS, shortlist: int = SHORTLIST) -> ConsistentFit:
    """Physically consistent coefficients of ``desc`` from preprocessed ``data`` (module docstring).
    ``options`` default: friction "auto"; ``options.essential`` is ignored: the consistent set reproduces
    every base coefficient."""
    options = IdentificationOptions(friction="auto") if options is None else options
    if blocks < 2:
        raise IdentificationError(f"cross-validation needs at least 2 blocks, got {blocks}")
    dyn = RigidBodyDynamics(desc)
    base = compute_base_parameters(dyn)
    _check_motion(data)
    options = replace(options, essential=False)
    rows = regression_rows(dyn, base, data, options)
    n_samples = rows.dq.shape[0]
    if n_samples < 10 * blocks:
        raise IdentificationError(f"{n_samples} regression samples are too few for {blocks}-block cross-validation: "
                                  "record a longer motion")
    block = np.minimum(np.arange(n_samples) * blocks // n_samples, blocks - 1)
    if options.friction == "auto":
        tried = [t for t in itertools.product((False, True), repeat=3)]
    else:
        tried = [friction_terms(options.friction)]
    scored = [c for c in (_ls_cv(desc, base, rows, block, terms, options) for terms in tried) if c is not None]
    if not scored:
        raise IdentificationError("the motion does not determine the rigid-body coefficients with any friction "
                                  "model: record a richer motion (an `excite` trajectory)")
    listed = sorted(scored, key=lambda c: c.ls_rms)[:max(1, shortlist)]
    fits = {}
    for cand in listed:
        fits[cand.terms] = _consistent_cv(desc, base, rows, block, cand.terms, options, prior_weight)
    best_terms = _one_standard_error(fits)
    candidates = tuple(replace(c, consistent_rms=math.sqrt(fits[c.terms][0].mean())) if c.terms in fits else c
                       for c in scored)
    cv_rms = math.sqrt(fits[best_terms][0].mean())
    info = {"method": data.method, "periods": data.periods, "fs": data.fs, "samples": int(n_samples),
            "decimate": int(rows.step), "essential": False, "velocity": data.velocity,
            "friction": friction_label(best_terms)}
    if data.cutoff:
        info["cutoff_hz"] = float(data.cutoff)
    ls = fit_rows(desc, base, rows, best_terms, options, dict(info))
    res = PhysicalRetrieval(desc, CoefficientTarget.from_model(ls), prior_weight=prior_weight).solve(
        starts=starts, seed=seed, progress=False, x0=fits[best_terms][1].x)  # start 0: the solution found above
    folds = fits[best_terms][2]
    spread = folds - folds.mean(axis=0)
    jackknife = (folds.shape[0] - 1) / folds.shape[0] * spread.T @ spread
    info.update(coefficients="physically consistent", prior_weight=float(prior_weight), cv_blocks=int(blocks),
                cv_rms=float(cv_rms), covariance="least squares + delete-a-block jackknife",
                least_squares_residual_rms=float(ls.residual_rms),
                friction_cv=[{"terms": c.label, "least_squares_rms": c.ls_rms,
                              **({} if math.isnan(c.consistent_rms) else {"consistent_rms": c.consistent_rms})}
                             for c in candidates])
    model = _consistent_model(ls, res, rows, best_terms, jackknife, info)
    log.info("consistent identification: friction %s, held-out RMS %.4g N m", info["friction"], cv_rms)
    return ConsistentFit(model, ls, res, candidates, cv_rms, jackknife, blocks)


def _one_standard_error(fits: dict) -> tuple[bool, bool, bool]:
    """The fewest friction terms whose held-out error is within one standard error of the lowest (the
    one-standard-error rule: Breiman et al. 1984, Hastie et al., The Elements of Statistical Learning
    Sec. 7.10): a term that does not measurably help on held-out data is not kept."""
    mse = {k: float(v[0].mean()) for k, v in fits.items()}
    best = min(mse, key=mse.get)
    per = fits[best][0]
    limit = mse[best] + float(np.std(per, ddof=1) / math.sqrt(per.size)) if per.size > 1 else mse[best]
    return min((k for k in mse if mse[k] <= limit), key=lambda k: (sum(k), mse[k]))


def _ls_cv(desc, base: BaseParameters, rows: RegressionRows, block: np.ndarray, terms, options) -> FrictionCV | None:
    """Held-out torque RMS of unconstrained least squares with friction ``terms`` (None: not determined)."""
    y = rows.regressor(terms)
    sq, count = 0.0, 0
    for b in range(int(block.max()) + 1):
        try:
            m = fit_rows(desc, base, rows.subset(block != b), terms, options, {})
        except IdentificationError as exc:
            if isinstance(exc.__cause__, RankDeficientError):
                return None
            raise
        test = np.repeat(block == b, desc.n)
        r = rows.t[test] - y[test][:, m.kept] @ m.values
        sq, count = sq + float(r @ r), count + r.size
    return FrictionCV(terms, math.sqrt(sq / count))


def _consistent_cv(desc, base, rows: RegressionRows, block: np.ndarray, terms, options,
                   prior_weight: float) -> tuple[np.ndarray, PhysicalResult, np.ndarray]:
    """Held-out mean squared torque error (N^2 m^2) per block of the consistent fit with friction
    ``terms``, the whole recording's fit, and the coefficients of each block's fit (blocks x b)."""
    whole = fit_rows(desc, base, rows, terms, options, {})
    full = PhysicalRetrieval(desc, CoefficientTarget.from_model(whole), prior_weight=prior_weight).solve(
        starts=1, progress=False, warn=False)
    y = rows.regressor(terms)
    per, folds = [], []
    for b in range(int(block.max()) + 1):
        m = fit_rows(desc, base, rows.subset(block != b), terms, options, {})
        res = PhysicalRetrieval(desc, CoefficientTarget.from_model(m), prior_weight=prior_weight).solve(
            starts=1, progress=False, x0=full.x, max_nfev=_FOLD_NFEV, warn=False)
        test = np.repeat(block == b, desc.n)
        r = rows.t[test] - y[test][:, m.kept] @ res.coefficients
        per.append(float(np.mean(r ** 2)))
        folds.append(res.coefficients)
    return np.array(per), full, np.array(folds)


def _consistent_model(ls: IdentifiedModel, res: PhysicalResult, rows: RegressionRows, terms, jackknife: np.ndarray,
                      info: dict) -> IdentifiedModel:
    """``ls`` with the coefficients of the consistent set, its fit figures and the widened covariance."""
    values = np.asarray(res.coefficients, float)
    resid = rows.t - rows.regressor(terms)[:, ls.kept] @ values
    n = ls.n
    cov = ls.covariance + jackknife
    std = np.sqrt(np.clip(np.diag(cov), 0.0, None))
    with np.errstate(divide="ignore", invalid="ignore"):
        rsd = np.where(np.abs(values) > 0, 100.0 * std / np.abs(values), np.inf)
    return replace(ls, values=values, std=std, rsd=rsd, covariance=cov, sigma2=ls.sigma2,
                   residual_rms=float(np.sqrt(np.mean(resid ** 2))), rss=float(resid @ resid),
                   per_joint_rms=np.sqrt(np.mean(resid.reshape(-1, n) ** 2, axis=0)), info=info)


__all__ = ["CV_BLOCKS", "ConsistentFit", "FrictionCV", "SHORTLIST", "identify_consistent"]
