"""MJCF (MuJoCo XML) of a :class:`RobotDescription`, built in code.

MuJoCo body ``link_k`` *is* link frame k of the description. With
``T_{k-1,k}(q) = pre_k @ Rot(axis_k, q) @ post_k`` the body sits at ``pre_k @ post_k`` in its
parent at q = 0 and its hinge passes through the origin of the joint frame, i.e. through
``post_k^{-1}`` origin with axis ``R(post_k)^T axis_k`` in body coordinates; for any q that gives
exactly ``pre_k @ Rot(axis_k, q) @ post_k``. Link inertias are written in the link frames
(``diaginertia`` + ``iquat`` from an eigen-decomposition, which MuJoCo requires).

A welded child body ``payload`` of the last link sits at the description's payload frame; its
mass is zero until :class:`~payload_estimation.sim.arm.SimulatedArm` attaches a payload. A site
``flange`` marks the flange. Contacts are disabled (no self-collision), so only joint limits,
friction and applied forces act on the chain.
"""

from __future__ import annotations

import mujoco
import numpy as np

from ..model.description import RobotDescription, require_physical
from ..model.parameters import BodyInertia
from ..model.transforms import invert

PAYLOAD_BODY = "payload"
FLANGE_SITE = "flange"


def mj_joint_name(k: int) -> str:
    """MuJoCo name of the k-th joint (0-based); description names may clash with body names."""
    return f"joint_{k + 1}"


def mat_to_quat(r: np.ndarray) -> np.ndarray:
    """Unit quaternion (w, x, y, z) of a 3x3 rotation matrix."""
    q = np.zeros(4)
    mujoco.mju_mat2Quat(q, np.ascontiguousarray(r, dtype=float).reshape(9))
    return q


def principal_inertia(body: BodyInertia) -> tuple[np.ndarray, np.ndarray]:
    """Principal moments (kg m^2) and the quaternion of the principal axes in the body frame."""
    i_c = 0.5 * (np.asarray(body.inertia_com, float) + np.asarray(body.inertia_com, float).T)
    w, v = np.linalg.eigh(i_c)
    if np.linalg.det(v) < 0:
        v[:, 2] = -v[:, 2]
    return w, mat_to_quat(v)


def _f(values) -> str:
    return " ".join(repr(float(x)) for x in np.ravel(values))


def _inertial(body: BodyInertia) -> str:
    moments, quat = principal_inertia(body)
    return (f'<inertial pos="{_f(body.com)}" quat="{_f(quat)}" mass="{float(body.mass)!r}" '
            f'diaginertia="{_f(moments)}"/>')


def build_mjcf(
    desc: RobotDescription,
    links: tuple[BodyInertia, ...] | None = None,
    dt: float = 0.001,
    damping: np.ndarray | None = None,
    frictionloss: np.ndarray | None = None,
    kd: np.ndarray | None = None,
    armature: np.ndarray | None = None,
) -> str:
    """MJCF string of ``desc`` (with true ``links`` if given).

    ``damping`` (N m s/rad) and ``frictionloss`` (N m) are the joints' viscous and Coulomb
    friction. ``kd`` (N m s/rad) adds one velocity-servo actuator per joint (force
    ``kd * (ctrl - dq)``) so the controller's damping is integrated implicitly (``implicitfast``).
    ``armature`` (kg m^2) is each joint's reflected rotor inertia (motor side of the sensor).
    """
    n = desc.n
    links = tuple(desc.links) if links is None else tuple(links)
    require_physical(desc.with_links(links), "MuJoCo (build_mjcf)")
    damping = np.zeros(n) if damping is None else np.asarray(damping, float)
    frictionloss = np.zeros(n) if frictionloss is None else np.asarray(frictionloss, float)
    armature = np.zeros(n) if armature is None else np.asarray(armature, float)
    lines = [
        f'<mujoco model="{desc.name}">',
        '  <compiler angle="radian" autolimits="true"/>',
        f'  <option timestep="{float(dt)!r}" gravity="{_f(desc.gravity)}" integrator="implicitfast">',
        '    <flag contact="disable"/>',
        "  </option>",
        "  <worldbody>",
    ]
    indent = "    "
    for k, (joint, body) in enumerate(zip(desc.joints, links)):
        t0 = joint.pre @ joint.post
        post_inv = invert(joint.post)
        axis = post_inv[:3, :3] @ np.asarray(joint.axis, float)
        lo, hi = desc.limits.position[k]
        lines.append(f'{indent}<body name="link_{k + 1}" pos="{_f(t0[:3, 3])}" quat="{_f(mat_to_quat(t0[:3, :3]))}">')
        lines.append(f"{indent}  {_inertial(body)}")
        extra = ""
        if armature[k] > 0:
            extra += f' armature="{float(armature[k])!r}"'
        if frictionloss[k] > 0:
            extra += f' frictionloss="{float(frictionloss[k])!r}"'
        lines.append(
            f'{indent}  <joint name="{mj_joint_name(k)}" type="hinge" pos="{_f(post_inv[:3, 3])}" '
            f'axis="{_f(axis)}" range="{float(lo)!r} {float(hi)!r}" limited="true" '
            f'damping="{float(damping[k])!r}"{extra}/>'
        )
        indent += "  "
    pf = desc.payload_frame
    fl = desc.flange
    lines.append(f'{indent}<site name="{FLANGE_SITE}" pos="{_f(fl[:3, 3])}" quat="{_f(mat_to_quat(fl[:3, :3]))}"/>')
    lines.append(f'{indent}<body name="{PAYLOAD_BODY}" pos="{_f(pf[:3, 3])}" quat="{_f(mat_to_quat(pf[:3, :3]))}">')
    lines.append(f'{indent}  <inertial pos="0 0 0" mass="0" diaginertia="0 0 0"/>')
    lines.append(f"{indent}</body>")
    for _ in range(n):
        indent = indent[:-2]
        lines.append(f"{indent}</body>")
    lines.append("  </worldbody>")
    if kd is not None:
        lines.append("  <actuator>")
        for k in range(n):
            g = float(kd[k])
            lines.append(f'    <general name="servo_{k + 1}" joint="{mj_joint_name(k)}" gainprm="{g!r}" '
                         f'biastype="affine" biasprm="0 0 {-g!r}" ctrllimited="false"/>')
        lines.append("  </actuator>")
    lines.append("</mujoco>")
    return "\n".join(lines)
