"""A sampling run's requests to the estimator: at most one waiting at a time, its timeout, an answer that ends the run.

:class:`EstimatorRequests` is the part of :class:`.sampling_run.SamplingRun` that knows which request (``capture``,
``record`` or ``estimate``: :func:`.sampler.request_kind`) waits for the estimator's answer since when, which answer
is the awaited one (an answer after an abort is not), the fault of an estimator that does not answer within
``service_timeout``, and the answer that ends the run (no static sample at a pose), kept for the next update.
"""

from __future__ import annotations

from .run_states import Ending, Outcome
from .run_supervision import Fault
from .sequence import SequenceAborted

WORDS = {"capture": "the capture request", "record": "the request to start recording",
         "estimate": "the estimate request"}
"""A request's kind in an answer's words."""


class EstimatorRequests:
    """The estimator requests of one run (wall times in s)."""

    def __init__(self, service_timeout: float):
        self.service_timeout = service_timeout
        self.waiting: tuple[str, float] | None = None  # (request kind, wall time sent)
        self.deferred: SequenceAborted | None = None  # an answer that ends the run at the next update

    @property
    def kind(self) -> str | None:
        """The kind of request waiting for an answer, or None."""
        return None if self.waiting is None else self.waiting[0]

    def sent(self, kind: str, wall: float) -> None:
        self.waiting = (kind, wall)

    def drop(self) -> None:
        """Nothing waits any more (the run aborted): a later answer is ignored."""
        self.waiting = None

    def take(self, kind: str) -> bool:
        """Whether an answer to ``kind`` is the awaited one (then nothing waits any more)."""
        if self.waiting is None or self.waiting[0] != kind:
            return False
        self.waiting = None
        return True

    def deferred_fault(self) -> Fault | None:
        """The abort an answer asked for, or None."""
        d = self.deferred
        return None if d is None else (str(d), Ending.RETURN, d.code)

    def timeout_fault(self, wall: float) -> Fault | None:
        """The abort for a request unanswered ``service_timeout`` s after it was sent, or None."""
        if self.waiting is None or wall - self.waiting[1] <= self.service_timeout:
            return None
        what = WORDS.get(self.waiting[0], self.waiting[0])
        return (f"the estimator did not answer {what} within {self.service_timeout:.1f} s (service_timeout)",
                Ending.RETURN, Outcome.ESTIMATOR_TIMEOUT)


__all__ = ["EstimatorRequests"]
