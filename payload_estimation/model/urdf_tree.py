"""URDF text as a checked kinematic tree, and the choice of the serial chain in it (no ROS needed).

Only kinematics and inertia are read: ``<link>`` with its ``<inertial>``, ``<joint>`` with its type,
``<parent>``, ``<child>``, ``<origin>``, ``<axis>``, ``<limit>`` and ``<mimic>``. Everything else
(visuals, collisions, meshes and ``package://`` URIs, ``<ros2_control>``, ``<gazebo>``,
``<transmission>``, ``<dynamics>``) is ignored. A malformed element raises
:class:`RobotDescriptionError` naming the source and the element; xacro input gets one line saying
how to expand it. Text is xacro when it *uses* xacro (an element in the xacro namespace, ``${...}``
or ``$(...)`` outside comments), not when its root only declares ``xmlns:xacro`` (older xacro
versions kept that declaration in their expanded output, and many published URDFs still carry it).

Chain joints are ``revolute`` and ``continuous`` joints that neither mimic another joint nor are
mimicked (a mimicked joint drives a coupled mechanism: a gripper). With no ``tip_link`` the chain
ends at the single link below ``base_link`` that is moved by a chain joint and has no chain joint
below it, extended through fixed joints as long as there is exactly one fixed child; branches made
only of fixed joints or of non-chain joints (gripper fingers) do not count.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field

import numpy as np

from .description import RobotDescriptionError
from .parameters import BodyInertia, sym_from_vec6
from .transforms import rot_axis, xyz_rpy

JOINT_TYPES = ("revolute", "continuous", "prismatic", "fixed", "floating", "planar")
_XACRO_USE = re.compile(r"<xacro:|\$\{|\$\(")  # xacro elements (usual prefix) and substitutions
_XACRO_NS = ("http://www.ros.org/wiki/xacro", "http://ros.org/wiki/xacro")
_COMMENT = re.compile(r"<!--.*?-->", re.S)
TIP_HINT = ("set tip_link (--tip-link on the command line, the tip_link node parameter, kinematics.tip_link "
            "in a robot YAML)")
BASE_HINT = ("set base_link (--base-link on the command line, the base_link node parameter, kinematics.base_link "
             "in a robot YAML)")


def xacro_hint(source: str) -> str:
    """The one line telling how to expand a xacro description into URDF."""
    return (f"{source} is xacro, not URDF: expand it first, e.g. `xacro {source} > robot.urdf` "
            f"(ROS) or `pip install xacrodoc && xacrodoc {source} -o robot.urdf`, then load robot.urdf")


@dataclass(frozen=True)
class UrdfJoint:
    """One ``<joint>``: ``origin`` places the joint frame in the parent link frame (4x4), ``axis`` is
    a unit vector in the joint frame, ``limit`` = (lower, upper, velocity, effort) or None."""

    name: str
    type: str
    parent: str
    child: str
    origin: np.ndarray
    axis: np.ndarray
    limit: tuple[float, float, float, float] | None
    mimic: str | None = None
    multiplier: float = 1.0
    offset: float = 0.0

    def motion(self, q: float) -> np.ndarray:
        """Pose (4x4) of the child link frame in the joint frame at position ``q`` (rad or m)."""
        if self.type in ("revolute", "continuous"):
            return rot_axis(self.axis, q)
        out = np.eye(4)
        if self.type == "prismatic":
            out[:3, 3] = self.axis * q
        return out


@dataclass(frozen=True)
class UrdfTree:
    """The links (inertial in the link frame or None) and joints of one URDF, indexed both ways."""

    name: str
    source: str
    links: dict[str, BodyInertia | None]
    joints: dict[str, UrdfJoint]
    parent_joint: dict[str, UrdfJoint] = field(default_factory=dict)
    children: dict[str, list[UrdfJoint]] = field(default_factory=dict)

    @property
    def roots(self) -> list[str]:
        return [lk for lk in self.links if lk not in self.parent_joint]

    @property
    def mimicked(self) -> set[str]:
        return {j.mimic for j in self.joints.values() if j.mimic}

    def is_chain_joint(self, j: UrdfJoint) -> bool:
        return j.type in ("revolute", "continuous") and j.mimic is None and j.name not in self.mimicked

    def below(self, link: str) -> list[str]:
        """``link`` and every link below it, parents before children."""
        out, stack = [], [link]
        while stack:
            lk = stack.pop()
            out.append(lk)
            stack.extend(j.child for j in reversed(self.children.get(lk, [])))
        return out

    def path(self, base: str, tip: str) -> list[UrdfJoint]:
        """Joints from ``base`` down to ``tip`` (raises unless ``tip`` is below ``base``)."""
        joints, lk = [], tip
        while lk != base:
            if lk not in self.parent_joint:
                raise RobotDescriptionError(f"{self.source}: tip_link '{tip}' is not below base_link '{base}'")
            joints.append(self.parent_joint[lk])
            lk = joints[-1].parent
        return joints[::-1]


def parse_urdf(text: str, source: str = "URDF") -> UrdfTree:
    """Parse and check URDF ``text``; ``source`` (file path or topic) names it in every error."""
    if not isinstance(text, str) or not text.strip():
        raise RobotDescriptionError(f"{source}: the robot description is empty")
    if _XACRO_USE.search(_COMMENT.sub("", text)):
        raise RobotDescriptionError(xacro_hint(source))
    try:
        root = ET.fromstring(text)
    except ET.ParseError as exc:
        raise RobotDescriptionError(f"{source}: URDF is not valid XML: {exc}") from exc
    if any(el.tag.startswith(tuple("{" + ns + "}" for ns in _XACRO_NS)) for el in root.iter()):
        raise RobotDescriptionError(xacro_hint(source))  # xacro elements under another prefix
    if root.tag != "robot":
        raise RobotDescriptionError(f"{source}: the root element is <{root.tag}>, expected <robot> (URDF)")
    links: dict[str, BodyInertia | None] = {}
    for el in root.findall("link"):
        name = _name(el, "link", source)
        if name in links:
            raise RobotDescriptionError(f"{source}: <link name='{name}'> is defined twice")
        links[name] = _inertial(el, f"{source}: <link name='{name}'>")
    if not links:
        raise RobotDescriptionError(f"{source}: no <link> element")
    joints: dict[str, UrdfJoint] = {}
    parent_joint: dict[str, UrdfJoint] = {}
    children: dict[str, list[UrdfJoint]] = {}
    for el in root.findall("joint"):
        j = _joint(el, source, links)
        if j.name in joints:
            raise RobotDescriptionError(f"{source}: <joint name='{j.name}'> is defined twice")
        if j.child in parent_joint:
            raise RobotDescriptionError(f"{source}: link '{j.child}' is the child of two joints "
                                        f"('{parent_joint[j.child].name}', '{j.name}')")
        joints[j.name] = j
        parent_joint[j.child] = j
        children.setdefault(j.parent, []).append(j)
    for j in joints.values():
        if j.mimic is not None and j.mimic not in joints:
            raise RobotDescriptionError(f"{source}: <joint name='{j.name}'> <mimic joint='{j.mimic}'>: no such joint")
    tree = UrdfTree(root.get("name") or "robot", source, links, joints, parent_joint, children)
    if not tree.roots:
        raise RobotDescriptionError(f"{source}: the joints form a cycle (no root link)")
    return tree


def select_chain(tree: UrdfTree, base_link: str | None, tip_link: str | None) -> tuple[str, str, list[UrdfJoint]]:
    """(base_link, tip_link, joints from base to tip) with the defaults of the module docstring."""
    src = tree.source
    for which, lk in (("base_link", base_link), ("tip_link", tip_link)):
        if lk is not None and lk not in tree.links:
            raise RobotDescriptionError(f"{src}: {which} '{lk}' is not a link of the description "
                                        f"(links: {', '.join(tree.links)})")
    if base_link is None:
        roots = tree.roots
        if len(roots) != 1:
            raise RobotDescriptionError(f"{src}: several root links {roots}; {BASE_HINT}")
        base_link = roots[0]
    if tip_link is None:
        ends = _moving_ends(tree, base_link)
        if not ends:
            raise RobotDescriptionError(f"{src}: no revolute or continuous joint below base_link '{base_link}'")
        tips = [_extend_fixed(tree, lk) for lk in ends]
        if len(tips) > 1:
            raise RobotDescriptionError(
                f"{src}: the chain below '{base_link}' branches; candidate tip links: {', '.join(tips)}; {TIP_HINT}")
        tip_link = tips[0]
    return base_link, tip_link, tree.path(base_link, tip_link)


def _moving_ends(tree: UrdfTree, base: str) -> list[str]:
    """Links below ``base`` moved by a chain joint with no chain joint below them."""
    has_chain_below: dict[str, bool] = {}
    for lk in reversed(tree.below(base)):
        has_chain_below[lk] = any(tree.is_chain_joint(j) or has_chain_below[j.child] for j in tree.children.get(lk, []))
    return [lk for lk in tree.below(base) if lk != base and tree.is_chain_joint(tree.parent_joint[lk])
            and not has_chain_below[lk]]


def _extend_fixed(tree: UrdfTree, link: str) -> str:
    while True:
        fixed = [j for j in tree.children.get(link, []) if j.type == "fixed"]
        if len(fixed) != 1:
            return link
        link = fixed[0].child


# --- element parsing ------------------------------------------------------------------------------
def _name(el, tag: str, source: str) -> str:
    name = el.get("name")
    if not name:
        raise RobotDescriptionError(f"{source}: a <{tag}> element has no name attribute")
    return name


def _floats(text: str | None, count: int, where: str) -> np.ndarray:
    try:
        vals = np.array([float(x) for x in (text or "").split()])
    except ValueError as exc:
        raise RobotDescriptionError(f"{where}: not numbers: {text!r}") from exc
    if vals.size != count or not np.all(np.isfinite(vals)):
        raise RobotDescriptionError(f"{where}: expected {count} finite numbers, got {text!r}")
    return vals


def _number(el, attr: str, where: str, default: float | None = None) -> float:
    text = el.get(attr)
    if text is None:
        if default is None:
            raise RobotDescriptionError(f"{where}: missing attribute {attr}")
        return default
    try:
        value = float(text)
    except ValueError as exc:
        raise RobotDescriptionError(f"{where}: {attr}={text!r} is not a number") from exc
    if np.isnan(value):
        raise RobotDescriptionError(f"{where}: {attr} is NaN")
    return value


def _origin(el, where: str) -> np.ndarray:
    o = el.find("origin")
    if o is None:
        return np.eye(4)
    xyz = _floats(o.get("xyz", "0 0 0"), 3, f"{where} <origin xyz>")
    rpy = _floats(o.get("rpy", "0 0 0"), 3, f"{where} <origin rpy>")
    return xyz_rpy(xyz, rpy)


def _inertial(link, where: str) -> BodyInertia | None:
    inertial = link.find("inertial")
    if inertial is None:
        return None
    mass_el = inertial.find("mass")
    if mass_el is None:
        raise RobotDescriptionError(f"{where} <inertial>: no <mass>")
    mass = _number(mass_el, "value", f"{where} <mass>")
    if not (np.isfinite(mass) and mass >= 0):
        raise RobotDescriptionError(f"{where} <mass value='{mass_el.get('value')}'>: must be a finite number >= 0")
    i = inertial.find("inertia")
    if i is None:
        if mass > 0:
            raise RobotDescriptionError(f"{where} <inertial>: no <inertia>")
        vals = [0.0] * 6
    else:
        vals = [_number(i, k, f"{where} <inertia>", 0.0) for k in ("ixx", "ixy", "ixz", "iyy", "iyz", "izz")]
        if not np.all(np.isfinite(vals)):
            raise RobotDescriptionError(f"{where} <inertia>: not finite")
    t = _origin(inertial, f"{where} <inertial>")
    # Inertia given about the CoM in the <inertial> frame; express it in link-frame axes.
    r = t[:3, :3]
    return BodyInertia(mass, t[:3, 3], r @ sym_from_vec6(vals) @ r.T)


def _joint(el, source: str, links: dict) -> UrdfJoint:
    name = _name(el, "joint", source)
    where = f"{source}: <joint name='{name}'>"
    jtype = el.get("type")
    if jtype not in JOINT_TYPES:
        raise RobotDescriptionError(f"{where}: type={jtype!r} is not a URDF joint type ({', '.join(JOINT_TYPES)})")
    ends = []
    for tag in ("parent", "child"):
        e = el.find(tag)
        lk = e.get("link") if e is not None else None
        if not lk:
            raise RobotDescriptionError(f"{where}: no <{tag} link='...'>")
        if lk not in links:
            raise RobotDescriptionError(f"{where}: <{tag} link='{lk}'> is not a <link> of the description")
        ends.append(lk)
    axis = np.array([1.0, 0.0, 0.0])
    axis_el = el.find("axis")
    if axis_el is not None:
        axis = _floats(axis_el.get("xyz", "1 0 0"), 3, f"{where} <axis xyz>")
    if jtype in ("revolute", "continuous", "prismatic"):
        norm = np.linalg.norm(axis)
        if norm == 0:
            raise RobotDescriptionError(f"{where} <axis xyz>: zero vector")
        axis = axis / norm
    limit = None
    lim = el.find("limit")
    if lim is not None:
        w = f"{where} <limit>"
        limit = (_number(lim, "lower", w, 0.0), _number(lim, "upper", w, 0.0),
                 _number(lim, "velocity", w, np.inf), _number(lim, "effort", w, np.inf))
    mimic, mult, off = None, 1.0, 0.0
    m = el.find("mimic")
    if m is not None:
        mimic = m.get("joint")
        if not mimic:
            raise RobotDescriptionError(f"{where} <mimic>: no joint attribute")
        mult = _number(m, "multiplier", f"{where} <mimic>", 1.0)
        off = _number(m, "offset", f"{where} <mimic>", 0.0)
    return UrdfJoint(name, jtype, ends[0], ends[1], _origin(el, where), axis, limit, mimic, mult, off)
