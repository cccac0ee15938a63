"""Time faults of a sample stream: stamps that jump ahead or back, streams that start over.

A driver or simulator stamps its samples on its own clock (``header.stamp``; sim time under
``use_sim_time``). Consumers that integrate over time (the momentum observer) or judge windows of
samples (static checks) need stamps that increase with the wall clock. :class:`StampGuard` compares
each sample's stamp step with the wall-clock step since the last accepted sample and classifies it:

- ``ACCEPT`` — consistent with the stream so far;
- ``HOLD`` — inconsistent: a stamp more than ``max_jump`` s ahead of the wall-clock progression, or
  not after the last accepted stamp. Held out of the consumer; it may be a single bad stamp (the
  stream goes on as before: counted as ``rejected``) or the first sample of a restarted stream;
- ``RESTART`` — ``confirm`` consecutive held samples agree with each other (their stamps increase
  with the wall clock): the stream started over (driver restart, ``/clock`` reset, a clock step).
  The consumer re-initialises from this sample; earlier history is invalid.

A stream that stalls and then delivers a backlog (wall time passes, stamps barely move) is not a
fault. Only the stamp's *progression* is judged, so a robot clock offset from the PC's is fine.
Wall times are the consumer's monotonic clock (s).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from ..errors import PayloadEstimationError


class StampGuardConfigError(PayloadEstimationError):
    """A stamp-guard setting that cannot work (the message names it)."""


class StampVerdict(enum.Enum):
    ACCEPT = "accept"
    HOLD = "hold"
    RESTART = "restart"


@dataclass
class StampCounters:
    """What the guard has seen since start: accepted samples, held samples, isolated bad stamps
    dropped (``rejected``), restarts taken, and the last fault as text (for status and logs)."""

    accepted: int = 0
    held: int = 0
    rejected: int = 0
    restarts: int = 0
    last_fault: str = ""


class StampGuard:
    """Classify stamps of one stream (see the module docstring).

    max_jump: s a stamp may run ahead of the wall clock since the last accepted sample (a jump
    further ahead, or any step back, is a fault); confirm: consecutive mutually consistent held
    samples that make a restart.
    """

    def __init__(self, max_jump: float = 1.0, confirm: int = 20):
        if not max_jump > 0:
            raise StampGuardConfigError(f"max_jump must be > 0 s, got {max_jump}")
        if confirm < 1:
            raise StampGuardConfigError(f"confirm must be >= 1 sample, got {confirm}")
        self.max_jump = float(max_jump)
        self.confirm = int(confirm)
        self.counters = StampCounters()
        self._last: tuple[float, float] | None = None  # accepted (stamp, wall)
        self._candidate: tuple[float, float] | None = None  # newest held (stamp, wall)
        self._candidate_count = 0

    @property
    def last_stamp(self) -> float | None:
        """Stamp (s) of the last accepted sample, None before the first."""
        return None if self._last is None else self._last[0]

    def reset(self) -> None:
        """Forget the stream (counters are kept): the next sample is accepted as a fresh start."""
        self._last = None
        self._candidate = None
        self._candidate_count = 0

    def _follows(self, ref: tuple[float, float], stamp: float, wall: float) -> bool:
        t0, w0 = ref
        return stamp > t0 and (stamp - t0) - (wall - w0) <= self.max_jump

    def check(self, stamp: float, wall: float) -> StampVerdict:
        """Verdict for a sample stamped ``stamp`` (s) received at ``wall`` (s, monotonic)."""
        c = self.counters
        if self._last is None or self._follows(self._last, stamp, wall):
            if self._candidate is not None:
                c.rejected += self._candidate_count
                self._candidate, self._candidate_count = None, 0
            self._last = (stamp, wall)
            c.accepted += 1
            return StampVerdict.ACCEPT
        c.held += 1
        if self._candidate is not None and self._follows(self._candidate, stamp, wall):
            self._candidate_count += 1
        else:
            if self._candidate is not None:
                c.rejected += self._candidate_count
            self._candidate_count = 1
            t0 = self._last[0]
            c.last_fault = (f"stamp {stamp:.3f} s is {'ahead of' if stamp > t0 else 'not after'} the stream "
                            f"(last accepted {t0:.3f} s, {stamp - t0:+.3f} s)")
        self._candidate = (stamp, wall)
        if self._candidate_count >= self.confirm:
            c.restarts += 1
            c.last_fault = (f"stream restarted: stamps jumped from {self._last[0]:.3f} s to {stamp:.3f} s "
                            f"({self._candidate_count} consistent samples)")
            self._last, self._candidate, self._candidate_count = (stamp, wall), None, 0
            return StampVerdict.RESTART
        return StampVerdict.HOLD


__all__ = ["StampGuard", "StampVerdict", "StampCounters"]
