"""Which payload the collision monitor's observer uses, and what about it is worth a log line.

The payload in use is the last published estimate, a provisional fit learnt at rest (:mod:`.provisional`), or
none (unloaded). :class:`ObserverPayload` keeps it with the last estimate's (what a stream restart falls back to)
and words its changes: a provisional refit within 0.05 kg and 5 % of the mass last logged is not news (one line
per rest block), a change of source always is.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..levels import Note
from .estimate_gate import PayloadModel
from .provisional import ProvisionalFit


@dataclass(frozen=True)
class ObserverPayloadConfig:
    """Named as the monitor node's parameter (this default is its default): ``payload_as_point_mass``, a
    gravity-only estimate also enters M and C as a point mass at its CoM (false: gravity only)."""

    payload_as_point_mass: bool = True


class ObserverPayload:
    """The payload in use (:attr:`payload`), the last estimate's (:attr:`estimated`, None: unloaded) and the
    provisional mass last logged (module docstring)."""

    def __init__(self):
        self.payload: PayloadModel | None = None
        self.estimated: PayloadModel | None = None
        self.logged_mass: float | None = None

    def take(self, est: PayloadModel | None, source: str) -> PayloadModel | None:
        """``est`` is the payload in use from now on (``source``: 'provisional', 'estimate', 'release', 'payload
        lost', ...; all but a provisional fit are the estimate's too); returns the previous one."""
        previous, self.payload = self.payload, est
        if source != "provisional":
            self.estimated = est
        return previous

    def note(self, previous: PayloadModel | None, est: PayloadModel | None, source: str) -> list[Note]:
        """The log line of the change from ``previous`` to ``est`` (none for a quiet provisional refit)."""
        if source == "provisional":  # only a refit of a provisional payload may be quiet, never a change of source
            if isinstance(previous, ProvisionalFit) and self._quiet_refit(est):
                return []
            self.logged_mass = est.mass
        what = est.method if est is not None and source == "provisional" else source
        text = "unloaded" if est is None else (f"{what} payload {est.mass:.3f} kg, CoM "
                                               f"{np.round(np.asarray(est.com) * 1e3, 1).tolist()} mm")
        return [("info", f"observer model: {text}")]

    def _quiet_refit(self, est: ProvisionalFit) -> bool:
        """A provisional refit within 0.05 kg and 5 % of the mass last logged is not logged (one per rest block)."""
        last, self.logged_mass = self.logged_mass, est.mass
        if last is not None and abs(est.mass - last) <= 0.05 + 0.05 * last:
            self.logged_mass = last
            return True
        return False

    def restart_note(self, dropped: PayloadModel | None) -> Note:
        """The log line of a stream restart: ``dropped`` is the provisional payload given up for the estimate's
        (None: the payload in use is kept)."""
        kept = self.estimated
        keep = ("the unloaded model" if kept is None else
                f"the estimate in use, {kept.mass:.3f} kg (if the gripper is empty now, publish a 0 kg estimate or "
                "call payload_estimator/reset)")
        if dropped is not None:
            return ("warning", f"stream restarted: the provisional payload {dropped.mass:.3f} kg learnt from the old "
                               f"stream is dropped (never confirmed by an estimate); the observer uses {keep}")
        return ("info", f"stream restarted: the observer keeps {keep}")


__all__ = ["ObserverPayload", "ObserverPayloadConfig"]
