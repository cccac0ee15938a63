"""Writers of an identified robot: its link set as a robot YAML and URDF (SI units, link frames)."""

from __future__ import annotations

import numpy as np

from ..model.description import RobotDescription
from ..model.parameters import BodyInertia, vec6_from_sym


def inertia_vec6(body: BodyInertia) -> np.ndarray:
    """Inertia about the CoM as (xx, xy, xz, yy, yz, zz) (robot-file order)."""
    return vec6_from_sym(0.5 * (body.inertia_com + body.inertia_com.T))


def identified_robot_dict(robot: str, bodies: list[BodyInertia], note: str = "", friction=None) -> dict | None:
    """The robot YAML mapping of ``robot`` (shipped name or YAML path) with ``bodies`` as its links
    and ``friction`` (:class:`~.torque_models.JointFriction`) as its ``friction`` mapping, or None
    when the robot came from a URDF (write :func:`payload_estimation.model.urdf.to_urdf` then)."""
    from pathlib import Path

    import yaml

    from ..model.robot_file import SHIPPED_ROBOTS, robots_dir

    path = Path(robot)
    if not path.suffix and str(robot) in SHIPPED_ROBOTS:
        path = robots_dir() / f"{robot}.yaml"
    if path.suffix.lower() not in (".yaml", ".yml"):
        return None
    doc = yaml.safe_load(path.read_text())
    kin = doc.get("kinematics", {})
    if isinstance(kin, dict) and "urdf" in kin and not Path(kin["urdf"]).is_absolute():
        kin["urdf"] = str((path.parent / kin["urdf"]).resolve())
    doc["links"] = [{"mass": float(b.mass), "com": [float(v) for v in b.com],
                     "inertia": [float(v) for v in inertia_vec6(b)]} for b in bodies]
    doc.pop("friction", None)
    if friction is not None and friction.any():
        doc["friction"] = friction.to_dict()
    doc["source"] = (f"Physically consistent parameters identified by payload-estimation identify --physical "
                     f"from {path.name}. {note}").strip()
    return doc


def write_identified_robot(robot: str, desc: RobotDescription, bodies: list[BodyInertia], yaml_path,
                           note: str = "", friction=None) -> list:
    """Write the identified robot as a package robot YAML (when the source was YAML) and as URDF
    (``yaml_path`` with suffix .urdf), both with the identified joint ``friction``
    (:class:`~.torque_models.JointFriction`: YAML ``friction`` mapping, URDF ``<dynamics>`` and
    ``<torque_offset>``). Returns the written paths."""
    from pathlib import Path

    import yaml

    from ..identification.torque_models import urdf_with_friction
    from ..model.urdf import to_urdf

    yaml_path = Path(yaml_path)
    written = []
    doc = identified_robot_dict(robot, bodies, note, friction)
    if doc is not None:
        yaml_path.write_text("# Identified robot description (payload-estimation identify --physical)\n"
                             + yaml.safe_dump(doc, sort_keys=False, default_flow_style=None, width=200))
        written.append(yaml_path)
    urdf = yaml_path.with_suffix(".urdf")
    text = to_urdf(desc.with_links(bodies))
    if friction is not None and friction.any():
        text = urdf_with_friction(text, desc.joint_names, friction)
    urdf.write_text(text)
    written.append(urdf)
    return written
