"""The simulated robot driver: what sim_node does, without ROS (the node only translates messages).

:class:`SimDriver` owns a :class:`SimulatedArm` and runs it as a robot driver would: it steps the physics
``steps_per_message`` steps per joint-state message, stamps each message (with the stream faults a real
driver produces, :class:`StreamStamps`), paces the stream to ``real_time_factor`` (:class:`Pacer`),
follows trajectories as joint_trajectory_controller interpolates them (:data:`.trajectory.JTC`), applies
contact wrenches given in a link's axes (now or at a future sim time) and attaches the payload.
Thread-safe: the physics thread and the node's callbacks share one driver.
:func:`driver_config` maps the node's parameter values to a :class:`DriverConfig` (the one mapping).

Start pose: ``initial_positions`` = ``[0.0]`` (the default) means :func:`start_pose`: a bent pose, never
the stretched-up zero pose, where the payload's mass does not show at rest and dynamic sampling must tilt first.
Units: s (sim time unless named wall), rad, N, N m.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np

from ..errors import PayloadEstimationError
from ..model.description import RobotDescription
from ..model.joint_vectors import per_joint
from ..model.parameters import BodyInertia, sym_from_vec6
from .arm import SimulatedArm
from .config import ArmState, SensorConfig, SimConfig, SimInputError
from .links import link_index, link_names
from .trajectory import JTC

FAULT_FUTURE_S = 1000.0
"""s a message after :meth:`StreamStamps.future_stamp` is stamped ahead of the stream."""
FAULT_GAP_S = 1.0
"""s (wall clock) of silence after :meth:`StreamStamps.gap`."""
LAG_RESTART_S = 0.5
"""s (wall) behind real time after which pacing restarts from now instead of bursting to catch up."""
LAG_WARN_SPAN_S = 2.0
"""s (wall) of pacing before a restart is worth a warning (start-up is slow)."""

FAULTS = {
    "future_stamp": f"the next joint_states message is stamped {FAULT_FUTURE_S} s ahead",
    "gap": f"no joint_states nor /clock for {FAULT_GAP_S} s",
    "restart": "joint_states and /clock stamps start over from 0 s",
}
"""The stream faults real drivers produce (:meth:`SimDriver.inject_fault`) and what each does."""

START_POSES_DEG = {
    "lwr4": (10.0, 40.0, -5.0, -70.0, 15.0, 50.0, 20.0),
    "iiwa14": (-10.0, 35.0, 5.0, -75.0, -10.0, 55.0, 15.0),
}
"""deg, the documented start (= the demo's pick) configuration per shipped robot: shoulder, elbow and wrist
bent, so that a payload's mass and CoM show in the joint torques at rest. A 7-joint robot of another name
(a URDF of an LBR or a franka arm) starts at the iiwa14 one when it lies within its limits."""


def start_pose(desc: RobotDescription) -> tuple[np.ndarray, str, bool]:
    """(q0 rad, what it is, bent) for ``initial_positions`` = ``[0.0]``: :data:`START_POSES_DEG` by robot name,
    the iiwa14 one for another 7-joint robot within its limits, else zeros clipped to the limits (not bent)."""
    lo, hi = desc.limits.position[:, 0], desc.limits.position[:, 1]
    deg = START_POSES_DEG.get(desc.name)
    if deg is None and desc.n == 7:
        deg = START_POSES_DEG["iiwa14"]
    if deg is not None and len(deg) == desc.n:
        q = np.radians(deg)
        if np.all((q >= lo) & (q <= hi)):
            return q, f"the documented start pose {list(deg)} deg (shoulder, elbow and wrist bent)", True
    return (np.clip(np.zeros(desc.n), lo, hi),
            f"zeros clipped to the limits: no documented start pose for robot '{desc.name}' (stretched up, a "
            "payload's mass may not show at rest and dynamic sampling may refuse); set initial_positions to a bent "
            "pose", False)


@dataclass(frozen=True)
class DriverConfig:
    """What the driver runs: ``sim`` physics and sensor; ``joint_names`` published, model order; ``q0``
    (rad) start pose, ``start`` what it is and ``start_warning`` why it is a poor one ("" if fine);
    ``steps_per_message`` physics steps per joint_states message; ``clock_period`` (s of sim time) between
    /clock ticks; ``real_time_factor`` sim per wall time (0: as fast as possible); ``contact_duration`` (s)
    of a pushed wrench; ``payload`` attached at start."""

    sim: SimConfig
    joint_names: tuple[str, ...]
    q0: np.ndarray
    start: str
    steps_per_message: int
    clock_period: float
    real_time_factor: float
    contact_duration: float
    payload: BodyInertia | None = None
    start_warning: str = ""


def payload_body(mass: float, com, inertia6) -> BodyInertia:
    """The payload of ``mass`` (kg), ``com`` (m, payload frame), ``inertia6`` [xx, xy, xz, yy, yz, zz] (kg m^2
    about the CoM); :class:`SimInputError` on wrong lengths."""
    com, i6 = np.asarray(com, float), np.asarray(inertia6, float)
    if com.shape != (3,) or i6.shape != (6,):
        raise SimInputError("parameters 'payload_com' (3 values, m) and 'payload_inertia' (xx, xy, xz, yy, yz, zz "
                            "about the CoM, kg m^2) have the wrong length")
    return BodyInertia(float(mass), com, sym_from_vec6(i6))


def driver_config(values: Mapping[str, object], desc: RobotDescription) -> DriverConfig:
    """sim_node's parameter values (its table's names) -> the driver's configuration for ``desc``."""
    n = desc.n
    per = {k: per_joint(values[k], n, f"parameter '{k}'", error=SimInputError)
           for k in ("noise_std", "offset", "viscous", "coulomb")}
    sensor = SensorConfig(noise_std=per["noise_std"], offset=per["offset"],
                          lowpass_hz=float(values["lowpass_hz"]) or None, viscous=per["viscous"],
                          coulomb=per["coulomb"], sensor_sees_friction=bool(values["sensor_sees_friction"]))
    dt = float(values["dt"])
    q0 = np.asarray(values["initial_positions"], dtype=float)
    start, bent = f"initial_positions {np.round(q0, 4).tolist()} rad", True
    if q0.size == 1 and q0[0] == 0.0:
        q0, start, bent = start_pose(desc)
    names = tuple(s for s in values["joint_names"] if s) or desc.joint_names
    if len(names) != n or len(set(names)) != n:
        raise SimInputError(f"joint_names: need {n} distinct names for robot '{desc.name}', got {list(names)}")
    body = payload_body(values["payload_mass"], values["payload_com"], values["payload_inertia"])
    return DriverConfig(
        sim=SimConfig(dt=dt, seed=int(values["seed"]), model_error=float(values["model_error"]), sensor=sensor),
        joint_names=names, q0=q0, start=start,
        steps_per_message=max(1, int(round(1.0 / (float(values["rate_hz"]) * dt)))),
        clock_period=1.0 / float(values["clock_rate_hz"]), real_time_factor=float(values["real_time_factor"]),
        contact_duration=float(values["contact_duration"]), payload=body if values["payload_attached"] else None,
        start_warning="" if bent else start)


@dataclass(frozen=True)
class Stamp:
    """How to publish one message: stamped ``t`` (s), with a /clock tick (``clock``) or not."""

    t: float
    clock: bool


class StreamStamps:
    """Stamps of the joint-state stream and its /clock ticks (at most one per ``clock_period`` s), with the
    faults real drivers produce: a stamp far ahead, a gap, a restart from 0."""

    def __init__(self, clock_period: float):
        self.clock_period = float(clock_period)
        self.origin = 0.0  # s of sim time subtracted from the stamps (restart)
        self._future = False
        self._gap_until = 0.0  # wall time (monotonic s) until which nothing is published
        self._next_clock = -np.inf

    def future_stamp(self) -> None:
        """The next message, and a /clock tick with it, is stamped :data:`FAULT_FUTURE_S` ahead."""
        self._future = True

    def gap(self, now_wall: float) -> None:
        """Nothing is published for :data:`FAULT_GAP_S` s of wall time from ``now_wall`` (monotonic s)."""
        self._gap_until = now_wall + FAULT_GAP_S

    def restart(self, sim_time: float) -> None:
        """Stamps and /clock start over from 0 at ``sim_time``, as after a driver restart."""
        self.origin = float(sim_time)
        self._next_clock = -np.inf

    def next(self, sim_time: float, now_wall: float) -> Stamp | None:
        """The stamp of the message at ``sim_time``, or None inside a gap (nothing published)."""
        if self._gap_until and now_wall < self._gap_until:
            return None
        future, self._future = self._future, False
        t = sim_time - self.origin
        clock = future or t >= self._next_clock - 1e-9
        if clock:
            self._next_clock = t + self.clock_period
        return Stamp(t + FAULT_FUTURE_S if future else t, clock)


class Pacer:
    """Paces sim time to ``real_time_factor`` x wall time from the first message on; more than
    :data:`LAG_RESTART_S` behind, it restarts from now (and says so after :data:`LAG_WARN_SPAN_S` s)."""

    def __init__(self, real_time_factor: float):
        self.real_time_factor = float(real_time_factor)
        self.restarts = 0
        self._wall0: float | None = None
        self._sim0 = 0.0

    def pace(self, now_wall: float, sim_time: float) -> tuple[float, str]:
        """(wall s to sleep before the next message, a warning or "") after the message at ``sim_time``."""
        rtf = self.real_time_factor
        if rtf <= 0:
            return 0.0, ""
        if self._wall0 is None:
            self._wall0, self._sim0 = now_wall, sim_time
            return 0.0, ""
        span = now_wall - self._wall0
        lag = span - (sim_time - self._sim0) / rtf
        if lag < 0:
            return -lag, ""
        if lag <= LAG_RESTART_S:
            return 0.0, ""
        achieved = (sim_time - self._sim0) / max(span, 1e-9)
        self._wall0, self._sim0 = now_wall, sim_time
        self.restarts += 1
        if span <= LAG_WARN_SPAN_S:
            return 0.0, ""
        # the average can still read 1.00 when one stall (a starved process) caused the lag
        return 0.0, (f"simulation fell {lag:.2f} s behind real time (real_time_factor {rtf}; {achieved:.2f} achieved "
                     f"over the last {span:.1f} s); pacing restarts from now. Often: lower rate_hz, or run the other "
                     "nodes in their own processes")


@dataclass(frozen=True)
class Contact:
    """A wrench on link ``link`` (1..n, ``name`` as asked), ``force`` (N) and ``torque`` (N m) in that link's
    axes at its frame origin, from sim time ``at`` for ``duration`` s."""

    link: int
    name: str
    force: np.ndarray
    torque: np.ndarray
    at: float
    duration: float


class SimDriver:
    """The simulated arm run as a driver (module docstring); ``publish(state, stamp)`` is the node's."""

    def __init__(self, desc: RobotDescription, config: DriverConfig):
        self.desc, self.config = desc, config
        self.arm = SimulatedArm(desc, config.sim)
        if config.payload is not None:
            self.arm.attach_payload(config.payload)
        self.arm.reset(config.q0)
        self.link_names = link_names(desc)
        self.stamps = StreamStamps(config.clock_period)
        self.pacer = Pacer(config.real_time_factor)
        self.published = 0
        self.lock = threading.Lock()
        self._pending: list[Contact] = []  # scheduled, by time

    @property
    def pending_contacts(self) -> int:
        return len(self._pending)

    def advance(self) -> tuple[ArmState, list[Contact | str]]:
        """One message's physics steps, then the scheduled contacts that fell due: (the state to publish,
        each contact applied or why it was not)."""
        with self.lock:
            self.arm.step(self.config.steps_per_message)
            s = self.arm.state()
            due = [c for c in self._pending if c.at <= s.t]
            self._pending = self._pending[len(due):]
        return s, [self._apply(c) for c in due]

    def run(self, stop: threading.Event, publish: Callable[[ArmState, Stamp], None],
            on_contact: Callable[[Contact | str], None], warn: Callable[[str], None]) -> None:
        """The physics loop until ``stop``: advance, publish (unless in a gap), pace to real time."""
        while not stop.is_set():
            s, applied = self.advance()
            for c in applied:
                on_contact(c)
            # under the lock: a ~/fault_restart (service thread) between the stamp and the /clock schedule left
            # the schedule on the old time, and /clock silent until the new time caught it up (issue 27)
            with self.lock:
                stamp = self.stamps.next(s.t, time.monotonic())
            if stamp is not None:
                publish(s, stamp)
                self.published += 1
            wait, warning = self.pacer.pace(time.perf_counter(), s.t)
            if warning:
                warn(warning)
            if wait > 0 or self.pacer.real_time_factor <= 0:
                time.sleep(wait)  # as fast as possible: sleep(0) lets the executor's threads run

    def set_trajectory(self, points, interpolation: str = JTC) -> None:
        """Follow ``points`` = [(time_from_start s, q rad, dq rad/s | None[, ddq rad/s² | None])] from now, interpolated
        as joint_trajectory_controller does by default (:data:`.trajectory.JTC`: positions only linear, with
        velocities cubic, with accelerations too quintic; see SimulatedArm.set_trajectory)."""
        with self.lock:
            self.arm.set_trajectory(points, interpolation)

    def push(self, name: str, force, torque, at: float = 0.0, duration: float | None = None) -> Contact | str | None:
        """A wrench on link ``name`` (a model link name or ``link_k``), force/torque in that link's axes, for
        ``duration`` s (None: the config's ``contact_duration``): applied now, or scheduled (None) when ``at``
        lies after the sim time."""
        c = Contact(link_index(self.desc, name), name, np.asarray(force, float), np.asarray(torque, float),
                    float(at), self.config.contact_duration if duration is None else float(duration))
        with self.lock:
            if c.at > self.arm.time:
                self._pending.append(c)
                self._pending.sort(key=lambda x: x.at)
                return None
        return self._apply(c)

    def _apply(self, c: Contact) -> Contact | str:
        """The contact as applied (``at`` = now) or, refused, why."""
        link = f"link_{c.link}"
        try:
            with self.lock:
                r = self.arm.link_pose(link)[:3, :3]
                self.arm.apply_contact(link, r @ c.force, None, c.duration, torque=r @ c.torque)
                t = self.arm.time
        except PayloadEstimationError as exc:
            return f"wrench on {c.name} refused: {exc}"
        return Contact(c.link, c.name, c.force, c.torque, t, c.duration)

    def attach(self, body: BodyInertia) -> None:
        with self.lock:
            self.arm.attach_payload(body)

    def detach(self) -> bool:
        """Remove the payload; whether one was attached."""
        with self.lock:
            had = self.arm.true_payload is not None
            self.arm.detach_payload()
        return had

    def inject_fault(self, fault: str) -> str:
        """A stream fault of :data:`FAULTS` from now on (:class:`StreamStamps`); what it does, for the log."""
        with self.lock:
            if fault == "future_stamp":
                self.stamps.future_stamp()
            elif fault == "gap":
                self.stamps.gap(time.monotonic())
            elif fault == "restart":
                self.stamps.restart(self.arm.time)
            else:
                raise SimInputError(f"unknown stream fault '{fault}': one of {', '.join(FAULTS)}")
        return FAULTS[fault]


__all__ = ["Contact", "DriverConfig", "FAULTS", "FAULT_FUTURE_S", "FAULT_GAP_S", "Pacer", "START_POSES_DEG",
           "SimDriver", "SimInputError", "Stamp", "StreamStamps", "driver_config", "payload_body", "start_pose"]
