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

import math
import struct
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
    """builtin_interfaces/Time or Duration -> seconds (rclpy's conversion: integer nanoseconds * 1e-9, without
    making an rclpy Time per call: this runs for every joint_states sample)."""
    return (t.sec * 1_000_000_000 + t.nanosec) * 1e-9


def sec_to_time(s: float) -> Time:
    """Seconds (>= 0) -> builtin_interfaces/Time (nearest nanosecond)."""
    return RclpyTime(nanoseconds=round(s * 1e9)).to_msg()


def sec_to_duration(s: float) -> Duration:
    """Seconds -> builtin_interfaces/Duration (used for time_from_start; nearest nanosecond)."""
    return RclpyDuration(nanoseconds=round(s * 1e9)).to_msg()


def clock_seconds(node) -> float:
    """The node's clock (ROS time: /clock under use_sim_time) now, in seconds; a node whose /clock is taken in
    batches (:func:`.node_support.clock_off_executor`) takes the newest /clock message first."""
    flush = getattr(node, "_clock_flush", None)
    if flush is not None:
        flush()
    return node.get_clock().now().nanoseconds * 1e-9


def clock_stamp(node):
    """:func:`clock_seconds` as a builtin_interfaces/Time (a header stamp)."""
    flush = getattr(node, "_clock_flush", None)
    if flush is not None:
        flush()
    return node.get_clock().now().to_msg()


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
        self._raw_names: bytes | None = None  # the serialized name list last decoded, and its names
        self._raw_key: tuple[str, ...] = ()
        self.last_stamp: tuple[int, int] = (0, 0)
        """(sec, nanosec) of the newest message converted (its exact stamp: a float loses nanoseconds)."""

    def _index(self, names: Sequence[str]) -> np.ndarray | None:
        """The message's index of each model joint; None when the message lists exactly the model's joints in its
        order (no reordering needed)."""
        key = tuple(names)
        if key == self._cache_key:
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
        if len(key) == len(idx) and np.array_equal(idx, np.arange(len(idx))):
            idx = None  # the model's own order: the fields are taken as they are
        self._cache_key, self._cache_idx = key, idx
        return idx

    def convert(self, msg: JointState | bytes) -> JointSample:
        """JointState, or its serialized form (a raw take: :meth:`convert_raw`) -> :class:`JointSample` (raises
        :class:`MessageError`)."""
        if isinstance(msg, bytes):
            return self.convert_raw(msg)
        st = msg.header.stamp
        self.last_stamp = (st.sec, st.nanosec)
        return self._sample(msg.name, st.sec, st.nanosec, msg.position, msg.velocity, msg.effort)

    def _sample(self, names, sec: int, nanosec: int, position, velocity, effort) -> JointSample:
        idx = self._index(names)
        m = len(names)
        q = _field(position, m, idx, "position", required=True)
        dq = _field(velocity, m, idx, "velocity", required=self.require_velocity)
        tau = _field(effort, m, idx, "effort", required=self.require_effort)
        if tau is None:
            tau = np.zeros(len(self.joint_names))
        return JointSample((sec * 1_000_000_000 + nanosec) * 1e-9, q, dq, tau)

    def convert_raw(self, buf: bytes) -> JointSample:
        """A serialized JointState (CDR as rmw gives it to a raw take) -> :class:`JointSample`, decoding only the
        stamp, the names (compared as bytes with the previous message's: decoded when they change) and the three
        fields: no Python message is built (issue 48: a third of the monitor's per-sample cost). A layout this
        decoder does not know (another encapsulation) is deserialized by rclpy instead."""
        try:
            sec, nanosec, names, fields = self._decode(buf)
        except (struct.error, ValueError, UnicodeDecodeError, IndexError):
            from rclpy.serialization import deserialize_message  # not CDR little-endian as rmw_fastrtps writes it

            return self.convert(deserialize_message(buf, JointState))
        self.last_stamp = (sec, nanosec)
        return self._sample(names, sec, nanosec, *fields)

    def _decode(self, buf: bytes):
        """(sec, nanosec, names, (position, velocity, effort)) of a CDR little-endian JointState; ValueError when the
        buffer is not one (the caller deserializes it then)."""
        if len(buf) < 16 or buf[0] != 0 or buf[1] != 1:  # CDR_LE, what rmw_fastrtps writes
            raise ValueError("not little-endian CDR")
        sec, nanosec, flen = _STAMP_FRAME.unpack_from(buf, 4)
        ns = _align(16 + flen, 4)
        if self._raw_names is not None and buf.startswith(self._raw_names, ns):
            names, off = self._raw_key, ns + len(self._raw_names)
        else:
            (count,), off, out = _U32.unpack_from(buf, ns), ns + 4, []
            for _ in range(count):
                off = _align(off, 4)
                (n,) = _U32.unpack_from(buf, off)
                if n < 1 or off + 4 + n > len(buf):
                    raise ValueError("bad string")
                out.append(buf[off + 4:off + 3 + n].decode())
                off += 4 + n
            self._raw_names, self._raw_key = bytes(buf[ns:off]), tuple(out)
            names = self._raw_key
        fields = []
        for _ in range(3):
            off = _align(off, 4)
            (n,) = _U32.unpack_from(buf, off)
            off += 4
            if n:
                off = _align(off, 8)
                fields.append(np.frombuffer(buf, "<f8", n, off))
                off += 8 * n
            else:
                fields.append(())
        if off > len(buf):
            raise ValueError("truncated")
        return sec, nanosec, names, fields

    def receive(self, msg: JointState | bytes, node, throttle_s: float = 2.0) -> tuple[float, JointSample] | None:
        """A node's joint_states input (a message or its serialized form): (t, sample), or None after a
        rate-limited error for a bad message.

        ``t`` is the header stamp, or ``node``'s clock (s) when the stamp is zero.
        """
        try:
            s = self.convert(msg)
        except MessageError as e:
            node.get_logger().error(f"ignoring joint_states: {e}", throttle_duration_sec=throttle_s)
            return None
        return (s.stamp if s.stamp > 0 else clock_seconds(node)), s


_STAMP_FRAME = struct.Struct("<iII")  # header.stamp.sec, .nanosec, header.frame_id's length (with its NUL)
_U32 = struct.Struct("<I")


def _align(offset: int, size: int) -> int:
    """``offset`` in a CDR buffer rounded up to ``size`` bytes (alignment counts from the 4-byte encapsulation)."""
    return offset + (-(offset - 4)) % size


def _field(values, m: int, idx: np.ndarray | None, what: str, required: bool) -> np.ndarray | None:
    if len(values) == 0 and not required:
        return None
    if len(values) != m:
        raise MessageError(f"joint_states {what} has {len(values)} entries for {m} joint names")
    arr = np.array(values, dtype=float) if idx is None else np.asarray(values, dtype=float)[idx]
    # the sum is finite when every value is (a finite sum's overflow to inf is checked value by value): one reduction
    if not math.isfinite(arr.sum()) and not np.isfinite(arr).all():
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
    "clock_seconds", "clock_stamp",
]


def diagnostic_level(level: bytes | int) -> int:
    """A DiagnosticStatus level as an int (the generated message holds a byte: b'\\x02' for ERROR)."""
    return int.from_bytes(level, "little") if isinstance(level, bytes) else int(level)
