"""Payload from a motion without accelerations: the filtered momentum form of the dynamics.

The joint torque of a rigid body (or of the payload alone) is linear in its parameters p and, written
with the generalized momentum, needs no acceleration:

    tau = d/dt (M(q) dq) + (C(q, dq) dq - dM/dt dq + g(q)) = d/dt (W1(q, dq) p) + W2(q, dq) p

with W1 p = M(q) dq and W2 p = C dq + g - dM/dt dq (:func:`momentum_rows`). Passing both sides through
the same causal low-pass F(s) = λ / (s + λ) gives

    F[tau] = F[d/dt W1] p + F[W2] p,

where F[d/dt W1] is the filter applied to the first difference of W1 between samples (a proper
filter: the noise of the measured velocity in W1 passes with gain about λ, it is never divided by
the sample interval). Torque and regressor are filtered identically (:func:`filtered_rows`), so the
filter neither delays nor attenuates one against the other. Samples may come at uneven intervals
(real logs): each step uses its own interval. The motion must start at rest (the filter starts in
steady state on the first sample).

Units: t s, q rad, dq rad/s, torques N m; ``cutoff`` Hz. Payload parameters as
:mod:`.payload_result`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np

from ..model.dynamics import RigidBodyDynamics
from ..signals.causal import causal_lowpass, causal_lowpass_derivative
from .estimate import PayloadEstimate
from .gravity import sample_array
from .model_uncertainty import ModelUncertainty
from .motion import INERTIA_ADVICE, INERTIA_RSD, fit_payload_rows
from .result import PayloadDataError, PayloadLimits

Regressor = Callable[[np.ndarray, np.ndarray, np.ndarray], np.ndarray]
"""(q, dq, ddq) -> n x k rows of a torque linear in k parameters (``dyn.payload_regressor``, ``dyn.regressor``)."""

DEFAULT_CUTOFF = 8.0
"""Hz, the low-pass of the filtered form: above the excitation's content (a few Hz). On the MuJoCo arm
(1 kHz, 0.1 N m noise, a 3 s excitation within ±7°) 2-40 Hz gave the same payload within noise;
lower cut-offs lost accuracy (CoM 0.38 mm at 2 Hz, 0.27 mm at 8 Hz)."""
DEFAULT_ORDER = 1
"""First-order sections of the low-pass (more sections did not help on the MuJoCo arm)."""
_STEP = 1e-6  # s, the step along the motion for dM/dt dq (a derivative of the model, not of data)


def momentum_rows(regressor: Regressor, q: np.ndarray, dq: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(W1, W2), each (N, n, k), of the samples (N, n): W1 p = M(q) dq, W2 p = C dq + g - dM/dt dq.

    From the inverse-dynamics regressor Y(q, dq, ddq) alone: M(q) v = Y(q, 0, v) - Y(q, 0, 0),
    C dq + g = Y(q, dq, 0), and dM/dt dq = d/dε [M(q + ε dq) dq] at ε = 0 (central difference of the
    model along the motion)."""
    zero = np.zeros(q.shape[1])
    w1, w2 = [], []
    for qk, vk in zip(q, dq):
        m_v = regressor(qk, zero, vk) - regressor(qk, zero, zero)
        ahead, behind = qk + _STEP * vk, qk - _STEP * vk
        dm_v = ((regressor(ahead, zero, vk) - regressor(ahead, zero, zero))
                - (regressor(behind, zero, vk) - regressor(behind, zero, zero))) / (2 * _STEP)
        w1.append(m_v)
        w2.append(regressor(qk, vk, zero) - dm_v)
    return np.array(w1), np.array(w2)


def filtered_rows(regressor: Regressor, t: np.ndarray, q: np.ndarray, dq: np.ndarray,
                  cutoff: float = DEFAULT_CUTOFF, order: int = DEFAULT_ORDER) -> np.ndarray:
    """F[d/dt W1] + F[W2] (N, n, k): the filtered regressor of the samples (F: ``order`` first-order
    sections at ``cutoff`` Hz)."""
    return _filtered(t, *momentum_rows(regressor, q, dq), cutoff, order)


@dataclass(frozen=True)
class MomentumTerms:
    """The model along N samples (:func:`momentum_terms`): its own momentum torques ``h1`` = M dq (N, n) N m s and
    ``h2`` = g - Cᵀ dq (N, n) N m, and the payload's momentum rows ``w1``, ``w2`` (N, n, 10) when computed."""

    h1: np.ndarray
    h2: np.ndarray
    w1: np.ndarray | None = None
    w2: np.ndarray | None = None

    def select(self, keep: np.ndarray) -> MomentumTerms:
        """The samples where ``keep`` is true (or those it indexes)."""
        rows = (None if w is None else w[keep] for w in (self.w1, self.w2))
        return MomentumTerms(self.h1[keep], self.h2[keep], *rows)

    @staticmethod
    def concatenate(parts: list[MomentumTerms]) -> MomentumTerms:
        """One after the other."""
        def joined(k: str) -> np.ndarray | None:
            return None if any(getattr(p, k) is None for p in parts) else np.concatenate([getattr(p, k) for p in parts])

        return MomentumTerms(*(joined(k) for k in ("h1", "h2", "w1", "w2")))

    def filtered_torque(self, t: np.ndarray, cutoff: float, order: int) -> np.ndarray:
        """F[tau] (N, n) of the model's own torque, without accelerations."""
        return _filtered(t, self.h1, self.h2, cutoff, order)

    def filtered_rows(self, t: np.ndarray, cutoff: float, order: int) -> np.ndarray:
        """F[d/dt W1] + F[W2] (N, n, 10) of the payload."""
        if self.w1 is None or self.w2 is None:
            raise ValueError("momentum terms computed without the payload's rows")
        return _filtered(t, self.w1, self.w2, cutoff, order)


def momentum_terms(dyn: RigidBodyDynamics, q: np.ndarray, dq: np.ndarray, rows: bool = True,
                   deadline: float | None = None) -> MomentumTerms:
    """:class:`MomentumTerms` of ``dyn``'s own bodies (its payload left out) along the samples (N, n), exactly
    (:meth:`RigidBodyDynamics.momentum_torques`; the payload's rows in one kinematic pass per sample,
    :meth:`RigidBodyDynamics.payload_momentum_rows`). ``deadline`` (``time.perf_counter`` s): stop after the
    sample that passes it (the terms of the first samples only)."""
    own = dyn if dyn.payload is None else dyn.with_payload(None)
    q, dq = np.asarray(q, float).reshape(-1, dyn.n), np.asarray(dq, float).reshape(-1, dyn.n)
    h1, h2 = np.empty_like(q), np.empty_like(q)
    w1 = w2 = None
    if rows:
        w1, w2 = np.empty(q.shape + (10,)), np.empty(q.shape + (10,))
    done = 0
    for qk, vk in zip(q, dq):
        h1[done], h2[done] = own.momentum_torques(qk, vk)
        if rows:
            w1[done], w2[done] = dyn.payload_momentum_rows(qk, vk)
        done += 1
        if deadline is not None and time.perf_counter() > deadline:
            break
    return MomentumTerms(h1[:done], h2[:done], *(None if w is None else w[:done] for w in (w1, w2)))


def _filtered(t: np.ndarray, w1: np.ndarray, w2: np.ndarray, cutoff: float, order: int) -> np.ndarray:
    filtered = causal_lowpass_derivative(t, w1, cutoff) + causal_lowpass(t, w2, cutoff)
    return causal_lowpass(t, filtered, cutoff, order - 1)


def momentum_torques(dyn: RigidBodyDynamics, q: np.ndarray, dq: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(M(q) dq, C dq + g - dM/dt dq), each (N, n) N m s and N m, of ``dyn``'s own bodies along the samples:
    :func:`momentum_rows` times the parameters, exactly (:meth:`RigidBodyDynamics.momentum_torques`)."""
    out = [dyn.momentum_torques(qk, vk) for qk, vk in zip(q, dq)]
    return np.array([o[0] for o in out]).reshape(q.shape), np.array([o[1] for o in out]).reshape(q.shape)


def estimate_payload_filtered(dyn: RigidBodyDynamics, t: np.ndarray, q: np.ndarray, dq: np.ndarray,
                              tau_loaded: np.ndarray, tau_reference: np.ndarray | None = None, *,
                              reference_q: np.ndarray | None = None, reference_dq: np.ndarray | None = None,
                              cutoff: float = DEFAULT_CUTOFF, order: int = DEFAULT_ORDER, weights=None,
                              model_uncertainty: ModelUncertainty | None = None,
                              limits: PayloadLimits | None = None, inertia_rsd: float = INERTIA_RSD,
                              correlated: bool = True, own_scale: bool = True,
                              project: bool = False, inertia_advice: str = INERTIA_ADVICE,
                              estimate_skew: bool = False, tracking_uncertainty: float = 0.0,
                              terms: MomentumTerms | None = None,
                              reference_terms: MomentumTerms | None = None) -> PayloadEstimate:
    """Mass, CoM and, where the motion determines it, the inertia of the payload from a motion that
    starts at rest: samples at times ``t`` (N,) with positions ``q``, velocities ``dq`` and loaded
    torques (N, n). ``tau_reference``: the unloaded torque on the same motion (a recorded unloaded run
    at the same times: differential; with its ``reference_q``, ``reference_dq`` the torque of the
    tracking difference between the runs is moved over with ``dyn``); without it ``dyn``'s own
    prediction in the same filtered form (``model_uncertainty``: how wrong it may be, in σ). What is
    and is not determined, the std and the errors are :func:`.payload_motion.estimate_payload_motion`'s
    (``own_scale``, ``project``, ``inertia_advice``: :func:`.payload_motion.fit_payload_rows`).
    ``estimate_skew``: estimate and compensate a constant time skew between the torques and the joint
    states (:func:`estimate_torque_skew`; a simulator's half step of 0.5 ms moved the CoM by 2 mm, 4 σ).
    ``tracking_uncertainty``: the relative 1-σ error of the model's torque of the tracking difference
    between a differential fit's runs (its own size times this, fully correlated: fitted with the payload within
    that σ, :func:`.motion.fit_payload_rows` ``estimate_error``).
    ``terms``: the model along (q, dq) computed ahead (:func:`momentum_terms`); ``reference_terms``: the unloaded
    model's torques along the reference run, in place of ``reference_q``, ``reference_dq``.
    """
    n = dyn.n
    q = sample_array(q, "q", n)
    n_s = q.shape[0]
    dq = sample_array(dq, "dq", n, n_s)
    tau = sample_array(tau_loaded, "tau_loaded", n, n_s)
    t = np.asarray(t, float).reshape(-1)
    if t.shape != (n_s,):
        raise PayloadDataError(f"t has {t.size} stamps for {n_s} samples")
    if order < 1:
        raise PayloadDataError(f"filter order must be >= 1, got {order}")
    rhs = causal_lowpass(t, tau, cutoff, order)
    model = np.zeros_like(rhs)  # the model's torque subtracted from rhs (its skew moves it too)
    if tau_reference is not None:
        rhs = rhs - causal_lowpass(t, sample_array(tau_reference, "tau_reference", n, n_s), cutoff, order)
        how, unc = "differential", None
        if reference_terms is None and reference_q is not None and reference_dq is not None:
            reference_terms = momentum_terms(dyn, sample_array(reference_q, "reference_q", n, n_s),
                                             sample_array(reference_dq, "reference_dq", n, n_s), rows=False)
    else:
        how, unc = "one-shot", model_uncertainty
    if terms is None:
        terms = momentum_terms(dyn, q, dq)
    if tau_reference is None:
        model = terms.filtered_torque(t, cutoff, order)
    elif reference_terms is not None:
        if reference_terms.h1.shape != (n_s, n):
            raise PayloadDataError(f"the reference's model torques have shape {reference_terms.h1.shape}, expected "
                                   f"({n_s}, {n})")
        model = terms.filtered_torque(t, cutoff, order) - reference_terms.filtered_torque(t, cutoff, order)
    rhs = rhs - model
    y3 = terms.filtered_rows(t, cutoff, order)
    y = y3.reshape(-1, 10)
    note = ""
    if estimate_skew:
        y, rhs, note = _skew_compensated(t, y3, rhs, model)
    rows = None
    if unc is not None:
        def rows() -> np.ndarray:
            r = filtered_rows(_error_regressor(unc), t, q, dq, cutoff, order).reshape(n_s * n, -1)
            return np.hstack([r, np.tile(np.eye(n), (n_s, 1))])  # constant offsets pass the filter unchanged
    elif tracking_uncertainty > 0 and np.any(model):
        unc, rows = _tracking_uncertainty(model, tracking_uncertainty)
    est = fit_payload_rows(dyn, q, y, rhs.reshape(-1), weights, method=f"filtered {how} ({cutoff:g} Hz)",
                           limits=limits, inertia_rsd=inertia_rsd, correlated=correlated, model_uncertainty=unc,
                           error_rows=rows, own_scale=own_scale, project=project, inertia_advice=inertia_advice,
                           estimate_error=tau_reference is not None)
    return replace(est, notes=est.notes + (note,)) if note and est.mass > 0 else est


def _tracking_uncertainty(model: np.ndarray, relative: float) -> tuple[ModelUncertainty, Callable[[], np.ndarray]]:
    """The model's torque of the tracking difference between two runs (``model``, N x n, filtered) as a
    model error of ``relative`` (1 σ) of itself, for :func:`.motion.fit_payload_rows`."""
    n = model.shape[1]
    unc = ModelUncertainty(lambda q: np.zeros((n, 1)), np.array([[relative ** 2]]), np.zeros(n),
                           f"the model's torque of the tracking difference between the runs, {100 * relative:g} % "
                           "(1 σ) of itself", lambda q, dq, ddq: np.zeros((q.size, 1)))  # declared in motion too
    return unc, lambda: np.hstack([model.reshape(-1, 1), np.zeros((model.size, n))])


MAX_SKEW = 0.01
"""s: a torque-versus-position skew estimated beyond this is not applied (something else is wrong)."""


def estimate_torque_skew(t: np.ndarray, y3: np.ndarray, rhs: np.ndarray, model: np.ndarray, iterations: int = 4
                         ) -> tuple[float, float, np.ndarray]:
    """(s, its std, p) in ``rhs ≈ (y + s ẏ) p + s ṁ``: the measured torques belong to the joint states
    ``s`` s later than their stamps (a simulator's step, a sensor's filter, a driver's sampling order).
    ``y3`` (N, n, k) the filtered payload rows, ``rhs`` (N, n) the filtered torque the payload must
    explain after ``model`` (N, n), the filtered model torque already subtracted, was taken off. Gauss-Newton
    from s = 0 (the filter commutes with d/dt: the skewed rows are the rows' time derivative)."""
    yd = np.gradient(y3, t, axis=0).reshape(-1, y3.shape[2])
    md = np.gradient(model, t, axis=0).reshape(-1)
    y, b = y3.reshape(-1, y3.shape[2]), rhs.reshape(-1)
    p = np.linalg.lstsq(y, b, rcond=None)[0]
    s = 0.0
    for _ in range(iterations):
        jac = np.hstack([y + s * yd, (yd @ p + md)[:, None]])
        r = b - (y + s * yd) @ p - s * md
        step = np.linalg.lstsq(jac, r, rcond=None)[0]
        p, s = p + step[:-1], s + float(step[-1])
    jac = np.hstack([y + s * yd, (yd @ p + md)[:, None]])
    r = b - (y + s * yd) @ p - s * md
    dof = max(b.size - jac.shape[1], 1)
    cov = np.linalg.pinv(jac.T @ jac) * float(r @ r) / dof
    return s, float(np.sqrt(max(cov[-1, -1], 0.0))), p


def _skew_compensated(t: np.ndarray, y3: np.ndarray, rhs: np.ndarray, model: np.ndarray
                      ) -> tuple[np.ndarray, np.ndarray, str]:
    """(rows, rhs, note) with the estimated torque-versus-position skew (:func:`estimate_torque_skew`) taken
    into the rows and the model torque; unchanged (and said) when it is beyond :data:`MAX_SKEW`."""
    s, std, _ = estimate_torque_skew(t, y3, rhs, model)
    if not abs(s) <= MAX_SKEW:
        return y3.reshape(-1, 10), rhs, (f"torque-versus-position skew of {1e3 * s:+.1f} ms estimated, beyond "
                                         f"{1e3 * MAX_SKEW:g} ms: not compensated (check the joint_states stamps)")
    yd = np.gradient(y3, t, axis=0)
    md = np.gradient(model, t, axis=0)
    return ((y3 + s * yd).reshape(-1, 10), rhs - s * md,
            f"torques lag the joint positions by {1e3 * s:+.2f} ± {1e3 * std:.2f} ms (estimated and compensated)")


def _error_regressor(unc: ModelUncertainty) -> Regressor:
    if unc.motion_regressor is None:
        raise PayloadDataError(f"the model's uncertainty ({unc.source}) covers gravity only: it cannot be "
                               "propagated through a motion")
    return lambda q, dq, ddq: unc.motion_regressor(q[None], dq[None], ddq[None])


__all__ = ["DEFAULT_CUTOFF", "MomentumTerms", "estimate_payload_filtered", "filtered_rows", "momentum_rows",
           "momentum_terms", "momentum_torques", "estimate_torque_skew", "MAX_SKEW"]
