"""Which published payload estimates the collision monitor puts into its model.

:class:`EstimateGate` refuses (:class:`EstimateRefused`, the previous payload is kept) an estimate of a payload
that was just lost (until 0 kg, an announcement or a sampling run), one in another frame than the model's payload
frame, one the payload layer's limit check refuses (mass above ``max_payload``, CoM beyond ``max_com_radius``, an
impossible inertia; the check is given by the caller: collision/ does not import payload/) and one that arrives
while a detected event is being classified (collision or payload lost). A 0 kg estimate is always taken (it
returns to the unloaded model) and opens the gate again.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from ..errors import PayloadEstimationError
from ..model.parameters import BodyInertia
from ..node_limits import MAX_COM_RADIUS, MAX_PAYLOAD


class EstimateRefused(PayloadEstimationError):
    """A payload estimate the monitor does not put into its model; the message says why."""


class PayloadModel(Protocol):
    """What the monitor needs of a payload: an estimate record (payload/) or a :class:`.provisional.ProvisionalFit`."""

    mass: float
    com: np.ndarray
    method: str

    def observer_model(self, point_mass: bool = True) -> tuple[BodyInertia, bool]: ...


LimitCheck = Callable[[float, np.ndarray, "np.ndarray | None", float, float], None]
"""(mass kg, CoM m, inertia about the CoM or None, max_payload kg, max_com_radius m) -> None; raises a
:class:`~payload_estimation.errors.PayloadEstimationError` saying why the payload is not plausible."""


@dataclass(frozen=True)
class EstimateGateConfig:
    """What counts as a payload, named as the node's parameters: max_payload kg, max_com_radius m (defaults:
    :mod:`payload_estimation.node_limits`, the nodes' defaults)."""

    max_payload: float = MAX_PAYLOAD
    max_com_radius: float = MAX_COM_RADIUS


class EstimateGate:
    """The acceptance rules of a published estimate (module docstring). ``frame``: the model's payload frame;
    ``limit_check``: the payload layer's plausibility check (None: frame check only)."""

    def __init__(self, frame: str = "", limit_check: LimitCheck | None = None,
                 config: EstimateGateConfig | None = None):
        self.frame, self.limit_check = frame, limit_check
        self.cfg = config or EstimateGateConfig()
        self.blocked = False  # after a payload loss: estimates refused until 0 kg, an announcement or a sampling run

    def check(self, est: PayloadModel, frame: str, classifying: bool = False) -> None:
        """Raise :class:`EstimateRefused` saying why the estimate of a payload (``est.mass`` > 0) in ``frame`` is not
        used; ``classifying``: a detected event is being classified now."""
        if self.blocked:
            raise EstimateRefused("the payload was lost: an estimate of it is not used (announce "
                                  "payload_estimator/released, or grasped for a new object)")
        if frame != self.frame:
            raise EstimateRefused(f"frame '{frame}' is not this model's payload frame '{self.frame}'")
        if self.limit_check is not None:
            try:
                self.limit_check(est.mass, np.asarray(est.com, float), getattr(est, "inertia", None),
                                 self.cfg.max_payload, self.cfg.max_com_radius)
            except PayloadEstimationError as e:
                raise EstimateRefused(str(e)) from e
        if classifying:
            raise EstimateRefused("an event is being classified (collision or payload lost): the carried payload "
                                  "model is kept until it is decided; the next estimate is taken")


__all__ = ["EstimateGate", "EstimateGateConfig", "EstimateRefused", "LimitCheck", "PayloadModel"]
