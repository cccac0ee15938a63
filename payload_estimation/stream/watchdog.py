"""Loss of a stream judged on the wall clock (a stopped simulator stops ``/clock`` too)."""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import PayloadEstimationError


class WatchdogConfigError(PayloadEstimationError):
    """A watchdog setting that cannot work (the message names it)."""


@dataclass
class StreamWatchdog:
    """Last receipt of a stream on the caller's monotonic clock (s), and whether it is lost.

    timeout: s without a sample after which the stream counts as lost. ``losses`` counts the
    transitions to lost (each one a separate outage).
    """

    timeout: float = 0.5
    last: float | None = None
    losses: int = 0
    _lost: bool = False

    def __post_init__(self):
        if not self.timeout > 0:
            raise WatchdogConfigError(f"watchdog timeout must be > 0 s, got {self.timeout}")

    def feed(self, wall: float) -> bool:
        """A sample arrived at ``wall``; True if the stream had been lost (it is back now)."""
        back = self._lost
        self.last, self._lost = wall, False
        return back

    def age(self, wall: float) -> float | None:
        """s since the last sample, None if none arrived yet."""
        return None if self.last is None else wall - self.last

    def lost(self, wall: float) -> bool:
        """True once no sample arrived for ``timeout`` s (or none ever); counts new outages."""
        age = self.age(wall)
        lost = age is None or age > self.timeout
        if lost and not self._lost and self.last is not None:
            self.losses += 1
        self._lost = lost and self.last is not None
        return lost


__all__ = ["StreamWatchdog"]
