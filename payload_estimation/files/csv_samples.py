"""CSV files of joint samples, and the recorded rows they are read into.

Reading counts and drops what loggers repeat (:func:`clean_rows`); :func:`write_table` is the package's one
CSV writer. The column scheme is described in :mod:`payload_estimation.signals.samples`.
"""

from __future__ import annotations

import csv
import io
import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..model.description import RobotDescription
from ..signals.samples import SampleDataError, Samples

log = logging.getLogger(__name__)

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
    corrupt: int = 0             # rows dropped on reading: a NaN/inf or an absurd value (|x| >= CORRUPT_LIMIT)
    corrupt_first: str = ""      # the first of them: "line 12, column 'tau3': 1e300"

    def at(self, k: int) -> str:
        """'line 12' / 'message 11' of row k."""
        return f"{self.unit} {int(self.where[k])}" if len(self.where) > k else f"row {k}"


@dataclass(frozen=True)
class Cleaning:
    """What :func:`clean_rows` dropped from a time-stamped stream: counts and the first place of each.

    ``repeated_rows``: every value equal to the previous row's and the row a re-read (see :func:`clean_rows`:
    the same stamp, a repeat while the arm moved, or a stream that re-publishes each state a fixed number of
    times); ``repeated_stamps``: same time stamp as the previous row, other values; ``stale_torques``: all
    joint torques bit-identical to the previous row's while the positions changed (a noisy sensor never
    repeats exactly: a stale read). ``identical_kept``: rows equal to the previous one that are samples, kept
    (a noise-free source at rest: new stamps, nothing moved, no re-publishing pattern).
    """

    rows: int
    corrupt: int = 0
    repeated_rows: int = 0
    repeated_stamps: int = 0
    stale_torques: int = 0
    first: dict = field(default_factory=dict)
    kept: np.ndarray | None = field(default=None, repr=False)   # indices of the rows kept
    identical_kept: int = 0

    def where(self, rows: Rows, k: int) -> str:
        """Place in the recording ('line 12') of kept sample k."""
        return rows.at(int(self.kept[k]) if self.kept is not None else k)

    @property
    def dropped(self) -> int:
        return self.corrupt + self.repeated_rows + self.repeated_stamps + self.stale_torques

    def describe(self) -> str:
        """One line: '20544 rows, 1366 dropped: 1131 repeated rows (first at line 40), ...'."""
        kept = "" if not self.identical_kept else (
            f"; {self.identical_kept} rows identical to the previous one kept as samples (new stamps, the arm at "
            f"rest: a noise-free source, first at {self.first['identical_kept']})")
        if not self.dropped:
            return f"{self.rows} rows, none repeated" + kept
        parts = [f"{n} {what} (first at {self.first[key]})"
                 for key, what, n in (("corrupt", "corrupt rows (NaN/inf or an absurd value)", self.corrupt),
                                      ("repeated_rows", "repeated rows", self.repeated_rows),
                                      ("repeated_stamps", "rows repeating the previous time stamp",
                                       self.repeated_stamps),
                                      ("stale_torques", "stale torque reads", self.stale_torques)) if n]
        return f"{self.rows} rows, {self.dropped} dropped: " + ", ".join(parts) + kept


MOVING = 1e-2
"""rad/s: a row repeating a state the arm reached at more than this (from the state before) is a re-read."""
RUNS = 8
"""Consecutive states each logged the same number of times (>= 2): a stream that re-publishes its states."""
REST_SPAN = 0.05
"""s: a state repeated over a shorter time is a re-read (an arm at rest stays there longer than this)."""


def _re_reads(t: np.ndarray, q: np.ndarray, same: np.ndarray) -> np.ndarray:
    """Which rows equal to the previous one (``same`` (N-1,)) are re-reads rather than samples: the rule of the
    live input (:mod:`payload_estimation.stream.driver_stream`) on a whole recording. A row is a re-read when the
    stream re-publishes (somewhere ``RUNS`` consecutive states were logged the same number of times, >= 2: e.g.
    lbr_fri_ros2_stack's 100 Hz FRI state published 4 times at 400 Hz), when the state it repeats was reached
    moving (a real sensor never repeats its 14 values, and a moving arm never stands still for one sample), or
    when the state lasts less than ``REST_SPAN`` (a re-read near a turning point, where the arm is slow). A
    noise-free source at rest repeats its state without end under advancing stamps: those rows are samples."""
    n = q.shape[0]
    starts = np.flatnonzero(np.concatenate([[True], ~same]))  # first row of each distinct state
    lengths = np.diff(np.append(starts, n))
    done = lengths[:-1]  # the last state's run may have been cut by the end of the recording
    republishes = any(done[k] >= 2 and np.all(done[k:k + RUNS] == done[k])
                      for k in range(max(0, done.size - RUNS + 1)))
    if republishes:
        return same.copy()
    dt = np.diff(t[starts])
    with np.errstate(divide="ignore", invalid="ignore"):
        speed = np.max(np.abs(np.diff(q[starts], axis=0)), axis=1) / dt
    moved = np.concatenate([[False], ~(speed <= MOVING)])  # per state: reached moving (or over no time)
    moved |= t[starts + lengths - 1] - t[starts] < REST_SPAN  # per state: too brief for an arm at rest
    state = np.cumsum(np.concatenate([[True], ~same])) - 1  # each row's state
    return same & moved[state[1:]]


def clean_rows(rows: Rows) -> tuple[Samples, Cleaning]:
    """Samples of ``rows`` with logger repeats dropped (see :class:`Cleaning`); rows without time
    stamps are separate captures and are kept as they are. A row equal to the previous one is dropped
    when it is a re-read (the same stamp, or :func:`_re_reads`), and kept as a sample otherwise (a
    noise-free source at rest: its rows repeat with advancing stamps, and a recording of it must not
    shrink to one row).

    Raises :class:`SampleDataError` naming the source when time stamps go backwards (how many,
    and where the first one is): such a stream mixes clocks or publishers and has no usable order.
    """
    n_rows = rows.q.shape[0]
    bad = {"corrupt": rows.corrupt_first} if rows.corrupt else {}
    if rows.t is None or n_rows < 2:
        return _samples_of(rows, slice(None)), Cleaning(n_rows + rows.corrupt, rows.corrupt, first=bad,
                                                        kept=np.arange(n_rows))
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
    repeated = same_all & (same_t | _re_reads(t, np.asarray(rows.q, float), same_all))
    identical = same_all & ~repeated
    repeated_stamp = same_t & ~same_all
    stale = np.zeros(n_rows - 1, bool)
    if rows.tau.shape[1] >= 2:
        stale = ~same_all & ~same_t & np.all(rows.tau[1:] == rows.tau[:-1], axis=1) & \
            np.any(rows.q[1:] != rows.q[:-1], axis=1)
    first = dict(bad)
    for key, mask in (("repeated_rows", repeated), ("repeated_stamps", repeated_stamp), ("stale_torques", stale),
                      ("identical_kept", identical)):
        if mask.any():
            first[key] = rows.at(int(np.argmax(mask)) + 1)
    keep = np.concatenate([[True], ~(repeated | repeated_stamp | stale)])
    report = Cleaning(n_rows + rows.corrupt, rows.corrupt, int(repeated.sum()), int(repeated_stamp.sum()),
                      int(stale.sum()), first, np.flatnonzero(keep), int(identical.sum()))
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


_COL = re.compile(r"^(q|tau|dq|ddq)_?(\d+)$")
CORRUPT_LIMIT = 1e6
"""|value| at or above which a cell is corrupt: no joint angle (rad), speed or torque (N m) of an arm reaches it."""


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
                              "(payload_estimation.files.recording.load_recording)")
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
    if 0 in groups["q"]:  # numbered from 0 (q_0 .. q_6, tau_0 ..: e.g. the lbr-stack's recordings)
        groups = {g: {k + 1: c for k, c in cols.items()} for g, cols in groups.items()}
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
    limit = np.array([np.inf if c == t_col else CORRUPT_LIMIT for c in used])  # stamps: epoch seconds
    def cell(r: int, c: int) -> str:
        return f"line {data_lines[r]}, column '{header[used[c]]}': {data_rows[r][used[c]].strip()}"

    corrupt, corrupt_first = corrupt_rows(values, limit, cell, str(path), "data row")
    if corrupt.any():
        values = values[~corrupt]
        data_lines = [ln for ln, bad in zip(data_lines, corrupt) if not bad]
    col = {c: i for i, c in enumerate(used)}

    def block(g):
        cols = groups[g]
        return values[:, [col[cols[k]] for k in range(1, n + 1)]] if cols else None

    return Rows(str(path), block("q"), block("tau"), block("dq"), block("ddq"),
                values[:, col[t_col]] if t_col is not None else None, np.asarray(data_lines, int), "line",
                desc.joint_names if desc is not None else (), int(corrupt.sum()), corrupt_first)


def corrupt_rows(values: np.ndarray, limit: np.ndarray, where, source: str, what: str) -> tuple[np.ndarray, str]:
    """Rows of ``values`` (N, m) holding a NaN/inf or a value with |x| >= ``limit`` (per column): the mask and
    the first such cell named by ``where(row, column)`` ("" if none). Some: logged as dropped; all: a
    :class:`SampleDataError` naming ``source``, the ``what`` ("data row", "message") and the first."""
    ok = np.isfinite(values) & (np.abs(values) < limit)
    bad = ~np.all(ok, axis=1)
    if not bad.any():
        return bad, ""
    r = int(np.argmax(bad))
    first = where(r, int(np.argmax(~ok[r])))
    if bad.all():
        raise SampleDataError(f"{source}: every {what} holds a NaN/inf or an absurd value (first at {first})")
    log.warning("%s: %d corrupt %s(s) dropped (NaN/inf or |value| >= %g), first at %s", source, int(bad.sum()),
                what, CORRUPT_LIMIT, first)
    return bad, first


def _parse_numbers(path: Path, header: list[str], rows: list[list[str]], lines: list[int],
                   used: list[int]) -> np.ndarray:
    """(N, len(used)) floats of the used columns (NaN/inf kept: the caller drops such rows); a cell that is
    not a number is an error naming its line and column."""
    cells = [[row[c] for c in used] for row in rows]
    try:
        return np.array(cells, dtype=float)
    except ValueError:
        pass
    for r, row in enumerate(cells):
        for i, cell in enumerate(row):
            try:
                float(cell)
            except ValueError:
                raise SampleDataError(
                    f"{path}: line {lines[r]}, column '{header[used[i]]}': '{cell.strip()}' is not a number"
                ) from None
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


def write_samples_csv(samples: Samples, path: str | Path, precision: int = 10) -> Path:
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


__all__ = ["Cleaning", "Rows", "binary_kind", "clean_rows", "load_csv", "read_csv_rows", "write_samples_csv",
           "write_table"]
