"""Score collision detections against known (injected) contacts: detection, delay, false alarms."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class DetectionScore:
    """Per contact: detection time (s) or NaN and delay (s); detections matching no contact."""

    detection_times: tuple[float, ...]
    delays: tuple[float, ...]
    false_alarms: tuple[float, ...]

    @property
    def detected(self) -> int:
        return int(np.sum(np.isfinite(self.detection_times)))


def score_detections(contacts: Sequence[tuple[float, float]], detections: Sequence[float],
                     window: float = 0.5) -> DetectionScore:
    """Match each contact (start, end) s to the first detection in [start, end + window].

    Every detection matching no contact is a false alarm. Times in one clock (s).
    """
    dets = sorted(float(t) for t in detections)
    used: set[int] = set()
    times, delays = [], []
    for start, end in contacts:
        match = next((i for i, t in enumerate(dets) if i not in used and start <= t <= end + window), None)
        if match is None:
            times.append(float("nan"))
            delays.append(float("nan"))
        else:
            used.add(match)
            # further detections inside the same contact window are the same contact, not false alarms
            used.update(i for i, t in enumerate(dets) if start <= t <= end + window)
            times.append(dets[match])
            delays.append(dets[match] - start)
    false = tuple(t for i, t in enumerate(dets) if i not in used)
    return DetectionScore(tuple(times), tuple(delays), false)


def time_above(t: np.ndarray, r: np.ndarray, threshold: float | np.ndarray,
               exclude: Sequence[tuple[float, float]] = ()) -> float:
    """Seconds during which any |r_j| exceeds its threshold, outside the ``exclude`` intervals.

    ``t`` (N,) s, ``r`` (N, n) N m; each sample counts for the interval to the next one.
    """
    t = np.asarray(t, float)
    if t.size < 2:
        return 0.0
    above = np.any(np.abs(r) > np.asarray(threshold, float), axis=1)[:-1]
    keep = np.ones(t.size - 1, bool)
    for a, b in exclude:
        keep &= ~((t[:-1] >= a) & (t[:-1] <= b))
    return float(np.sum(np.diff(t)[above & keep]))
