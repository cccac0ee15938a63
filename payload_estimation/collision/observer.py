"""Generalised-momentum observer (residual) of eq. 48 of paper 000 (De Luca's residual).

Continuous time::

    r = K_I ( M̂(q) dq - ∫ (τ_J + Ĉᵀ(q, dq) dq - ĝ(q) - τ̂_f(dq) + r) ds - p0 ),   p0 = M̂(q0) dq0

so that ``dr/dt = K_I (τ_ext - r)``: the residual is a first-order low-pass (time constant 1/K_I per
joint) of the external joint torque τ_ext = J_cᵀ F.

Discrete time (this module): between two accepted samples k-1, k (step h = t_k - t_{k-1}, taken from
the samples' own time stamps, so jitter and dropped samples are integrated correctly) the mean
external torque over the step is

    ū_k = (p_k - p_{k-1}) / h - (β_k + β_{k-1}) / 2,     β = τ_J + Ĉᵀ dq - ĝ - τ̂_f

(momentum difference exact, the known terms integrated by the trapezoidal rule, or as held over the
step: ``quadrature="hold"``) and the residual
is propagated exactly for a first-order system with constant input over the step::

    r_k = a ⊙ r_{k-1} + (1 - a) ⊙ ū_k,     a = exp(-K_I h)

Summing the increments telescopes back to eq. 48 with p0 taken at the first sample; the update is
stable for any step and any gain (no K_I h < 2 restriction of the forward-Euler form).

Units: q rad, dq rad/s, τ N m, t s, K_I 1/s. Joint order: the model's.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pinocchio as pin

from ..errors import PayloadEstimationError
from ..model.dynamics import RigidBodyDynamics
from ..model.joint_vectors import per_joint
from ..model.parameters import BodyInertia

QUADRATURES = ("trapezoid", "hold")

SHIFT_REST_VELOCITY = 0.01
"""rad/s: every joint this slow at the last sample, a payload change moves the residual by ĝ's change at once."""


class ObserverInputError(PayloadEstimationError):
    """An observer argument or sample has the wrong shape; the message names it."""


@dataclass(frozen=True)
class JointFriction:
    """Per-joint friction model τ_f = F_v dq + F_c tanh(dq / v_eps) + F_o (N m).

    viscous F_v (N m s/rad), coulomb F_c (N m), v_eps (rad/s) smooths the sign at rest so that
    a standing joint contributes no Coulomb torque; offset F_o (N m, None: zero) a constant torque the
    sensor reads with the arm at rest beyond the model's (a bias, as identified with the friction).
    Friction opposes motion: it is subtracted from the measured joint torque in the observer.
    """

    viscous: np.ndarray
    coulomb: np.ndarray
    v_eps: float = 1e-3
    offset: np.ndarray | None = None

    def torque(self, dq: np.ndarray) -> np.ndarray:
        """Friction torque (N m) at joint velocities ``dq`` (rad/s)."""
        tau = self.viscous * dq + self.coulomb * np.tanh(dq / self.v_eps)
        return tau if self.offset is None else tau + self.offset


def make_friction(n: int, viscous=0.0, coulomb=0.0, v_eps: float = 1e-3, offset=0.0) -> JointFriction:
    """Validated :class:`JointFriction` (scalars broadcast to all ``n`` joints; an all-zero offset is None)."""
    if not v_eps > 0:
        raise ObserverInputError(f"friction v_eps must be > 0 rad/s, got {v_eps}")
    viscous = per_joint(viscous, n, "viscous friction", nonnegative=True, error=ObserverInputError)
    coulomb = per_joint(coulomb, n, "Coulomb friction", nonnegative=True, error=ObserverInputError)
    offset = per_joint(offset, n, "friction offset", error=ObserverInputError)
    return JointFriction(viscous, coulomb, float(v_eps), offset if np.any(offset) else None)


def identified_friction(viscous, coulomb, offset, v_eps: float = 0.02) -> JointFriction | None:
    """An identified model's joint friction (per joint: viscous N m s/rad, Coulomb N m, offset N m) as the
    observer's, the Coulomb sign smoothed over ``v_eps`` rad/s (default 0.02: the speed below which
    identification gives Coulomb rows no weight); None when every term is zero. Terms are taken as
    identified, negative ones too (unconstrained least squares can give them): the observer subtracts
    what the model predicts."""
    n = np.size(viscous)
    viscous = per_joint(viscous, n, "identified viscous friction", error=ObserverInputError)
    coulomb = per_joint(coulomb, n, "identified Coulomb friction", error=ObserverInputError)
    checked = make_friction(n, 0.0, 0.0, v_eps, offset)  # validates v_eps and the offsets
    if not (np.any(viscous) or np.any(coulomb) or checked.offset is not None):
        return None
    return JointFriction(viscous, coulomb, checked.v_eps, checked.offset)


MAX_GAIN_STEP = 0.3
"""Largest K_I h of an automatic gain (h the stream's step): the residual then averages over >= 3 samples. On a
100 Hz stream K_I = 150/s (K h = 1.5) passes each step's velocity error straight into r: a real LBR's
100 Hz log at its motion start gave 44 N m at K_I 150 and 14 N m, below the 3-sample confirmation, at 30."""
DEFAULT_GAIN = 150.0
"""1/s: the observer gain on a stream of 500 Hz or more (docs/collision.md)."""


def gain_for_rate(rate: float, nominal: float = DEFAULT_GAIN) -> float:
    """The automatic observer gain (1/s) for a stream of ``rate`` Hz: ``nominal``, capped at MAX_GAIN_STEP x rate."""
    return float(min(nominal, MAX_GAIN_STEP * rate)) if rate > 0 else float(nominal)


class MomentumObserver:
    """Momentum-observer residual r (N m) of one arm, one update per joint-state sample.

    ``dyn`` is the unloaded (identified) model; ``gains`` K_I (1/s, scalar or per joint);
    ``friction`` an optional :class:`JointFriction`; a step longer than ``gap_steps`` times the
    stream's typical step (the median of the recent steps), or than ``max_gap`` (s), is a gap (the stream
    stopped, samples were dropped): it is not integrated — the residual is held over it and integration
    restarts at the new sample (counted in :attr:`gaps`). Integrating across dropped samples during a
    move would read the change of the known torques β between its ends as an external torque: 20-80 ms
    of dropped samples in a ±7° move gave 5-7.5 N m of residual at K_I 150 on the LWR (a false alarm at
    6 N m), none when they restart. ``torque_noise`` (N m) and
    ``velocity_noise`` (rad/s): white-noise standard deviations of the measured τ and dq (scalar or
    per joint), only used for :attr:`residual_noise` (noise-aware thresholds). ``quadrature``: how the
    known torques β are integrated over a step — ``"trapezoid"`` (default: a continuous torque signal
    sampled, e.g. a joint-torque sensor) or ``"hold"`` (each sample's torque acts until the next: a
    zero-order hold, as in a simulator that applies and reports a torque per step). ``max_gain_step``: the
    gain used over a step h (:attr:`gains`) is ``min(K_I, max_gain_step / h)`` (:data:`MAX_GAIN_STEP`;
    None: never capped), the configured one stays in :attr:`configured_gains`.

    Counters: :attr:`skipped_nonfinite` (NaN/inf samples), :attr:`skipped_time` (time not
    increasing), :attr:`skipped` (their sum), :attr:`accepted`. Not thread-safe.
    """

    def __init__(self, dyn: RigidBodyDynamics, gains=25.0, friction: JointFriction | None = None,
                 max_gap: float = 0.1, torque_noise=0.0, velocity_noise=0.0, quadrature: str = "trapezoid",
                 gap_steps: float = 4.0, max_gain_step: float | None = MAX_GAIN_STEP):
        self.dyn = dyn
        self.n = n = dyn.n
        if quadrature not in QUADRATURES:
            raise ObserverInputError(f"quadrature must be one of {', '.join(QUADRATURES)}, got {quadrature!r}")
        self.quadrature = quadrature
        self._hold = quadrature == "hold"
        self.configured_gains = per_joint(gains, n, "observer gain K_I (1/s)", positive=True, error=ObserverInputError)
        self.gains = self.configured_gains.copy()  # in use: capped at max_gain_step / h once h is known
        self.max_gain_step = max_gain_step
        self.torque_noise = per_joint(torque_noise, n, "torque_noise (N m)", nonnegative=True, error=ObserverInputError)
        self.velocity_noise = per_joint(velocity_noise, n, "velocity_noise (rad/s)", nonnegative=True,
                                        error=ObserverInputError)
        if friction is not None and (np.shape(friction.viscous) != (n,) or np.shape(friction.coulomb) != (n,)
                                     or (friction.offset is not None and np.shape(friction.offset) != (n,))):
            raise ObserverInputError(f"friction must have {n} viscous, {n} Coulomb (and {n} offset) coefficients")
        self.friction = friction
        if not max_gap > 0:
            raise ObserverInputError(f"max_gap must be > 0 s, got {max_gap}")
        self.max_gap = float(max_gap)
        if not gap_steps > 1:
            raise ObserverInputError(f"gap_steps must be > 1, got {gap_steps}")
        self.gap_steps = float(gap_steps)
        self._steps = np.zeros(64)  # recent steps h (s), ring buffer for the typical step
        self._n_steps = 0
        self._gap_limit = self.max_gap  # s: a longer step is a gap
        self.payload: BodyInertia | None = None  # payload frame
        self.payload_gravity_only = False
        self._bind(dyn.model, dyn.model)
        self._q_prev = np.zeros(n)  # position and velocity of the previous accepted sample
        self._dq_prev = np.zeros(n)
        self._p_prev = np.zeros(n)  # momentum M̂ dq of the previous accepted sample
        self._beta_prev = np.zeros(n)  # β of the previous accepted sample
        self._r = np.zeros(n)
        self._a = np.ones(n)  # exp(-K h) for the cached step h
        self._b = np.zeros(n)  # 1 - a
        self._h_cached = -1.0
        self._u = np.zeros(n)  # mean external torque over the last step (unfiltered)
        self._t_prev: float | None = None
        self._restart_next = False
        self._keep_r = False
        self.skipped_nonfinite = self.skipped_time = self.accepted = self.gaps = 0
        self.consecutive_time_skips = 0

    # ------------------------------------------------------------------ state
    def reset(self, keep_residual: bool = False) -> None:
        """Forget the time history: the next sample re-initialises the momentum reference p0 and is
        accepted whatever its time stamp. Counters are kept.

        ``keep_residual`` False: r = 0 from the next sample (a fresh start). True: r keeps its value
        and is propagated from the next sample pair on (a time fault — a stamp far in the future or
        the past, a stream restart — need not hide a contact or load that is still there).
        """
        if not keep_residual:
            self._r[:] = 0.0
        self._u[:] = self._r
        self._t_prev = None
        self._restart_next = False
        self._keep_r = bool(keep_residual)
        self.consecutive_time_skips = 0

    def continue_residual(self, r) -> None:
        """Start from residual ``r`` (N m), e.g. another model's of the same arm: as :meth:`reset` with
        ``keep_residual``, r is held at the next sample and propagated from the next pair on."""
        r = np.asarray(r, float)
        if r.shape != self._r.shape or not np.all(np.isfinite(r)):
            raise ObserverInputError(f"residual to continue from must be {self._r.size} finite values, got {r}")
        self._r[:] = r
        self.reset(keep_residual=True)

    def reset_counters(self) -> None:
        """Zero the skipped/accepted/gap counters."""
        self.skipped_nonfinite = self.skipped_time = self.accepted = self.gaps = 0

    @property
    def skipped(self) -> int:
        """Samples ignored (non-finite values or non-increasing time)."""
        return self.skipped_nonfinite + self.skipped_time

    @property
    def residual(self) -> np.ndarray:
        """Last residual r (N m), a copy."""
        return self._r.copy()

    @property
    def disturbance(self) -> np.ndarray:
        """ū (N m), a copy: the mean external joint torque over the last step, before the observer's
        low-pass (r = a r + (1 - a) ū). Noisy (measurement noise, dq differentiation) but without the
        1/K_I lag; averaged over a few samples it gives the external torque right after a contact.
        Equal to r for the first sample after a start, a gap or a model change (no step to use)."""
        return self._u.copy()

    @property
    def residual_noise(self) -> np.ndarray:
        """Standard deviation (N m) of r from sensor noise alone at the last step h and M̂(q).

        White noise on τ (``torque_noise``) gives σ_τ √((1 - a)/2) (trapezoid; hold: √((1 - a)/(1 + a))); white noise on
        dq (``velocity_noise``) enters through Δp/h, high-passed by the observer:
        (1 - a)/h · √(2/(1 + a)) · ‖M̂_j: σ_dq‖ — about K_I · M σ_dq, which is what limits K_I on
        a robot whose velocities are differentiated positions. a = exp(-K_I h).
        """
        if self._h_cached <= 0:
            return np.zeros(self.n)
        a, h = self._a, self._h_cached
        var = self.torque_noise ** 2 * ((1.0 - a) / (1.0 + a) if self._hold else 0.5 * (1.0 - a))
        if np.any(self.velocity_noise > 0):
            m = self._M.copy()
            il = np.tril_indices(self.n, -1)
            m[il] = m.T[il]  # pinocchio fills the upper triangle
            var = var + ((1.0 - a) / h) ** 2 * (2.0 / (1.0 + a)) * (m ** 2 @ self.velocity_noise ** 2)
        return np.sqrt(var)

    @property
    def initialised(self) -> bool:
        return self._t_prev is not None

    @property
    def last_time(self) -> float | None:
        """Time stamp (s) of the last accepted sample, None before the first or after :meth:`reset`."""
        return self._t_prev

    # ------------------------------------------------------------------ model
    def set_payload(self, body: BodyInertia | None, gravity_only: bool = False) -> bool:
        """Carry ``body`` (mass kg, CoM m, inertia about the CoM kg m², payload frame) from now on;
        None or zero mass: unloaded.

        ``gravity_only`` (paper 000 eq. 48, Sec. VI-B): the payload changes ĝ only, M̂ and Ĉ stay
        unloaded; ĝ^L = g + Y_L,g(q) p_L,g is evaluated as the gravity of the model with the payload
        merged into the last link (identical: gravity depends on (m, m c) only). Otherwise the payload
        also enters M̂ and Ĉ (a gravity-only estimate as a point mass: zero inertia about its CoM).
        With the arm at rest at the last sample (every joint slower than :data:`SHIFT_REST_VELOCITY`) the
        residual is moved by the change of ĝ there, so that it reads at once what it would have converged
        to in 5/K_I s (exact at rest: r's steady state is ĝ - τ_J, and its transient is unchanged), and the
        last sample's momentum and known torque are taken with the new model. In motion the momentum
        reference is re-initialised at the next sample (the model's momentum jumps) and the residual is kept
        to converge. Returns whether it was moved.

        An estimate record (identification) is converted by the
        caller: ``estimate.body()`` (zero inertia if only gravity was estimated), or
        ``estimate.as_point_mass().body()``.
        """
        if body is not None and not isinstance(body, BodyInertia):
            raise ObserverInputError(
                f"set_payload takes a model.parameters.BodyInertia or None, got {type(body).__name__}; "
                "convert a payload estimate with estimate.body() (or estimate.as_point_mass().body())")
        if body is not None and body.mass != 0.0:
            com = np.asarray(body.com, float)
            inertia = np.asarray(body.inertia_com, float)
            if not (math.isfinite(body.mass) and com.shape == (3,) and np.all(np.isfinite(com))):
                raise ObserverInputError(f"payload is not finite: mass {body.mass} kg, com {body.com} m")
            if body.mass < 0:
                raise ObserverInputError(f"payload mass {body.mass} kg is negative; re-estimate or reset")
            if inertia.shape != (3, 3) or not np.all(np.isfinite(inertia)):
                raise ObserverInputError(f"payload inertia must be a finite 3x3 matrix (kg m², about the CoM), "
                                         f"got {body.inertia_com}")
            body = BodyInertia(float(body.mass), com.copy(), inertia.copy())
        at_rest = self._t_prev is not None and float(np.max(np.abs(self._dq_prev))) <= SHIFT_REST_VELOCITY
        g_before = self.gravity(self._q_prev) if at_rest else None
        if body is None or body.mass == 0.0:
            self._bind(self.dyn.model, self.dyn.model)
            self.payload = None
        else:
            loaded = self.dyn.with_payload(body).model
            self._bind(self.dyn.model if gravity_only else loaded, loaded)
            self.payload = body
        self.payload_gravity_only = bool(gravity_only) and self.payload is not None
        if g_before is None:
            self._restart_next = self._t_prev is not None
            return False
        # the last sample as the new model reads it: the next step integrates across the change as any other
        shift = self.gravity(self._q_prev) - g_before
        self._r += shift
        self._u[:] = self._r
        self._beta_prev = self._beta_prev - shift
        pin.crba(self._m_model, self._m_data, self._q_prev)
        self._p_prev = self._M.dot(self._dq_prev)
        return True

    def _bind(self, m_model: pin.Model, g_model: pin.Model) -> None:
        """Use ``m_model`` for M̂, Ĉ and ``g_model`` for ĝ; cache live views of the workspaces."""
        self._m_model, self._m_data = m_model, m_model.createData()
        if g_model is m_model:
            self._g_model, self._g_data = m_model, self._m_data
        else:
            self._g_model, self._g_data = g_model, g_model.createData()
        # numpy views of the Eigen workspaces: updated in place by every pinocchio call
        self._M, self._C, self._g = self._m_data.M, self._m_data.C, self._g_data.g
        self._last_p = np.zeros(self.n)
        self._last_beta = np.zeros(self.n)

    @property
    def momentum(self) -> np.ndarray:
        """p = M̂(q) dq of the last accepted sample (N m s)."""
        return self._last_p.copy()

    @property
    def known_torque(self) -> np.ndarray:
        """β = τ_J + Ĉᵀ dq - ĝ - τ̂_f of the last accepted sample (N m)."""
        return self._last_beta.copy()

    @property
    def gravity_torque(self) -> np.ndarray:
        """ĝ (N m) of the last sample taken, payload included (a view: copy to keep it)."""
        return self._g

    def gravity(self, q: np.ndarray) -> np.ndarray:
        """The observer's current gravity model ĝ(q) (N m), payload included."""
        return pin.computeGeneralizedGravity(self._g_model, self._g_data, np.asarray(q, float)).copy()

    # ------------------------------------------------------------------ update
    def _check(self, x, what: str) -> np.ndarray:
        a = np.asarray(x, dtype=float)
        if a.shape != (self.n,):
            raise ObserverInputError(f"{what} must have {self.n} values (joints {', '.join(self.dyn.desc.joint_names)})"
                                     f", got shape {a.shape}")
        return a

    def update(self, t: float, q, dq, tau) -> np.ndarray:
        """Feed one sample (t s, q rad, dq rad/s, measured joint torque tau N m); return r (N m).

        The first sample initialises p0 (r = 0). Samples with NaN/inf, or whose time does not
        increase, are ignored and counted; the last residual is returned for them. A wrong vector
        length raises :class:`ObserverInputError` (a programming error, not a bad sample).
        """
        q = self._check(q, "q")
        dq = self._check(dq, "dq")
        tau = self._check(tau, "tau")
        t = float(t)
        t_prev = self._t_prev
        if t_prev is not None and t <= t_prev:
            self.skipped_time += 1
            self.consecutive_time_skips += 1
            return self._r.copy()

        pin.computeCoriolisMatrix(self._m_model, self._m_data, q, dq)
        pin.crba(self._m_model, self._m_data, q)
        pin.computeGeneralizedGravity(self._g_model, self._g_data, q)
        p = self._M.dot(dq)
        beta = dq.dot(self._C)  # Ĉᵀ dq
        beta += tau
        beta -= self._g
        if self.friction is not None:
            beta -= self.friction.torque(dq)
        # NaN/inf anywhere in t, q, dq or tau makes p or β (hence p·β) non-finite: one cheap check
        if not (math.isfinite(t) and math.isfinite(p.dot(beta))):
            self.skipped_nonfinite += 1
            return self._r.copy()
        self.accepted += 1
        self.consecutive_time_skips = 0
        self._last_p, self._last_beta = p, beta

        if t_prev is None:
            if not self._keep_r:
                self._r[:] = 0.0
            self._keep_r = False
            self._u[:] = self._r
        else:
            h = t - t_prev
            if abs(h - self._h_cached) > 1e-9:  # 1 ns: same step up to time-stamp rounding
                if self.max_gain_step is not None:
                    np.minimum(self.configured_gains, self.max_gain_step / h, out=self.gains)
                np.exp(-self.gains * h, out=self._a)
                np.subtract(1.0, self._a, out=self._b)
                self._h_cached = h
            r = self._r
            self._note_step(h)
            if h > self._gap_limit:
                # no information over the gap: hold r (what was last seen is still the best guess; a decay
                # would read a persisting contact or an unmodelled load as released and then detected again)
                self.gaps += 1
                self._u[:] = r
            elif self._restart_next:
                r *= self._a  # model changed: Δp across the change is not the model's, decay one step only
                self._u[:] = r
            else:
                # r = a r + (1 - a) ū,  ū = Δp / h - (β + β_prev) / 2  (hold: - β_prev)
                u = self._u
                if self._hold:
                    np.negative(self._beta_prev, out=u)
                else:
                    np.add(beta, self._beta_prev, out=u)
                    u *= -0.5
                u += (p - self._p_prev) / h
                r *= self._a
                r += self._b * u
        self._restart_next = False
        self._t_prev = t
        self._q_prev[:] = q
        self._dq_prev[:] = dq
        self._p_prev = p
        self._beta_prev = beta
        return self._r.copy()

    def _note_step(self, h: float) -> None:
        """Record a step; refresh the gap limit from the median of the recent steps (after 8, 16, 32
        steps, then every 64: the median is cheap only when rare, and follows a stream whose rate changes)."""
        k = self._n_steps
        self._steps[k % self._steps.size] = h
        self._n_steps = k = k + 1
        if k in (8, 16, 32) or k % self._steps.size == 0:
            typical = float(np.median(self._steps[:min(k, self._steps.size)]))
            self._gap_limit = min(self.max_gap, self.gap_steps * typical)



__all__ = ["DEFAULT_GAIN", "MAX_GAIN_STEP", "gain_for_rate", "MomentumObserver", "JointFriction", "ObserverInputError",
           "identified_friction", "make_friction"]
