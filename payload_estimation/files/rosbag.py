"""sensor_msgs/JointState recordings in rosbag2 (sqlite3 or MCAP), as people share them.

Accepted: a bag directory with its ``metadata.yaml``; a directory holding only the storage file(s)
(``*.db3`` / ``*.mcap``, metadata lost); a lone ``.db3`` / ``.mcap`` file -- also under another
name, recognised by its first bytes. Joints are mapped by NAME to the robot's joint order;
``effort`` is the measured joint torque, ``velocity`` becomes ``dq`` when every message has it.
Time is the header stamp (s) when every message has one, else the bag's receive time.
"""

from __future__ import annotations

import logging
import tempfile
from pathlib import Path

import numpy as np

from ..model.description import RobotDescription
from ..signals.samples import SampleDataError, Samples
from .csv_samples import CORRUPT_LIMIT, Rows, binary_kind, clean_rows, corrupt_rows

log = logging.getLogger(__name__)

STORAGE_SUFFIXES = (".db3", ".mcap")


def is_rosbag(path: str | Path) -> bool:
    """True for a bag directory, a directory of storage files or a storage file (by suffix or content)."""
    p = Path(path)
    if p.is_dir():
        return True
    return p.suffix.lower() in STORAGE_SUFFIXES or binary_kind(p) is not None


def storage_paths(path: str | Path, tmp: Path | None = None) -> list[Path]:
    """What rosbags should open for ``path``: the bag directory itself when it has a metadata.yaml,
    else its storage files (sorted), or the lone storage file (linked under its proper suffix in
    ``tmp`` when it has another name)."""
    p = Path(path)
    if not p.exists():
        raise SampleDataError(f"{p}: no such rosbag (directory, .db3 or .mcap file)")
    if p.is_dir():
        if (p / "metadata.yaml").exists():
            return [p]
        files = sorted(f for f in p.iterdir() if f.suffix.lower() in STORAGE_SUFFIXES)
        if not files:
            raise SampleDataError(f"{p}: neither a rosbag2 directory (no metadata.yaml) nor a directory of "
                                  f"storage files (no *.db3 or *.mcap inside)")
        log.info("%s: no metadata.yaml; reading the storage file(s) %s directly", p, ", ".join(f.name for f in files))
        return files
    if p.suffix.lower() in STORAGE_SUFFIXES:
        return [p]
    kind = binary_kind(p)
    if kind is None:
        raise SampleDataError(f"{p}: not a rosbag2 storage file (expected a .db3 or .mcap file, or a bag directory)")
    if tmp is None:
        raise SampleDataError(f"{p}: {kind} under another name: rename it to end in "
                              f"{'.db3' if 'sqlite' in kind else '.mcap'}")
    link = tmp / (p.stem + (".db3" if "sqlite" in kind else ".mcap"))
    link.symlink_to(p.resolve())
    return [link]


def read_rosbag_rows(path: str | Path, topic: str = "joint_states",
                     joint_names: tuple[str, ...] | None = None) -> Rows:
    """The JointState messages of ``topic`` as :class:`Rows` (not yet cleaned), in ``joint_names``'
    order (default: the first message's order). Errors name the bag, the message and the joint."""
    from rosbags.highlevel import AnyReader
    from rosbags.typesys import Stores, get_typestore

    path = Path(path)
    want = {topic, "/" + topic.lstrip("/")}
    order = tuple(joint_names) if joint_names else None
    qs, taus, dqs, stamps, received = [], [], [], [], []
    have_vel = True
    with tempfile.TemporaryDirectory() as tmp:
        paths = storage_paths(path, Path(tmp))
        try:
            reader = AnyReader(paths, default_typestore=get_typestore(Stores.ROS2_HUMBLE))
            reader.open()
        except Exception as exc:  # noqa: BLE001 - rosbags raises several unrelated types
            raise SampleDataError(f"{path}: cannot open as a rosbag2: {exc}") from exc
        try:
            conns = [c for c in reader.connections if c.topic in want]
            if not conns:
                topics = sorted({c.topic for c in reader.connections})
                raise SampleDataError(f"{path}: no topic '{topic}' (topics in the bag: {', '.join(topics) or 'none'})")
            for c in conns:
                if c.msgtype != "sensor_msgs/msg/JointState":
                    raise SampleDataError(
                        f"{path}: topic '{c.topic}' has type {c.msgtype}, expected sensor_msgs/msg/JointState")
            for k, (conn, stamp_ns, raw) in enumerate(reader.messages(connections=conns)):
                try:
                    msg = reader.deserialize(raw, conn.msgtype)
                except Exception as exc:  # noqa: BLE001
                    raise SampleDataError(f"{path}: message {k} on '{conn.topic}' cannot be decoded: {exc}") from exc
                names = list(msg.name)
                if order is None:
                    order = tuple(names)
                index = {nm: i for i, nm in enumerate(names)}
                missing = [j for j in order if j not in index]
                if missing:
                    raise SampleDataError(
                        f"{path}: message {k} on '{conn.topic}' lacks joint(s) {', '.join(missing)} "
                        f"(it has {', '.join(names)})")
                pos, eff, vel = np.asarray(msg.position), np.asarray(msg.effort), np.asarray(msg.velocity)
                if pos.shape[0] != len(names) or eff.shape[0] != len(names):
                    raise SampleDataError(
                        f"{path}: message {k}: {len(names)} names but {pos.shape[0]} positions and "
                        f"{eff.shape[0]} efforts (measured torques are required)")
                sel = [index[j] for j in order]
                qs.append(pos[sel])
                taus.append(eff[sel])
                if vel.shape[0] == len(names):
                    dqs.append(vel[sel])
                else:
                    have_vel = False
                st = msg.header.stamp
                stamps.append(st.sec + 1e-9 * st.nanosec)
                received.append(1e-9 * stamp_ns)
        finally:
            reader.close()
    if not qs:
        raise SampleDataError(f"{path}: topic '{topic}' has no messages")
    stamps_a = np.array(stamps)
    if np.any(stamps_a <= 0):
        log.info("%s: %d of %d messages have no header stamp; using the bag's receive times",
                 path, int(np.sum(stamps_a <= 0)), stamps_a.size)
        stamps_a = np.array(received)
    q, tau, dq = np.array(qs), np.array(taus), np.array(dqs) if have_vel else None
    where = np.arange(len(qs))
    fields = [("position", q), ("effort", tau)] + ([("velocity", dq)] if dq is not None else [])
    values = np.hstack([a for _, a in fields])
    n = len(order)
    bad, corrupt_first = corrupt_rows(
        values, np.full(values.shape[1], CORRUPT_LIMIT),
        lambda k, c: f"message {k}, {fields[c // n][0]} of joint {order[c % n]}: {values[k, c]:g}", str(path),
        "message")
    if bad.any():
        keep = ~bad
        q, tau, dq, stamps_a, where = q[keep], tau[keep], dq[keep] if dq is not None else None, stamps_a[keep], \
            where[keep]
    return Rows(str(path), q, tau, dq, None, stamps_a, where, "message", tuple(order), int(bad.sum()),
                corrupt_first)


def load_rosbag(path: str | Path, topic: str = "joint_states", desc: RobotDescription | None = None,
                joint_names: tuple[str, ...] | None = None) -> Samples:
    """Samples of a bag (:func:`read_rosbag_rows` then :func:`data.clean_rows`); joints in the order
    of ``desc`` or ``joint_names`` (default: the first message's)."""
    order = tuple(desc.joint_names) if desc is not None else (tuple(joint_names) if joint_names else None)
    return clean_rows(read_rosbag_rows(path, topic, order))[0]


__all__ = ["STORAGE_SUFFIXES", "is_rosbag", "load_rosbag", "read_rosbag_rows", "storage_paths"]
