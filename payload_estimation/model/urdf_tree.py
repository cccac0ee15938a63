"""URDF text as a checked kinematic tree, and the choice of the serial chain in it (no ROS needed).

Only kinematics and inertia are read: ``<link>`` with its ``<inertial>``, ``<joint>`` with its type,
``<parent>``, ``<child>``, ``<origin>``, ``<axis>``, ``<limit>`` and ``<mimic>``. Everything else
(visuals, collisions, meshes and ``package://`` URIs, ``<ros2_control>``, ``<gazebo>``,
``<transmission>``, ``<dynamics>``) is ignored. A malformed element raises
:class:`RobotDescriptionError` naming the source and the element; xacro input gets one line saying
how to expand it. Text is xacro when it *uses* xacro (an element in the xacro namespace, or ``${...}``
/ ``$(...)`` outside comments and outside the ignored ``<ros2_control>``, ``<gazebo>`` and
``<transmission>`` blocks, where expanded vendor files keep such text: Kinova's ``${-2*pi}``), not
when its root only declares ``xmlns:xacro`` (older xacro versions kept that declaration in their
expanded output, and many published URDFs still carry it).

CAD-rounded joint placements are read as the vendor meant them (:func:`snap_written`): a joint
``<origin rpy>`` angle that is the written rounding of a multiple of pi/2 (``1.5708``, ``3.1416``,
``1.57``) or within :data:`RESIDUE` of one (``5.5511E-17``), an ``<axis>`` component likewise of 0 or
+-1, and an ``<origin xyz>`` residue below :data:`RESIDUE` m become exact; :attr:`UrdfTree.snapped`
lists them. Otherwise a 3.7e-6 rad rounding couples links in the symbolic coefficients (16 gravity
coefficients instead of 12 on the Kinova Gen3) and leaves the base regressor singular.

Chain joints are ``revolute`` and ``continuous`` joints that neither mimic another joint nor are
mimicked (a mimicked joint drives a coupled mechanism: a gripper). With no ``tip_link``
(:func:`select_chain`) the chain ends at the single link below ``base_link`` that is moved by a
chain joint and has no chain joint below it (branches made only of fixed joints or of non-chain
joints do not count), extended through fixed joints as long as there is one fixed branch to follow:
collision-only side links (``<collision>`` without ``<visual>`` or ``<inertial>``, e.g. franka_ros's
``*_sc`` self-collision links) are not branches, and of several branches the one carrying a tool
(joints off the chain: a gripper) is followed. Several equal branches stop the extension there, said
in the note of the choice.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from typing import NamedTuple

import numpy as np

from .description import RobotDescriptionError
from .parameters import BodyInertia, sym_from_vec6
from .transforms import rot_axis, xyz_rpy

JOINT_TYPES = ("revolute", "continuous", "prismatic", "fixed", "floating", "planar")
_XACRO_ELEMENT = re.compile(r"<xacro:")  # xacro elements under the usual prefix
_XACRO_SUBSTITUTION = re.compile(r"\$\{|\$\(")
_XACRO_NS = ("http://www.ros.org/wiki/xacro", "http://ros.org/wiki/xacro")
_COMMENT = re.compile(r"<!--.*?-->", re.S)
# blocks this reader ignores, where expanded vendor URDFs keep ${...} text (a ros2_control <param>: Kinova's ${-2*pi})
_IGNORED_BLOCK = re.compile(r"<(ros2_control|gazebo|transmission)\b[^>]*(?<!/)>.*?</\1\s*>", re.S)

RESIDUE = 1e-6
"""rad (angles, axis components) or m (xyz): a joint placement this close to its exact value is that value
whatever its notation (``5.5511E-17``, ``1.5707963``): far below anything a drawing or a calibration resolves."""

ROUNDING_LIMIT = 5e-3
"""rad: the largest correction :func:`snap_written` makes for a rounded angle; it admits every 2-decimal
rounding of a multiple of pi/2 up to 2 pi (``3.14``: 1.6e-3, ``6.28``: 3.2e-3 rad) and no 1-decimal one
(``1.6``: 2.9e-2 rad)."""
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
class Snap:
    """One joint-placement number read as the exact value it rounds: ``where`` e.g. ``rpy[0]``, ``axis[2]``."""

    joint: str
    where: str
    written: str
    value: float

    @property
    def correction(self) -> float:
        return abs(self.value - float(self.written))


@dataclass(frozen=True)
class UrdfTree:
    """The links (inertial in the link frame or None) and joints of one URDF, indexed both ways;
    ``collision_only``: links with ``<collision>`` but neither ``<visual>`` nor ``<inertial>``;
    ``snapped``: the joint-placement numbers read as exact values (module docstring)."""

    name: str
    source: str
    links: dict[str, BodyInertia | None]
    joints: dict[str, UrdfJoint]
    parent_joint: dict[str, UrdfJoint] = field(default_factory=dict)
    children: dict[str, list[UrdfJoint]] = field(default_factory=dict)
    collision_only: frozenset[str] = frozenset()
    snapped: tuple[Snap, ...] = ()

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
    if is_xacro_text(text):
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
    collision_only = set()
    for el in root.findall("link"):
        name = _name(el, "link", source)
        if name in links:
            raise RobotDescriptionError(f"{source}: <link name='{name}'> is defined twice")
        links[name] = _inertial(el, f"{source}: <link name='{name}'>")
        if el.find("collision") is not None and el.find("visual") is None and el.find("inertial") is None:
            collision_only.add(name)
    if not links:
        raise RobotDescriptionError(f"{source}: no <link> element")
    joints: dict[str, UrdfJoint] = {}
    parent_joint: dict[str, UrdfJoint] = {}
    children: dict[str, list[UrdfJoint]] = {}
    snapped: list[Snap] = []
    for el in root.findall("joint"):
        j = _joint(el, source, links, snapped)
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
    tree = UrdfTree(root.get("name") or "robot", source, links, joints, parent_joint, children,
                    frozenset(collision_only), tuple(snapped))
    if not tree.roots:
        raise RobotDescriptionError(f"{source}: the joints form a cycle (no root link)")
    return tree


def is_xacro_text(text: str) -> bool:
    """True if ``text`` uses xacro: a ``<xacro:`` element, or ``${`` / ``$(`` outside comments and outside
    the ``<ros2_control>``, ``<gazebo>`` and ``<transmission>`` blocks this reader ignores."""
    text = _COMMENT.sub("", text)
    return bool(_XACRO_ELEMENT.search(text) or _XACRO_SUBSTITUTION.search(_IGNORED_BLOCK.sub("", text)))


def snap_written(text: str, step: float, largest: float = ROUNDING_LIMIT) -> float | None:
    """The multiple of ``step`` that the number written as ``text`` means, or None when it means itself.

    It means a multiple m when it is within :data:`RESIDUE` of m (float residues of a CAD export,
    ``-5.5511E-17``), or when it is m rounded or cut to the decimals written, i.e. within one unit of its
    last written decimal (``1.5708``, ``1.57`` for pi/2; ``3.1416``, ``3.14`` for pi) and within
    ``largest``. A value written more precisely than that stays as written (``1.5700``, a calibrated
    ``1.570022855``); a value equal to its multiple returns None (nothing to snap).
    """
    value = float(text)
    target = round(value / step) * step + 0.0
    off = abs(value - target)
    if off == 0.0:
        return None
    if off < RESIDUE:
        return target
    try:
        unit = 10.0 ** Decimal(text.strip()).as_tuple().exponent  # one unit of the last written decimal
    except (InvalidOperation, TypeError, ValueError):
        return None
    return target if off < min(unit, largest) else None


class Chain(NamedTuple):
    """The chosen chain: its joints from ``base`` to ``tip``; ``note`` = (level, text) saying how a default tip
    was chosen and why, None when ``tip_link`` was given."""

    base: str
    tip: str
    joints: list[UrdfJoint]
    note: tuple[str, str] | None = None


def select_chain(tree: UrdfTree, base_link: str | None, tip_link: str | None) -> Chain:
    """The chain from ``base_link`` to ``tip_link`` with the defaults of the module docstring, and the note
    saying which tip the default chose and why (:class:`Chain`)."""
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
    if tip_link is not None:
        return Chain(base_link, tip_link, tree.path(base_link, tip_link))
    ends = _moving_ends(tree, base_link)
    if not ends:
        raise RobotDescriptionError(f"{src}: no revolute or continuous joint below base_link '{base_link}'")
    tips = [_extend_fixed(tree, lk) for lk in ends]
    if len(tips) > 1:
        raise RobotDescriptionError(
            f"{src}: the chain below '{base_link}' branches; candidate tip links: "
            f"{', '.join(t.tip for t in tips)}; {TIP_HINT}")
    return Chain(base_link, tips[0].tip, tree.path(base_link, tips[0].tip), tips[0].note(tree))


def _moving_ends(tree: UrdfTree, base: str) -> list[str]:
    """Links below ``base`` moved by a chain joint with no chain joint below them."""
    has_chain_below: dict[str, bool] = {}
    for lk in reversed(tree.below(base)):
        has_chain_below[lk] = any(tree.is_chain_joint(j) or has_chain_below[j.child] for j in tree.children.get(lk, []))
    return [lk for lk in tree.below(base) if lk != base and tree.is_chain_joint(tree.parent_joint[lk])
            and not has_chain_below[lk]]


@dataclass
class _Extension:
    """The default tip: the moving end ``end`` continued through fixed joints to ``tip``, and what was passed."""

    end: str
    tip: str = ""
    side: list[str] = field(default_factory=list)  # collision-only side links not followed
    beside_tool: list[tuple[str, str, list[str]]] = field(default_factory=list)  # (at, tool branch, others)
    alike: list[str] = field(default_factory=list)  # the equal fixed branches where the extension stopped

    def note(self, tree: UrdfTree) -> tuple[str, str]:
        joint = tree.parent_joint[self.end].name
        why = f"the last link moved by the chain ({self.end}, joint {joint})"
        if self.tip != self.end:
            why += f", continued through fixed joints to {self.tip}"
        if self.side:
            why += f"; collision-only side links not followed: {', '.join(self.side)}"
        for at, tool, others in self.beside_tool:
            why += f"; at {at} the branch with a tool (joints off the chain) followed: {tool}, not {', '.join(others)}"
        level = "info"
        if self.alike:
            level = "warning"
            why += (f"; stopped at {self.tip}: its fixed branches {', '.join(self.alike)} are alike (none carries "
                    "a tool, or each does)")
        return level, f"{tree.source}: tip link {self.tip} (the payload frame) chosen by default: {why}. For " \
                      f"another, {TIP_HINT}"


def _extend_fixed(tree: UrdfTree, link: str) -> _Extension:
    ext = _Extension(link)
    while True:
        fixed = [j.child for j in tree.children.get(link, []) if j.type == "fixed"]
        side = [lk for lk in fixed if all(b in tree.collision_only for b in tree.below(lk))]
        branches = [lk for lk in fixed if lk not in side]
        ext.side += side
        if len(branches) > 1:
            tools = [lk for lk in branches if any(j.type != "fixed" for b in tree.below(lk)
                                                  for j in tree.children.get(b, []))]
            if len(tools) == 1:
                ext.beside_tool.append((link, tools[0], [lk for lk in branches if lk != tools[0]]))
                branches = tools
        if len(branches) != 1:
            ext.tip, ext.alike = link, branches
            return ext
        link = branches[0]


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


def _snapped_floats(el, attr: str, default: str, step: float | None, where: str, joint: str,
                    snapped: list[Snap]) -> np.ndarray:
    """The 3 numbers of ``el``'s ``attr``, each snapped to the multiple of ``step`` it rounds
    (:func:`snap_written`; ``step`` None: only residues below :data:`RESIDUE` to 0)."""
    text = el.get(attr, default)
    vals = _floats(text, 3, f"{where} <{el.tag} {attr}>")
    for i, word in enumerate(text.split()):
        exact = snap_written(word, step) if step is not None else (0.0 if 0 < abs(vals[i]) < RESIDUE else None)
        if exact is not None and (step is None or step != 1.0 or abs(exact) <= 1.0):
            vals[i] = exact
            snapped.append(Snap(joint, f"{attr}[{i}]" if el.tag == "origin" else f"axis[{i}]", word, exact))
    return vals


def _joint_origin(el, where: str, joint: str, snapped: list[Snap]) -> np.ndarray:
    o = el.find("origin")
    if o is None:
        return np.eye(4)
    xyz = _snapped_floats(o, "xyz", "0 0 0", None, where, joint, snapped)
    rpy = _snapped_floats(o, "rpy", "0 0 0", np.pi / 2, where, joint, snapped)
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


def _joint(el, source: str, links: dict, snapped: list[Snap]) -> UrdfJoint:
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
        axis = _snapped_floats(axis_el, "xyz", "1 0 0", 1.0, where, name, snapped)
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
    return UrdfJoint(name, jtype, ends[0], ends[1], _joint_origin(el, where, name, snapped), axis, limit, mimic,
                     mult, off)
