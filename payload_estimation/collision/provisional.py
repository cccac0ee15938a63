"""A provisional payload from the observer's static residual, before any estimate exists.

When the arm grasps an unknown object at rest, the residual converges to
r = ĝ^L(q) - tau_J = -Y_L,g(q) (p_true - p_current) (paper 000 eq. 48 at rest). One pose gives
a minimum-norm p_L,g: the mass and the CoM components that gravity makes observable at that pose
(the component along gravity is not, and stays small over the sampler's ±7°). The collision
monitor uses it while the sampler runs, so that the new load does not read as a collision.
"""

from __future__ import annotations

import numpy as np

from ..identification.estimate import PayloadEstimate
from ..model.dynamics import RigidBodyDynamics


def provisional_payload(dyn: RigidBodyDynamics, q: np.ndarray, r: np.ndarray,
                        current: PayloadEstimate | None, frame: str) -> PayloadEstimate:
    """Payload that explains the static residual ``r`` (N m) at ``q`` on top of ``current``.

    At rest the observer converges to r = ĝ^L(q) - tau_J = -Y_L,g(q) (p_true - p_current).
    """
    y = dyn.payload_gravity_regressor(q)
    dp, *_ = np.linalg.lstsq(y, -np.asarray(r, float), rcond=1e-6)
    p = (current.gravity_params() if current is not None else np.zeros(4)) + dp
    m = float(p[0])
    com = p[1:] / m if m > 1e-6 else np.zeros(3)
    return PayloadEstimate(max(m, 0.0), com, None, frame, method="provisional (static residual)")
