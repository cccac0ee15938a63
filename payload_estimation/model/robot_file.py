"""Load a :class:`RobotDescription` from the package's robot YAML schema or from URDF.

Schema (all SI; see docs/robot_description.md)::

    name: lwr4
    joints: [A1, A2, E1, A3, A4, A5, A6]     # model joint order
    gravity: [0, 0, -9.81]                    # base frame, optional
    kinematics:
      convention: dh                          # dh | mdh | urdf
      dh: [[a, alpha, d, theta_offset], ...]  # or mdh: [[a_prev, alpha_prev, d, theta_offset], ...]
      urdf: file.urdf                         # relative to this YAML; with base_link, tip_link
      flange: {xyz: [..], rpy: [..]}          # flange pose in the last link frame, optional
    payload_frame: last_link                  # or flange, or {xyz: .., rpy: ..} in the last link frame
    limits: {position: [[lo, hi], ...], velocity: [...], effort: [...]}
    links:                                    # one per joint, in link frame i, inertia about the CoM
      - {mass: 2.3, com: [x, y, z], inertia: [xx, xy, xz, yy, yz, zz]}
"""

from __future__ import annotations

import math
import sys
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


def load_robot(robot: str | Path) -> RobotDescription:
    """Load a shipped robot by name (``lwr4``, ``iiwa14``) or a robot YAML / URDF file by path."""
    path = Path(robot)
    if not path.suffix and str(robot) in SHIPPED_ROBOTS:
        path = robots_dir() / f"{robot}.yaml"
    if not path.exists():
        raise RobotDescriptionError(
            f"robot '{robot}' is neither a shipped robot ({', '.join(SHIPPED_ROBOTS)}) nor an existing file"
        )
    if path.suffix.lower() in (".urdf", ".xml"):
        return validate(load_urdf(path.read_text()))
    try:
        data = yaml.safe_load(path.read_text())
    except yaml.YAMLError as exc:
        raise RobotDescriptionError(f"{path}: not valid YAML: {exc}") from exc
    return robot_from_dict(data, base_dir=path.parent, where=str(path))


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
    joints = _get(data, "joints", where)
    if not isinstance(joints, list) or not joints or not all(isinstance(j, str) for j in joints):
        raise RobotDescriptionError(f"{where}: 'joints' must be a non-empty list of joint names")
    n = len(joints)
    kin = _get(data, "kinematics", where)
    convention = _get(kin, "convention", f"{where}: kinematics")
    if convention not in CONVENTIONS:
        raise RobotDescriptionError(
            f"{where}: kinematics.convention '{convention}' is unknown (use one of {', '.join(CONVENTIONS)})"
        )
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
        urdf_ref = _get(kin, "urdf", f"{where}: kinematics")
        urdf_path = Path(urdf_ref) if Path(urdf_ref).is_absolute() else (base_dir or Path.cwd()) / urdf_ref
        if not urdf_path.exists():
            raise RobotDescriptionError(f"{where}: kinematics.urdf file '{urdf_path}' does not exist")
        from_urdf = load_urdf(urdf_path.read_text(), kin.get("base_link"), kin.get("tip_link"), name)
        if from_urdf.n != n:
            raise RobotDescriptionError(f"{where}: URDF chain has {from_urdf.n} joints, 'joints' lists {n}")
        specs = tuple(type(s)(jn, s.pre, s.axis, s.post) for s, jn in zip(from_urdf.joints, joints))
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
    pf = data.get("payload_frame", "last_link")
    if pf == "last_link":
        payload_frame, pf_name = np.eye(4), "last_link"
    elif pf == "flange":
        payload_frame, pf_name = flange, "flange"
    else:
        payload_frame, pf_name = _pose(pf, "payload_frame", where), "payload"
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
    )
    return validate(desc)


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
