"""The collision monitor's rules around the per-sample core: what ``collision_monitor`` and the bare run do.

:class:`MonitorSupervisor` composes one arm's parts, each a small class with one job and its own frozen config
(whose defaults are the node's parameters' defaults), and applies the payload in use to them:

- :class:`.monitor.CollisionMonitor` (observer, detector, contact) runs each sample;
- :class:`.estimate_gate.EstimateGate` takes or refuses a published estimate (frame, limits, after a loss, while
  an event is classified); :class:`.estimate_sigma.EstimateSigma` widens the thresholds by its σ;
- :class:`.payload_change.PayloadWatch` learns the payload provisionally at rest while the payload sampler is
  active or after an announced grasp or release, with wider thresholds, until an estimate replaces it;
  :class:`.observer_payload.ObserverPayload` keeps the payload in use and words its changes;
- :class:`.loss_gate.LossGate` has each detection classified while an estimated payload is carried after an
  announced grasp (collision or payload lost) and says what is reported when, and whether the arm stops;
- :class:`.reaction.ReactionStateMachine` decides stop and resume; :class:`.stop_resume.StopResume` turns that
  into the trajectory to command, with the caller's :class:`.stop_resume.Planner`;
- :class:`.live_calibration.LiveCalibration` records the residual for new thresholds.

A stream restart (:meth:`~MonitorSupervisor.restart`) keeps the last estimate's payload and drops a provisional
one learnt from the old stream. New settings (:meth:`~MonitorSupervisor.configure`) apply at safe points: the
monitor's when no collision is reported, the reaction's when the arm is moving. The other inputs (also before a
robot model) are taken or refused and counted by :class:`.monitor_inputs.MonitorInputs`;
:func:`.monitor_status.monitor_status` makes the status line and values. docs/architecture.md draws the parts.

Units: SI (s, kg, m, N m); joint order: the model's. Stamps ``t`` are the joint-state stream's; ``now`` is
the caller's clock (the node's ROS time), in which commanded trajectories run.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ..errors import PayloadEstimationError
from ..levels import ERROR, OK, WARN, Note
from ..model.dynamics import RigidBodyDynamics
from ..signals.torque_sign import TorqueSignGate
from .contact import ContactEstimate
from .detector import CollisionEvent
from .estimate_gate import EstimateGate, EstimateGateConfig, EstimateRefused, LimitCheck, PayloadModel
from .estimate_sigma import SIGMA_PERIOD, EstimateSigma
from .live_calibration import CalibrationConfig, CalibrationRefused, LiveCalibration
from .loss_gate import LossGate, LossGateConfig, Report
from .monitor import CollisionMonitor, MonitorConfig, MonitorStep
from .monitor_inputs import EVENT_WORDS, MonitorInputs
from .monitor_status import monitor_status, status_values
from .observer import JointFriction
from .observer_payload import ObserverPayload, ObserverPayloadConfig
from .payload_change import GRASP, KINDS, RELEASE, PayloadWatch, WatchConfig
from .payload_loss import LossVerdict
from .provisional import ProvisionalFit
from .reaction import Action, ReactionConfig, ReactionState, ReactionStateMachine
from .stop_resume import MAX_LEAD, Command, Planner, StopResume, StopResumeConfig
from .thresholds import ThresholdCalibration

_WATCH, _GATE, _REACTION, _STOP, _LOSS = WatchConfig(), EstimateGateConfig(), ReactionConfig(), StopResumeConfig(), \
    LossGateConfig()
_PAYLOAD = ObserverPayloadConfig()


@dataclass(frozen=True)
class SupervisorConfig:
    """The node's rule parameters by their names, one flat record (``ros/monitor_params.py`` maps the node's values
    onto it); each default is its part's config's (one home each): max_payload kg and max_com_radius m
    (:class:`.estimate_gate.EstimateGateConfig`), sampling_threshold_factor, payload_event_window s and
    payload_event_floor N m (:class:`.payload_change.WatchConfig`), payload_as_point_mass (a gravity-only estimate
    also enters M and C: :class:`.observer_payload.ObserverPayloadConfig`), policy and resume_delay s
    (:class:`.reaction.ReactionConfig`), hold_time s, stop_deceleration rad/s², resume_velocity_scale and
    resume_min_duration s (:class:`.stop_resume.StopResumeConfig`), payload_lost_stop
    (:class:`.loss_gate.LossGateConfig`)."""

    max_payload: float = _GATE.max_payload
    max_com_radius: float = _GATE.max_com_radius
    sampling_threshold_factor: float = _WATCH.sampling_factor
    payload_event_window: float = _WATCH.window
    payload_event_floor: float = _WATCH.window_floor
    payload_as_point_mass: bool = _PAYLOAD.payload_as_point_mass
    policy: str = _REACTION.policy
    resume_delay: float = _REACTION.resume_delay
    hold_time: float = _STOP.hold_time
    stop_deceleration: float = _STOP.stop_deceleration
    resume_velocity_scale: float = _STOP.resume_velocity_scale
    resume_min_duration: float = _STOP.resume_min_duration
    payload_lost_stop: bool = _LOSS.payload_lost_stop

    def watch(self) -> WatchConfig:
        """The payload watch's settings."""
        return WatchConfig(window=self.payload_event_window, sampling_factor=self.sampling_threshold_factor,
                           window_floor=self.payload_event_floor, max_payload=self.max_payload,
                           max_com_radius=self.max_com_radius)

    def gate(self) -> EstimateGateConfig:
        """The estimate gate's settings."""
        return EstimateGateConfig(max_payload=self.max_payload, max_com_radius=self.max_com_radius)

    def reaction(self) -> ReactionConfig:
        """The reaction's settings."""
        return ReactionConfig(policy=self.policy, resume_delay=self.resume_delay)

    def stop_resume(self) -> StopResumeConfig:
        """The stop's and the resume's settings."""
        return StopResumeConfig(hold_time=self.hold_time, stop_deceleration=self.stop_deceleration,
                                resume_velocity_scale=self.resume_velocity_scale,
                                resume_min_duration=self.resume_min_duration)

    def observer_payload(self) -> ObserverPayloadConfig:
        """The observer's payload's settings."""
        return ObserverPayloadConfig(payload_as_point_mass=self.payload_as_point_mass)

    def loss_gate(self) -> LossGateConfig:
        """The loss gate's settings."""
        return LossGateConfig(payload_lost_stop=self.payload_lost_stop)


@dataclass(frozen=True)
class SupervisorStep:
    """One sample's outcome: the monitor's step, the reaction's action to command now, the new provisional
    payload learnt at this sample (or None), the lines worth a log entry (payload model changes, windows),
    the payload-loss check's verdict on a detected event decided at this sample (or None), the detections
    and releases to report now and the contact estimates to publish now (held with their detection until the
    verdict, none for a payload loss; ``monitor.contact`` is the one made at this sample, whatever the verdict;
    :mod:`.loss_gate`)."""

    monitor: MonitorStep
    action: Action
    fit: ProvisionalFit | None
    notes: tuple[Note, ...]
    loss: LossVerdict | None = None
    reports: tuple[Report, ...] = ()
    contacts: tuple[ContactEstimate, ...] = ()


class MonitorSupervisor:
    """One arm's monitor with its payload, thresholds and reaction rules (module docstring).

    ``frame``: the model's payload frame (an estimate in another one is refused); ``limit_check``: the payload
    layer's plausibility check (None: frame check only); ``friction``, ``link_names``: as
    :class:`.monitor.CollisionMonitor`; ``sampling``: the sampler's active flag at start; ``planner``: the motion
    rules of :meth:`react` (None: it refuses to command); ``calibration``: the rule of
    :meth:`finish_calibration`'s defaults.
    """

    def __init__(self, dyn: RigidBodyDynamics, monitor: MonitorConfig, config: SupervisorConfig | None = None, *,
                 frame: str = "", limit_check: LimitCheck | None = None, friction: JointFriction | None = None,
                 link_names: tuple[str, ...] | None = None, sampling: bool = False, planner: Planner | None = None,
                 calibration: CalibrationConfig | None = None):
        self.dyn = dyn
        self.cfg = config or SupervisorConfig()
        self._friction, self._link_names = friction, link_names
        self.observed = ObserverPayload()  # the payload in use
        self.gate = EstimateGate(frame, limit_check, self.cfg.gate())
        self.sigma = EstimateSigma(dyn)
        self.reaction = ReactionStateMachine(self.cfg.policy, self.cfg.resume_delay)
        self.motion = StopResume(self.cfg.stop_resume(), planner)
        self.watch = PayloadWatch(dyn, _base(monitor, dyn.n), self.cfg.watch())
        self.watch.set_sampling(sampling)
        self.loss_gate = LossGate(dyn, self.cfg.loss_gate())
        self.calibration = LiveCalibration(dyn.n, calibration)
        self._last: tuple[float, np.ndarray] | None = None  # the last sample (t s, q rad): σ widening re-applied there
        self.mon = self._new_monitor(monitor)
        self.sign = TorqueSignGate(dyn.desc.joint_names)  # a torque running opposite to the model: not monitoring
        self.torque_gain: np.ndarray | None = None  # N m per unit of the stream's effort (None: 1)
        self._pending_monitor: MonitorConfig | None = None
        self._pending_reaction = False
        self._due: list[Note] = []  # notes of a restart, logged with the next update's

    # ------------------------------------------------------------------ the parts' state, by its old names
    frame = property(lambda self: self.gate.frame, doc="The model's payload frame.")
    limit_check = property(lambda self: self.gate.limit_check, doc="The payload layer's plausibility check.")
    planner = property(lambda self: self.motion.planner, doc="The motion rules of :meth:`react`.")
    loss = property(lambda self: self.loss_gate.classifier, doc="The payload-loss classifier.")
    lost = property(lambda self: self.loss_gate.lost, doc="The last payload loss (None: none).")
    losses = property(lambda self: self.loss_gate.losses, doc="Payload losses so far.")
    contact = property(lambda self: self.loss_gate.contact, doc="The contact estimate of the current (or last) "
                                                                   "event.")
    recorder = property(lambda self: self.calibration.recorder, doc="A threshold calibration in progress (or None).")

    @property
    def payload(self) -> PayloadModel | None:
        """The payload the observer uses (:mod:`.observer_payload`; None: unloaded)."""
        return self.observed.payload

    @property
    def collision(self) -> bool:
        """The reported collision flag (``~/collision``)."""
        return self.loss_gate.collision

    @collision.setter
    def collision(self, value: bool) -> None:
        self.loss_gate.collision = value

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
        """New settings: the payload's, the estimate gate's, the stop's and the loss gate's at once, the monitor's
        when no collision is reported, the reaction's when the arm is moving (:attr:`pending` says what waits)."""
        old, self.cfg = self.cfg, config
        self.gate.cfg, self.motion.cfg, self.loss_gate.cfg = config.gate(), config.stop_resume(), config.loss_gate()
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
        self.observed.payload, self.observed.estimated = old.observed.payload, old.observed.estimated
        self.reaction = old.reaction
        self.motion.adopt(old.motion)
        self.loss_gate.adopt(old.loss_gate)
        self.calibration.recorder = old.calibration.recorder  # same arm, same joints: the calibration goes on
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
        if self.mon.tracker is not None:  # the contact's σ carries the payload's (issue 46)
            self.mon.tracker.payload_covariance = self.sigma.cov
        step = self.mon.update(t, q, dq, tau)
        if self.sign.due(t) and self.sign.feed(self.mon.observer.gravity_torque, tau) is not None:
            notes.append(("error", f"{self.sign.fault}. Not monitoring: collision detection is off until then"))
        if self.sign.fault is not None:
            return SupervisorStep(step, Action.NOTHING, None, tuple(notes))
        gate = self.loss_gate
        if step.event is not None and step.event.active:
            gate.new_event()
        ev = self.mon.detector.current
        verdict = gate.classify(t, q, dq, step.residual, ev)
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
        if self.calibration.recorder is not None:
            self.calibration.add(t, step.residual, dq, self._not_calibrated())
        action = self.reaction.update(t, gate.stopping(self.mon.detector.in_collision, ev))
        reports = gate.reports(step.event, verdict)
        return SupervisorStep(step, action, w.fit, tuple(notes), verdict, reports, gate.contacts(step.contact))

    def _on_lost(self, v: LossVerdict) -> list[Note]:
        self.gate.blocked = True  # estimates of the lost payload are refused until 0 kg, an announcement or a run
        return [("warning", self.loss_gate.on_lost(v))] + self._set_payload(None, "payload lost")

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
        self.motion.clear()
        self.watch.restart()
        self._due.append(self._restart_note())
        return self.loss_gate.restart()

    def _restart_note(self) -> Note:
        """A provisional payload learnt from the old stream falls back to the last estimate's; the log line."""
        p = self.payload
        if not isinstance(p, ProvisionalFit):
            return self.observed.restart_note(None)
        self._set_payload(self.observed.estimated, "estimate")
        self.observed.logged_mass = None
        return self.observed.restart_note(p)

    # ------------------------------------------------------------------ threshold calibration
    def start_calibration(self) -> str:
        """Start recording the residual for new thresholds (:meth:`.live_calibration.LiveCalibration.start`)."""
        return self.calibration.start()

    def cancel_calibration(self) -> str:
        """Drop the recording in progress (:meth:`.live_calibration.LiveCalibration.cancel`)."""
        return self.calibration.cancel()

    def finish_calibration(self, safety: float | None = None, minimum: float | None = None) -> ThresholdCalibration:
        """The thresholds of the recording in progress (:meth:`.live_calibration.LiveCalibration.finish`)."""
        return self.calibration.finish(safety, minimum)

    def _not_calibrated(self) -> str:
        """Why this sample's residual stays out of a threshold calibration ('' it goes in)."""
        if self.watch.sampling:
            return "payload sampler active"
        if self.watch.announced is not None:
            return "grasp/release window"
        return ""

    def loss_report(self, v: LossVerdict) -> dict[str, object]:
        """The record of a payload loss (``~/payload_lost``; :meth:`.loss_gate.LossGate.loss_report`)."""
        return self.loss_gate.loss_report(v)

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
        :class:`.estimate_gate.EstimateRefused` (the previous payload is kept) for one the gate refuses."""
        if est.mass == 0.0:
            self.gate.blocked = False
            notes = []
            if self.payload is not None and self.payload.mass > 0 and self.watch.announced is None:
                notes.append(("info", f"0 kg estimate while carrying a payload: {self.watch.announce(RELEASE)}"))
                self.mon.detector.scale_thresholds(self.watch.scale())
            elif self.watch.estimate(0.0):
                self.mon.detector.scale_thresholds(self.watch.scale())
            return notes + self._set_payload(None, "estimate")
        self.gate.check(est, frame, classifying=self.mon.detector.in_collision and self.loss_gate.judging)
        self.watch.estimate(est.mass)  # an estimate replaces the provisional payload
        self.mon.detector.scale_thresholds(self.watch.scale())
        notes = self._set_payload(est, "estimate")
        self._match_sigma()
        return notes

    def uncertainty(self, mass: float, com, gravity_covariance) -> None:
        """The covariance (4 x 4 of m, m cx, m cy, m cz; kg, kg m) of the estimate of ``mass`` kg with CoM ``com``
        m, published with it (before or after it): the thresholds widen by the torque it allows at each pose. A
        newer estimate keeps the previous one's σ until its own arrives."""
        self.sigma.received(mass, com, gravity_covariance)
        self._match_sigma()

    def _match_sigma(self) -> None:
        if self.sigma.match(self.payload):
            self.loss_gate.covariance(self.sigma.cov)
        if self._last is not None:  # at once: never unwidened until the next sample (a window of low thresholds)
            self._widen(*self._last)

    def _widen(self, t: float, q: np.ndarray) -> None:
        """Thresholds widened by k_sigma x the carried estimate's gravity torque σ at ``q`` (:mod:`.estimate_sigma`;
        not while the payload is being learnt)."""
        std = None if self.watch.learning else self.sigma.due(t, q)
        if std is not None:
            self.mon.detector.scale_thresholds(self.watch.scale() + self.watch.cfg.k_sigma * std / self.watch.base)

    @property
    def sigma_in_use(self) -> bool:
        """Whether the thresholds are widened by the carried estimate's σ."""
        return self.sigma.cov is not None

    @property
    def widening(self) -> float:
        """The largest threshold scale in use (1: the configured thresholds)."""
        return float(np.max(np.atleast_1d(self.mon.detector._scale)))

    def set_sampling(self, active: bool) -> None:
        """The payload sampler's active flag: while active the load is learnt at rest, with wider thresholds."""
        scale = self.watch.set_sampling(active)
        if active:
            self.sigma.forget()
        self.gate.blocked = self.gate.blocked and not active
        if scale is not None:
            self.mon.detector.scale_thresholds(scale)

    @property
    def sampling(self) -> bool:
        return self.watch.sampling

    def announce(self, kind: str) -> str:
        """An announced grasp or release (:data:`.payload_change.KINDS`); returns the log line."""
        text = self.watch.announce(kind)
        self.observed.logged_mass, self.gate.blocked = None, False
        self.loss_gate.grasp_announced = kind == GRASP
        self._arm_loss_check()
        self.mon.detector.scale_thresholds(self.watch.scale())
        return text

    # ------------------------------------------------------------------ the observer's payload
    def _set_payload(self, est: PayloadModel | None, source: str) -> list[Note]:
        previous = self.observed.take(est, source)
        self._apply_payload()
        self.watch.carried(self.mon.observer.payload)
        return self.observed.note(previous, est, source)

    def _apply_payload(self) -> None:
        est, point_mass = self.payload, self.cfg.payload_as_point_mass
        if isinstance(est, ProvisionalFit):
            if self.mon.set_payload(*self.watch.observer_model(est, point_mass)):
                self.watch.provisional.converged()  # the residual reads the refit at once: no settle to cover
            self.loss_gate.disarm()  # a provisional payload: an unannounced change stays a collision
            return
        body, gravity_only = est.observer_model(point_mass) if est is not None else (None, False)
        self.mon.set_payload(body, gravity_only)
        if body is None:
            self.loss_gate.disarm()
            self.sigma.cov = None
            return
        self._arm_loss_check()

    def _arm_loss_check(self) -> None:
        """Losses are judged for an estimated payload carried after an announced grasp (:mod:`.loss_gate`)."""
        self.loss_gate.arm(self.payload, self.cfg.payload_as_point_mass, self.sigma.cov)

    # ------------------------------------------------------------------ stop and resume
    def commanded(self, now: float, t: np.ndarray, q: np.ndarray, velocities: np.ndarray | None = None,
                  resumable: bool = True) -> bool:
        """A trajectory commanded by someone else (:meth:`.stop_resume.StopResume.commanded`); whether it
        supersedes an interrupted trajectory."""
        return self.motion.commanded(now, t, q, velocities, resumable)

    def stop(self, now: float) -> bool:
        """The arm stops at ``now``: keep what remains of the active trajectory (not while sampling); returns
        whether a remainder is kept for the resume."""
        return self.motion.stop(now, keep=not self.sampling)

    def resume(self, now: float, first_segment: Callable[[np.ndarray, np.ndarray | None], float]) -> Command | None:
        """The trajectory to command at ``now`` (:meth:`.stop_resume.StopResume.resume`)."""
        return self.motion.resume(now, first_segment)

    def react(self, action: Action, now: float, q: np.ndarray, dq: np.ndarray | None,
              lead: float) -> tuple[Command | None, Note | None]:
        """The trajectory to command at ``now`` for the reaction's ``action`` and the line to log
        (:meth:`.stop_resume.StopResume.react`; a stop keeps no remainder while sampling)."""
        return self.motion.react(action, now, q, dq, lead, keep=not self.sampling)


def _base(cfg: MonitorConfig, n: int) -> np.ndarray:
    return np.broadcast_to(np.asarray(cfg.thresholds, float), (n,)).copy()


__all__ = ["CalibrationRefused", "EstimateRefused", "GRASP", "KINDS", "LimitCheck", "MonitorSupervisor", "Note",
           "PayloadModel", "RELEASE", "MonitorInputs", "Report", "Planner", "Command", "MAX_LEAD", "SIGMA_PERIOD",
           "SupervisorConfig", "SupervisorStep", "EVENT_WORDS", "OK", "WARN", "ERROR", "monitor_status",
           "status_values"]
