"""Payload estimation from joint torques (Gaz & De Luca, IROS 2017 = paper 000).

Payload parameters ``p_L = (m, m cx, m cy, m cz, Jxx, Jxy, Jxz, Jyy, Jyz, Jzz)`` in the payload
frame (J about the payload-frame origin), gravity subset ``p_L,g`` = the first four.

* :func:`estimate_payload_gravity` — static samples, the pick-estimate-and-move procedure of
  Sec. VI-A: ``Delta tau = Y_Lg(q) p_L,g`` with ``Delta tau = tau_L - g(q)`` (one-shot, eq. 26, the
  unloaded torque from a model) or ``tau_L - tau_unloaded`` measured at the same poses
  (differential; cancels model errors and sensor offsets). ``Y_Lg = dyn.payload_gravity_regressor``
  equals ``Y_g J_eps`` of eqs. (22) and (27).
* :func:`estimate_payload_two_stage` — eqs. (24), (25), (28): ``p_L = J_eps^# (pi_L - pi)``;
  :func:`identify_coefficients` gives pi and pi_L (with covariances) from data.
* :func:`estimate_payload_full` — all 10 parameters from dynamic motion, optionally stacked with
  static gravity equations (eq. 45); refuses (or flags) data that do not excite the inertia.

Every estimator returns a :class:`~.estimate.PayloadEstimate` with standard deviations from the
least-squares covariance plus, where a model stands in for the unloaded torque and its
``model_uncertainty`` is given, that model's error (:mod:`.model_uncertainty`), propagated to CoM and
inertia about the CoM by the delta method, and
rejects physically impossible results with :class:`PayloadRejected`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

import numpy as np

from ..model.base_parameters import BaseParameters, compute_base_parameters, payload_jacobian
from ..model.dynamics import RigidBodyDynamics
from ..model.parameters import BodyInertia, check_consistency, sym_from_vec6, vec6_from_sym
from ..model.transforms import skew
from .data import Samples, check_static
from .estimate import PayloadEstimate
from .least_squares import LSResult, RankDeficientError, full_rank_columns, solve_least_squares, stack_rows
from .model_uncertainty import (
    ModelUncertainty,
    error_covariance,
    generalized_fit,
    motion_error_rows,
    propagated_covariance,
)

PAYLOAD_NAMES = ("m", "mcx", "mcy", "mcz", "Jxx", "Jxy", "Jxz", "Jyy", "Jyz", "Jzz")
GRAVITY_NAMES = PAYLOAD_NAMES[:4]
_COM = ("cx", "cy", "cz")
_ICOM = ("Ixx", "Ixy", "Ixz", "Iyy", "Iyz", "Izz")
METHODS = ("one-shot", "differential")
# N m, std of a static mean torque assumed when a model-uncertainty fit is given no weights.
DEFAULT_TORQUE_NOISE = 0.05


class PayloadRejected(ValueError):
    """The estimate is physically impossible or outside the configured limits (message says why)."""


class PayloadDataError(ValueError):
    """Inputs to a payload estimator are malformed (shapes, NaN/inf, too few samples)."""


class InertiaNotExcited(PayloadRejected):
    """The motion does not determine the payload inertia; ``columns`` names the undetermined ones."""

    def __init__(self, message: str, columns: tuple[str, ...]):
        super().__init__(message)
        self.columns = columns


@dataclass(frozen=True)
class PayloadLimits:
    """Plausibility limits: mass in (min_mass, max_payload] kg, |CoM| <= max_com_radius m from the
    payload-frame origin, inertia about the CoM positive definite with the triangle inequality.

    ``no_payload_below`` (kg): a mass within this of zero even at 3 standard deviations (|m| + 3 σ_m
    below it) is "no payload held" — a 0 kg result with that note, not an error (its CoM would be noise
    divided by a near-zero mass). A mass that is merely not determined (large σ_m) or clearly negative
    (loaded and unloaded data swapped) is still refused."""

    max_payload: float = 50.0
    max_com_radius: float = 1.0
    min_mass: float = 0.0
    no_payload_below: float = 0.05


# ------------------------------------------------------------------------------------------ helpers

def _arr2(a, name: str, n: int | None = None, rows: int | None = None) -> np.ndarray:
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


def _row_weights(weights, n_samples: int, n: int) -> np.ndarray | None:
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
    q = _arr2(q, "q", dyn.n)
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
    q_u = _arr2(q_unloaded, "q_unloaded", n)
    tau_u = _arr2(tau_unloaded, "tau_unloaded", n, q_u.shape[0])
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
                              unloaded_gravity: Callable[[np.ndarray], np.ndarray] | None = None) -> PayloadEstimate:
    """Gravity payload (mass, CoM) from loaded captures against the :func:`anchored_gravity` model.

    The differential method without revisiting every pose unloaded: only the K unloaded captures
    (normally one, at the pick configuration) are measured; ``unloaded_gravity`` is the model anchored
    on them (default the description's); see :func:`estimate_payload_gravity` for q, tau_loaded,
    weights, limits, model_uncertainty and the exceptions.
    """
    g = anchored_gravity(dyn, q_unloaded, tau_unloaded, unloaded_gravity)
    q_u = _arr2(q_unloaded, "q_unloaded", dyn.n)
    k = q_u.shape[0]
    est = estimate_payload_gravity(dyn, q, tau_loaded, None, "one-shot", unloaded_gravity=g, weights=weights,
                                   limits=limits, model_uncertainty=model_uncertainty, anchor=q_u)
    return replace(est, method=f"gravity differential (anchored by {k} unloaded capture(s))")


def _numeric_jacobian(f: Callable[[np.ndarray], np.ndarray], x: np.ndarray) -> np.ndarray:
    f0 = f(x)
    jac = np.zeros((f0.shape[0], x.shape[0]))
    for k in range(x.shape[0]):
        h = 1e-6 * max(abs(x[k]), 1e-3)
        e = np.zeros_like(x)
        e[k] = h
        jac[:, k] = (f(x + e) - f(x - e)) / (2 * h)
    return jac


def _derived(p10: np.ndarray) -> np.ndarray:
    """(cx, cy, cz, I_com(6)) from the 10 payload parameters."""
    m, h = p10[0], p10[1:4]
    c = h / m
    s = skew(h)
    i_c = sym_from_vec6(p10[4:10]) - (s.T @ s) / m
    return np.concatenate([c, vec6_from_sym(i_c)])


def _build_estimate(p: np.ndarray, cov: np.ndarray, identified: np.ndarray, names: Sequence[str],
                    *, method: str, frame: str, samples: int, condition_number: float,
                    residual_rms: float, limits: PayloadLimits | None,
                    offsets: tuple[np.ndarray, np.ndarray, Sequence[str]] | None = None) -> PayloadEstimate:
    """Assemble a PayloadEstimate from the payload parameter vector ``p`` (4 or 10) and covariance.

    ``identified`` marks the components the data determined (others are 0 with std NaN).
    """
    k = p.shape[0]
    std_p = np.sqrt(np.clip(np.diag(cov), 0.0, None))
    std_p = np.where(identified, std_p, np.nan)
    std: dict[str, float] = {names[i]: float(std_p[i]) for i in range(k)}
    std["mass"] = std["m"]
    m = float(p[0])
    has_inertia = k == 10 and bool(identified[4:10].all())
    if not np.all(np.isfinite(p)):
        raise PayloadRejected(f"estimate is not finite: {dict(zip(names, p.tolist()))}")
    if limits is not None and abs(m) + 3.0 * std["m"] < limits.no_payload_below:
        return _no_payload(m, std, method=method, frame=frame, samples=samples, condition_number=condition_number,
                           residual_rms=residual_rms, below=limits.no_payload_below)
    if limits is not None:
        if m <= limits.min_mass:
            raise PayloadRejected(
                f"estimated payload mass {m:.4g} kg (std {std['m']:.2g}) is not above {limits.min_mass} kg: "
                "no payload is held, or the unloaded reference torques are wrong"
            )
        if m > limits.max_payload:
            raise PayloadRejected(
                f"estimated payload mass {m:.4g} kg exceeds the limit of {limits.max_payload} kg: "
                "check the torque data (units, offsets, joint order) or raise --max-payload"
            )
    if m == 0:
        raise PayloadRejected("estimated payload mass is exactly zero: CoM undefined")
    pfull = np.zeros(10)
    pfull[:k] = p
    cfull = np.zeros((10, 10))
    cfull[:k, :k] = np.where(np.outer(identified, identified), cov, 0.0)
    if not has_inertia:
        # Give the CoM derivation a harmless, well-defined inertia (only c is used then).
        pfull[4:10] = 0.0
    derived = _derived(pfull)
    jac = _numeric_jacobian(_derived, pfull)
    dcov = jac @ cfull @ jac.T
    dstd = np.sqrt(np.clip(np.diag(dcov), 0.0, None))
    com = derived[:3]
    for i, nm in enumerate(_COM):
        std[nm] = float(dstd[i]) if identified[1 + i] else float("nan")
        if not identified[1 + i]:
            com[i] = 0.0
    inertia = None
    if has_inertia:
        inertia = derived[3:]
        for i, nm in enumerate(_ICOM):
            std[nm] = float(dstd[3 + i])
    if limits is not None:
        r = float(np.linalg.norm(com))
        if r > limits.max_com_radius:
            raise PayloadRejected(
                f"estimated CoM {np.round(com, 4).tolist()} m is {r:.3g} m from the payload frame, beyond "
                f"max_com_radius {limits.max_com_radius} m: the data do not describe a held payload"
            )
        if inertia is not None:
            problem = inertia_problem(m, com, inertia)
            if problem:
                raise PayloadRejected(f"estimated payload inertia is physically impossible: {problem}")
    params = {names[i]: float(p[i]) for i in range(k) if identified[i]}
    off = None
    if offsets is not None:
        off, off_std, off_names = offsets
        for nm, v, s in zip(off_names, off, off_std):
            params[nm] = float(v)
            std[nm] = float(s)
    return PayloadEstimate(
        mass=m, com=com, inertia=inertia, std=std, condition_number=float(condition_number),
        residual_rms=float(residual_rms), samples=int(samples), method=method, frame=frame,
        params=params, offsets=off,
    )


def _no_payload(m: float, std: dict[str, float], *, method: str, frame: str, samples: int, condition_number: float,
                residual_rms: float, below: float) -> PayloadEstimate:
    """The 0 kg result of a fit whose mass is confidently below ``below`` kg (see :class:`PayloadLimits`)."""
    note = (f"no payload detected: mass {m:+.4f} ± {std['m']:.4f} kg (1 σ) is within {below:g} kg of 0 at 3 σ; "
            "the result is 0 kg (unloaded)")
    return PayloadEstimate(mass=0.0, com=np.zeros(3), inertia=None, frame=frame, std={"mass": std["m"], "m": std["m"]},
                           condition_number=float(condition_number), residual_rms=float(residual_rms),
                           samples=int(samples), method=f"{method} (no payload)", undetermined=("cx", "cy", "cz"),
                           notes=(note,))


def inertia_problem(mass: float, com: np.ndarray, inertia: np.ndarray, tol: float = 1e-12) -> str:
    """'' if the inertia about the CoM [xx, xy, xz, yy, yz, zz] (kg m^2) is physically consistent,
    else one phrase naming the principal moments once and every violated condition."""
    rep = check_consistency(BodyInertia(float(mass), np.asarray(com, float), sym_from_vec6(inertia)), tol)
    if rep.ok:
        return ""
    mom = np.asarray(rep.principal_moments, float)
    if not np.all(np.isfinite(mom)):
        return "; ".join(rep.problems)
    what = []
    if mom[0] <= tol:
        what.append("not positive definite")
    if mom[0] + mom[1] < mom[2] - tol:
        what.append("violates the triangle inequality")
    return (f"principal moments about the CoM {np.array2string(mom, precision=4)} kg m^2 "
            f"({' and '.join(what) or '; '.join(rep.problems)})")


def _frame_name(dyn: RigidBodyDynamics) -> str:
    return dyn.desc.payload_frame_name


def _limits(limits: PayloadLimits | None, check: bool) -> PayloadLimits | None:
    if not check:
        return None
    return limits if limits is not None else PayloadLimits()


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


def check_pose_rank(dyn: RigidBodyDynamics, q: np.ndarray, y: np.ndarray | None = None,
                    rtol: float = POSE_RANK_RTOL) -> None:
    """Raise :class:`~.least_squares.RankDeficientError` unless the poses ``q`` (N, n) determine the
    four gravity parameters (m, m cx, m cy, m cz); the message says how many distinct poses there are,
    which parameters are missing and the minimum number of poses needed -- ceil(4 / r1), r1 the rank
    one pose gives (3 for a 6- or 7-joint arm: one orientation cannot tell where along gravity the CoM
    lies). ``y``: the stacked payload gravity regressor if already computed (first 4 columns used)."""
    q = _arr2(q, "q", dyn.n)
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
    raise RankDeficientError(
        f"the poses are rank deficient for the payload: {poses} determine only {rank} of the 4 gravity parameters "
        f"(m, m cx, m cy, m cz; not determined: {', '.join(weak)}); {advice}", weak)


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
    Raises :class:`PayloadDataError` on bad input, :class:`~.least_squares.RankDeficientError` when
    the poses do not determine the parameters, :class:`PayloadRejected` for impossible results.
    """
    n = dyn.n
    q = _arr2(q, "q", n)
    n_s = q.shape[0]
    tau_l = _arr2(tau_loaded, "tau_loaded", n, n_s)
    if dq is not None:
        check_static(Samples(q, tau_l, dq=_arr2(dq, "dq", n, n_s), joint_names=dyn.desc.joint_names), max_speed)
    if method is None:
        method = "one-shot" if tau_unloaded is None else "differential"
    if method not in METHODS:
        raise PayloadDataError(f"method must be one of {METHODS}, got {method!r}")
    if method == "differential":
        if tau_unloaded is None:
            raise PayloadDataError("method 'differential' needs tau_unloaded measured at the same poses")
        ref = _arr2(tau_unloaded, "tau_unloaded", n, n_s)
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
    row_w = _row_weights(weights, n_s, n)
    notes: tuple[str, ...] = ()
    if model_uncertainty is not None and method != "differential":
        noise_var = np.full(n_s * n, DEFAULT_TORQUE_NOISE ** 2) if row_w is None else 1.0 / row_w
        c = error_covariance(model_uncertainty, q, anchor) + np.diag(noise_var)
        if anchor is not None:  # the anchor's own noise is common to every pose (assumed no larger than a capture's)
            c = c + np.kron(np.ones((n_s, n_s)), np.diag(noise_var[:n]) / np.atleast_2d(anchor).shape[0])
        fit = generalized_fit(y, dtau, c, names)
        params, cov, rms = fit.params, fit.covariance, fit.residual_rms
        notes = (f"σ includes the unloaded model's uncertainty ({model_uncertainty.source})",)
        if fit.scale > 1.0:
            notes += (f"the torques scatter {np.sqrt(fit.scale):.2g}x more than noise and model uncertainty "
                      "declare: σ scaled up by that",)
    else:
        res = solve_least_squares(y, dtau, row_w, names)
        params, cov, rms = res.params, res.covariance, res.residual_rms
    offsets = None
    if estimate_offsets:
        offsets = (params[4:], np.sqrt(np.clip(np.diag(cov)[4:], 0.0, None)), names[4:])
    est = _build_estimate(
        params[:4], cov[:4, :4], np.ones(4, bool), GRAVITY_NAMES,
        method=f"gravity {method}" + (" + offsets" if estimate_offsets else ""), frame=_frame_name(dyn),
        samples=n_s, condition_number=float(np.linalg.cond(y[:, :4])), residual_rms=rms,
        limits=_limits(limits, check), offsets=offsets,
    )
    return replace(est, notes=est.notes + notes) if notes else est


# ------------------------------------------------------------------------------------------ two-stage

def identify_coefficients(dyn: RigidBodyDynamics, base: BaseParameters, q: np.ndarray,
                          dq: np.ndarray | None = None, ddq: np.ndarray | None = None,
                          tau: np.ndarray | None = None, weights: np.ndarray | None = None) -> LSResult:
    """Dynamic coefficients pi (eq. 14 / 24) by least squares on the stacked base regressor.

    ``base.kind == "gravity"``: static samples, only q and tau are used; ``"full"``: q, dq, ddq, tau.
    """
    n = dyn.n
    q = _arr2(q, "q", n)
    n_s = q.shape[0]
    if tau is None:
        raise PayloadDataError("identify_coefficients needs measured torques tau")
    tau = _arr2(tau, "tau", n, n_s)
    if base.kind == "gravity":
        blocks = [base.base_regressor(dyn.gravity_regressor(qk)) for qk in q]
    else:
        if dq is None or ddq is None:
            raise PayloadDataError("full dynamic coefficients need dq and ddq")
        dq, ddq = _arr2(dq, "dq", n, n_s), _arr2(ddq, "ddq", n, n_s)
        blocks = [base.base_regressor(dyn.regressor(a, b, c)) for a, b, c in zip(q, dq, ddq)]
    names = [f"pi{i + 1}" for i in range(base.rank)]
    return solve_least_squares(stack_rows(blocks), tau.reshape(-1), _row_weights(weights, n_s, n), names)


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
    return _build_estimate(
        p, cov, identified, names, frame=frame, samples=samples,
        method="two-stage" + (f" (not determined: {', '.join(undetermined)})" if undetermined else ""),
        condition_number=float(np.linalg.cond(js)), residual_rms=float(np.sqrt(np.mean(resid**2))),
        limits=_limits(limits, check),
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
                                     frame=_frame_name(dyn), samples=n_s, **kwargs)
    return est


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
    q = _arr2(q, "q", n)
    n_s = q.shape[0]
    dq, ddq = _arr2(dq, "dq", n, n_s), _arr2(ddq, "ddq", n, n_s)
    tau_l = _arr2(tau_loaded, "tau_loaded", n, n_s)
    if tau_unloaded is not None:
        ref = _arr2(tau_unloaded, "tau_unloaded", n, n_s)
        how = "differential"
    else:
        ref = np.array([dyn.inverse_dynamics(a, b, c) for a, b, c in zip(q, dq, ddq)])
        how = "one-shot"
    y = stack_rows([dyn.payload_regressor(a, b, c) for a, b, c in zip(q, dq, ddq)])
    rhs = (tau_l - ref).reshape(-1)
    w = _row_weights(weights, n_s, n)
    if w is None:
        w = np.ones(y.shape[0])
    n_static = 0
    if static_q is not None:
        sq = _arr2(static_q, "static_q", n)
        n_static = sq.shape[0]
        st_l = _arr2(static_tau_loaded, "static_tau_loaded", n, n_static)
        if static_tau_unloaded is not None:
            st_ref = _arr2(static_tau_unloaded, "static_tau_unloaded", n, n_static)
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
    est = _build_estimate(
        res.params, cov, np.ones(len(cols), bool), names, method=method,
        frame=_frame_name(dyn), samples=n_s + n_static, condition_number=float(np.linalg.cond(yw[:, cols])),
        residual_rms=res.residual_rms, limits=_limits(limits, check),
    )
    return replace(est, notes=est.notes + notes) if notes else est


def _model_note(unc: ModelUncertainty) -> str:
    note = f"std includes the unloaded model's uncertainty ({unc.source})"
    if unc.motion_regressor is None:
        note += "; in motion only its gravity part is declared"
    return note


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
    covariance does not. None when there are too few samples per block."""
    n_s = y.shape[0] // n
    if n_s < 20 * blocks:
        return None
    sw = np.sqrt(w)
    est = []
    for part in np.array_split(np.arange(n_s), blocks):
        keep = np.ones(n_s, bool)
        keep[part] = False
        rows = np.repeat(keep, n)
        sol, *_ = np.linalg.lstsq(y[rows] * sw[rows, None], rhs[rows] * sw[rows], rcond=None)
        est.append(sol)
    est = np.array(est)
    d = est - est.mean(axis=0)
    return (blocks - 1) / blocks * (d.T @ d)


def _inertia_determined(p10: np.ndarray, cov10: np.ndarray, rsd: float) -> tuple[list[str], str]:
    """(undetermined I_c components, reason) of a 10-parameter fit; ([], '') when all are determined."""
    derived = _derived(p10)
    jac = _numeric_jacobian(_derived, p10)
    std = np.sqrt(np.clip(np.diag(jac @ cov10 @ jac.T), 0.0, None))[3:]
    inertia = derived[3:]
    problem = inertia_problem(p10[0], derived[:3], inertia)
    diag = np.array([0, 3, 5])
    scale = float(np.max(np.abs(inertia[diag])))
    bad = []
    for i, nm in enumerate(_ICOM):
        ref = abs(inertia[i]) if i in diag else scale
        if not std[i] <= rsd * ref:
            bad.append(nm)
    detail = ", ".join(f"{nm} {inertia[i]:.3g} +- {std[i]:.2g}" for i, nm in enumerate(_ICOM))
    if problem:
        return list(_ICOM), f"the fitted inertia is not physical ({problem}; {detail} kg m^2)"
    if bad:
        return bad, (f"std above {rsd:.0%} of the moment for {', '.join(bad)} ({detail} kg m^2)")
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
    q = _arr2(q, "q", n)
    n_s = q.shape[0]
    dq, ddq = _arr2(dq, "dq", n, n_s), _arr2(ddq, "ddq", n, n_s)
    rhs = _arr2(dtau, "dtau", n, n_s).reshape(-1)
    y = stack_rows([dyn.payload_regressor(a, b, c) for a, b, c in zip(q, dq, ddq)])
    w = _row_weights(weights, n_s, n)
    w = np.ones(y.shape[0]) if w is None else w
    sw = np.sqrt(w)
    check_pose_rank(dyn, q, y[:, :4] * sw[:, None])
    keep = full_rank_columns(y * sw[:, None])
    inertia_cols = [int(c) for c in keep if c >= 4]
    cols = [0, 1, 2, 3] + inertia_cols
    res = solve_least_squares(y[:, cols], rhs, w, [PAYLOAD_NAMES[c] for c in cols])
    resid = (rhs - y[:, cols] @ res.params).reshape(n_s, n)
    notes: list[str] = []
    cov = res.covariance
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
    if model_uncertainty is not None:
        cov = cov + propagated_covariance(y[:, cols], w, motion_error_rows(model_uncertainty, q, dq, ddq),
                                          model_uncertainty)
        notes.append(_model_note(model_uncertainty))
    p10 = np.zeros(10)
    p10[cols] = res.params
    cov10 = np.zeros((10, 10))
    cov10[np.ix_(cols, cols)] = cov
    if len(inertia_cols) == 6:
        undetermined, why = _inertia_determined(p10, cov10, inertia_rsd)
    else:
        undetermined = list(_ICOM)
        missing = [PAYLOAD_NAMES[c] for c in range(4, 10) if c not in inertia_cols]
        why = f"the motion does not excite {', '.join(missing)} (about the payload-frame origin) at all"
    common = dict(frame=_frame_name(dyn), samples=n_s, residual_rms=float(np.sqrt(np.mean(resid ** 2))),
                  condition_number=res.condition_number, limits=_limits(limits, True))
    if not undetermined:
        return replace(_build_estimate(p10, cov10, np.ones(10, bool), PAYLOAD_NAMES, method=method, **common),
                       notes=tuple(notes))
    determined = [nm for nm in _ICOM if nm not in undetermined]
    notes.append("inertia not determined by this motion: " + why
                 + (f"; determined: {', '.join(determined)}" if determined else "")
                 + " -- mass and CoM do not depend on it; for the inertia use a faster, more varied motion "
                   "(e.g. an excitation trajectory)")
    est = _build_estimate(p10[:4], cov10[:4, :4], np.ones(4, bool), GRAVITY_NAMES,
                          method=method + " (inertia not determined)", **common)
    return replace(est, undetermined=tuple(undetermined), notes=tuple(notes))


def cramer_rao_std(dyn: RigidBodyDynamics, q: np.ndarray, sigma: float, differential: bool = False) -> np.ndarray:
    """Lower bound on the std of (m, m cx, m cy, m cz) for i.i.d. torque noise ``sigma`` (N m):
    sqrt(diag(sigma^2 (Y^T Y)^-1)) of the static design ``q``; differential doubles the variance."""
    y = payload_gravity_rows(dyn, q)
    var = sigma**2 * (2.0 if differential else 1.0)
    return np.sqrt(np.diag(var * np.linalg.inv(y.T @ y)))


__all__ = [
    "GRAVITY_NAMES",
    "INERTIA_RSD",
    "InertiaNotExcited",
    "PAYLOAD_NAMES",
    "PayloadDataError",
    "PayloadLimits",
    "PayloadRejected",
    "POSE_RANK_RTOL",
    "anchored_gravity",
    "block_jackknife_covariance",
    "check_pose_rank",
    "cramer_rao_std",
    "distinct_poses",
    "estimate_payload_anchored",
    "estimate_payload_full",
    "estimate_payload_gravity",
    "estimate_payload_motion",
    "residual_correlation",
    "estimate_payload_two_stage",
    "estimate_payload_two_stage_from_data",
    "gravity_from_coefficients",
    "identify_coefficients",
    "inertia_problem",
    "payload_gravity_rows",
]
