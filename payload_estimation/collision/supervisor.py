"""The collision monitor's rules around the per-sample core: what ``collision_monitor`` and the bare run do.

:class:`MonitorSupervisor` holds one arm's :class:`.monitor.CollisionMonitor` (observer, detector, contact),
its :class:`.payload_change.PayloadWatch` and its :class:`.reaction.ReactionStateMachine`, and the rules
between them, so the ROS node (``ros/monitor_node.py``) only translates messages and the bare run
(``sampling/bare_run.py``) steps the same rules without ROS:

- **Estimate acceptance** (:meth:`~MonitorSupervisor.estimate`): an estimate in another frame than the
  model's payload frame, or one the payload layer's limit check refuses (mass above ``max_payload``, CoM
  beyond ``max_com_radius``, an impossible inertia; the check is given by the caller, collision/ does not
  import payload/), raises :class:`EstimateRefused` and the previous payload is kept. A 0 kg estimate
  returns to the unloaded model; while a payload is carried and nothing was announced it opens a release
  window (``~/released`` sends the event and 0 kg in either order; ``~/reset`` is the same change).
- **The payload between estimates**: while the payload sampler is active, or after an announced grasp or
  release (:meth:`~MonitorSupervisor.announce`), the payload is learnt provisionally at rest and the
  thresholds are ``sampling_threshold_factor`` x the configured ones plus 3 σ of the torque of the payload
  not yet known (:meth:`.payload_change.PayloadWatch.update`); a published estimate replaces it. A stream restart
  (:meth:`~MonitorSupervisor.restart`) keeps the last estimate's payload and drops a provisional one learnt from the
  old stream.
- **Stop and resume** (:meth:`~MonitorSupervisor.stop`, :meth:`~MonitorSupervisor.resume`): on a stop the
  remainder of the last commanded trajectory is kept (not while sampling, and never the sampler's own
  trajectory: it aborts and commands its own next move) and resumed after the release, with its velocities;
  a newer command (:meth:`~MonitorSupervisor.commanded`) supersedes it: resuming the old remainder would drive
  the arm to a stale target. :meth:`~MonitorSupervisor.react` turns the reaction's action into the trajectory
  to command (the stop point, never beyond the interrupted trajectory's points; the resumed remainder) with the
  caller's :class:`Planner` (the sampling layer's motion rules: collision/ does not import sampling/).
- **An estimate's σ** (:meth:`~MonitorSupervisor.uncertainty`): an estimate published with the covariance of
  its gravity parameters (the online estimate, issue 32) widens the thresholds by k_sigma x the torque σ of
  its gravity at the current pose (recomputed every ``SIGMA_PERIOD`` s), so they narrow as σ shrinks; a new
  estimate or σ re-applies it at once at the last sample's pose (never unwidened until the next sample).
- **Payload lost** (:class:`.payload_loss.PayloadLossClassifier`): while an estimated payload is carried after
  an announced grasp (``payload_estimator/grasped``, until ``released`` or a loss; a payload nobody announced,
  or a provisional one learnt at rest, changes only as a collision: joint torques cannot tell a push near the
  wrist from a dropped object, and a contact taken for a loss would not stop the arm), each
  detected event is classified: a residual step matching the payload's own torque is ``payload lost`` (the
  observer goes back to the unloaded arm, :attr:`~MonitorSupervisor.lost` holds the verdict); the reaction
  waits for the verdict (at most ``LossConfig.decide_within``) and stops only for a collision, or for a loss
  too with ``payload_lost_stop``.
- **What is reported** (:attr:`SupervisorStep.reports`, :attr:`~MonitorSupervisor.collision`): each detection and
  release, in order; a detection while an estimated payload is carried is held until the loss check's verdict and
  reported only for a collision (a loss is reported on its own, :meth:`~MonitorSupervisor.loss_report`); its
  contact estimate likewise (:attr:`SupervisorStep.contacts`: none for a loss, not even in the status). The
  reported collision flag (``~/collision``) follows them; a stream restart clears it. The other inputs (also
  before a robot model) are taken or refused and counted by :class:`MonitorInputs`; :func:`monitor_status` makes
  the status line and values.
- **Parameter changes at safe points** (:meth:`~MonitorSupervisor.configure`): monitor settings apply when
  no collision is reported, the reaction's when the arm is moving (not stopped or resuming).
- **Thresholds calibrated live** (:meth:`~MonitorSupervisor.start_calibration` ...
  :meth:`~MonitorSupervisor.finish_calibration`): the residual of the arm's own moves is recorded
  (:class:`.thresholds.ThresholdRecorder`), leaving out what the monitor already widens for (the payload sampler
  active, an announced grasp/release window); the result is the caller's to apply (the node sets its
  ``thresholds`` parameter, which applies once no collision is reported).

Units: SI (s, kg, m, N m); joint order: the model's. Stamps ``t`` are the joint-state stream's; ``now`` is
the caller's clock (the node's ROS time), in which commanded trajectories run.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Protocol

import numpy as np

from ..errors import PayloadEstimationError
from ..levels import ERROR, OK, WARN, Note
from ..model.dynamics import RigidBodyDynamics
from ..model.parameters import BodyInertia
from ..node_limits import MAX_COM_RADIUS, MAX_PAYLOAD
from ..signals.torque_sign import TorqueSignGate
from .contact import ContactEstimate
from .detector import CollisionEvent
from .monitor import CollisionMonitor, MonitorConfig, MonitorStep
from .observer import JointFriction
from .payload_change import GRASP, KINDS, RELEASE, PayloadWatch, WatchConfig
from .payload_loss import LossVerdict, PayloadLossClassifier
from .provisional import ProvisionalFit
from .reaction import Action, ReactionState, ReactionStateMachine
from .thresholds import ThresholdCalibration, ThresholdRecorder

SIGMA_PERIOD = 0.01
"""s between updates of the thresholds widened by an estimate's σ (a gravity regressor each)."""

EVENT_WORDS = {"grasped": GRASP, "released": RELEASE}
"""payload_estimator/payload_event texts -> the announced change."""


class EstimateRefused(PayloadEstimationError):
    """A payload estimate the monitor does not put into its model; the message says why."""


class CalibrationRefused(PayloadEstimationError):
    """A threshold calibration request that cannot be done now; the message says why and what to do."""


class PayloadModel(Protocol):
    """What the monitor needs of a payload: an estimate record (payload/) or a :class:`.provisional.ProvisionalFit`."""

    mass: float
    com: np.ndarray
    method: str

    def observer_model(self, point_mass: bool = True) -> tuple[BodyInertia, bool]: ...


LimitCheck = Callable[[float, np.ndarray, "np.ndarray | None", float, float], None]
"""(mass kg, CoM m, inertia about the CoM or None, max_payload kg, max_com_radius m) -> None; raises a
:class:`~payload_estimation.errors.PayloadEstimationError` saying why the payload is not plausible."""


@dataclass(frozen=True)
class SupervisorConfig:
    """The rules' settings, named as the node's parameters (defaults: its parameter table): max_payload kg and
    max_com_radius m (what counts as a payload), sampling_threshold_factor, payload_event_window s and
    payload_event_floor N m (the least threshold inside it),
    payload_as_point_mass (a gravity-only estimate also enters M and C), policy and resume_delay s (the reaction),
    hold_time s and stop_deceleration rad/s² (the stop), resume_velocity_scale and resume_min_duration s (the
    first segment of a resumed trajectory), payload_lost_stop (a payload loss stops the arm as a collision does)."""

    max_payload: float = MAX_PAYLOAD
    max_com_radius: float = MAX_COM_RADIUS
    sampling_threshold_factor: float = 1.5
    payload_event_window: float = 5.0
    payload_event_floor: float = 6.0
    payload_as_point_mass: bool = True
    policy: str = "stop_and_resume"
    resume_delay: float = 2.0
    hold_time: float = 0.2
    stop_deceleration: float = 10.0
    resume_velocity_scale: float = 0.5
    resume_min_duration: float = 0.5
    payload_lost_stop: bool = False

    def watch(self) -> WatchConfig:
        """The payload watch's settings."""
        return WatchConfig(window=self.payload_event_window, sampling_factor=self.sampling_threshold_factor,
                           window_floor=self.payload_event_floor, max_payload=self.max_payload,
                           max_com_radius=self.max_com_radius)


@dataclass(frozen=True)
class Planner:
    """The motion rules a stop and a resume use, bound to the robot's limits: ``stop_point(q, dq, deceleration,
    min_time, lead) -> (q_stop rad, t s)``, ``move_duration(q_from, q_to, v_to, velocity_scale, min_duration)
    -> s``, the move from rest at q_from into q_to with velocity v_to (rad/s; None: to rest), and
    ``stop_duration(starts, q_stop, t) -> s``: ``t`` stretched until the controller's path to q_stop from every
    (q, dq) of ``starts`` stays within the velocity limits (sampling.poses)."""

    stop_point: Callable[[np.ndarray, np.ndarray, float, float, float], tuple[np.ndarray, float]]
    move_duration: Callable[[np.ndarray, np.ndarray, np.ndarray | None, float, float], float]
    stop_duration: Callable[[list, np.ndarray, float], float] = lambda starts, q_stop, t: t


@dataclass(frozen=True)
class Command:
    """A trajectory the monitor commands: times ``t`` (m,) s from now, points ``q`` (m, n) rad, ``velocities``
    (m, n) rad/s or None (0 at the last point only)."""

    t: np.ndarray
    q: np.ndarray
    velocities: np.ndarray | None = None


MAX_LEAD = 0.2
"""s: the most a stop point is moved ahead for the age of the sample it is computed from."""


@dataclass(frozen=True)
class Report:
    """A detection or release to report now; ``changed``: the reported collision flag changed with it."""

    event: CollisionEvent
    changed: bool


@dataclass(frozen=True)
class SupervisorStep:
    """One sample's outcome: the monitor's step, the reaction's action to command now, the new provisional
    payload learnt at this sample (or None), the lines worth a log entry (payload model changes, windows),
    the payload-loss check's verdict on a detected event decided at this sample (or None), the detections
    and releases to report now and the contact estimates to publish now (held with their detection until the
    verdict, none for a payload loss; ``monitor.contact`` is the one made at this sample, whatever the verdict;
    module docstring)."""

    monitor: MonitorStep
    action: Action
    fit: ProvisionalFit | None
    notes: tuple[Note, ...]
    loss: LossVerdict | None = None
    reports: tuple[Report, ...] = ()
    contacts: tuple[ContactEstimate, ...] = ()


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


class MonitorSupervisor:
    """One arm's monitor with its payload, thresholds and reaction rules (module docstring).

    ``frame``: the model's payload frame (an estimate in another one is refused); ``limit_check``: the payload
    layer's plausibility check (None: frame check only); ``friction``, ``link_names``: as
    :class:`.monitor.CollisionMonitor`; ``sampling``: the sampler's active flag at start; ``planner``: the motion
    rules of :meth:`react` (None: it refuses to command).
    """

    def __init__(self, dyn: RigidBodyDynamics, monitor: MonitorConfig, config: SupervisorConfig | None = None, *,
                 frame: str = "", limit_check: LimitCheck | None = None, friction: JointFriction | None = None,
                 link_names: tuple[str, ...] | None = None, sampling: bool = False, planner: Planner | None = None):
        self.dyn, self.frame, self.limit_check, self.planner = dyn, frame, limit_check, planner
        self.cfg = config or SupervisorConfig()
        self._friction, self._link_names = friction, link_names
        self.payload: PayloadModel | None = None
        self.reaction = ReactionStateMachine(self.cfg.policy, self.cfg.resume_delay)
        self.watch = PayloadWatch(dyn, _base(monitor, dyn.n), self.cfg.watch())
        self.watch.set_sampling(sampling)
        self.loss = PayloadLossClassifier(dyn)
        self.lost: LossVerdict | None = None  # the last payload loss
        self.losses = 0
        self._verdict: LossVerdict | None = None  # the current event's verdict
        self._sigma: dict | None = None  # the last uncertainty record (mass, com, gravity_covariance)
        self._payload_cov: np.ndarray | None = None  # 4 x 4 gravity covariance of the carried estimate
        self._sigma_t: float | None = None
        self._last: tuple[float, np.ndarray] | None = None  # the last sample (t s, q rad): σ widening re-applied there
        self._lost_block = False  # after a loss: estimates refused until 0 kg, an announcement or a sampling run
        self._grasp_announced = False  # a grasp was announced (and no release or loss since): losses are judged
        self.mon = self._new_monitor(monitor)
        self.sign = TorqueSignGate(dyn.desc.joint_names)  # a torque running opposite to the model: not monitoring
        self.torque_gain: np.ndarray | None = None  # N m per unit of the stream's effort (None: 1)
        self._pending_monitor: MonitorConfig | None = None
        self._pending_reaction = False
        self._logged_mass: float | None = None  # provisional mass last logged (a refit every rest block is not news)
        self._active: tuple[float, Command, bool] | None = None  # (start s, the trajectory, resumable)
        self._remainder: Command | None = None
        self.contact: ContactEstimate | None = None  # the contact estimate of the current (or last) event
        self.collision = False  # the reported collision flag (~/collision)
        self._deferred: CollisionEvent | None = None  # a detection waiting for the loss check's verdict
        self._held: ContactEstimate | None = None  # its contact estimate, published only for a collision
        self.recorder: ThresholdRecorder | None = None  # a threshold calibration in progress
        self._estimated: PayloadModel | None = None  # the payload the last estimate gave (None: unloaded)
        self._due: list[Note] = []  # notes of a restart, logged with the next update's

    # ------------------------------------------------------------------ configuration
    def _new_monitor(self, cfg: MonitorConfig) -> CollisionMonitor:
        mon = CollisionMonitor(self.dyn, cfg, friction=self._friction, link_names=self._link_names)
        self.watch.configure(self.cfg.watch(), _base(cfg, self.dyn.n))
        mon.detector.scale_thresholds(self.watch.scale())
        mon.explain = self.watch.explain
        self.mon = mon
        self._apply_payload()
        return mon

    def set_torque_gain(self, gain: np.ndarray | None) -> None:
        """N m per unit of the effort :meth:`update` is given, per joint (``signals.torque_gains``; None or all 1:
        the effort is torque); the torque's sign is judged again with it."""
        g = None if gain is None else np.asarray(gain, float)
        self.torque_gain = None if g is None or np.all(g == 1.0) else g
        self.sign.reset()

    def configure(self, monitor: MonitorConfig, config: SupervisorConfig) -> None:
        """New settings: the payload's at once, the monitor's when no collision is reported, the reaction's when
        the arm is moving (:attr:`pending` says what waits)."""
        old, self.cfg = self.cfg, config
        if monitor != self.mon.config:
            self._pending_monitor = monitor
        if (config.policy, config.resume_delay) != (self.reaction.policy, self.reaction.resume_delay):
            self._pending_reaction = True
        if config.payload_as_point_mass != old.payload_as_point_mass:
            self._apply_payload()
        if config.watch() != old.watch():
            self.watch.configure(config.watch(), self.watch.base)
            self.mon.detector.scale_thresholds(self.watch.scale())  # a window open now takes the new floor
        self.apply_pending()

    def apply_pending(self) -> list[Note]:
        """Apply the waiting settings that are safe now; returns what to log."""
        notes = []
        if self._pending_monitor is not None and not self.mon.detector.in_collision:
            self._new_monitor(self._pending_monitor)
            self._pending_monitor = None
        if self._pending_reaction and self.reaction.state is ReactionState.MOVING:
            self.reaction = ReactionStateMachine(self.cfg.policy, self.cfg.resume_delay)
            self._pending_reaction = False
            if self.reaction.policy == "none":
                notes.append(("warning", "collision reaction disabled (policy none): collisions are only reported"))
        return notes

    @property
    def pending(self) -> set[str]:
        """What waits for a safe point: 'monitor' (until no collision), 'reaction' (until the arm moves)."""
        return ({"monitor"} if self._pending_monitor is not None else set()) | (
            {"reaction"} if self._pending_reaction else set())

    def adopt(self, old: MonitorSupervisor) -> None:
        """Carry over ``old``'s payload, reaction, trajectory bookkeeping, residual and collision events (a new
        robot model of the same arm: a collision active now is released as it would have been). Raises
        PayloadEstimationError for a model with another number of joints: a running monitor keeps its arm."""
        if old.dyn.n != self.dyn.n:
            raise PayloadEstimationError(
                f"it describes an arm of {self.dyn.n} joints ({self.dyn.desc.name}), but the monitor is watching one "
                f"of {old.dyn.n} ({old.dyn.desc.name}); restart collision_monitor to watch another arm")
        self.mon.carry(old.mon)
        self.payload, self.reaction, self._estimated = old.payload, old.reaction, old._estimated
        self._active, self._remainder = old._active, old._remainder
        self.collision, self._deferred, self._held = old.collision, old._deferred, old._held
        self.recorder = old.recorder  # same arm, same joints: the calibration in progress goes on
        self._apply_payload()
        self.watch.carried(self.mon.observer.payload)

    # ------------------------------------------------------------------ per sample
    def update(self, t: float, q: np.ndarray, dq: np.ndarray, tau: np.ndarray) -> SupervisorStep:
        """One joint-state sample (s, rad, rad/s, the stream's effort: N m after :attr:`torque_gain`): the monitor,
        the provisional payload and its thresholds, the reaction."""
        if self.torque_gain is not None:
            tau = tau * self.torque_gain
        notes = self.apply_pending() if self._pending_monitor is not None or self._pending_reaction else []
        if self._due:
            notes, self._due = self._due + notes, []
        self._last = (t, np.asarray(q, float))
        step = self.mon.update(t, q, dq, tau)
        if self.sign.due(t) and self.sign.feed(self.mon.observer.gravity_torque, tau) is not None:
            notes.append(("error", f"{self.sign.fault}. Not monitoring: collision detection is off until then"))
        if self.sign.fault is not None:
            return SupervisorStep(step, Action.NOTHING, None, tuple(notes))
        if step.event is not None and step.event.active:
            self.contact = self._held = None
        ev = self.mon.detector.current
        verdict = self._classify(t, q, dq, step.residual, ev)
        w = self.watch.update(t, q, dq, tau, settle=self.settle,
                              detected=None if ev is None else ev.detection_time)
        if w.fit is not None and self.watch.learning:
            notes += self._set_payload(w.fit, "provisional")
        elif w.fit is not None:  # learning stops only when a release completed: back to the unloaded model
            notes += self._set_payload(None, "release")
        if w.scale is not None:
            self.mon.detector.scale_thresholds(w.scale)
        if w.note:
            notes.append(("info", w.note))
        if verdict is not None and verdict.lost:
            notes += self._on_lost(verdict)
        self._widen(t, q)
        if self.recorder is not None:
            self.recorder.add(t, step.residual, dq, self._not_calibrated())
        action = self.reaction.update(t, self._stopping(ev))
        reports = self._reports(step.event, verdict)
        return SupervisorStep(step, action, w.fit, tuple(notes), verdict, reports, self._contacts(step.contact))

    def _reports(self, ev: CollisionEvent | None, verdict: LossVerdict | None) -> tuple[Report, ...]:
        """This sample's detection or release, and a held detection once the loss check decided (module docstring)."""
        due = []
        if ev is not None and ev.active and self.loss.body is not None and verdict is None:
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

    def _contacts(self, made: ContactEstimate | None) -> tuple[ContactEstimate, ...]:
        """The contact estimate to publish now: at once without a loss check, held while its detection waits for the
        verdict, then published for a collision and dropped for a payload loss (the loss record is the answer)."""
        if made is not None:
            self._held = made
        c, v = self._held, self._verdict
        if c is None or self._deferred is not None:
            return ()
        self._held = None
        if v is not None and v.lost:
            return ()
        self.contact = c
        return (c,)

    def _classify(self, t, q, dq, r, ev: CollisionEvent | None) -> LossVerdict | None:
        if ev is None or not ev.active:
            self._verdict = None
        verdict = self.loss.update(t, q, dq, r, ev)
        if verdict is not None:
            self._verdict = verdict
        return verdict

    def _stopping(self, ev: CollisionEvent | None) -> bool:
        """The reaction's collision flag: with an estimated payload carried it waits for the loss check's verdict
        (a loss stops only with ``payload_lost_stop``)."""
        if not self.mon.detector.in_collision:
            return False
        v = self._verdict
        if v is None:
            return self.loss.body is None or ev is None
        return not v.lost or self.cfg.payload_lost_stop

    def _on_lost(self, v: LossVerdict) -> list[Note]:
        self.lost, self.losses, self._lost_block = v, self.losses + 1, True
        self._grasp_announced = False
        stop = "; stopping (payload_lost_stop)" if self.cfg.payload_lost_stop else "; the arm is not stopped"
        notes = [("warning", f"{v.reason} (at t={v.time:.3f} s){stop}")]
        return notes + self._set_payload(None, "payload lost")

    @property
    def settle(self) -> float:
        """s, the residual's convergence after a payload change: 5 / the smallest observer gain."""
        return 5.0 / float(self.mon.observer.gains.min())

    def restart(self) -> bool:
        """The stream started over: re-initialise observer, detector and reaction from its new samples, an
        interrupted trajectory is not resumed. The payload the last estimate gave is kept (the object is taken to be
        still in the gripper: a driver reconnects, the gripper does not open); a provisional payload learnt at rest
        from the old stream is dropped back to it: nobody confirmed it, and what it was learnt from has ended (a
        simulator or a robot that starts over may hold nothing; a learning window or sampling run still open
        learns again from the new samples). What was decided is logged with the next :meth:`update`'s notes.
        Returns whether the reported collision flag was cleared."""
        self.mon.reset(keep_residual=True)  # a load or contact still there stays visible
        self.mon.detector.reset()
        self.reaction.reset()
        self._active = self._remainder = None
        self._held = None
        self.watch.restart()
        self._due.append(self._restart_note())
        cleared, self.collision = self.collision, False
        return cleared

    def _restart_note(self) -> Note:
        p, kept = self.payload, self._estimated
        keep = ("the unloaded model" if kept is None else
                f"the estimate in use, {kept.mass:.3f} kg (if the gripper is empty now, publish a 0 kg estimate or "
                "call payload_estimator/reset)")
        if isinstance(p, ProvisionalFit):
            self._set_payload(kept, "estimate")
            self._logged_mass = None
            return ("warning", f"stream restarted: the provisional payload {p.mass:.3f} kg learnt from the old stream "
                               f"is dropped (never confirmed by an estimate); the observer uses {keep}")
        return ("info", f"stream restarted: the observer keeps {keep}")

    # ------------------------------------------------------------------ threshold calibration
    def start_calibration(self) -> str:
        """Start recording the residual for new thresholds (a recording in progress starts over); the log line."""
        old, self.recorder = self.recorder, ThresholdRecorder(self.dyn.n)
        again = "" if old is None else f" (the recording in progress, {old.summary()}, was discarded)"
        return ("threshold calibration started: move the arm through the task's motions without contact, then call "
                f"~/finish_threshold_calibration{again}")

    def cancel_calibration(self) -> str:
        """Drop the recording in progress; the log line (raises :class:`CalibrationRefused` when there is none)."""
        if self.recorder is None:
            raise CalibrationRefused("no threshold calibration in progress (~/start_threshold_calibration starts one)")
        old, self.recorder = self.recorder, None
        return f"threshold calibration cancelled ({old.summary()}); the thresholds are unchanged"

    def finish_calibration(self, safety: float, minimum: float) -> ThresholdCalibration:
        """The thresholds of the recording in progress (:meth:`.thresholds.ThresholdRecorder.result`), which ends
        it; raises :class:`CalibrationRefused` saying what to do: without a recording, when it is not contact-free
        (it ends: its residual cannot be used) or when it holds too little (it goes on)."""
        rec = self.recorder
        if rec is None:
            raise CalibrationRefused("no threshold calibration in progress: call ~/start_threshold_calibration, move "
                                     "the arm through the task's motions without contact, then finish")
        try:
            cal = rec.result(safety, minimum)
        except PayloadEstimationError as e:
            if rec.over is not None:
                self.recorder = None
                raise CalibrationRefused(f"{e}; the thresholds are unchanged and the recording is discarded: start "
                                         "a new one") from e
            raise CalibrationRefused(f"{e}; the recording goes on ({rec.summary()})") from e
        self.recorder = None
        return cal

    def _not_calibrated(self) -> str:
        """Why this sample's residual stays out of a threshold calibration ('' it goes in)."""
        if self.watch.sampling:
            return "payload sampler active"
        if self.watch.announced is not None:
            return "grasp/release window"
        return ""

    def loss_report(self, v: LossVerdict) -> dict[str, object]:
        """The record of a payload loss (``~/payload_lost``): the verdict, its times (s), the lost fraction and mass
        (kg), the reason and whether the arm is ``stopped`` for it (``payload_lost_stop``)."""
        return {"verdict": v.verdict, "time": v.time, "detection_time": v.detection_time, "fraction": v.fraction,
                "lost_mass": v.lost_mass, "reason": v.reason, "stopped": bool(self.cfg.payload_lost_stop)}

    def describe(self, ev: CollisionEvent, joint_names: tuple[str, ...]) -> str:
        """The log line of a detection or release (``joint_names``: as the operator knows the joints)."""
        if not ev.active:
            return f"collision released at t={ev.release_time:.3f} s (link {ev.link_name}, peak {ev.peak_max:.2f} N m)"
        a, inside = self.watch.announced, ""
        if a is not None:
            inside = (f" (during the announced {a.kind}: beyond what a payload change explains, "
                      f"{np.max(np.abs(self.watch.explained_last)):.2f} N m of it explained)")
        return (f"collision detected at t={ev.detection_time:.3f} s: on link {ev.link_name} or beyond, "
                f"peak |r| {ev.peak_max:.2f} N m at joint {joint_names[ev.peak_joint]}{inside}")

    # ------------------------------------------------------------------ payload inputs
    def estimate(self, est: PayloadModel, frame: str) -> list[Note]:
        """A published estimate in ``frame``: the observer's payload from now on; returns what to log. Raises
        :class:`EstimateRefused` (the previous payload is kept) for another frame or an implausible payload."""
        if est.mass == 0.0:
            self._lost_block = False
            notes = []
            if self.payload is not None and self.payload.mass > 0 and self.watch.announced is None:
                notes.append(("info", f"0 kg estimate while carrying a payload: {self.watch.announce(RELEASE)}"))
                self.mon.detector.scale_thresholds(self.watch.scale())
            elif self.watch.estimate(0.0):
                self.mon.detector.scale_thresholds(self.watch.scale())
            return notes + self._set_payload(None, "estimate")
        if self._lost_block:
            raise EstimateRefused("the payload was lost: an estimate of it is not used (announce "
                                  "payload_estimator/released, or grasped for a new object)")
        if frame != self.frame:
            raise EstimateRefused(f"frame '{frame}' is not this model's payload frame '{self.frame}'")
        if self.limit_check is not None:
            try:
                self.limit_check(est.mass, np.asarray(est.com, float), getattr(est, "inertia", None),
                                 self.cfg.max_payload, self.cfg.max_com_radius)
            except PayloadEstimationError as e:
                raise EstimateRefused(str(e)) from e
        if self.mon.detector.in_collision and self.loss.body is not None:
            raise EstimateRefused("an event is being classified (collision or payload lost): the carried payload "
                                  "model is kept until it is decided; the next estimate is taken")
        self.watch.estimate(est.mass)  # an estimate replaces the provisional payload
        self.mon.detector.scale_thresholds(self.watch.scale())
        notes = self._set_payload(est, "estimate")
        self._match_sigma()
        return notes

    def uncertainty(self, mass: float, com, gravity_covariance) -> None:
        """The covariance (4 x 4 of m, m cx, m cy, m cz; kg, kg m) of the estimate of ``mass`` kg with CoM ``com``
        m, published with it (before or after it): the thresholds widen by the torque it allows at each pose. A
        newer estimate keeps the previous one's σ until its own arrives."""
        cov = np.asarray(gravity_covariance, float)
        if cov.shape != (4, 4) or not np.all(np.isfinite(cov)) or np.any(np.diag(cov) < 0):
            raise EstimateRefused(f"an estimate's gravity covariance must be 4 x 4 and finite, got {cov.shape}")
        self._sigma = {"mass": float(mass), "com": np.asarray(com, float), "cov": 0.5 * (cov + cov.T)}
        self._match_sigma()

    def _match_sigma(self) -> None:
        p, s = self.payload, self._sigma
        match = (p is not None and s is not None and not isinstance(p, ProvisionalFit) and p.mass == s["mass"]
                 and np.array_equal(np.asarray(p.com, float), s["com"]))
        if match:
            self._payload_cov = s["cov"]
        elif p is None or isinstance(p, ProvisionalFit):
            self._payload_cov = None
        # else: the previous estimate's σ stays until this one's arrives (its message may come second)
        self._sigma_t = None
        if match:
            self.loss.carried(self.loss.body, self._payload_cov, self.loss.dynamic)
        if self._last is not None:  # at once: never unwidened until the next sample (a window of low thresholds)
            self._widen(*self._last)

    def _widen(self, t: float, q: np.ndarray) -> None:
        """Thresholds widened by k_sigma x the carried estimate's gravity torque σ at ``q`` (every SIGMA_PERIOD)."""
        cov = self._payload_cov
        if cov is None or self.watch.learning or (self._sigma_t is not None and 0 <= t - self._sigma_t < SIGMA_PERIOD):
            return
        self._sigma_t = t
        y = self.dyn.payload_gravity_regressor(q)
        std = np.sqrt(np.maximum(np.einsum("ij,jk,ik->i", y, cov, y), 0.0))
        self.mon.detector.scale_thresholds(self.watch.scale() + self.watch.cfg.k_sigma * std / self.watch.base)

    @property
    def sigma_in_use(self) -> bool:
        """Whether the thresholds are widened by the carried estimate's σ."""
        return self._payload_cov is not None

    @property
    def widening(self) -> float:
        """The largest threshold scale in use (1: the configured thresholds)."""
        return float(np.max(np.atleast_1d(self.mon.detector._scale)))

    def set_sampling(self, active: bool) -> None:
        """The payload sampler's active flag: while active the load is learnt at rest, with wider thresholds."""
        scale = self.watch.set_sampling(active)
        if active:
            self._payload_cov = self._sigma = None
        self._lost_block = self._lost_block and not active
        if scale is not None:
            self.mon.detector.scale_thresholds(scale)

    @property
    def sampling(self) -> bool:
        return self.watch.sampling

    def announce(self, kind: str) -> str:
        """An announced grasp or release (:data:`.payload_change.KINDS`); returns the log line."""
        text = self.watch.announce(kind)
        self._logged_mass, self._lost_block = None, False
        self._grasp_announced = kind == GRASP
        self._arm_loss_check()
        self.mon.detector.scale_thresholds(self.watch.scale())
        return text

    def _set_payload(self, est: PayloadModel | None, source: str) -> list[Note]:
        previous, self.payload = self.payload, est
        if source != "provisional":
            self._estimated = est
        self._apply_payload()
        self.watch.carried(self.mon.observer.payload)
        if source == "provisional":  # only a refit of a provisional payload may be quiet, never a change of source
            if isinstance(previous, ProvisionalFit) and self._quiet_refit(est):
                return []
            self._logged_mass = est.mass
        what = est.method if est is not None and source == "provisional" else source
        text = "unloaded" if est is None else (f"{what} payload {est.mass:.3f} kg, CoM "
                                               f"{np.round(np.asarray(est.com) * 1e3, 1).tolist()} mm")
        return [("info", f"observer model: {text}")]

    def _quiet_refit(self, est: ProvisionalFit) -> bool:
        """A provisional refit within 0.05 kg and 5 % of the mass last logged is not logged (one per rest block)."""
        last, self._logged_mass = self._logged_mass, est.mass
        if last is not None and abs(est.mass - last) <= 0.05 + 0.05 * last:
            self._logged_mass = last
            return True
        return False

    def _apply_payload(self) -> None:
        est, point_mass = self.payload, self.cfg.payload_as_point_mass
        if isinstance(est, ProvisionalFit):
            if self.mon.set_payload(*self.watch.observer_model(est, point_mass)):
                self.watch.provisional.converged()  # the residual reads the refit at once: no settle to cover
            self.loss.carried(None)  # a provisional payload: an unannounced change stays a collision
            return
        body, gravity_only = est.observer_model(point_mass) if est is not None else (None, False)
        self.mon.set_payload(body, gravity_only)
        if body is None:
            self.loss.carried(None)
            self._payload_cov = None
            return
        self._arm_loss_check()

    def _arm_loss_check(self) -> None:
        """Losses are judged for an estimated payload carried after an announced grasp (module docstring)."""
        est = self.payload
        if est is None or isinstance(est, ProvisionalFit) or not self._grasp_announced:
            self.loss.carried(None)
            return
        body, gravity_only = est.observer_model(self.cfg.payload_as_point_mass)
        if body is None:
            self.loss.carried(None)
            return
        std = getattr(est, "std", None) or {}
        g = np.array([std.get("mass", 0.0), *(est.mass * std.get(k, 0.0) for k in ("cx", "cy", "cz"))])
        cov = self._payload_cov if self._payload_cov is not None else np.diag(g ** 2)
        self.loss.carried(body, cov, dynamic=not gravity_only)

    # ------------------------------------------------------------------ stop and resume
    def commanded(self, now: float, t: np.ndarray, q: np.ndarray, velocities: np.ndarray | None = None,
                  resumable: bool = True) -> bool:
        """A trajectory (times s from ``now``, points (m, n) rad, their velocities (m, n) rad/s or None) was
        commanded by someone else: the one to resume after a stop, unless not ``resumable`` (the sampler's: it
        aborts on a collision and commands its own next move). Returns whether it supersedes an interrupted
        trajectory, which then is not resumed."""
        superseded = self._remainder is not None
        self._remainder = None
        v = None if velocities is None else np.asarray(velocities, float)
        self._active = (now, Command(np.asarray(t, float), np.asarray(q, float), v), resumable)
        return superseded

    def stop(self, now: float) -> bool:
        """The arm stops at ``now``: keep what remains of the active trajectory (not while sampling); returns
        whether a remainder is kept for the resume."""
        self._remainder = None
        if self._active is not None and self._active[2] and not self.sampling:
            start, c, _ = self._active
            keep = c.t > now - start
            if keep.any():
                self._remainder = Command(c.t[keep] - (now - start), c.q[keep],
                                          None if c.velocities is None else c.velocities[keep])
        self._active = None
        return self._remainder is not None

    def resume(self, now: float, first_segment: Callable[[np.ndarray, np.ndarray | None], float]) -> Command | None:
        """The trajectory to command at ``now`` (the remainder with its velocities), or None when nothing is left to
        resume (none was interrupted, or a newer command superseded it). ``first_segment(q_target, v_target)``: the
        shortest duration (s) of the move from the stopped arm to the remainder's first point, arriving there with
        its velocity (rad/s; None: at rest); the remainder is shifted to start so."""
        if self._remainder is None:
            return None
        c, self._remainder = self._remainder, None
        v0 = None if c.velocities is None else c.velocities[0]
        c = replace(c, t=c.t - c.t[0] + max(float(c.t[0]), float(first_segment(c.q[0], v0))))
        self._active = (now, c, True)
        return c

    def _reach(self, q: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
        """Per-joint (lower, upper) rad of the measured ``q`` and the active trajectory's points, or None (none
        known). A stop point is extrapolated from the sample's velocity; the arm was decelerating towards the
        trajectory's points, so a stop beyond them (a sampling pose's move, a busy machine's 0.2 s lead) would
        leave the region the trajectory keeps to (the sampler's envelope): it is clipped to this box."""
        if self._active is None:
            return None
        pts = np.vstack([np.asarray(q, float)[None, :], self._active[1].q])
        return pts.min(axis=0), pts.max(axis=0)

    def react(self, action: Action, now: float, q: np.ndarray, dq: np.ndarray | None,
              lead: float) -> tuple[Command | None, Note | None]:
        """The trajectory to command at ``now`` for the reaction's ``action`` (None: none) and the line to log;
        (q rad, dq rad/s) is the sample ``lead`` s old. HOLD_POSITION: :meth:`stop`, then the stop point ramping the
        velocities down (``stop_deceleration``, at least ``hold_time`` s, the lead taken up to :data:`MAX_LEAD`), never
        beyond the active trajectory's points (:meth:`_reach`);
        RESUME: :meth:`resume` with a first segment of at least ``move_duration`` at ``resume_velocity_scale``."""
        cfg, plan = self.cfg, self.planner
        if action not in (Action.HOLD_POSITION, Action.RESUME):
            return None, None
        if plan is None:
            raise PayloadEstimationError(f"the reaction asks for {action.value} but the monitor has no planner to "
                                         "command it: build MonitorSupervisor with planner=...")
        if action is Action.HOLD_POSITION:
            reach = self._reach(q)
            kept = self.stop(now)
            lead = min(lead, MAX_LEAD)
            q_stop, t_stop = plan.stop_point(q, dq, cfg.stop_deceleration, cfg.hold_time, lead)
            if reach is not None:
                q_stop = np.clip(q_stop, *reach)
            if dq is not None:  # the controller starts from the arm now: at its speed, or slowed down since the sample
                q, dq = np.asarray(q, float), np.asarray(dq, float)
                t_stop = plan.stop_duration([(q + dq * lead, dq), (q + 0.5 * dq * lead, 0.5 * dq)], q_stop, t_stop)
            return Command(np.array([t_stop]), np.asarray(q_stop)[None, :], np.zeros((1, len(q)))), (
                "warning", "stopping: holding the current position" + (" (trajectory remainder kept for resume)"
                                                                        if kept else ""))
        resumed = self.resume(now, lambda q0, v0: plan.move_duration(q, q0, v0, cfg.resume_velocity_scale,
                                                                      cfg.resume_min_duration))
        if resumed is None:
            return None, ("info", "resuming: no interrupted trajectory to continue (released)")
        return resumed, ("info", f"resuming the interrupted trajectory: {len(resumed.t)} point(s), "
                                 f"{resumed.t[-1]:.2f} s")


def status_values(sup: MonitorSupervisor | None, policy: str) -> dict:
    """Status keys of the payload, the announced change, the reaction, the detector, the observer and the last
    contact estimate (``sup`` None: no robot model yet; ``policy`` the configured one)."""
    if sup is None:
        return {"payload_mass": 0.0, "payload_source": "none", "reaction_state": ReactionState.MOVING.value,
                "policy": policy, "payload_event": "", "payload_event_open": False, "payload_learning": False}
    p, w, det, obs, c = sup.payload, sup.watch, sup.mon.detector, sup.mon.observer, sup.contact
    vals = {"payload_mass": 0.0 if p is None else p.mass, "payload_source": "none" if p is None else p.method,
            "reaction_state": sup.reaction.state.value, "policy": sup.reaction.policy, "payload_event": w.last_change,
            "payload_event_open": w.announced is not None, "payload_learning": w.learning,
            "events": len(det.events) + (det.current is not None),  # the one in progress counts
            "thresholds": [round(float(x), 3) for x in np.broadcast_to(det.current_thresholds(), (det.n,))]}
    ev = det.current
    if ev is not None:
        vals.update({"link": ev.link_name, "peak": ev.peak_max, "onset_time": ev.onset_time,
                     "detection_time": ev.detection_time})
    last = det.events[-1] if det.events else None  # the keys above are the collision in progress only
    vals["last_collision"] = "" if last is None else (
        f"{last.link_name or 'link unknown'}, peak {last.peak_max:.2f} N m on joint {last.peak_joint + 1}, detected "
        f"at t={last.detection_time:.3f} s, released at t={last.release_time:.3f} s")
    if c is not None:
        lo, hi = c.force_range
        vals.update({"contact": c.summary(), "contact_link": c.link_name, "link_probability": c.link_probability,
                     "link_ambiguous": c.link_ambiguous, "force_norm": c.force_norm,
                     "force_ambiguous": c.force_ambiguous,
                     "force_range_N": f"{lo:.1f}..{hi:.1f}" if np.isfinite(hi) else f"{lo:.1f}..unbounded",
                     "fit_residual": c.fit_residual})
    vals["threshold_calibration"] = "" if sup.recorder is None else f"recording: {sup.recorder.summary()}"
    j = int(np.argmax(det.peak_ratio))
    vals.update({"residual_peak_ratio": round(float(det.peak_ratio[j]), 3), "residual_peak_joint": j + 1})
    return {**vals, "observer_gaps": obs.gaps, "samples_skipped": obs.skipped}


def monitor_status(sup: MonitorSupervisor | None, policy: str, inputs: MonitorInputs, model_error: str,
                   age: float | None, lost: bool) -> tuple[int, str, dict]:
    """(level, message, values) of the monitor's status: never silently blind, ERROR without a robot model
    (``model_error`` says why: ``sup`` None), before the first joint_states (``age`` None) and while they are
    ``lost`` (``age`` wall s); WARN during a reported collision; else OK with the payload in use."""
    vals = {**status_values(sup, policy), "collision": sup is not None and sup.collision, **inputs.values()}
    if sup is not None:
        vals.update({"threshold_scale": round(sup.widening, 3), "payload_sigma": sup.sigma_in_use,
                     "payload_losses": sup.losses, "payload_lost": "" if sup.lost is None else sup.lost.reason})
    if sup is None:
        level, text = ERROR, f"not monitoring: no robot model ({model_error})"
    elif age is None:
        level, text = ERROR, "not monitoring: no joint_states received yet"
    elif lost:
        level, text = ERROR, f"not monitoring: joint_states lost for {age:.2f} s (collision detection is blind)"
    elif sup.sign.fault is not None:
        level, text = ERROR, f"not monitoring: {sup.sign.fault}"
    elif sup.collision:
        level, text = WARN, f"collision on {vals.get('link', '?')}"
    else:
        p = sup.payload
        level, text = OK, f"monitoring ({'unloaded' if p is None else f'{p.method} payload {p.mass:.3f} kg'})"
        if sup.watch.announced is not None:
            text += f"; {sup.watch.announced.kind} announced: payload being learned"
    if vals["policy"] == "none" and level == OK:
        text += "; reaction disabled (policy none)"
    return level, text, vals


def _base(cfg: MonitorConfig, n: int) -> np.ndarray:
    return np.broadcast_to(np.asarray(cfg.thresholds, float), (n,)).copy()


__all__ = ["CalibrationRefused", "EstimateRefused", "GRASP", "KINDS", "LimitCheck", "MonitorSupervisor", "Note",
           "PayloadModel", "RELEASE",
           "MonitorInputs", "Report", "Planner", "Command", "MAX_LEAD", "SupervisorConfig", "SupervisorStep",
           "EVENT_WORDS", "OK", "WARN", "ERROR", "monitor_status", "status_values"]
