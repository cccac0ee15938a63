"""The payload estimated online, from whatever motion follows an announced grasp (issue 32).

After :meth:`OnlinePayloadEstimator.grasped` every sample of the joint stream feeds the filtered momentum
form of :mod:`.filtered` (no differentiated velocities): with F(s) = λ / (s + λ),

    F[tau] - F[tau_ref] = (F[d/dt W1] + F[W2]) p_L,

tau_ref the unloaded model's torque (the nominal description's dynamics, the calibrated gravity model's
gravity and offsets where one is given), p_L the payload's 10 parameters. The torque is filtered at every
sample; the rows every ``row_period`` s, each a handful of pinocchio calls, so :meth:`update` stays cheap.
Both with the first-order hold (exact for inputs linear between samples: the same delay on both grids).
At the first row that counts (``settle`` s after the grasp) every filter starts from zero together: F applied
from that instant on obeys the equation exactly, so neither the payload's torque step at the grasp (the
unloaded model has no payload before it) nor the motion before it leaves a transient in the rows (filters
started in steady state left 0.7 % of the payload's torque step 0.1 s later: a CoM bias of 3-5 mm 1.0 s into a
move, noise-free and with the exact model).
The rows are accumulated as normal equations (information matrix YᵀY, Yᵀr, rᵀr) and the sensitivity to the
model's error YᵀE (E: the same filtered rows of the model's error regressor, :mod:`.model_uncertainty`), so a
solve (every ``solve_period`` s, ≥ 10 Hz) costs a 10 x 10 system whatever the length of the motion.

σ covers the noise (the residual's scatter, at least the declared sensor noise through the filter, inflated
by the filter's serial correlation) *and* the model's error δ ~ N(0, Σ) (the nominal links', the calibrated
model's, the offsets'): the links' and the calibrated model's part is fitted with the payload within Σ (normal
equations with EᵀE, Eᵀr beside YᵀY, YᵀE), so the payload's posterior covariance is S Σ_post Sᵀ on top of the
noise's, Σ_post what the rows leave of Σ; the offsets' part is propagated through that fit. With no information on
δ in the rows this is the propagated S Σ Sᵀ of :func:`.model_uncertainty.propagated_covariance`
(``OnlineConfig.fit_model_error``). A weak prior (mass within ``limits.max_payload``, CoM within
``limits.max_com_radius``) keeps the system solvable while the motion has not yet separated every parameter; the
state then says ``not excited`` and why.

A fit that does not fit says so (issue 46). Everything the model may explain is fitted -- the payload within its
prior, the model's whole error (links', calibrated model's, offsets') within Σ -- and what is left is checked
against what the noise model expects of it, the sensor noise through the filter on every row: χ²/ν = rss / ((rows -
10) σ_f²). Clean data give 0.8-1.0 (its sampling spread at ≥ 0.2 s of rows is < 0.2); above ``misfit_chi2`` (4: the
unexplained torque's RMS twice the expected) the data disagree with the model: a torque the model lacks (a torque or
velocity signal filtered or delayed against the positions, friction, elastic joints, motion faster than the 5 ms
rows follow: a stop at every 0.1 s point, 40 rad/s² swings, gives 10-145). Such a torque is systematic: it does not
average down over the rows as noise does (the residual's scatter, taken as white, scaled σ by ~√(χ²/ν) only and left
CoM errors of 4-9 σ). What it can explain: an unexplained torque of energy U (N² m², summed over the rows) no more
of the payload's shape than it shows in the residual moves the parameters by δp with δpᵀ A δp ≤ U (A the rows'
information); that bound is taken as 2σ (the worst alignment is not rare: a velocity half a step off the positions
and the torque, the simulator's before issue 46, is largely of the payload's inertial shape; as 3σ it left 1 run in
6 per robot at 3.3-3.7σ 1.0 s into such a move), i.e. σ's covariance gets U A⁻¹ / 4, with U the residual energy
beyond ``misfit_chi2`` x its expectation (continuous at the threshold; below it the scatter's scaling of σ stands).
Done as the rows' information deflated by K = 1 + U / (4 v) (v the noise variance per row the fit uses), so
directions the motion does not determine keep their prior; the estimate itself is unchanged. The state's reason, the
status and the estimate's notes then say it in words (:attr:`OnlineStatus.misfit`).

The rest after a move is information (issue 46): a new static orientation determines the CoM components the grasp's
rest did not. The rows are kept in two groups, the motion's and the rest's (``rest_settle`` s after every joint is
slower than ``rest_speed``: the filters' memory of the motion has decayed), each with its own noise level and its
own misfit check, both fitted together. A jerky move (a stop-and-go's stops: χ²/ν 10-30) deflates its own rows only;
the rest's, which fit their noise model, keep their weight, and the estimate weighs each group by its deflation
relative to the least deflated one (one group alone: the estimate unchanged, as above). Before, one check over all
rows deflated the rest's too: 1.5 s at a new orientation 44-140 deg from the grasp's left σ of the CoM at 2-6 mm
after a stop-and-go move (``converging``); now 0.2-1 mm (``converged``), the errors within 2.3σ.

Anchor: while no payload is announced, the estimator learns the unloaded model's filtered error at rest (the
last ≥ ``anchor_rest`` s of standing still). After the grasp the fit subtracts it (times the zero-state filter's
unit-step response): the sensor offsets cancel and near the anchor pose the model's gravity error nearly does
(the static fit's anchored method). Optionally a :class:`ComPrior` from the gripper's geometry and an
:class:`InertiaPrior` from the part's data.

Units: s, rad, rad/s, N m, kg, m. Joint vectors in model order.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field, replace

import numpy as np
import pinocchio as pin

from ..model.dynamics import RigidBodyDynamics, link_params
from ..signals.misfit import MISFIT_CHI2, Misfit, check_misfit, misfit_sentence
from .estimate import PayloadEstimate
from .filtered import DEFAULT_CUTOFF
from .model_uncertainty import DATASHEET_RELATIVE, declared_uncertainty
from .motion import INERTIA_RSD, _inertia_determined
from .result import (
    GRAVITY_NAMES,
    ICOM_NAMES,
    PAYLOAD_NAMES,
    PayloadDataError,
    PayloadLimits,
    PayloadRejected,
    build_estimate,
    frame_name,
    inertia_problem,
    uncertainty_words,
)
from .static import UnloadedModel

IDLE = "idle"
CONVERGING = "converging"
CONVERGED = "converged"
NOT_EXCITED = "not excited"
STATES = (IDLE, CONVERGING, CONVERGED, NOT_EXCITED)
RECENT = 0.3
"""s of rows kept apart so that a contact can take them out again (:meth:`OnlinePayloadEstimator.contact`)."""
MAX_STREAM_LAG = 1.0
"""s: a grasp announced up to this far ahead of the next sample's stamp counts its rows from the announcement (the
stream was behind); further off the stamps are on another clock and the next sample is taken as the grasp's."""
# MISFIT_CHI2 (signals.misfit), the fit's χ²/ν above which the data disagree with the model: clean data give 0.8-1.0
# (spread < 0.2), a positions-only move under joint_trajectory_controller (the velocity steps at every point) 1.0-1.9,
# a stop at every 0.1 s point 10-145, the simulator's velocity half a step behind its positions and torque (before
# issue 46) 480-5300.
_STEP = 1e-6  # s, the step along the motion for dM/dt dq (a derivative of the model, not of data)
_COM = ("x", "y", "z")


@dataclass(frozen=True)
class OnlineConfig:
    """``cutoff`` Hz: the low-pass of the filtered form; ``row_period`` s between rows; ``solve_period`` s
    between solves; ``settle`` s after the grasp before rows count (the grasp's own transient: the gripper
    closing, the load taken over; the filters then start from zero); ``torque_noise`` N m: per-sample sensor
    noise std (σ's floor);
    ``model_uncertainty``: declared relative 1-σ error of the nominal links (mass, CoM, inertia);
    ``torque_offset_std`` N m: sensor offsets no model contains (not anchored, no calibrated offsets);
    ``anchor``: learn the unloaded model's error at rest before the grasp; ``anchor_rest`` s of rest it
    needs; ``rest_speed`` rad/s: at rest below it; ``rest_settle`` s: rows this long after the arm stopped are
    the rest's (its own misfit check: the filters' memory of the motion decays by exp(-2π cutoff t), 5e-4 at 0.15 s
    and 8 Hz); ``max_gap`` s: a longer step restarts the filters;
    converged when 3σ of the mass ≤ ``converged_mass`` x mass + ``converged_mass_abs`` kg and 3σ of
    every CoM component ≤ ``converged_com`` m; ``min_tilt_deg``: the payload's orientation must have spread
    by this much since the grasp (else ``not excited``: the CoM along the vertical is not separable from the
    mass; the tool's acceleration turns the effective gravity too, but what it shows of the CoM along the
    vertical, m c × a with a = α × r, is the torque of the payload's unknown products of inertia, J α, so it
    separates that component only as far as the inertia prior allows: tilting is what separates it);
    ``inertia_prior`` kg m² per kg: 1-σ of each
    inertia component about the CoM before the motion determines it (0.01: a 0.35 m box; 0 = no prior);
    ``limits``: plausibility and the weak prior on mass and CoM; ``fit_model_error``: the model's error (link
    parameters, calibrated model; not the offsets) is fitted with the payload within its declared σ (what of it the
    payload's rows cannot explain shows in the residual: the data narrow it where the motion shows it) rather
    than only propagated into σ; ``misfit_chi2``: the fit's χ²/ν above which the data disagree with the model and σ
    is widened by what the misfit can explain (module docstring; inf: never)."""

    cutoff: float = DEFAULT_CUTOFF
    row_period: float = 0.005
    solve_period: float = 0.1
    settle: float = 0.1
    torque_noise: float = 0.1
    model_uncertainty: float = DATASHEET_RELATIVE
    torque_offset_std: float = 0.5
    anchor: bool = True
    anchor_rest: float = 0.3
    rest_speed: float = 0.01
    max_gap: float = 0.1
    rest_settle: float = 0.15
    converged_mass: float = 0.01
    converged_mass_abs: float = 0.01
    converged_com: float = 0.005
    min_tilt_deg: float = 5.0
    inertia_rsd: float = INERTIA_RSD
    inertia_prior: float = 0.01
    limits: PayloadLimits = field(default_factory=lambda: PayloadLimits(max_payload=15.0, max_com_radius=0.5))
    fit_model_error: bool = True
    misfit_chi2: float = MISFIT_CHI2

    def __post_init__(self):
        if not (self.misfit_chi2 > 1):  # NaN too
            raise PayloadDataError(f"online estimator: misfit_chi2 must be > 1 (inf: never), got {self.misfit_chi2}")
        for name in ("cutoff", "row_period", "solve_period", "torque_noise", "anchor_rest", "max_gap",
                     "converged_com", "min_tilt_deg"):
            v = getattr(self, name)
            if not (math.isfinite(v) and v > 0):
                raise PayloadDataError(f"online estimator: {name} must be a finite number > 0, got {v}")
        for name in ("settle", "model_uncertainty", "torque_offset_std", "rest_speed", "rest_settle", "converged_mass",
                     "converged_mass_abs"):
            v = getattr(self, name)
            if not (math.isfinite(v) and v >= 0):
                raise PayloadDataError(f"online estimator: {name} must be a finite number >= 0, got {v}")


@dataclass(frozen=True)
class ComPrior:
    """What the gripper knows of the grasped payload's CoM before any motion: ``com`` (3, m, payload frame; e.g.
    the grasp point plus half the part's height along the flange axis) with an isotropic 1-σ ``std`` (m). Optional
    (:meth:`OnlinePayloadEstimator.grasped`); its σ must be honest (how far the true CoM may be from ``com``): a
    too small one makes the estimate and its σ wrong while the motion has not yet separated the CoM."""

    com: tuple[float, float, float]
    std: float

    def __post_init__(self):
        c = np.asarray(self.com, float)
        if c.shape != (3,) or not np.all(np.isfinite(c)):
            raise PayloadDataError(f"online estimator: the CoM prior must be 3 finite numbers (m, payload frame), got "
                                   f"{self.com}")
        if not (math.isfinite(self.std) and self.std > 0):
            raise PayloadDataError(f"online estimator: the CoM prior's std must be a finite number > 0 m, got "
                                   f"{self.std}")


MIN_INERTIA_PRIOR_STD = 0.1
"""The smallest relative σ of an :class:`InertiaPrior`: a part's data (density, fixtures, the grasp's orientation)
do not give its inertia better than about 10 %."""


def inertia_prior_problem(inertia, std: float, name: str = "the inertia prior",
                          std_name: str = "the inertia prior's std") -> str | None:
    """Why (Ixx, Ixy, Ixz, Iyy, Iyz, Izz) kg m² about the part's CoM with relative 1-σ ``std`` is not an inertia prior
    (None: it is): 6 finite values, a physical tensor (positive definite, triangle inequality), ``std`` at least
    :data:`MIN_INERTIA_PRIOR_STD`; ``name`` / ``std_name``: what the words call them (e.g. the node's parameters)."""
    v = np.asarray(inertia, float).ravel()
    shown = "[" + ", ".join(f"{x:g}" for x in v) + "]"
    if v.shape != (6,):
        return (f"{name} {shown} has {v.size} value(s): give the 6 components [Ixx, Ixy, Ixz, Iyy, Iyz, "
                "Izz] (kg m^2, about the part's CoM, payload frame axes)")
    if not np.all(np.isfinite(v)):
        return f"{name} {shown} is not finite: give 6 finite numbers (kg m^2)"
    problem = inertia_problem(1.0, np.zeros(3), v)
    if problem:
        return (f"{name} {shown} kg m^2 is not a body's inertia about its CoM ({problem}): check the "
                "units (kg m^2) and the order [Ixx, Ixy, Ixz, Iyy, Iyz, Izz]")
    if not (math.isfinite(std) and MIN_INERTIA_PRIOR_STD <= std <= 10.0):
        return (f"{std_name} {std:g} is outside [{MIN_INERTIA_PRIOR_STD:g}, 10] (a fraction of its "
                "largest moment): a part's data do not give its inertia better than ~10 %; use 0.2-0.5")
    return None


@dataclass(frozen=True)
class InertiaPrior:
    """What the part's data (CAD, a data sheet) say of the grasped payload's rotational inertia about its own CoM
    before any motion: ``inertia`` (Ixx, Ixy, Ixz, Iyy, Iyz, Izz; kg m², payload frame axes) with a 1-σ ``std`` of
    every component, a fraction of its largest moment. Optional (:meth:`OnlinePayloadEstimator.grasped`): until the
    motion tilts the payload, its accelerations show the CoM along the vertical only together with the unknown
    inertia (m c × a against I α); a known inertia separates them (docs/bench/online_ceiling.md). Its σ must be
    honest, as a :class:`ComPrior`'s."""

    inertia: tuple[float, float, float, float, float, float]
    std: float = 0.3

    def __post_init__(self):
        problem = inertia_prior_problem(self.inertia, self.std)
        if problem:
            raise PayloadDataError(f"online estimator: {problem}")

    @property
    def sigma(self) -> float:
        """kg m², 1-σ of every component."""
        i = np.asarray(self.inertia, float)
        return self.std * float(max(i[0], i[3], i[5]))


@dataclass(frozen=True)
class OnlineStatus:
    """What the estimator knows at ``t`` (s): ``state`` (one of STATES), ``reason`` (one line, the user's
    terms), the current ``estimate`` (None before the first solve after a grasp), ``rows`` accumulated,
    ``seconds`` of stream since the grasp, whether a payload is announced (``grasped``) and whether an
    unloaded anchor is in use (``anchored``); ``gravity_covariance`` (4 x 4) of (m, m cx, m cy, m cz) (kg,
    kg m; payload frame), correlations included: a CoM component the motion has not separated yet is
    uncertain alone but not in the torque it produces at the poses seen (:meth:`torque_std`).
    The fit against its noise model: ``misfit_ratio`` its χ²/ν, ``fit_rms`` and ``expected_rms`` (N m, per filtered
    row) the residual's RMS and what the noise model expects of it, ``widening`` the factor on σ in the directions
    the motion determines (1: none), ``misfit`` the words for the user when the data disagree ("" otherwise);
    ``rest_rows`` the rows taken at rest (``rest_settle`` s after the arm stopped: they have a misfit check of their
    own, so a jerky move does not deflate them)."""

    state: str
    reason: str
    estimate: PayloadEstimate | None
    t: float
    rows: int = 0
    seconds: float = 0.0
    grasped: bool = False
    anchored: bool = False
    gravity_covariance: np.ndarray | None = None
    misfit: str = ""
    misfit_ratio: float = math.nan
    fit_rms: float = math.nan
    expected_rms: float = math.nan
    widening: float = 1.0
    rest_rows: int = 0

    def torque_std(self, dyn: RigidBodyDynamics, q: np.ndarray) -> np.ndarray:
        """1-σ (n, N m) of the estimated payload's gravity torque at ``q`` (rad): what the collision monitor
        widens its thresholds by (times its k_sigma); zeros without an estimate."""
        if self.gravity_covariance is None:
            return np.zeros(dyn.n)
        y = dyn.payload_gravity_regressor(np.asarray(q, float))
        return np.sqrt(np.maximum(np.einsum("ij,jk,ik->i", y, self.gravity_covariance, y), 0.0))


def _root(cov: np.ndarray) -> np.ndarray:
    """L (m, k) with L Lᵀ = ``cov`` over its non-zero directions (k of them): δ = L z, z ~ N(0, I)."""
    w, vec = np.linalg.eigh(cov)
    keep = w > 1e-12 * max(float(w.max(initial=0.0)), 1e-300)
    return vec[:, keep] * np.sqrt(w[keep])


MOTION, REST = 0, 1
"""The row groups: rows while (or just after) the arm moves, and rows at rest (``rest_settle`` s after it stopped)."""


@dataclass
class _Sums:
    """The normal equations of one group of rows (N m): information YᵀY, Yᵀr, rᵀr, the model error's YᵀE, EᵀE,
    Eᵀr, and the row count; or a weighted sum of groups (:func:`_weighted`: each divided by its variance per row)."""

    a: np.ndarray
    b: np.ndarray
    rr: float
    e: np.ndarray
    ee: np.ndarray
    er: np.ndarray
    count: int = 0

    @classmethod
    def zeros(cls, k: int, p: int) -> _Sums:
        return cls(np.zeros((k, k)), np.zeros(k), 0.0, np.zeros((k, p)), np.zeros((p, p)), np.zeros(p))

    def add(self, terms, sign: int = 1) -> None:
        """One row's (YᵀY, Yᵀr, rᵀr, YᵀE, EᵀE, Eᵀr) added (``sign`` -1: taken out again)."""
        a, b, rr, e, ee, er = terms
        self.a += sign * a
        self.b += sign * b
        self.rr += sign * rr
        self.e += sign * e
        self.ee += sign * ee
        self.er += sign * er
        self.count += sign


def _weighted(groups, weights) -> _Sums:
    """Σ groups[g] x weights[g] (count: the rows')."""
    out = _Sums.zeros(*groups[0].e.shape)
    for g, w in zip(groups, weights):
        out.a += w * g.a
        out.b += w * g.b
        out.rr += w * g.rr
        out.e += w * g.e
        out.ee += w * g.ee
        out.er += w * g.er
        out.count += g.count
    return out


def _hold(a: float, x: float) -> tuple[float, float]:
    """(b0, b1) of the first-order low-pass exp(-x) = a per step, x = 2π f_c dt, exact for an input linear
    between samples: y_k = a y_(k-1) + b0 u_k + b1 u_(k-1). The same delay at any step, so the torque filtered
    at the stream's rate and the rows filtered on their coarser grid stay aligned (the trapezoid lags by
    ~x²/12 steps more on the coarse grid: 0.2 ms at 5 ms rows)."""
    if x < 1e-6:
        return 0.5 * (1 - a), 0.5 * (1 - a)
    c = (1 - a) / x
    return 1 - c, c - a


def _noise_power(a: float, x: float) -> float:
    """Variance of the filter's output per unit variance of a white input sampled at its step."""
    b0, b1 = _hold(a, x)
    h1 = a * b0 + b1
    return b0 * b0 + h1 * h1 / (1 - a * a)


class _Filter:
    """F[W2] + F[d/dt W1] of one row family on the row grid (first order; W2 linear between rows, W1 too so its
    derivative is constant between rows). :meth:`start` begins from rest at zero (the zero-state filter): the
    filtered torque started at the same instant obeys the filtered equation exactly from then on, whatever
    the arm did before (no transient of an earlier state to wait for)."""

    def __init__(self):
        self.out2 = self.out1 = self.prev1 = self.prev2 = None

    def start(self, w1: np.ndarray, w2: np.ndarray) -> None:
        self.out2, self.out1 = np.zeros_like(w2), np.zeros_like(w1)
        self.prev1, self.prev2 = w1, w2

    def step(self, w1: np.ndarray, w2: np.ndarray, a: float, dt: float, x: float) -> np.ndarray:
        if self.out2 is None:
            self.out2, self.out1 = w2.copy(), np.zeros_like(w1)
        else:
            b0, b1 = _hold(a, x)
            self.out2 = a * self.out2 + b0 * w2 + b1 * self.prev2
            self.out1 = a * self.out1 + (1 - a) * (w1 - self.prev1) / dt
        self.prev1, self.prev2 = w1, w2
        return self.out1 + self.out2


class _Rows:
    """The momentum rows of one sample: payload (n x 10), unloaded reference (n), model error (n x P)."""

    def __init__(self, dyn: RigidBodyDynamics, model: UnloadedModel | None, relative: float):
        self.dyn = dyn
        self.model = model
        self.p_nom = link_params(dyn.desc)
        self.link = dyn.maps.link_to_pin
        self.payload = dyn.maps.payload_to_pin
        self.zero = np.zeros(dyn.n)
        self.declared = declared_uncertainty(dyn, relative)

    def _y(self, q, dq, ddq) -> np.ndarray:
        return pin.computeJointTorqueRegressor(self.dyn.model, self.dyn.data, q, dq, ddq).copy()

    def __call__(self, q: np.ndarray, dq: np.ndarray):
        """((W1, W2) payload, (W1, W2) reference, (W1, W2) error), W1 p = M dq, W2 p = C dq + g - dM/dt dq."""
        z = self.zero
        g0 = self._y(q, z, z)
        mv = self._y(q, z, dq) - g0
        ahead = q + _STEP * dq
        dmv = (self._y(ahead, z, dq) - self._y(ahead, z, z) - mv) / _STEP
        w1 = mv
        w2 = self._y(q, dq, z) - dmv
        l1, l2 = w1 @ self.link, w2 @ self.link
        pay = (w1 @ self.payload, w2 @ self.payload)
        r1, r2 = l1 @ self.p_nom, l2 @ self.p_nom
        n = self.dyn.n
        if self.model is None:
            err = (np.hstack([l1, np.zeros((n, n))]), np.hstack([l2, np.eye(n)]))
            return pay, (r1, r2), err
        lg = g0 @ self.link
        r2 = r2 - lg @ self.p_nom + self.model.gravity(q)  # the calibrated gravity (and offsets), not the nominal
        rg = self.model.uncertainty.regressor(q)
        e1 = np.hstack([l1, np.zeros(rg.shape), np.zeros((n, n))])
        e2 = np.hstack([l2 - lg, rg, np.eye(n)])
        return pay, (r1, r2), (e1, e2)

    def covariance(self, offset_std: np.ndarray) -> np.ndarray:
        """Σ of the error columns: the nominal links' (declared), the calibrated model's, the offsets'."""
        blocks = [self.declared.covariance]
        if self.model is not None:
            blocks.append(self.model.uncertainty.covariance)
        blocks.append(np.diag(np.asarray(offset_std, float) ** 2))
        size = sum(b.shape[0] for b in blocks)
        out, k = np.zeros((size, size)), 0
        for b in blocks:
            out[k:k + b.shape[0], k:k + b.shape[0]] = b
            k += b.shape[0]
        return out


class OnlinePayloadEstimator:
    """Mass, CoM and (when the motion excites it) inertia of a grasped payload, online (module docstring).

    One per arm, fed every joint-state sample: :meth:`update` (cheap; a solve every ``solve_period``),
    :meth:`grasped` when the gripper has closed, :meth:`reset` at a release (back to the unloaded arm).
    ``model``: a calibrated unloaded model (:func:`.static.load_unloaded_model`) in place of the nominal
    description's gravity; its uncertainty enters σ.
    """

    def __init__(self, dyn: RigidBodyDynamics, config: OnlineConfig | None = None, model: UnloadedModel | None = None):
        self.dyn = dyn
        self.cfg = config or OnlineConfig()
        self.model = model
        self._rows = _Rows(dyn, model, self.cfg.model_uncertainty)
        n = dyn.n
        self._n_err = self._rows(np.zeros(n), np.zeros(n))[2][1].shape[1]
        self.restarts = 0  # filter restarts (stamps that went back or a gap)
        self.rejected = 0  # solves whose result was implausible (the previous estimate kept)
        self.discarded = 0  # rows taken out again for a contact (:meth:`contact`)
        self._paused = False  # a contact: no row is fitted
        self._recent: deque = deque()  # (t, the row's terms) of the last RECENT s: what a contact takes out
        self._dt = 0.0  # s, the stream's mean sample interval
        self._restart()
        self._forget_anchor()
        self._clear()

    # ------------------------------------------------------------------ events
    def grasped(self, prior: ComPrior | None = None, at: float | None = None,
                inertia: InertiaPrior | None = None) -> None:
        """A payload was grasped (the gripper closed): from the next sample + ``settle`` the rows count.
        ``prior``: what the gripper knows of the payload's CoM (:class:`ComPrior`; None: only the weak prior of
        ``limits``); ``inertia``: what the part's data say of its inertia (:class:`InertiaPrior`; None: the weak
        ``inertia_prior``). ``at``: when it was announced (s, the stream's clock): samples stamped before it that are
        handled after the call (a stream behind by up to :data:`MAX_STREAM_LAG`) held no payload yet, so the rows
        count from ``at`` + ``settle`` (an ``at`` further ahead means another clock: ignored, see
        :attr:`grasp_lag`)."""
        self._clear()
        self._grasped = True
        self._at = at
        self._com_prior = prior
        self._inertia_prior = inertia
        self._anchor = self._anchor_candidate() if self.cfg.anchor else None
        self._status = OnlineStatus(CONVERGING, "grasp announced: waiting for the first rows", None,
                                    self._status.t, grasped=True, anchored=self._anchor is not None)

    def reset(self) -> None:
        """The payload was released: back to the unloaded arm (no estimate), the anchor re-learnt at rest."""
        self._clear()
        self._forget_anchor()

    def contact(self, active: bool, lookback: float = 0.0) -> int:
        """An external contact (the collision monitor's report): while ``active`` no row is fitted (nor learnt
        into the anchor), and the rows of the last ``lookback`` s before it (its onset before the report) are
        taken out again; at its end the filters start over (the rows kept, as after a gap in the stream), so the
        contact leaves no transient in the rows. Returns the rows taken out."""
        if not active:
            if self._paused:
                self._paused = False
                self._restart()
            return 0
        self._paused = True
        self._rest_since = None  # a rest in progress starts over (the contact is no anchor)
        cut = (self._t if self._t is not None else -math.inf) - lookback
        out = 0
        while self._recent and self._recent[-1][0] >= cut - 1e-9:
            _, group, terms, tilt = self._recent.pop()
            self._groups[group].add(terms, -1)
            self._tilt -= tilt
            out += 1
        self.discarded += out
        return out

    @property
    def _count(self) -> int:
        """Rows accumulated since the grasp (both groups)."""
        return self._groups[MOTION].count + self._groups[REST].count

    @property
    def status(self) -> OnlineStatus:
        return self._status

    @property
    def estimate(self) -> PayloadEstimate | None:
        """The current estimate (None while idle or before the first solve)."""
        return self._status.estimate

    # ------------------------------------------------------------------ per sample
    def update(self, t: float, q: np.ndarray, dq: np.ndarray, tau: np.ndarray) -> OnlineStatus:
        """One sample (t s, q rad, dq rad/s, measured joint torque tau N m); returns the status (new after a solve)."""
        q, dq, tau = (np.asarray(v, float) for v in (q, dq, tau))
        t = float(t)
        if self._t is not None and not (0 < t - self._t <= self.cfg.max_gap):
            self.restarts += 1
            self._restart()
        if self._t is None:
            self._tau_f = tau.copy()
        else:
            x = 2 * math.pi * self.cfg.cutoff * (t - self._t)
            a = math.exp(-x)
            b0, b1 = _hold(a, x)
            self._tau_f = a * self._tau_f + b0 * tau + b1 * self._tau_prev
        if self._t is not None:
            self._dt = 0.99 * self._dt + 0.01 * (t - self._t) if self._dt else t - self._t
        self._t, self._tau_prev = t, tau
        if self._t_row is None or t - self._t_row >= self.cfg.row_period - 1e-9:
            self._row(t, q, dq)
        if self._grasped and self._since is not None and t - self._t_solve >= self.cfg.solve_period - 1e-9:
            self.solve()
        return self._status

    def solve(self) -> OnlineStatus:
        """Solve the accumulated normal equations now (``update`` does so every ``solve_period``)."""
        if not self._grasped or self._count == 0 or self._t is None:
            # nothing new to solve: no rows yet, or no sample since the filters restarted (a contact's end, a gap)
            return self._status
        self._t_solve = self._t
        self._status = self._solution()
        return self._status

    # ------------------------------------------------------------------ internals
    def _restart(self) -> None:
        self._t = None
        self._t_solve = -math.inf
        self._t_row = None
        self._tau_f = self._tau_prev = None
        self._f_pay, self._f_ref, self._f_err = _Filter(), _Filter(), _Filter()
        self._since = None  # stream time from which rows count (after a grasp and each restart: + settle)
        self._started = False  # the filters restarted from zero at the first row that counts
        self._unit = 0.0
        self._rest_since = None
        self._last_q = None
        self._still_since = None  # s, since when the arm is at rest (rows after a restart count as motion's)

    def _forget_anchor(self) -> None:
        self._rest_since = None  # a rest in progress starts over with empty sums
        self._rest_sum = None
        self._rest_n = 0
        self._rest_q = None
        self._rest_seconds = 0.0
        self._kept = None  # (r_a, E_a, q_a, seconds) of the last completed rest
        self._anchor = None

    def _clear(self) -> None:
        k, p = 10, self._n_err
        self._grasped = False
        # per group (MOTION, REST): YᵀY, Yᵀr, rᵀr, YᵀE and EᵀE, Eᵀr (the model error's own information)
        self._groups = (_Sums.zeros(k, p), _Sums.zeros(k, p))
        self._tilt = np.zeros((3, 3))  # sum of u uᵀ, u the vertical in the payload frame at each row
        self._com_prior: ComPrior | None = None
        self._inertia_prior: InertiaPrior | None = None
        self._recent.clear()
        self._first = None
        self._t_solve = -math.inf
        self._since = None
        self._at: float | None = None
        self.grasp_lag: float | None = None  # s the stream was behind the grasp announcement (None: not known)
        self._started = False
        self._error_cov = None
        self._error_root = None
        self._error_root_all = None
        t = self._t if self._t is not None else 0.0
        self._status = OnlineStatus(IDLE, "no payload announced (call grasped after the gripper closes)", None, t)

    def _row(self, t: float, q: np.ndarray, dq: np.ndarray) -> None:
        dt = 0.0 if self._t_row is None else t - self._t_row
        x = 2 * math.pi * self.cfg.cutoff * dt
        a = math.exp(-x)
        self._t_row = t
        self._last_q = q
        if np.max(np.abs(dq)) > self.cfg.rest_speed:
            self._still_since = None
        elif self._still_since is None:
            self._still_since = t
        pay, ref, err = self._rows(q, dq)
        if self._grasped and self._since is None:
            lag = None if self._at is None else self._at - t
            self.grasp_lag = lag if lag is not None and abs(lag) <= MAX_STREAM_LAG else None
            self._since = t + max(self.grasp_lag or 0.0, 0.0) + self.cfg.settle
        if self._grasped and not self._started and t >= self._since - 1e-9:
            self._start(pay, ref, err)  # the rows count from here: every filter from zero, together
            return
        y = self._f_pay.step(*pay, a, dt, x)
        ref_f = self._f_ref.step(*ref, a, dt, x)
        e = self._f_err.step(*err, a, dt, x)
        r = self._tau_f - ref_f
        if self._paused:
            return
        if not self._grasped:
            self._learn_anchor(t, q, dq, r, e)
            return
        if not self._started:
            return
        self._unit = a * self._unit + (1 - a)  # the zero-state filter's response to a constant 1
        if self._anchor is not None:  # the offsets' columns stay: what the anchor leaves of them is its noise
            r = r - self._unit * self._anchor[0]
            e = e.copy()
            e[:, :-self.dyn.n] -= self._unit * self._anchor[1][:, :-self.dyn.n]
        u = self.dyn.forward_kinematics(q, "payload")[2, :3]  # base z in the payload frame (third row of R)
        terms = (y.T @ y, y.T @ r, float(r @ r), y.T @ e, e.T @ e, e.T @ r)
        group = REST if self._still_since is not None and t - self._still_since >= self.cfg.rest_settle else MOTION
        self._groups[group].add(terms)
        tilt = np.outer(u, u)
        self._tilt += tilt
        self._recent.append((t, group, terms, tilt))
        while self._recent and self._recent[0][0] < t - RECENT:
            self._recent.popleft()
        if self._first is None:
            self._first = t

    def _start(self, pay, ref, err) -> None:
        """Zero-state start of the torque filter and the row filters at this row (see :class:`_Filter`): the
        payload's torque (it was not carried before the grasp) and the arm's motion before this instant leave no
        transient in the rows; a constant (an offset, the anchor) enters as the filter's unit-step response."""
        self._tau_f = np.zeros_like(self._tau_f)
        for f, w in ((self._f_pay, pay), (self._f_ref, ref), (self._f_err, err)):
            f.start(*w)
        self._unit = 0.0
        self._started = True
        # the first solve one filter time constant after the start (the rows at 63 % of their amplitude), not a
        # whole solve_period later: the monitor carries an estimate (and its σ) as early as the rows allow
        self._t_solve = self._t + 1 / (2 * math.pi * self.cfg.cutoff) - self.cfg.solve_period

    def _learn_anchor(self, t: float, q: np.ndarray, dq: np.ndarray, r: np.ndarray, e: np.ndarray) -> None:
        if np.max(np.abs(dq)) > self.cfg.rest_speed:
            self._end_rest()
            return
        if self._rest_since is None:
            self._rest_since = t
            self._rest_sum, self._rest_n, self._rest_q = [np.zeros_like(r), np.zeros_like(e)], 0, q.copy()
        if t - self._rest_since < self.cfg.settle:  # the filters settle on the rest first
            return
        self._rest_sum[0] += r
        self._rest_sum[1] += e
        self._rest_n += 1
        self._rest_seconds = t - self._rest_since - self.cfg.settle

    def _end_rest(self) -> None:
        if self._rest_n and self._rest_seconds >= self.cfg.anchor_rest:
            self._kept = (self._rest_sum[0] / self._rest_n, self._rest_sum[1] / self._rest_n, self._rest_q,
                          self._rest_seconds)
        self._rest_since, self._rest_n, self._rest_seconds = None, 0, 0.0

    def _anchor_candidate(self):
        self._end_rest()
        return self._kept

    def _offset_std(self) -> np.ndarray:
        n = self.dyn.n
        if self._anchor is not None:  # offsets cancel; what remains is the anchor's own noise (its mean over the rest)
            return np.full(n, self.cfg.torque_noise * math.sqrt(self._sample_period() / self._anchor[3]))
        if self.model is not None and self.model.offsets:
            return np.zeros(n)
        return np.full(n, self.cfg.torque_offset_std)

    def _sample_period(self) -> float:
        return self._dt if self._dt else self.cfg.row_period

    def _noise_gain(self) -> float:
        """Std of the filtered torque per unit of per-sample noise std (first order at the stream's rate)."""
        x = 2 * math.pi * self.cfg.cutoff * self._sample_period()
        return math.sqrt(_noise_power(math.exp(-x), x))

    def _correlation(self) -> float:
        a = math.exp(-2 * math.pi * self.cfg.cutoff * self.cfg.row_period)
        return (1 + a) / (1 - a)

    def _prior(self, p: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
        """(mean, variance) of the weak prior: mass and, for the mass of ``p``, the CoM within the limits; the inertia
        about the frame origin that of a point mass at the CoM of ``p`` (the last solution; pulled in to
        ``max_com_radius``: a wild CoM of a barely separated direction must not set the inertia) plus
        ``inertia_prior`` per kg (with an :class:`InertiaPrior`: plus its inertia, ± its σ);
        with a :class:`ComPrior` and a solution, the first moments m c_prior ± m σ_prior (m from ``p``)."""
        lim = self.cfg.limits
        m, r = lim.max_payload, lim.max_com_radius
        mean = np.zeros(10)
        var = np.array([m, m * r, m * r, m * r] + [m * r * r] * 6) ** 2
        if p is not None:  # the CoM within max_com_radius for the mass found (not for max_payload: a 1 kg box's
            var[1:4] = (max(float(p[0]), 0.05) * r) ** 2  # CoM would be free over 7 m, noise makes it implausible)
        if p is not None and self._com_prior is not None:
            mass = max(float(p[0]), 0.05)
            mean[1:4] = mass * np.asarray(self._com_prior.com, float)
            var[1:4] = (mass * self._com_prior.std) ** 2
        known = self._inertia_prior
        if p is not None and (self.cfg.inertia_prior > 0 or known is not None):
            mass = max(float(p[0]), 0.05)
            h = p[1:4] * min(1.0, mass * r / max(float(np.linalg.norm(p[1:4])), 1e-12))
            mean[4:] = np.array([h[1] ** 2 + h[2] ** 2, -h[0] * h[1], -h[0] * h[2], h[0] ** 2 + h[2] ** 2,
                                 -h[1] * h[2], h[0] ** 2 + h[1] ** 2]) / mass
            var[4:] = (self.cfg.inertia_prior * mass) ** 2
            if known is not None:  # the part's own inertia about its CoM, on top of the parallel-axis term
                mean[4:] += np.asarray(known.inertia, float)
                var[4:] = known.sigma ** 2
        return mean, var

    def _solution(self) -> OnlineStatus:
        groups = self._groups
        n = self.dyn.n
        rows = np.array([g.count * n for g in groups], float)
        n_rows = int(rows.sum())
        dof = np.maximum(rows - 10 * rows / max(n_rows, 1), 1.0)  # ν = rows - the payload's 10, shared by the groups
        present = rows > 0
        corr = self._correlation()
        floor = (self.cfg.torque_noise * self._noise_gain()) ** 2
        s2, p = np.full(len(groups), floor), None
        for _ in range(3):  # the prior's inertia from the last solution; each group's noise level from its residual
            mean, var = self._prior(p)
            tot = _weighted(groups, 1.0 / (s2 * corr))
            cov = np.linalg.inv(tot.a + np.diag(1.0 / var))
            p = cov @ (tot.b + mean / var)
            rss_g = np.array([max(g.rr - 2 * p @ g.b + p @ g.a @ p, 0.0) for g in groups])
            s2 = np.maximum(floor, rss_g / dof)
        rss = float(rss_g.sum())
        if self._error_cov is None:  # constant while a payload is carried
            self._error_cov = self._rows.covariance(self._offset_std())
            self._error_root = _root(self._error_cov[:-n, :-n])
            self._error_root_all = _root(self._error_cov)  # with the offsets': what the misfit check lets it explain
        v = s2 * corr
        fit_rss = self._explained_rss(_weighted(groups, 1.0 / v), mean, var)
        # per group, ν its share of rows - the payload's 10 parameters; beyond misfit_chi2 x its expectation the
        # unexplained torque is taken as systematic (module docstring, :mod:`..signals.misfit`): a misfitting motion's
        # rows are deflated, the rest's after it keep their weight
        checks = [check_misfit(fit_rss[i], int(rows[i]), dof[i], floor, v[i], self.cfg.misfit_chi2)
                  for i in range(len(groups))]
        scale = np.array([c.information_scale if present[i] else 1.0 for i, c in enumerate(checks)])
        # the estimate: the groups weighted by their own widening relative to the least widened one (one group alone:
        # the estimate is unchanged, σ widened); σ: each group at its own widening
        relative = scale / scale[present].min() if present.any() else scale
        p, cov = self._fit(_weighted(groups, 1.0 / (v * relative)), mean, var)
        if np.any(scale > 1.0):
            cov = self._fit(_weighted(groups, 1.0 / (v * scale)), mean, var)[1]
        cov = 0.5 * (cov + cov.T)
        whole = check_misfit(float(fit_rss.sum()), n_rows, n_rows - 10, floor)
        check = Misfit(whole.ratio, whole.fit_rms, whole.expected_rms, math.sqrt(float(scale.max())))
        seconds = self._t - self._first if self._first is not None else 0.0
        fit = dict(misfit_ratio=check.ratio, fit_rms=check.fit_rms, expected_rms=check.expected_rms,
                   widening=check.widening)
        common = dict(t=self._t, rows=self._count, seconds=seconds, grasped=True, anchored=self._anchor is not None,
                      rest_rows=groups[REST].count)
        try:
            est = self._estimate(p, cov, math.sqrt(rss / max(n_rows, 1)))
        except PayloadRejected as e:
            self.rejected += 1
            return replace(self._status, state=CONVERGING, reason=f"not yet plausible ({e}); keeping the last estimate",
                           **common)
        misfit = ""
        if check.flagged:
            misfit = misfit_words(est, **fit)
            if present[REST] and scale[REST] == 1.0:
                misfit += (f"; the {groups[REST].count * self.cfg.row_period:.1f} s at rest fit their noise model and "
                           "carry the estimate where they determine it")
        if misfit:
            est = replace(est, notes=est.notes + (misfit,))
        state, reason = self._judge(est, cov)
        if misfit:
            reason = f"{misfit}; {reason}"
        return OnlineStatus(state, reason, est, gravity_covariance=cov[:4, :4].copy(), misfit=misfit, **fit, **common)

    def _fit(self, s: _Sums, mean: np.ndarray, var: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(payload, its covariance) from the rows' normal equations ``s`` (already divided by each row's variance) and
        the prior (``mean``, ``var``): with the model's error fitted (``fit_model_error``) or propagated."""
        if self.cfg.fit_model_error:
            return self._with_model_error(s, mean, var)
        cov = np.linalg.inv(s.a + np.diag(1.0 / var))
        sens = cov @ s.e
        return cov @ (s.b + mean / var), cov + sens @ self._error_cov @ sens.T

    def _explained_rss(self, s: _Sums, mean: np.ndarray, var: np.ndarray) -> np.ndarray:
        """Each group's residual energy (N² m², summed over its rows) after everything the model may explain is
        fitted to all rows (``s``: their normal equations divided by each row's variance): the payload within its prior
        (``mean``, ``var``) and the model's whole error δ ~ N(0, Σ) -- the links', the calibrated model's, the offsets'
        -- within Σ. What is left is what the noise model has to explain: its expectation is ν x the filtered noise's
        variance."""
        lw = self._error_root_all
        k = lw.shape[1]
        h = np.zeros((10 + k, 10 + k))
        h[:10, :10] = s.a + np.diag(1.0 / var)
        h[:10, 10:] = s.e @ lw
        h[10:, :10] = h[:10, 10:].T
        h[10:, 10:] = lw.T @ s.ee @ lw + np.eye(k)
        x = np.linalg.solve(h, np.concatenate([s.b + mean / var, lw.T @ s.er]))
        p, z = x[:10], x[10:]
        out = []
        for g in self._groups:
            el, ell, er = g.e @ lw, lw.T @ g.ee @ lw, lw.T @ g.er
            rss = g.rr - 2 * p @ g.b - 2 * z @ er + p @ g.a @ p + 2 * p @ el @ z + z @ ell @ z
            out.append(max(float(rss), 0.0))
        return np.array(out)

    def _with_model_error(self, s: _Sums, mean: np.ndarray, var: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(payload, its covariance) fitted together with the model's error δ ~ N(0, Σ) from the rows' normal equations
        ``s`` (divided by each row's variance) and the payload's prior (``mean``, ``var``): the links' and the
        calibrated model's part of δ whitened (δ = L z, z ~ N(0, I) over Σ's non-zero directions) and fitted; the
        offsets' part (last n columns: what the anchor leaves of them, or the declared offsets) only propagated through
        the joint fit. A constant is what an unexcited CoM component or the inertia prior's misfit looks like early in
        a move: fitting it cost the exact-model estimate 2-5 points at 1.0 s on docs/bench/online_ceiling.md's moves.
        With no information on δ in the rows this is the propagated S Σ Sᵀ."""
        n = self.dyn.n
        lw = self._error_root
        k = lw.shape[1]
        h = np.zeros((10 + k, 10 + k))
        h[:10, :10] = s.a + np.diag(1.0 / var)
        h[:10, 10:] = s.e[:, :-n] @ lw
        h[10:, :10] = h[:10, 10:].T
        h[10:, 10:] = lw.T @ s.ee[:-n, :-n] @ lw + np.eye(k)
        g = np.concatenate([s.b + mean / var, lw.T @ s.er[:-n]])
        inv = np.linalg.inv(h)
        offsets = np.vstack([s.e[:, -n:], lw.T @ s.ee[:-n, -n:]])  # how an offset error moves g
        sens = (inv @ offsets)[:10]
        return (inv @ g)[:10], inv[:10, :10] + sens @ self._error_cov[-n:, -n:] @ sens.T

    def _estimate(self, p: np.ndarray, cov: np.ndarray, rms: float) -> PayloadEstimate:
        unc = self._rows.declared if self.model is None else self.model.uncertainty
        note = f"std includes the unloaded model's uncertainty ({unc.source})"
        if self.model is not None:
            note += f" and the nominal dynamics' (declared {100 * self.cfg.model_uncertainty:g} %)"
        if self.cfg.fit_model_error:
            note += ", fitted with the payload within it"
        if self._anchor is not None:
            note += "; anchored on the unloaded arm at rest before the grasp"
        if self._inertia_prior is not None:
            note += f"; the part's inertia prior (σ {100 * self._inertia_prior.std:g} % of its largest moment)"
        info = _weighted(self._groups, (1, 1)).a
        common = dict(frame=frame_name(self.dyn), samples=self._count, residual_rms=rms,
                      condition_number=float(np.linalg.cond(info[:4, :4])), limits=self.cfg.limits)
        method = f"online filtered ({self.cfg.cutoff:g} Hz)"
        undetermined, why = self._inertia(p, cov)
        if not undetermined:
            est = build_estimate(p, cov, np.ones(10, bool), PAYLOAD_NAMES, method=method, **common)
            return replace(est, notes=est.notes + (note,))
        est = build_estimate(p[:4], cov[:4, :4], np.ones(4, bool), GRAVITY_NAMES,
                             method=method + " (inertia not determined)", **common)
        return replace(est, undetermined=tuple(undetermined),
                       notes=est.notes + (note, f"inertia not determined yet: {why}"))

    def _inertia(self, p: np.ndarray, cov: np.ndarray) -> tuple[list[str], str]:
        """(undetermined inertia components, why): the full check (:func:`.motion._inertia_determined`, a
        numeric Jacobian) only once the data have at least halved the prior's σ of every inertia parameter."""
        prior = self.cfg.inertia_prior * max(float(p[0]), 0.05)
        if prior > 0 and np.any(np.sqrt(np.diag(cov)[4:]) > 0.5 * prior):
            return list(ICOM_NAMES), ("the motion so far has not reduced its uncertainty below half the prior's "
                                      f"({self.cfg.inertia_prior:g} kg m^2 per kg)")
        return _inertia_determined(p, cov, self.cfg.inertia_rsd)

    def _judge(self, est: PayloadEstimate, cov: np.ndarray) -> tuple[str, str]:
        s = est.std
        m3 = 3 * s.get("mass", math.inf)
        c3 = 3 * max(s.get(k, math.inf) for k in ("cx", "cy", "cz")) if est.mass > 0 else 0.0
        mass_ok = m3 <= self.cfg.converged_mass * abs(est.mass) + self.cfg.converged_mass_abs
        com_ok = c3 <= self.cfg.converged_com
        where = (f"mass {est.mass:.3f} ± {m3:.3f} kg, CoM ± {1e3 * c3:.1f} mm (3σ); converged at ± "
                 f"{100 * self.cfg.converged_mass:g} % + {self.cfg.converged_mass_abs:g} kg / "
                 f"{1e3 * self.cfg.converged_com:g} mm")
        if mass_ok and com_ok:
            return CONVERGED, where
        weak = self._weak_direction()
        if weak:
            return NOT_EXCITED, f"{weak}; {where}"
        return CONVERGING, where

    def _weak_direction(self) -> str:
        """'' when the payload has been seen in enough orientations to separate mass and the three CoM
        components, else what is not separated yet and which joints would separate it."""
        if self._count == 0:
            return "no rows yet"
        w, v = np.linalg.eigh(np.eye(3) - self._tilt / self._count)
        tilt = math.degrees(math.asin(math.sqrt(min(1.0, 2 * max(w[0], 0.0)))))
        if tilt >= self.cfg.min_tilt_deg:
            return ""
        axis = v[:, 0]
        names = [f"CoM {_COM[i]}" for i in np.argsort(-np.abs(axis)) if abs(axis[i]) > 0.3]
        direction = np.concatenate([[0.0], axis])
        return (f"the motion has tilted the payload by only about {tilt:.0f} deg since the grasp (at least "
                f"{self.cfg.min_tilt_deg:g} deg separate it): {' / '.join(names)} not yet separated from the mass "
                f"(move joints {self._joints_for(direction)})")

    def _joints_for(self, direction: np.ndarray) -> str:
        """The two joints whose rotation changes the payload's gravity torque along ``direction`` the most."""
        q = self._rest_q_or_last()
        base = self.dyn.payload_gravity_regressor(q) @ direction
        gain = []
        for j in range(self.dyn.n - 1):  # the last joint turns the flange about its own axis only
            dq = np.zeros(self.dyn.n)
            dq[j] = 0.1
            gain.append(np.linalg.norm(self.dyn.payload_gravity_regressor(q + dq) @ direction - base))
        best = sorted(np.argsort(gain)[-2:] + 1)
        return "/".join(str(j) for j in best)

    def _rest_q_or_last(self) -> np.ndarray:
        return self._last_q if self._last_q is not None else np.zeros(self.dyn.n)


def misfit_words(est: PayloadEstimate, misfit_ratio: float, fit_rms: float, expected_rms: float,
                 widening: float) -> str:
    """What a user reads when the fit does not fit (:attr:`OnlineStatus.misfit`): how much torque the model does not
    explain, against what was expected, and how uncertain that leaves the estimate (3σ after the widening)."""
    return misfit_sentence("the motion has torque", Misfit(misfit_ratio, fit_rms, expected_rms, widening),
                           uncertainty_words(est),
                           "Look for a torque or velocity signal filtered or delayed against the positions, friction "
                           "or elastic joints the model lacks, or a jerkier motion than the estimate follows (a stop "
                           "at every point: send the points' velocities)")


__all__ = ["CONVERGED", "CONVERGING", "IDLE", "MIN_INERTIA_PRIOR_STD", "NOT_EXCITED", "STATES", "ComPrior",
           "InertiaPrior", "MISFIT_CHI2", "OnlineConfig", "OnlinePayloadEstimator", "OnlineStatus",
           "inertia_prior_problem", "misfit_words"]
