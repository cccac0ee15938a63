"""An executor spun on a background thread that stops cleanly.

``threading.Thread(target=executor.spin)`` followed by ``executor.shutdown()`` races: ``shutdown``
destroys the executor's guard condition while ``spin`` may still hold a task that triggers it, which
prints "The following exception was never retrieved: cannot use Destroyable" or an
``AttributeError: 'NoneType' object has no attribute 'trigger'`` from the spin thread at exit.
:class:`SpinThread` spins with ``spin_once`` in a loop and joins that loop *before* it shuts the
executor down, so nothing of the executor is used after it is destroyed.
"""

from __future__ import annotations

import threading

from rclpy.executors import ExternalShutdownException, ShutdownException
from rclpy.node import Node


class SpinThread:
    """Spin ``executor`` (with ``nodes`` added) on a daemon thread until :meth:`stop`.

    Usable as a context manager. ``period`` (s) bounds how long :meth:`stop` waits for the loop.
    """

    def __init__(self, executor, *nodes: Node, period: float = 0.05, name: str = "spin"):
        self.executor = executor
        for node in nodes:
            executor.add_node(node)
        self._period = period
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True, name=name)
        self._thread.start()

    def _loop(self) -> None:
        context = self.executor.context
        while not self._stop.is_set() and context.ok():
            try:
                self.executor.spin_once(timeout_sec=self._period)
            except (ExternalShutdownException, ShutdownException):
                return

    def stop(self, timeout: float = 5.0) -> None:
        """End the loop, wait for it (at most ``timeout`` s), then shut the executor down. Idempotent."""
        if self._stop.is_set():
            return
        self._stop.set()
        self._thread.join(timeout=timeout)
        self.executor.shutdown()

    def __enter__(self) -> SpinThread:
        return self

    def __exit__(self, *exc) -> None:
        self.stop()
