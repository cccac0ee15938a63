"""Collision or payload lost: which detections are reported when, and whether the arm stops for them.

While an estimated payload is carried after an announced grasp (``payload_estimator/grasped``, until ``released``
or a loss; a payload nobody announced, or a provisional one learnt at rest, changes only as a collision: joint
torques cannot tell a push near the wrist from a dropped object, and a contact taken for a loss would not stop the
arm), :class:`LossGate` has each detected event classified (:class:`.payload_loss.PayloadLossClassifier`): a
residual step matching the payload's own torque is ``payload lost``. Until the verdict (at most
``LossConfig.decide_within``) the detection and its contact estimate are held; they are reported only for a
collision (a loss is reported on its own, :meth:`LossGate.loss_report`). The reaction stops for a collision, and
for a loss only with ``payload_lost_stop``. The reported collision flag (``~/collision``) follows the reports.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..model.dynamics import RigidBodyDynamics
from .contact import ContactEstimate
from .detector import CollisionEvent
from .estimate_gate import PayloadModel
from .payload_loss import LossVerdict, PayloadLossClassifier
from .provisional import ProvisionalFit


@dataclass(frozen=True)
class LossGateConfig:
    """Named as the monitor node's parameter (this default is its default): ``payload_lost_stop``, a payload loss
    stops the arm as a collision does."""

    payload_lost_stop: bool = False


@dataclass(frozen=True)
class Report:
    """A detection or release to report now; ``changed``: the reported collision flag changed with it."""

    event: CollisionEvent
    changed: bool


class LossGate:
    """The loss check around one arm's detections (module docstring): :attr:`classifier` judges, this class holds
    what waits for its verdict and counts the losses (:attr:`lost`, :attr:`losses`)."""

    def __init__(self, dyn: RigidBodyDynamics, config: LossGateConfig | None = None):
        self.cfg = config or LossGateConfig()
        self.classifier = PayloadLossClassifier(dyn)
        self.lost: LossVerdict | None = None  # the last payload loss
        self.losses = 0
        self.grasp_announced = False  # a grasp was announced (and no release or loss since): losses are judged
        self.verdict: LossVerdict | None = None  # the current event's verdict
        self.collision = False  # the reported collision flag (~/collision)
        self.contact: ContactEstimate | None = None  # the contact estimate of the current (or last) event
        self._deferred: CollisionEvent | None = None  # a detection waiting for the verdict
        self._held: ContactEstimate | None = None  # its contact estimate, published only for a collision

    @property
    def judging(self) -> bool:
        """Whether detected events are classified now (an estimated payload carried after an announced grasp)."""
        return self.classifier.body is not None

    def adopt(self, old: LossGate) -> None:
        """Carry over ``old``'s reported flag and what waits for a verdict (the same arm under a new model)."""
        self.collision, self._deferred, self._held = old.collision, old._deferred, old._held

    def arm(self, est: PayloadModel | None, point_mass: bool, cov: np.ndarray | None) -> None:
        """Judge losses of ``est`` (its observer model as a point mass or not; ``cov`` its 4 x 4 gravity covariance,
        None: from its ``std``) only if it is an estimated payload carried after an announced grasp."""
        if est is None or isinstance(est, ProvisionalFit) or not self.grasp_announced:
            self.classifier.carried(None)
            return
        body, gravity_only = est.observer_model(point_mass)
        if body is None:
            self.classifier.carried(None)
            return
        std = getattr(est, "std", None) or {}
        g = np.array([std.get("mass", 0.0), *(est.mass * std.get(k, 0.0) for k in ("cx", "cy", "cz"))])
        self.classifier.carried(body, cov if cov is not None else np.diag(g ** 2), dynamic=not gravity_only)

    def covariance(self, cov: np.ndarray) -> None:
        """The carried estimate's gravity covariance arrived: the check uses it for the payload it judges now."""
        c = self.classifier
        c.carried(c.body, cov, c.dynamic)

    def disarm(self) -> None:
        """No loss is judged (unloaded, or a provisional payload: an unannounced change stays a collision)."""
        self.classifier.carried(None)

    def classify(self, t: float, q: np.ndarray, dq: np.ndarray, r: np.ndarray,
                 ev: CollisionEvent | None) -> LossVerdict | None:
        """The verdict on the event in progress ``ev`` decided at this sample (or None)."""
        if ev is None or not ev.active:
            self.verdict = None
        verdict = self.classifier.update(t, q, dq, r, ev)
        if verdict is not None:
            self.verdict = verdict
        return verdict

    def stopping(self, in_collision: bool, ev: CollisionEvent | None) -> bool:
        """The reaction's collision flag: with an estimated payload carried it waits for the verdict (a loss stops
        only with ``payload_lost_stop``)."""
        if not in_collision:
            return False
        v = self.verdict
        if v is None:
            return not self.judging or ev is None
        return not v.lost or self.cfg.payload_lost_stop

    def new_event(self) -> None:
        """A detection starts: the last event's contact estimate is no longer the current one."""
        self.contact = self._held = None

    def reports(self, ev: CollisionEvent | None, verdict: LossVerdict | None) -> tuple[Report, ...]:
        """This sample's detection or release, and a held detection once the verdict is in."""
        due = []
        if ev is not None and ev.active and self.judging and verdict is None:
            self._deferred = ev  # an estimated payload is carried: a collision or a payload loss? (<= 60 ms)
        elif ev is not None:
            due.append(ev)
        if verdict is not None:
            deferred, self._deferred = self._deferred, None
            if not verdict.lost and deferred is not None:
                due.append(deferred)
        out = []
        for e in due:
            out.append(Report(e, e.active != self.collision))
            self.collision = e.active
        return tuple(out)

    def contacts(self, made: ContactEstimate | None) -> tuple[ContactEstimate, ...]:
        """The contact estimate to publish now: at once without a loss check, held while its detection waits for the
        verdict, then published for a collision and dropped for a payload loss (the loss record is the answer)."""
        if made is not None:
            self._held = made
        c, v = self._held, self.verdict
        if c is None or self._deferred is not None:
            return ()
        self._held = None
        if v is not None and v.lost:
            return ()
        self.contact = c
        return (c,)

    def on_lost(self, v: LossVerdict) -> str:
        """Count the loss ``v`` (losses are judged again only after the next announced grasp); its log line."""
        self.lost, self.losses = v, self.losses + 1
        self.grasp_announced = False
        stop = "; stopping (payload_lost_stop)" if self.cfg.payload_lost_stop else "; the arm is not stopped"
        return f"{v.reason} (at t={v.time:.3f} s){stop}"

    def restart(self) -> bool:
        """A stream restart: nothing held is published, the reported flag clears; returns whether it was set."""
        self._held = None
        cleared, self.collision = self.collision, False
        return cleared

    def loss_report(self, v: LossVerdict) -> dict[str, object]:
        """The record of a payload loss (``~/payload_lost``): the verdict, its times (s), the lost fraction and mass
        (kg), the reason and whether the arm is ``stopped`` for it (``payload_lost_stop``)."""
        return {"verdict": v.verdict, "time": v.time, "detection_time": v.detection_time, "fraction": v.fraction,
                "lost_mass": v.lost_mass, "reason": v.reason, "stopped": bool(self.cfg.payload_lost_stop)}


__all__ = ["LossGate", "LossGateConfig", "Report"]
