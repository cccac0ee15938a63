"""A bounded static pose sweep of the unloaded arm, for identifying its gravity model (issue 17).

The payload estimate is only as good as the unloaded model it subtracts; a data-sheet model is often
several percent off. :func:`plan_sweep` chooses ``n_poses`` static poses inside a box of
±``amplitude_deg`` around the arm's current configuration (the same :class:`~.poses.Envelope` as a
sampling run, with the joint-limit margin), D-optimal for what is identified from them: the robot's
gravity base coefficients and a torque offset per joint (:func:`identification.robot_identification.identify_gravity`
with ``offset``). The poses are visited in a short tour that starts and ends at the current
configuration; every move is a rest-to-rest quintic within ``velocity_scale`` of the velocity limits
(:func:`~.poses.validate_plan`). The ``payload_sampler`` runs the plan like a sampling run —
collision gate, aborts, return — and the estimator fits the model from the captures.

Units: rad, s.
"""

from __future__ import annotations

import numpy as np

from ..errors import PayloadEstimationError
from ..model.base_parameters import compute_base_parameters
from .poses import Envelope, PosePlan, PosePlanConfig, greedy_d_optimal, make_envelope, tour_plan


def sweep_regressor(dyn, selection: np.ndarray, q: np.ndarray) -> np.ndarray:
    """Rows (n x (r + n)) of the unloaded gravity base coefficients (``selection``: the base
    parameters' P x r selection) and per-joint offsets at ``q``."""
    return np.hstack([dyn.gravity_regressor(q) @ selection, np.eye(dyn.n)])


def plan_sweep(dyn, q0: np.ndarray, config: PosePlanConfig, envelope: Envelope | None = None) -> PosePlan:
    """D-optimal static poses (``config.n_poses``, the first = ``q0``) for the unloaded gravity model.

    ``envelope``: the box the poses must stay in (default: ±``config.amplitude_deg`` around ``q0``
    within the limits less ``config.limit_margin_deg``). Raises :class:`~.poses.MotionLimitError` when
    the box or a move is not allowed, ``PayloadEstimationError`` when it cannot determine the model (too
    few poses).
    """
    env = envelope or make_envelope(dyn.desc, q0, config.amplitude_deg, config.limit_margin_deg)
    base = compute_base_parameters(dyn, "gravity")
    rows = base.rank + dyn.n
    if config.n_poses * dyn.n < 2 * rows:
        raise PayloadEstimationError(f"a sweep needs at least {int(np.ceil(2 * rows / dyn.n))} poses for the "
                                     f"{rows} gravity coefficients and offsets of {dyn.desc.name}, got "
                                     f"{config.n_poses}")
    rng = np.random.default_rng(config.seed)
    cand = rng.uniform(env.lower, env.upper, size=(config.max_candidates, dyn.n))
    ys = np.stack([sweep_regressor(dyn, base.selection, c) for c in cand])
    infos = np.einsum("cij,cik->cjk", ys, ys)
    y0 = sweep_regressor(dyn, base.selection, env.q0)
    chosen, info = greedy_d_optimal(infos, y0.T @ y0, config.n_poses - 1)
    return tour_plan(dyn.desc, env, np.vstack([env.q0[None], cand[chosen]]), info, config)


__all__ = ["plan_sweep", "sweep_regressor"]
