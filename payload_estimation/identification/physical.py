"""Physically consistent link parameters from identified dynamic coefficients (paper 003, eqs. 15-18).

Problem: find link parameters mu (mass, CoM, inertia about the CoM of every link, plus friction)
within bounds LB <= mu <= UB (eq. 16) and a total-mass range (eq. 17) such that the coefficients
they imply reproduce the identified ones. Paper 003 minimises ||tau - Y_e pi_e(mu)|| (eq. 15);
because the least-squares fit is linear, that equals

    ||tau - Y_e pi_e(mu)||^2 = RSS_min + sigma^2 (pi_hat - pi_e(mu))^T C^-1 (pi_hat - pi_e(mu))

(C the covariance of pi_hat), so the optimisation works on the small weighted form and reports the
paper's torque-norm value ``f(mu)`` in N m.

Physical consistency is built into the parametrisation instead of imposed as constraints
(log-Cholesky factor of the pseudo-inertia, Rucker & Wensing 2022), per link::

    theta = (alpha, d1, d2, d3, s12, s13, s23, t1, t2, t3)
    m = exp(2 alpha),  c = t,  A = [[e^d1, s12, s13], [0, e^d2, s23], [0, 0, e^d3]]  (m)
    Sigma_c = m A A^T  (second moment of mass about the CoM),  I_c = tr(Sigma_c) 1 - Sigma_c

Every theta gives m > 0 and a positive-definite pseudo-inertia, i.e. I_c positive definite *and*
the triangle inequality of its principal moments (strictly) -- the first four lines of eq. (18).
p(theta) is polynomial, so the Jacobian is analytic. The problem is solved as bounded nonlinear
least squares (``scipy.optimize.least_squares``, trust-region reflective) from several starts
(nominal + uniform random starts within the bounds, as the paper's Table 1): the bounds of eq. (16)
are bounds on theta and the friction terms, the total-mass range of eq. (17) is a penalty residual
(``_MASS_PENALTY`` per kg outside it).

Prior: the nominal description's links, each projected onto the physically consistent set first
when it is not consistent (published sets often are not: :func:`consistent_prior`, reported in
:attr:`PhysicalRetrieval.prior`). What the data cannot see (parameters outside the range of K, and
directions the recording barely excites) is held near that prior by residuals
sqrt(w) (p - p_nom) / s with s = (m, 0.1 m [x3], 0.01 m [x6]) per link (kg, kg m, kg m^2 -- a
CoM shift of 0.1 m or a radius of gyration of 0.1 m is one unit). With weight w, one unit of
deviation costs as much as sqrt(w) standard deviations of one identified coefficient. The default
w = 10 is the smallest that kept every variable off its bounds on the Panda recording of
docs/bench/panda.md (w = 1 parked three radii of gyration on their 1 mm bound) at a cost of
< 0.001 N m of hold-out torque RMS; more data weigh more against it (the coefficients' std
shrinks). Variables that end on a bound are reported by name (:attr:`PhysicalResult.warnings`).
"""

from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass

import numpy as np
import scipy.optimize

from ..errors import PayloadEstimationError
from ..model.description import RobotDescription
from ..model.dynamics import RigidBodyDynamics
from ..model.parameters import BodyInertia, check_consistency

log = logging.getLogger(__name__)

N_THETA = 10
_MASS_PENALTY = 1e4  # residual per kg of total mass outside its range
PRIOR_WEIGHT = 10.0  # weight w of the prior towards the nominal parameters (module docstring)


class PhysicalRetrievalError(PayloadEstimationError):
    """Bad input to the physical-parameter retrieval; the message names the problem."""


# --- parametrisation ---------------------------------------------------------------------------

def _sigma_to_j6(s: np.ndarray) -> np.ndarray:
    """Inertia (xx, xy, xz, yy, yz, zz) = tr(S) 1 - S of a second-moment matrix S (..., 3, 3)."""
    tr = np.trace(s, axis1=-2, axis2=-1)
    return np.stack([tr - s[..., 0, 0], -s[..., 0, 1], -s[..., 0, 2],
                     tr - s[..., 1, 1], -s[..., 1, 2], tr - s[..., 2, 2]], axis=-1)


def _a_matrix(th: np.ndarray) -> np.ndarray:
    a = np.zeros(th.shape[:-1] + (3, 3))
    a[..., 0, 0], a[..., 1, 1], a[..., 2, 2] = np.exp(th[..., 1]), np.exp(th[..., 2]), np.exp(th[..., 3])
    a[..., 0, 1], a[..., 0, 2], a[..., 1, 2] = th[..., 4], th[..., 5], th[..., 6]
    return a


def params_from_theta(theta: np.ndarray) -> np.ndarray:
    """Standard parameters p (n*10, seeds' order, J about the frame origin) of theta (n*10)."""
    th = np.asarray(theta, float).reshape(-1, N_THETA)
    m = np.exp(2 * th[:, 0])
    t = th[:, 7:10]
    a = _a_matrix(th)
    s_o = m[:, None, None] * (a @ np.swapaxes(a, -1, -2) + t[:, :, None] * t[:, None, :])
    return np.concatenate([m[:, None], m[:, None] * t, _sigma_to_j6(s_o)], axis=1).reshape(-1)


def params_jacobian(theta: np.ndarray) -> np.ndarray:
    """Block-diagonal d p / d theta (n*10 x n*10), analytic and vectorised over links."""
    th = np.asarray(theta, float).reshape(-1, N_THETA)
    n = th.shape[0]
    p = params_from_theta(theta).reshape(n, N_THETA)
    m, t, a = np.exp(2 * th[:, 0]), th[:, 7:10], _a_matrix(th)
    # Each of the 9 shape parameters moves Sigma_o by m (e_i v^T + v e_i^T) for a row index i and a
    # vector v: column j of A (times e^d for a diagonal entry) for A_ij, t for the CoM.
    rows = np.array([0, 1, 2, 0, 0, 1, 0, 1, 2])
    v = np.empty((n, 9, 3))
    for col, (i, j) in enumerate([(0, 0), (1, 1), (2, 2), (0, 1), (0, 2), (1, 2)]):
        v[:, col] = a[:, :, j] * (a[:, i, j][:, None] if i == j else 1.0)
    v[:, 6:9] = t[:, None, :]
    e = np.eye(3)[rows]  # 9 x 3
    ds = m[:, None, None, None] * (e[None, :, :, None] * v[:, :, None, :] + v[:, :, :, None] * e[None, :, None, :])
    blk = np.zeros((n, N_THETA, N_THETA))
    blk[:, :, 0] = 2 * p
    blk[:, 4:, 1:10] = np.swapaxes(_sigma_to_j6(ds), 1, 2)
    blk[:, 1:4, 7:10] = m[:, None, None] * np.eye(3)
    jac = np.zeros((n * N_THETA, n * N_THETA))
    for k in range(n):
        jac[k * N_THETA:(k + 1) * N_THETA, k * N_THETA:(k + 1) * N_THETA] = blk[k]
    return jac


def theta_from_body(body: BodyInertia) -> np.ndarray:
    """theta of one physically consistent body (inverse of the parametrisation)."""
    if not check_consistency(body).ok:
        raise PhysicalRetrievalError(f"body is not physically consistent: {check_consistency(body).problems}")
    ic = 0.5 * (body.inertia_com + body.inertia_com.T)
    s_c = 0.5 * np.trace(ic) * np.eye(3) - ic  # second moment about the CoM
    s = s_c / body.mass
    # Upper-triangular A with A A^T = s: reverse the Cholesky factor of the reversed matrix.
    rev = np.eye(3)[::-1]
    eig_min = np.linalg.eigvalsh(s).min()
    if eig_min <= 0:  # flat body on the triangle-inequality boundary: nudge inside
        s = s + (1e-9 - eig_min) * np.eye(3)
    lo = np.linalg.cholesky(rev @ s @ rev)
    a = rev @ lo @ rev
    return np.array([0.5 * math.log(body.mass), math.log(a[0, 0]), math.log(a[1, 1]), math.log(a[2, 2]),
                     a[0, 1], a[0, 2], a[1, 2], *np.asarray(body.com, float)])


PRIOR_MARGIN = 1e-3  # smallest second moment about the CoM of a projected body, x its trace


def nearest_consistent_body(body: BodyInertia, margin: float = PRIOR_MARGIN) -> BodyInertia:
    """The physically consistent body nearest to ``body`` with the same mass and CoM.

    Consistency is a positive-definite second moment about the CoM, Sigma_c = tr(I_c)/2 1 - I_c
    (positive principal moments *and* their triangle inequalities). Its eigenvalues are clipped to at
    least ``margin`` tr(Sigma_c) (the nearest such Sigma_c in the Frobenius norm; principal axes kept).
    A body whose inertia has no positive trace gets a sphere of 5 cm radius of gyration. Raises
    :class:`PhysicalRetrievalError` for a mass that is not positive (nothing to project onto).
    """
    if not np.isfinite(body.mass) or body.mass <= 0:
        raise PhysicalRetrievalError(f"mass {body.mass} kg is not positive: no physically consistent body keeps it")
    ic = 0.5 * (body.inertia_com + body.inertia_com.T)
    sigma = 0.5 * np.trace(ic) * np.eye(3) - ic
    w, v = np.linalg.eigh(sigma)
    if np.all(np.isfinite(w)) and w.sum() > 0 and w.min() >= margin * w.sum():
        return body
    if w.sum() <= 0 or not np.all(np.isfinite(w)):
        sigma = 0.5 * body.mass * 0.05 ** 2 * np.eye(3)
    else:
        sigma = (v * np.maximum(w, margin * w.sum())) @ v.T
    return BodyInertia(body.mass, np.asarray(body.com, float).copy(), np.trace(sigma) * np.eye(3) - sigma)


@dataclass(frozen=True)
class ConsistentPrior:
    """The prior's links made physically consistent: ``bodies`` (the description's own where they
    were consistent), ``changed`` (0-based link indices that were projected) and, per changed link,
    the largest change of an inertia entry (kg m^2)."""

    bodies: tuple[BodyInertia, ...]
    changed: tuple[int, ...]
    change: tuple[float, ...]

    def describe(self, source: str = "the robot description") -> str:
        """One line for the operator (empty when nothing was projected)."""
        if not self.changed:
            return ""
        links = ", ".join(f"{k + 1} ({d:.2g} kg m^2)" for k, d in zip(self.changed, self.change))
        return (f"{source}: the link inertias of links {links} are not physically consistent; the prior used is "
                "the nearest consistent set (principal moments clipped, mass and CoM kept)")


def consistent_prior(desc: RobotDescription, margin: float = PRIOR_MARGIN) -> ConsistentPrior:
    """Project each inconsistent link of ``desc`` with :func:`nearest_consistent_body`."""
    bodies, changed, change = [], [], []
    for k, body in enumerate(desc.links):
        if check_consistency(body).ok:
            bodies.append(body)
            continue
        near = nearest_consistent_body(body, margin)
        bodies.append(near)
        changed.append(k)
        change.append(float(np.abs(near.inertia_com - body.inertia_com).max()))
    if changed:
        log.info("%s", ConsistentPrior(tuple(bodies), tuple(changed), tuple(change)).describe(desc.name))
    return ConsistentPrior(tuple(bodies), tuple(changed), tuple(change))


def bodies_from_theta(theta: np.ndarray) -> list[BodyInertia]:
    """Link bodies (mass, CoM, inertia about the CoM) of theta."""
    p = params_from_theta(theta).reshape(-1, N_THETA)
    return [BodyInertia.from_params(pk) for pk in p]


# --- problem statement -------------------------------------------------------------------------

@dataclass(frozen=True)
class PhysicalBounds:
    """LB/UB (eq. 16) and the total-mass range (eq. 17).

    mass: n x 2 (kg); com: n x 3 x 2 (m, link frame); gyration: n x 2, bounds of the diagonal of A
    (m, ~ radii of gyration); shear: bound of |A off-diagonal| (m); total_mass: (lo, hi) kg;
    friction: 3n x 2 (viscous N m s/rad, Coulomb N m, offset N m, n rows each), used for the terms
    that were identified.
    """

    mass: np.ndarray
    com: np.ndarray
    gyration: np.ndarray
    shear: float
    total_mass: tuple[float, float]
    friction: np.ndarray

    def theta_bounds(self) -> list[tuple[float, float]]:
        out = []
        for k in range(self.mass.shape[0]):
            out.append((0.5 * math.log(self.mass[k, 0]), 0.5 * math.log(self.mass[k, 1])))
            out += [(math.log(self.gyration[k, 0]), math.log(self.gyration[k, 1]))] * 3
            out += [(-self.shear, self.shear)] * 3
            out += [tuple(self.com[k, i]) for i in range(3)]
        return out


def default_bounds(desc: RobotDescription, mass_factor: tuple[float, float] = (0.3, 3.0),
                   com_margin: float = 0.1, total_mass_factor: tuple[float, float] = (0.7, 1.3),
                   gyration: tuple[float, float] = (1e-3, 0.5), shear: float = 0.5,
                   friction_max: tuple[float, float] = (20.0, 20.0), offset_max: float = 20.0) -> PhysicalBounds:
    """Bounds derived from the nominal description: masses ``mass_factor`` x nominal, CoM within
    ``com_margin`` (m) of the nominal CoM per axis, total mass ``total_mass_factor`` x nominal;
    the diagonal of A within ``gyration`` (m), widened per link to contain 0.5..2 x the nominal's;
    viscous and Coulomb friction in [0, ``friction_max``], offsets within +-``offset_max`` N m."""
    n = desc.n
    gyr = np.tile(np.asarray(gyration, float), (n, 1))
    for k, body in enumerate(desc.links):
        try:
            g_nom = np.exp(theta_from_body(body)[1:4])
        except PhysicalRetrievalError:
            continue
        gyr[k] = min(gyr[k, 0], 0.5 * g_nom.min()), max(gyr[k, 1], 2.0 * g_nom.max())
    m_nom = np.array([b.mass for b in desc.links])
    mass = np.stack([m_nom * mass_factor[0], m_nom * mass_factor[1]], axis=1)
    com = np.stack([[np.asarray(b.com) - com_margin, np.asarray(b.com) + com_margin] for b in desc.links])
    com = np.swapaxes(com, 1, 2)  # n x 3 x 2
    fr = np.zeros((3 * n, 2))
    fr[:n, 1], fr[n:2 * n, 1] = friction_max
    fr[2 * n:] = (-offset_max, offset_max)
    total = m_nom.sum()
    return PhysicalBounds(mass, com, gyr, shear,
                          (total * total_mass_factor[0], total * total_mass_factor[1]), fr)


@dataclass(frozen=True)
class CoefficientTarget:
    """What the physical parameters must reproduce: pi_hat (b) with covariance C (b x b),
    pi(p, f) = K p + F f for standard parameters p (K: b x 10n) and friction f (F: b x k n or None,
    columns n per term of ``friction_terms`` = (viscous, coulomb, offset) in that order).
    ``rss`` is the minimal residual sum of squares ||tau - Y pi_hat||^2 (N^2 m^2) over ``rows``
    regression rows, ``sigma2`` the residual variance, so that the torque error of the physical set
    on the same rows can be reported (:attr:`PhysicalResult.fit_rms`)."""

    pi_hat: np.ndarray
    covariance: np.ndarray
    K: np.ndarray
    F: np.ndarray | None = None
    rss: float = 0.0
    sigma2: float = 1.0
    names: tuple[str, ...] = ()
    friction_terms: tuple[bool, bool, bool] | None = None   # None: F's columns are generic, >= 0
    rows: int = 0

    @classmethod
    def from_model(cls, model) -> CoefficientTarget:
        """Target of an identified full model (:class:`~.identified_model.IdentifiedModel`): its kept
        coefficients, their covariance, and the maps K, F restricted to them. Use a model fitted
        without essential elimination: coefficients it dropped would be unconstrained here."""
        n_fric = len(model.all_names) - model.rank
        k_full = np.vstack([model.K, np.zeros((n_fric, model.K.shape[1]))])[model.kept]
        f_full = None
        if n_fric:
            f_full = np.vstack([np.zeros((model.rank, n_fric)), np.eye(n_fric)])[model.kept]
        return cls(model.values, model.covariance, k_full, f_full, model.rss, model.sigma2, model.names,
                   (bool(model.viscous), bool(model.coulomb), bool(model.offset)), int(model.n_rows))

    def __post_init__(self):
        b = self.pi_hat.shape[0]
        if self.covariance.shape != (b, b) or self.K.shape[0] != b:
            raise PhysicalRetrievalError(
                f"target shapes disagree: pi_hat {self.pi_hat.shape}, covariance {self.covariance.shape}, "
                f"K {self.K.shape}")
        if self.F is not None and self.F.shape[0] != b:
            raise PhysicalRetrievalError(f"friction map F has {self.F.shape[0]} rows for {b} coefficients")
        if not (np.all(np.isfinite(self.pi_hat)) and np.all(np.isfinite(self.covariance))):
            raise PhysicalRetrievalError("identified coefficients or covariance contain NaN/inf")


@dataclass
class PhysicalResult:
    """Retrieved physically consistent parameters and how well they reproduce the coefficients."""

    bodies: list[BodyInertia]
    friction: np.ndarray | None
    theta: np.ndarray
    chi2: float                 # (pi_hat - pi(mu))^T C^-1 (pi_hat - pi(mu))
    objective_nm: float         # paper's f(mu) = ||tau - Y_e pi_e(mu)|| (N m)
    coefficients: np.ndarray    # pi(mu)
    starts: int
    seconds: float
    evaluations: int
    problems: tuple[str, ...]   # constraint violations (empty: every constraint holds)
    warnings: tuple[str, ...] = ()                             # variables parked on a bound, by name
    friction_terms: tuple[bool, bool, bool] = (False, False, False)
    fit_rms: float = float("nan")   # torque RMS of the physical set on the regression rows (N m)
    ls_rms: float = float("nan")    # the same of the identified coefficients (the least-squares optimum)

    @property
    def x(self) -> np.ndarray:
        """The solution as the solver's variables (theta, then friction): a start for a related problem."""
        return np.concatenate([self.theta, np.zeros(0) if self.friction is None else self.friction])

    def description(self, desc: RobotDescription) -> RobotDescription:
        return desc.with_links(self.bodies)

    def joint_friction(self, n: int):
        """The retrieved friction as :class:`~.torque_models.JointFriction` (zeros for terms not identified)."""
        from .torque_models import JointFriction

        out, k = [], 0
        f = np.zeros(0) if self.friction is None else self.friction
        for on in self.friction_terms:
            out.append(f[k * n:(k + 1) * n].copy() if on else np.zeros(n))
            k += int(on)
        return JointFriction(*out)


class PhysicalRetrieval:
    """The weighted objective (module docstring) with analytic gradient, and its multi-start solve."""

    def __init__(self, desc: RobotDescription, target: CoefficientTarget, bounds: PhysicalBounds | None = None,
                 prior_weight: float = PRIOR_WEIGHT):
        self.desc = desc
        self.target = target
        # The prior must be a consistent body per link: an inconsistent published set is projected first.
        self.prior = consistent_prior(desc)
        prior_desc = desc.with_links(self.prior.bodies)
        self.bounds = bounds if bounds is not None else default_bounds(prior_desc)
        n = desc.n
        if target.K.shape[1] != N_THETA * n:
            raise PhysicalRetrievalError(f"K has {target.K.shape[1]} columns, expected {N_THETA * n} for {n} links")
        # Whitening: C^-1 = R^T R, residual r = R (pi_hat - pi(mu)).
        cov = 0.5 * (target.covariance + target.covariance.T)
        w, v = np.linalg.eigh(cov)
        if w.min() <= 0:
            raise PhysicalRetrievalError("covariance of the identified coefficients is not positive definite")
        self.R = (v / np.sqrt(w)).T
        self.n_fric = 0 if target.F is None else target.F.shape[1]
        # A weak prior towards the nominal standard parameters fixes what the data cannot see
        # (parameters outside the range of K) without visibly moving the fit.
        p_nom = np.concatenate([b.to_params() for b in prior_desc.links])
        scale = np.concatenate([[b.mass] + [b.mass * .1] * 3 + [b.mass * .01] * 6 for b in prior_desc.links])
        self.p_nom, self.p_scale = p_nom, scale
        self.prior_weight = prior_weight
        self.theta_nom = np.concatenate([theta_from_body(b) for b in prior_desc.links])
        self.evaluations = 0

    def _split(self, x):
        return x[:N_THETA * self.desc.n], x[N_THETA * self.desc.n:]

    def coefficients(self, x: np.ndarray) -> np.ndarray:
        th, f = self._split(x)
        pi = self.target.K @ params_from_theta(th)
        if self.n_fric:
            pi = pi + self.target.F @ f
        return pi

    def residuals(self, x: np.ndarray) -> np.ndarray:
        """Whitened coefficient residuals R (pi_hat - pi(x)), the prior, and the total-mass penalty."""
        self.evaluations += 1
        th, f = self._split(x)
        p = params_from_theta(th)
        pi = self.target.K @ p
        if self.n_fric:
            pi = pi + self.target.F @ f
        mass = np.exp(2 * th.reshape(-1, N_THETA)[:, 0]).sum()
        lo, hi = self.bounds.total_mass
        excess = max(mass - hi, 0.0) + max(lo - mass, 0.0)
        return np.concatenate([self.R @ (self.target.pi_hat - pi),
                               math.sqrt(self.prior_weight) * (p - self.p_nom) / self.p_scale,
                               [_MASS_PENALTY * excess]])

    def jacobian(self, x: np.ndarray) -> np.ndarray:
        """d residuals / d x (analytic)."""
        th, _ = self._split(x)
        jp = params_jacobian(th)
        top = -self.R @ self.target.K @ jp
        if self.n_fric:
            top = np.hstack([top, -self.R @ self.target.F])
        prior = math.sqrt(self.prior_weight) * jp / self.p_scale[:, None]
        if self.n_fric:
            prior = np.hstack([prior, np.zeros((prior.shape[0], self.n_fric))])
        m = np.exp(2 * th.reshape(-1, N_THETA)[:, 0])
        lo, hi = self.bounds.total_mass
        sign = 1.0 if m.sum() > hi else (-1.0 if m.sum() < lo else 0.0)
        pen = np.zeros((1, x.size))
        pen[0, 0:N_THETA * self.desc.n:N_THETA] = _MASS_PENALTY * sign * 2 * m
        return np.vstack([top, prior, pen])

    def chi2(self, x: np.ndarray) -> float:
        r = self.R @ (self.target.pi_hat - self.coefficients(x))
        return float(r @ r)

    def _friction_bounds(self) -> list[tuple[float, float]]:
        """Bounds of the friction variables: the rows of ``bounds.friction`` of the identified terms."""
        n = self.desc.n
        fr = np.asarray(self.bounds.friction, float)
        if self.target.friction_terms is None:  # generic friction variables, each >= 0
            if fr.shape[0] == self.n_fric:
                return [tuple(r) for r in fr]
            return [(0.0, float(fr[:, 1].max()))] * self.n_fric
        if fr.shape[0] == 2 * n:  # (viscous, coulomb) only: offsets unbounded but finite
            fr = np.vstack([fr, np.tile([-20.0, 20.0], (n, 1))])
        rows = [fr[k * n:(k + 1) * n] for k, on in enumerate(self.target.friction_terms) if on]
        out = [tuple(r) for r in np.vstack(rows)] if rows else []
        if len(out) != self.n_fric:
            raise PhysicalRetrievalError(f"{self.n_fric} friction variables but friction terms "
                                         f"{self.target.friction_terms} give {len(out)} bounds")
        return out

    def variable_labels(self) -> list[str]:
        """Names of the variables of x: per link mass, gyration, shear and CoM, then friction."""
        labels = []
        for k in range(self.desc.n):
            link = f"link {k + 1}"
            labels += [f"{link} mass"] + [f"{link} radius of gyration {a}" for a in "xyz"]
            labels += [f"{link} inertia shear {a}" for a in ("xy", "xz", "yz")] + [f"{link} CoM {a}" for a in "xyz"]
        terms = self.target.friction_terms
        if self.n_fric and terms is None:
            labels += [f"friction variable {i + 1}" for i in range(self.n_fric)]
        elif self.n_fric:
            labels += [f"{t} friction, joint {j + 1}" if t != "offset" else f"torque offset, joint {j + 1}"
                       for t, on in zip(("viscous", "Coulomb", "offset"), terms) if on for j in range(self.desc.n)]
        return labels

    def problems(self, x: np.ndarray, tol: float = 1e-6) -> tuple[str, ...]:
        """Every violated constraint of eqs. 16-18 (empty when all hold)."""
        th, f = self._split(x)
        out = []
        bodies = bodies_from_theta(th)
        b = self.bounds
        for k, body in enumerate(bodies):
            rep = check_consistency(body)
            out += [f"link {k + 1}: {p}" for p in rep.problems]
            if not b.mass[k, 0] * (1 - tol) <= body.mass <= b.mass[k, 1] * (1 + tol):
                out.append(f"link {k + 1}: mass {body.mass:.4g} kg outside [{b.mass[k, 0]:.4g}, {b.mass[k, 1]:.4g}]")
            if np.any(body.com < b.com[k, :, 0] - tol) or np.any(body.com > b.com[k, :, 1] + tol):
                out.append(f"link {k + 1}: CoM {body.com} outside its box")
        total = sum(bd.mass for bd in bodies)
        if not b.total_mass[0] * (1 - tol) <= total <= b.total_mass[1] * (1 + tol):
            out.append(f"total mass {total:.4g} kg outside [{b.total_mass[0]:.4g}, {b.total_mass[1]:.4g}]")
        if self.n_fric:
            lo = np.array([r[0] for r in self._friction_bounds()])
            hi = np.array([r[1] for r in self._friction_bounds()])
            bad = (f < lo - tol) | (f > hi + tol)
            if bad.any():
                labels = self.variable_labels()[N_THETA * self.desc.n:]
                out += [f"{labels[i]} = {f[i]:.4g} outside [{lo[i]:.4g}, {hi[i]:.4g}]" for i in np.flatnonzero(bad)]
        return tuple(out)

    def at_bounds(self, x: np.ndarray, lo: np.ndarray, hi: np.ndarray, rel: float = 1e-3) -> tuple[str, ...]:
        """Variables within ``rel`` of their range from a bound, by name and in physical units (a
        parameter parked on a bound is set by the bound, not by the data). Friction at zero is not
        reported: the data then see none."""
        labels = self.variable_labels()
        n_link = N_THETA * self.desc.n
        span = hi - lo
        out = []
        for i in np.flatnonzero((x - lo <= rel * span) | (hi - x <= rel * span)):
            side = "lower" if x[i] - lo[i] <= rel * span[i] else "upper"
            bound = lo[i] if side == "lower" else hi[i]
            if i >= n_link and bound == 0.0:
                continue
            value, unit = x[i], "N m" if i >= n_link else "m"
            if i < n_link and i % N_THETA == 0:
                value, bound, unit = math.exp(2 * value), math.exp(2 * bound), "kg"
            elif i < n_link and i % N_THETA <= 3:
                value, bound = math.exp(value), math.exp(bound)
            out.append(f"{labels[i]} = {value:.4g} {unit} is on its {side} bound ({bound:.4g} {unit})")
        return tuple(out)

    def solve(self, starts: int = 5, seed: int = 0, max_nfev: int = 150, progress: bool = True,
              x0: np.ndarray | None = None, warn: bool = True) -> PhysicalResult:
        """Multi-start bounded trust-region least squares (start 0 at the nominal parameters with the
        friction that best fits them, or at ``x0`` -- e.g. :attr:`PhysicalResult.x` of a related
        problem; the rest uniform in LB..UB as in paper 003's Table 1); the best start wins. Progress
        is logged (INFO with ``progress``, else DEBUG); variables on a bound at WARNING with ``warn``
        (else DEBUG: e.g. the fits of a cross-validation), and in :attr:`PhysicalResult.warnings` always."""
        if starts < 1:
            raise PhysicalRetrievalError(f"starts must be >= 1, got {starts}")
        bounds = self.bounds.theta_bounds() + self._friction_bounds()
        lo, hi = np.array([b[0] for b in bounds]), np.array([b[1] for b in bounds])
        if np.any(lo >= hi):
            raise PhysicalRetrievalError(f"empty bounds for variables {np.flatnonzero(lo >= hi).tolist()}")
        rng = np.random.default_rng(seed)
        f0 = np.zeros(0)
        if self.n_fric:  # friction that best explains the coefficients with the nominal links
            rhs = self.R @ (self.target.pi_hat - self.target.K @ self.p_nom)
            f0 = np.linalg.lstsq(self.R @ self.target.F, rhs, rcond=None)[0]
        first = np.concatenate([self.theta_nom, f0]) if x0 is None else np.asarray(x0, float)
        if first.shape != lo.shape:
            raise PhysicalRetrievalError(f"start x0 has {first.size} variables, the problem {lo.size}")
        x_nom = np.clip(first, lo + 1e-6 * (hi - lo), hi - 1e-6 * (hi - lo))
        level = logging.INFO if progress else logging.DEBUG
        start_time = time.monotonic()
        best = None
        for k in range(starts):
            x0 = x_nom if k == 0 else lo + (hi - lo) * rng.uniform(0.02, 0.98, size=lo.size)
            res = scipy.optimize.least_squares(self.residuals, x0, jac=self.jacobian, bounds=(lo, hi),
                                               method="trf", x_scale="jac", max_nfev=max_nfev,
                                               ftol=1e-10, xtol=1e-10, gtol=1e-10)
            cost = float(res.cost)
            if best is None or cost < best[0]:
                best = (cost, res.x)
            log.log(level, "physical parameters: start %d/%d: chi2 = %.4g (best %.4g), %d evaluations, %.1f s",
                    k + 1, starts, self.chi2(res.x), self.chi2(best[1]), res.nfev, time.monotonic() - start_time)
        x = best[1]
        chi2 = self.chi2(x)
        th, f = self._split(x)
        rss = max(self.target.rss, 0.0)
        obj = math.sqrt(rss + self.target.sigma2 * chi2)
        rows = self.target.rows
        fit_rms = obj / math.sqrt(rows) if rows else float("nan")
        ls_rms = math.sqrt(rss / rows) if rows else float("nan")
        warnings = self.at_bounds(x, lo, hi)
        for w in warnings:
            log.log(logging.WARNING if warn else logging.DEBUG, "physical parameters: %s", w)
        return PhysicalResult(bodies_from_theta(th), f.copy() if self.n_fric else None, th.copy(), chi2, obj,
                              self.coefficients(x), starts, time.monotonic() - start_time, self.evaluations,
                              self.problems(x), warnings, tuple(self.target.friction_terms or (False, False, False)),
                              fit_rms, ls_rms)


def retrieve_physical_parameters(desc: RobotDescription, target: CoefficientTarget,
                                 bounds: PhysicalBounds | None = None, starts: int = 5, seed: int = 0,
                                 progress: bool = True) -> PhysicalResult:
    """Physically consistent link parameters reproducing ``target`` (eqs. 15-18); see the module doc."""
    return PhysicalRetrieval(desc, target, bounds).solve(starts=starts, seed=seed, progress=progress)


def min_mass_matrix_eigenvalue(desc: RobotDescription, n_configs: int = 10000, seed: int = 0) -> float:
    """Smallest eigenvalue of M(q) over ``n_configs`` uniform random configurations within the limits."""
    dyn = RigidBodyDynamics(desc)
    rng = np.random.default_rng(seed)
    lo, hi = desc.limits.position[:, 0], desc.limits.position[:, 1]
    worst = math.inf
    for q in rng.uniform(lo, hi, size=(n_configs, desc.n)):
        worst = min(worst, float(np.linalg.eigvalsh(dyn.mass_matrix(q))[0]))
    return worst


