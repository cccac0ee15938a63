"""An estimate's σ in the collision thresholds: they widen by the torque its uncertainty allows at each pose.

An estimate published with the covariance of its gravity parameters (the online estimate) widens the thresholds
by k_sigma x the torque σ of its gravity at the current pose, recomputed every ``period`` s, so they narrow as σ
shrinks. The covariance arrives on its own topic, before or after its estimate: :class:`EstimateSigma` pairs them
by mass and CoM, and keeps the previous estimate's σ until the new one's arrives.

Units: kg, m, N m, s.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..model.dynamics import RigidBodyDynamics
from .estimate_gate import EstimateRefused, PayloadModel
from .provisional import ProvisionalFit

SIGMA_PERIOD = 0.01
"""s between updates of the thresholds widened by an estimate's σ (a gravity regressor each)."""


@dataclass(frozen=True)
class SigmaConfig:
    """``period`` s between two recomputations of the σ widening (a gravity regressor each)."""

    period: float = SIGMA_PERIOD


class EstimateSigma:
    """The covariance in use (:attr:`cov`, 4 x 4 of m, m cx, m cy, m cz; kg, kg m) for the carried estimate and
    the torque σ it allows (module docstring)."""

    def __init__(self, dyn: RigidBodyDynamics, config: SigmaConfig | None = None):
        self.dyn, self.cfg = dyn, config or SigmaConfig()
        self.record: dict | None = None  # the last covariance received (mass, com, cov)
        self.cov: np.ndarray | None = None  # that of the carried estimate (None: not widened)
        self._t: float | None = None  # when the widening was last computed

    def received(self, mass: float, com, gravity_covariance) -> None:
        """The covariance published for the estimate of ``mass`` kg with CoM ``com`` m; raises
        :class:`.estimate_gate.EstimateRefused` for one that is not 4 x 4, finite, with a non-negative diagonal."""
        cov = np.asarray(gravity_covariance, float)
        if cov.shape != (4, 4) or not np.all(np.isfinite(cov)) or np.any(np.diag(cov) < 0):
            raise EstimateRefused(f"an estimate's gravity covariance must be 4 x 4 and finite, got {cov.shape}")
        self.record = {"mass": float(mass), "com": np.asarray(com, float), "cov": 0.5 * (cov + cov.T)}

    def match(self, payload: PayloadModel | None) -> bool:
        """Pair the last covariance received with the carried ``payload``; returns whether it is that payload's. An
        unloaded or provisional payload has none; another estimate keeps the previous σ until its own arrives (its
        message may come second). The next :meth:`due` computes the widening again."""
        p, s = payload, self.record
        match = (p is not None and s is not None and not isinstance(p, ProvisionalFit) and p.mass == s["mass"]
                 and np.array_equal(np.asarray(p.com, float), s["com"]))
        if match:
            self.cov = s["cov"]
        elif p is None or isinstance(p, ProvisionalFit):
            self.cov = None
        self._t = None
        return match

    def forget(self) -> None:
        """No σ in use and none received (a sampling run learns the payload anew)."""
        self.cov = self.record = None

    def due(self, t: float, q: np.ndarray) -> np.ndarray | None:
        """The carried estimate's gravity torque σ (n,) N m at ``q`` when a recomputation is due at ``t`` s (every
        :attr:`SigmaConfig.period`), else None (also without a covariance in use)."""
        cov = self.cov
        if cov is None or (self._t is not None and 0 <= t - self._t < self.cfg.period):
            return None
        self._t = t
        y = self.dyn.payload_gravity_regressor(q)
        return np.sqrt(np.maximum(np.einsum("ij,jk,ik->i", y, cov, y), 0.0))


__all__ = ["EstimateSigma", "SIGMA_PERIOD", "SigmaConfig"]
