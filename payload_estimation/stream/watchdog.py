"""Loss of a stream judged on the wall clock (a stopped simulator stops ``/clock`` too), and told apart from the
consumer's own lateness.

A consumer that did not run for a while (its executor blocked, the machine busy: issue 48) sees no sample for that
while although the stream went on: the samples wait in its queue. So the consumer also reports that it ran
(:meth:`StreamWatchdog.awake`, from its periodic check): a check that comes late marks the consumer as starved until
then, and the silence before does not count as the stream's (:meth:`StreamWatchdog.silent`). The stream is lost
once it has been silent for ``timeout`` s *while the consumer ran* — or for :data:`LOST_ANYWAY` times that, starved
or not (a consumer late at every check must still notice a stream that stopped).

The timeout itself follows the stream (:class:`StreamTimeout`): a ``joint_state_timeout`` set by the user is used as
set; left at 0 (auto) it is :data:`AUTO_PERIODS` periods of the stream's measured rate, at least :data:`AUTO_MIN`
s (and :data:`AUTO_MIN` until a rate is measured): a 1 kHz stream is lost after 0.5 s, a 25 Hz one after 2 s, not
after the 12 samples a fixed 0.5 s would allow it.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import PayloadEstimationError

LATE = 0.1
"""s a periodic check may come after its period before the consumer counts as starved (at most timeout / 4)."""

LOST_ANYWAY = 3.0
"""A stream silent for this many timeouts is lost even if the consumer was starved meanwhile."""


AUTO_MIN = 0.5
"""s: the shortest automatic timeout (and the one before the stream's rate is measured)."""

AUTO_PERIODS = 50.0
"""Periods of the stream's measured rate in an automatic timeout."""

AUTO_MAX = 10.0
"""s: the longest automatic timeout (the parameter's own upper bound)."""


class WatchdogConfigError(PayloadEstimationError):
    """A watchdog setting that cannot work (the message names it)."""


def auto_timeout(rate: float) -> float:
    """s: the automatic timeout for a stream of ``rate`` Hz (0 or less: not measured yet):
    :data:`AUTO_PERIODS` periods, within [:data:`AUTO_MIN`, :data:`AUTO_MAX`]."""
    if not rate > 0:
        return AUTO_MIN
    return min(AUTO_MAX, max(AUTO_MIN, AUTO_PERIODS / rate))


@dataclass(frozen=True)
class StreamTimeout:
    """The ``joint_state_timeout`` parameter: ``setting`` > 0 s is the user's and used as it is; 0 is automatic
    (:func:`auto_timeout` of the stream's measured rate)."""

    setting: float = 0.0

    def __post_init__(self):
        if not self.setting >= 0:
            raise WatchdogConfigError(f"joint_state_timeout must be >= 0 s (0: from the stream's rate), "
                                      f"got {self.setting}")

    @property
    def auto(self) -> bool:
        return self.setting == 0

    def effective(self, rate: float) -> float:
        """s: the timeout in use for a stream measured at ``rate`` Hz (0: not measured)."""
        return auto_timeout(rate) if self.auto else self.setting

    def describe(self, rate: float) -> str:
        """Where the timeout in use comes from, for the status."""
        if not self.auto:
            return "joint_state_timeout parameter"
        if not rate > 0:
            return f"auto: {AUTO_MIN:g} s until the stream's rate is measured"
        return (f"auto: {AUTO_PERIODS:g} periods of the {rate:.0f} Hz stream, within [{AUTO_MIN:g}, "
                f"{AUTO_MAX:g}] s")


@dataclass
class StreamWatchdog:
    """Last receipt of a stream on the caller's monotonic clock (s), and whether it is lost.

    timeout: s without a sample, while the consumer ran, after which the stream counts as lost. ``losses`` counts
    the transitions to lost (each one a separate outage); ``late`` the consumer's checks that came late (its own
    lateness, not the stream's), ``late_max`` the longest (s).
    """

    timeout: float = 0.5
    last: float | None = None
    losses: int = 0
    _lost: bool = False
    late: int = 0
    late_max: float = 0.0
    resumed: float | None = None  # when the consumer last came back from being late
    _checked: float | None = None
    _period: float = 0.0

    def __post_init__(self):
        if not self.timeout > 0:
            raise WatchdogConfigError(f"watchdog timeout must be > 0 s, got {self.timeout}")

    def feed(self, wall: float) -> bool:
        """A sample arrived at ``wall``; True if the stream had been lost (it is back now)."""
        back = self._lost
        self.last, self._lost = wall, False
        return back

    def awake(self, wall: float, period: float) -> bool:
        """The consumer's periodic check (every ``period`` s) runs at ``wall``; True when it came late (more than
        min(:data:`LATE`, timeout / 4) after its period): the consumer was starved, samples may wait unread. The
        first check at another period than the one before is not judged (a consumer that checks less often while
        idle)."""
        prev, before, self._checked, self._period = self._checked, self._period, wall, period
        if prev is None or period != before:  # the first check, or the first at a new period (idle / busy)
            return False
        lag = wall - prev - period
        if lag <= self._late_limit():
            return False
        self.late += 1
        self.late_max = max(self.late_max, lag)
        self.resumed = wall
        return True

    def _late_limit(self) -> float:
        return min(LATE, self.timeout / 4)

    def age(self, wall: float) -> float | None:
        """s since the last sample, None if none arrived yet."""
        return None if self.last is None else wall - self.last

    def silent(self, wall: float) -> float | None:
        """s the stream has been silent while the consumer ran: the age, counted from the consumer's return when it
        came back late after the last sample; the whole age beyond :data:`LOST_ANYWAY` timeouts (None if none
        arrived yet)."""
        age = self.age(wall)
        resumed = self.resumed
        if self._checked is not None and wall - self._checked - self._period > self._late_limit():
            resumed = wall  # the periodic check itself is overdue: the consumer is late right now (asked first)
        if age is None or resumed is None or resumed <= self.last or age > LOST_ANYWAY * self.timeout:
            return age
        return min(age, wall - resumed)

    def lost(self, wall: float) -> bool:
        """True once no sample arrived for ``timeout`` s while the consumer ran (or none ever, or none for
        :data:`LOST_ANYWAY` timeouts); counts new outages."""
        silent = self.silent(wall)
        lost = silent is None or silent > self.timeout
        if lost and not self._lost and self.last is not None:
            self.losses += 1
        self._lost = lost and self.last is not None
        return lost


__all__ = ["StreamWatchdog", "StreamTimeout", "auto_timeout", "LATE", "LOST_ANYWAY", "AUTO_MIN", "AUTO_PERIODS",
           "AUTO_MAX"]
