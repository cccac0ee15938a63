"""Rigid-body dynamics of a link set that need not be physically consistent.

Pinocchio's Python ``Inertia(mass, com, inertia)`` refuses a rotational inertia with a negative
diagonal entry. A link set that realises identified base coefficients exactly (any p with K p = π_b,
:meth:`~payload_estimation.identification.identified_model.IdentifiedModel.link_set`) can have one:
only combinations of parameters are identified, and the unseen rest is arbitrary. Its M(q), C(q, dq),
g(q) are still well defined (linear in the standard parameters), so :class:`ParameterDynamics` sets
the bodies from their standard parameters (``pin.Inertia.FromDynamicParameters``, no check): the same
numbers as :class:`~.dynamics.RigidBodyDynamics` for any link set the latter accepts.
"""

from __future__ import annotations

import numpy as np
import pinocchio as pin

from .description import RobotDescription
from .dynamics import RigidBodyDynamics, build_pinocchio_model
from .parameters import N_PARAMS, BodyInertia

_UNIT = BodyInertia(1.0, np.zeros(3), np.eye(3))  # placeholder body, replaced right after the build


class ParameterDynamics(RigidBodyDynamics):
    """:class:`~.dynamics.RigidBodyDynamics` whose link bodies are set from their standard parameters
    (link frames, seeds' order), physically consistent or not; a payload (payload frame) is added to
    the last link's parameters (eqs. 16-18)."""

    def __init__(self, desc: RobotDescription, payload: BodyInertia | None = None):
        placeholder = desc.with_links([_UNIT] * desc.n)
        super().__init__(placeholder, payload=None)
        self.desc = desc
        self.payload = payload
        p = self.maps.link_to_pin @ np.concatenate([b.to_params() for b in desc.links])
        if payload is not None:
            p = p + self.maps.payload_to_pin @ payload.to_params()
        for k in range(desc.n):
            self.model.inertias[k + 1] = pin.Inertia.FromDynamicParameters(p[N_PARAMS * k:N_PARAMS * (k + 1)])
        self.data = self.model.createData()

    def with_payload(self, payload: BodyInertia | None) -> ParameterDynamics:
        """A new model of the same link set carrying ``payload`` (payload frame)."""
        return ParameterDynamics(self.desc, payload)


def dynamics_of(desc: RobotDescription) -> RigidBodyDynamics:
    """:class:`~.dynamics.RigidBodyDynamics` of ``desc`` when pinocchio accepts its bodies, else
    :class:`ParameterDynamics` (same M, C, g)."""
    try:
        build_pinocchio_model(desc)
    except RuntimeError:
        return ParameterDynamics(desc)
    return RigidBodyDynamics(desc)


__all__ = ["ParameterDynamics", "dynamics_of"]
