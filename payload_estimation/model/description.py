"""Robot description: a serial chain of revolute joints with its nominal link dynamics.

Every convention (classical DH, modified DH, URDF) is reduced to one form per joint i:

    T_{i-1,i}(q_i) = pre_i @ Rot(axis_i, q_i) @ post_i

where frame i-1 is the previous *link* frame, ``pre_i`` places the joint frame, the joint rotates
about ``axis_i`` (a unit vector in the joint frame) and ``post_i`` places link frame i. Link i's
inertial parameters are given in link frame i. Lengths in m, angles in rad.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

import numpy as np

from ..errors import PayloadEstimationError
from .parameters import BodyInertia, check_consistency
from .transforms import dh_transform, mdh_transform, rot_axis

CONVENTIONS = ("dh", "mdh", "urdf")
log = logging.getLogger(__name__)


class RobotDescriptionError(PayloadEstimationError):
    """A robot description is malformed or physically inconsistent; the message names the problem."""


@dataclass(frozen=True)
class JointSpec:
    """One revolute joint: ``T = pre @ Rot(axis, q) @ post`` from link frame i-1 to link frame i."""

    name: str
    pre: np.ndarray
    axis: np.ndarray
    post: np.ndarray

    def transform(self, q: float) -> np.ndarray:
        """4x4 pose of link frame i in link frame i-1 at joint angle ``q`` (rad)."""
        return self.pre @ rot_axis(self.axis, q) @ self.post


@dataclass(frozen=True)
class JointLimits:
    """Position (n x 2, rad), velocity (n, rad/s) and effort (n, N m) limits in model joint order."""

    position: np.ndarray
    velocity: np.ndarray
    effort: np.ndarray

    def clip_position(self, q: np.ndarray) -> np.ndarray:
        return np.clip(q, self.position[:, 0], self.position[:, 1])


@dataclass(frozen=True)
class RobotDescription:
    """A serial revolute chain with nominal link dynamics (see module docstring for frames).

    ``flange`` is the pose of the flange frame in the last link frame; ``payload_frame`` is the
    pose of the payload frame in the last link frame (identity: the last link frame, paper 000).
    ``payload_frame_name`` is that frame's name in the robot's TF tree, the ``frame_id`` of every
    payload output: for a URDF the tip link (e.g. ``lbr_link_ee``, ``fr3_link8``), for a robot YAML
    its ``payload_frame_name`` key (default ``<name>_link_<n>``, or ``<name>_payload`` when the
    payload frame is not the last link frame).
    ``gravity`` is the gravity acceleration vector in the base frame (m/s^2).
    """

    name: str
    joints: tuple[JointSpec, ...]
    links: tuple[BodyInertia, ...]
    limits: JointLimits
    gravity: np.ndarray = field(default_factory=lambda: np.array([0.0, 0.0, -9.81]))
    flange: np.ndarray = field(default_factory=lambda: np.eye(4))
    payload_frame: np.ndarray = field(default_factory=lambda: np.eye(4))
    payload_frame_name: str = ""
    convention: str = "dh"
    source: str = ""
    link_frame_names: tuple[str, ...] = ()
    """Names of link frames 1..n in the robot's TF tree when known (URDF child links), else ()."""
    notes: tuple[tuple[str, str], ...] = ()
    """What loading decided that the user should see, as ``(level, text)`` with level ``"info"`` or
    ``"warning"`` (a URDF's default tip and why, rounded angles read as exact, lumped bodies, links without
    mass): logged by the loader, printed by the command line, logged by the nodes."""

    def __post_init__(self):
        if not self.payload_frame_name:
            at_last_link = np.allclose(self.payload_frame, np.eye(4), rtol=0, atol=1e-12)
            default = f"{self.name}_link_{self.n}" if at_last_link else f"{self.name}_payload"
            object.__setattr__(self, "payload_frame_name", default)

    @property
    def n(self) -> int:
        return len(self.joints)

    @property
    def joint_names(self) -> tuple[str, ...]:
        return tuple(j.name for j in self.joints)

    def link_frame_name(self, k: int) -> str:
        """TF name of link frame ``k`` (1..n): the URDF link's name, else ``<name>_dh_frame_<k>`` (the
        frames of a DH/MDH table; their static transforms are documented in docs/robot_description.md)."""
        if not 1 <= k <= self.n:
            raise ValueError(f"link frame index must be in 1..{self.n}, got {k}")
        return self.link_frame_names[k - 1] if self.link_frame_names else f"{self.name}_dh_frame_{k}"

    def link_poses(self, q: np.ndarray) -> list[np.ndarray]:
        """Poses (4x4, base frame) of link frames 1..n at configuration ``q`` (rad)."""
        t = np.eye(4)
        out = []
        for joint, qi in zip(self.joints, q):
            t = t @ joint.transform(qi)
            out.append(t)
        return out

    def with_links(self, links) -> RobotDescription:
        """A copy with other link dynamics (same kinematics)."""
        links = tuple(links)
        if len(links) != self.n:
            raise RobotDescriptionError(f"{len(links)} link inertias given for {self.n} joints")
        return _replace(self, links=links)


def _replace(desc: RobotDescription, **changes) -> RobotDescription:
    from dataclasses import replace

    return replace(desc, **changes)


def joints_from_dh(names, rows) -> tuple[JointSpec, ...]:
    """Classical DH rows [a, alpha, d, theta_offset]: A_i = Rz(q_i+off) Tz(d) Tx(a) Rx(alpha)."""
    z = np.array([0.0, 0.0, 1.0])
    return tuple(
        JointSpec(name, rot_axis(z, off), z, dh_transform(a, alpha, d))
        for name, (a, alpha, d, off) in zip(names, rows)
    )


def joints_from_mdh(names, rows) -> tuple[JointSpec, ...]:
    """Modified DH rows [a_{i-1}, alpha_{i-1}, d_i, theta_offset_i]:
    A_i = Rx(alpha_{i-1}) Tx(a_{i-1}) Rz(q_i+off) Tz(d_i)."""
    z = np.array([0.0, 0.0, 1.0])
    out = []
    for name, (a, alpha, d, off) in zip(names, rows):
        post = np.eye(4)
        post[2, 3] = d
        out.append(JointSpec(name, mdh_transform(a, alpha) @ rot_axis(z, off), z, post))
    return tuple(out)


def validate(desc: RobotDescription) -> RobotDescription:
    """Raise :class:`RobotDescriptionError` unless names, dimensions, limits and gravity are sane.

    Link inertias are only checked for finite values here: a massless or physically inconsistent
    moving link is logged as a warning saying what works without it (and kept in the returned
    description's ``notes``); :func:`require_masses` refuses a robot without any link mass where the
    nominal model is the reference (residual, one-shot estimate, monitor), :func:`require_physical`
    refuses an inconsistent one where it is needed (the simulator).
    """
    n = desc.n
    if n == 0:
        raise RobotDescriptionError(f"robot '{desc.name}': no joints")
    names = desc.joint_names
    if len(set(names)) != n:
        raise RobotDescriptionError(f"robot '{desc.name}': duplicate joint names in {list(names)}")
    if len(desc.links) != n:
        raise RobotDescriptionError(
            f"robot '{desc.name}': 'links' has {len(desc.links)} entries for {n} joints"
        )
    lim = desc.limits
    if lim.position.shape != (n, 2) or lim.velocity.shape != (n,) or lim.effort.shape != (n,):
        raise RobotDescriptionError(
            f"robot '{desc.name}': 'limits' must give {n} [lower, upper] position pairs and {n} "
            "velocity and effort values"
        )
    for i, (lo, hi) in enumerate(lim.position):
        if not lo < hi:
            raise RobotDescriptionError(
                f"robot '{desc.name}': limits.position[{i}] (joint {names[i]}): lower {lo} >= upper {hi}"
            )
    if np.any(lim.velocity <= 0) or np.any(lim.effort <= 0):
        raise RobotDescriptionError(f"robot '{desc.name}': velocity and effort limits must be positive")
    g = np.asarray(desc.gravity, dtype=float)
    if g.shape != (3,) or not np.all(np.isfinite(g)):
        raise RobotDescriptionError(f"robot '{desc.name}': 'gravity' must be 3 finite numbers")
    for i, body in enumerate(desc.links):
        values = np.concatenate([[body.mass], np.ravel(body.com), np.ravel(body.inertia_com)])
        if not np.all(np.isfinite(values)) or body.mass < 0:
            raise RobotDescriptionError(
                f"robot '{desc.name}': links[{i}] (joint {names[i]}): mass, CoM and inertia must be finite, "
                f"mass >= 0 (got mass {body.mass})")
    notes = []
    massless = [names[i] for i, b in enumerate(desc.links) if b.mass == 0]
    if len(massless) == n:
        notes.append(no_masses(desc.name))
    elif massless:
        notes.append(f"robot '{desc.name}': the links moved by joints {', '.join(massless)} have no mass: the nominal "
                     "model leaves out whatever they weigh (right for massless frames; otherwise the residual and a "
                     "one-shot payload estimate take their weight for a load: give their <inertial> or 'links', or "
                     "identify the robot); refused by the simulator")
    bad = [p for p in physical_problems(desc) if " has no mass" not in p]
    if bad:
        notes.append(f"robot '{desc.name}': accepted for gravity-only work (payload estimation, residual), refused "
                     f"by the simulator: {'; '.join(bad)}")
    new = tuple(("warning", text) for text in notes if ("warning", text) not in desc.notes)
    for _, text in new:
        log.warning("%s", text)
    return _replace(desc, notes=desc.notes + new) if new else desc


def has_masses(desc: RobotDescription) -> bool:
    """True if some moving link of ``desc`` has a mass: the description is a dynamic model at all."""
    return any(b.mass > 0 for b in desc.links)


NO_MASSES_FIX = ("identify the robot (payload-estimation identify --robot ROBOT --data RUN --unconstrained --out "
                 "params.yaml) and pass it (--params params.yaml; the nodes' dynamic_model parameter), or estimate "
                 "the payload against unloaded captures of the same poses (estimate --unloaded; the estimator's "
                 "~/capture_unloaded)")
"""What to do when the robot description has no link masses."""


def no_masses(name: str) -> str:
    """The warning for a description whose moving links have no mass: what works, what is refused, the fix."""
    return (f"robot '{name}': no moving link has a mass (no <inertial> in the URDF). Works without masses: the "
            "payload from loaded and unloaded captures (estimate --unloaded, differential) and the least-squares "
            "identification of the coefficients (identify --unconstrained or --gravity-only). Refused until a dynamic "
            "model is given: the collision residual, a one-shot payload estimate against the model, the collision "
            "monitor, the physically consistent identification (identify's default, --physical), the simulator. Fix: "
            + NO_MASSES_FIX)


def require_masses(desc: RobotDescription, needed_by: str) -> RobotDescription:
    """``desc`` if some moving link has a mass, else raise :class:`RobotDescriptionError` saying that
    ``needed_by`` needs the robot's dynamic model and how to give one (:data:`NO_MASSES_FIX`)."""
    if not has_masses(desc):
        raise RobotDescriptionError(f"robot '{desc.name}' has no link masses (no <inertial> in its description): "
                                    f"{needed_by} needs its dynamic model; {NO_MASSES_FIX}")
    return desc


def physical_problems(desc: RobotDescription) -> list[str]:
    """One message per moving link that is massless or physically inconsistent (empty: all fine)."""
    out = []
    for i, (body, name) in enumerate(zip(desc.links, desc.joint_names)):
        if body.mass == 0:
            out.append(f"links[{i}] (joint {name}) has no mass")
            continue
        report = check_consistency(body)
        if not report.ok:
            out.append(f"links[{i}] (joint {name}) is physically inconsistent: " + "; ".join(report.problems))
    return out


def require_physical(desc: RobotDescription, needed_by: str) -> RobotDescription:
    """``desc`` if every moving link has a mass and a physically consistent inertia, else raise
    :class:`RobotDescriptionError` saying which links and that ``needed_by`` needs them."""
    problems = physical_problems(desc)
    if problems:
        raise RobotDescriptionError(
            f"robot '{desc.name}': " + "; ".join(problems) + f". {needed_by} needs a mass and a physically "
            "consistent inertia for every moving link (give <inertial> in the URDF, or 'links' in a robot YAML)")
    return desc
