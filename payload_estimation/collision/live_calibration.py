"""Thresholds calibrated live: the residual of the arm's own moves recorded between a start and a finish.

:class:`LiveCalibration` keeps the recording in progress (:class:`.thresholds.ThresholdRecorder`); the samples the
monitor already widens its thresholds for (the payload sampler active, an announced grasp/release window) are left
out by the caller's reason. The result is the caller's to apply (the node sets its ``thresholds`` parameter, which
applies once no collision is reported). Every refusal is a :class:`CalibrationRefused` saying what to do.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import PayloadEstimationError
from .thresholds import THRESHOLD_MINIMUM, THRESHOLD_SAFETY, ThresholdCalibration, ThresholdRecorder


class CalibrationRefused(PayloadEstimationError):
    """A threshold calibration request that cannot be done now; the message says why and what to do."""


@dataclass(frozen=True)
class CalibrationConfig:
    """The rule of a finish, named as the node's ``threshold_calibration_*`` parameters (these defaults are its
    defaults): each threshold is max(``minimum`` N m, ``safety`` x the largest |residual| recorded)."""

    safety: float = THRESHOLD_SAFETY
    minimum: float = THRESHOLD_MINIMUM


class LiveCalibration:
    """The threshold calibration in progress of an arm of ``n`` joints (module docstring)."""

    def __init__(self, n: int, config: CalibrationConfig | None = None):
        self.n, self.cfg = n, config or CalibrationConfig()
        self.recorder: ThresholdRecorder | None = None  # the recording in progress

    def start(self) -> str:
        """Start recording (a recording in progress starts over); the log line."""
        old, self.recorder = self.recorder, ThresholdRecorder(self.n)
        again = "" if old is None else f" (the recording in progress, {old.summary()}, was discarded)"
        return ("threshold calibration started: move the arm through the task's motions without contact, then call "
                f"~/finish_threshold_calibration{again}")

    def cancel(self) -> str:
        """Drop the recording in progress; the log line (raises :class:`CalibrationRefused` when there is none)."""
        if self.recorder is None:
            raise CalibrationRefused("no threshold calibration in progress (~/start_threshold_calibration starts one)")
        old, self.recorder = self.recorder, None
        return f"threshold calibration cancelled ({old.summary()}); the thresholds are unchanged"

    def add(self, t: float, r: np.ndarray, dq: np.ndarray, exclude: str = "") -> None:
        """One sample (s, residual N m, dq rad/s) into the recording in progress, if any; ``exclude``: why it stays
        out ('' it goes in)."""
        if self.recorder is not None:
            self.recorder.add(t, r, dq, exclude)

    def finish(self, safety: float | None = None, minimum: float | None = None) -> ThresholdCalibration:
        """The thresholds of the recording in progress (:meth:`.thresholds.ThresholdRecorder.result`; ``safety``,
        ``minimum`` None: the config's), which ends it; raises :class:`CalibrationRefused` saying what to do: without
        a recording, when it is not contact-free (it ends: its residual cannot be used) or when it holds too little
        (it goes on)."""
        rec = self.recorder
        if rec is None:
            raise CalibrationRefused("no threshold calibration in progress: call ~/start_threshold_calibration, move "
                                     "the arm through the task's motions without contact, then finish")
        try:
            cal = rec.result(self.cfg.safety if safety is None else safety,
                             self.cfg.minimum if minimum is None else minimum)
        except PayloadEstimationError as e:
            if rec.over is not None:
                self.recorder = None
                raise CalibrationRefused(f"{e}; the thresholds are unchanged and the recording is discarded: start "
                                         "a new one") from e
            raise CalibrationRefused(f"{e}; the recording goes on ({rec.summary()})") from e
        self.recorder = None
        return cal


__all__ = ["CalibrationConfig", "CalibrationRefused", "LiveCalibration"]
