"""Real recordings as they are: load any format, report how they were sampled, resample them.

A logger's stamps jitter, skip samples and repeat rows; every file has its own rate. This module
turns such a recording into :class:`~.data.Samples` and says what it found:

* :func:`load_recording` -- CSV file, rosbag2 directory, or a lone ``.db3`` / ``.mcap`` file ->
  :class:`Recording` (samples + :class:`RecordingReport`: rows read, repeats dropped, rate,
  irregular steps, gaps);
* :func:`stamp_report` -- the sampling of a stream: median rate, jitter, gaps (counted, the largest
  named with its time);
* :func:`resample` -- uniform grid(s) by linear interpolation: gaps up to ``max_gap`` are bridged,
  longer ones split the recording into segments (processed separately, never filtered across);
* :func:`split_by_time` -- the first part for fitting and the rest held out.

Linear interpolation at the recording's own median rate is adequate for what identification
uses (content far below the rate, e.g. <= 6 Hz at 1 kHz).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace
from pathlib import Path

from ..model.description import RobotDescription
from ..signals.resample import StampReport, stamp_report
from ..signals.samples import SampleDataError, Samples
from ..signals.stampless import StamplessTiming, stamps_from_rate
from .csv_samples import Cleaning, clean_rows, read_csv_rows

log = logging.getLogger(__name__)

"""Relative step deviation below which a stream counts as uniformly sampled (kept as it is)."""
"""A step more than this fraction away from the median step is irregular (jitter)."""
"""A step longer than this many median steps is a gap (samples missing)."""
"""s: longest gap :func:`resample` bridges by interpolation; longer ones split the recording."""


@dataclass(frozen=True)
class RecordingReport:
    """What loading found: the source, its format, the rows dropped, the sampling of the stamps."""

    source: str
    format: str                  # "csv" or "rosbag2"
    cleaning: Cleaning
    stamps: StampReport | None   # None: no time stamps (separate captures)
    columns: tuple[str, ...] = ()
    timing: StamplessTiming | None = None   # stamps made from a given rate (a log without them)

    def lines(self) -> list[str]:
        """Human-readable lines for the command output."""
        out = [f"{self.source} ({self.format}; {', '.join(self.columns)}): {self.cleaning.describe()}"]
        if self.timing is not None:
            out.append("  " + self.timing.describe())
        out.append("  sampling: " + (self.stamps.describe() if self.stamps is not None
                                     else "no time stamps (each row a separate capture)"))
        return out

    def to_dict(self) -> dict:
        c = self.cleaning
        return {"source": self.source, "format": self.format, "columns": list(self.columns), "rows": c.rows,
                "repeated_rows": c.repeated_rows, "repeated_stamps": c.repeated_stamps,
                "stale_torques": c.stale_torques, "stamps": None if self.stamps is None else self.stamps.to_dict()}


@dataclass(frozen=True)
class Recording:
    """Samples of one recording and the report of how they were read."""

    samples: Samples
    report: RecordingReport


def load_recording(path: str | Path, desc: RobotDescription | None = None, topic: str = "joint_states",
                   rate: float | None = None) -> Recording:
    """Read a CSV file, a rosbag2 directory (with or without metadata.yaml) or a lone .db3/.mcap
    file; drop and count logger repeats; report the sampling. With ``desc`` the joints are checked
    (CSV) or mapped by name (bag) to the robot's order. A file without time stamps gets them from
    ``rate`` (Hz) when it is given, lost states found (:func:`~..signals.stampless.stamps_from_rate`);
    without it each row is a separate capture. Errors name the file."""
    from .rosbag import is_rosbag, read_rosbag_rows

    path = Path(path)
    if not path.exists():
        raise SampleDataError(f"{path}: no such file or directory")
    if is_rosbag(path):
        rows = read_rosbag_rows(path, topic, desc.joint_names if desc is not None else None)
        fmt = "rosbag2"
    else:
        rows = read_csv_rows(path, desc)
        fmt = "csv"
    samples, cleaning = clean_rows(rows)
    if desc is not None:
        samples = samples.check_robot(desc)
    stamps = timing = None
    if samples.t is None and rate is not None and samples.n_samples >= 2:
        t, timing = stamps_from_rate(samples.q, rate)
        if timing.skipped.size:
            timing = replace(timing, first_at=cleaning.where(rows, int(timing.skipped[0])))
        samples = replace(samples, t=t)
    if samples.t is not None:
        stamps = stamp_report(samples.t, lambda k: cleaning.where(rows, k))
    columns = tuple(g for g in ("t", "q", "dq", "ddq", "tau") if getattr(samples, g) is not None)
    report = RecordingReport(str(path), fmt, cleaning, stamps, columns, timing)
    for line in report.lines():
        log.info(line)
    return Recording(samples, report)


# ------------------------------------------------------------------------------------- resampling


__all__ = ["Recording", "RecordingReport", "load_recording"]
