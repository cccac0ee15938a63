"""Payload estimation from joint torques at rest (Gaz & De Luca, IROS 2017 = paper 000).

Payload parameters ``p_L = (m, m cx, m cy, m cz, Jxx, Jxy, Jxz, Jyy, Jyz, Jzz)`` in the payload
frame (J about the payload-frame origin), gravity subset ``p_L,g`` = the first four
(:mod:`.payload_result`: names, limits, the estimate's assembly).

* :func:`estimate_payload_gravity` — static samples, the pick-estimate-and-move procedure of
  Sec. VI-A: ``Delta tau = Y_Lg(q) p_L,g`` with ``Delta tau = tau_L - g(q)`` (one-shot, eq. 26, the
  unloaded torque from a model) or ``tau_L - tau_unloaded`` measured at the same poses
  (differential; cancels model errors and sensor offsets). ``Y_Lg = dyn.payload_gravity_regressor``
  equals ``Y_g J_eps`` of eqs. (22) and (27). :func:`estimate_payload_anchored`: one-shot against a
  model anchored on unloaded captures.
* :func:`estimate_payload_two_stage` — eqs. (24), (25), (28): ``p_L = J_eps^# (pi_L - pi)``;
  :func:`identify_coefficients` gives pi and pi_L (with covariances) from data.
* From motion (all ten parameters, eq. 45): :mod:`.payload_motion`.

Every estimator returns a :class:`~.estimate.PayloadEstimate` with standard deviations from the
least-squares covariance plus, where a model stands in for the unloaded torque and its
``model_uncertainty`` is given, that model's error (:mod:`.model_uncertainty`), propagated to CoM and
inertia about the CoM by the delta method, and rejects physically impossible results with
:class:`PayloadRejected`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace

import numpy as np

from ..identification.least_squares import (
    LSResult,
    RankDeficientError,
    full_rank_columns,
    solve_least_squares,
    stack_rows,
)
from ..model.base_parameters import BaseParameters, compute_base_parameters, payload_jacobian
from ..model.dynamics import RigidBodyDynamics
from ..signals.misfit import Misfit, check_misfit, misfit_sentence, significant_chi2
from ..signals.samples import Samples, require_static
from ..signals.settle import SettleConfig
from .estimate import PayloadEstimate
from .model_uncertainty import ModelUncertainty, error_covariance, generalized_fit
from .result import (
    GRAVITY_NAMES,
    PAYLOAD_NAMES,
    InertiaNotExcited,
    PayloadDataError,
    PayloadLimits,
    PayloadRejected,
    build_estimate,
    effective_limits,
    frame_name,
    inertia_problem,
    uncertainty_words,
)

METHODS = ("one-shot", "differential")
# N m, std of a static mean torque assumed when a model-uncertainty fit is given no weights.
DEFAULT_TORQUE_NOISE = 0.05

# ------------------------------------------------------------------------------------------ helpers

def sample_array(a, name: str, n: int | None = None, rows: int | None = None) -> np.ndarray:
    """``a`` as a finite (N, n) float array (one sample of n may be given as (n,)); else PayloadDataError."""
    try:
        x = np.asarray(a, dtype=float)
    except (TypeError, ValueError) as exc:
        raise PayloadDataError(f"{name} must be numeric: {exc}") from exc
    if x.ndim == 1 and n is not None and x.shape[0] == n:
        x = x[None, :]
    if x.ndim != 2:
        raise PayloadDataError(f"{name} must be (N samples, n joints), got shape {x.shape}")
    if n is not None and x.shape[1] != n:
        raise PayloadDataError(f"{name} has {x.shape[1]} joints per sample, the robot has {n}")
    if rows is not None and x.shape[0] != rows:
        raise PayloadDataError(f"{name} has {x.shape[0]} samples, expected {rows} (one per pose of q)")
    bad = ~np.isfinite(x)
    if bad.any():
        k, j = np.argwhere(bad)[0]
        raise PayloadDataError(f"{name} is NaN/inf at sample {k}, joint {j + 1}")
    return x


def row_weights(weights, n_samples: int, n: int) -> np.ndarray | None:
    """Weights per joint (n,), per sample and joint (N, n) or per stacked row (N n,)."""
    if weights is None:
        return None
    w = np.asarray(weights, dtype=float)
    if w.shape == (n,):
        return np.tile(w, n_samples)
    if w.shape == (n_samples, n) or w.shape == (n_samples * n,):
        return w.reshape(-1)
    raise PayloadDataError(f"weights must have shape ({n},), ({n_samples}, {n}) or ({n_samples * n},), got {w.shape}")


def payload_gravity_rows(dyn: RigidBodyDynamics, q: np.ndarray) -> np.ndarray:
    """Stacked payload gravity regressor (N n x 4) at the poses ``q`` (N, n), rows as stack_rows."""
    q = sample_array(q, "q", dyn.n)
    return stack_rows([dyn.payload_gravity_regressor(qk) for qk in q])


def gravity_from_coefficients(dyn: RigidBodyDynamics, base: BaseParameters,
                              pi_g: np.ndarray) -> Callable[[np.ndarray], np.ndarray]:
    """Unloaded gravity torque g(q) = Y_g,b(q) pi_g from identified gravity coefficients."""
    if base.kind != "gravity":
        raise PayloadDataError(f"base parameters must be of kind 'gravity', got {base.kind!r}")
    pi_g = np.asarray(pi_g, dtype=float).reshape(-1)
    if pi_g.shape[0] != base.rank:
        raise PayloadDataError(f"{pi_g.shape[0]} gravity coefficients given, the robot has {base.rank}")

    def g(q: np.ndarray) -> np.ndarray:
        return base.base_regressor(dyn.gravity_regressor(q)) @ pi_g

    return g


def anchored_gravity(dyn: RigidBodyDynamics, q_unloaded: np.ndarray, tau_unloaded: np.ndarray,
                     gravity: Callable[[np.ndarray], np.ndarray] | None = None) -> Callable[[np.ndarray], np.ndarray]:
    """Unloaded torque model anchored by unloaded static captures (N m as a function of q rad).

    g_a(q) = g(q) + mean_k (tau_unloaded_k - g(q_unloaded_k)): the model error (link parameters,
    sensor offsets) is taken as constant near the captures, e.g. one capture at the pick
    configuration just before grasping anchors the whole ±7° envelope around it at no motion cost.
    q_unloaded, tau_unloaded: (K, n) or (n,) rad and N m, arm at rest, model joint order; ``gravity``
    the unloaded model g(q) (default: the description's, ``dyn.gravity``).
    """
    n = dyn.n
    g0 = gravity or dyn.gravity
    q_u = sample_array(q_unloaded, "q_unloaded", n)
    tau_u = sample_array(tau_unloaded, "tau_unloaded", n, q_u.shape[0])
    if q_u.shape[0] == 0:
        raise PayloadDataError("anchoring needs at least one unloaded capture (call ~/capture_unloaded)")
    offset = np.mean([tu - g0(qu) for qu, tu in zip(q_u, tau_u, strict=True)], axis=0)

    def g(q: np.ndarray) -> np.ndarray:
        return g0(q) + offset

    return g


def estimate_payload_anchored(dyn: RigidBodyDynamics, q: np.ndarray, tau_loaded: np.ndarray,
                              q_unloaded: np.ndarray, tau_unloaded: np.ndarray, *,
                              weights: np.ndarray | None = None,
                              limits: PayloadLimits | None = None,
                              model_uncertainty: ModelUncertainty | None = None,
                              unloaded_gravity: Callable[[np.ndarray], np.ndarray] | None = None,
                              acceleration_std: float = 0.0, misfit_chi2: float | None = None) -> PayloadEstimate:
    """Gravity payload (mass, CoM) from loaded captures against the :func:`anchored_gravity` model.

    The differential method without revisiting every pose unloaded: only the K unloaded captures
    (normally one, at the pick configuration) are measured; ``unloaded_gravity`` is the model anchored
    on them (default the description's); see :func:`estimate_payload_gravity` for q, tau_loaded,
    weights, limits, model_uncertainty, acceleration_std, misfit_chi2 and the exceptions.
    """
    g = anchored_gravity(dyn, q_unloaded, tau_unloaded, unloaded_gravity)
    q_u = sample_array(q_unloaded, "q_unloaded", dyn.n)
    k = q_u.shape[0]
    est = estimate_payload_gravity(dyn, q, tau_loaded, None, "one-shot", unloaded_gravity=g, weights=weights,
                                   limits=limits, model_uncertainty=model_uncertainty, anchor=q_u,
                                   acceleration_std=acceleration_std, misfit_chi2=misfit_chi2)
    return replace(est, method=f"gravity differential (anchored by {k} unloaded capture(s))")



# ------------------------------------------------------------------------------------ static gravity

POSE_RANK_RTOL = 2e-3
"""Relative singular-value threshold on the column-normalised payload gravity regressor below which
the poses do not determine mass and CoM: about 0.25 deg of tilt of the last link (the sampler's
+-7 deg poses give 0.1; one pose with sensor jitter 2e-5)."""
DISTINCT_POSE = 0.005
"""rad: samples closer than this in every joint count as one pose (in messages)."""


def distinct_poses(q: np.ndarray, tol: float = DISTINCT_POSE) -> np.ndarray:
    """Indices of one representative per distinct pose of ``q`` (N, n) (greedy, max-norm ``tol`` rad)."""
    q = np.asarray(q, float)
    reps: list[int] = []
    for k in range(q.shape[0]):
        if not reps or np.min(np.max(np.abs(q[reps] - q[k]), axis=1)) > tol:
            reps.append(k)
    return np.asarray(reps, int)


def _scaled_rank(y: np.ndarray, rtol: float) -> tuple[int, np.ndarray]:
    norms = np.linalg.norm(y, axis=0)
    ys = y / np.where(norms > 0, norms, 1.0)
    _, sv, vt = np.linalg.svd(ys, full_matrices=False)
    rank = int(np.sum(sv > rtol * sv[0])) if sv.size and sv[0] > 0 else 0
    return rank, vt


CAPTURE_ACCELERATION_STD = 2 * SettleConfig().max_velocity / SettleConfig().window
"""rad/s², 1σ per joint: the mean acceleration a settled capture may still carry. The settle test
(:class:`..signals.settle.SettleConfig`) passes a window whose speed stays below ``max_velocity`` (0.005 rad/s) over
``window`` (0.12 s): a mean acceleration up to 2 x 0.005 / 0.12 = 0.083 rad/s², taken as 1σ. On the MuJoCo arm the
sampler's captures carry 0.01-0.11 rad/s² (0.02-0.2 N m on the shoulder joints), correlated with the move before each
capture, so it does not average over the poses: as 0.04 rad/s² it left 3 of 21 lwr4 samples beyond 3σ
(docs/bench/static_misfit.md)."""
SCATTER_NOTE_FACTOR = 1.05
"""σ scaled up by at least this factor (the torques scatter more than declared) is said in the notes."""


def check_pose_rank(dyn: RigidBodyDynamics, q: np.ndarray, y: np.ndarray | None = None,
                    rtol: float = POSE_RANK_RTOL) -> None:
    """Raise :class:`~.least_squares.RankDeficientError` unless the poses ``q`` (N, n) determine the
    four gravity parameters (m, m cx, m cy, m cz); the message says how many distinct poses there are,
    which parameters are missing and the minimum number of poses needed -- ceil(4 / r1), r1 the rank
    one pose gives (3 for a 6- or 7-joint arm: one orientation cannot tell where along gravity the CoM
    lies). ``y``: the stacked payload gravity regressor if already computed (first 4 columns used)."""
    q = sample_array(q, "q", dyn.n)
    y = payload_gravity_rows(dyn, q) if y is None else np.asarray(y, float)[:, :4]
    rank, vt = _scaled_rank(y, rtol)
    if rank >= 4:
        return
    weak = tuple(GRAVITY_NAMES[i] for i in range(4) if np.max(np.abs(vt[rank:, i])) > 0.3) or GRAVITY_NAMES
    reps = distinct_poses(q)
    r1 = max(_scaled_rank(dyn.payload_gravity_regressor(q[k]), rtol)[0] for k in reps)
    need = int(np.ceil(4 / r1)) if r1 else 0
    k = reps.size
    poses = f"{k} distinct pose{'s' if k != 1 else ''} ({q.shape[0]} samples)"
    if r1 == 0:
        advice = "the payload's weight does not load any joint in these poses (gravity along every joint axis)"
    elif k < need:
        advice = (f"{'one pose cannot' if k == 1 else f'{k} poses cannot'} determine the CoM: capture at least {need} "
                  "poses with different orientations of the last link (tilted by a few degrees, e.g. the ±7° "
                  "sampler poses; more poses average the noise)")
    else:
        advice = (f"these poses hardly change the orientation of the last link relative to gravity (less than about "
                  f"0.25°; turning about a vertical axis does not count): capture at least {need} poses that tilt it "
                  "by a few degrees")
    missing = 4 - rank
    if missing == len(weak):
        which = f"not determined: {', '.join(weak)}"
    else:  # fewer directions missing than parameters involved: combinations of them are not determined
        which = (f"{missing} combination{'s' if missing > 1 else ''} of {', '.join(weak)} "
                 f"{'are' if missing > 1 else 'is'} not determined")
    raise RankDeficientError(
        f"the poses are rank deficient for the payload: {poses} determine only {rank} of the 4 gravity parameters "
        f"(m, m cx, m cy, m cz; {which}); {advice}", weak)


def estimate_payload_gravity(
    dyn: RigidBodyDynamics,
    q: np.ndarray,
    tau_loaded: np.ndarray,
    tau_unloaded: np.ndarray | None = None,
    method: str | None = None,
    *,
    unloaded_gravity: Callable[[np.ndarray], np.ndarray] | None = None,
    weights: np.ndarray | None = None,
    estimate_offsets: bool = False,
    limits: PayloadLimits | None = None,
    check: bool = True,
    dq: np.ndarray | None = None,
    max_speed: float = 0.02,
    model_uncertainty: ModelUncertainty | None = None,
    anchor: np.ndarray | None = None,
    acceleration_std: float = 0.0,
    misfit_chi2: float | None = None,
) -> PayloadEstimate:
    """Mass and CoM of the payload from static samples (paper 000, Sec. VI-A).

    q, tau_loaded, tau_unloaded: (N, n) rad and N m, model joint order, arm at rest.
    ``method``: ``"one-shot"`` (default without ``tau_unloaded``): unloaded torque from the model,
    ``unloaded_gravity(q)`` if given (e.g. :func:`gravity_from_coefficients`) else ``dyn.gravity``;
    ``"differential"`` (default with ``tau_unloaded``): measured unloaded torques at the same poses.
    ``weights``: per joint (n,), per sample (N, n) or per row; e.g. 1/sigma_j^2.
    ``estimate_offsets``: also fit a constant torque offset per joint (needs well spread poses;
    only meaningful for one-shot, since the differential method cancels offsets).
    ``dq`` (N, n) rad/s, if given: every joint speed must be <= ``max_speed`` rad/s, else
    :class:`~.data.NotStaticError` names the moving sample and joint (the formula assumes rest).
    ``model_uncertainty``: how wrong the unloaded model may be (:mod:`.model_uncertainty`). With it the
    fit is generalized least squares over noise (``weights`` = 1 / noise variance, default
    ``DEFAULT_TORQUE_NOISE``) plus the model's error covariance, so model error correlated across the
    poses is discounted and σ covers it (``anchor`` (K, n): the poses of the unloaded captures a
    one-shot model was anchored on). The differential method measures the unloaded torques instead.
    ``acceleration_std`` (rad/s², 1σ per joint): the mean acceleration a capture may still carry (an arm
    creeping or ringing after its move, which a settle test lets through): its torque M(q) q̈ is systematic within
    the capture (it does not average down over the capture's samples) and is declared with the noise
    (:data:`CAPTURE_ACCELERATION_STD`). With a model uncertainty the fit checks its residual against all of that
    (:mod:`..signals.misfit`): beyond ``misfit_chi2`` x its expectation (None: the χ² that data the noise and model
    error explain exceed once in 1000, :func:`~..signals.misfit.significant_chi2`: 1.7 for 10 poses of 7 joints) σ
    is widened by what the misfit can explain and :attr:`PayloadEstimate.misfit` says it in words.
    Raises :class:`PayloadDataError` on bad input, :class:`~.least_squares.RankDeficientError` when
    the poses do not determine the parameters, :class:`PayloadRejected` for impossible results.
    """
    n = dyn.n
    q = sample_array(q, "q", n)
    n_s = q.shape[0]
    tau_l = sample_array(tau_loaded, "tau_loaded", n, n_s)
    if dq is not None:
        require_static(Samples(q, tau_l, dq=sample_array(dq, "dq", n, n_s), joint_names=dyn.desc.joint_names),
                       max_speed)
    if method is None:
        method = "one-shot" if tau_unloaded is None else "differential"
    if method not in METHODS:
        raise PayloadDataError(f"method must be one of {METHODS}, got {method!r}")
    if method == "differential":
        if tau_unloaded is None:
            raise PayloadDataError("method 'differential' needs tau_unloaded measured at the same poses")
        ref = sample_array(tau_unloaded, "tau_unloaded", n, n_s)
    else:
        if tau_unloaded is not None:
            raise PayloadDataError("method one-shot takes the unloaded torque from the model; omit tau_unloaded")
        gfun = unloaded_gravity if unloaded_gravity is not None else dyn.gravity
        ref = np.array([np.asarray(gfun(qk), dtype=float).reshape(n) for qk in q])
    dtau = (tau_l - ref).reshape(-1)
    y = payload_gravity_rows(dyn, q)
    check_pose_rank(dyn, q, y)
    names: list[str] = list(GRAVITY_NAMES)
    if estimate_offsets:
        y = np.hstack([y, np.tile(np.eye(n), (n_s, 1))])
        names += [f"offset_{j}" for j in dyn.desc.joint_names]
    row_w = row_weights(weights, n_s, n)
    notes: tuple[str, ...] = ()
    if model_uncertainty is not None and method != "differential":
        noise_var = np.full(n_s * n, DEFAULT_TORQUE_NOISE ** 2) if row_w is None else 1.0 / row_w
        c = error_covariance(model_uncertainty, q, anchor) + np.diag(noise_var)
        if anchor is not None:  # the anchor's own noise is common to every pose (assumed no larger than a capture's)
            c = c + np.kron(np.ones((n_s, n_s)), np.diag(noise_var[:n]) / np.atleast_2d(anchor).shape[0])
        if acceleration_std > 0:  # each capture's residual motion: M(q_k) q̈_k, q̈_k ~ N(0, acceleration_std² I)
            for k, qk in enumerate(q):
                m = dyn.mass_matrix(qk)
                c[k * n:(k + 1) * n, k * n:(k + 1) * n] += acceleration_std ** 2 * (m @ m.T)
        fit = generalized_fit(y, dtau, c, names)
        params, cov, rms = fit.params, fit.covariance, fit.residual_rms
        notes = (f"σ includes the unloaded model's uncertainty ({model_uncertainty.source})",)
        factor = float(np.sqrt(fit.scale))
        dof = y.shape[0] - y.shape[1]
        # whitened rows: noise variance 1 per row; the fit's σ was already scaled to its scatter (max(1, χ²/ν))
        limit = significant_chi2(dof) if misfit_chi2 is None else misfit_chi2
        misfit = check_misfit(fit.scale * dof, y.shape[0], dof, 1.0, max(1.0, fit.scale), limit)
        if misfit.flagged:
            cov = cov * misfit.information_scale
        if factor >= SCATTER_NOTE_FACTOR:
            notes += (f"σ scaled up by {factor:.2f}x: the torques scatter that much more than noise and model "
                      "uncertainty declare",)
    else:
        res = solve_least_squares(y, dtau, row_w, names)
        params, cov, rms = res.params, res.covariance, res.residual_rms
    offsets = None
    if estimate_offsets:
        offsets = (params[4:], np.sqrt(np.clip(np.diag(cov)[4:], 0.0, None)), names[4:])
    est = build_estimate(
        params[:4], cov[:4, :4], np.ones(4, bool), GRAVITY_NAMES,
        method=f"gravity {method}" + (" + offsets" if estimate_offsets else ""), frame=frame_name(dyn),
        samples=n_s, condition_number=float(np.linalg.cond(y[:, :4])), residual_rms=rms,
        limits=effective_limits(limits, check), offsets=offsets,
    )
    if model_uncertainty is not None and method != "differential" and misfit.flagged:
        words = static_misfit_words(est, misfit, rms)
        return replace(est, notes=est.notes + notes + (words,), misfit=words)
    return replace(est, notes=est.notes + notes) if notes else est


def static_misfit_words(est: PayloadEstimate, misfit: Misfit, rms: float) -> str:
    """What a user reads when a static fit does not fit: the poses' torque the model does not explain (``rms`` N m,
    the residual's RMS; what the noise and model error declared lead one to expect of it: ``rms`` / √(χ²/ν)) and how
    uncertain that leaves the estimate."""
    in_nm = Misfit(misfit.ratio, rms, rms / np.sqrt(max(misfit.ratio, 1e-300)), misfit.widening)
    return misfit_sentence("the poses have torque", in_nm, uncertainty_words(est),
                           "Look for an arm not at rest in the captures, a gravity model or torque offsets that "
                           "changed since the calibration (payload_sampler/sweep again), a cable or hose pulling on "
                           "the tool, or friction or elastic joints the model lacks; capture again")


# ------------------------------------------------------------------------------------------ two-stage

def identify_coefficients(dyn: RigidBodyDynamics, base: BaseParameters, q: np.ndarray,
                          dq: np.ndarray | None = None, ddq: np.ndarray | None = None,
                          tau: np.ndarray | None = None, weights: np.ndarray | None = None) -> LSResult:
    """Dynamic coefficients pi (eq. 14 / 24) by least squares on the stacked base regressor.

    ``base.kind == "gravity"``: static samples, only q and tau are used; ``"full"``: q, dq, ddq, tau.
    """
    n = dyn.n
    q = sample_array(q, "q", n)
    n_s = q.shape[0]
    if tau is None:
        raise PayloadDataError("identify_coefficients needs measured torques tau")
    tau = sample_array(tau, "tau", n, n_s)
    if base.kind == "gravity":
        blocks = [base.base_regressor(dyn.gravity_regressor(qk)) for qk in q]
    else:
        if dq is None or ddq is None:
            raise PayloadDataError("full dynamic coefficients need dq and ddq")
        dq, ddq = sample_array(dq, "dq", n, n_s), sample_array(ddq, "ddq", n, n_s)
        blocks = [base.base_regressor(dyn.regressor(a, b, c)) for a, b, c in zip(q, dq, ddq)]
    names = [f"pi{i + 1}" for i in range(base.rank)]
    return solve_least_squares(stack_rows(blocks), tau.reshape(-1), row_weights(weights, n_s, n), names)


def estimate_payload_two_stage(
    pi_hat: np.ndarray,
    pi_hat_L: np.ndarray,
    J_eps: np.ndarray,
    *,
    cov_pi: np.ndarray | None = None,
    cov_pi_L: np.ndarray | None = None,
    param_names: Sequence[str] | None = None,
    frame: str = "",
    samples: int = 0,
    limits: PayloadLimits | None = None,
    check: bool = True,
    rtol: float = 1e-9,
) -> PayloadEstimate:
    """p_L = J_eps^# (pi_L - pi), eqs. (25) and (28), on the non-zero components of epsilon.

    ``J_eps`` (r x k) with k = 4 (gravity) or 10 columns in PAYLOAD_NAMES order (or ``param_names``).
    Rows of J_eps that are zero (coefficients the payload does not change) are discarded;
    columns the remaining rows do not determine (e.g. mcz and Jxx.. of a planar arm) are reported
    as not identified (value 0, std NaN). Covariances of pi and pi_L, if given, are propagated
    (cov_eps = cov_pi + cov_pi_L); otherwise the fit residual gives sigma^2 when rows > columns.
    """
    pi = np.asarray(pi_hat, dtype=float).reshape(-1)
    pil = np.asarray(pi_hat_L, dtype=float).reshape(-1)
    jac = np.asarray(J_eps, dtype=float)
    if jac.ndim != 2 or pi.shape != pil.shape or jac.shape[0] != pi.shape[0]:
        raise PayloadDataError(
            f"shapes do not match: pi {pi.shape}, pi_L {pil.shape}, J_eps {jac.shape} (need r, r, r x k)"
        )
    k = jac.shape[1]
    names = tuple(param_names) if param_names is not None else (GRAVITY_NAMES if k == 4 else PAYLOAD_NAMES)
    if len(names) != k or names[:4] != GRAVITY_NAMES:
        raise PayloadDataError(f"J_eps columns must be named starting with {GRAVITY_NAMES}, got {names}")
    for a, nm in ((pi, "pi_hat"), (pil, "pi_hat_L"), (jac, "J_eps")):
        if not np.all(np.isfinite(a)):
            raise PayloadDataError(f"{nm} contains NaN/inf")
    eps = pil - pi
    scale = max(np.abs(jac).max(), np.finfo(float).tiny)
    nz = np.abs(jac).max(axis=1) > rtol * scale
    cols = full_rank_columns(jac[nz], rtol)
    identified = np.zeros(k, bool)
    identified[cols] = True
    if not identified[0]:
        raise PayloadRejected("the coefficients do not determine the payload mass (J_eps has no mass column)")
    undetermined = [names[i] for i in range(k) if not identified[i]]
    js = jac[np.ix_(nz, cols)]
    pinv = np.linalg.pinv(js)
    p_sel = pinv @ eps[nz]
    resid = eps[nz] - js @ p_sel
    if cov_pi is not None or cov_pi_L is not None:
        ce = np.zeros((pi.shape[0], pi.shape[0]))
        for c, nm in ((cov_pi, "cov_pi"), (cov_pi_L, "cov_pi_L")):
            if c is not None:
                c = np.asarray(c, dtype=float)
                if c.shape != ce.shape:
                    raise PayloadDataError(f"{nm} has shape {c.shape}, expected {ce.shape}")
                ce = ce + c
        cov_sel = pinv @ ce[np.ix_(nz, nz)] @ pinv.T
    elif js.shape[0] > js.shape[1]:
        sigma2 = float(resid @ resid) / (js.shape[0] - js.shape[1])
        cov_sel = sigma2 * np.linalg.inv(js.T @ js)
    else:
        cov_sel = np.full((cols.size, cols.size), np.nan)
    p = np.zeros(k)
    p[cols] = p_sel
    cov = np.zeros((k, k))
    cov[np.ix_(cols, cols)] = cov_sel
    return build_estimate(
        p, cov, identified, names, frame=frame, samples=samples,
        method="two-stage" + (f" (not determined: {', '.join(undetermined)})" if undetermined else ""),
        condition_number=float(np.linalg.cond(js)), residual_rms=float(np.sqrt(np.mean(resid**2))),
        limits=effective_limits(limits, check),
    )


def estimate_payload_two_stage_from_data(
    dyn: RigidBodyDynamics,
    unloaded: dict,
    loaded: dict,
    kind: str = "full",
    base: BaseParameters | None = None,
    **kwargs,
) -> PayloadEstimate:
    """Both stages from data: pi from ``unloaded``, pi_L from ``loaded`` (dicts with q, tau and, for
    kind="full", dq, ddq), J_eps from the numeric base parameters, then eq. (28)."""
    base = base if base is not None else compute_base_parameters(dyn, kind)
    r0 = identify_coefficients(dyn, base, unloaded.get("q"), unloaded.get("dq"), unloaded.get("ddq"),
                               unloaded.get("tau"))
    r1 = identify_coefficients(dyn, base, loaded.get("q"), loaded.get("dq"), loaded.get("ddq"), loaded.get("tau"))
    jac = payload_jacobian(base, dyn)
    n_s = int(np.asarray(loaded["q"]).shape[0] + np.asarray(unloaded["q"]).shape[0])
    est = estimate_payload_two_stage(r0.params, r1.params, jac, cov_pi=r0.covariance, cov_pi_L=r1.covariance,
                                     frame=frame_name(dyn), samples=n_s, **kwargs)
    return est


def cramer_rao_std(dyn: RigidBodyDynamics, q: np.ndarray, sigma: float, differential: bool = False) -> np.ndarray:
    """Lower bound on the std of (m, m cx, m cy, m cz) for i.i.d. torque noise ``sigma`` (N m):
    sqrt(diag(sigma^2 (Y^T Y)^-1)) of the static design ``q``; differential doubles the variance."""
    y = payload_gravity_rows(dyn, q)
    var = sigma**2 * (2.0 if differential else 1.0)
    return np.sqrt(np.diag(var * np.linalg.inv(y.T @ y)))


__all__ = [
    "GRAVITY_NAMES",
    "METHODS",
    "InertiaNotExcited",
    "PAYLOAD_NAMES",
    "PayloadDataError",
    "PayloadLimits",
    "PayloadRejected",
    "POSE_RANK_RTOL",
    "anchored_gravity",
    "check_pose_rank",
    "cramer_rao_std",
    "distinct_poses",
    "estimate_payload_anchored",
    "estimate_payload_gravity",
    "estimate_payload_two_stage",
    "estimate_payload_two_stage_from_data",
    "gravity_from_coefficients",
    "identify_coefficients",
    "inertia_problem",
    "payload_gravity_rows",
    "row_weights",
    "sample_array",
    "static_misfit_words",
    "CAPTURE_ACCELERATION_STD",
]
