"""The simulator's *true* link parameters: the description's, perturbed reproducibly.

Perturbations stay physically consistent: the mass is scaled by a positive factor, the CoM is
shifted, and the inertia about the CoM is rebuilt from perturbed (non-negative) principal second
moments of the mass distribution, so the triangle inequality always holds.
"""

from __future__ import annotations

import numpy as np

from ..model.description import RobotDescription, require_physical, validate
from ..model.parameters import BodyInertia
from .config import SimInputError

SIMULATOR = "The MuJoCo simulator (SimulatedArm, sim_node)"
# A CoM shift scale floor (m) so links with their CoM on a frame axis are perturbed too.
_COM_FLOOR = 0.01


def perturb_body(body: BodyInertia, rel: float, rng: np.random.Generator) -> BodyInertia:
    """``body`` with mass, CoM and inertia changed by about ``rel`` (relative, uniform draws)."""
    if rel < 0 or not np.isfinite(rel):
        raise SimInputError(f"model_error must be a finite number >= 0, got {rel}")
    u_m = rng.uniform(-1, 1)
    u_c = rng.uniform(-1, 1, 3)
    u_s = rng.uniform(-1, 1, 3)
    mass = body.mass * max(1.0 + rel * u_m, 0.1)
    com = np.asarray(body.com, float)
    com = com + rel * max(np.linalg.norm(com), _COM_FLOOR) * u_c
    i_c = 0.5 * (np.asarray(body.inertia_com, float) + np.asarray(body.inertia_com, float).T)
    # Second moments Sigma = tr(I)/2 * 1 - I (PSD for a consistent body); I = tr(Sigma) 1 - Sigma.
    sigma = 0.5 * np.trace(i_c) * np.eye(3) - i_c
    w, v = np.linalg.eigh(sigma)
    scale = np.trace(i_c) * 1e-3
    w = np.maximum(w, 0.0) * np.maximum(1.0 + rel * u_s, 0.1) + scale * 1e-3
    sigma = (v * w) @ v.T
    inertia = np.trace(sigma) * np.eye(3) - sigma
    # Inertia scales with mass at fixed shape.
    inertia = inertia * (mass / body.mass)
    return BodyInertia(float(mass), com, inertia)


def true_links(desc: RobotDescription, model_error: float, seed: int) -> tuple[BodyInertia, ...]:
    """The description's links perturbed by ``model_error`` (0 returns them unchanged)."""
    if model_error == 0:
        return tuple(desc.links)
    rng = np.random.default_rng([int(seed), 7919])  # independent of the sensor-noise stream
    return tuple(perturb_body(b, model_error, rng) for b in desc.links)


def true_description(desc: RobotDescription, links: tuple[BodyInertia, ...]) -> RobotDescription:
    """``desc`` with the given true links, validated (a mass and a consistent inertia for every body)."""
    return validate(require_physical(desc.with_links(links), SIMULATOR))
