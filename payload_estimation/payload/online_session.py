"""The payload estimator node's online session: when the online estimate runs and what it publishes (issue 32).

:class:`OnlineSession` holds the node's rules around :class:`.online.OnlinePayloadEstimator`, without ROS:

- it is fed every joint-state sample (:meth:`OnlineSession.add_sample`: the estimator's cheap update; rest
  before a grasp is learnt as the unloaded anchor) and solved on the node's 20 Hz timer
  (:meth:`OnlineSession.tick`), never in the sample path;
- it runs against the node's current unloaded model (the calibrated gravity model when one is loaded, else the
  nominal description with ``model_uncertainty``); a changed model starts it over (:meth:`OnlineSession.use`);
- after an announced grasp (:meth:`OnlineSession.grasped`, optionally with the gripper's :class:`.online.ComPrior`,
  shown in the status as ``online_com_prior``) each tick with a new estimate of a positive mass
  returns it to publish on ``payload/estimate`` once the arm has moved since the grasp (a joint by ``MOVED``);
  at rest after a grasp nothing is published (the collision monitor's own provisional payload learnt at rest is
  kept; a 0 kg estimate would read as a release). While the arm moves (a joint faster than the estimator's
  ``rest_speed`` since the last tick) every tick's new estimate is published (the timer's rate: 20 per second at
  20 Hz). The rest after a move is information (issue 46): a new static orientation determines the CoM components
  the grasp's rest did not, and its rows are checked against their noise model apart from the motion's (a jerky
  move's misfit does not deflate them). At rest after a move an estimate is published when its state changed or a
  σ (mass, a CoM component) changed by ``REST_CHANGE`` since the last one published (as σ shrinks with the rest's
  length: ever less often), until one is ``converged``; then nothing more until the arm moves again (a payload
  dropped at rest is fitted into the rows until the monitor's verdict ends the session: not into what it was last
  sent). A ``not excited`` estimate during the motion is published
  with its σ (the monitor widens its thresholds by it): the best estimate so far; a fit that disagrees with its
  noise model (:attr:`.online.OnlineStatus.misfit`) is published with σ widened by what the misfit can explain, the
  words lead the state's reason (status ``online_reason``, ``online_misfit``; numbers ``online_fit_rms``,
  ``online_expected_rms`` N m, ``online_fit_chi2``, ``online_sigma_widening``) and the log says when it starts and ends;
- a contact (:meth:`OnlineSession.contact`: the collision monitor's ``~/collision``) is not fitted: the rows of
  the last ``CONTACT_LOOKBACK`` s before its report and those until its release are left out, and the filters
  start over after it (:meth:`.online.OnlinePayloadEstimator.contact`);
- a release (:meth:`OnlineSession.released`), a sampling run (:meth:`OnlineSession.set_sampling`) or an
  estimate from a sampling run or captures (:meth:`OnlineSession.superseded`) ends it: nothing more is
  published until the next grasp; ``enabled`` False (parameter ``online_estimation``) keeps it idle.

Units: s, rad, rad/s, N m, kg, m. Joint vectors in model order.
"""

from __future__ import annotations

import math
import threading
import time
from dataclasses import dataclass, replace

import numpy as np

from ..model.dynamics import RigidBodyDynamics
from .estimate import PayloadEstimate
from .online import CONVERGED, IDLE, ComPrior, InertiaPrior, OnlineConfig, OnlinePayloadEstimator, OnlineStatus
from .static import UnloadedModel

MOVED = 0.035
"""rad (2 deg): a joint this far from where it was at the grasp means the arm moves (the estimate is then published;
a sag of the arm when the load is taken, or velocity noise, does not count)."""

REST_CHANGE = 0.05
"""At rest after a move, an estimate whose σ of the mass and of every CoM component is within this fraction of the last
published one's (and whose state is the same) is not published."""

CONTACT_LOOKBACK = 0.15
"""s of rows taken out before a reported contact: its onset ~15 ms before the detection, the monitor's payload-loss
verdict up to 60 ms after it (a contact while an estimated payload is carried is reported then), the message's
latency."""

NEVER = 1e9
"""s: the estimator's own solve period in the sample path (the session solves on its timer instead)."""


@dataclass(frozen=True)
class Tick:
    """One timer tick: the ``estimate`` to publish now (None: nothing new), the ``status``, a ``note`` for the log
    when the state changed ('' otherwise), the solve's wall time ``solve_ms`` (ms) and the estimate's gravity
    ``uncertainty`` to publish before it (:meth:`OnlineSession.uncertainty`; None: none)."""

    estimate: PayloadEstimate | None
    status: OnlineStatus | None
    note: str = ""
    solve_ms: float = 0.0
    uncertainty: dict | None = None


class OnlineSession:
    """One arm's online payload estimate between an announced grasp and the release (module docstring).

    Thread-safe: :meth:`add_sample` (the joint-state thread) and :meth:`tick` (the timer) take one lock; a
    solve holds it for its duration (``max_solve_ms`` reports the longest)."""

    def __init__(self, enabled: bool = True, config: OnlineConfig | None = None):
        self.enabled = enabled
        self.config = replace(config or OnlineConfig(), solve_period=NEVER)
        self.estimator: OnlinePayloadEstimator | None = None
        self.active = False  # a grasp announced and not ended
        self.sampling = False
        self.published = 0  # estimates published since the last grasp
        self.max_solve_ms = 0.0
        self.last_solve_ms = 0.0
        self.ended = ""  # why the last session ended ('' while active or never started)
        self._key: tuple | None = None
        self._model: tuple = (None, None)  # (dyn, unloaded model) the estimator runs against
        self._lock = threading.Lock()
        self._last_est: PayloadEstimate | None = None  # the last published estimate
        self._published_state = IDLE  # its state
        self._last_state = IDLE
        self._last_misfit = False  # the last solve's fit disagreed with its noise model (said once in the log)
        self.moved = False  # the arm moved since the grasp
        self._q_grasp: np.ndarray | None = None  # rad, where the arm was at the grasp
        self._q: np.ndarray | None = None  # rad, the newest sample's position
        self._moving = False  # a joint faster than the estimator's rest_speed since the last tick
        self._rest_done = False  # at rest after a move, a converged estimate was published: nothing more until it moves
        self.published_moving = 0  # estimates published while the arm moved (since the last grasp)
        self.published_rest = 0  # estimates published at rest after a move (since the last grasp)
        self.in_contact = False  # the collision monitor reports a contact: no row is fitted
        self.contacts = 0  # contacts reported
        self.prior: ComPrior | None = None  # the CoM prior given at the last grasp
        self.inertia_prior: InertiaPrior | None = None  # the inertia prior given at the last grasp

    # ------------------------------------------------------------------ configuration
    def use(self, dyn: RigidBodyDynamics | None, model: UnloadedModel | None,
            config: OnlineConfig | None = None) -> bool:
        """The node's robot dynamics and unloaded model (and settings); a change starts the estimator over
        (the anchor is learnt again; an active session ends). Returns whether it changed."""
        cfg = self.config if config is None else replace(config, solve_period=NEVER)
        key = (id(dyn), id(model), cfg)
        if key == self._key:
            return False
        with self._lock:
            self._key, self.config, self._model = key, cfg, (dyn, model)
            self.estimator = None if dyn is None else OnlinePayloadEstimator(dyn, cfg, model)
            self._keep_contact()
            self._end("the unloaded model or the online settings changed" if self.active else "")
        return True

    # ------------------------------------------------------------------ events
    def grasped(self, prior: ComPrior | None = None, at: float | None = None,
                inertia: InertiaPrior | None = None) -> str:
        """A payload was grasped (announced at ``at``, s on the stream's clock; None: at the next sample): estimate it
        from the motion that follows, with the gripper's CoM ``prior`` and the part's ``inertia`` prior (None: none);
        returns a phrase for the answer (whether the priors are used)."""
        if not self.enabled:
            return "online estimation off (parameter online_estimation)"
        if self.estimator is None:
            return "online estimation waits for a robot model"
        if self.sampling:
            return "online estimation not started: a sampling run is active (its estimate will be published)"
        with self._lock:
            self.estimator.grasped(prior, at, inertia)
            self.prior, self.inertia_prior = prior, inertia
            self.active, self.published, self.ended, self.moved, self._q_grasp = True, 0, "", False, None
            self._moving = self._rest_done = False
            self._published_state = IDLE
            self.published_moving = self.published_rest = 0
            self._last_est, self._last_state = None, self.estimator.status.state
            self._last_misfit = False
            anchored = self.estimator.status.anchored
        return ("payload estimated online from the next motion (published on payload/estimate once the arm "
                "moves; state in ~/status online_state)" + ("" if anchored else
                                                                "; no unloaded rest before the grasp: not anchored")
                + (f"; with the gripper's CoM prior {prior_words(prior)} (parameter grasp_com_prior)" if prior else
                   "; no CoM prior (parameter grasp_com_prior)")
                + (f"; with the part's inertia prior {inertia_words(inertia)} (parameter grasp_inertia_prior)"
                   if inertia else ""))

    def released(self) -> None:
        """The payload was released: back to no payload (the anchor is learnt again at rest)."""
        with self._lock:
            self._fresh()
            self._end("released")

    def superseded(self, why: str) -> None:
        """Another estimate (a sampling run's, captures') replaced the online one: stop publishing."""
        with self._lock:
            if self.active:
                self._fresh()
            self._end(why)

    def set_sampling(self, active: bool) -> None:
        """The payload sampler's active flag: a sampling run ends the online session."""
        self.sampling = bool(active)
        if self.sampling and self.active:
            self.superseded("a sampling run started")

    def set_enabled(self, enabled: bool) -> None:
        self.enabled = bool(enabled)
        if not self.enabled and self.active:
            self.superseded("online_estimation turned off")

    def contact(self, active: bool) -> str:
        """The collision monitor's collision flag (``collision_monitor/collision``, latched): no row is fitted from
        ``CONTACT_LOOKBACK`` s before the report until the release, after which the filters start over. Returns a
        line for the log when the flag changed while an online estimate runs ('' otherwise)."""
        active = bool(active)
        with self._lock:
            if active == self.in_contact:
                return ""
            self.in_contact, running = active, self.active
            self.contacts += active and running  # contacts kept out of an online estimate
            out = 0 if self.estimator is None else self.estimator.contact(active, CONTACT_LOOKBACK)
        if not running:  # no online estimate to keep the contact out of: nothing to say
            return ""
        if active:
            return (f"contact reported (collision_monitor): {out} row(s) of the last {CONTACT_LOOKBACK:.2f} s and "
                    "the samples until its release are left out of the online estimate")
        return "contact released (collision_monitor): the online estimate fits the motion again (filters restarted)"

    def _fresh(self) -> None:
        """Back to the unloaded arm: a new estimator (as ``OnlinePayloadEstimator.reset``, whose rest bookkeeping
        failed on the next sample at rest), the anchor learnt again at rest."""
        dyn, model = self._model
        if dyn is not None:
            self.estimator = OnlinePayloadEstimator(dyn, self.config, model)
            self._keep_contact()

    def _keep_contact(self) -> None:
        """A new estimator during a reported contact fits nothing until its release either."""
        if self.in_contact and self.estimator is not None:
            self.estimator.contact(True)

    def _end(self, why: str) -> None:
        if self.active:
            self.ended = why
        self.active = False
        self._last_est, self._last_state = None, IDLE

    # ------------------------------------------------------------------ per sample and per tick
    def add_sample(self, t: float, q: np.ndarray, dq: np.ndarray | None, tau: np.ndarray) -> None:
        """One joint-state sample (s, rad, rad/s, N m; without a velocity: skipped). Cheap: no solve here."""
        if not self.enabled or self.estimator is None or dq is None:
            return
        with self._lock:
            self.estimator.update(t, q, dq, tau)
            if self.active and not self.moved:
                if self._q_grasp is None:
                    self._q_grasp = np.array(q, float)
                self.moved = float(np.max(np.abs(np.asarray(q, float) - self._q_grasp))) > MOVED
            self._q = np.asarray(q, float)
            if float(np.max(np.abs(dq))) > self.config.rest_speed:
                self._moving = True

    def tick(self) -> Tick:
        """The timer: solve the accumulated rows (when a grasp is active) and say what to publish."""
        if not self.active or self.estimator is None:
            return Tick(None, None if self.estimator is None else self.estimator.status)
        start = time.perf_counter()
        with self._lock:
            if not self.active:
                return Tick(None, self.estimator.status)
            st = self.estimator.solve()
        ms = 1e3 * (time.perf_counter() - start)
        self.last_solve_ms, self.max_solve_ms = ms, max(self.max_solve_ms, ms)
        note = ""
        misfit = bool(st.misfit)
        if st.state != self._last_state or misfit != self._last_misfit:
            # the reason leads with the misfit's words while the data disagree with the model; their end is said too
            note = f"online payload estimate: {st.state} ({st.reason})"
            if self._last_misfit and not misfit:
                note = f"online payload estimate: the fit agrees with its noise model again; {st.state} ({st.reason})"
            self._last_state, self._last_misfit = st.state, misfit
        with self._lock:
            moving, self._moving = self._moving, False
        if moving:
            self._rest_done = False
        e, last = st.estimate, self._last_est
        if e is None or not self.moved or e.mass <= 0 or e is last:
            return Tick(None, st, note, ms)
        if not moving and (self._rest_done or (last is not None and st.state == self._published_state
                                               and not _sigma_changed(e, last))):
            return Tick(None, st, note, ms)
        if not moving:
            self._rest_done = st.state == CONVERGED
            self.published_rest += 1
        else:
            self.published_moving += 1
        self._last_est, self._published_state = e, st.state
        self.published += 1
        return Tick(st.estimate, st, note, ms, self.uncertainty())

    # ------------------------------------------------------------------ status
    def status_values(self) -> dict[str, object]:
        """Status keys ``online_*`` (kg, mm, ms)."""
        est = self.estimator
        st = None if est is None else est.status
        vals = {"online_estimation": self.enabled, "online_state": IDLE if st is None else st.state,
                "online_reason": "" if st is None else st.reason, "online_active": self.active,
                "online_published": self.published, "online_published_moving": self.published_moving,
                "online_published_rest": self.published_rest, "online_ended": self.ended,
                "online_solve_ms": round(self.last_solve_ms, 2), "online_max_solve_ms": round(self.max_solve_ms, 2),
                "online_contact": self.in_contact, "online_contacts": self.contacts,
                "online_com_prior": prior_words(self.prior) if self.prior else "none",
                "online_inertia_prior": inertia_words(self.inertia_prior) if self.inertia_prior else "none"}
        if est is not None:
            vals.update({"online_restarts": est.restarts, "online_rejected": est.rejected,
                         "online_contact_rows_discarded": est.discarded,
                         "online_anchored": st.anchored, "online_rows": st.rows, "online_rest_rows": st.rest_rows,
                         "online_grasp_lag_s": "" if est.grasp_lag is None else round(est.grasp_lag, 3),
                         "online_seconds": round(st.seconds, 3)})
        if st is not None and st.estimate is not None:  # the fit against its noise model (issue 46)
            vals.update({"online_misfit": st.misfit, "online_fit_rms": round(st.fit_rms, 4),
                         "online_expected_rms": round(st.expected_rms, 4),
                         "online_fit_chi2": round(st.misfit_ratio, 2), "online_sigma_widening": round(st.widening, 2)})
        e = None if st is None else st.estimate
        if e is not None:
            vals.update({"online_mass": e.mass, "online_mass_std": e.std.get("mass", math.nan),
                         "online_com_mm": np.round(1e3 * np.asarray(e.com), 1).tolist(),
                         "online_com_std_mm": [round(1e3 * e.std.get(k, math.nan), 2) for k in ("cx", "cy", "cz")]})
        return vals

    def uncertainty(self) -> dict | None:
        """The current estimate's gravity uncertainty for the collision monitor (JSON-ready): mass kg, com m,
        ``gravity_covariance`` 4 x 4 of (m, m cx, m cy, m cz) (kg, kg m), state and stream time t; None without one."""
        st = None if self.estimator is None else self.estimator.status
        if not self.active or st is None or st.estimate is None or st.gravity_covariance is None:
            return None
        e = st.estimate
        return {"state": st.state, "t": st.t, "mass": float(e.mass), "com": [float(c) for c in e.com],
                "gravity_covariance": np.asarray(st.gravity_covariance, float).tolist()}


def _sigma_changed(e: PayloadEstimate, last: PayloadEstimate) -> bool:
    """σ of the mass or of a CoM component changed by at least :data:`REST_CHANGE` from ``last`` to ``e``."""
    for k in ("mass", "cx", "cy", "cz"):
        a, b = e.std.get(k, math.nan), last.std.get(k, math.nan)
        if not (math.isfinite(a) and math.isfinite(b)) or abs(a - b) >= REST_CHANGE * b:
            return True
    return False


def prior_words(prior: ComPrior) -> str:
    """A CoM prior as an operator reads it: ``[30.0, -20.0, 90.0] mm (σ 20.0 mm, payload frame)``."""
    return f"{np.round(1e3 * np.asarray(prior.com, float), 1).tolist()} mm (σ {1e3 * prior.std:.1f} mm, payload frame)"


def inertia_words(prior: InertiaPrior) -> str:
    """An inertia prior as an operator reads it: ``[Ixx, Ixy, Ixz, Iyy, Iyz, Izz] = [0.004, 0, 0, 0.005, 0, 0.002]
    kg m^2 (σ 30 % of the largest moment)``."""
    values = ", ".join(f"{x:.3g}" for x in prior.inertia)
    return f"[{values}] kg m^2 about its CoM (σ {100 * prior.std:g} % of the largest moment)"


__all__ = ["CONTACT_LOOKBACK", "MOVED", "REST_CHANGE", "OnlineSession", "Tick", "inertia_words", "prior_words"]
