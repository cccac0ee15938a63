"""ROS message <-> numpy conversions (the only place that knows message layouts).

Joint vectors are always in the *model's* joint order; messages are matched **by joint name**.
Extra joints in a message (grippers, other arms) are ignored; a missing joint, a field of the
wrong length or a non-finite value raises :class:`MessageError` with a message an operator can
act on. Nothing here keeps state except a small name -> index cache.

Payload <-> ``geometry_msgs/InertiaStamped``: ``m`` = mass (kg), ``com`` = centre of mass (m) in
the payload frame (``header.frame_id``), ``ixx..izz`` = inertia **about the CoM** in payload-frame
axes (kg m^2), the same convention as URDF ``<inertial>`` and :class:`PayloadEstimate.inertia`.
When only the gravity parameters were estimated the six inertia fields are 0.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from builtin_interfaces.msg import Duration, Time
from geometry_msgs.msg import InertiaStamped
from rclpy.duration import Duration as RclpyDuration
from rclpy.time import Time as RclpyTime
from sensor_msgs.msg import JointState
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

from ..errors import PayloadEstimationError
from ..payload import PayloadEstimate


class MessageError(PayloadEstimationError):
    """A message that cannot be used (missing joint, wrong length, NaN, ...)."""


@dataclass(frozen=True)
class JointSample:
    """One joint_states sample in model joint order.

    stamp: header time (s); q (rad), dq (rad/s, None if the message has no velocity and it was not
    required), tau (N m, measured joint torque = JointState.effort).
    """

    stamp: float
    q: np.ndarray
    dq: np.ndarray | None
    tau: np.ndarray


def time_to_sec(t: Time | Duration) -> float:
    """builtin_interfaces/Time or Duration -> seconds (rclpy's conversion)."""
    return (RclpyDuration if isinstance(t, Duration) else RclpyTime).from_msg(t).nanoseconds * 1e-9


def sec_to_time(s: float) -> Time:
    """Seconds (>= 0) -> builtin_interfaces/Time (nearest nanosecond)."""
    return RclpyTime(nanoseconds=round(s * 1e9)).to_msg()


def sec_to_duration(s: float) -> Duration:
    """Seconds -> builtin_interfaces/Duration (used for time_from_start; nearest nanosecond)."""
    return RclpyDuration(nanoseconds=round(s * 1e9)).to_msg()


def clock_seconds(node) -> float:
    """The node's clock (ROS time: /clock under use_sim_time) now, in seconds."""
    return node.get_clock().now().nanoseconds * 1e-9


class JointStateConverter:
    """Map ``sensor_msgs/JointState`` onto a model's joint order.

    ``require_velocity`` / ``require_effort``: whether an empty velocity / effort field is an error.
    The name -> index mapping is cached per distinct name list, so conversion is cheap at 1 kHz.
    """

    def __init__(self, joint_names: Sequence[str], require_velocity: bool = True, require_effort: bool = True):
        self.joint_names = tuple(joint_names)
        self.require_velocity = require_velocity
        self.require_effort = require_effort
        self._cache_key: tuple[str, ...] | None = None
        self._cache_idx: np.ndarray | None = None

    def _index(self, names: Sequence[str]) -> np.ndarray:
        key = tuple(names)
        if key == self._cache_key and self._cache_idx is not None:
            return self._cache_idx
        return self._build_index(key)

    def _build_index(self, key: tuple[str, ...]) -> np.ndarray:
        if len(set(key)) != len(key):
            dup = sorted({n for n in key if key.count(n) > 1})
            raise MessageError(f"joint_states lists joint(s) {dup} more than once")
        pos = {name: i for i, name in enumerate(key)}
        missing = [j for j in self.joint_names if j not in pos]
        if missing:
            raise MessageError(
                f"joint_states is missing joint(s) {missing} (expected {list(self.joint_names)}, got "
                f"{list(key)}); check the robot parameter or remap joint_states")
        idx = np.array([pos[j] for j in self.joint_names], dtype=int)
        self._cache_key, self._cache_idx = key, idx
        return idx

    def convert(self, msg: JointState) -> JointSample:
        """JointState -> :class:`JointSample` (raises :class:`MessageError`)."""
        names = msg.name
        idx = self._index(names)
        m = len(names)
        q = _field(msg.position, m, idx, "position", required=True)
        dq = _field(msg.velocity, m, idx, "velocity", required=self.require_velocity)
        tau = _field(msg.effort, m, idx, "effort", required=self.require_effort)
        if tau is None:
            tau = np.zeros(len(idx))
        return JointSample(time_to_sec(msg.header.stamp), q, dq, tau)

    def receive(self, msg: JointState, node, throttle_s: float = 2.0) -> tuple[float, JointSample] | None:
        """A node's joint_states input: (t, sample), or None after a rate-limited error for a bad message.

        ``t`` is the header stamp, or ``node``'s clock (s) when the stamp is zero.
        """
        try:
            s = self.convert(msg)
        except MessageError as e:
            node.get_logger().error(f"ignoring joint_states: {e}", throttle_duration_sec=throttle_s)
            return None
        return (s.stamp if s.stamp > 0 else clock_seconds(node)), s


def _field(values, m: int, idx: np.ndarray, what: str, required: bool) -> np.ndarray | None:
    if len(values) == 0 and not required:
        return None
    if len(values) != m:
        raise MessageError(f"joint_states {what} has {len(values)} entries for {m} joint names")
    arr = np.asarray(values, dtype=float)[idx]
    if not np.isfinite(arr).all():
        bad = np.flatnonzero(~np.isfinite(arr))
        raise MessageError(f"joint_states {what} is not finite for model joint index(es) {bad.tolist()}")
    return arr


def joint_state_msg(names: Sequence[str], q=None, dq=None, tau=None, stamp: Time | None = None,
                    frame_id: str = "") -> JointState:
    """Build a JointState (fields left empty when None). Used for the residual and the sim."""
    msg = JointState()
    if stamp is not None:
        msg.header.stamp = stamp
    msg.header.frame_id = frame_id
    msg.name = list(names)
    n = len(msg.name)
    for attr, v in (("position", q), ("velocity", dq), ("effort", tau)):
        if v is not None:
            arr = np.asarray(v, dtype=float).ravel()
            if arr.size != n:
                raise MessageError(f"{attr} has {arr.size} values for {n} joints")
            setattr(msg, attr, arr.tolist())
    return msg


def trajectory_msg(joint_names: Sequence[str], positions, times, velocities=None,
                   stamp: Time | None = None) -> JointTrajectory:
    """numpy -> JointTrajectory.

    positions (m, n) rad in ``joint_names`` order; times (m,) s since start, strictly increasing and
    > 0; velocities (m, n) rad/s or None (0 at the last point, omitted elsewhere). ``stamp`` None =
    zero stamp ("start now" for joint_trajectory_controller).
    """
    p = np.atleast_2d(np.asarray(positions, dtype=float))
    t = np.atleast_1d(np.asarray(times, dtype=float))
    n = len(joint_names)
    if p.shape[1] != n or p.shape[0] != t.size:
        raise MessageError(f"trajectory shape {p.shape} does not match {t.size} times x {n} joints")
    if not (np.all(np.isfinite(p)) and np.all(np.isfinite(t))):
        raise MessageError("trajectory contains non-finite positions or times")
    if t[0] <= 0.0 or np.any(np.diff(t) <= 0.0):
        raise MessageError(f"trajectory times must be > 0 and strictly increasing, got {t.tolist()}")
    v = None if velocities is None else np.atleast_2d(np.asarray(velocities, dtype=float))
    msg = JointTrajectory()
    if stamp is not None:
        msg.header.stamp = stamp
    msg.joint_names = list(joint_names)
    for k in range(p.shape[0]):
        pt = JointTrajectoryPoint()
        pt.positions = p[k].tolist()
        if v is not None:
            pt.velocities = v[k].tolist()
        elif k == p.shape[0] - 1:
            pt.velocities = [0.0] * n
        pt.time_from_start = sec_to_duration(float(t[k]))
        msg.points.append(pt)
    return msg


def trajectory_from_msg(msg: JointTrajectory, joint_names: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """JointTrajectory -> (times (m,) s, positions (m, n) rad in ``joint_names`` order).

    Every model joint must be present (extra joints are ignored); positions must be finite and
    times non-decreasing.
    """
    pos = {name: i for i, name in enumerate(msg.joint_names)}
    missing = [j for j in joint_names if j not in pos]
    if missing:
        raise MessageError(f"joint_trajectory is missing joint(s) {missing}")
    if not msg.points:
        raise MessageError("joint_trajectory has no points")
    idx = np.array([pos[j] for j in joint_names], dtype=int)
    m = len(msg.joint_names)
    t = np.empty(len(msg.points))
    q = np.empty((len(msg.points), len(idx)))
    for k, pt in enumerate(msg.points):
        if len(pt.positions) != m:
            raise MessageError(f"joint_trajectory point {k} has {len(pt.positions)} positions for {m} joints")
        q[k] = np.asarray(pt.positions, dtype=float)[idx]
        t[k] = time_to_sec(pt.time_from_start)
    if not np.all(np.isfinite(q)):
        raise MessageError("joint_trajectory contains non-finite positions")
    if np.any(np.diff(t) < 0.0) or t[0] < 0.0:
        raise MessageError("joint_trajectory time_from_start must be non-negative and non-decreasing")
    return t, q


def trajectory_velocities(msg: JointTrajectory, joint_names: Sequence[str]) -> np.ndarray | None:
    """The velocities (m, n) rad/s of a JointTrajectory that :func:`trajectory_from_msg` accepted, in
    ``joint_names`` order, or None unless every point carries one per joint (a controller then interpolates
    without them, e.g. only the last point's 0)."""
    m = len(msg.joint_names)
    if not msg.points or any(len(pt.velocities) != m for pt in msg.points):
        return None
    pos = {name: i for i, name in enumerate(msg.joint_names)}
    v = np.array([pt.velocities for pt in msg.points], dtype=float)[:, [pos[j] for j in joint_names]]
    if not np.all(np.isfinite(v)):
        raise MessageError("joint_trajectory contains non-finite velocities")
    return v


SAMPLER_MARK = "payload_sampler/motion"
"""``header.frame_id`` of the sampler's joint_trajectory: the collision monitor never resumes it (the sampler aborts
on a collision and commands its own next move). A controller ignores the field."""


def estimate_to_msg(est: PayloadEstimate, stamp: Time | None = None, frame_id: str | None = None) -> InertiaStamped:
    """PayloadEstimate -> InertiaStamped (inertia about the CoM; zeros if not estimated)."""
    msg = InertiaStamped()
    if stamp is not None:
        msg.header.stamp = stamp
    msg.header.frame_id = est.frame if frame_id is None else frame_id
    msg.inertia.m = float(est.mass)
    c = np.asarray(est.com, dtype=float)
    msg.inertia.com.x, msg.inertia.com.y, msg.inertia.com.z = (float(x) for x in c)
    if est.inertia is not None:
        i = np.asarray(est.inertia, dtype=float)
        (msg.inertia.ixx, msg.inertia.ixy, msg.inertia.ixz,
         msg.inertia.iyy, msg.inertia.iyz, msg.inertia.izz) = (float(x) for x in i)
    return msg


def estimate_from_msg(msg: InertiaStamped) -> PayloadEstimate:
    """InertiaStamped -> PayloadEstimate (inertia None if all six components are 0).

    Raises :class:`MessageError` for non-finite values or a negative mass.
    """
    i = msg.inertia
    vals = np.array([i.m, i.com.x, i.com.y, i.com.z, i.ixx, i.ixy, i.ixz, i.iyy, i.iyz, i.izz], dtype=float)
    if not np.all(np.isfinite(vals)):
        raise MessageError("payload estimate contains non-finite values")
    if vals[0] < 0.0:
        raise MessageError(f"payload estimate has negative mass {vals[0]:g} kg")
    inertia = None if not np.any(vals[4:]) else vals[4:].copy()
    return PayloadEstimate(float(vals[0]), vals[1:4].copy(), inertia, frame=msg.header.frame_id,
                           method="message")


__all__ = [
    "MessageError", "JointSample", "JointStateConverter", "joint_state_msg", "trajectory_msg",
    "trajectory_from_msg", "estimate_to_msg", "estimate_from_msg", "time_to_sec", "sec_to_time",
    "sec_to_duration",
    "clock_seconds",
]


def diagnostic_level(level: bytes | int) -> int:
    """A DiagnosticStatus level as an int (the generated message holds a byte: b'\\x02' for ERROR)."""
    return int.from_bytes(level, "little") if isinstance(level, bytes) else int(level)
