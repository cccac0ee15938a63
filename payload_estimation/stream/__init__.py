"""Health of the input streams the nodes consume: stamp faults and restarts, loss on the wall clock.

Plain Python (no rclpy): the nodes feed it receipt times and stamps and show what it reports.
"""

from .stamps import StampCounters, StampGuard, StampVerdict
from .watchdog import StreamTimeout, StreamWatchdog

__all__ = ["StampGuard", "StampVerdict", "StampCounters", "StreamWatchdog", "StreamTimeout"]
