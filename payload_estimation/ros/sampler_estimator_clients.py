"""The sampler's calls of the payload estimator's services (``payload_estimator/clear_captures``, ``capture``,
``estimate``, ... std_srvs/Trigger): the clients, the request of a run's action once the run's clear_captures has
been answered, each answer handed to the run, what is still pending withdrawn when a run ends."""

from __future__ import annotations

from collections.abc import Callable

from std_srvs.srv import Trigger

from ..sampling.sampler import ESTIMATOR_CALLS, ESTIMATOR_SERVICES, capture_note, estimate_note
from ..sampling.sampling_run import SamplingRun
from .messages import clock_seconds
from .sampler_support import drop_pending


class EstimatorClients:
    """The estimator's clients of ``node`` (the sampler: its logger and ``status``) in ``callback_group``;
    ``current_run()`` is the run now (None when idle), ``tick()`` advances it."""

    def __init__(self, node, callback_group, current_run: Callable[[], SamplingRun | None], tick: Callable[[], None]):
        self.node = node
        self.current_run = current_run
        self.tick = tick
        self.clients = {n: node.create_client(Trigger, f"payload_estimator/{n}", callback_group=callback_group)
                        for n in ESTIMATOR_CALLS}
        self.futures: list = []  # (client, future) not answered yet
        self.clearing = None  # the run's clear_captures request, until answered

    def pair(self, run: SamplingRun) -> tuple:
        """(capture or record, estimate) clients of ``run``'s mode."""
        return tuple(self.clients[n] for n in ESTIMATOR_SERVICES[run.mode])

    def ready(self, run: SamplingRun) -> bool:
        """The estimator serves both services ``run`` calls."""
        return all(c.service_is_ready() for c in self.pair(run))

    def clear(self) -> None:
        """The run's clear_captures, when the estimator serves it (else the run's service_timeout says so)."""
        client = self.clients["clear_captures"]
        if client.service_is_ready():
            self.clearing = client.call_async(Trigger.Request())
            self.futures.append((client, self.clearing))

    def request(self, kind: str) -> None:
        """Ask the estimator for a ``kind`` of :func:`sampling.sampler.request_kind` (capture, record, estimate),
        once its answer to the run's clear_captures has come: two services have no order, and a capture the
        estimator took before the clear was forgotten (9 poses fitted, "10 poses" answered). A clear that never
        answers leaves the request pending: the run's service_timeout ends it."""
        node = self.node
        run, clearing = self.current_run(), self.clearing
        if clearing is not None and not clearing.done():
            clearing.add_done_callback(lambda _, k=kind, r=run: self.request(k) if self.current_run() is r else None)
            return
        client = self.pair(run)[kind == "estimate"]  # (capture or record, estimate)
        future = client.call_async(Trigger.Request())
        self.futures.append((client, future))
        future.add_done_callback(lambda f, k=kind: self._answered(k, f))
        if kind == "estimate":
            node.get_logger().info(estimate_note(run.mode))
            if not run.mode.excites:
                node.status.publish()

    def _answered(self, kind: str, future) -> None:
        run = self.current_run()
        if run is None or future.cancelled():
            return
        res = future.result()
        if kind == "capture" and res.success and run.sequence is not None:
            self.node.get_logger().info(capture_note(run, res.message))
        run.answered(kind, bool(res.success), str(res.message), clock_seconds(self.node))
        self.tick()

    def drop_pending(self) -> None:
        """Withdraw the requests not answered yet (a run ended)."""
        drop_pending(self.futures)
