"""Helpers shared by the real-rclpy tests (test_nodes.py, test_end_to_end.py, the sim_node stacks of
test_dynamic_sampling.py and test_sampler_envelope.py; bench/bench_sampler.py too).

Wall-clock waits: these tests run real DDS and real processes on a shared 2-core machine.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from rclpy.node import Node
from std_srvs.srv import Trigger

from payload_estimation.ros.bringup import override_file, ros_args, start_processes, stop_processes


def wait_for(pred: Callable[[], bool], timeout: float, period: float = 0.01) -> bool:
    """Poll ``pred`` every ``period`` s until it is true (True) or ``timeout`` s passed (False)."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if pred():
            return True
        time.sleep(period)
    return False


def call_trigger(node: Node, service: str, timeout: float = 30.0, discovery: float = 10.0) -> Trigger.Response:
    """Call std_srvs/Trigger ``service`` from ``node`` (spun by someone else's executor) and wait.

    ``discovery``: s to wait for the service to appear; ``timeout``: s for the answer. A client is
    created per call and destroyed afterwards (a test may call services of nodes it removes).
    """
    cli = node.create_client(Trigger, service)
    try:
        assert cli.wait_for_service(timeout_sec=discovery), f"service {service} not available"
        fut = cli.call_async(Trigger.Request())
        end = time.monotonic() + timeout
        while not fut.done():
            assert time.monotonic() < end, f"{service} did not answer within {timeout} s"
            time.sleep(0.005)
        return fut.result()
    finally:
        node.destroy_client(cli)


@contextmanager
def sim_stack(ns: str, sim_params: list[str], overrides: list[str], extra: dict | None = None) -> Iterator[None]:
    """sim_node (``sim_params``, ``name:=value``) and the estimator, sampler and monitor (``overrides``,
    in a params file) as processes in namespace ``ns`` on its simulated clock; all stopped after."""
    clock = [f"/clock:={ns}/clock"]
    sim = start_processes(["sim"], ros_args(None, ns, None, clock, sim_params))
    over = override_file(overrides, ["estimator", "sampler", "monitor"], extra=extra)
    nodes = []
    try:
        nodes = start_processes(["estimator", "sampler", "monitor"],
                                ros_args(None, ns, True, clock) + ["--params-file", str(over)])
        yield
    finally:
        stop_processes(nodes + sim)
        over.unlink(missing_ok=True)
