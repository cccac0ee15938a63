"""The plausibility check of :func:`.result.build_estimate`, for a payload made elsewhere (e.g. a message).

The collision monitor refuses a published estimate that no fit of this package would have returned with
the same limits (:class:`.result.PayloadLimits`): :func:`check_payload` is the one rule, given to
:class:`collision.supervisor.MonitorSupervisor` by the node and the bare run.
"""

from __future__ import annotations

import numpy as np

from .result import PayloadLimits, _check_body, _check_mass


def check_payload(mass: float, com: np.ndarray, inertia: np.ndarray | None, max_payload: float,
                  max_com_radius: float) -> None:
    """Raise :class:`.result.PayloadRejected` unless ``mass`` (kg) is in (0, ``max_payload``], the CoM ``com`` (m,
    payload frame) within ``max_com_radius`` m of the frame origin and ``inertia`` (about the CoM, [xx, xy, xz, yy,
    yz, zz] kg m², or None) physically consistent."""
    limits = PayloadLimits(max_payload=float(max_payload), max_com_radius=float(max_com_radius))
    _check_mass(float(mass), float("nan"), limits)
    _check_body(float(mass), np.asarray(com, float), None if inertia is None else np.asarray(inertia, float), limits)


__all__ = ["check_payload"]
