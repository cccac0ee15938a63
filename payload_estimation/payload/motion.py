"""Payload from motion: all ten parameters where the motion determines them (paper 000 eq. 45).

* :func:`estimate_payload_motion` — ``Y_L(q, dq, ddq) p_L = dtau`` over a recorded motion (the CLI's
  ``estimate`` path); mass and CoM never depend on whether the inertia is determined; honest std
  (serially correlated residuals, a block jackknife, the reference model's own uncertainty).
* :func:`estimate_payload_full` — dynamic rows stacked with static gravity rows; refuses (or flags)
  data that do not excite the inertia.

Parameters and units as :mod:`.payload_result`; joint vectors (N, n) in model order, rad, rad/s,
rad/s², N m.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from ..identification.least_squares import full_rank_columns, solve_least_squares, stack_rows
from ..model.dynamics import RigidBodyDynamics
from .estimate import PayloadEstimate
from .gravity import check_pose_rank, payload_gravity_rows, row_weights, sample_array
from .model_uncertainty import ModelUncertainty, motion_error_rows, propagated_covariance
from .result import (
    GRAVITY_NAMES,
    ICOM_NAMES,
    PAYLOAD_NAMES,
    InertiaNotExcited,
    PayloadDataError,
    PayloadLimits,
    build_estimate,
    derived_parameters,
    derived_std,
    effective_limits,
    frame_name,
    inertia_problem,
    is_no_payload,
    nearest_physical_inertia,
)

# ------------------------------------------------------------------------------- full (10 parameters)

def estimate_payload_full(
    dyn: RigidBodyDynamics,
    q: np.ndarray,
    dq: np.ndarray,
    ddq: np.ndarray,
    tau_loaded: np.ndarray,
    tau_unloaded: np.ndarray | None = None,
    *,
    static_q: np.ndarray | None = None,
    static_tau_loaded: np.ndarray | None = None,
    static_tau_unloaded: np.ndarray | None = None,
    weights: np.ndarray | None = None,
    static_weight: float = 1.0,
    max_condition: float = 1e3,
    on_not_excited: str = "raise",
    limits: PayloadLimits | None = None,
    check: bool = True,
    model_uncertainty: ModelUncertainty | None = None,
) -> PayloadEstimate:
    """All 10 payload parameters from dynamic motion, stacked with static gravity rows (eq. 45).

    Dynamic rows: ``Y_L(q, dq, ddq) p_L = tau_L - tau_ref`` with tau_ref the measured unloaded
    torque on the same trajectory (``tau_unloaded``) or the nominal inverse dynamics of ``dyn``.
    Static rows (optional): ``Y_Lg(q_s) p_L,g = tau_Ls - tau_ref,s`` (measured or ``dyn.gravity``).
    The motion excites the inertia if the column-normalised regressor has full rank and condition
    number <= ``max_condition``; otherwise ``on_not_excited="raise"`` raises
    :class:`InertiaNotExcited` naming the undetermined parameters, ``"gravity"`` returns a gravity-only
    estimate whose ``method`` says ``inertia not excited``. ``model_uncertainty``: how wrong ``dyn`` may
    be, propagated into the std of the rows whose reference it predicts (:mod:`.model_uncertainty`).
    """
    if on_not_excited not in ("raise", "gravity"):
        raise PayloadDataError(f"on_not_excited must be 'raise' or 'gravity', got {on_not_excited!r}")
    n = dyn.n
    q = sample_array(q, "q", n)
    n_s = q.shape[0]
    dq, ddq = sample_array(dq, "dq", n, n_s), sample_array(ddq, "ddq", n, n_s)
    tau_l = sample_array(tau_loaded, "tau_loaded", n, n_s)
    if tau_unloaded is not None:
        ref = sample_array(tau_unloaded, "tau_unloaded", n, n_s)
        how = "differential"
    else:
        ref = np.array([dyn.inverse_dynamics(a, b, c) for a, b, c in zip(q, dq, ddq)])
        how = "one-shot"
    y = stack_rows([dyn.payload_regressor(a, b, c) for a, b, c in zip(q, dq, ddq)])
    rhs = (tau_l - ref).reshape(-1)
    w = row_weights(weights, n_s, n)
    if w is None:
        w = np.ones(y.shape[0])
    n_static = 0
    if static_q is not None:
        sq = sample_array(static_q, "static_q", n)
        n_static = sq.shape[0]
        st_l = sample_array(static_tau_loaded, "static_tau_loaded", n, n_static)
        if static_tau_unloaded is not None:
            st_ref = sample_array(static_tau_unloaded, "static_tau_unloaded", n, n_static)
        else:
            st_ref = np.array([dyn.gravity(qk) for qk in sq])
        yg = np.hstack([payload_gravity_rows(dyn, sq), np.zeros((n_static * n, 6))])
        y = np.vstack([y, yg])
        rhs = np.concatenate([rhs, (st_l - st_ref).reshape(-1)])
        w = np.concatenate([w, np.full(n_static * n, float(static_weight))])
    yw = y * np.sqrt(w)[:, None]
    keep = full_rank_columns(yw)
    norms = np.linalg.norm(yw, axis=0)
    s = np.linalg.svd(yw / np.where(norms > 0, norms, 1.0), compute_uv=False)
    cond_scaled = float(s[0] / s[-1]) if s[-1] > 0 else float("inf")
    method = f"full {how}" + (f" + {n_static} static" if n_static else "")
    error_rows = None
    if model_uncertainty is not None:
        zero = np.zeros((n_static, n))
        moving = motion_error_rows(model_uncertainty, q, dq, ddq)
        error_rows = np.vstack([moving * (tau_unloaded is None)] + ([
            motion_error_rows(model_uncertainty, sq, zero, zero) * (static_tau_unloaded is None)] if n_static else []))
    cols = list(range(10))
    if keep.size < 10 or cond_scaled > max_condition:
        if keep.size < 10:
            missing = tuple(PAYLOAD_NAMES[i] for i in np.setdiff1d(np.arange(10), keep))
        else:
            _, _, vt = np.linalg.svd(yw / norms, full_matrices=False)
            weak = np.abs(vt[-1])
            missing = tuple(PAYLOAD_NAMES[i] for i in np.argsort(-weak) if weak[i] > 0.3)
        msg = (
            f"the motion does not excite the payload inertia (scaled condition number {cond_scaled:.3g} > "
            f"{max_condition:g}; poorly determined: {', '.join(missing)}); use faster, more varied motion "
            "(e.g. an excitation trajectory) or estimate mass and CoM only"
        )
        if on_not_excited == "raise":
            raise InertiaNotExcited(msg, missing)
        if not set(range(4)) <= set(keep.tolist()):
            raise InertiaNotExcited(msg + " — not even mass and CoM are determined", missing)
        cols = list(range(4))
        method += " (inertia not excited: gravity only)"
    names = PAYLOAD_NAMES[:len(cols)]
    res = solve_least_squares(y[:, cols], rhs, w, names)
    cov = res.covariance
    notes: tuple[str, ...] = ()
    if error_rows is not None:
        cov = cov + propagated_covariance(y[:, cols], w, error_rows, model_uncertainty)
        notes = (_model_note(model_uncertainty),)
    est = build_estimate(
        res.params, cov, np.ones(len(cols), bool), names, method=method,
        frame=frame_name(dyn), samples=n_s + n_static, condition_number=float(np.linalg.cond(yw[:, cols])),
        residual_rms=res.residual_rms, limits=effective_limits(limits, check),
    )
    return replace(est, notes=est.notes + notes) if notes else est


def _model_note(unc: ModelUncertainty) -> str:
    note = f"std includes the unloaded model's uncertainty ({unc.source})"
    if unc.motion_regressor is None:
        note += "; in motion only its gravity part is declared"
    return note


INERTIA_ADVICE = "for the inertia use a faster, more varied motion (e.g. an excitation trajectory)"
"""The undetermined-inertia note's suggestion for a motion that was not planned for the payload."""

INERTIA_RSD = 0.25
"""An inertia component about the CoM counts as determined when its std is at most this fraction of
its own magnitude (moments Ixx, Iyy, Izz) or of the largest moment (products Ixy, Ixz, Iyz)."""


def residual_correlation(resid: np.ndarray) -> float:
    """Variance inflation for serially correlated residuals (N, n): the integrated autocorrelation
    time 1 + 2 sum_k rho_k per joint (summed while rho_k > 0, initial positive sequence), averaged over
    the joints weighted by their residual variance; >= 1. Least squares assumes independent rows;
    filtered signals and unmodelled dynamics (friction, model error) leave residuals correlated over
    many samples, and the parameter variance is then larger by about this factor."""
    r = np.asarray(resid, float)
    if r.ndim == 1:
        r = r[:, None]
    n_s = r.shape[0]
    if n_s < 20:
        return 1.0
    r = r - r.mean(axis=0)
    var = np.mean(r ** 2, axis=0)
    nfft = 1 << int(np.ceil(np.log2(2 * n_s)))
    spec = np.fft.rfft(r, nfft, axis=0)
    ac = np.fft.irfft(np.abs(spec) ** 2, nfft, axis=0)[: n_s // 4]
    taus = np.ones(r.shape[1])
    for j in range(r.shape[1]):
        if ac[0, j] <= 0:
            continue
        rho = ac[1:, j] / ac[0, j]
        stop = int(np.argmax(rho <= 0)) if np.any(rho <= 0) else rho.size
        taus[j] = 1.0 + 2.0 * float(np.sum(rho[:stop]))
    total = float(np.sum(var))
    return max(1.0, float(np.sum(var * taus) / total)) if total > 0 else 1.0


JACKKNIFE_BLOCKS = 10
"""Contiguous stretches of a motion left out one at a time by :func:`block_jackknife_covariance`."""


def block_jackknife_covariance(y: np.ndarray, rhs: np.ndarray, w: np.ndarray, n: int,
                               blocks: int = JACKKNIFE_BLOCKS) -> np.ndarray | None:
    """Delete-one-block jackknife covariance of the weighted least-squares fit ``rhs ~ y p`` whose rows
    come ``n`` per sample in time order: the samples are cut into ``blocks`` contiguous stretches, each
    left out once, and (B - 1) / B sum (p_b - mean p)^2 is returned -- it sees residual structure
    (model error, friction) correlated over whole stretches of the motion, which the row-independent
    covariance does not. None when there are too few samples per block, or when leaving one out leaves a
    direction undetermined."""
    n_s = y.shape[0] // n
    if n_s < 20 * blocks:
        return None
    sw = np.sqrt(w)
    norms = np.linalg.norm(y * sw[:, None], axis=0)
    norms = np.where(norms > 0, norms, 1.0)
    ys = y * (sw[:, None] / norms)  # unit columns: the normal equations stay well scaled
    rs = rhs * sw
    # each block's normal equations once; leaving a block out subtracts its share (10 small solves, not 10 fits)
    bounds = [(int(p[0]) * n, (int(p[-1]) + 1) * n) for p in np.array_split(np.arange(n_s), blocks)]
    gram = np.array([ys[a:b].T @ ys[a:b] for a, b in bounds])
    proj = np.array([ys[a:b].T @ rs[a:b] for a, b in bounds])
    total_g, total_p = gram.sum(axis=0), proj.sum(axis=0)
    try:
        est = np.array([np.linalg.solve(total_g - g, total_p - c) for g, c in zip(gram, proj)])
    except np.linalg.LinAlgError:  # a block carries a direction alone: leaving it out leaves it undetermined
        return None
    est = est / norms
    d = est - est.mean(axis=0)
    return (blocks - 1) / blocks * (d.T @ d)


def _inertia_determined(p10: np.ndarray, cov10: np.ndarray, rsd: float, own_scale: bool = True
                        ) -> tuple[list[str], str]:
    """(undetermined I_c components, reason) of a 10-parameter fit; ([], '') when all are determined.
    ``own_scale``: a moment's std is judged against its own magnitude (else, like the products,
    against the largest moment: a thin object's small moment counts as determined when the tensor is)."""
    derived = derived_parameters(p10)
    std = derived_std(p10, cov10)[3:]
    inertia = derived[3:]
    problem = inertia_problem(p10[0], derived[:3], inertia)
    diag = np.array([0, 3, 5])
    scale = float(np.max(np.abs(inertia[diag])))
    bad = []
    for i, nm in enumerate(ICOM_NAMES):
        ref = abs(inertia[i]) if i in diag and own_scale else scale
        if not std[i] <= rsd * ref:
            bad.append(nm)
    detail = ", ".join(f"{nm} {inertia[i]:.3g} +- {std[i]:.2g}" for i, nm in enumerate(ICOM_NAMES))
    if problem:
        return list(ICOM_NAMES), f"the fitted inertia is not physical ({problem}; {detail} kg m^2)"
    if bad:
        which = "moment" if own_scale else "largest moment"
        return bad, f"std above {rsd:.0%} of the {which} for {', '.join(bad)} ({detail} kg m^2)"
    return [], ""


def estimate_payload_motion(
    dyn: RigidBodyDynamics,
    q: np.ndarray,
    dq: np.ndarray,
    ddq: np.ndarray,
    dtau: np.ndarray,
    *,
    weights: np.ndarray | None = None,
    method: str = "motion",
    limits: PayloadLimits | None = None,
    inertia_rsd: float = INERTIA_RSD,
    correlated: bool = True,
    model_uncertainty: ModelUncertainty | None = None,
) -> PayloadEstimate:
    """Payload from a motion: ``Y_L(q, dq, ddq) p_L = dtau`` (N, n each; dtau = loaded torque minus
    the unloaded reference: a measured unloaded run of the same motion, or a model's prediction).

    Mass and CoM never depend on whether the motion also determines the inertia: all ten parameters
    are fitted when the regressor has full rank (the mass and CoM std then include the inertia's
    uncertainty), otherwise the four gravity parameters with the inertia columns the data do not see
    left out. The inertia about the CoM is reported only when it is physically consistent and every
    component is determined (std <= ``inertia_rsd`` of its scale, see :data:`INERTIA_RSD`); otherwise
    ``inertia`` is None, ``undetermined`` names the components and ``notes`` says why (and which are
    determined). Honest std: with ``correlated`` every variance is the larger of the least-squares one
    scaled by :func:`residual_correlation` and the :func:`block_jackknife_covariance` one (said in
    ``notes``). When ``dtau``'s reference is a model's prediction, ``model_uncertainty`` says how wrong
    that model may be (:mod:`.model_uncertainty`: a data-sheet model's declared link errors and offsets,
    an identified model's covariance); its effect on the fit is added (:func:`propagated_covariance`).
    Without it a model error common to the whole motion biases the fit beyond the reported std.
    Raises :class:`~.least_squares.RankDeficientError` (with the poses needed) when not even
    mass and CoM are determined, :class:`PayloadRejected` for an impossible mass or CoM.
    """
    n = dyn.n
    q = sample_array(q, "q", n)
    n_s = q.shape[0]
    dq, ddq = sample_array(dq, "dq", n, n_s), sample_array(ddq, "ddq", n, n_s)
    rhs = sample_array(dtau, "dtau", n, n_s).reshape(-1)
    y = stack_rows([dyn.payload_regressor(a, b, c) for a, b, c in zip(q, dq, ddq)])
    rows = None if model_uncertainty is None else (lambda: motion_error_rows(model_uncertainty, q, dq, ddq))
    return fit_payload_rows(dyn, q, y, rhs, weights, method=method, limits=limits, inertia_rsd=inertia_rsd,
                            correlated=correlated, model_uncertainty=model_uncertainty, error_rows=rows)


def _estimated_error(y: np.ndarray, w: np.ndarray, resid: np.ndarray, rows: np.ndarray, unc: ModelUncertainty,
                     variance: float) -> tuple[np.ndarray, np.ndarray]:
    """(correction of the parameters, covariance added) when the model error ``rows`` δ (δ ~ N(0, P), P =
    blockdiag(Σ, σ_o²)) is estimated with the payload rather than only propagated: the part of ``rows`` the payload
    columns ``y`` cannot explain (E⊥ = E - y S, S = (yᵀ W y)⁻¹ yᵀ W E) shows δ in the residual ``resid`` of the fit
    at noise ``variance`` (per unit weight, N m²), so δ's posterior is (P⁻¹ + E⊥ᵀ W E⊥ / v)⁻¹ and its mean
    that times E⊥ᵀ W resid / v; the parameters move by -S δ̂ and gain S P_post Sᵀ (with no information in the data:
    :func:`.model_uncertainty.propagated_covariance`'s S P Sᵀ)."""
    p = unc.covariance.shape[0]
    prior = np.zeros((rows.shape[1], rows.shape[1]))
    prior[:p, :p] = unc.covariance
    prior[p:, p:] = np.diag(np.asarray(unc.offset_std, float) ** 2)
    keep = np.flatnonzero(np.diag(prior) > 0)
    if keep.size == 0:
        return np.zeros(y.shape[1]), np.zeros((y.shape[1], y.shape[1]))
    prior, e = prior[np.ix_(keep, keep)], rows[:, keep]
    yw = y * w[:, None]
    sens = np.linalg.solve(y.T @ yw, yw.T @ e)
    perp = (e - y @ sens) * np.sqrt(w)[:, None]
    post = np.linalg.inv(np.linalg.inv(prior) + perp.T @ perp / variance)
    post = 0.5 * (post + post.T)
    delta = post @ (perp.T @ (resid * np.sqrt(w))) / variance
    return -sens @ delta, sens @ post @ sens.T


def fit_payload_rows(dyn: RigidBodyDynamics, q: np.ndarray, y: np.ndarray, rhs: np.ndarray, weights=None, *,
                     method: str, limits: PayloadLimits | None = None, inertia_rsd: float = INERTIA_RSD,
                     correlated: bool = True, model_uncertainty: ModelUncertainty | None = None,
                     error_rows=None, own_scale: bool = True, project: bool = False,
                     inertia_advice: str = INERTIA_ADVICE, estimate_error: bool = False) -> PayloadEstimate:
    """The fit of :func:`estimate_payload_motion` on given rows: ``y`` (N n x 10) the payload rows of
    the N samples at ``q`` (N, n), ``rhs`` (N n) what they must explain; ``error_rows()`` the rows of
    ``model_uncertainty``'s error in the same form (e.g. filtered alike), when ``rhs`` holds a model's
    prediction. ``own_scale``: see :func:`_inertia_determined`; ``project``: a fitted inertia that is not
    physical is replaced by the nearest physical one (:func:`.payload_result.nearest_physical_inertia`)
    before it is judged, with a note; ``inertia_advice``: what the note suggests when the inertia is not
    determined; ``estimate_error``: the model error of ``error_rows`` is fitted with the payload within its declared
    σ (:func:`_estimated_error`: what of it the payload's columns cannot explain shows in the residual) instead of
    only propagated into the std."""
    n = dyn.n
    n_s = q.shape[0]
    w = row_weights(weights, n_s, n)
    w = np.ones(y.shape[0]) if w is None else w
    sw = np.sqrt(w)
    check_pose_rank(dyn, q, y[:, :4] * sw[:, None])
    keep = full_rank_columns(y * sw[:, None])
    inertia_cols = [int(c) for c in keep if c >= 4]
    cols = [0, 1, 2, 3] + inertia_cols
    res = solve_least_squares(y[:, cols], rhs, w, [PAYLOAD_NAMES[c] for c in cols])
    params = res.params
    resid = (rhs - y[:, cols] @ params).reshape(n_s, n)
    notes: list[str] = []
    cov = res.covariance
    scale = np.ones(len(cols))
    if correlated:
        factor = residual_correlation(np.where(w.reshape(n_s, n) > 0, resid, 0.0))
        scale = np.full(len(cols), factor)
        jk = block_jackknife_covariance(y[:, cols], rhs, w, n)
        if jk is not None:
            scale = np.maximum(scale, np.diag(jk) / np.maximum(np.diag(cov), 1e-300))
        if scale.max() > 1.5:
            d = np.sqrt(scale)
            cov = cov * np.outer(d, d)
            notes.append(f"fit residuals show structure (correlated over ~{factor:.0f} samples; leaving out each of "
                         f"{JACKKNIFE_BLOCKS} stretches of the motion moves the estimate by more than noise): std "
                         f"scaled by {d[:4].min():.2g}..{d[:4].max():.2g} for mass and CoM")
    if model_uncertainty is not None and error_rows is not None:
        if estimate_error:
            shift, added = _estimated_error(y[:, cols], w, resid.reshape(-1), error_rows(), model_uncertainty,
                                            res.sigma2 * float(np.max(scale)))
            params = params + shift
            cov = cov + added
        else:
            cov = cov + propagated_covariance(y[:, cols], w, error_rows(), model_uncertainty)
        notes.append(_model_note(model_uncertainty) + ("; fitted with the payload within it" if estimate_error else ""))
    p10 = np.zeros(10)
    p10[cols] = params
    cov10 = np.zeros((10, 10))
    cov10[np.ix_(cols, cols)] = cov
    if len(inertia_cols) == 6 and project:
        derived = derived_parameters(p10)
        problem = inertia_problem(p10[0], derived[:3], derived[3:])
        if problem and p10[0] > 0:
            p10 = nearest_physical_inertia(p10, cov10)
            notes.append(f"the fitted inertia was not physical ({problem}): replaced by the nearest physical one "
                         "within its uncertainty")
    if len(inertia_cols) == 6:
        undetermined, why = _inertia_determined(p10, cov10, inertia_rsd, own_scale)
    else:
        undetermined = list(ICOM_NAMES)
        missing = [PAYLOAD_NAMES[c] for c in range(4, 10) if c not in inertia_cols]
        why = f"the motion does not excite {', '.join(missing)} (about the payload-frame origin) at all"
    common = dict(frame=frame_name(dyn), samples=n_s, residual_rms=float(np.sqrt(np.mean(resid ** 2))),
                  condition_number=res.condition_number, limits=effective_limits(limits, True))
    if not undetermined:
        est = build_estimate(p10, cov10, np.ones(10, bool), PAYLOAD_NAMES, method=method, **common)
        return est if is_no_payload(est) else replace(est, notes=est.notes + tuple(notes))
    determined = [nm for nm in ICOM_NAMES if nm not in undetermined]
    notes.append("inertia not determined by this motion: " + why
                 + (f"; determined: {', '.join(determined)}" if determined else "")
                 + f" -- mass and CoM do not depend on it; {inertia_advice}")
    est = build_estimate(p10[:4], cov10[:4, :4], np.ones(4, bool), GRAVITY_NAMES,
                          method=method + " (inertia not determined)", **common)
    if is_no_payload(est):  # nothing held: notes on the inertia of nothing do not apply
        return est
    return replace(est, undetermined=tuple(undetermined), notes=est.notes + tuple(notes))


__all__ = [
    "INERTIA_ADVICE",
    "INERTIA_RSD",
    "JACKKNIFE_BLOCKS",
    "block_jackknife_covariance",
    "estimate_payload_full",
    "estimate_payload_motion",
    "fit_payload_rows",
    "residual_correlation",
]
