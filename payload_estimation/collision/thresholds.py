"""Detection thresholds from a contact-free recording of the arm's own motion.

The threshold floor T_j (the monitor's ``thresholds``, N m per joint) is its sensitivity: a contact whose
joint torque stays below T_j on every joint is not detected (a 40 N push near the base or along a joint axis
puts less than paper 000's 6 N m on every joint). 6 N m is what a data-sheet model needs; on an arm whose
model keeps the residual small (identified, or a calibrated gravity model) the floor can follow the residual
the arm actually shows:

- :func:`calibrate_thresholds` — T_j = max(minimum, safety x max |r_j|) over a contact-free recording.
  ``safety`` 2: on the real LWR 4+ logs the identified model's largest |r_j| on a log it has never seen is
  up to 1.8x the largest on another log (docs/bench/residual_real.md). ``minimum`` 2.5 N m: a margin for what
  no recording of the moves shows (the online estimate's error beyond the σ the thresholds widen by, a drifting
  offset). The grasp itself is not covered here: inside an announced window the monitor keeps at least 6 N m
  (:class:`.payload_change.WatchConfig` ``window_floor``);
- :class:`ThresholdRecorder` — the same rule on the live residual (``collision_monitor``'s
  ``~/start_threshold_calibration`` ... ``~/finish_threshold_calibration``): running maxima, O(n) memory for any
  duration; a residual above :data:`CONTACT_CHECK` refuses the recording as not contact-free;
- :func:`calibrate_envelope` — a speed-dependent envelope margin_j + speed_j |dq_j| that raises the
  thresholds only during fast motion, for an arm whose model error grows with speed;
- :func:`observer_coverage` — how much of a recording the momentum observer integrated: it holds its residual over
  every step longer than its gap limit (:class:`.observer.MomentumObserver` ``max_gap``, 0.1 s by default), so a
  recording sampled slower than that (static captures, a 2 Hz log) shows a residual that never moves. A replay
  whose steps are mostly gaps is refused (:meth:`ObserverCoverage.check`), and a calibration whose recorded time
  is more than :data:`CALIBRATION_GAP_FRACTION` gaps (:func:`calibrate_thresholds`).

Units: residual N m, time s, dq rad/s; joint order: the model's.
"""

from __future__ import annotations

import datetime
import math
from dataclasses import dataclass

import numpy as np
import yaml

from .detector import DetectorInputError

THRESHOLD_SAFETY = 2.0
THRESHOLD_MINIMUM = 2.5  # N m
REST_SPEED = 0.05  # rad/s
CONTACT_CHECK = 6.0  # N m: paper 000's threshold; a live recording whose |r| exceeds it is not contact-free
RECORD_GAP = 0.1  # s: a longer step between live samples (a stream gap, a restart) adds no recorded time
GAP_REFUSE_FRACTION = 0.5  # of the steps: a replay with more of them gaps shows no residual (ObserverCoverage.check)
CALIBRATION_GAP_FRACTION = 0.05  # of the recorded time: more of it in gaps refuses a calibration
SETTLE_TIME_CONSTANTS = 5.0  # a replay shorter than this many 1/K (the residual's time constant) shows nothing


@dataclass(frozen=True)
class ObserverCoverage:
    """How much of a recording the momentum observer integrated: of its ``steps`` (between successive samples)
    it held the residual over ``gaps`` (steps longer than its gap limit: :attr:`.observer.MomentumObserver.gaps`),
    ``gap_time`` s of the ``duration`` s; ``median_step`` s the recording's typical step, ``max_gap`` s the
    observer's limit (a step longer than it is always a gap)."""

    steps: int
    gaps: int
    gap_time: float
    duration: float
    median_step: float
    max_gap: float

    @property
    def gap_fraction(self) -> float:
        """Fraction of the steps that were gaps (0 without steps)."""
        return self.gaps / self.steps if self.steps else 0.0

    @property
    def gap_time_fraction(self) -> float:
        """Fraction of the duration spent in gaps (0 for a zero duration)."""
        return self.gap_time / self.duration if self.duration > 0 else 0.0

    def refusal(self) -> str | None:
        """Why the residual of this recording means nothing (more than :data:`GAP_REFUSE_FRACTION` of its steps
        were gaps: the observer held r over them instead of integrating), in a line; None when it is usable."""
        if not self.gap_fraction > GAP_REFUSE_FRACTION:
            return None
        held = (f"it held its residual over {self.gaps} of the {self.steps} steps ({self.gap_fraction:.0%}) instead "
                "of integrating them, so the residual shows nothing")
        if self.median_step > self.max_gap:
            head = (f"median sample interval {self.median_step:.3g} s is longer than the momentum observer's gap limit "
                    f"of {self.max_gap:g} s: {held}")
        else:
            head = (f"{self.gaps} of the {self.steps} steps were longer than the momentum observer's gap limit "
                    f"(at most {self.max_gap:g} s, less on a stream whose typical step is shorter; median sample "
                    f"interval {self.median_step:.3g} s): {held}")
        return (f"{head}. The observer needs the joint-state stream at its own rate: every step shorter than "
                f"{self.max_gap:g} s (over {1.0 / self.max_gap:.3g} Hz), 100 Hz or more for a residual that follows a "
                "contact")

    def warning(self) -> str | None:
        """A line on the gaps there were, when some but not most steps were gaps; None otherwise."""
        if self.gaps == 0 or self.refusal() is not None:
            return None
        return (f"the momentum observer held its residual over {self.gaps} of the {self.steps} steps "
                f"({self.gap_time:.3f} s of {self.duration:.3f} s): steps longer than its gap limit (at most "
                f"{self.max_gap:g} s) were not integrated; a contact inside them shows only after")

    def check(self) -> ObserverCoverage:
        """Self, or :class:`DetectorInputError` with :meth:`refusal`."""
        why = self.refusal()
        if why is not None:
            raise DetectorInputError(why)
        return self


def replay_too_short(t, gains) -> str | None:
    """Why a recording at times ``t`` (N,) s is too short for the momentum observer with ``gains`` (1/s, one or per
    joint), in a line: shorter than its settling time (:data:`SETTLE_TIME_CONSTANTS` / the smallest gain; a single
    sample is 0 s long); None when it is long enough (its steps are judged by :func:`observer_coverage`).
    Replayed anyway, such a recording reports '0 collision events' about nothing (a noise-free CSV read as one
    row did)."""
    t = np.asarray(t, float)
    n = int(t.size)
    duration = float(t[-1] - t[0]) if n else 0.0
    gain = float(np.min(np.atleast_1d(np.asarray(gains, float))))
    settle = SETTLE_TIME_CONSTANTS / gain
    if duration >= settle:
        return None
    return (f"{n} sample(s) over {duration:.3f} s is too short for the momentum observer: its residual needs at "
            f"least {settle:.3g} s ({SETTLE_TIME_CONSTANTS:g} / its smallest gain of {gain:g}/s) to show a collision, "
            "so '0 collision events' would say nothing")


def observer_coverage(t, gap=None, max_gap: float = RECORD_GAP) -> ObserverCoverage:
    """:class:`ObserverCoverage` of a recording at times ``t`` (N,) s. ``gap`` (N,) bool: True at the samples the
    observer reached over a gap (its :attr:`.observer.MomentumObserver.gaps` grew at that update); None: every
    step longer than ``max_gap`` s (the observer's limit at its longest; it also takes steps over ``gap_steps``
    times its typical step as gaps, which only its own count shows). Steps that do not go forward in time
    (samples the observer skips) count as neither."""
    t = np.asarray(t, float)
    if t.ndim != 1:
        raise DetectorInputError(f"t must be a (N,) array of time stamps (s), got shape {t.shape}")
    if not (np.isfinite(max_gap) and max_gap > 0):
        raise DetectorInputError(f"max_gap must be > 0 s, got {max_gap}")
    h = np.diff(t)
    fwd = np.isfinite(h) & (h > 0)
    if gap is None:
        held = fwd & (h > max_gap)
    else:
        g = np.asarray(gap, bool)
        if g.shape != t.shape:
            raise DetectorInputError(f"gap must be one flag per sample, shape {t.shape}, got {g.shape}")
        held = fwd & g[1:]
    steps = int(fwd.sum())
    duration = float(h[fwd].sum())
    median = float(np.median(h[fwd])) if steps else 0.0
    return ObserverCoverage(steps, int(held.sum()), float(h[held].sum()), duration, median, float(max_gap))


@dataclass(frozen=True)
class ThresholdCalibration:
    """Thresholds T_j (N m) calibrated on a contact-free recording: T_j = max(minimum, safety x peak_j),
    peak_j the largest |r_j| (N m) over ``samples`` samples spanning ``duration`` s of observed time; ``still``: the
    joints (0-based) that never moved faster than the rest speed, whose T_j covers the model's error at rest only;
    ``gap_time`` s: time the observer held its residual over (stream gaps), not in ``duration``."""

    thresholds: np.ndarray
    peak: np.ndarray
    safety: float
    minimum: float
    samples: int
    duration: float
    still: tuple[int, ...] = ()
    gap_time: float = 0.0

    def to_dict(self) -> dict:
        return {"thresholds": [round(float(x), 3) for x in self.thresholds],
                "peak_abs_residual": [round(float(x), 4) for x in self.peak], "safety": self.safety,
                "minimum": self.minimum, "samples": self.samples, "duration": round(self.duration, 3),
                "gap_time": round(self.gap_time, 3), "joints_not_moved": [j + 1 for j in self.still]}

    def lines(self, joint_names: tuple[str, ...] | None = None) -> list[str]:
        """What a person reads: per joint the largest |r| and the threshold, then what to check."""
        names = joint_names or tuple(f"joint {j + 1}" for j in range(self.thresholds.size))
        gaps = f"; {self.gap_time:.3g} s of stream gaps not observed" if self.gap_time > 0 else ""
        out = [f"thresholds calibrated on {self.duration:.1f} s ({self.samples} samples{gaps}) without contact: "
               f"T = max({self.minimum:g} N m, {self.safety:g} x the largest |r|)"]
        for j, name in enumerate(names):
            why = "minimum" if self.thresholds[j] <= self.minimum else f"{self.safety:g} x |r|"
            out.append(f"  {name}: largest |r| {self.peak[j]:.2f} N m -> threshold {self.thresholds[j]:.2f} N m "
                       f"({why})")
        if self.still:
            out.append("  not moved in the recording (their threshold covers the model's error at rest only; record "
                       "moves of these joints too): " + ", ".join(names[j] for j in self.still))
        return out

    def params_file(self, source: str = "", node: str = "collision_monitor") -> str:
        """A ROS 2 parameter file giving ``node`` (any namespace) these thresholds (``--params-file``)."""
        doc = {f"/**/{node}": {"ros__parameters": {"thresholds": self.to_dict()["thresholds"]}}}
        gaps = f"; {self.gap_time:.3g} s of stream gaps not observed" if self.gap_time > 0 else ""
        head = (f"# collision_monitor thresholds (N m per joint) calibrated {datetime.date.today()} on "
                f"{source or 'a contact-free recording'}:\n# max({self.minimum:g} N m, {self.safety:g} x the largest "
                f"|residual| over {self.duration:.1f} s{gaps}). Re-calibrate after a change of model, tool or task.\n")
        return head + yaml.safe_dump(doc, default_flow_style=None, sort_keys=False)


def _contact_free_run(r, dq, safety: float) -> tuple[np.ndarray, np.ndarray]:
    """(r, |dq|) of a contact-free run as float arrays, checked: both (N, n) with N >= 1, ``safety`` >= 1."""
    r = np.asarray(r, float)
    v = np.abs(np.asarray(dq, float))
    if r.ndim != 2 or r.shape != v.shape or r.shape[0] == 0:
        raise DetectorInputError(f"r and dq must be (N, n) arrays of the same shape, got {r.shape} and {v.shape}")
    _check_safety(safety)
    return r, v


def _check_safety(safety: float) -> None:
    if not (np.isfinite(safety) and safety >= 1):
        raise DetectorInputError(f"safety must be >= 1, got {safety}")


def calibrate_thresholds(t, r, dq, safety: float = THRESHOLD_SAFETY, minimum: float = THRESHOLD_MINIMUM,
                         rest_speed: float = REST_SPEED, gap=None, max_gap: float = RECORD_GAP) -> ThresholdCalibration:
    """Thresholds from the residual ``r`` (N, n) N m of a contact-free recording at times ``t`` (N,) s with joint
    velocities ``dq`` (N, n) rad/s (module docstring). The recording must move (some joint faster than
    ``rest_speed``): the thresholds cover what the model misses during the motion, which a rest does not show.

    ``gap`` (N,) bool, ``max_gap`` s: where the observer held its residual over a stream gap, as
    :func:`observer_coverage` takes them (None: steps longer than ``max_gap``). A recording with more than
    :data:`CALIBRATION_GAP_FRACTION` (5 %) of its time in gaps is refused: the residual of the moves inside them
    was never observed, so its largest |r| would be too low. Below that the gap time is left out of the
    calibration's ``duration`` and reported as its ``gap_time``."""
    t = np.asarray(t, float)
    r, v = _contact_free_run(r, dq, safety)
    if t.shape != (r.shape[0],) or r.shape[0] < 2:
        raise DetectorInputError(f"t (N,) with N >= 2 samples is needed, got {t.shape} for r {r.shape}")
    for name, a in (("t", t), ("r", r), ("dq", v)):
        bad = np.argwhere(~np.isfinite(a))
        if bad.size:
            raise DetectorInputError(f"{name} is not finite at sample {bad[0][0]}"
                                     + (f", joint {bad[0][1] + 1}" if a.ndim == 2 else "") + ": a calibration "
                                     "needs every sample")
    cov = observer_coverage(t, gap, max_gap)
    if cov.gap_time_fraction > CALIBRATION_GAP_FRACTION:
        raise DetectorInputError(
            f"the momentum observer held its residual over {cov.gap_time:.3f} s of the {cov.duration:.3f} s recorded "
            f"({cov.gap_time_fraction:.0%}, {cov.gaps} of {cov.steps} steps longer than its gap limit of at most "
            f"{cov.max_gap:g} s; median sample interval {cov.median_step:.3g} s): the moves inside the gaps were never "
            f"observed, thresholds from it would be too low. Calibrate on a recording of the joint-state stream at "
            f"its own rate with at most {CALIBRATION_GAP_FRACTION:.0%} of its time in gaps")
    return _calibration(np.abs(r).max(axis=0), v.max(axis=0), int(t.size), cov.duration - cov.gap_time, safety,
                        minimum, rest_speed, cov.gap_time)


def _calibration(peak: np.ndarray, fastest: np.ndarray, samples: int, duration: float, safety: float,
                 minimum: float, rest_speed: float, gap_time: float = 0.0) -> ThresholdCalibration:
    """The rule of the module docstring from the largest |r_j| (N m) and |dq_j| (rad/s) of a checked run."""
    if not (np.isfinite(minimum) and minimum > 0):
        raise DetectorInputError(f"minimum must be > 0 N m, got {minimum}")
    moved = fastest > rest_speed
    if not moved.any():
        raise DetectorInputError(f"the recording does not move (no joint faster than {rest_speed:g} rad/s): record "
                                 "the task's own moves without contact, the thresholds must cover the model's error "
                                 "during motion")
    return ThresholdCalibration(np.maximum(minimum, safety * peak), peak.copy(), float(safety), float(minimum),
                                samples, duration, tuple(int(j) for j in np.flatnonzero(~moved)), float(gap_time))


class ThresholdRecorder:
    """The live residual of the arm's own moves, kept for :func:`calibrate_thresholds`' rule: per joint the largest
    |r| (N m) and |dq| (rad/s), the samples and the time recorded (s, steps over :data:`RECORD_GAP` not counted),
    the time left out by reason (:meth:`add`'s ``exclude``) and the first sample above ``check`` N m on any joint
    (then the recording is not contact-free: :meth:`result` refuses it)."""

    def __init__(self, n: int, check: float = CONTACT_CHECK):
        self.check = float(check)
        self.peak = np.zeros(n)
        self.fastest = np.zeros(n)
        self.samples = 0
        self.duration = 0.0
        self.excluded: dict[str, float] = {}
        self.over: tuple[float, int, float] | None = None  # (t s, joint 0-based, |r| N m) of the first sample above
        self._t: float | None = None

    def add(self, t: float, r: np.ndarray, dq: np.ndarray, exclude: str = "") -> None:
        """One live sample (s, N m, rad/s); ``exclude``: why it is left out ('' recorded), e.g. a payload being
        learnt, whose residual the monitor covers with its own widening."""
        dt = 0.0 if self._t is None or not 0.0 < t - self._t < RECORD_GAP else t - self._t
        self._t = t
        a, v = np.abs(r), np.abs(dq)
        if not exclude and not math.isfinite(a.sum() + v.sum()):  # a NaN or inf anywhere makes the sum one
            exclude = "residual or velocity not finite"
        if exclude:
            self.excluded[exclude] = self.excluded.get(exclude, 0.0) + dt
            return
        self.samples += 1
        self.duration += dt
        np.maximum(self.peak, a, out=self.peak)
        np.maximum(self.fastest, v, out=self.fastest)
        if self.over is None and self.peak.max() > self.check:  # the peak only grows: this is the first such sample
            j = int(np.argmax(a))
            self.over = (float(t), j, float(a[j]))

    def summary(self) -> str:
        """What is recorded so far, in a line."""
        out = f"{self.duration:.1f} s recorded ({self.samples} samples), largest |r| {self.peak.max():.2f} N m"
        if self.excluded:
            out += "; left out: " + ", ".join(f"{s:.1f} s {why}" for why, s in self.excluded.items())
        if self.over is not None:
            t, j, a = self.over
            out += f"; NOT contact-free (|r| {a:.2f} N m on joint {j + 1} at {t:.3f} s)"
        return out

    def result(self, safety: float = THRESHOLD_SAFETY, minimum: float = THRESHOLD_MINIMUM,
               rest_speed: float = REST_SPEED) -> ThresholdCalibration:
        """The thresholds of this recording; raises :class:`DetectorInputError` (what to do) when it is not
        contact-free, holds fewer than 2 samples or does not move."""
        _check_safety(safety)
        if self.over is not None:
            t, j, a = self.over
            raise DetectorInputError(
                f"the recording is not contact-free: the residual reached {a:.2f} N m on joint {j + 1} at t={t:.3f} s, "
                f"above the {self.check:g} N m no contact-free motion may reach (a contact, or a model that misses "
                "that much: identify the arm first)")
        if self.samples < 2:
            left = f" ({', '.join(self.excluded)})" if self.excluded else ""
            raise DetectorInputError(f"nothing recorded yet: {self.samples} sample(s){left}; move the arm through "
                                     "the task's motions while recording")
        return _calibration(self.peak, self.fastest, self.samples, self.duration, safety, minimum, rest_speed)


def calibrate_envelope(r: np.ndarray, dq: np.ndarray, safety: float = 1.5, rest_speed: float = REST_SPEED
                       ) -> tuple[np.ndarray, np.ndarray]:
    """(margin N m, speed N m s/rad) per joint such that safety x |r_j| <= margin_j + speed_j |dq_j|
    on a contact-free run: ``r`` and ``dq`` (N, n) in N m and rad/s.

    margin_j = safety x max |r_j| while |dq_j| < ``rest_speed`` (or over the whole run if the joint never
    rests); speed_j = the smallest slope that covers every faster sample above that margin.
    """
    r, v = _contact_free_run(r, dq, safety)
    r = np.abs(r)
    n = r.shape[1]
    margin = np.zeros(n)
    speed = np.zeros(n)
    for j in range(n):
        rest = v[:, j] < rest_speed
        margin[j] = safety * (r[rest, j].max() if rest.any() else r[:, j].max())
        fast = ~rest
        if fast.any():
            need = (safety * r[fast, j] - margin[j]) / v[fast, j]
            speed[j] = max(0.0, float(need.max()))
    return margin, speed


__all__ = ["CALIBRATION_GAP_FRACTION", "CONTACT_CHECK", "GAP_REFUSE_FRACTION", "SETTLE_TIME_CONSTANTS",
           "THRESHOLD_MINIMUM", "THRESHOLD_SAFETY", "ObserverCoverage", "ThresholdCalibration", "ThresholdRecorder",
           "calibrate_envelope", "calibrate_thresholds", "observer_coverage", "replay_too_short"]
