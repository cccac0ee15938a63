"""An announced grasp or release that no collision monitor received, sent again once one listens (issue 32).

The estimator node publishes ``grasped`` / ``released`` on ``~/payload_event`` (reliable, volatile). A monitor
whose subscription is not matched yet (started later, or DDS discovery still running on a loaded machine) never
gets it: it then stops the arm at the grasp and calls a later drop a collision (one demo run in six on a loaded
2-core machine). :class:`AnnouncementRelay` keeps the newest announcement that had no listener; when a listener
appears within ``window`` s it is due again, once; an older one is dropped and said. Times: any monotonic clock, s.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

RELAY_WINDOW = 5.0
"""s: how long an announcement nobody received waits for a listener (the monitor's ``payload_event_window``)."""


@dataclass
class AnnouncementRelay:
    """The newest announcement without a listener (module docstring); ``late`` counts those sent again when a
    listener appeared, ``missed`` those no listener appeared for within ``window`` s."""

    window: float = RELAY_WINDOW
    late: int = 0
    missed: int = 0
    _pending: tuple[str, float] | None = None

    def published(self, event: str, listeners: int, now: float) -> None:
        """``event`` was just published with ``listeners`` matched subscriptions; it replaces any pending one."""
        self._pending = None if listeners > 0 else (event, float(now))

    @property
    def pending(self) -> str:
        """The announcement waiting for a listener ('' none)."""
        return "" if self._pending is None else self._pending[0]

    def due(self, listeners: int, now: float) -> tuple[str | None, str]:
        """(the announcement to publish again now or None, a line for the log ('' none)) with ``listeners`` matched
        subscriptions at ``now``."""
        if self._pending is None:
            return None, ""
        event, t = self._pending
        age = now - t
        if not math.isfinite(age) or age > self.window:
            self._pending, self.missed = None, self.missed + 1
            return None, (f"the '{event}' announcement reached no collision monitor within {self.window:g} s: none "
                          f"expects the payload's change, and a payload lost will be reported as a collision; call "
                          f"payload_estimator/{event} again once the collision monitor runs")
        if listeners > 0:
            self._pending, self.late = None, self.late + 1
            return event, f"'{event}' announcement sent again {age:.1f} s late: a collision monitor listens now"
        return None, ""


__all__ = ["RELAY_WINDOW", "AnnouncementRelay"]
