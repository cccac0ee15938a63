"""Read a serial revolute chain from URDF text (no ROS needed) and write one back.

The tree is parsed and the chain chosen by :mod:`.urdf_tree`. Fixed joints on the chain are folded
into their neighbours: before the first revolute joint into its placement, between revolute joints
into the next placement, after the last one into the flange (= the tip link frame, which is also
the payload frame, named after the tip link). Every body off the chain is lumped into the moving
link it hangs from: rigidly attached bodies silently, bodies behind joints that are not on the chain
(gripper fingers, links past ``tip_link``) at those joints' zero or given positions, with one warning
naming them. Continuous joints count as revolute with +-inf limits replaced by +-pi*2 (a bounded
choice). A moving link without mass stays massless here; :func:`.description.validate` says what
works without masses and :func:`.description.require_masses` refuses the rest.

What the reader decided is said once, as ``(level, text)`` notes: logged here and kept in
:attr:`RobotDescription.notes` for the command line and the nodes to show — the default tip and why
(info; a warning where fixed branches left it undecided), CAD-rounded joint placements read as exact
(warning, with their count and the largest correction), bodies lumped behind joints off the chain
(warning).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

import numpy as np

from .description import JointLimits, JointSpec, RobotDescription, RobotDescriptionError
from .parameters import BodyInertia
from .transforms import invert
from .urdf_tree import TIP_HINT, Snap, UrdfJoint, UrdfTree, parse_urdf, select_chain

log = logging.getLogger(__name__)
_MASSLESS = BodyInertia(0.0, np.zeros(3), np.zeros((3, 3)))
_LEVELS = {"info": logging.INFO, "warning": logging.WARNING}
SNAP_NOTE_ABOVE = 1e-12
"""A correction this small needs no note: the symbolic derivation reads such residues as exact anyway."""


def load_urdf(text: str, base_link: str | None = None, tip_link: str | None = None,
              name: str | None = None, source: str = "URDF",
              locked: Mapping[str, float] | None = None) -> RobotDescription:
    """Description of the revolute chain from ``base_link`` to ``tip_link`` in URDF ``text``.

    Defaults: the root link and the tip chosen as in :mod:`.urdf_tree`. ``source`` (a file path
    or a topic name) names the description in errors and warnings. ``locked`` gives positions
    (rad or m) of joints off the chain at which their bodies are lumped (default 0; a mimic joint
    follows its mimicked joint). Gravity is -9.81 m/s^2 along z of ``base_link``.
    Not validated: see :func:`.robot_file.robot_from_description` for the checked entry point.
    """
    tree = parse_urdf(text, source)
    base, tip, path, tip_note = select_chain(tree, base_link, tip_link)
    _check_chain(tree, path, base, tip)
    notes = [n for n in (tip_note, _snap_note(source, tree.snapped)) if n is not None]
    positions = _off_chain_positions(tree, path, locked)

    specs: list[JointSpec] = []
    lows, highs, vels, efforts = [], [], [], []
    # link name -> (index of the moving link it belongs to, -1 = the base; its pose in that link frame)
    frames: dict[str, tuple[int, np.ndarray]] = {base: (-1, np.eye(4))}
    pending = np.eye(4)  # fixed transform accumulated since the last moving link frame
    for j in path:
        if j.type == "fixed":
            pending = pending @ j.origin
        else:
            specs.append(JointSpec(j.name, pending @ j.origin, j.axis, np.eye(4)))
            pending = np.eye(4)
            lo, hi, vel, eff = _limits(j)
            lows.append(lo)
            highs.append(hi)
            vels.append(vel)
            efforts.append(eff)
        frames[j.child] = (len(specs) - 1, pending)
    if not specs:
        raise RobotDescriptionError(f"{source}: no revolute joint between '{base}' and '{tip}'; {TIP_HINT}")

    bodies: list[BodyInertia | None] = [None] * len(specs)
    behind: list[str] = []  # bodies lumped at the positions of joints off the chain
    chain = set(frames)
    moved = {lk: False for lk in frames}
    for lk in tree.below(base):
        if lk not in frames:
            j = tree.parent_joint[lk]
            k, t = frames[j.parent]
            frames[lk] = (k, t @ j.origin @ j.motion(positions.get(j.name, 0.0)))
            moved[lk] = moved[j.parent] or j.type != "fixed"
        k, t = frames[lk]
        body = tree.links[lk]
        if k < 0 or body is None or body.mass == 0:
            continue
        part = body.transformed(t)
        bodies[k] = part if bodies[k] is None else bodies[k].plus(part)
        if moved[lk]:
            behind.append(lk)
    if behind:
        joints = sorted({j.name for lk in behind for j in _joints_above(tree, lk, chain)})
        at = ", ".join(f"{jn} = {positions.get(jn, 0.0):g}" for jn in joints)
        notes.append(("warning", f"{source}: {len(behind)} bodies behind joints that are not on the chain {base} -> "
                                 f"{tip} are lumped into it at those joints' positions ({at}): {', '.join(behind)}"))
    for level, note in notes:
        log.log(_LEVELS[level], "%s", note)
    return RobotDescription(
        name=name or tree.name,
        joints=tuple(specs),
        links=tuple(_MASSLESS if b is None else b for b in bodies),
        limits=JointLimits(np.array([lows, highs]).T, np.array(vels), np.array(efforts)),
        flange=pending,
        payload_frame=pending,
        payload_frame_name=tip,
        link_frame_names=tuple(j.child for j in path if j.type != "fixed"),
        convention="urdf",
        source=f"{source}: URDF chain {base} -> {tip}",
        notes=tuple(notes),
    )


def _snap_note(source: str, snapped: tuple[Snap, ...]) -> tuple[str, str] | None:
    """The one note on joint placements read as the exact values they round, or None when there is none
    above :data:`SNAP_NOTE_ABOVE`."""
    if not snapped:
        return None
    big = max(snapped, key=lambda s: s.correction)
    if big.correction <= SNAP_NOTE_ABOVE:
        return None
    unit = {"r": " rad", "x": " m"}.get(big.where[0], "")
    return ("warning", f"{source}: {len(snapped)} joint <origin>/<axis> numbers read as the exact values they "
                       "round (multiples of pi/2; 0 or +-1 on an axis; 0 for xyz below 1e-6 m): largest correction "
                       f"{big.correction:.2g}{unit} (joint {big.joint} {big.where}: {big.written} -> "
                       f"{_exact_name(big)}); as written they would couple links in the dynamic coefficients")


def _exact_name(snap: Snap) -> str:
    """``pi/2``, ``-pi``, ``3pi/2`` for an angle; ``0``, ``1``, ``-1`` otherwise."""
    if not snap.where.startswith("rpy"):
        return f"{snap.value:g}"
    k = round(snap.value / (np.pi / 2))
    if k == 0:
        return "0"
    sign, k = ("-" if k < 0 else ""), abs(k)
    return sign + ("pi/2" if k == 1 else f"{k // 2}pi".replace("1pi", "pi") if k % 2 == 0 else f"{k}pi/2")


def _check_chain(tree: UrdfTree, path: list[UrdfJoint], base: str, tip: str) -> None:
    for j in path:
        if j.type not in ("fixed", "revolute", "continuous"):
            raise RobotDescriptionError(
                f"{tree.source}: joint '{j.name}' ({j.type}) lies on the chain {base} -> {tip}; only revolute, "
                f"continuous and fixed joints can: choose base_link/tip_link around it")
        if j.type != "fixed" and not tree.is_chain_joint(j):
            raise RobotDescriptionError(
                f"{tree.source}: joint '{j.name}' on the chain {base} -> {tip} is a mimic joint or mimicked by "
                f"one (a gripper mechanism, not an arm joint): choose a tip_link above it")


def _off_chain_positions(tree: UrdfTree, path: list[UrdfJoint], locked: Mapping[str, float] | None
                         ) -> dict[str, float]:
    on_chain = {j.name for j in path}
    given = dict(locked or {})
    for jn, v in given.items():
        if jn not in tree.joints:
            raise RobotDescriptionError(f"{tree.source}: locked joint '{jn}' is not a joint of the description")
        if jn in on_chain or tree.joints[jn].type in ("fixed", "floating", "planar"):
            raise RobotDescriptionError(f"{tree.source}: joint '{jn}' cannot be locked (on the chain, or "
                                        f"{tree.joints[jn].type})")
        if not np.isfinite(v):
            raise RobotDescriptionError(f"{tree.source}: locked position of '{jn}' is not finite: {v}")
    out = {}
    for j in tree.joints.values():
        if j.name in on_chain or j.type == "fixed":
            continue
        if j.name in given:
            out[j.name] = float(given[j.name])
        elif j.mimic is not None:
            out[j.name] = j.multiplier * float(given.get(j.mimic, 0.0)) + j.offset
        else:
            out[j.name] = 0.0
    return out


def _joints_above(tree: UrdfTree, link: str, on_chain: set[str]) -> list[UrdfJoint]:
    """Moving joints between ``link`` and the chain links ``on_chain``."""
    out = []
    while link in tree.parent_joint and link not in on_chain:
        j = tree.parent_joint[link]
        if j.type != "fixed":
            out.append(j)
        link = j.parent
    return out


def _limits(j: UrdfJoint) -> tuple[float, float, float, float]:
    if j.limit is None:
        return -2 * np.pi, 2 * np.pi, np.inf, np.inf
    lo, hi, vel, eff = j.limit
    if j.type == "continuous":
        lo, hi = -2 * np.pi, 2 * np.pi
    return lo, hi, vel, eff


def to_urdf(desc: RobotDescription) -> str:
    """URDF text of ``desc``: link frames as URDF link frames (``link_k``), inertias at their CoM, then the
    ``flange`` and, as the tip, the payload frame under its TF name (``payload_frame_name``), so that
    :func:`robot_file.robot_from_description` of the text gives the same payload frame back."""
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
    if desc.payload_frame_name != "flange":  # the tip: the payload frame, by its TF name
        lines.append(f'  <link name="{desc.payload_frame_name}"/>')
        lines.append(_joint_xml("payload_frame_joint", "fixed", "flange", desc.payload_frame_name,
                                np.linalg.inv(desc.flange) @ desc.payload_frame))
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
