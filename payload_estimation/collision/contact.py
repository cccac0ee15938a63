"""Contact link, force and point from the external joint torque of a single point contact.

A force F (N, base frame) at a point p of link k makes the external joint torque

    τ_ext = J_p(q)ᵀ F,   (J_pᵀ F)_j = F · (z_j × (p - o_j)) for j <= k, 0 for j > k

(z_j, o_j: axis and a point of joint j, base frame). Following the contact particle filter
(Manuelli & Tedrake, IROS 2016) and the isolation/identification steps of Haddadin et al.'s
collision survey (IEEE T-RO 2017), :class:`ContactLocator` tries every candidate point on every
link's surface (:mod:`.geometry`): for each it fits F by weighted least squares, F inside a
friction cone around the inward normal (a contact pushes), and scores the fit by
χ² = Σ_j ((J_pᵀ F - τ_ext)_j / σ_j)². The links are compared by their evidence
Σ_points area · exp(-χ²/2) (a uniform prior over the robot's surface), so a link wins when the
torque pattern can be explained on it and not, or on less surface, elsewhere; the evidence shares
are the link probabilities. They are calibrated when σ is the real error of τ_ext: σ_j = a floor
plus a relative part (``ContactConfig``; on the MuJoCo bench the error is about 0.04 N m + 0.8 %)
plus what the tracker measures on the stream (the noise of ū and the pre-contact drift of the model
error) and what the payload estimate's σ allows its torque to change between the baseline and the contact's window
(:meth:`ContactTracker.payload_sigma`), scaled up when the best fit needs it.

What is observable depends on the link (n = 7 joints): for links 6 and 7 the 6-D wrench is
determined, hence F, its line of action and the point where it meets the link; for link 5 the
point and F are determined up to a few discrete solutions; for links 3 and 4 a family of points
explains the torque and F along it may vary. The estimate says so (``force_ambiguous``,
``point`` None, a ``force_range`` that contains the truth: 95 % of the posterior over every link's
surface, each point's own force error included, open above where the joints cannot bound the
force) instead of guessing, and ``link_ambiguous`` when the reported link's probability is below
``link_confidence`` (e.g. a push whose line of action passes through the next joint's axis is
explained on both links). One record per contact carries the one answer: the best link and force,
both flags, the probability and the range (:meth:`ContactEstimate.summary` for a line of text).

:class:`ContactTracker` feeds it during a collision: it averages the observer's unfiltered
external torque ū (:attr:`MomentumObserver.disturbance`) from the contact's start (a change point
before the detection) over a few ms, minus the pre-contact baseline (model error), so the force
is not scaled down by the residual's 1/K_I lag.

Units: N, N m, m, s; base frame unless named ``_link`` (the model's link frame k).
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field

import numpy as np
import pinocchio as pin
from scipy.optimize import nnls

from ..errors import PayloadEstimationError
from ..model.dynamics import RigidBodyDynamics
from ..signals.misfit import Misfit, check_misfit, misfit_sentence, significant_chi2
from .geometry import LinkGeometry, SurfaceSamples, capsule_geometry, distance_to_segment, sample_surface


class ContactInputError(PayloadEstimationError):
    """A contact-estimation argument is malformed; the message names it."""


@dataclass(frozen=True)
class ContactConfig:
    """Settings of :class:`ContactLocator` and :class:`ContactTracker`.

    sigma_floor (N m) and sigma_relative: per-joint error of the external-torque estimate,
    σ_j = sigma_floor + sigma_relative |τ_j| + the tracker's measured part (noise of ū averaged over
    the window, drift of the pre-contact model error, the payload's σ; see :meth:`ContactTracker.external_torque`).
    Where the best fit is worse than that σ explains (χ² above its degrees of freedom n - 5), σ is
    scaled up by the fit (a reduced-χ² rescaling) so the link probabilities stay calibrated.
    friction (μ): the force lies within atan(μ) of the inward surface normal. spacing (m): surface
    sampling. link_confidence: the reported link is ambiguous when its probability is below this
    (another link explains the torque nearly as well). force_tolerance: the force is ambiguous when
    its range (``force_range``: 95 % over the contact posterior, all links, each point's own force
    uncertainty included) reaches beyond ±force_tolerance x the best fit's |F|; point_tolerance (m):
    the spatial spread of the fitting points above which the point is not reported.
    max_chi2_per_joint: a best fit worse than this x n is no single point contact (link and force
    ambiguous). misfit_chi2: the best fit's χ²/ν (ν = n - 5) above which the torque has a part a single
    point contact does not explain (:mod:`..signals.misfit`; None: the χ² that a fitting contact exceeds once in
    1000, 6.9 for 7 joints; inf: never): σ is then widened by what that part can explain on top of the reduced-χ²
    scaling (the link probabilities and the force range with it), the force is flagged ambiguous and
    :attr:`ContactEstimate.misfit` says it in words. Tracker: ``delay`` (s) after the detection at which the estimate is
    made, ``average`` (s) of ū averaged (the most recent, after the change point), ``baseline``
    (s, s): the window before the onset that gives the pre-contact ū, ``lookback`` (s) before
    the onset searched for the change point, ``guard`` (s) before the contact's start left out of the
    measured pre-contact drift, ``history`` (s) kept.
    """

    sigma_floor: float = 0.05
    sigma_relative: float = 0.01
    friction: float = 1.0
    spacing: float = 0.02
    link_confidence: float = 0.95
    force_tolerance: float = 0.15
    point_tolerance: float = 0.05
    max_chi2_per_joint: float = 9.0
    misfit_chi2: float | None = None
    refine: int = 64
    refine_steps: int = 2
    delay: float = 0.01
    average: float = 0.01
    baseline: tuple[float, float] = (0.08, 0.04)
    lookback: float = 0.04
    guard: float = 0.005
    history: float = 0.25

    def __post_init__(self):
        for name in ("sigma_floor", "spacing", "force_tolerance", "point_tolerance",
                     "max_chi2_per_joint", "average", "lookback", "history"):
            v = getattr(self, name)
            if not (math.isfinite(v) and v > 0):
                raise ContactInputError(f"ContactConfig.{name} must be > 0, got {v}")
        for name in ("sigma_relative", "friction", "delay", "guard"):
            v = getattr(self, name)
            if not (math.isfinite(v) and v >= 0):
                raise ContactInputError(f"ContactConfig.{name} must be >= 0, got {v}")
        if not 0.0 < self.link_confidence < 1.0:
            raise ContactInputError(f"ContactConfig.link_confidence must be in (0, 1), got {self.link_confidence}")
        b0, b1 = self.baseline
        if not b0 > b1 >= self.lookback - 1e-12:
            raise ContactInputError(f"ContactConfig.baseline must be (start, end) s before the onset with start > end "
                                    f">= lookback ({self.lookback} s), got {self.baseline}")
        if self.history < b0 + self.delay + self.average:
            raise ContactInputError(f"ContactConfig.history ({self.history} s) must cover the baseline, the delay and "
                                    "the average")


@dataclass(frozen=True)
class ContactEstimate:
    """A single point contact explaining an external joint torque.

    One answer per contact: time (s) of the torque estimate; link (1..n, 0: none) and link_name, the
    most probable link; link_ambiguous: its probability (:attr:`link_probability`) is below
    ``ContactConfig.link_confidence`` (another link explains the torque nearly as well) or no point
    contact fits (``link_probabilities``: posterior per link 1..n from the fit's likelihood over
    each link's surface); force (N, base frame) at the best point, None if no link fits; force_norm
    (N); force_range (N, N): 95 % range of |F| over all links' fitting points, each with its own
    uncertainty (upper end inf where too few joints see the force to bound it); force_ambiguous:
    that range reaches beyond the tolerance around force_norm, or the fit is poor; ``sigma_scale``:
    factor applied to the assumed torque error because the best fit needed it (1: none), and
    ``torque_sigma`` (N m per joint) the error σ the fit used; ``misfit``: "" when a single point contact
    explains the torque to its σ, else what it does not explain and how far σ was widened, in words (the
    force is then flagged ambiguous; :meth:`summary` says it);
    point (m, base frame) or None when not observable (``point_spread`` m:
    how far the fitting points lie from the best one); force_link / point_link: the same in the
    model's link frame ``link``; external_torque (N m): the τ_ext that was fitted; fit_residual
    (N m): RMS over joints of J_pᵀ F - τ_ext; chi2: its weighted sum of squares.
    """

    time: float
    link: int
    link_name: str
    link_ambiguous: bool
    link_probabilities: tuple[float, ...]
    force: np.ndarray | None
    force_norm: float
    force_range: tuple[float, float]
    force_ambiguous: bool
    point: np.ndarray | None
    point_spread: float
    force_link: np.ndarray | None
    point_link: np.ndarray | None
    external_torque: np.ndarray
    fit_residual: float
    chi2: float
    best_point: np.ndarray | None = field(default=None, repr=False)  # base frame, reported even if ambiguous
    best_point_link: np.ndarray | None = field(default=None, repr=False)  # the same in the link frame
    sigma_scale: float = 1.0
    torque_sigma: np.ndarray | None = field(default=None, repr=False)  # N m per joint: σ of the fit (scaled)
    link_names: tuple[str, ...] = field(default=(), repr=False)  # of links 1..n, for the summary
    misfit: str = ""

    @property
    def link_probability(self) -> float:
        """Probability (0..1) of the reported link (0 when no link fits)."""
        return float(self.link_probabilities[self.link - 1]) if self.link > 0 else 0.0

    def summary(self) -> str:
        """One line for the log, the status and tables: link, its probability, force or force range."""
        if self.link == 0:
            return "contact: no single point contact explains the external torque (link and force unknown)"
        lo, hi = self.force_range
        rng = f"{lo:.0f}..{hi:.0f} N" if math.isfinite(hi) else f"at least {lo:.0f} N (upper bound not observable)"
        link = f"{self.link_name} (p {self.link_probability:.2f}"
        if self.link_ambiguous:
            others = [f"{self.link_name_of(k)} {p:.2f}" for k, p in enumerate(self.link_probabilities, 1)
                      if k != self.link and p >= 0.05]
            link += ", ambiguous" + (": also " + ", ".join(others) if others else "")
        link += ")"
        misfit = f"; {self.misfit}" if self.misfit else ""
        if self.force_ambiguous or self.force is None:
            return f"contact on {link}: force ambiguous, {rng}{misfit}"
        return f"contact on {link}: force {self.force_norm:.1f} N ({rng}){misfit}"

    def link_name_of(self, k: int) -> str:
        """Name of link ``k`` (1-based) as this estimate knows it (its own name, else ``link_k``)."""
        return self.link_names[k - 1] if len(self.link_names) >= k else f"link_{k}"

    def to_dict(self) -> dict:
        """JSON-ready mapping (``link`` 1-based; ``force``/``point`` lists or None; an unbounded range end None)."""
        vec = lambda v: None if v is None else [float(x) for x in v]  # noqa: E731
        return {
            "time": self.time, "link": self.link, "link_name": self.link_name,
            "link_ambiguous": self.link_ambiguous, "link_probability": self.link_probability,
            "link_probabilities": [float(x) for x in self.link_probabilities],
            "force": vec(self.force), "force_norm": self.force_norm if self.force is not None else None,
            "force_range": [float(x) if math.isfinite(x) else None for x in self.force_range],
            "force_ambiguous": self.force_ambiguous, "sigma_scale": self.sigma_scale,
            "torque_sigma": vec(self.torque_sigma), "summary": self.summary(), "misfit": self.misfit,
            "point": vec(self.point), "point_spread": self.point_spread,
            "force_link": vec(self.force_link), "point_link": vec(self.point_link),
            "external_torque": vec(self.external_torque), "fit_residual": self.fit_residual, "chi2": self.chi2,
        }


def _tangents(normals: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Two unit tangent vectors (N, 3) orthogonal to unit ``normals`` (N, 3) and to each other."""
    helper = np.where(np.abs(normals[:, :1]) < 0.9, [[1.0, 0.0, 0.0]], [[0.0, 1.0, 0.0]])
    t1 = np.cross(normals, helper)
    t1 /= np.linalg.norm(t1, axis=1, keepdims=True)
    return t1, np.cross(normals, t1)


def _cone_edges(normals: np.ndarray, mu: float, k: int = 8) -> np.ndarray:
    """(N, k, 3) unit edges of polyhedral friction cones around the inward normals -``normals``."""
    t1, t2 = _tangents(normals)
    phi = 2 * np.pi * np.arange(k) / k
    d = -normals[:, None, :] + mu * (np.cos(phi)[None, :, None] * t1[:, None, :]
                                     + np.sin(phi)[None, :, None] * t2[:, None, :])
    return d / np.linalg.norm(d, axis=2, keepdims=True)


_RIDGE = 1e-8  # keeps the 3x3 normal equations solvable where fewer than 3 joints see the force


def _nearest_on_segment(pts: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Nearest points on segments a-b (each (3,) or one per point, (N, 3)) to ``pts`` (N, 3)."""
    d = b - a
    dd = np.sum(d * d, axis=-1)
    s = np.clip(np.sum((pts - a) * d, axis=-1) / np.maximum(dd, 1e-300), 0.0, 1.0)
    return a + s[:, None] * d


def _project(pts: np.ndarray, a: np.ndarray, b: np.ndarray, radius) -> np.ndarray:
    """Points moved radially onto the capsule surfaces (segments a-b, ``radius`` scalar or (N,))."""
    c = _nearest_on_segment(pts, a, b)
    v = pts - c
    return c + np.reshape(radius, (-1, 1)) * v / np.maximum(np.linalg.norm(v, axis=1, keepdims=True), 1e-12)


def _cone_bound(f: np.ndarray, v: np.ndarray, normals: np.ndarray, cos_cone: float) -> np.ndarray:
    """Largest |F| (N) on the lines F = f0 + t v inside the friction cones (inward normals -``normals``,
    half-angle acos(``cos_cone``)); f0: ``f`` without its part along the unit, unseen direction ``v``
    (all (N, 3)). inf where the line stays in the cone (v within the cone), |f| where it misses it."""
    f0 = f - np.sum(f * v, axis=1, keepdims=True) * v
    a = -np.sum(f0 * normals, axis=1)
    b = -np.sum(v * normals, axis=1)
    c2 = cos_cone ** 2
    qa, qb, qc = b * b - c2, 2.0 * a * b, a * a - c2 * np.sum(f0 * f0, axis=1)  # (a + t b)^2 >= c2 |F|^2
    out = np.full(len(f), np.inf)
    bounded = qa < -1e-9
    disc = qb * qb - 4.0 * qa * qc
    ok = bounded & (disc >= 0)
    root = np.sqrt(np.where(ok, disc, 0.0))
    t1 = np.where(ok, (-qb + root) / np.where(bounded, 2.0 * qa, 1.0), 0.0)
    t2 = np.where(ok, (-qb - root) / np.where(bounded, 2.0 * qa, 1.0), 0.0)
    push = a + 0.5 * (t1 + t2) * b >= 0  # the interval lies in the pushing nappe, not the pulling one
    tmax = np.maximum(np.abs(t1), np.abs(t2))
    f0n2 = np.sum(f0 * f0, axis=1)
    out[ok & push] = np.sqrt(f0n2 + tmax * tmax)[ok & push]
    miss = bounded & ~(ok & push)
    out[miss] = np.linalg.norm(f[miss], axis=1)
    return out


def _weigh(rows: np.ndarray, mask: np.ndarray, w: np.ndarray) -> np.ndarray:
    """(N, n, 3) ``rows`` of joints that see the point (``mask``) whitened by ``w``: per-joint weights (n,) or a
    whitening matrix (n, n) for errors correlated across the joints."""
    rows = rows * mask[:, :, None]
    return rows * w[None, :, None] if w.ndim == 1 else np.einsum("ij,pjk->pik", w, rows)


def _weighted_quantiles(x: np.ndarray, w: np.ndarray, qs) -> tuple[float, ...]:
    order = np.argsort(x)
    c = np.cumsum(w[order])
    return tuple(float(x[order[min(int(np.searchsorted(c, q * c[-1])), len(x) - 1)]]) for q in qs)


def _surface_normals(pts: np.ndarray, a: np.ndarray, b: np.ndarray, radius=None) -> np.ndarray:
    """Outward unit normals of capsules (segments a-b) at surface points."""
    v = pts - _nearest_on_segment(pts, a, b)
    return v / np.maximum(np.linalg.norm(v, axis=1, keepdims=True), 1e-12)


class ContactLocator:
    """Fits a single point contact on the link surfaces to an external joint torque (module docstring).

    ``dyn``: the robot model (kinematics only); ``geometry``: link capsules (default
    :func:`capsule_geometry` of ``dyn.desc``); ``link_names`` for the estimates (default ``link_k``, the
    dynamics' frame names): what a user reads gets the model's names, ``desc.link_frame_name(k)`` (a URDF's
    link names, ``<robot>_dh_frame_<k>`` for a DH robot file; ``sim.links.link_names``), which sim_node's
    ``~/apply_wrench`` takes back. Not thread-safe (one pinocchio workspace).
    """

    def __init__(self, dyn: RigidBodyDynamics, geometry: LinkGeometry | None = None,
                 config: ContactConfig | None = None, link_names: tuple[str, ...] | None = None):
        self.dyn = dyn
        self.n = n = dyn.n
        self.config = cfg = config or ContactConfig()
        self.geometry = geometry or capsule_geometry(dyn.desc)
        if self.geometry.n != n:
            raise ContactInputError(f"geometry has {self.geometry.n} links, the robot {n}")
        self.link_names = tuple(link_names) if link_names else tuple(f"link_{k + 1}" for k in range(n))
        if len(self.link_names) != n:
            raise ContactInputError(f"link_names must have {n} names, got {len(self.link_names)}")
        self._model = dyn.model
        self._data = dyn.model.createData()
        self._axes = [np.asarray(j.axis, float) for j in dyn.desc.joints]
        self._post = [j.post for j in dyn.desc.joints]
        surfaces: list[SurfaceSamples] = [sample_surface(c, cfg.spacing) for c in self.geometry.capsules]
        self._sample_points = np.vstack([s.points for s in surfaces])  # link frames
        self._sample_area = np.concatenate([s.area for s in surfaces])
        self._sample_link = np.concatenate([np.full(len(s.area), k) for k, s in enumerate(surfaces)])
        self._cap_a = np.array([c.a for c in self.geometry.capsules])
        self._cap_b = np.array([c.b for c in self.geometry.capsules])
        self._radius = np.array([c.radius for c in self.geometry.capsules])
        self._cos_cone = 1.0 / math.sqrt(1.0 + cfg.friction ** 2)

    def link_poses(self, q: np.ndarray) -> list[np.ndarray]:
        """4x4 base-frame poses of link frames 1..n at ``q`` (rad)."""
        self._kinematics(np.asarray(q, float))
        return [p.copy() for p in self._poses]

    def _kinematics(self, q: np.ndarray) -> None:
        pin.forwardKinematics(self._model, self._data, q)
        self._o, self._z, self._poses = [], [], []
        for k in range(self.n):
            m = self._data.oMi[k + 1]
            self._o.append(m.translation.copy())
            self._z.append(m.rotation @ self._axes[k])
            self._poses.append(m.homogeneous @ self._post[k])

    def sigma(self, tau: np.ndarray, measured: np.ndarray | None = None) -> np.ndarray:
        """Per-joint error σ_j (N m) assumed for the external torque ``tau``; ``measured`` (N m, per
        joint): the tracker's measured part, added."""
        s = self.config.sigma_floor + self.config.sigma_relative * np.abs(tau)
        return s if measured is None else s + np.asarray(measured, float)

    def locate(self, q, tau_ext, t: float = float("nan"), measured_sigma=None, torque_covariance=None
               ) -> ContactEstimate:
        """The contact that best explains ``tau_ext`` (N m) at ``q`` (rad); ``t`` (s) is recorded;
        ``measured_sigma`` (N m, per joint, optional): measured error of ``tau_ext`` added to σ;
        ``torque_covariance`` (n x n N² m², optional): an error correlated across the joints (the payload's), added
        to the covariance diag(σ²) the fit whitens its rows with."""
        n, cfg = self.n, self.config
        q = np.asarray(q, float)
        tau = np.asarray(tau_ext, float)
        if q.shape != (n,) or tau.shape != (n,):
            raise ContactInputError(f"q and tau_ext must have {n} values, got shapes {q.shape} and {tau.shape}")
        if not (np.all(np.isfinite(q)) and np.all(np.isfinite(tau))):
            raise ContactInputError(f"q and tau_ext must be finite, got q {q.tolist()}, tau_ext {tau.tolist()}")
        if measured_sigma is not None:
            measured_sigma = np.asarray(measured_sigma, float)
            if measured_sigma.shape != (n,) or not np.all(np.isfinite(measured_sigma) & (measured_sigma >= 0)):
                raise ContactInputError(f"measured_sigma must be {n} finite values >= 0 N m, got {measured_sigma}")
        sig = self.sigma(tau, measured_sigma)
        if torque_covariance is None:
            w = 1.0 / sig
            b, sig_total = w * tau, sig
        else:
            cov = np.asarray(torque_covariance, float)
            if cov.shape != (n, n) or not np.all(np.isfinite(cov)):
                raise ContactInputError(f"torque_covariance must be {n} x {n} and finite, got shape {cov.shape}")
            cov = np.diag(sig ** 2) + 0.5 * (cov + cov.T)
            w = np.linalg.inv(np.linalg.cholesky(cov))  # whitening: w cov wᵀ = 1
            b, sig_total = w @ tau, np.sqrt(np.diag(cov))
        self._kinematics(q)
        o, z = np.array(self._o), np.array(self._z)
        # every link's surface samples at once: points (base frame), their link index and area
        rots = np.array([pose[:3, :3] for pose in self._poses])
        poss = np.array([pose[:3, 3] for pose in self._poses])
        seg_a = np.einsum("kij,kj->ki", rots, self._cap_a) + poss
        seg_b = np.einsum("kij,kj->ki", rots, self._cap_b) + poss
        link = self._sample_link
        pts = np.einsum("pij,pj->pi", rots[link], self._sample_points) + poss[link]
        keep = self._exposed(pts, link, seg_a, seg_b)
        pts, link, area = pts[keep], link[keep], self._sample_area[keep]
        mask = (np.arange(n)[None, :] <= link[:, None]).astype(float)  # joint j sees link k's force iff j <= k
        geo = (seg_a[link], seg_b[link], self._radius[link])
        nrm = _surface_normals(pts, *geo)
        f, chi2 = self._fit(pts, mask, o, z, w, b)
        for _ in range(cfg.refine_steps):  # the best point near each sample (a 2 cm grid is too coarse)
            pts, nrm, f, chi2 = self._refine(pts, nrm, f, chi2, link, mask, o, z, w, b, geo, seg_a, seg_b)
        chi2 = self._cone(pts, nrm, f, chi2, mask, o, z, w, b)
        ok = np.isfinite(chi2)
        if not ok.any():
            return self._none(t, tau)
        pts, link, area, f, chi2, nrm, mask = pts[ok], link[ok], area[ok], f[ok], chi2[ok], nrm[ok], mask[ok]
        c0 = float(chi2.min())
        # a best fit worse than σ explains (χ² > its n - 5 degrees of freedom): σ scaled up by the fit; beyond what a
        # fitting contact reaches, the unexplained part is taken as systematic and σ widened further (signals.misfit)
        dof = max(1, n - 5)
        scale2 = max(1.0, c0 / dof)
        misfit = check_misfit(c0, n, dof, 1.0, scale2,
                              significant_chi2(dof) if cfg.misfit_chi2 is None else cfg.misfit_chi2)
        scale2 *= misfit.information_scale
        like = area * np.exp(-0.5 * (chi2 - c0) / scale2)  # posterior over the surface (uniform area prior)
        ev = np.bincount(link, weights=like, minlength=n)
        prob = ev / ev.sum()
        k = int(np.argmax(prob))
        poor = c0 > cfg.max_chi2_per_joint * n
        f_lo, f_hi = self._force_range(pts, nrm, mask, f, like, o, z, w, scale2)
        sel = link == k
        pts_k, chi2_k, forces_k, like_k = pts[sel], chi2[sel], f[sel], like[sel]
        i = int(np.argmin(chi2_k))
        c_best = float(chi2_k[i])
        f_best = forces_k[i]
        f_norm = float(np.linalg.norm(f_best))
        post = like_k / like_k.sum()
        spread_p = 2.0 * math.sqrt(float(post @ np.sum((pts_k - pts_k[i]) ** 2, axis=1)))
        link_amb = bool(prob[k] < cfg.link_confidence) or poor
        tol = cfg.force_tolerance * f_norm
        force_amb = bool(f_lo < f_norm - tol or f_hi > f_norm + tol) or poor or misfit.flagged
        point = pts_k[i] if spread_p <= cfg.point_tolerance and not poor else None
        rot, pos = self._poses[k][:3, :3], self._poses[k][:3, 3]
        j_t = np.zeros((n, 3))
        j_t[:k + 1] = np.cross(z[:k + 1], pts_k[i] - o[:k + 1])
        resid = j_t @ f_best - tau
        fit_residual = float(np.sqrt(np.mean(resid ** 2)))
        words = contact_misfit_words(misfit, fit_residual, (f_lo, f_hi), self.link_names[k],
                                     float(prob[k])) if misfit.flagged else ""
        return ContactEstimate(
            time=float(t), link=k + 1, link_name=self.link_names[k], link_ambiguous=link_amb,
            link_probabilities=tuple(float(x) for x in prob), force=f_best.copy(), force_norm=f_norm,
            force_range=(f_lo, f_hi), force_ambiguous=force_amb,
            point=None if point is None else point.copy(), point_spread=spread_p,
            force_link=rot.T @ f_best, point_link=None if point is None else rot.T @ (point - pos),
            external_torque=tau.copy(), fit_residual=fit_residual, chi2=c_best,
            best_point=pts_k[i].copy(), best_point_link=rot.T @ (pts_k[i] - pos),
            sigma_scale=math.sqrt(scale2), torque_sigma=math.sqrt(scale2) * sig_total, link_names=self.link_names,
            misfit=words)

    def _force_range(self, pts, nrm, mask, f, like, o, z, w, scale2: float) -> tuple[float, float]:
        """95 % range (N, N) of |F| over the posterior ``like`` of all fitting points: each point's
        |F| ± 2 of its own standard error (σ scaled by ``scale2``). Where the joints see only two
        directions of F (e.g. link 2, or a point on a roll joint's axis), the third is bounded by
        the friction cone alone (:func:`_cone_bound`), and where the cone does not bound it either
        (or fewer directions are seen) the point's upper end is inf."""
        a = self._rows(pts, mask, o, z, w)
        h = a.transpose(0, 2, 1) @ a
        eig, vec = np.linalg.eigh(h)
        seen = eig > 1e-6 * np.maximum(eig[:, 2:], 1e-300)
        cov = np.linalg.pinv(h, rcond=1e-6, hermitian=True) * scale2  # the determined directions only
        fn = np.linalg.norm(f, axis=1)
        u = f / np.maximum(fn, 1e-12)[:, None]
        sd = np.sqrt(np.maximum(np.einsum("pi,pij,pj->p", u, cov, u), 0.0))
        lo = np.maximum(fn - 2.0 * sd, 0.0)
        hi = np.full(len(fn), np.inf)
        full = seen.all(axis=1)
        hi[full] = fn[full] + 2.0 * sd[full]
        two = seen[:, 1] & ~seen[:, 0]
        if two.any():
            hi[two] = _cone_bound(f[two], vec[two, :, 0], nrm[two], self._cos_cone) + 2.0 * sd[two]
        wgt = like / like.sum()
        return _weighted_quantiles(lo, wgt, (0.025,))[0], _weighted_quantiles(hi, wgt, (0.975,))[0]

    def _exposed(self, pts: np.ndarray, link: np.ndarray, seg_a: np.ndarray, seg_b: np.ndarray) -> np.ndarray:
        """Points not inside another link's capsule (2 mm tolerance at shared joints)."""
        keep = np.ones(len(pts), bool)
        for i in range(self.n):
            inside = distance_to_segment(pts, seg_a[i], seg_b[i]) <= self._radius[i] - 2e-3
            keep &= ~inside | (link == i)
        return keep

    @staticmethod
    def _rows(pts: np.ndarray, mask: np.ndarray, o: np.ndarray, z: np.ndarray, w: np.ndarray) -> np.ndarray:
        """(N, n, 3): row j of w ⊙ J_pᵀ, i.e. w_j (z_j × (p - o_j)) for joints j up to the point's link."""
        return _weigh(np.cross(z[None], pts[:, None, :] - o[None]), mask, w)

    def _fit(self, pts, mask, o, z, w, b) -> tuple[np.ndarray, np.ndarray]:
        """Least-squares F (N, 3) at each point and its χ² (N,)."""
        a = self._rows(pts, mask, o, z, w)
        at = a.transpose(0, 2, 1)
        f = np.linalg.solve(at @ a + _RIDGE * np.eye(3), (at @ b)[..., None])[..., 0]
        chi2 = np.sum(((a @ f[..., None])[..., 0] - b) ** 2, axis=1)
        return f, chi2

    def _refine(self, pts, nrm, f, chi2, link, mask, o, z, w, b, geo, seg_a, seg_b):
        """One Gauss-Newton step in (F, point on the surface) per point, at most half a grid step."""
        a = self._rows(pts, mask, o, z, w)
        res = (a @ f[..., None])[..., 0] - b
        # d(J_pᵀ F)_j / dp = w_j (F × z_j)ᵀ, restricted to the tangent plane (basis t1, t2)
        dp = _weigh(np.cross(f[:, None, :], z[None]), mask, w)
        t1, t2 = _tangents(nrm)
        jac = np.concatenate([a, (dp @ t1[..., None]), (dp @ t2[..., None])], axis=2)
        jt = jac.transpose(0, 2, 1)
        h = jt @ jac
        h += (1e-6 * np.trace(h, axis1=1, axis2=2)[:, None, None] + _RIDGE) * np.eye(5)
        d = -np.linalg.solve(h, (jt @ res[..., None]))[:, 3:, 0]
        lim = 0.5 * self.config.spacing
        d *= np.minimum(1.0, lim / np.maximum(np.linalg.norm(d, axis=1), 1e-12))[:, None]
        moved = _project(pts + d[:, :1] * t1 + d[:, 1:] * t2, *geo)
        f2, chi2_new = self._fit(moved, mask, o, z, w, b)
        better = (chi2_new < chi2) & self._exposed(moved, link, seg_a, seg_b)
        pts = np.where(better[:, None], moved, pts)
        f = np.where(better[:, None], f2, f)
        chi2 = np.where(better, chi2_new, chi2)
        return pts, _surface_normals(pts, *geo), f, chi2

    def _cone(self, pts, nrm, f, chi2, mask, o, z, w, b) -> np.ndarray:
        """χ² with F inside the friction cone: pulls are refitted (non-negative cone-edge weights)
        for the ``config.refine`` best of them, the others dropped (inf). Updates ``f`` in place."""
        inside = -np.sum(f * nrm, axis=1) >= self._cos_cone * np.linalg.norm(f, axis=1) - 1e-9
        out = np.where(inside, chi2, np.inf)
        pulls = np.flatnonzero(~inside)
        pulls = pulls[np.argsort(chi2[pulls])][:self.config.refine]
        if pulls.size:
            d = _cone_edges(nrm[pulls], self.config.friction)
            ad = self._rows(pts[pulls], mask[pulls], o, z, w) @ d.transpose(0, 2, 1)
            for m, i in enumerate(pulls):
                lam, r = nnls(ad[m], b)
                out[i] = r * r
                f[i] = lam @ d[m]
        return out

    def _none(self, t: float, tau: np.ndarray) -> ContactEstimate:
        return ContactEstimate(float(t), 0, "", True, tuple(0.0 for _ in range(self.n)), None, float("nan"),
                               (float("nan"), float("nan")), True, None, float("nan"), None, None, tau.copy(),
                               float("nan"), float("inf"))


def contact_misfit_words(misfit: Misfit, fit_residual: float, force_range: tuple[float, float], link: str,
                         probability: float) -> str:
    """What a user reads when no single point contact explains the external torque to its σ: the part left
    (``fit_residual`` N m RMS over the joints; expected: that / √(χ²/ν)), the widening, what is left of the
    estimate (the force's 95 % range, the link's probability) and what to look for."""
    lo, hi = force_range
    rng = f"{lo:.0f}..{hi:.0f} N" if math.isfinite(hi) else f"at least {lo:.0f} N"
    in_nm = Misfit(misfit.ratio, fit_residual, fit_residual / math.sqrt(max(misfit.ratio, 1e-300)), misfit.widening)
    return misfit_sentence("the external torque has a part", in_nm, f"force {rng} (95 %), {link} p {probability:.2f}",
                           "Look for a second contact, a contact on the payload or gripper, a contact that moved or "
                           "slid while it was measured, or a model error that changed with the motion",
                           model="a single point contact")


class ContactTracker:
    """Per-sample companion of the detector: keeps a short history of (t, q, ū) and, once per
    collision event, ``config.delay`` s after its detection, returns the :class:`ContactEstimate`.

    ū is :attr:`MomentumObserver.disturbance` (N m). The external torque is the mean ū over the
    last ``config.average`` s since the contact's start (the change point: ū leaves the pre-contact
    baseline), minus that baseline (mean ū over ``config.baseline`` before the onset). Its error is
    measured from the same history and handed to the fit (:meth:`external_torque`).
    """

    def __init__(self, locator: ContactLocator):
        self.locator = locator
        self.config = locator.config
        self._buf: deque[tuple[float, np.ndarray, np.ndarray, np.ndarray | None]] = deque()
        self._done_for: float | None = None  # detection time of the event already estimated
        self.last: ContactEstimate | None = None
        self._windows = (np.zeros(0, int), np.zeros(0, int))  # the last estimate's baseline and window samples
        self.payload_covariance: np.ndarray | None = None
        """4 x 4 covariance (kg, kg m) of the observer's payload's (m, m c) in the payload frame, or None (exact):
        the payload's error enters ū as its inverse dynamics, which the baseline removes only where the motion does
        not change between the baseline and the window (:meth:`payload_sigma`)."""

    def reset(self) -> None:
        """Forget the history (e.g. after the observer was re-initialised)."""
        self._buf.clear()
        self._done_for = None

    def update(self, t: float, q, u, event=None, dq=None) -> ContactEstimate | None:
        """Feed one sample (t s, q rad, ū N m), the detector's active event (or None) and optionally dq (rad/s; else
        the payload's σ uses the difference of q).

        Returns the estimate of the active event once, at its detection + ``delay``; else None.
        Samples whose time does not increase are ignored.
        """
        t = float(t)
        if self._buf and t <= self._buf[-1][0]:
            return None
        self._buf.append((t, np.array(q, float), np.array(u, float), None if dq is None else np.array(dq, float)))
        while self._buf and self._buf[0][0] < t - self.config.history:
            self._buf.popleft()
        if event is None or self._done_for == event.detection_time:
            return None
        if t < event.detection_time + self.config.delay - 1e-9:
            return None
        self._done_for = event.detection_time
        self.last = self.estimate(event.onset_time, t)
        return self.last

    def external_torque(self, onset: float, t_end: float) -> tuple[np.ndarray, np.ndarray, float]:
        """(τ_ext N m, q rad, start s): the baseline-corrected mean ū of the contact up to ``t_end``."""
        tau, q, t_start, _ = self._external_torque(onset, t_end)
        return tau, q, t_start

    def _external_torque(self, onset: float, t_end: float) -> tuple[np.ndarray, np.ndarray, float, np.ndarray]:
        """As :meth:`external_torque`, plus its measured error (N m per joint): the noise of ū in the
        baseline averaged over the window's samples, plus how far the pre-contact ū drifted from the
        baseline between the baseline's end and the contact's start (model error changing with the
        motion, which the baseline does not remove)."""
        cfg = self.config
        ts = np.array([s[0] for s in self._buf])
        us = np.array([s[2] for s in self._buf])
        base_sel = (ts >= onset - cfg.baseline[0]) & (ts < onset - cfg.baseline[1])
        base = us[base_sel].mean(axis=0) if base_sel.any() else np.zeros(us.shape[1])
        sel = np.flatnonzero((ts >= onset - cfg.lookback) & (ts <= t_end + 1e-12))
        d = us[sel] - base
        ref = d[-3:].mean(axis=0)
        scale = float(ref @ ref)
        start_idx = 0
        if scale > 0:
            frac = d @ ref / scale  # each sample's share of the current external torque
            low = np.flatnonzero(frac < 0.5)
            start_idx = int(low[-1]) + 1 if low.size else 0
            start_idx = min(start_idx, len(sel) - 1)
        t_start = float(ts[sel[start_idx]])
        win = sel[start_idx:]
        win = win[ts[win] > t_end - cfg.average - 1e-12]
        tau = us[win].mean(axis=0) - base
        q = self._buf[int(win[-1])][1]  # the kinematics of the estimate's time stamp
        measured = np.zeros(us.shape[1])
        if base_sel.sum() > 1:
            measured += us[base_sel].std(axis=0) / math.sqrt(len(win))
        pre = (ts >= onset - cfg.baseline[1]) & (ts < min(onset, t_start) - cfg.guard)
        if pre.any():
            measured += np.abs(us[pre].mean(axis=0) - base)
        self._windows = (np.flatnonzero(base_sel), win)
        return tau, q, t_start, measured

    def payload_sigma(self, base: np.ndarray, win: np.ndarray) -> np.ndarray:
        """σ (N m per joint) of τ_ext from the payload's error (:attr:`payload_covariance`; zeros without one). An
        error δp of the payload's (m, m c) adds (Ẇ1 + W2) δp to ū (its inverse dynamics in the momentum form,
        :meth:`.RigidBodyDynamics.payload_momentum_rows`): the baseline (samples ``base`` of the history) removes
        its mean there, the window (``win``) keeps the change, e.g. the gravity of a new pose, the arm stopping
        at the detection or recoiling from the push. The payload's rotational inertia about its CoM is taken as
        exact (its torque is small against that of its mass at these accelerations)."""
        cov = self.payload_torque_covariance(base, win)
        return np.zeros(self.locator.n) if cov is None else np.sqrt(np.maximum(np.diag(cov), 0.0))

    def payload_torque_covariance(self, base: np.ndarray, win: np.ndarray) -> np.ndarray | None:
        """n x n covariance (N² m²) of τ_ext from the payload's error (:meth:`payload_sigma`; None without one): one
        error of four parameters, correlated across the joints."""
        cov = self.payload_covariance
        if cov is None or len(win) == 0 or len(base) == 0:
            return None
        dy = self._payload_rows(win) - self._payload_rows(base)
        return dy @ np.asarray(cov, float) @ dy.T

    def _payload_rows(self, idx: np.ndarray) -> np.ndarray:
        """n x 4: the mean over the history's samples ``idx`` (consecutive) of Ẇ1 + W2 of the payload's (m, m c)."""
        dyn = self.locator.dyn
        first = max(int(idx[0]) - 1, 0)
        samples = [self._buf[i] for i in range(first, int(idx[-1]) + 1)]
        if len(samples) < 2:
            return dyn.payload_gravity_regressor(samples[0][1])
        ts = np.array([s[0] for s in samples])
        rows1, rows2 = [], []
        for k, (_, q, _, dq) in enumerate(samples):
            if dq is None:  # the difference of q: backward, forward at the first sample
                a, b = (k - 1, k) if k > 0 else (0, 1)
                dq = (samples[b][1] - samples[a][1]) / (ts[b] - ts[a])
            w1, w2 = dyn.payload_momentum_rows(q, dq)
            rows1.append(w1[:, :4])
            rows2.append(w2[:, :4])
        span = ts[-1] - ts[0]
        return (rows1[-1] - rows1[0]) / span + np.mean(rows2[1:], axis=0)

    def estimate(self, onset: float, t_end: float) -> ContactEstimate:
        """The contact estimate from the history: torque and its measured error from :meth:`_external_torque`."""
        tau, q, _, measured = self._external_torque(onset, t_end)
        return self.locator.locate(q, tau, t_end, measured_sigma=measured,
                                   torque_covariance=self.payload_torque_covariance(*self._windows))


__all__ = ["ContactConfig", "ContactEstimate", "ContactInputError", "ContactLocator", "ContactTracker",
           "contact_misfit_words"]
