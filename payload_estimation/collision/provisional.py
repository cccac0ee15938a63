"""The payload while it is being sampled: what the monitor's model carries before any estimate exists.

When the arm grasps an unknown object the unloaded gravity model reads the new load as a collision.
While the payload sampler runs, :class:`ProvisionalPayload` learns the load from the static joint
torques the monitor sees at rest: at each new rest pose (every joint slower than ``rest_velocity``
for ``rest_time`` s, at least ``min_pose_distance`` from the poses already used) it adds the mean
mismatch e = tau_J - ĝ(q) of the unloaded model and refits p_L,g = (m, m c) from all rest poses so far
(paper 000 eq. 27 at rest: e = Y_L,g(q) p_L,g + model error + noise).

The fit is the posterior mean under a Gaussian prior p ~ N(0, diag(prior_mass², prior_moment²·I))
with torque errors of ``torque_sigma`` (N m, noise *and* the model's own error): a direction the
poses do not excite stays at the prior (0), never a value amplified from noise — at the arm's
stretched-up pose the mass does not show in the torques at all. :func:`payload_gravity_posterior`
gives the same covariance from the poses alone; the sampler uses its mass standard deviation to
slow the moves while the mass is still unknown (:func:`sampling.poses.unknown_payload_duration`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..model.dynamics import RigidBodyDynamics
from ..model.parameters import BodyInertia


@dataclass(frozen=True)
class ProvisionalFit:
    """The payload learnt so far: mass (kg), CoM (m, payload frame), the mass's posterior standard
    deviation (kg) and the number of rest poses it comes from. A caller that needs an estimate record
    (the monitor node) converts it; this layer does not depend on identification/."""

    mass: float
    com: np.ndarray
    mass_std: float
    poses: int

    @property
    def method(self) -> str:
        return f"provisional ({self.poses} rest pose(s))"

    def gravity_params(self) -> np.ndarray:
        """p_L,g = (m, m cx, m cy, m cz) in the payload frame."""
        return np.concatenate([[self.mass], self.mass * np.asarray(self.com, float)])

    def observer_model(self, point_mass: bool = True) -> tuple[BodyInertia, bool]:
        """(body, gravity_only) for :meth:`MomentumObserver.set_payload`, as an estimate gives it: a
        point mass at the CoM in M and C too, or (``point_mass`` False) gravity only."""
        return BodyInertia(self.mass, np.asarray(self.com, float), np.zeros((3, 3))), not point_mass


@dataclass(frozen=True)
class ProvisionalConfig:
    """rest_velocity rad/s; rest_time s averaged per pose; min_pose_distance rad between used poses;
    torque_sigma N m per joint (noise + unloaded model error at rest); prior standard deviations of
    the mass (kg) and of each first moment m c (kg m)."""

    rest_velocity: float = 0.01
    rest_time: float = 0.05
    min_pose_distance: float = float(np.radians(1.0))
    torque_sigma: float = 0.5
    prior_mass: float = 10.0
    prior_moment: float = 1.0


def payload_gravity_posterior(dyn: RigidBodyDynamics, qs: np.ndarray, e: np.ndarray | None = None,
                              config: ProvisionalConfig | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(posterior mean p_L,g (4,), covariance (4, 4)) from rest poses ``qs`` (k, n) and mismatches ``e``
    (k, n) N m (None: the mean is 0, for the covariance alone)."""
    cfg = config or ProvisionalConfig()
    qs = np.atleast_2d(np.asarray(qs, dtype=float))
    y = np.concatenate([dyn.payload_gravity_regressor(q) for q in qs]) / cfg.torque_sigma
    prior = np.array([cfg.prior_mass, cfg.prior_moment, cfg.prior_moment, cfg.prior_moment]) ** -2.0
    info = y.T @ y + np.diag(prior)
    cov = np.linalg.inv(info)
    mean = np.zeros(4) if e is None else cov @ (y.T @ (np.asarray(e, float).ravel() / cfg.torque_sigma))
    return mean, cov


class ProvisionalPayload:
    """Learns the payload from rest poses while sampling (see the module docstring); one per monitor."""

    def __init__(self, dyn: RigidBodyDynamics, config: ProvisionalConfig | None = None):
        self.dyn = dyn
        self.cfg = config or ProvisionalConfig()
        self.poses: list[np.ndarray] = []
        self.mismatch: list[np.ndarray] = []
        self.estimate: ProvisionalFit | None = None
        self._prior_cov = np.diag(np.array([self.cfg.prior_mass, *[self.cfg.prior_moment] * 3]) ** 2)
        self.cov = self._prior_cov
        self._cov_before: np.ndarray | None = None
        self._t_fit = -np.inf
        self._rest_start: float | None = None
        self._sum_q = np.zeros(dyn.n)
        self._sum_e = np.zeros(dyn.n)
        self._count = 0

    def start(self) -> None:
        """A sampling run begins: forget earlier rest poses."""
        self.poses.clear()
        self.mismatch.clear()
        self.estimate = None
        self.cov, self._cov_before, self._t_fit = self._prior_cov, None, -np.inf
        self._reset_window()

    def torque_bound(self, q: np.ndarray, t: float, k_sigma: float = 3.0, settle: float = 0.2,
                     elapsed: float | None = None) -> np.ndarray:
        """k_sigma standard deviations (N m, per joint) of the provisional payload's gravity torque at ``q``:
        how far the residual may stray because the payload is not yet known. For ``settle`` s after a refit
        (the residual's convergence, 5/K_I) the bound before the refit still applies where it was larger;
        ``elapsed``: the residual's convergence time since the refit (s) when not t minus the refit's time
        (a stream gap holds the residual: it does not converge across it)."""
        y = self.dyn.payload_gravity_regressor(q)
        bound = k_sigma * np.sqrt(np.einsum("ij,jk,ik->i", y, self.cov, y))
        since = t - self._t_fit if elapsed is None else elapsed
        if self._cov_before is not None and since < settle:
            before = k_sigma * np.sqrt(np.einsum("ij,jk,ik->i", y, self._cov_before, y))
            bound = np.maximum(bound, before)
        return bound

    def converged(self) -> None:
        """The residual reads the last refit already (the observer moved it, the arm at rest): the bound before
        the refit no longer applies during the settle of :meth:`torque_bound`."""
        self._cov_before = None

    def hold(self) -> None:
        """Forget the rest block in progress (e.g. during a contact: its torque is not the payload's)."""
        self._reset_window()

    def _reset_window(self) -> None:
        self._rest_start = None
        self._sum_q[:] = 0.0
        self._sum_e[:] = 0.0
        self._count = 0

    def update(self, t: float, q: np.ndarray, dq: np.ndarray, tau: np.ndarray,
               replace: bool = False) -> ProvisionalFit | None:
        """Feed one sample (s, rad, rad/s, N m); returns a new provisional payload when a rest pose completes.

        ``replace``: the load may still be changing (an announced grasp or release): each completed rest
        block replaces the poses so far, also at the same pose, so the fit follows the newest load."""
        if np.max(np.abs(dq)) > self.cfg.rest_velocity:
            self._reset_window()
            return None
        if (not replace and self.poses
                and np.min([np.max(np.abs(q - p)) for p in self.poses]) < self.cfg.min_pose_distance):
            return None  # this pose is used already
        if self._rest_start is None:
            self._rest_start = t
        self._sum_q += q
        self._sum_e += tau - self.dyn.gravity(q)
        self._count += 1
        if t - self._rest_start < self.cfg.rest_time:
            return None
        if replace:
            self.poses.clear()
            self.mismatch.clear()
        self.poses.append(self._sum_q / self._count)
        self.mismatch.append(self._sum_e / self._count)
        self._reset_window()
        mean, cov = payload_gravity_posterior(self.dyn, np.array(self.poses), np.array(self.mismatch), self.cfg)
        self._cov_before, self.cov, self._t_fit = self.cov, cov, t
        m = float(mean[0])
        com = mean[1:] / m if m > 1e-3 else np.zeros(3)
        self.estimate = ProvisionalFit(max(m, 0.0), com, float(np.sqrt(cov[0, 0])), len(self.poses))
        return self.estimate


__all__ = ["ProvisionalFit", "ProvisionalPayload", "ProvisionalConfig", "payload_gravity_posterior"]
