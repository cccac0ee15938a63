"""The payload estimator without ROS: captures, recordings, the reference run, the unloaded model, the fits.

:class:`PayloadEstimator` is what the ``payload_estimator`` node does between a message or a service
request and its answer: the node feeds it joint samples (:meth:`PayloadEstimator.add_sample`, effort
as the stream reports it) and calls one method per service; each returns an :class:`Answer` or an
:class:`EstimateOutcome` whose ``message`` is the service's answer. What the node keeps to itself:
measuring the stream's health (age, lost), the robot model's source, publishing, writing files, logging.

- Static captures (``~/capture``, ``~/capture_unloaded``, ``~/capture_calibration``): the window of
  recent samples must be static (:func:`signals.settle.check_static` with ``config.settle``; an
  unloaded capture, the differential fit's anchor, averages at least ``anchor_samples`` or
  ``anchor_window`` s). ``~/estimate`` fits the loaded captures (:func:`.static.estimate_payload_static`)
  and forgets them; the unloaded ones are kept until ``~/reset`` or ``~/released``.
- A recording (``~/start_recording``) takes every sample with a velocity until it is taken by
  ``~/store_reference`` (kept as the unloaded reference run, checked now so that a bad one is found
  before the grasp) or ``~/estimate_motion`` (:func:`.dynamic.estimate_payload_dynamic`, differential
  against the reference when there is one). A recording longer than ``max_recording`` s is cut and
  refused when it is taken. The model terms the fit needs are computed ahead (:mod:`.run_terms`): the
  reference's when it is stored, the recording's by :meth:`PayloadEstimator.prepare_recording` while it runs
  (the node calls it from a timer), so that the ``sample`` call waits for the solve only.
- The online estimate (issue 32) when the node gives one (:class:`.online_session.OnlineSession`): fed with
  every sample (a sample it cannot take is counted in ``online_errors``, the captures and the recording keep
  it), run against the unloaded model in use, started by ``~/grasped``, ended by ``~/released``, ``~/reset``, an
  accepted estimate from captures or a recording, or a payload loss the collision monitor reports. A CoM prior
  from the gripper (``grasp_com_prior``, ``grasp_com_prior_std``: :attr:`EstimatorConfig.com_prior`) and an inertia
  prior from the part's data (``grasp_inertia_prior``, ``grasp_inertia_prior_std``:
  :attr:`EstimatorConfig.inertia_prior`) are given to it at each ``~/grasped``.
- What the node reports: the answers of ``~/grasped``, ``~/released``, ``~/reset`` and of requests that need
  the live stream, the exports' outcome (``export_failures``) and the status line and values
  (:meth:`PayloadEstimator.status`; levels :data:`OK`, :data:`WARN`, :data:`ERROR`).
- The unloaded model: ``gravity_model`` (a file identified for this robot model, else estimates are
  refused), or with it empty the calibration file when one belongs to this robot model (one that
  does not is refused and the nominal model used). ``~/calibrate`` identifies it from the calibration
  captures and writes it (:meth:`PayloadEstimator.calibrate`).

Thread-safe: samples may arrive on another thread than the requests.
Times ``t`` are the stream's stamps (s); ``age`` the wall-clock age of the newest sample (s).
"""

from __future__ import annotations

import math
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from ..errors import PayloadEstimationError
from ..identification.identified_model import IdentificationError, IdentifiedModel
from ..identification.robot_identification import describe_offsets, identify_gravity
from ..levels import ERROR, OK, WARN, Note
from ..model.dynamics import RigidBodyDynamics
from ..model.robot_file import FINGERPRINT_KEY, kinematics_fingerprint
from ..node_limits import MAX_COM_RADIUS, MAX_PAYLOAD
from ..signals.samples import Samples
from ..signals.settle import SampleWindow, SettleConfig, check_static
from ..signals.torque_gains import effort_to_torque, torque_gains
from ..signals.torque_sign import TorqueSignGate
from .announcement_relay import AnnouncementRelay
from .dynamic import DynamicFitConfig, MotionRecording, check_recording, estimate_payload_dynamic
from .estimate import NO_PAYLOAD, PayloadEstimate
from .filtered import MomentumTerms
from .model_uncertainty import declared_source
from .online import ComPrior, InertiaPrior, OnlineConfig, inertia_prior_problem
from .online_session import OnlineSession, Tick
from .recordings import CURRENT_WARNING
from .result import PayloadDataError, PayloadLimits, is_no_payload
from .run_terms import LoadedTerms, reference_terms
from .static import StaticFitConfig, UnloadedModel, estimate_payload_static, precision_problem, unloaded_model

LOADED, UNLOADED, CALIBRATION = "loaded", "unloaded", "calibration"
"""The three kinds of static capture."""
CAPTURE_WORDS = {LOADED: "capture", UNLOADED: "unloaded capture", CALIBRATION: "calibration capture"}
"""How an answer names a capture of each kind."""


NODE_LIMITS = PayloadLimits(max_payload=MAX_PAYLOAD, max_com_radius=MAX_COM_RADIUS)
"""The nodes' plausibility limits (``max_payload`` kg, ``max_com_radius`` m; the fits' own defaults are wider)."""

MIN_COM_PRIOR_STD = 0.005
"""m, the smallest ``grasp_com_prior_std`` taken: a tighter CoM prior would claim more than a gripper's geometry
and grasp can know of where the part's CoM is."""


PREPARE_PERIOD = 0.1
"""s between a node's calls of :meth:`PayloadEstimator.prepare_recording` (the estimator node's 10 Hz timer)."""
PREPARE_BUDGET = 0.005
"""s of wall clock a call of :meth:`PayloadEstimator.prepare_recording` may take (the node's executor serves its
other callbacks meanwhile: in one process with busy neighbours an unbounded call held it 0.1-0.6 s). Alone a grid
point takes ~80 µs: 5 ms keep up with a 1 kHz stream on a 250 Hz grid (25 points per 0.1 s) with room to spare."""


@dataclass(frozen=True)
class EstimatorConfig:
    """Everything the estimator's rules read. The defaults are the ``payload_estimator`` node's: its parameter
    table (ros/estimator_params.py) takes them from here, the rows it shares with other nodes (the static
    test, the plausibility limits) must equal them (test_bare_run checks), so a bare run or a test that
    builds ``EstimatorConfig()`` runs the node's defaults.

    settle: the static test of a capture; anchor_samples / anchor_window (s): an unloaded capture
    averages at least this many samples or this long; fit: the static fit (method, noise, model
    uncertainty, precision limits, plausibility limits); torque_gain: N m per unit of effort, one value
    or one per joint; max_recording: s, longest recording; gravity_model: path of the unloaded model
    ('' none); calibration_file: where ``~/calibrate`` writes ('' the default path under $ROS_HOME);
    grasp_com_prior: m, payload frame, what the gripper knows of the CoM of the next grasped payload (() none;
    the online estimate's :class:`.online.ComPrior`) with 1-σ grasp_com_prior_std (m, isotropic);
    grasp_inertia_prior: kg m², [Ixx, Ixy, Ixz, Iyy, Iyz, Izz] about the part's CoM in payload frame axes, what the
    part's data say of the next grasped payload's inertia (() none; :class:`.online.InertiaPrior`) with 1-σ
    grasp_inertia_prior_std (a fraction of its largest moment).
    """

    settle: SettleConfig = SettleConfig()
    anchor_samples: int = 150
    anchor_window: float = 1.0
    fit: StaticFitConfig = StaticFitConfig(limits=NODE_LIMITS)
    torque_gain: tuple[float, ...] = (1.0,)
    max_recording: float = 30.0
    gravity_model: str = ""
    calibration_file: str = ""
    grasp_com_prior: tuple[float, ...] = ()
    grasp_com_prior_std: float = 0.02
    grasp_inertia_prior: tuple[float, ...] = ()
    grasp_inertia_prior_std: float = 0.3

    def grasp_prior_problem(self) -> str | None:
        """Why the CoM or the inertia prior cannot be used (None: both can): :meth:`com_prior_problem`, then
        ``grasp_inertia_prior`` (none, or a physical inertia about the CoM whose largest moment fits a payload
        within ``max_payload`` and ``max_com_radius``) with its std."""
        problem = self.com_prior_problem()
        if problem or not self.grasp_inertia_prior:
            return problem
        problem = inertia_prior_problem(self.grasp_inertia_prior, self.grasp_inertia_prior_std,
                                        "grasp_inertia_prior", "grasp_inertia_prior_std")
        if problem:
            return problem
        i, lim = self.grasp_inertia_prior, self.fit.limits
        largest, bound = max(i[0], i[3], i[5]), lim.max_payload * lim.max_com_radius ** 2
        if largest > bound:
            return (f"grasp_inertia_prior's largest moment {largest:g} kg m^2 exceeds that of max_payload "
                    f"({lim.max_payload:g} kg) all at max_com_radius ({lim.max_com_radius:g} m) from its CoM "
                    f"({bound:g} kg m^2): check the units (kg m^2, not kg mm^2 or g cm^2)")
        return None

    def com_prior_problem(self) -> str | None:
        """Why ``grasp_com_prior`` / ``grasp_com_prior_std`` cannot be used (None: they can): 3 finite values within
        ``max_com_radius`` of the payload frame origin (or none), a std of at least :data:`MIN_COM_PRIOR_STD`."""
        c, std = tuple(self.grasp_com_prior), self.grasp_com_prior_std
        shown = "[" + ", ".join(f"{x:g}" for x in c) + "]"
        if not (math.isfinite(std) and std >= MIN_COM_PRIOR_STD):
            return (f"grasp_com_prior_std {std:g} m is below {MIN_COM_PRIOR_STD:g} m: a tighter CoM prior would claim "
                    "a CoM the gripper cannot know (its geometry and the grasp place it within centimetres); use "
                    "0.01-0.03 m, what the part's CoM may be off from grasp_com_prior")
        if not c:
            return None
        if len(c) != 3:
            return (f"grasp_com_prior {shown} has {len(c)} value(s): give the CoM as 3 values [x, y, z] (m, payload "
                    "frame), or [0.0] for no prior")
        if not all(math.isfinite(x) for x in c):
            return f"grasp_com_prior {shown} is not a finite CoM: give 3 finite numbers [x, y, z] (m, payload frame)"
        radius, limit = math.hypot(*c), self.fit.limits.max_com_radius
        if radius > limit:
            return (f"grasp_com_prior {shown} is {1e3 * radius:.0f} mm from the payload frame origin, beyond "
                    f"max_com_radius ({limit:g} m): no accepted payload has its CoM there; give it in m in the "
                    "payload frame (the frame of the estimate's CoM)")
        return None

    @property
    def com_prior(self) -> ComPrior | None:
        """The online estimate's CoM prior for the next grasp (None: none); PayloadDataError if
        :meth:`com_prior_problem` finds one."""
        problem = self.com_prior_problem()
        if problem:
            raise PayloadDataError(problem)
        if not self.grasp_com_prior:
            return None
        return ComPrior(tuple(float(x) for x in self.grasp_com_prior), float(self.grasp_com_prior_std))

    @property
    def inertia_prior(self) -> InertiaPrior | None:
        """The online estimate's inertia prior for the next grasp (None: none); PayloadDataError if
        :meth:`grasp_prior_problem` finds one."""
        problem = self.grasp_prior_problem()
        if problem:
            raise PayloadDataError(problem)
        if not self.grasp_inertia_prior:
            return None
        return InertiaPrior(tuple(float(x) for x in self.grasp_inertia_prior), float(self.grasp_inertia_prior_std))

    def with_fit(self, **changes) -> EstimatorConfig:
        """This configuration with the static fit's fields in ``changes`` replaced (e.g. ``method``)."""
        return replace(self, fit=replace(self.fit, **changes))

    @property
    def anchor_settle(self) -> SettleConfig:
        """The static test of an unloaded capture (its noise is common to every pose of the fit)."""
        return replace(self.settle, min_average_samples=int(self.anchor_samples), max_window=float(self.anchor_window))

    @property
    def dynamic_fit(self) -> DynamicFitConfig:
        """The dynamic fit's settings: the model's error and the plausibility limits of the static fit."""
        f = self.fit
        return DynamicFitConfig(model_uncertainty=f.model_uncertainty, torque_offset_std=f.torque_offset_std,
                                limits=f.limits)

    @property
    def online(self) -> OnlineConfig:
        """The online estimate's settings: the model's error and the plausibility limits of the static fit."""
        f = self.fit
        return OnlineConfig(model_uncertainty=f.model_uncertainty, torque_offset_std=f.torque_offset_std,
                            limits=f.limits)

    @property
    def window_horizon(self) -> float:
        """s of samples kept: longer than any window a capture may reach back over (a history shorter than
        that reads as 'collecting samples')."""
        s = self.settle
        return max(0.5, 2 * s.window, 1.25 * s.max_window, 1.25 * self.anchor_window)


@dataclass(frozen=True)
class Answer:
    """A request's outcome: ``ok``, the ``message`` for the caller (what happened, what to do) and ``fault``:
    something was tried and failed (worth an error in the log), as opposed to a request that came too early."""

    ok: bool
    message: str
    fault: bool = False


@dataclass(frozen=True)
class EstimateOutcome:
    """What ``~/estimate`` or ``~/estimate_motion`` comes to: the accepted ``estimate`` (None: none, the
    previous one is kept), ``message`` for the caller, ``imprecise``: why its σ exceeds the limits ('' if
    it does not), ``fit_failed``: a fit ran and was rejected (as opposed to refused before fitting)."""

    message: str
    estimate: PayloadEstimate | None = None
    imprecise: str = ""
    fit_failed: bool = False

    @property
    def ok(self) -> bool:
        return self.estimate is not None


@dataclass(frozen=True)
class ModelChoice:
    """Which unloaded model is used: ``text`` to log ('' nothing to say), ``refused``: a file was refused."""

    text: str
    refused: bool = False


class PayloadEstimator:
    """The estimator's state and rules (module docstring); ``config`` from the node's parameters.
    ``look_for_calibration`` False: with ``gravity_model`` empty the nominal model is used and no calibration
    file is looked for (a bare run on the simulated arm: no file of this machine counts). ``online``: the
    online estimate's session (None: none, as in a bare run)."""

    def __init__(self, config: EstimatorConfig, look_for_calibration: bool = True,
                 online: OnlineSession | None = None):
        problem = config.grasp_prior_problem()
        if problem:
            raise PayloadDataError(problem)
        self.config = config
        self.look_for_calibration = look_for_calibration
        self.online = online
        self.online_errors = 0  # samples the online estimate could not take
        self.announcements = AnnouncementRelay()  # a grasp / release no collision monitor received yet
        self.last: tuple[int, str] = (OK, "unloaded (no payload estimated yet)")  # the status line's level and text
        self.export_failures = 0
        self.export_error = ""  # why the newest failed export failed
        self.dyn: RigidBodyDynamics | None = None
        self.joint_names: tuple[str, ...] = ()
        self.frame = ""
        self.gain = np.ones(1)
        self.sign = TorqueSignGate(())  # a torque running opposite to the model: estimates refused
        self.current: PayloadEstimate = NO_PAYLOAD
        self.gravity_model: UnloadedModel | None = None
        self.gravity_error = ""  # why gravity_model did not load (estimates are refused meanwhile)
        self.calibration_note = ""  # which calibration is used, or why the one found was refused
        self.calibration_refused = False
        self.reference: MotionRecording | None = None
        self._reference_model: MomentumTerms | None = None  # the reference's model torques, for self.dyn
        self._lock = threading.Lock()
        self._window = SampleWindow(horizon=config.window_horizon)
        self._captures: dict[str, list[tuple[np.ndarray, np.ndarray]]] = {k: [] for k in CAPTURE_WORDS}
        self._recording: list | None = None  # (t, q, dq, tau) rows while recording
        self._overflow = False
        self._terms: LoadedTerms | None = None  # the recording's model terms as far as computed
        self._terms_lock = threading.Lock()  # prepare_recording and the fit may run on different threads

    # ------------------------------------------------------------------ configuration
    def set_robot(self, dyn: RigidBodyDynamics, joint_names: tuple[str, ...]) -> ModelChoice:
        """Take a (new) robot model: its torque gains (SampleDataError if torque_gain does not fit it: nothing
        changes), its unloaded model; loaded and unloaded captures and the sample window start over."""
        gain = torque_gains(list(self.config.torque_gain), dyn.n, dyn.desc.joint_names)
        choice = self._choose_model(dyn)
        with self._lock:
            self.dyn, self.joint_names, self.gain = dyn, tuple(joint_names), gain
            self.sign = TorqueSignGate(dyn.desc.joint_names)
            self._reference_model = None  # computed again for this model when a fit needs it
            self.frame = dyn.desc.payload_frame_name
            self._captures[LOADED].clear()
            self._captures[UNLOADED].clear()
            self._window = SampleWindow(horizon=self.config.window_horizon)
        return choice

    def take_robot(self, dyn: RigidBodyDynamics, joint_names: tuple[str, ...]) -> list[Note]:
        """:meth:`set_robot`, and what to log: the gain warning, the unloaded model chosen, the online model."""
        return self._notes(self.set_robot(dyn, joint_names), gain=True)

    def reconfigure(self, config: EstimatorConfig, changed: set[str], online_estimation: bool = True) -> list[Note]:
        """New parameter values (``changed``: the parameters set): :meth:`configure`; a set ``gravity_model`` (also
        to the same name: the file may be new) chooses the unloaded model again; ``online_estimation`` switches
        the online estimate. Returns what to log."""
        self.configure(config)
        if self.online is not None and "online_estimation" in changed:
            self.online.set_enabled(online_estimation)
        if self.dyn is None:
            return self._notes(None, gain=False)
        return self._notes(self.load_model() if "gravity_model" in changed else None, gain="torque_gain" in changed)

    def _notes(self, choice: ModelChoice | None, gain: bool) -> list[Note]:
        notes: list[Note] = [("warning", self.gain_note())] if gain and self.gain_warning() else []
        if choice is not None and (choice.refused or choice.text):
            notes.append(("error" if choice.refused else "info", choice.text))
        return notes + self.use_online_model()

    def check(self, config: EstimatorConfig) -> str | None:
        """Why ``config`` cannot be taken (None: it can): a CoM or inertia prior it cannot use, or what does not fit
        the current robot model."""
        problem = config.grasp_prior_problem()
        if problem or self.dyn is None:
            return problem
        try:
            torque_gains(list(config.torque_gain), self.dyn.n, self.dyn.desc.joint_names)
        except PayloadEstimationError as e:
            return f"torque_gain: {e}"
        if config.gravity_model and config.gravity_model != self.config.gravity_model:
            try:
                checked_gravity_model(self.dyn, config.gravity_model)
            except (OSError, PayloadEstimationError) as e:
                return f"gravity_model {config.gravity_model} refused: {e}"
        return None

    def configure(self, config: EstimatorConfig) -> None:
        """Take new settings (checked by :meth:`check`); a changed static test starts the sample window over.
        The unloaded model is chosen again by :meth:`load_model` (a file may change under the same name)."""
        old, self.config = self.config, config
        if self.dyn is None:
            return
        if config.torque_gain != old.torque_gain:
            self.gain = torque_gains(list(config.torque_gain), self.dyn.n, self.dyn.desc.joint_names)
            self.sign.reset()  # judged again with the new gain
        if (config.settle, config.anchor_window) != (old.settle, old.anchor_window):
            with self._lock:
                self._window = SampleWindow(horizon=config.window_horizon)

    def load_model(self) -> ModelChoice | None:
        """Choose the unloaded model again from ``gravity_model`` (None: no robot model yet)."""
        return None if self.dyn is None else self._choose_model(self.dyn)

    def gain_warning(self) -> bool:
        """True when the gains make torque of something that is not (effort is motor current)."""
        return bool(np.any(np.abs(self.gain) != 1.0))

    def gain_note(self) -> str:
        """The warning to log when :meth:`gain_warning`: the gains applied and what current-based torque implies."""
        return f"torque_gain {self.gain.tolist()} N m per unit applied to joint_states effort; {CURRENT_WARNING}"

    # ------------------------------------------------------------------ the unloaded model
    def calibration_path(self, robot: str | None = None) -> Path:
        """``calibration_file``, or the default path for ``robot`` (default: the current model's name) under
        ``$ROS_HOME`` (ROS 2's per-user directory, default ~/.ros)."""
        if self.config.calibration_file:
            return Path(self.config.calibration_file).expanduser()
        ros_home = Path(os.environ.get("ROS_HOME") or Path.home() / ".ros").expanduser()
        return ros_home / "payload_estimation" / f"gravity_{robot or self.dyn.desc.name}.yaml"

    def _choose_model(self, dyn: RigidBodyDynamics) -> ModelChoice:
        """Load ``gravity_model`` for ``dyn``: a file that does not load or belong to ``dyn``'s model refuses
        estimates. Empty: the calibration file when there is one that belongs to ``dyn``'s model; one that
        does not is refused and the nominal model used."""
        path = self.config.gravity_model
        self.gravity_model, self.gravity_error = None, ""
        self.calibration_note, self.calibration_refused = "", False
        if path:
            try:
                self.gravity_model, note = checked_gravity_model(dyn, path)
            except (OSError, PayloadEstimationError) as e:
                self.gravity_error = f"gravity_model {path} did not load: {e}"
                return ModelChoice(f"{self.gravity_error}; estimates are refused until it loads (set gravity_model "
                                   "to a file identified for this robot model, or to '' for the nominal model)", True)
            self.calibration_note = f"gravity_model {path} ({note})"
            return ModelChoice(f"unloaded model: {self.gravity_model.uncertainty.source} from {path} ({note})")
        if not self.look_for_calibration:
            self.calibration_note = "not looked for: nominal model"
            return ModelChoice("")
        cal = self.calibration_path(dyn.desc.name)
        if not cal.is_file():
            self.calibration_note = f"none at {cal}: nominal model (payload_sampler/sweep calibrates)"
            return ModelChoice("")
        try:
            self.gravity_model, note = checked_gravity_model(dyn, cal)
        except (OSError, PayloadEstimationError) as e:
            self.calibration_note = f"REFUSED {cal}: {e}; the nominal model is used"
            self.calibration_refused = True
            return ModelChoice(f"calibration file {cal} refused: {e}. The nominal model is used: calibrate this robot "
                               "model again (payload_sampler/sweep), or set calibration_file or gravity_model to a "
                               "file of this robot model", True)
        made = written_words(cal)
        self.calibration_note = f"using {cal} ({note}); {made}; {FORGET_CALIBRATION}"
        return ModelChoice(f"calibrated gravity model found at {cal} and used ({note}): {made}; "
                           f"{FORGET_CALIBRATION}")

    def model_label(self, source: str) -> str:
        """Which unloaded model the estimates use and how its uncertainty was made; ``source`` names where
        the robot model came from."""
        if self.dyn is None:
            return "none"
        head = f"{self.dyn.desc.name} ({source}): "
        if self.gravity_error:
            return head + f"NONE ({self.gravity_error})"
        if self.gravity_model is not None:
            return head + f"{self.gravity_model.uncertainty.source}, {self.gravity_model.source}"
        return head + declared_source(self.config.fit.model_uncertainty, self.config.fit.torque_offset_std)

    # ------------------------------------------------------------------ samples
    def add_sample(self, t: float, q: np.ndarray, dq: np.ndarray | None, effort: np.ndarray) -> str:
        """One joint sample (t s, q rad, dq rad/s or None, effort as the stream reports it): into the window
        and, with a velocity, into the recording until it is ``max_recording`` s long (then it overflows), then
        into the online estimate. Returns why the online estimate could not take it ('' it could): counted in
        ``online_errors``; the window and the recording have it all the same."""
        tau = effort_to_torque(effort, self.gain)
        if len(q) == self.dyn.n and self.sign.due(t) and self.sign.feed(self.dyn.gravity(q), tau) is not None:
            return f"{self.sign.fault}. Captures, recordings and estimates are refused until then"
        with self._lock:
            self._window.append(t, q, dq, tau)
            rows = self._recording
            if rows is not None and dq is not None:
                if rows and t - rows[0][0] > self.config.max_recording:
                    self._overflow = True
                else:
                    rows.append((t, np.array(q, float), np.array(dq, float), tau.copy()))
        if self.online is None:
            return ""
        try:  # cheap: no solve here
            self.online.add_sample(t, q, dq, tau)
        except (PayloadEstimationError, ValueError, TypeError, ArithmeticError) as e:
            self.online_errors += 1
            return f"online estimate: sample not taken ({type(e).__name__}: {e}); counted in status online_errors"
        return ""

    def restart(self) -> None:
        """The stream started over (its stamps restarted): the samples before do not count for a capture."""
        with self._lock:
            self._window.clear()

    def refusal(self, what: str, model_error: str, age: float | None = None, lost: bool = False,
                stream: bool = True) -> Answer | None:
        """Why the request ``what`` cannot run now (None: it can): no robot model (``model_error`` says why), or,
        when it reads the live ``stream``, no joint_states yet (``age`` None) or stale (``lost``: older than the
        timeout; ``age`` wall s)."""
        if self.dyn is None:
            why = f"no robot model ({model_error})"
        elif self.sign.fault is not None:
            why = self.sign.fault
        elif not stream:
            return None
        elif age is None:
            why = "no valid joint_states received yet (check the topic and joint names)"
        elif lost:
            why = f"joint_states stale: last valid message {age:.2f} s ago (wall clock)"
        else:
            return None
        return Answer(False, f"{what} rejected: {why}")

    # ------------------------------------------------------------------ static captures
    def capture(self, kind: str, age: float) -> Answer:
        """A static capture of ``kind`` (LOADED, UNLOADED, CALIBRATION) from the newest samples, ``age`` s old."""
        what = CAPTURE_WORDS[kind]
        settle = self.config.anchor_settle if kind == UNLOADED else self.config.settle
        with self._lock:
            t, q, dq, tau = self._window.arrays()
        r = check_static(t, q, dq, tau, settle, self.joint_names)
        if not r.static:
            return Answer(False, f"{what} rejected: arm not static: {r.reason}")
        with self._lock:
            store = self._captures[kind]
            store.append((r.q, r.tau))
            k = len(store)
        return Answer(True, f"{what} {k} at q = {np.round(np.degrees(r.q), 2).tolist()} deg (torque std "
                            f"{r.torque_std:.3f} N m, spread {np.degrees(r.spread):.3f} deg over {r.samples} samples, "
                            f"newest {1e3 * age:.0f} ms old)")

    def captures(self, kind: str) -> int:
        with self._lock:
            return len(self._captures[kind])

    def clear(self) -> Answer:
        """Forget loaded and calibration captures (the start of a run); the payload and the anchor stay."""
        with self._lock:
            k, c = len(self._captures[LOADED]), len(self._captures[CALIBRATION])
            self._captures[LOADED].clear()
            self._captures[CALIBRATION].clear()
        return Answer(True, f"cleared {k} loaded and {c} calibration capture(s); payload and unloaded anchor kept")

    def reset(self) -> None:
        """Forget the payload (0 kg) and the loaded and unloaded captures."""
        with self._lock:
            self._captures[LOADED].clear()
            self._captures[UNLOADED].clear()
        self.current = NO_PAYLOAD

    def grasped(self) -> str:
        """An object was grasped: loaded captures are forgotten (the anchor, taken before, is kept); a phrase
        when the estimate in use described an earlier load ('' if it was 0 kg)."""
        with self._lock:
            self._captures[LOADED].clear()
        prev = self.current.mass
        return (f"; the published estimate ({prev:.3f} kg) described the load before this grasp: announce "
                "~/released when an object is put down") if prev > 0 else ""

    def forget(self, model_error: str = "") -> Answer:
        """``~/reset``: forget the payload and the captures, end the online estimate; ok: 0 kg is to be published
        (refused without a robot model, ``model_error`` says why)."""
        self.reset()
        if self.online is not None:
            self.online.released()
        if self.dyn is None:
            return Answer(False, f"reset rejected: no robot model ({model_error})")
        self.last = (OK, "reset: unloaded")
        return Answer(True, "payload reset: unloaded (0 kg); captures cleared")

    def announce_grasp(self, listening: str = "", at: float | None = None) -> Answer:
        """``~/grasped``: loaded captures forgotten, the online estimate started; ``listening``: a phrase when no
        collision monitor heard the announcement ('' one did); ``at``: the node clock at the call (s), the first
        instant the online estimate counts (:meth:`.online.OnlinePayloadEstimator.grasped`)."""
        earlier = self.grasped()
        online = "online estimation off" if self.online is None else self.online.grasped(self.config.com_prior, at,
                                                                                self.config.inertia_prior)
        active = self.online is not None and self.online.active
        self.last = (OK, "grasp announced: payload unknown until estimated")
        return Answer(True, "grasp announced: payload being learned by the collision monitor; "
                            + (f"{online}; or call payload_sampler/sample" if active else
                               f"call payload_sampler/sample for an estimate ({online})") + listening + earlier)

    def announce_release(self, listening: str = "", model_error: str = "") -> Answer:
        """``~/released``: as :meth:`forget`; the collision monitor expects the payload's torque to vanish."""
        a = self.forget(model_error)
        if not a.ok:
            return Answer(False, f"release announced to the collision monitor, but {a.message}{listening}")
        self.last = (OK, "release announced: unloaded")
        return Answer(True, "release announced: payload forgotten (0 kg), captures cleared; the collision monitor "
                            "expects the payload's torque to disappear" + listening)

    def payload_lost(self) -> bool:
        """The collision monitor reports the carried payload lost: True when an online estimate ran (it ends and
        the payload is forgotten: publish 0 kg); False when nothing changes (e.g. the latched report of an
        earlier loss)."""
        if self.online is None or not self.online.active:
            return False
        self.online.superseded("payload lost (collision_monitor/payload_lost)")
        self.reset()
        self.last = (WARN, "payload lost (collision monitor): unloaded; announce ~/released, then ~/grasped when a "
                           "new object is held")
        return True

    def contact(self, active: bool) -> str:
        """The collision monitor's collision flag (``collision_monitor/collision``): a contact is not fitted into the
        online estimate (:meth:`.online_session.OnlineSession.contact`); a line for the log when it changed."""
        return "" if self.online is None else self.online.contact(active)

    # ------------------------------------------------------------------ the online estimate
    def use_online_model(self) -> list[Note]:
        """The online estimate runs against the unloaded model in use (calibrated or nominal) with
        :attr:`EstimatorConfig.online`; a note for the log when that changed."""
        if self.online is None or not self.online.use(self.dyn, self.gravity_model, self.config.online):
            return []
        if self.dyn is None:
            return []
        which = "nominal" if self.gravity_model is None else self.gravity_model.uncertainty.source
        return [("info", f"online estimate uses the unloaded model: {which}")]

    def online_tick(self) -> Tick | None:
        """The online estimate's timer: its tick (None without a robot model or an online session); an estimate
        to publish becomes the status line."""
        if self.dyn is None or self.online is None:
            return None
        tick = self.online.tick()
        if tick.estimate is not None:
            self.last = (OK, f"online estimate {tick.status.state}: {format_estimate(tick.estimate)}")
        return tick

    # ------------------------------------------------------------------ estimates
    def estimate(self) -> EstimateOutcome:
        """Fit the loaded captures (differential on the unloaded ones per ``fit.method``); accepted, they are
        forgotten (the next run starts fresh)."""
        with self._lock:
            loaded, unloaded = list(self._captures[LOADED]), list(self._captures[UNLOADED])
        if not loaded:
            return EstimateOutcome("estimate rejected: no samples captured (call ~/capture)")
        if self.gravity_error:
            return EstimateOutcome(f"estimate rejected: {self.gravity_error}")
        q, tau = np.array([s[0] for s in loaded]), np.array([s[1] for s in loaded])
        q_u = np.array([s[0] for s in unloaded]) if unloaded else None
        tau_u = np.array([s[1] for s in unloaded]) if unloaded else None
        try:
            est = estimate_payload_static(self.dyn, q, tau, q_u, tau_u, self.config.fit, self.gravity_model)
        except PayloadEstimationError as e:
            return self._rejected(e)
        with self._lock:
            self._captures[LOADED].clear()
        return self._accepted(replace(est, frame=self.frame))

    def calibrate(self, path: Path) -> Answer:
        """Identify the unloaded gravity model (with sensor offsets) from the calibration captures and write
        it to ``path``; the captures are kept until :meth:`calibrated` (the file must load first)."""
        with self._lock:
            captures = list(self._captures[CALIBRATION])
        if not captures:
            return Answer(False, "calibrate rejected: no calibration captures (call payload_sampler/sweep, which "
                                 "captures them, or ~/capture_calibration at each pose of your own)")
        n = self.dyn.n
        try:
            samples = Samples(np.array([c[0] for c in captures]).reshape(-1, n),
                              np.array([c[1] for c in captures]).reshape(-1, n))
            model = identify_gravity(self.dyn.desc, samples, offset=True)
            model.info[FINGERPRINT_KEY] = kinematics_fingerprint(self.dyn.desc)  # checked when it is loaded
            path.parent.mkdir(parents=True, exist_ok=True)
            model.save(path)
        except (OSError, PayloadEstimationError) as e:
            return Answer(False, f"calibrate rejected: {e} ({len(captures)} captures kept)", fault=True)
        return Answer(True, f"gravity model identified from {len(captures)} poses: {len(model.values)} coefficients, "
                            f"residual RMS {model.residual_rms:.3g} N m, cond {model.condition_number:.3g}, "
                            f"{describe_offsets(model, self.joint_names)}; written to {path} and loaded as "
                            "gravity_model (found there and checked against the robot model on the next start)")

    def calibrated(self) -> None:
        """The calibration written by :meth:`calibrate` is in use: its captures are done with."""
        with self._lock:
            self._captures[CALIBRATION].clear()

    # ------------------------------------------------------------------ dynamic runs
    @property
    def recording(self) -> bool:
        return self._recording is not None

    def start_recording(self) -> Answer:
        """Record every sample with a velocity from now on (a recording in progress starts over)."""
        with self._lock:
            self._recording, self._overflow = [], False
        with self._terms_lock:
            self._terms = None if self.dyn is None else LoadedTerms(self.dyn, 1.0 / self.config.dynamic_fit.fit_rate)
        return Answer(True, "recording joint_states")

    def prepare_recording(self) -> int:
        """Compute the model terms of what has been recorded so far (:class:`.run_terms.LoadedTerms`), for at most
        :data:`PREPARE_BUDGET` s; returns the fit-grid points computed now (0 when nothing is recorded). Not on the
        samples' thread."""
        with self._lock:
            rows = self._recording
            count = 0 if rows is None or self._overflow else len(rows)
        if count == 0:
            return 0
        with self._terms_lock:
            return 0 if self._terms is None else self._terms.update(rows[:count], PREPARE_BUDGET)

    def _take_recording(self) -> tuple[MotionRecording | None, str]:
        """(the recording, '') and recording stopped; (None, why) when there is none or it is unusable. Its model
        terms so far are in ``_terms`` until the next recording starts."""
        with self._lock:
            rows, overflow = self._recording, self._overflow
            self._recording = None
        if rows is None:
            return None, "nothing recorded (call ~/start_recording first)"
        if overflow:
            return None, f"the recording exceeded max_recording ({self.config.max_recording} s)"
        try:
            return MotionRecording.from_rows(rows), ""
        except PayloadEstimationError as e:
            return None, str(e)

    def store_reference(self) -> Answer:
        """Keep the recording as the unloaded reference run, checked now as the fit will check it (a bad
        reference is found before the grasp)."""
        rec, why = self._take_recording()
        if rec is None:
            return Answer(False, f"reference rejected: {why}")
        try:
            rec = check_recording(rec, len(self.joint_names), "reference run", self.config.dynamic_fit.max_gap)
            start, end = rec.motion_span()
        except PayloadEstimationError as e:
            return Answer(False, f"reference rejected: {e}; record it again", fault=True)
        self.reference = rec
        self._reference_model = None if self.dyn is None else reference_terms(self.dyn, rec)
        return Answer(True, f"reference run stored: {rec.t.size} samples over {rec.duration:.2f} s, motion "
                            f"{end - start:.2f} s{stream_gaps(rec)}")

    def estimate_motion(self) -> EstimateOutcome:
        """Fit all ten payload parameters from the recording, differential against the reference run when
        there is one; the inertia the motion does not determine is kept from the estimate in use."""
        t0 = time.perf_counter()
        rec, why = self._take_recording()
        if rec is None:
            return EstimateOutcome(f"estimate rejected: {why}")
        try:
            with self._terms_lock:
                est = estimate_payload_dynamic(self.dyn, rec, self.reference, self.config.dynamic_fit,
                                               previous=self.current, loaded_terms=self._terms,
                                               reference_model=self._reference_model)
        except PayloadEstimationError as e:
            return self._rejected(e)
        took = time.perf_counter() - t0  # wall: what the caller waits for besides the service's way
        return self._accepted(replace(est, frame=self.frame, notes=est.notes + (
            f"{rec.t.size} samples{stream_gaps(rec)}, fitted in {1e3 * took:.0f} ms (wall)",)))

    # ------------------------------------------------------------------ outcomes
    def _rejected(self, e: Exception) -> EstimateOutcome:
        """A fit ran and was rejected: the status says so (WARN), the previous payload is kept."""
        out = EstimateOutcome(f"estimate rejected: {e}; previous payload kept ({self.current.mass:.3f} kg)",
                              fit_failed=True)
        self.last = (WARN, out.message)
        return out

    def _accepted(self, est: PayloadEstimate) -> EstimateOutcome:
        """``est`` becomes the estimate in use, flagged when its σ exceeds max_mass_std / max_com_std (status WARN);
        it ends the online estimate."""
        self.current = est
        imprecise = precision_problem(est, self.config.fit.max_mass_std, self.config.fit.max_com_std)
        if est.misfit:  # the fit does not fit: said first in the answer, the status (WARN) and the node's warning
            imprecise = f"{est.misfit}; {imprecise}" if imprecise else est.misfit
        self.last = (WARN, f"payload estimated, imprecise: {imprecise}") if imprecise else (OK, "payload estimated")
        if self.online is not None:
            self.online.superseded("an estimate from captures or a sampling run was published")
        return EstimateOutcome((f"IMPRECISE ({imprecise}): " if imprecise else "") + format_estimate(est), est,
                               imprecise)

    def export(self, est: PayloadEstimate, directory: str, write: Callable[[PayloadEstimate, str], Path]) -> Answer:
        """Write ``est``'s exports into ``directory`` ('' nothing to write) with ``write`` (the node's
        files.exports call; returns where it wrote): the phrase for the estimate's answer. A failure is counted
        (``export_failures``) and turns the status WARN: published, but not where the user expects it."""
        if not directory:
            return Answer(True, "")
        try:
            where = write(est, directory)
        except (OSError, PayloadEstimationError) as e:
            self.export_failures += 1
            self.export_error = f"{directory}: {e} (check export_dir)"
            self.last = (WARN, f"{self.last[1]}; export FAILED: {self.export_error}")
            return Answer(False, f"; export to {directory} FAILED: {e}", fault=True)
        return Answer(True, f"; exported to {where}")

    def status_values(self) -> dict[str, object]:
        """The estimator's status keys: capture counts, the reference run, the calibration."""
        ref = self.reference
        with self._lock:
            counts = {k: len(v) for k, v in self._captures.items()}
        return {"captures": counts[LOADED], "calibration_captures": counts[CALIBRATION],
                "unloaded_captures": counts[UNLOADED],
                "reference_run": "" if ref is None else f"{ref.t.size} samples, {ref.duration:.2f} s",
                "calibration": self.calibration_note, "announcement_unheard": self.announcements.pending,
                "announcements_late": self.announcements.late, "announcements_missed": self.announcements.missed}

    def relay_announcement(self, listeners: int, now: float) -> tuple[str | None, list[Note]]:
        """(the grasp / release announcement to publish again now, or None; notes for the log) with ``listeners``
        collision monitors matched at ``now`` (s, monotonic): :class:`.announcement_relay.AnnouncementRelay`. One
        that no monitor heard within its window makes the status WARN."""
        event, line = self.announcements.due(listeners, now)
        if not line:
            return event, []
        if event is None:
            self.last = (WARN, line)
            return None, [("warning", line)]
        return event, [("info", line)]

    def status(self, model_error: str, stream: str, source: str) -> tuple[int, str, dict]:
        """(level, message, values) of ``~/status``: the last outcome (:attr:`last`) unless the robot model is
        missing (``model_error`` says why), the unloaded model is refused or the joint_states ``stream`` has a
        problem (its text, e.g. "joint_states lost"; "": none); ``source`` names where the robot model came from."""
        est = self.current
        level, text = self.last
        if self.dyn is None:
            level, text = ERROR, f"no robot model ({model_error})"
        elif self.gravity_error:
            level, text = ERROR, f"{self.gravity_error}: estimates refused"
        elif self.sign.fault is not None:
            level, text = ERROR, f"{self.sign.fault}: estimates refused"
        elif self.calibration_refused:
            level = ERROR if level == ERROR else WARN
            text = f"{text}; calibration file refused, nominal model used: {self.calibration_note}"
        elif stream:
            level, text = WARN, f"{text}; {stream}: captures rejected"
        vals = {"mass": est.mass, "com_x": est.com[0], "com_y": est.com[1], "com_z": est.com[2],
                "condition_number": est.condition_number, "residual_rms": est.residual_rms,
                "samples": est.samples, **self.status_values(),
                "method": est.method, "frame": self.frame, "configured_method": self.config.fit.method,
                "undetermined": ", ".join(est.undetermined), "model": self.model_label(source),
                "export_failures": self.export_failures, "last_export_error": self.export_error,
                **{f"std_{k}": v for k, v in (est.std or {}).items()}}
        if self.online is not None:
            vals |= {**self.online.status_values(), "online_errors": self.online_errors}
        return level, text, vals


FORGET_CALIBRATION = ("to forget it and use the nominal model, delete the file and set gravity_model to '' (or "
                      "restart), or start with calibration_file pointing elsewhere")
"""How to stop using a calibration file found at start (its log line and status value say it)."""


def written_words(path: Path) -> str:
    """Where a calibration file found at start came from: 'written by ~/calibrate (payload_sampler/sweep) on
    <local date and time>' (its modification time)."""
    try:
        when = time.strftime("%Y-%m-%d %H:%M", time.localtime(path.stat().st_mtime))
    except OSError:
        when = "an unknown date"
    return f"written by ~/calibrate (payload_sampler/sweep) on {when}"


def checked_gravity_model(dyn: RigidBodyDynamics, path: str | Path) -> tuple[UnloadedModel, str]:
    """The identified model file at ``path`` as ``dyn``'s unloaded model, and how far its belonging was checked.

    Refused (:class:`IdentificationError` with the reason) unless it loads and was identified for this
    robot model: the same robot name and joint names, and the same kinematics fingerprint when the file
    has one (files written before fingerprints: joint names only, said in the note)."""
    p = Path(path).expanduser()
    if not p.is_file():
        raise IdentificationError(f"{p} does not exist")
    try:
        model = IdentifiedModel.load(p)
    except UnicodeDecodeError as e:  # a binary file: IdentifiedModel.load reads text
        raise IdentificationError(f"{p} is not a text file ({e.reason} at byte {e.start})") from e
    desc = dyn.desc
    if tuple(model.joint_names) != desc.joint_names:
        raise IdentificationError(f"it was identified for joints {list(model.joint_names)}, this robot model "
                                  f"({desc.name}) has {list(desc.joint_names)}: it belongs to another robot model")
    here, there = kinematics_fingerprint(desc), model.info.get(FINGERPRINT_KEY)
    if there and there != here:
        raise IdentificationError(f"it was identified on other kinematics (fingerprint {there}, this robot model "
                                  f"{here}): its coefficients do not apply to these link frames")
    note = ("joint names and kinematics fingerprint match" if there else "joint names match; the kinematics could "
            "not be checked: the file has no kinematics fingerprint, it was written before they were recorded")
    return unloaded_model(dyn, model, p.name, str(p)), note


def format_estimate(est: PayloadEstimate) -> str:
    """One line an operator can read: mass, CoM (mm), std, condition number, residual (a no-payload result says that
    the CoM does not apply, instead of a CoM of 0 with std NaN)."""
    s = est.std or {}
    com_mm = np.asarray(est.com, float) * 1e3
    std_com = [s.get(k, float("nan")) * 1e3 for k in ("cx", "cy", "cz")]
    com = ("no payload: CoM does not apply" if is_no_payload(est) else
           f"CoM [{com_mm[0]:.1f}, {com_mm[1]:.1f}, {com_mm[2]:.1f}] mm (std [{std_com[0]:.1f}, {std_com[1]:.1f}, "
           f"{std_com[2]:.1f}])")
    return (f"mass {est.mass:.4f} kg (std {s.get('mass', float('nan')):.4f}), {com} in {est.frame}, "
            f"cond {est.condition_number:.3g}, residual RMS {est.residual_rms:.3g} N m, {est.samples} samples, "
            f"method {est.method}" + "".join(f"; {note}" for note in est.notes if note != est.misfit))


def stream_gaps(rec: MotionRecording) -> str:
    """', N samples missing (x %)' of a recording whose stamps skip (judged on the median interval)."""
    dt = np.diff(rec.t)
    if dt.size == 0:
        return ""
    step = float(np.median(dt))
    missing = int(np.sum(np.maximum(np.round(dt / step) - 1, 0)))
    return f", {missing} samples missing ({100 * missing / (missing + rec.t.size):.1f} %)" if missing else ""


__all__ = ["PayloadEstimator", "EstimatorConfig", "NODE_LIMITS", "MIN_COM_PRIOR_STD", "OK", "WARN", "ERROR", "Note",
           "Answer", "EstimateOutcome", "ModelChoice", "checked_gravity_model", "format_estimate", "stream_gaps",
           "LOADED", "UNLOADED", "CALIBRATION", "CAPTURE_WORDS"]
