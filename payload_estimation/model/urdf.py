"""Read a serial revolute chain from URDF text (no ROS needed) and write one back.

Fixed joints are folded into their neighbours: before the first revolute joint into its placement,
between revolute joints into the next placement (their bodies merged into the moving link), after
the last one into the flange. Continuous joints count as revolute with +-inf limits replaced by
+-pi*2 (a warning-free, bounded choice).
"""

from __future__ import annotations

import xml.etree.ElementTree as ET

import numpy as np

from .description import JointLimits, JointSpec, RobotDescription, RobotDescriptionError
from .parameters import BodyInertia, sym_from_vec6
from .transforms import invert, xyz_rpy


def _floats(text: str | None, count: int, where: str) -> np.ndarray:
    try:
        vals = np.array([float(x) for x in (text or "").split()])
    except ValueError as exc:
        raise RobotDescriptionError(f"URDF {where}: not numbers: {text!r}") from exc
    if vals.size != count:
        raise RobotDescriptionError(f"URDF {where}: expected {count} numbers, got {text!r}")
    return vals


def _origin(elem, where: str) -> np.ndarray:
    o = elem.find("origin") if elem is not None else None
    if o is None:
        return np.eye(4)
    xyz = _floats(o.get("xyz", "0 0 0"), 3, f"{where} origin xyz")
    rpy = _floats(o.get("rpy", "0 0 0"), 3, f"{where} origin rpy")
    return xyz_rpy(xyz, rpy)


def _inertial(link) -> BodyInertia | None:
    inertial = link.find("inertial")
    if inertial is None:
        return None
    name = link.get("name")
    mass_el = inertial.find("mass")
    if mass_el is None:
        raise RobotDescriptionError(f"URDF link '{name}': <inertial> without <mass>")
    mass = float(mass_el.get("value"))
    i = inertial.find("inertia")
    if i is None:
        raise RobotDescriptionError(f"URDF link '{name}': <inertial> without <inertia>")
    vals = [float(i.get(k, "0")) for k in ("ixx", "ixy", "ixz", "iyy", "iyz", "izz")]
    t = _origin(inertial, f"link '{name}' inertial")
    # Inertia given about the CoM in the <inertial> frame; express it in link-frame axes.
    r = t[:3, :3]
    return BodyInertia(mass, t[:3, 3], r @ sym_from_vec6(vals) @ r.T)


def _merge(a: BodyInertia | None, b: BodyInertia | None) -> BodyInertia | None:
    if a is None:
        return b
    if b is None:
        return a
    return a.plus(b)


def load_urdf(text: str, base_link: str | None = None, tip_link: str | None = None,
              name: str | None = None) -> RobotDescription:
    """Description of the revolute chain from ``base_link`` to ``tip_link`` in URDF ``text``.

    Without ``base_link``/``tip_link`` the root link and the single leaf of the tree are used.
    Gravity defaults to -9.81 m/s^2 along z of ``base_link``.
    """
    try:
        root = ET.fromstring(text)
    except ET.ParseError as exc:
        raise RobotDescriptionError(f"URDF is not valid XML: {exc}") from exc
    if root.tag != "robot":
        raise RobotDescriptionError(f"URDF root element is <{root.tag}>, expected <robot>")
    links = {lk.get("name"): lk for lk in root.findall("link")}
    joints_by_child = {}
    children = {}
    for j in root.findall("joint"):
        parent = j.find("parent").get("link")
        child = j.find("child").get("link")
        joints_by_child[child] = j
        children.setdefault(parent, []).append(child)
    if base_link is None:
        roots = [lk for lk in links if lk not in joints_by_child]
        if len(roots) != 1:
            raise RobotDescriptionError(f"URDF: cannot choose a base link among {roots}; set base_link")
        base_link = roots[0]
    if tip_link is None:
        leaves = [lk for lk in links if lk not in children]
        if len(leaves) != 1:
            raise RobotDescriptionError(f"URDF: several leaf links {leaves}; set tip_link")
        tip_link = leaves[0]
    for which, lk in (("base_link", base_link), ("tip_link", tip_link)):
        if lk not in links:
            raise RobotDescriptionError(f"URDF: {which} '{lk}' is not a link of the file")
    chain = []
    lk = tip_link
    while lk != base_link:
        if lk not in joints_by_child:
            raise RobotDescriptionError(f"URDF: tip_link '{tip_link}' is not below base_link '{base_link}'")
        j = joints_by_child[lk]
        chain.append(j)
        lk = j.find("parent").get("link")
    chain.reverse()

    specs: list[JointSpec] = []
    bodies: list[BodyInertia | None] = []
    lows, highs, vels, efforts = [], [], [], []
    pending = np.eye(4)  # fixed transform accumulated since the last moving link frame
    for j in chain:
        jname = j.get("name")
        jtype = j.get("type")
        origin = _origin(j, f"joint '{jname}'")
        child_body = _inertial(links[j.find("child").get("link")])
        if jtype == "fixed":
            pending = pending @ origin
            if specs and child_body is not None:
                bodies[-1] = _merge(bodies[-1], child_body.transformed(pending))
            continue
        if jtype not in ("revolute", "continuous"):
            raise RobotDescriptionError(f"URDF joint '{jname}': type '{jtype}' is not supported (revolute only)")
        axis_el = j.find("axis")
        axis = _floats(axis_el.get("xyz"), 3, f"joint '{jname}' axis") if axis_el is not None else np.array([1.0, 0, 0])
        if np.linalg.norm(axis) == 0:
            raise RobotDescriptionError(f"URDF joint '{jname}': zero axis")
        specs.append(JointSpec(jname, pending @ origin, axis / np.linalg.norm(axis), np.eye(4)))
        bodies.append(child_body)
        pending = np.eye(4)
        lim = j.find("limit")
        if jtype == "continuous" or lim is None:
            lo, hi, vel, eff = -2 * np.pi, 2 * np.pi, np.inf, np.inf
            if lim is not None:
                vel, eff = float(lim.get("velocity", "inf")), float(lim.get("effort", "inf"))
        else:
            lo, hi = float(lim.get("lower", "0")), float(lim.get("upper", "0"))
            vel, eff = float(lim.get("velocity", "inf")), float(lim.get("effort", "inf"))
        lows.append(lo)
        highs.append(hi)
        vels.append(vel)
        efforts.append(eff)
    if not specs:
        raise RobotDescriptionError(f"URDF: no revolute joint between '{base_link}' and '{tip_link}'")
    for k, b in enumerate(bodies):
        if b is None:
            raise RobotDescriptionError(f"URDF: the link moved by joint '{specs[k].name}' has no <inertial>")
    return RobotDescription(
        name=name or root.get("name", "robot"),
        joints=tuple(specs),
        links=tuple(bodies),
        limits=JointLimits(np.array([lows, highs]).T, np.array(vels), np.array(efforts)),
        flange=pending,
        convention="urdf",
    )


def to_urdf(desc: RobotDescription) -> str:
    """URDF text of ``desc``: link frames as URDF link frames, inertias at their CoM."""
    lines = ['<?xml version="1.0"?>', f'<robot name="{desc.name}">', '  <link name="base_link"/>']
    prev_post = np.eye(4)
    parent = "base_link"
    for k, (joint, body) in enumerate(zip(desc.joints, desc.links)):
        # The URDF joint frame is the link frame, so the axis is expressed after post.
        origin = prev_post @ joint.pre
        child = f"link_{k + 1}"
        lines.append(_link_xml(child, body.transformed(joint.post)))
        lines.append(_joint_xml(joint.name, "revolute", parent, child, origin, joint.axis,
                                desc.limits.position[k], desc.limits.velocity[k], desc.limits.effort[k]))
        prev_post = joint.post
        parent = child
    lines.append('  <link name="flange"/>')
    lines.append(_joint_xml("flange_joint", "fixed", parent, "flange", prev_post @ desc.flange))
    lines.append("</robot>")
    return "\n".join(lines) + "\n"


def _rpy(r: np.ndarray) -> tuple[float, float, float]:
    pitch = np.arcsin(-np.clip(r[2, 0], -1, 1))
    if abs(np.cos(pitch)) > 1e-9:
        roll = np.arctan2(r[2, 1], r[2, 2])
        yaw = np.arctan2(r[1, 0], r[0, 0])
    else:
        roll = np.arctan2(-r[1, 2], r[1, 1])
        yaw = 0.0
    return roll, pitch, yaw


def _fmt(v) -> str:
    return " ".join(f"{x:.17g}" for x in v)


def _origin_xml(t: np.ndarray) -> str:
    return f'<origin xyz="{_fmt(t[:3, 3])}" rpy="{_fmt(_rpy(t[:3, :3]))}"/>'


def _link_xml(name: str, body: BodyInertia) -> str:
    # body is expressed in the joint frame of the URDF link (after undoing post below).
    i = body.inertia_com
    return (f'  <link name="{name}"><inertial><origin xyz="{_fmt(body.com)}" rpy="0 0 0"/>'
            f'<mass value="{body.mass:.17g}"/><inertia ixx="{i[0, 0]:.17g}" ixy="{i[0, 1]:.17g}" '
            f'ixz="{i[0, 2]:.17g}" iyy="{i[1, 1]:.17g}" iyz="{i[1, 2]:.17g}" izz="{i[2, 2]:.17g}"/>'
            "</inertial></link>")


def _joint_xml(name, jtype, parent, child, origin, axis=None, pos=None, vel=None, eff=None) -> str:
    s = f'  <joint name="{name}" type="{jtype}"><parent link="{parent}"/><child link="{child}"/>{_origin_xml(origin)}'
    if axis is not None:
        s += (f'<axis xyz="{_fmt(axis)}"/><limit lower="{pos[0]:.17g}" upper="{pos[1]:.17g}" '
              f'velocity="{vel:.17g}" effort="{eff:.17g}"/>')
    return s + "</joint>"


__all__ = ["load_urdf", "to_urdf", "invert"]
