"""Link names: one naming for contacts, reports and the simulator.

Link k (1..n, the link after joint k) is named by the robot model: ``RobotDescription.link_frame_name(k)``,
that is the URDF's child link of joint k for a URDF model (``lbr_link_5``, ``fr3_link5``; ``link_5`` in the
URDF sim_node publishes for a DH robot) and ``<robot>_dh_frame_<k>`` for a DH/MDH robot file
(``iiwa14_dh_frame_5``). The collision monitor reports contacts by these names and sim_node's
``~/apply_wrench`` takes them as ``header.frame_id``; the generic ``link_<k>`` (the simulator's and the
dynamics' own frame names) is accepted as well.
"""

from __future__ import annotations

import re

from ..errors import PayloadEstimationError
from ..model.description import RobotDescription

_GENERIC = re.compile(r"link_([1-9][0-9]*)")


class UnknownLinkError(PayloadEstimationError):
    """A link name that is not one of the model's; the message lists the accepted names."""


def link_names(desc: RobotDescription) -> tuple[str, ...]:
    """The model's names of links 1..n (module docstring)."""
    return tuple(desc.link_frame_name(k) for k in range(1, desc.n + 1))


def link_index(desc: RobotDescription, name: str) -> int:
    """Link number k (1..n) of ``name``: one of the model's link names, or ``link_<k>``.

    Raises :class:`UnknownLinkError` naming the accepted names for anything else."""
    names = link_names(desc)
    if name in names:
        return names.index(name) + 1
    m = _GENERIC.fullmatch(name)
    if m and 1 <= int(m.group(1)) <= desc.n:
        return int(m.group(1))
    raise UnknownLinkError(f"unknown link '{name}' for robot '{desc.name}': use one of the model's link names "
                           f"{', '.join(names)} (as contact reports name them) or link_1..link_{desc.n}")


__all__ = ["UnknownLinkError", "link_index", "link_names"]
