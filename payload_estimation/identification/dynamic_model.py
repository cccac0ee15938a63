"""The arm's unloaded dynamics for a momentum observer: a link set (M, C, g) plus joint friction.

A collision monitor (``collision.observer.MomentumObserver``) needs a pinocchio-ready link set for
M̂(q), Ĉ(q, dq), ĝ(q) and, on a real arm whose torque sensors read the joint friction, the friction
τ̂_f(dq) to subtract. :func:`load_dynamic_model` gives both from what ``validate --params`` takes:

* ``nominal`` (or None): the robot description itself, no friction (what the monitor used before);
* a PARAMS.yaml of ``identify`` (coefficients): its base coefficients π_b as a link set whose
  standard parameters p satisfy K p = π_b, the nearest such p to the description's (least change in
  the 2-norm, :meth:`~.identified_model.IdentifiedModel.link_set`) -- M̂, Ĉ, ĝ are then exactly the
  identified model's, whatever the choice of p in K's null space; plus the file's friction and offsets;
* an identified robot YAML/URDF (``identify --physical``: the physically consistent link set) with the
  friction and offsets it carries (:func:`~.torque_models.read_friction`).

A file must belong to the description: the same joint names and kinematics (fingerprint); the link set
always keeps the description's kinematics. Units: N m, N m s/rad, kg, m.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import yaml

from ..model.description import RobotDescription
from ..model.dynamics import RigidBodyDynamics
from ..model.parameter_dynamics import dynamics_of
from ..model.robot_file import FINGERPRINT_KEY, kinematics_fingerprint, load_robot
from .identified_model import IdentifiedModel
from .torque_models import JointFriction, TorqueModelError, read_friction


@dataclass(frozen=True)
class DynamicModel:
    """Unloaded link set ``desc`` (the description's kinematics) and the joint ``friction`` (viscous,
    Coulomb, offset) a momentum observer subtracts; ``kind``: "description", "coefficients" or
    "link set"; ``source``: the file (or "nominal"); ``note``: one line for the user."""

    desc: RobotDescription
    friction: JointFriction
    kind: str
    source: str
    note: str

    def dynamics(self) -> RigidBodyDynamics:
        """The link set's M, C, g (pinocchio). A coefficient file's link set is taken as it is (it realises
        the coefficients and need not be physically consistent); a description or a link-set file whose
        inertia pinocchio refuses is refused (RuntimeError), as a robot model always was."""
        return dynamics_of(self.desc) if self.kind == "coefficients" else RigidBodyDynamics(self.desc)


def load_dynamic_model(spec: str | Path | None, desc: RobotDescription) -> DynamicModel:
    """The dynamic model named by ``spec`` (``nominal``/None, a PARAMS.yaml, an identified robot
    YAML/URDF) for the robot ``desc``; :class:`TorqueModelError` says why a file does not fit."""
    if spec is None or str(spec) == "nominal":
        return DynamicModel(desc, JointFriction.zeros(desc.n), "description", "nominal",
                            f"dynamic model: the robot description {desc.name} (no joint friction)")
    p = Path(spec).expanduser()
    if not p.is_file():
        raise TorqueModelError(f"{p}: no such parameter or robot file (give a PARAMS.yaml or the robot file "
                               "written by `identify --physical`, or 'nominal')")
    doc = _yaml(p)
    if isinstance(doc, dict) and "format" in doc:
        return _from_coefficients(IdentifiedModel.from_dict(doc, str(p)), desc, str(p))
    return _from_link_set(p, desc)


def _yaml(p: Path):
    if p.suffix.lower() not in (".yaml", ".yml"):
        return None
    try:
        return yaml.safe_load(p.read_text())
    except yaml.YAMLError as exc:
        raise TorqueModelError(f"{p}: not valid YAML: {exc}") from exc


def _check_joints(names, desc: RobotDescription, where: str) -> None:
    if tuple(names) != desc.joint_names:
        raise TorqueModelError(f"{where}: identified for joints {list(names)}, the robot {desc.name} has "
                               f"{list(desc.joint_names)}: it belongs to another robot model (use a model identified "
                               "for this one)")


def _from_coefficients(model: IdentifiedModel, desc: RobotDescription, where: str) -> DynamicModel:
    _check_joints(model.joint_names, desc, where)
    there = model.info.get(FINGERPRINT_KEY)
    if there and there != kinematics_fingerprint(desc):
        raise TorqueModelError(f"{where}: identified on other kinematics (fingerprint {there}, the robot "
                               f"{desc.name}: {kinematics_fingerprint(desc)}): its coefficients do not apply here")
    links = model.link_set(desc)
    friction = JointFriction(*(a.copy() for a in model.friction_terms()))
    what = "base coefficients" if model.kind == "full" else "gravity coefficients (M, C from the description)"
    return DynamicModel(links, friction, "coefficients", where,
                        f"dynamic model: {where} ({what}, friction {_terms(friction)})")


def _from_link_set(p: Path, desc: RobotDescription) -> DynamicModel:
    other = load_robot(p)
    _check_joints(other.joint_names, desc, str(p))
    if kinematics_fingerprint(other) != kinematics_fingerprint(desc):
        raise TorqueModelError(f"{p}: its kinematics differ from the robot {desc.name}'s (fingerprint "
                               f"{kinematics_fingerprint(other)} vs {kinematics_fingerprint(desc)}): use the link "
                               "set identified for this robot model")
    friction = read_friction(p, other)
    return DynamicModel(desc.with_links(other.links), friction, "link set", str(p),
                        f"dynamic model: link set {p} (friction {_terms(friction)})")


def _terms(f: JointFriction) -> str:
    """'viscous+offset' (the terms present), and the joints whose viscous or Coulomb term is negative."""
    on = [k for k in ("viscous", "coulomb", "offset") if getattr(f, k).any()]
    text = "+".join(on) if on else "none"
    for k in ("viscous", "coulomb"):
        neg = [str(j + 1) for j in range(f.n) if getattr(f, k)[j] < 0]
        if neg:
            text += f"; {k} negative at joint(s) {', '.join(neg)}, used as identified (not dissipative)"
    return text


__all__ = ["DynamicModel", "load_dynamic_model"]
