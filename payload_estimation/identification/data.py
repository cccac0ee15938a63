"""Joint samples for identification: validated arrays, CSV files and rosbag2 recordings.

A :class:`Samples` record holds N samples of an n-joint robot in the model's joint order:
positions q (rad), measured joint torques tau (N m), optional velocities dq (rad/s),
accelerations ddq (rad/s^2) and time stamps t (s, strictly increasing).

CSV format: one header row, then one row per sample. Columns ``q1..qn`` and ``tau1..taun`` are
required, ``dq1..dqn``, ``ddq1..ddqn`` and ``t`` are optional (a group is all-or-nothing);
other columns are ignored. Joint indices are 1-based in the model's joint order.
"""

from __future__ import annotations

import csv
import math
import re
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from ..model.description import RobotDescription


class SampleDataError(ValueError):
    """Sample data are malformed; the message names the file, row, column or joint."""


class NotStaticError(SampleDataError):
    """A sample meant to be static was captured while the arm moved."""


@dataclass(frozen=True)
class Samples:
    """N joint samples in model joint order (see module docstring for units)."""

    q: np.ndarray
    tau: np.ndarray
    dq: np.ndarray | None = None
    ddq: np.ndarray | None = None
    t: np.ndarray | None = None
    joint_names: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        q = _as_2d(self.q, "q")
        n_s, n = q.shape
        object.__setattr__(self, "q", q)
        for name in ("tau", "dq", "ddq"):
            v = getattr(self, name)
            if v is None:
                if name == "tau":
                    raise SampleDataError("samples need measured torques 'tau'")
                continue
            a = _as_2d(v, name)
            if a.shape != (n_s, n):
                raise SampleDataError(f"'{name}' has shape {a.shape}, expected {(n_s, n)} like 'q'")
            object.__setattr__(self, name, a)
        if self.t is not None:
            t = np.asarray(self.t, dtype=float).reshape(-1)
            if t.shape != (n_s,):
                raise SampleDataError(f"'t' has {t.shape[0]} entries for {n_s} samples")
            _finite(t[:, None], "t")
            d = np.diff(t)
            if (d <= 0).any():
                k = int(np.argmax(d <= 0))
                raise SampleDataError(
                    f"time stamps are not strictly increasing: sample {k + 1} has t={t[k + 1]} s after "
                    f"t={t[k]} s (sample {k})"
                )
            object.__setattr__(self, "t", t)
        names = tuple(self.joint_names) if self.joint_names else tuple(f"joint{j + 1}" for j in range(n))
        if len(names) != n:
            raise SampleDataError(f"{len(names)} joint names for {n} joints")
        object.__setattr__(self, "joint_names", names)

    @property
    def n_samples(self) -> int:
        return int(self.q.shape[0])

    @property
    def n_joints(self) -> int:
        return int(self.q.shape[1])

    def __len__(self) -> int:
        return self.n_samples

    def subset(self, index) -> Samples:
        """Samples at ``index`` (boolean mask or integer indices)."""
        def pick(a):
            return None if a is None else a[index]

        return Samples(self.q[index], self.tau[index], pick(self.dq), pick(self.ddq), pick(self.t),
                       self.joint_names)

    def check_robot(self, desc: RobotDescription) -> Samples:
        """Raise unless the joint count matches ``desc``; returns self with the robot's joint names."""
        if self.n_joints != desc.n:
            raise SampleDataError(
                f"samples have {self.n_joints} joints but robot '{desc.name}' has {desc.n} "
                f"({', '.join(desc.joint_names)})"
            )
        return replace(self, joint_names=desc.joint_names)


def _as_2d(v, name: str) -> np.ndarray:
    try:
        a = np.asarray(v, dtype=float)
    except (TypeError, ValueError) as exc:
        raise SampleDataError(f"'{name}' must be numeric: {exc}") from exc
    if a.ndim != 2 or a.shape[0] == 0 or a.shape[1] == 0:
        raise SampleDataError(f"'{name}' must be a non-empty (N samples, n joints) array, got shape {a.shape}")
    _finite(a, name)
    return a


def _finite(a: np.ndarray, name: str) -> None:
    bad = ~np.isfinite(a)
    if bad.any():
        k, j = np.argwhere(bad)[0]
        raise SampleDataError(f"'{name}' is NaN/inf at sample {k}, joint {j + 1}")


# ---------------------------------------------------------------------------------------------- CSV

_COL = re.compile(r"^(q|tau|dq|ddq)(\d+)$")


def load_csv(path: str | Path, desc: RobotDescription | None = None) -> Samples:
    """Read samples from a CSV file (format in the module docstring).

    Errors (:class:`SampleDataError`) name the file, the line (1-based, the header is line 1) and
    the column. With ``desc`` the joint count is checked against the robot and its joint names
    are attached.
    """
    path = Path(path)
    if not path.exists():
        raise SampleDataError(f"{path}: no such file")
    with path.open(newline="") as fh:
        rows = list(csv.reader(fh))
    rows = [r for r in rows if any(c.strip() for c in r)]
    if not rows:
        raise SampleDataError(f"{path}: empty file (expected a header row q1..qn, tau1..taun)")
    header = [h.strip() for h in rows[0]]
    groups: dict[str, dict[int, int]] = {"q": {}, "tau": {}, "dq": {}, "ddq": {}}
    t_col = None
    for c, h in enumerate(header):
        m = _COL.match(h)
        if m:
            k = int(m.group(2))
            if k in groups[m.group(1)]:
                first = groups[m.group(1)][k] + 1
                raise SampleDataError(f"{path}: column '{h}' appears twice (columns {first} and {c + 1})")
            groups[m.group(1)][k] = c
        elif h == "t":
            t_col = c
    n = len(groups["q"])
    if n == 0:
        raise SampleDataError(f"{path}: no position columns q1..qn in header {header}")
    for g, cols in groups.items():
        if not cols and g in ("dq", "ddq"):
            continue
        expected = set(range(1, n + 1))
        if set(cols) != expected:
            missing = sorted(expected - set(cols))
            extra = sorted(set(cols) - expected)
            what = []
            if missing:
                what.append("missing " + ", ".join(f"{g}{k}" for k in missing))
            if extra:
                what.append("unexpected " + ", ".join(f"{g}{k}" for k in extra))
            raise SampleDataError(
                f"{path}: {len(cols)} '{g}' columns for {n} position columns q1..q{n} ({'; '.join(what)})"
            )
    if desc is not None and n != desc.n:
        raise SampleDataError(
            f"{path}: file has {n} joints (q1..q{n}) but robot '{desc.name}' has {desc.n} joints"
        )
    data_rows = rows[1:]
    if not data_rows:
        raise SampleDataError(f"{path}: header but no data rows")
    used = {c for g in groups.values() for c in g.values()} | ({t_col} if t_col is not None else set())
    width = max(used) + 1
    values = np.empty((len(data_rows), len(header)))
    values[:] = np.nan
    for r, row in enumerate(data_rows):
        line = r + 2  # 1-based file line, header is line 1
        if len(row) < width or len(row) != len(header):
            raise SampleDataError(f"{path}: line {line} has {len(row)} fields, header has {len(header)}")
        for c in used:
            cell = row[c].strip()
            try:
                v = float(cell)
            except ValueError:
                raise SampleDataError(
                    f"{path}: line {line}, column '{header[c]}': '{cell}' is not a number"
                ) from None
            if not math.isfinite(v):
                raise SampleDataError(f"{path}: line {line}, column '{header[c]}': value is {cell} (NaN/inf)")
            values[r, c] = v

    def block(g):
        cols = groups[g]
        return values[:, [cols[k] for k in range(1, n + 1)]] if cols else None

    t = values[:, t_col] if t_col is not None else None
    if t is not None:
        d = np.diff(t)
        if (d <= 0).any():
            k = int(np.argmax(d <= 0))
            raise SampleDataError(
                f"{path}: line {k + 3}, column 't': time {t[k + 1]} s is not after {t[k]} s (line {k + 2})"
            )
    names = desc.joint_names if desc is not None else ()
    return Samples(block("q"), block("tau"), block("dq"), block("ddq"), t, names)


def save_csv(samples: Samples, path: str | Path, precision: int = 10) -> Path:
    """Write ``samples`` in the CSV format read by :func:`load_csv`."""
    path = Path(path)
    n = samples.n_joints
    header: list[str] = []
    cols: list[np.ndarray] = []
    if samples.t is not None:
        header.append("t")
        cols.append(samples.t[:, None])
    for g in ("q", "dq", "ddq", "tau"):
        a = getattr(samples, g)
        if a is not None:
            header += [f"{g}{j + 1}" for j in range(n)]
            cols.append(a)
    table = np.hstack(cols)
    with path.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(header)
        for row in table:
            w.writerow([f"{v:.{precision}g}" for v in row])
    return path


# ------------------------------------------------------------------------------------------ rosbag2

def load_rosbag(path: str | Path, topic: str = "joint_states", desc: RobotDescription | None = None,
                joint_names: tuple[str, ...] | None = None) -> Samples:
    """Read sensor_msgs/JointState messages of ``topic`` from a rosbag2 (mcap or sqlite3) directory.

    Joints are mapped by NAME to the robot's joint order (``desc.joint_names`` or ``joint_names``;
    without either, the first message's order). Extra joints are ignored; a missing joint is an
    error naming it. ``effort`` is the measured joint torque; ``velocity`` becomes ``dq`` if every
    message has it. Time is the header stamp (s), or the bag receive time when stamps are zero.
    Messages with repeated or decreasing time are an error (see :class:`Samples`).
    """
    from rosbags.highlevel import AnyReader
    from rosbags.typesys import Stores, get_typestore

    path = Path(path)
    if not path.exists():
        raise SampleDataError(f"{path}: no such rosbag")
    want = {topic, "/" + topic.lstrip("/")}
    order = tuple(desc.joint_names) if desc is not None else (tuple(joint_names) if joint_names else None)
    qs, taus, dqs, ts = [], [], [], []
    have_vel = True
    try:
        reader_cm = AnyReader([path], default_typestore=get_typestore(Stores.ROS2_HUMBLE))
    except Exception as exc:  # noqa: BLE001 - rosbags raises several unrelated types
        raise SampleDataError(f"{path}: cannot open as a rosbag2: {exc}") from exc
    with reader_cm as reader:
        conns = [c for c in reader.connections if c.topic in want]
        if not conns:
            topics = sorted({c.topic for c in reader.connections})
            raise SampleDataError(f"{path}: no topic '{topic}' (topics in the bag: {', '.join(topics) or 'none'})")
        for c in conns:
            if c.msgtype != "sensor_msgs/msg/JointState":
                raise SampleDataError(
                    f"{path}: topic '{c.topic}' has type {c.msgtype}, expected sensor_msgs/msg/JointState"
                )
        for k, (conn, stamp_ns, raw) in enumerate(reader.messages(connections=conns)):
            msg = reader.deserialize(raw, conn.msgtype)
            names = list(msg.name)
            if order is None:
                order = tuple(names)
            index = {nm: i for i, nm in enumerate(names)}
            missing = [j for j in order if j not in index]
            if missing:
                raise SampleDataError(
                    f"{path}: message {k} on '{conn.topic}' lacks joint(s) {', '.join(missing)} "
                    f"(it has {', '.join(names)})"
                )
            pos, eff, vel = np.asarray(msg.position), np.asarray(msg.effort), np.asarray(msg.velocity)
            if pos.shape[0] != len(names) or eff.shape[0] != len(names):
                raise SampleDataError(
                    f"{path}: message {k}: {len(names)} names but {pos.shape[0]} positions and "
                    f"{eff.shape[0]} efforts (measured torques are required)"
                )
            sel = [index[j] for j in order]
            qs.append(pos[sel])
            taus.append(eff[sel])
            if vel.shape[0] == len(names):
                dqs.append(vel[sel])
            else:
                have_vel = False
            st = msg.header.stamp
            t = st.sec + 1e-9 * st.nanosec
            ts.append(t if t > 0 else 1e-9 * stamp_ns)
    if not qs:
        raise SampleDataError(f"{path}: topic '{topic}' has no messages")
    try:
        return Samples(np.array(qs), np.array(taus), np.array(dqs) if have_vel else None, None,
                       np.array(ts), tuple(order))
    except SampleDataError as exc:
        raise SampleDataError(f"{path}: {exc}") from exc


# ---------------------------------------------------------------------------------- sample selection

def _need_dq(samples: Samples, what: str) -> np.ndarray:
    if samples.dq is not None:
        return samples.dq
    if samples.t is not None and samples.n_samples >= 2:
        return np.gradient(samples.q, samples.t, axis=0)
    raise SampleDataError(f"{what} needs velocities dq or time stamps t to judge motion")


def static_mask(samples: Samples, max_speed: float) -> np.ndarray:
    """Boolean (N,): samples where every joint speed is <= ``max_speed`` (rad/s)."""
    if not max_speed > 0:
        raise SampleDataError(f"max_speed must be > 0 rad/s, got {max_speed}")
    return np.all(np.abs(_need_dq(samples, "select_static")) <= max_speed, axis=1)


def select_static(samples: Samples, max_speed: float = 0.01) -> Samples:
    """Keep only the static samples (all joint speeds <= ``max_speed`` rad/s); error if none."""
    mask = static_mask(samples, max_speed)
    if not mask.any():
        raise NotStaticError(f"none of the {samples.n_samples} samples is static (all joints <= {max_speed} rad/s)")
    return samples.subset(mask)


def check_static(samples: Samples, max_speed: float = 0.01) -> Samples:
    """Raise :class:`NotStaticError` naming the first moving sample and joint; return ``samples``."""
    if samples.dq is None and samples.t is None:
        return samples
    dq = np.abs(_need_dq(samples, "check_static"))
    bad = dq > max_speed
    if bad.any():
        k, j = np.argwhere(bad)[0]
        raise NotStaticError(
            f"sample {k} is not static: joint {samples.joint_names[j]} moves at {dq[k, j]:.4g} rad/s "
            f"(limit {max_speed} rad/s); {int(bad.any(axis=1).sum())} of {samples.n_samples} samples move. "
            "Wait for the arm to settle before capturing."
        )
    return samples


def near_zero_velocity_mask(dq: np.ndarray, min_speed: float) -> np.ndarray:
    """Boolean (N, n): True where |dq| < ``min_speed`` (rad/s) — Coulomb friction sign is unreliable."""
    return np.abs(np.asarray(dq, dtype=float)) < min_speed


def discard_near_zero_velocity(samples: Samples, min_speed: float = 0.02,
                               joints: list[int] | None = None) -> Samples:
    """Drop samples where any of ``joints`` (0-based; default all) moves slower than ``min_speed``.

    For friction identification; per-row weighting instead: ``near_zero_velocity_mask``.
    """
    dq = _need_dq(samples, "discard_near_zero_velocity")
    cols = list(range(samples.n_joints)) if joints is None else list(joints)
    keep = ~near_zero_velocity_mask(dq[:, cols], min_speed).any(axis=1)
    if not keep.any():
        raise SampleDataError(f"every sample has a joint slower than {min_speed} rad/s")
    return samples.subset(keep)


__all__ = [
    "NotStaticError",
    "SampleDataError",
    "Samples",
    "check_static",
    "discard_near_zero_velocity",
    "load_csv",
    "load_rosbag",
    "near_zero_velocity_mask",
    "save_csv",
    "select_static",
    "static_mask",
]
