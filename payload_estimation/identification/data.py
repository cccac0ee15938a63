"""Joint samples: the validated record, the recorded rows it is built from, CSV files, static selection.

A :class:`Samples` record holds N samples of an n-joint robot in the model's joint order:
positions q (rad), measured joint torques tau (N m), optional velocities dq (rad/s),
accelerations ddq (rad/s^2) and time stamps t (s, strictly increasing).

Recorded streams are read as :class:`Rows` (values as logged, with the file line or bag message of
each) and turned into samples by :func:`clean_rows`, which drops -- and counts -- what loggers
repeat: whole rows re-read with a new stamp, rows sharing a stamp, stale torque reads.

CSV format: one header row, then one row per sample. Columns ``q1..qn`` and ``tau1..taun`` are
required, ``dq1..dqn``, ``ddq1..ddqn`` and ``t`` are optional (a group is all-or-nothing);
other columns are ignored. Joint indices are 1-based in the model's joint order.
:func:`write_table` is the package's one CSV writer.

Loading any recording (CSV, rosbag2 directory, lone .db3/.mcap) with a report of its sampling:
:func:`payload_estimation.identification.recording.load_recording`.
"""

from __future__ import annotations

import csv
import io
import logging
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from ..model.description import RobotDescription

log = logging.getLogger(__name__)


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


# ------------------------------------------------------------------------------- recorded rows

_GROUPS = ("q", "dq", "ddq", "tau")


@dataclass(frozen=True)
class Rows:
    """Rows of a recording as logged, before cleaning (arrays (N, n) in model joint order, t (N,) s).

    ``where[k]`` is the file line (CSV, 1-based, the header is line 1) or the message index (bag) of
    row k, so that every message can point at the recording; ``unit`` says which ("line", "message").
    """

    source: str
    q: np.ndarray
    tau: np.ndarray
    dq: np.ndarray | None = None
    ddq: np.ndarray | None = None
    t: np.ndarray | None = None
    where: np.ndarray = field(default_factory=lambda: np.zeros(0, int))
    unit: str = "line"
    joint_names: tuple[str, ...] = ()

    def at(self, k: int) -> str:
        """'line 12' / 'message 11' of row k."""
        return f"{self.unit} {int(self.where[k])}" if len(self.where) > k else f"row {k}"


@dataclass(frozen=True)
class Cleaning:
    """What :func:`clean_rows` dropped from a time-stamped stream: counts and the first place of each.

    ``repeated_rows``: every value equal to the previous row's (a logger re-reading the same sample,
    whatever its stamp); ``repeated_stamps``: same time stamp as the previous row, other values;
    ``stale_torques``: all joint torques bit-identical to the previous row's while the positions
    changed (a noisy sensor never repeats exactly: a stale read).
    """

    rows: int
    repeated_rows: int = 0
    repeated_stamps: int = 0
    stale_torques: int = 0
    first: dict = field(default_factory=dict)
    kept: np.ndarray | None = field(default=None, repr=False)   # indices of the rows kept

    def where(self, rows: Rows, k: int) -> str:
        """Place in the recording ('line 12') of kept sample k."""
        return rows.at(int(self.kept[k]) if self.kept is not None else k)

    @property
    def dropped(self) -> int:
        return self.repeated_rows + self.repeated_stamps + self.stale_torques

    def describe(self) -> str:
        """One line: '20544 rows, 1366 dropped: 1131 repeated rows (first at line 40), ...'."""
        if not self.dropped:
            return f"{self.rows} rows, none repeated"
        parts = [f"{n} {what} (first at {self.first[key]})"
                 for key, what, n in (("repeated_rows", "repeated rows", self.repeated_rows),
                                      ("repeated_stamps", "rows repeating the previous time stamp",
                                       self.repeated_stamps),
                                      ("stale_torques", "stale torque reads", self.stale_torques)) if n]
        return f"{self.rows} rows, {self.dropped} dropped: " + ", ".join(parts)


def clean_rows(rows: Rows) -> tuple[Samples, Cleaning]:
    """Samples of ``rows`` with logger repeats dropped (see :class:`Cleaning`); rows without time
    stamps are separate captures and are kept as they are.

    Raises :class:`SampleDataError` naming the source when time stamps go backwards (how many,
    and where the first one is): such a stream mixes clocks or publishers and has no usable order.
    """
    n_rows = rows.q.shape[0]
    if rows.t is None or n_rows < 2:
        return _samples_of(rows, slice(None)), Cleaning(n_rows, kept=np.arange(n_rows))
    t = np.asarray(rows.t, float)
    step = np.diff(t)
    back = np.flatnonzero(step < 0)
    if back.size:
        k = int(back[0]) + 1
        raise SampleDataError(
            f"{rows.source}: {back.size} of {n_rows} time stamps go backwards (first at {rows.at(k)}: "
            f"t = {t[k]:.9g} s after t = {t[k - 1]:.9g} s at {rows.at(k - 1)}); the recording mixes clocks or "
            "publishers -- record one JointState source, or sort the rows by time if that is right")
    values = np.hstack([a for a in (rows.q, rows.dq, rows.ddq, rows.tau) if a is not None])
    same_all = np.all(values[1:] == values[:-1], axis=1)
    same_t = step == 0
    repeated_stamp = same_t & ~same_all
    stale = np.zeros(n_rows - 1, bool)
    if rows.tau.shape[1] >= 2:
        stale = ~same_all & ~same_t & np.all(rows.tau[1:] == rows.tau[:-1], axis=1) & \
            np.any(rows.q[1:] != rows.q[:-1], axis=1)
    first = {}
    for key, mask in (("repeated_rows", same_all), ("repeated_stamps", repeated_stamp), ("stale_torques", stale)):
        if mask.any():
            first[key] = rows.at(int(np.argmax(mask)) + 1)
    keep = np.concatenate([[True], ~(same_all | repeated_stamp | stale)])
    report = Cleaning(n_rows, int(same_all.sum()), int(repeated_stamp.sum()), int(stale.sum()), first,
                      np.flatnonzero(keep))
    if report.dropped:
        log.info("%s: %s", rows.source, report.describe())
    return _samples_of(rows, keep), report


def _samples_of(rows: Rows, index) -> Samples:
    def pick(a):
        return None if a is None else np.asarray(a)[index]

    try:
        return Samples(pick(rows.q), pick(rows.tau), pick(rows.dq), pick(rows.ddq), pick(rows.t), rows.joint_names)
    except SampleDataError as exc:
        raise SampleDataError(f"{rows.source}: {exc}") from exc


# ---------------------------------------------------------------------------------------------- CSV

_COL = re.compile(r"^(q|tau|dq|ddq)(\d+)$")
_BINARY_MAGIC = {b"SQLite format 3\x00": "a rosbag2 sqlite3 storage file (.db3)",
                 b"\x89MCAP": "a rosbag2 MCAP storage file (.mcap)"}


def binary_kind(path: Path) -> str | None:
    """What a known binary recording file is (by its first bytes), or None."""
    try:
        with Path(path).open("rb") as fh:
            head = fh.read(16)
    except OSError:
        return None
    return next((what for magic, what in _BINARY_MAGIC.items() if head.startswith(magic)), None)


def read_csv_rows(path: str | Path, desc: RobotDescription | None = None) -> Rows:
    """The rows of a CSV recording (format in the module docstring), not yet cleaned.

    Errors (:class:`SampleDataError`) name the file, the line (1-based, the header is line 1) and
    the column; a binary file (e.g. a rosbag2 .db3 read as CSV) is named as such.
    """
    path = Path(path)
    if not path.exists():
        raise SampleDataError(f"{path}: no such file")
    if path.is_dir():
        raise SampleDataError(f"{path}: is a directory, not a CSV file")
    kind = binary_kind(path)
    if kind is not None:
        raise SampleDataError(f"{path}: this is {kind}, not a CSV file; read it as a rosbag "
                              "(payload_estimation.identification.recording.load_recording)")
    raw = path.read_bytes()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        raise SampleDataError(f"{path}: not a text CSV file (line {line}, byte {exc.start}: 0x{raw[exc.start]:02x} is "
                              "not UTF-8 text); a recording must be a CSV file or a rosbag2 directory, .db3 or "
                              ".mcap file") from None
    try:
        reader = csv.reader(io.StringIO(text, newline=""))
        rows, lines = [], []
        for row in reader:
            if any(c.strip() for c in row):
                rows.append(row)
                lines.append(reader.line_num)
    except csv.Error as exc:
        raise SampleDataError(f"{path}: not a readable CSV file ({exc})") from None
    if not rows:
        raise SampleDataError(f"{path}: empty file (expected a header row q1..qn, tau1..taun)")
    header = [h.strip() for h in rows[0]]
    groups: dict[str, dict[int, int]] = {g: {} for g in _GROUPS}
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
    data_rows, data_lines = rows[1:], lines[1:]
    if not data_rows:
        raise SampleDataError(f"{path}: header but no data rows")
    used = sorted({c for g in groups.values() for c in g.values()} | ({t_col} if t_col is not None else set()))
    for r, row in enumerate(data_rows):
        if len(row) != len(header):
            raise SampleDataError(f"{path}: line {data_lines[r]} has {len(row)} fields, header has {len(header)}")
    values = _parse_numbers(path, header, data_rows, data_lines, used)
    col = {c: i for i, c in enumerate(used)}

    def block(g):
        cols = groups[g]
        return values[:, [col[cols[k]] for k in range(1, n + 1)]] if cols else None

    return Rows(str(path), block("q"), block("tau"), block("dq"), block("ddq"),
                values[:, col[t_col]] if t_col is not None else None, np.asarray(data_lines, int), "line",
                desc.joint_names if desc is not None else ())


def _parse_numbers(path: Path, header: list[str], rows: list[list[str]], lines: list[int],
                   used: list[int]) -> np.ndarray:
    """(N, len(used)) floats of the used columns; errors name the line and column of the first bad cell."""
    cells = [[row[c] for c in used] for row in rows]
    try:
        values = np.array(cells, dtype=float)
    except ValueError:
        values = None
    if values is not None and np.all(np.isfinite(values)):
        return values
    for r, row in enumerate(cells):
        for i, cell in enumerate(row):
            try:
                v = float(cell)
            except ValueError:
                raise SampleDataError(
                    f"{path}: line {lines[r]}, column '{header[used[i]]}': '{cell.strip()}' is not a number"
                ) from None
            if not math.isfinite(v):
                raise SampleDataError(
                    f"{path}: line {lines[r]}, column '{header[used[i]]}': value is {cell.strip()} (NaN/inf)")
    raise AssertionError("unreachable: every cell parsed")  # pragma: no cover


def load_csv(path: str | Path, desc: RobotDescription | None = None) -> Samples:
    """Samples of a CSV file: :func:`read_csv_rows` then :func:`clean_rows` (repeats dropped and
    logged). With ``desc`` the joint count is checked against the robot and its joint names are
    attached. For the cleaning and sampling report use ``recording.load_recording``."""
    return clean_rows(read_csv_rows(path, desc))[0]


def write_table(path: str | Path, header: Sequence[str], table, precision: int = 10, time_column: bool = False) -> Path:
    """Write a numeric table (N rows x len(header) columns) as CSV with a header row: the package's
    one CSV writer (samples, trajectories, residuals, validation output). Values are printed with
    ``precision`` significant digits (integers exactly); with ``time_column`` the first column is
    printed to the nanosecond (ROS stamps are ~1.7e9 s: significant digits would lose them)."""
    path = Path(path)
    a = np.asarray(table, dtype=float)
    if a.ndim != 2 or a.shape[1] != len(header):
        raise SampleDataError(f"{path}: table of shape {a.shape} for {len(header)} columns")
    with path.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(list(header))
        for row in a:
            cells = [f"{v:.{precision}g}" for v in row]
            if time_column:
                cells[0] = f"{row[0]:.9f}"
            w.writerow(cells)
    return path


def save_csv(samples: Samples, path: str | Path, precision: int = 10) -> Path:
    """Write ``samples`` in the CSV format read by :func:`load_csv`."""
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
    return write_table(path, header, np.hstack(cols), precision, time_column=samples.t is not None)


# ---------------------------------------------------------------------------------- sample selection

STREAM_MAX_STEP = 0.1
"""s: neighbours farther apart than this are separate captures, not a stream; their position
difference is not a velocity (a file of static captures has no dq columns and seconds between rows)."""


def position_speeds(samples: Samples, max_step: float = STREAM_MAX_STEP) -> tuple[np.ndarray, int]:
    """(|d q / dt| (N, n) rad/s, number of isolated samples) from positions and time stamps.

    Differences are taken only between neighbours at most ``max_step`` s apart (a recorded stream);
    a sample with no such neighbour is a separate capture whose motion cannot be judged from
    positions: its speed is 0 and it is counted.
    """
    q, t = samples.q, samples.t
    n_s = q.shape[0]
    speed = np.zeros_like(q)
    if t is None or n_s < 2:
        return speed, n_s
    dt = np.diff(t)
    ok = dt <= max_step
    v = np.abs(np.diff(q, axis=0)) / dt[:, None]
    acc, cnt = np.zeros_like(q), np.zeros(n_s)
    acc[:-1][ok] += v[ok]
    cnt[:-1][ok] += 1
    acc[1:][ok] += v[ok]
    cnt[1:][ok] += 1
    has = cnt > 0
    speed[has] = acc[has] / cnt[has, None]
    return speed, int((~has).sum())


def _speeds(samples: Samples, what: str) -> np.ndarray:
    if samples.dq is not None:
        return np.abs(samples.dq)
    if samples.t is not None:
        speed, isolated = position_speeds(samples)
        if isolated:
            log.info("%s: %d of %d samples have no neighbour within %g s (separate captures): taken as at rest",
                     what, isolated, samples.n_samples, STREAM_MAX_STEP)
        return speed
    raise SampleDataError(f"{what} needs velocities dq or time stamps t to judge motion")


def static_mask(samples: Samples, max_speed: float) -> np.ndarray:
    """Boolean (N,): samples where every joint speed is <= ``max_speed`` (rad/s)."""
    if not max_speed > 0:
        raise SampleDataError(f"max_speed must be > 0 rad/s, got {max_speed}")
    return np.all(_speeds(samples, "select_static") <= max_speed, axis=1)


def select_static(samples: Samples, max_speed: float = 0.01) -> Samples:
    """Keep only the static samples (all joint speeds <= ``max_speed`` rad/s); error if none."""
    mask = static_mask(samples, max_speed)
    if not mask.any():
        raise NotStaticError(f"none of the {samples.n_samples} samples is static (all joints <= {max_speed} rad/s)")
    return samples.subset(mask)


def check_static(samples: Samples, max_speed: float = 0.01) -> Samples:
    """Raise :class:`NotStaticError` naming the first moving sample and joint; return ``samples``.

    Speeds are the recorded dq, else position differences within a stream (:func:`position_speeds`:
    rows seconds apart are separate captures, not motion); without either nothing can be judged.
    """
    if samples.dq is None and samples.t is None:
        return samples
    dq = _speeds(samples, "check_static")
    bad = dq > max_speed
    if bad.any():
        k, j = np.argwhere(bad)[0]
        source = "recorded" if samples.dq is not None else "from positions and time stamps"
        raise NotStaticError(
            f"sample {k} is not static: joint {samples.joint_names[j]} moves at {dq[k, j]:.4g} rad/s ({source}; "
            f"limit {max_speed} rad/s); {int(bad.any(axis=1).sum())} of {samples.n_samples} samples move. "
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
    dq = _speeds(samples, "discard_near_zero_velocity")
    cols = list(range(samples.n_joints)) if joints is None else list(joints)
    keep = ~near_zero_velocity_mask(dq[:, cols], min_speed).any(axis=1)
    if not keep.any():
        raise SampleDataError(f"every sample has a joint slower than {min_speed} rad/s")
    return samples.subset(keep)


__all__ = [
    "STREAM_MAX_STEP",
    "Cleaning",
    "NotStaticError",
    "Rows",
    "SampleDataError",
    "Samples",
    "binary_kind",
    "check_static",
    "clean_rows",
    "discard_near_zero_velocity",
    "load_csv",
    "near_zero_velocity_mask",
    "position_speeds",
    "read_csv_rows",
    "save_csv",
    "select_static",
    "static_mask",
    "write_table",
]
