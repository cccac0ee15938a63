"""Models that predict joint torques along a recording, and the joint friction a robot file carries.

* an identified coefficient file (PARAMS.yaml, :class:`~.identified_model.IdentifiedModel`);
* a robot description (YAML/URDF, e.g. the physically consistent set written by
  ``identify --physical``) plus its :class:`JointFriction`: tau = M ddq + c + g + tau_f(dq).

Joint friction per joint j: tau_f,j = Fv_j dq_j + Fc_j sign(dq_j) + Fo_j (viscous N m s/rad,
Coulomb N m, constant offset N m). In a robot YAML it is the optional mapping::

    friction: {viscous: [..n], coulomb: [..n], offset: [..n]}

and in a URDF each joint's ``<dynamics damping="Fv" friction="Fc"/>`` (the standard elements)
with the offset as ``<torque_offset value="Fo"/>`` (ignored by other URDF readers).
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import yaml

from ..errors import PayloadEstimationError
from ..model.description import RobotDescription
from ..model.dynamics import RigidBodyDynamics


class TorqueModelError(PayloadEstimationError):
    """A torque model cannot be read or does not fit the robot; the message names the file."""


@dataclass(frozen=True)
class JointFriction:
    """Per-joint friction (n,) each: viscous (N m s/rad), Coulomb (N m), offset (N m)."""

    viscous: np.ndarray
    coulomb: np.ndarray
    offset: np.ndarray

    @classmethod
    def zeros(cls, n: int) -> JointFriction:
        return cls(np.zeros(n), np.zeros(n), np.zeros(n))

    @property
    def n(self) -> int:
        return int(np.asarray(self.viscous).size)

    def torque(self, dq: np.ndarray) -> np.ndarray:
        """tau_f (N x n or n,) at velocities ``dq`` (rad/s)."""
        dq = np.asarray(dq, float)
        return self.viscous * dq + self.coulomb * np.sign(dq) + self.offset

    def any(self) -> bool:
        return bool(np.any(self.viscous) or np.any(self.coulomb) or np.any(self.offset))

    def to_dict(self) -> dict:
        return {k: [float(v) for v in getattr(self, k)] for k in ("viscous", "coulomb", "offset")}

    @classmethod
    def from_dict(cls, d, n: int, where: str) -> JointFriction:
        if not isinstance(d, dict):
            raise TorqueModelError(f"{where}: 'friction' must be a mapping with viscous, coulomb, offset lists")
        unknown = set(d) - {"viscous", "coulomb", "offset"}
        if unknown:
            raise TorqueModelError(f"{where}: friction has unknown key(s) {', '.join(sorted(unknown))} "
                                   "(use viscous, coulomb, offset)")
        out = {}
        for k in ("viscous", "coulomb", "offset"):
            v = np.asarray(d.get(k, [0.0] * n), float)
            if v.shape != (n,) or not np.all(np.isfinite(v)):
                raise TorqueModelError(f"{where}: friction.{k} must be {n} finite numbers, got {d.get(k)!r}")
            out[k] = v
        return cls(**out)


def read_friction(path: str | Path, desc: RobotDescription) -> JointFriction:
    """The joint friction stored in a robot YAML (``friction`` key) or URDF (``<dynamics>``,
    ``<torque_offset>`` of the description's joints, by name); zeros when there is none."""
    path = Path(path)
    n = desc.n
    text = path.read_text()
    if path.suffix.lower() in (".yaml", ".yml"):
        doc = yaml.safe_load(text)
        if isinstance(doc, dict) and "friction" in doc:
            return JointFriction.from_dict(doc["friction"], n, str(path))
        return JointFriction.zeros(n)
    try:
        root = ET.fromstring(text)
    except ET.ParseError as exc:
        raise TorqueModelError(f"{path}: not valid XML: {exc}") from exc
    joints = {j.get("name"): j for j in root.findall("joint")}
    fr = JointFriction.zeros(n)
    for k, name in enumerate(desc.joint_names):
        j = joints.get(name)
        if j is None:
            continue
        dyn = j.find("dynamics")
        off = j.find("torque_offset")
        try:
            if dyn is not None:
                fr.viscous[k] = float(dyn.get("damping", 0.0))
                fr.coulomb[k] = float(dyn.get("friction", 0.0))
            if off is not None:
                fr.offset[k] = float(off.get("value", 0.0))
        except ValueError as exc:
            raise TorqueModelError(f"{path}: joint {name}: friction values are not numbers ({exc})") from None
    return fr


def urdf_with_friction(urdf: str, joint_names, friction: JointFriction) -> str:
    """``urdf`` text with each named joint's ``<dynamics damping friction>`` and ``<torque_offset>`` set."""
    root = ET.fromstring(urdf)
    joints = {j.get("name"): j for j in root.findall("joint")}
    for k, name in enumerate(joint_names):
        j = joints[name]
        for tag in ("dynamics", "torque_offset"):
            for old in j.findall(tag):
                j.remove(old)
        ET.SubElement(j, "dynamics", damping=f"{friction.viscous[k]:.17g}", friction=f"{friction.coulomb[k]:.17g}")
        if friction.offset[k]:
            ET.SubElement(j, "torque_offset", value=f"{friction.offset[k]:.17g}")
    return '<?xml version="1.0"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


class DescriptionModel:
    """Torque prediction by inverse dynamics of a (physically consistent) description plus joint
    friction -- the same interface as :class:`IdentifiedModel` for :func:`validate_model`."""

    kind = "full"

    def __init__(self, desc: RobotDescription, friction: JointFriction | None = None, label: str = ""):
        self.desc = desc
        self.friction = friction if friction is not None else JointFriction.zeros(desc.n)
        self.label = label or desc.name
        self._dyn = RigidBodyDynamics(desc)
        self.info: dict = {}

    def check_robot(self, desc: RobotDescription) -> None:
        if desc.n != self.desc.n:
            raise TorqueModelError(f"{self.label}: robot has {self.desc.n} joints, '{desc.name}' has {desc.n}")

    def predict(self, dyn, q, dq=None, ddq=None) -> np.ndarray:
        """Joint torques (N x n, N m); ``dyn`` is ignored (the model's own description is used)."""
        q = np.atleast_2d(np.asarray(q, float))
        if dq is None or ddq is None:
            raise TorqueModelError(f"{self.label}: predicting torques of a motion needs velocities and accelerations")
        dq, ddq = np.atleast_2d(dq), np.atleast_2d(ddq)
        rigid = np.array([self._dyn.inverse_dynamics(q[k], dq[k], ddq[k]) for k in range(q.shape[0])])
        return rigid + self.friction.torque(dq)


def load_torque_model(spec: str, desc: RobotDescription):
    """``"nominal"`` (``desc`` itself, no friction), a PARAMS.yaml (identified coefficients) or a
    robot YAML/URDF (its links and its friction)."""
    from ..model.robot_file import load_robot
    from .identified_model import IdentifiedModel

    if spec == "nominal":
        return DescriptionModel(desc, label="nominal")
    p = Path(spec)
    if not p.exists():
        raise TorqueModelError(f"{p}: no such parameter or robot file")
    doc = None
    if p.suffix.lower() in (".yaml", ".yml"):
        try:
            doc = yaml.safe_load(p.read_text())
        except yaml.YAMLError as exc:
            raise TorqueModelError(f"{p}: not valid YAML: {exc}") from exc
    if isinstance(doc, dict) and "format" in doc:
        return IdentifiedModel.from_dict(doc, str(p))
    other = load_robot(p)
    return DescriptionModel(other, read_friction(p, other), label=str(p))


__all__ = [
    "DescriptionModel",
    "JointFriction",
    "TorqueModelError",
    "load_torque_model",
    "read_friction",
    "urdf_with_friction",
]
