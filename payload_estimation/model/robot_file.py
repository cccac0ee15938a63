"""Load a :class:`RobotDescription` from the package's robot YAML schema or from URDF.

Schema (all SI; see docs/robot_description.md)::

    name: lwr4
    joints: [A1, A2, E1, A3, A4, A5, A6]     # model joint order (urdf: optional, exactly the URDF's)
    rename_joints: {urdf_name: new_name}      # urdf only, optional
    gravity: [0, 0, -9.81]                    # base frame, optional
    kinematics:
      convention: dh                          # dh | mdh | urdf
      dh: [[a, alpha, d, theta_offset], ...]  # or mdh: [[a_prev, alpha_prev, d, theta_offset], ...]
      urdf: file.urdf                         # relative to this YAML; with base_link, tip_link
      flange: {xyz: [..], rpy: [..]}          # flange pose in the last link frame, optional
    payload_frame: last_link                  # or flange, or {xyz: .., rpy: ..} in the last link frame
    payload_frame_name: lbr_link_ee           # its name in the robot's TF tree
    limits: {position: [[lo, hi], ...], velocity: [...], effort: [...]}
    links:                                    # one per joint, in link frame i, inertia about the CoM
      - {mass: 2.3, com: [x, y, z], inertia: [xx, xy, xz, yy, yz, zz]}
"""

from __future__ import annotations

import hashlib
import math
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import yaml

from .description import (
    CONVENTIONS,
    JointLimits,
    RobotDescription,
    RobotDescriptionError,
    joints_from_dh,
    joints_from_mdh,
    validate,
)
from .parameters import BodyInertia, sym_from_vec6
from .transforms import xyz_rpy
from .urdf import load_urdf
from .urdf_tree import xacro_hint

SHIPPED_ROBOTS = ("lwr4", "iiwa14")


def share_dir() -> Path:
    """The package's data directory: the source tree, or share/payload_estimation when installed."""
    candidates = [Path(__file__).resolve().parents[2]]
    try:  # a colcon/ament install; plain Python, not ROS client code
        from ament_index_python.packages import get_package_share_directory

        candidates.append(Path(get_package_share_directory("payload_estimation")))
    except Exception:  # noqa: BLE001 - not an ament install
        pass
    candidates.append(Path(sys.prefix) / "share" / "payload_estimation")
    for c in candidates:
        if (c / "config" / "robots").is_dir():
            return c
    raise RobotDescriptionError(f"cannot find the package's config/robots in {[str(c) for c in candidates]}")


def robots_dir() -> Path:
    """Directory of the shipped robot files."""
    return share_dir() / "config" / "robots"


def load_robot(robot: str | Path, base_link: str | None = None, tip_link: str | None = None) -> RobotDescription:
    """Load a shipped robot by name (``lwr4``, ``iiwa14``) or a robot YAML / URDF file by path.

    ``base_link``/``tip_link`` choose the chain of a URDF (or of the URDF a robot YAML wraps,
    overriding its ``kinematics.base_link``/``tip_link``); a DH/MDH robot refuses them.
    """
    path = Path(robot)
    if not path.suffix and str(robot) in SHIPPED_ROBOTS:
        path = robots_dir() / f"{robot}.yaml"
    if path.suffix.lower() == ".xacro":
        raise RobotDescriptionError(xacro_hint(str(path)))
    if not path.is_file():
        raise RobotDescriptionError(
            f"robot '{robot}' is neither a shipped robot ({', '.join(SHIPPED_ROBOTS)}) nor an existing file"
        )
    text = path.read_text()
    if path.suffix.lower() in (".urdf", ".xml") or text.lstrip().startswith("<"):
        return robot_from_description(text, base_link, tip_link, source=str(path))
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise RobotDescriptionError(f"{path}: not valid YAML: {exc}") from exc
    if base_link is not None or tip_link is not None:
        kin = data.get("kinematics") if isinstance(data, dict) else None
        if not isinstance(kin, dict) or kin.get("convention") != "urdf":
            raise RobotDescriptionError(
                f"{path}: base_link/tip_link choose a chain in a URDF; this robot is not described by one "
                "(kinematics.convention is not urdf)")
        kin = dict(kin)
        kin.update({k: v for k, v in (("base_link", base_link), ("tip_link", tip_link)) if v is not None})
        data = {**data, "kinematics": kin}
    return robot_from_dict(data, base_dir=path.parent, where=str(path))


def robot_from_description(text: str, base_link: str | None = None, tip_link: str | None = None,
                           source: str = "robot_description") -> RobotDescription:
    """The checked model of URDF ``text`` — what ``robot_state_publisher`` publishes on
    ``robot_description`` — for the chain ``base_link`` -> ``tip_link`` (defaults: the root and the
    arm's end continued through fixed joints, see :mod:`.urdf_tree`; ``desc.notes`` says which and why).
    ``source`` (topic or file) names it in messages.

    The payload frame is the tip link (``payload_frame_name``). Raises
    :class:`RobotDescriptionError` with a message for the operator (xacro, malformed element,
    ambiguous tip with the candidates); massless or inconsistent links are accepted with a warning.
    """
    return validate(load_urdf(text, base_link, tip_link, source=source))


def _get(d: dict, key: str, where: str):
    if not isinstance(d, dict) or key not in d:
        raise RobotDescriptionError(f"{where}: missing key '{key}'")
    return d[key]


def _numbers(value, shape: tuple, key: str, where: str) -> np.ndarray:
    try:
        arr = np.array(value, dtype=float)
    except (TypeError, ValueError) as exc:
        raise RobotDescriptionError(f"{where}: '{key}' must be numbers, got {value!r}") from exc
    if arr.shape != shape:
        raise RobotDescriptionError(f"{where}: '{key}' must have shape {shape}, got {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise RobotDescriptionError(f"{where}: '{key}' contains NaN or inf")
    return arr


def _pose(value, key: str, where: str) -> np.ndarray:
    if not isinstance(value, dict):
        raise RobotDescriptionError(f"{where}: '{key}' must be a mapping with xyz and rpy")
    xyz = _numbers(value.get("xyz", [0, 0, 0]), (3,), f"{key}.xyz", where)
    rpy = _numbers(value.get("rpy", [0, 0, 0]), (3,), f"{key}.rpy", where)
    return xyz_rpy(xyz, rpy)


def robot_from_dict(data: dict, base_dir: Path | None = None, where: str = "robot") -> RobotDescription:
    """Build and validate a description from the parsed YAML mapping (errors name the bad key)."""
    if not isinstance(data, dict):
        raise RobotDescriptionError(f"{where}: top level must be a mapping")
    name = str(_get(data, "name", where))
    kin = _get(data, "kinematics", where)
    convention = _get(kin, "convention", f"{where}: kinematics")
    if convention not in CONVENTIONS:
        raise RobotDescriptionError(
            f"{where}: kinematics.convention '{convention}' is unknown (use one of {', '.join(CONVENTIONS)})"
        )
    if convention == "urdf":
        from_urdf = _wrapped_urdf(data, kin, base_dir, where, name)
        joints = list(from_urdf.joint_names)
    else:
        joints = _get(data, "joints", where)
        if "rename_joints" in data:
            raise RobotDescriptionError(f"{where}: 'rename_joints' applies to a wrapped URDF only; "
                                        "write the names in 'joints'")
    if not isinstance(joints, list) or not joints or not all(isinstance(j, str) for j in joints):
        raise RobotDescriptionError(f"{where}: 'joints' must be a non-empty list of joint names")
    n = len(joints)
    links_given = data.get("links")
    if convention in ("dh", "mdh"):
        rows = _get(kin, convention, f"{where}: kinematics")
        if not isinstance(rows, list) or len(rows) != n:
            raise RobotDescriptionError(
                f"{where}: kinematics.{convention} must have one row per joint ({n}), got "
                f"{len(rows) if isinstance(rows, list) else rows!r}"
            )
        for i, row in enumerate(rows):
            if not isinstance(row, list) or len(row) != 4:
                raise RobotDescriptionError(
                    f"{where}: kinematics.{convention}[{i}] must be [a, alpha, d, theta_offset], got {row!r}"
                )
        table = _numbers(rows, (n, 4), f"kinematics.{convention}", where)
        specs = joints_from_dh(joints, table) if convention == "dh" else joints_from_mdh(joints, table)
        flange = _pose(kin["flange"], "kinematics.flange", where) if "flange" in kin else np.eye(4)
        from_urdf = None
    else:
        specs = from_urdf.joints
        flange = from_urdf.flange @ (_pose(kin["flange"], "kinematics.flange", where) if "flange" in kin else np.eye(4))

    if links_given is None:
        if from_urdf is None:
            raise RobotDescriptionError(f"{where}: missing key 'links' (nominal link dynamics)")
        links = from_urdf.links
    else:
        if not isinstance(links_given, list) or len(links_given) != n:
            raise RobotDescriptionError(f"{where}: 'links' must have one entry per joint ({n})")
        links = tuple(_link(lk, i, where) for i, lk in enumerate(links_given))

    lim = data.get("limits")
    if lim is None and from_urdf is not None:
        limits = from_urdf.limits
    else:
        lim = _get(data, "limits", where)
        limits = JointLimits(
            _numbers(_get(lim, "position", f"{where}: limits"), (n, 2), "limits.position", where),
            _numbers(_get(lim, "velocity", f"{where}: limits"), (n,), "limits.velocity", where),
            _numbers(_get(lim, "effort", f"{where}: limits"), (n,), "limits.effort", where),
        )
    gravity = _numbers(data.get("gravity", [0.0, 0.0, -9.81]), (3,), "gravity", where)
    pf = data.get("payload_frame", "flange" if from_urdf is not None else "last_link")
    pf_name = ""  # RobotDescription's default unless named below
    if pf == "last_link":
        payload_frame = np.eye(4)
        if from_urdf is not None:
            pf_name = from_urdf.link_frame_names[-1]
    elif pf == "flange":
        payload_frame = flange
        if from_urdf is not None and "flange" not in kin:
            pf_name = from_urdf.payload_frame_name
    else:
        payload_frame = _pose(pf, "payload_frame", where)
    if "payload_frame_name" in data:
        pf_name = data["payload_frame_name"]
        if not isinstance(pf_name, str) or not pf_name.strip():
            raise RobotDescriptionError(f"{where}: 'payload_frame_name' must be a frame name (text)")
    desc = RobotDescription(
        name=name,
        joints=specs,
        links=links,
        limits=limits,
        gravity=gravity,
        flange=flange,
        payload_frame=payload_frame,
        payload_frame_name=pf_name,
        convention=convention,
        source=str(data.get("source", "")),
        link_frame_names=from_urdf.link_frame_names if from_urdf is not None else (),
        notes=from_urdf.notes if from_urdf is not None else (),
    )
    return validate(desc)


def _wrapped_urdf(data: dict, kin: dict, base_dir: Path | None, where: str, name: str) -> RobotDescription:
    """The URDF chain a robot YAML wraps, with its joints checked against ``joints`` and renamed
    only through ``rename_joints``."""
    urdf_ref = _get(kin, "urdf", f"{where}: kinematics")
    urdf_path = Path(urdf_ref) if Path(urdf_ref).is_absolute() else (base_dir or Path.cwd()) / urdf_ref
    if not urdf_path.is_file():
        raise RobotDescriptionError(f"{where}: kinematics.urdf file '{urdf_path}' does not exist")
    if urdf_path.suffix.lower() == ".xacro":
        raise RobotDescriptionError(xacro_hint(str(urdf_path)))
    desc = load_urdf(urdf_path.read_text(), kin.get("base_link"), kin.get("tip_link"), name, source=str(urdf_path))
    chain = list(desc.joint_names)
    listed = data.get("joints")
    if listed is not None and listed != chain:
        raise RobotDescriptionError(
            f"{where}: 'joints' {listed} is not the URDF chain's joint list {chain} (in chain order); omit "
            "'joints' or list exactly those; to use other names, map them with rename_joints: {urdf_name: new_name}")
    rename = data.get("rename_joints")
    if rename is None:
        return desc
    if not isinstance(rename, dict) or not all(isinstance(v, str) and v for v in rename.values()):
        raise RobotDescriptionError(f"{where}: 'rename_joints' must map URDF joint names to new names")
    unknown = [k for k in rename if k not in chain]
    if unknown:
        raise RobotDescriptionError(f"{where}: rename_joints names {unknown}, which are not joints of the URDF "
                                    f"chain {chain}")
    specs = tuple(replace(s, name=rename.get(s.name, s.name)) for s in desc.joints)
    return replace(desc, joints=specs)


def _link(entry, i: int, where: str) -> BodyInertia:
    w = f"{where}: links[{i}]"
    if not isinstance(entry, dict):
        raise RobotDescriptionError(f"{w} must be a mapping with mass, com, inertia")
    mass = float(_numbers(_get(entry, "mass", w), (), "mass", w))
    com = _numbers(_get(entry, "com", w), (3,), "com", w)
    inertia = _numbers(_get(entry, "inertia", w), (6,), "inertia", w)
    return BodyInertia(mass, com, sym_from_vec6(inertia))


def degrees_to_radians(values) -> list[float]:
    """Helper for config keys ending in ``_deg``."""
    return [math.radians(v) for v in values]


FINGERPRINT_KEY = "kinematics_fingerprint"
"""Key of an identified model file's ``info`` that holds :func:`kinematics_fingerprint` of its robot model."""

FINGERPRINT_DECIMALS = 6
"""Rounding (m, rad, m/s^2) of the numbers a kinematics fingerprint hashes: below it, models count as one."""


def kinematics_fingerprint(desc: RobotDescription) -> str:
    """A short hash of what an identified model's coefficients are defined in: every joint's transform
    (link frame i in frame i-1) at q = 0 and at q = 1 rad, which fixes the joint axis line and the link
    frames however the description is written (DH, MDH, URDF), and the gravity vector in the base frame.
    Link inertias, limits and names are not part of it (names are checked on their own)."""
    numbers = [np.concatenate([j.transform(0.0)[:3].ravel(), j.transform(1.0)[:3].ravel()]) for j in desc.joints]
    values = np.round(np.concatenate([*numbers, np.asarray(desc.gravity, float)]), FINGERPRINT_DECIMALS) + 0.0
    return "kin1-" + hashlib.sha256(values.astype("<f8").tobytes()).hexdigest()[:16]
