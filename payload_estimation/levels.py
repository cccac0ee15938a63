"""Status levels and log notes: what every core reports to its node (one definition for all layers).

:class:`Level` is ``diagnostic_msgs/DiagnosticStatus``'s byte (OK 0, WARN 1, ERROR 2): the values go on the wire
unchanged (``bytes([level])``), so they are an :class:`enum.IntEnum`. A :data:`Note` is a line for the log that a
core hands to its node, which picks the logger call by the level word.
"""

from __future__ import annotations

import enum


class Level(enum.IntEnum):
    """A status level (that of diagnostic_msgs/DiagnosticStatus)."""

    OK = 0
    WARN = 1
    ERROR = 2


OK, WARN, ERROR = Level.OK, Level.WARN, Level.ERROR

Note = tuple[str, str]
"""A line for the log: (level 'info', 'warning' or 'error', text)."""

__all__ = ["ERROR", "Level", "Note", "OK", "WARN"]
