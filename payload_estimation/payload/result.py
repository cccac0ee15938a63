"""From fitted payload parameters to a :class:`~.estimate.PayloadEstimate`: names, limits, the
delta-method propagation to CoM and inertia about the CoM, and the plausibility checks.

Payload parameters ``p_L = (m, m cx, m cy, m cz, Jxx, Jxy, Jxz, Jyy, Jyz, Jzz)`` in the payload
frame (J about the payload-frame origin; kg, kg m, kg m²); the gravity subset is the first four.
Every estimator of :mod:`.payload` and :mod:`.payload_motion` ends in :func:`build_estimate`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

import numpy as np

from ..errors import PayloadEstimationError
from ..model.dynamics import RigidBodyDynamics
from ..model.parameters import BodyInertia, check_consistency, sym_from_vec6, vec6_from_sym
from ..model.transforms import skew
from .estimate import PayloadEstimate

PAYLOAD_NAMES = ("m", "mcx", "mcy", "mcz", "Jxx", "Jxy", "Jxz", "Jyy", "Jyz", "Jzz")
GRAVITY_NAMES = PAYLOAD_NAMES[:4]
COM_NAMES = ("cx", "cy", "cz")
ICOM_NAMES = ("Ixx", "Ixy", "Ixz", "Iyy", "Iyz", "Izz")


class PayloadRejected(PayloadEstimationError):
    """The estimate is physically impossible or outside the configured limits (message says why)."""


class PayloadDataError(PayloadEstimationError):
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
    divided by a near-zero mass). A mass the data cannot tell from zero (|m| <= 3 σ_m, a large σ_m: the
    stretched-up pose hardly sees it) is "no payload" too when it is not above ``min_mass`` or its CoM is
    implausible (noise over a near-zero mass); its note gives the payload such data would miss (3 σ_m). A
    mass clearly below ``min_mass`` (loaded and unloaded data swapped) is still refused."""

    max_payload: float = 50.0
    max_com_radius: float = 1.0
    min_mass: float = 0.0
    no_payload_below: float = 0.05


def effective_limits(limits: PayloadLimits | None, check: bool) -> PayloadLimits | None:
    """The limits an estimator applies: none when ``check`` is off, the defaults when none are given."""
    if not check:
        return None
    return limits if limits is not None else PayloadLimits()


def frame_name(dyn: RigidBodyDynamics) -> str:
    """The payload frame's name in the robot's TF tree (what an estimate's ``frame`` says)."""
    return dyn.desc.payload_frame_name


def numeric_jacobian(f: Callable[[np.ndarray], np.ndarray], x: np.ndarray) -> np.ndarray:
    """Central-difference Jacobian of ``f`` at ``x`` (relative steps of 1e-6)."""
    f0 = f(x)
    jac = np.zeros((f0.shape[0], x.shape[0]))
    for k in range(x.shape[0]):
        h = 1e-6 * max(abs(x[k]), 1e-3)
        e = np.zeros_like(x)
        e[k] = h
        jac[:, k] = (f(x + e) - f(x - e)) / (2 * h)
    return jac


def derived_parameters(p10: np.ndarray) -> np.ndarray:
    """(cx, cy, cz, I_com(6)) from the 10 payload parameters (m, kg m²)."""
    m, h = p10[0], p10[1:4]
    c = h / m
    s = skew(h)
    i_c = sym_from_vec6(p10[4:10]) - (s.T @ s) / m
    return np.concatenate([c, vec6_from_sym(i_c)])


def derived_std(p10: np.ndarray, cov10: np.ndarray) -> np.ndarray:
    """1-σ of :func:`derived_parameters` (9,) by the delta method from the parameters' covariance."""
    jac = numeric_jacobian(derived_parameters, p10)
    return np.sqrt(np.clip(np.diag(jac @ cov10 @ jac.T), 0.0, None))


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


def nearest_physical_inertia(p10: np.ndarray, cov10: np.ndarray) -> np.ndarray:
    """The 10 parameters with the inertia replaced by the physically consistent one nearest to it in
    the metric of its covariance (mass and first moments fixed): I_c = tr(S) 1 - S with S = L L^T
    the CoM second-moment matrix, which is positive definite and obeys the triangle inequality."""
    from scipy.optimize import least_squares

    m, h = float(p10[0]), np.asarray(p10[1:4], float)
    shift = vec6_from_sym(skew(h).T @ skew(h) / m)  # about the frame origin = about the CoM + this
    cov = cov10[4:, 4:] + 1e-18 * np.eye(6)
    whiten = np.linalg.cholesky(np.linalg.inv(cov)).T
    target = np.asarray(p10[4:], float)
    tri = np.tril_indices(3)

    def inertia(x: np.ndarray) -> np.ndarray:
        low = np.zeros((3, 3))
        low[tri] = x
        s = low @ low.T
        return vec6_from_sym(np.trace(s) * np.eye(3) - s) + shift

    i_c = sym_from_vec6(target - shift)
    w, v = np.linalg.eigh(0.5 * (np.trace(i_c) * np.eye(3) - 2 * i_c))  # the second moments of I_c
    s0 = (v * np.clip(w, 1e-3 * max(float(np.max(w)), 1e-9), None)) @ v.T
    x0 = np.linalg.cholesky(s0)[tri]
    x = least_squares(lambda x: whiten @ (inertia(x) - target), x0).x
    out = np.array(p10, float)
    out[4:] = inertia(x)
    return out


def _check_mass(m: float, std_m: float, limits: PayloadLimits) -> None:
    if m <= limits.min_mass:
        raise PayloadRejected(
            f"estimated payload mass {m:.4g} kg (std {std_m:.2g}) is not above {limits.min_mass} kg: "
            "no payload is held, or the unloaded reference torques are wrong"
        )
    if m > limits.max_payload:
        raise PayloadRejected(
            f"estimated payload mass {m:.4g} kg exceeds the limit of {limits.max_payload} kg: "
            "check the torque data (units, offsets, joint order) or raise --max-payload"
        )


def _check_body(m: float, com: np.ndarray, inertia: np.ndarray | None, limits: PayloadLimits) -> None:
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


NO_PAYLOAD_METHOD = " (no payload)"
"""The suffix of the method of a fit that found no payload (:func:`is_no_payload`)."""


def is_no_payload(est: PayloadEstimate) -> bool:
    """Whether ``est`` is the 0 kg result of a fit that found no payload held."""
    return est.mass == 0.0 and est.method.endswith(NO_PAYLOAD_METHOD)


def no_payload_note(m: float, std_m: float, below: float) -> str:
    """What a fit that found no payload says: the fitted mass ``m`` ± ``std_m`` kg within ``below`` kg of 0 at
    3 σ, or (a larger σ) not distinguishable from 0, with the payload such data would miss."""
    if abs(m) + 3.0 * std_m < below:
        return (f"no payload detected: mass {m:+.4f} ± {std_m:.4f} kg (1 σ) is within {below:g} kg of 0 at 3 σ; "
                "the result is 0 kg (unloaded)")
    return (f"no payload detected: mass {m:+.4f} ± {std_m:.4f} kg (1 σ) is not distinguishable from 0; the result is "
            f"0 kg (unloaded), but these data would miss a payload of up to {3.0 * std_m:.2g} kg (3 σ): at a "
            "stretched-up pose, sample from a bent one to be sure")


def as_no_payload(est: PayloadEstimate, method: str, below: float) -> PayloadEstimate:
    """A no-payload result (:func:`is_no_payload`) under ``method`` + the no-payload suffix, with only the
    no-payload note (a fit's later notes about inertia or CoM do not apply to nothing) and no inertia;
    ``below``: the limits' ``no_payload_below`` (kg) the fit used."""
    note = no_payload_note(est.params.get("m", 0.0), est.std.get("m", float("nan")), below)
    return replace(est, mass=0.0, com=np.zeros(3), inertia=None, method=method + NO_PAYLOAD_METHOD,
                   undetermined=("cx", "cy", "cz"), notes=(note,))


def _no_payload(m: float, std: dict[str, float], *, method: str, frame: str, samples: int, condition_number: float,
                residual_rms: float, below: float) -> PayloadEstimate:
    """The 0 kg result of a fit whose mass is confidently below ``below`` kg (see :class:`PayloadLimits`);
    ``params`` keep the fitted mass ``m``."""
    return PayloadEstimate(mass=0.0, com=np.zeros(3), inertia=None, frame=frame, std={"mass": std["m"], "m": std["m"]},
                           condition_number=float(condition_number), residual_rms=float(residual_rms),
                           samples=int(samples), method=f"{method}{NO_PAYLOAD_METHOD}", undetermined=("cx", "cy", "cz"),
                           params={"m": float(m)},
                           notes=(no_payload_note(m, std["m"], below),))


def build_estimate(p: np.ndarray, cov: np.ndarray, identified: np.ndarray, names: Sequence[str],
                   *, method: str, frame: str, samples: int, condition_number: float,
                   residual_rms: float, limits: PayloadLimits | None,
                   offsets: tuple[np.ndarray, np.ndarray, Sequence[str]] | None = None) -> PayloadEstimate:
    """A PayloadEstimate from the payload parameter vector ``p`` (4 or 10) and its covariance.

    ``identified`` marks the components the data determined (others are 0 with std NaN); ``limits``
    None skips the plausibility checks; ``offsets``: (values, std, names) of fitted torque offsets.
    Raises :class:`PayloadRejected` for a non-finite, implausible or physically impossible result.
    """
    k = p.shape[0]
    std_p = np.where(identified, np.sqrt(np.clip(np.diag(cov), 0.0, None)), np.nan)
    std: dict[str, float] = {names[i]: float(std_p[i]) for i in range(k)}
    std["mass"] = std["m"]
    m = float(p[0])
    if not np.all(np.isfinite(p)):
        raise PayloadRejected(f"estimate is not finite: {dict(zip(names, p.tolist()))}")
    def nothing() -> PayloadEstimate:
        return _no_payload(m, std, method=method, frame=frame, samples=samples, condition_number=condition_number,
                           residual_rms=residual_rms, below=limits.no_payload_below)

    unresolved = abs(m) <= 3.0 * std["m"]  # the data cannot tell this mass from none
    if limits is not None and (abs(m) + 3.0 * std["m"] < limits.no_payload_below
                               or (unresolved and m <= limits.min_mass)):
        return nothing()
    if limits is not None:
        _check_mass(m, std["m"], limits)
    if m == 0:
        raise PayloadRejected("estimated payload mass is exactly zero: CoM undefined")
    has_inertia = k == 10 and bool(identified[4:10].all())
    p10 = np.zeros(10)
    p10[:k] = p
    if not has_inertia:
        p10[4:10] = 0.0  # a harmless, well-defined inertia for the CoM's derivation (only c is used then)
    cov10 = np.zeros((10, 10))
    cov10[:k, :k] = np.where(np.outer(identified, identified), cov, 0.0)
    derived = derived_parameters(p10)
    dstd = derived_std(p10, cov10)
    com = derived[:3]
    for i, nm in enumerate(COM_NAMES):
        std[nm] = float(dstd[i]) if identified[1 + i] else float("nan")
        if not identified[1 + i]:
            com[i] = 0.0
    inertia = derived[3:] if has_inertia else None
    if has_inertia:
        std.update({nm: float(dstd[3 + i]) for i, nm in enumerate(ICOM_NAMES)})
    if limits is not None:
        try:
            _check_body(m, com, inertia, limits)
        except PayloadRejected:
            if not unresolved:
                raise
            return nothing()  # a CoM (inertia) of noise over a mass the data cannot tell from none
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


def uncertainty_words(est: PayloadEstimate) -> str:
    """How uncertain ``est`` is, in a user's words (3σ): "CoM uncertain to ±25 mm, mass to ±0.1 kg (3σ)" (the largest
    CoM component's; "CoM not determined" where a component has no finite σ)."""
    s = est.std or {}
    com = [s.get(k, float("nan")) for k in COM_NAMES]
    com_words = (f"CoM uncertain to ±{3e3 * max(com):.0f} mm" if all(np.isfinite(c) for c in com)
                 else "CoM not determined")
    return f"{com_words}, mass to ±{3 * s.get('mass', float('nan')):.3g} kg (3σ)"


__all__ = [
    "COM_NAMES",
    "GRAVITY_NAMES",
    "ICOM_NAMES",
    "PAYLOAD_NAMES",
    "InertiaNotExcited",
    "NO_PAYLOAD_METHOD",
    "PayloadDataError",
    "PayloadLimits",
    "PayloadRejected",
    "as_no_payload",
    "build_estimate",
    "derived_parameters",
    "derived_std",
    "effective_limits",
    "nearest_physical_inertia",
    "frame_name",
    "inertia_problem",
    "is_no_payload",
    "no_payload_note",
    "numeric_jacobian",
    "uncertainty_words",
]
