"""The collision monitor's inputs besides joint_states: taken, or refused and counted, also before a robot model.

:class:`MonitorInputs` turns the payload sampler's flag, published payload estimates and their σ, and announced
payload events into calls on :class:`.supervisor.MonitorSupervisor` (``sup`` None: no robot model yet), and counts
what it refuses for the status (:meth:`MonitorInputs.values`).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import TYPE_CHECKING

from ..errors import PayloadEstimationError
from ..levels import Note
from .estimate_gate import EstimateRefused, PayloadModel
from .payload_change import GRASP, RELEASE
from .provisional import ProvisionalFit

if TYPE_CHECKING:
    from .supervisor import MonitorSupervisor

EVENT_WORDS = {"grasped": GRASP, "released": RELEASE}
"""payload_estimator/payload_event texts -> the announced change."""


class MonitorInputs:
    """The monitor's inputs besides joint_states, taken or refused, also before a robot model (``sup`` None): the
    payload sampler's flag, payload estimates and their σ, payload events. Refusals are counted for the status
    (:meth:`values`): ``estimates`` (with their σ; ``last``: why the newest was refused) and ``events``."""

    def __init__(self):
        self.sampling = False  # the payload sampler's active flag
        self.estimates = self.events = 0
        self.last = ""

    def set_sampling(self, sup: MonitorSupervisor | None, active: bool) -> str:
        """The sampler's flag: while active the load is learnt at each rest pose of the run, with a wider margin;
        a line to log when it changed ('' otherwise)."""
        note = f"payload sampler {'active' if active else 'idle'}" if active != self.sampling else ""
        self.sampling = active
        if sup is not None:
            sup.set_sampling(active)
            if note and not active and isinstance(sup.payload, ProvisionalFit):
                note += (f"; the observer keeps the payload learnt during the run, {sup.payload.method} "
                         f"{sup.payload.mass:.3f} kg, until the next payload/estimate or a stream restart (a run "
                         "that ended without one leaves the estimator's last estimate unapplied: it may be of another "
                         "object)")
        return note

    def estimate(self, sup: MonitorSupervisor | None, read: Callable[[], tuple[PayloadModel, str]]) -> list[Note]:
        """A published estimate: ``read()`` gives it with its frame (raising the message's error); the supervisor's
        notes, or a warning saying why it was refused and which payload model is kept."""
        try:
            if sup is None:
                raise EstimateRefused("no robot model yet")
            return sup.estimate(*read())
        except PayloadEstimationError as e:
            self.estimates, self.last = self.estimates + 1, str(e)
            p = None if sup is None else sup.payload
            kept = "unloaded" if p is None else f"{p.mass:.3f} kg"
            return [("warning", f"refusing payload/estimate: {e}; the previous payload model ({kept}) is kept")]

    def uncertainty(self, sup: MonitorSupervisor | None, text: str) -> str:
        """payload_estimator/online_estimate (JSON: mass kg, com m, gravity_covariance 4 x 4): the thresholds widen
        by it (:meth:`MonitorSupervisor.uncertainty`); why it was refused ('' taken)."""
        try:
            if sup is None:
                raise EstimateRefused("no robot model yet")
            d = json.loads(text)
            sup.uncertainty(float(d["mass"]), d["com"], d["gravity_covariance"])
        except (PayloadEstimationError, ValueError, KeyError, TypeError) as e:  # json.loads raises ValueError
            self.estimates, self.last = self.estimates + 1, f"online estimate uncertainty: {e}"
            return f"ignoring payload_estimator/online_estimate: {e}; thresholds not widened by its σ"
        return ""

    def event(self, sup: MonitorSupervisor | None, text: str) -> tuple[list[Note], str]:
        """payload_estimator/payload_event (``grasped`` / ``released``): the payload changes now. (notes, '') when
        announced, ([], why) when refused: the payload model stays."""
        kind = EVENT_WORDS.get(text.strip().lower())
        if kind is None or sup is None:
            self.events += 1
            why = "no robot model yet" if kind is not None else (f"unknown event '{text[:40]}' (expected 'grasped' or "
                                                                 "'released')")
            return [], f"ignoring payload_estimator/payload_event: {why}; the collision monitor keeps its payload model"
        return [("info", sup.announce(kind))], ""

    def values(self) -> dict[str, object]:
        """Status keys: the sampler's flag and the refusals."""
        return {"sampling": self.sampling, "estimates_refused": self.estimates, "last_refusal": self.last,
                "payload_events_refused": self.events}

__all__ = ["EVENT_WORDS", "MonitorInputs"]
