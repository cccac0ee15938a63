"""What stopping the nodes reports (issue 47: a demo's shutdown ended with "[ERROR] ... collision detection is
blind"): the simulator, the stream's source, is stopped after the nodes that read it, and a collision monitor whose
context is shutting down does not report its stream lost at ERROR."""

from __future__ import annotations

import signal
from types import SimpleNamespace


class Proc:
    """A child process as stop_processes sees it; signals go to a shared log, SIGINT ends it at once."""

    def __init__(self, node: str, log: list):
        self.node, self.log, self.returncode = node, log, None

    def poll(self):
        return self.returncode

    def send_signal(self, sig) -> None:
        self.log.append((self.node, sig))
        self.returncode = 0

    def wait(self, timeout=None) -> int:
        self.log.append((self.node, "gone"))
        return 0

    def kill(self) -> None:
        self.log.append((self.node, "kill"))


def test_the_simulator_is_stopped_after_the_nodes_that_read_its_stream():
    from payload_estimation.ros.bringup import stop_processes

    log: list = []
    stop_processes([Proc(n, log) for n in ("sim", "estimator", "sampler", "monitor")])
    assert log.index(("sim", signal.SIGINT)) > log.index(("monitor", "gone")), log
    assert [n for n, what in log if what == signal.SIGINT] == ["estimator", "sampler", "monitor", "sim"]


class Logger:
    def __init__(self):
        self.lines = []

    def error(self, text):
        self.lines.append(("error", text))

    def info(self, text):
        self.lines.append(("info", text))


def _monitor(context_ok: bool) -> SimpleNamespace:
    """What CollisionMonitorNode._watchdog touches: a stream just lost 0.6 s ago."""
    logger = Logger()
    return SimpleNamespace(
        input=SimpleNamespace(lost_changed=lambda: True, age=lambda: 0.6, awake=lambda period: None,
                              silent=lambda: 0.6, watchdog=SimpleNamespace(timeout=0.5)),
        _joint_states=None, context=SimpleNamespace(ok=lambda: context_ok), get_logger=lambda: logger,
        out=SimpleNamespace(residual=SimpleNamespace(get_subscription_count=lambda: 0)),
        status=SimpleNamespace(publish=lambda: None), logger=logger)


def test_a_monitor_shutting_down_does_not_report_its_stream_lost_at_error():
    from payload_estimation.ros.monitor_node import CollisionMonitorNode

    running, stopping = _monitor(True), _monitor(False)
    CollisionMonitorNode._watchdog(running)
    CollisionMonitorNode._watchdog(stopping)
    assert running.logger.lines == [("error", "joint_states lost for 0.60 s: collision detection is blind")]
    assert stopping.logger.lines == []
