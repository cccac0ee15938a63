"""Chaos driver: sim_node and the three nodes as processes, driven by a seeded random schedule of what
real ROS graphs do, with invariants checked from outside after every step (test_chaos.py; issue 27).

The schedule (:func:`make_schedule`, reproducible from its seed) mixes: ``robot_description``
re-published (the same text, a changed link mass, malformed XML, another arm's; the nodes take their model from the
topic), every Trigger service of the sampler, the estimator and the monitor (its threshold calibration)
called alone or several at once, parameter sets (valid and invalid, whole numbers for doubles), grasp and
release in the simulator (half of them announced with ``payload_estimator/grasped`` / ``released``), and
joint_states faults (a message stamped 1000 s ahead, a 1 s gap, stamps starting over: sim_node's
``~/fault_*`` services). :class:`ChaosRun` checks, while it runs:

- no node process exits and no Python traceback appears in any node's output;
- every service answers within ``SERVICE_LIMIT`` s;
- while the sampler runs (from its "~/sample: ..." log line to "sampling done/aborted"), no commanded or
  measured joint position leaves ±(amplitude + 1.5)° of the run's pick configuration
  (``sweep_amplitude_deg`` for ``~/sweep``; a run that starts from the pick kept from an aborted run keeps
  that run's envelope, as the sampler does), and the pick configuration the sampler reports is where
  the arm was at the start or the pick it kept from an aborted run;
- the sampler is not stranded: the same refusal of every ``~/sample``/``~/record_reference``/``~/sweep``
  for 10 s or more must name a service that gets out of it;
- the monitor is never without residuals for longer than ``BLIND_LIMIT`` s unless it reported ERROR
  within that time (a silence during which the monitor's own 1 Hz status was late too, and then came
  back, is a starved process on a loaded machine: counted in the report, not judged);
- ``payload/estimate`` never carries a NaN or an unphysical body;
- the simulated arm's controller never rejects a command of the nodes (a rejected hold leaves the arm
  moving);
- a valid parameter value is accepted, an invalid one refused with a reason a person can read;

then, after the schedule, a clean run (the user's sequence: forget the old pick, unloaded capture, with
``final_mode="dynamic"`` ``~/record_reference``, grasp announced with ``payload_estimator/grasped``,
``~/sample``; each run tried at most twice, with the stream timeouts of the loaded-machine tests, see
FINAL_TIMEOUTS) estimates the payload within 1 % / 5 mm.

Each violation names the seed, the step, the event and the node's last log lines. Standalone:
``python test/integration/chaos_driver.py --seed 3 [--duration 60]``.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import rclpy
from diagnostic_msgs.msg import DiagnosticArray
from geometry_msgs.msg import InertiaStamped
from rcl_interfaces.srv import SetParameters
from rclpy.clock import Clock, ClockType
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node
from rclpy.parameter import Parameter
from sensor_msgs.msg import JointState
from std_msgs.msg import Bool, String
from std_srvs.srv import Trigger
from trajectory_msgs.msg import JointTrajectory

from payload_estimation.ros.bringup import NODES, override_file, ros_args
from payload_estimation.ros.messages import trajectory_from_msg, trajectory_msg
from payload_estimation.ros.monitor_node import HOLD_MARK
from payload_estimation.ros.qos import COMMAND_QOS, EVENT_QOS, LATCHED_QOS, SENSOR_QOS
from payload_estimation.ros.spin_thread import SpinThread

ROBOT = "lwr4"
Q0 = np.radians([10, 40, -5, -70, 15, 50, 20])  # the pick configuration the arm starts at
MASS, COM = 2.5, np.array([0.02, -0.01, 0.07])
INERTIA = [0.006, 0.0, 0.0, 0.007, 0.0, 0.005]  # kg m^2 about the CoM
SIM_PARAMS = [f"robot:={ROBOT}", "rate_hz:=500.0", "noise_std:=[0.1]", "model_error:=0.03", "seed:=7",
              "offset:=[0.3, -0.4, 0.2, 0.5, -0.3, 0.2, -0.1]", f"payload_mass:={MASS}",
              f"payload_com:={COM.tolist()}", f"payload_inertia:={INERTIA}", f"initial_positions:={Q0.tolist()}"]
"""joint_states at 500 Hz: five processes at 1 kHz stalled each other for up to 2 s on a shared 2-core machine."""
NODE_OVERRIDES = ["robot:=''", "residual_decimation:=10", "sweep_poses:=8", "service_timeout:=10.0", "dwell:=3.0",
                  "pick_rest_timeout:=10.0"]
"""The nodes take the model from robot_description; residuals at 100 Hz (the probe's blindness check);
short sweeps; wall-clock bounds for a shared 2-core machine. joint_state_timeout stays at its default."""

SERVICE_LIMIT = 30.0  # s, longest answer of any service
BLIND_LIMIT = 1.5  # s without residuals before the monitor must have reported ERROR
BLIND_VERDICT_DELAY = 1.2  # s after the limit: by then the monitor's 1 Hz status shows whether it was running
ENVELOPE_MARGIN_DEG = 1.5
STRANDED_S = 10.0  # s of identical refusals of every motion call that name no way out
WAY_OUT = re.compile(r"~/|payload_sampler/|payload_estimator/|collision_monitor/|sim_node/|\bset \w+")
"""A refusal names a way out: a service to call or a parameter to set."""
STAMP_LAG = 0.5
"""s: how late the probe may stamp a joint_states sample (its callback's wall time; a backlog of its depth-200 queue
and a busy executor): the arm's position at a run's start is any sample stamped within this of it."""
MASS_TOL, COM_TOL = 0.01, 0.005  # the clean run after the schedule: relative, m

SAMPLER_SERVICES = {"sample": 6, "record_reference": 4, "sweep": 1, "cancel": 4, "forget_pick": 2}
ESTIMATOR_SERVICES = {"capture": 2, "capture_unloaded": 2, "estimate": 2, "reset": 2, "clear_captures": 1,
                      "capture_calibration": 1, "calibrate": 1, "start_recording": 1, "store_reference": 1,
                      "estimate_motion": 1, "grasped": 1, "released": 1}
MONITOR_SERVICES = {"start_threshold_calibration": 2, "finish_threshold_calibration": 1,
                    "cancel_threshold_calibration": 1}
"""Trigger services with their weight in the schedule."""
MOTION_SERVICES = ("payload_sampler/sample", "payload_sampler/record_reference", "payload_sampler/sweep")
SERVICES = {**{f"payload_sampler/{k}": w for k, w in SAMPLER_SERVICES.items()},
            **{f"payload_estimator/{k}": w for k, w in ESTIMATOR_SERVICES.items()},
            **{f"collision_monitor/{k}": w for k, w in MONITOR_SERVICES.items()}}

PARAMETERS: list[tuple[str, str, object, bool]] = [
    # (node, name, value, valid): whole numbers for doubles are valid (users type them)
    ("payload_sampler", "amplitude_deg", 5, True), ("payload_sampler", "amplitude_deg", 6.5, True),
    ("payload_sampler", "amplitude_deg", 7, True), ("payload_sampler", "amplitude_deg", 12.0, False),
    ("payload_sampler", "amplitude_deg", -1, False), ("payload_sampler", "dwell", 2, True),
    ("payload_sampler", "dwell", 0.0, False), ("payload_sampler", "n_poses", 8, True),
    ("payload_sampler", "n_poses", 3, False), ("payload_sampler", "mode", "static", True),
    ("payload_sampler", "mode", "auto", True), ("payload_sampler", "mode", "sideways", False),
    ("payload_sampler", "excitation_duration", 2, True), ("payload_sampler", "velocity_scale", 1, True),
    ("payload_sampler", "velocity_scale", 1.5, False), ("payload_sampler", "joint_state_timeout", 1, True),
    ("payload_sampler", "joint_state_timeout", -1, False),
    ("collision_monitor", "thresholds", [6], True), ("collision_monitor", "thresholds", [7.0], True),
    ("collision_monitor", "thresholds", [1000.0], False), ("collision_monitor", "thresholds", [-6.0], False),
    ("collision_monitor", "resume_delay", 2, True), ("collision_monitor", "resume_delay", -1.0, False),
    ("collision_monitor", "n_sigma", 5, True), ("collision_monitor", "policy", "stop", True),
    ("collision_monitor", "policy", "stop_and_resume", True), ("collision_monitor", "policy", "bogus", False),
    ("collision_monitor", "joint_state_timeout", 1, True), ("collision_monitor", "joint_state_timeout", -0.5, False),
    ("payload_estimator", "torque_noise", 1, True), ("payload_estimator", "torque_noise", -1.0, False),
    ("payload_estimator", "max_mass_std", 1, True), ("payload_estimator", "anchor_window", 1, True),
    ("payload_estimator", "method", "auto", True), ("payload_estimator", "method", "bogus", False),
    ("payload_estimator", "max_recording", 0.5, False),
]
DEFAULTS = {("payload_sampler", "amplitude_deg"): 7.0, ("payload_sampler", "dwell"): 3.0,
            ("payload_sampler", "n_poses"): 10, ("payload_sampler", "mode"): "auto",
            ("payload_sampler", "excitation_duration"): 1.6, ("payload_sampler", "velocity_scale"): 0.9,
            ("payload_sampler", "joint_state_timeout"): 0.0, ("collision_monitor", "thresholds"): [6.0],
            ("collision_monitor", "resume_delay"): 2.0, ("collision_monitor", "n_sigma"): 5.0,
            ("collision_monitor", "policy"): "stop_and_resume", ("collision_monitor", "joint_state_timeout"): 0.0,
            ("payload_estimator", "torque_noise"): 0.05, ("payload_estimator", "max_mass_std"): 0.1,
            ("payload_estimator", "anchor_window"): 1.0, ("payload_estimator", "method"): "auto"}
"""What the clean run after the schedule restores (start-up values of NODE_OVERRIDES included)."""
FINAL_TIMEOUTS = {("payload_sampler", "joint_state_timeout"): 2.0, ("payload_estimator", "joint_state_timeout"): 2.0,
                  ("collision_monitor", "joint_state_timeout"): 1.0}
"""The clean run judges the estimate, not the machine: wall-clock stream bounds for a shared 2-core machine,
where a node's executor can stall 0.5 s (the monitor's 1 s keeps its ERROR within BLIND_LIMIT)."""
UNREADABLE = ("array('d'", "undeclared parameter(s): []", "expected '")
"""Fragments of rclpy's own refusal texts that tell a person nothing."""

KINDS = {"call": 40, "burst": 10, "param": 18, "description": 10, "grasp": 6, "release": 6, "fault": 10}
FAULTS = ("future_stamp", "gap", "restart")
DESCRIPTIONS = ("same", "changed", "malformed", "other_arm")
"""robot_description re-published: the same text, a link mass 2 % off, cut in half, another arm's (iiwa14's chain to
link 6: 6 joints; a second arm's robot_state_publisher in this namespace)."""


@dataclass(frozen=True)
class Event:
    """One step of the schedule: at ``t`` s (wall, from the schedule's start) do ``kind`` with ``args``."""

    t: float
    kind: str
    args: tuple

    def __str__(self) -> str:
        return f"t={self.t:5.2f} s {self.kind} {' '.join(map(str, self.args))}"


def _pick(rng: np.random.Generator, weights: dict[str, int]) -> str:
    keys = list(weights)
    p = np.array([weights[k] for k in keys], float)
    return keys[int(rng.choice(len(keys), p=p / p.sum()))]


def make_schedule(seed: int, duration: float = 60.0) -> list[Event]:
    """The seed's events over ``duration`` s: about one a second (exponential gaps, 0.05-3 s)."""
    rng = np.random.default_rng(seed)
    events, t = [], 1.0
    while t < duration:
        kind = _pick(rng, KINDS)
        if kind == "call":
            args = (_pick(rng, SERVICES),)
        elif kind == "burst":  # concurrent calls, the same service possibly twice
            args = tuple(_pick(rng, SERVICES) for _ in range(int(rng.integers(2, 5))))
        elif kind == "param":
            args = PARAMETERS[int(rng.integers(len(PARAMETERS)))]
        elif kind == "description":
            args = (DESCRIPTIONS[int(rng.integers(len(DESCRIPTIONS)))],)
        elif kind == "fault":
            args = (FAULTS[int(rng.integers(3))],)
        elif kind in ("grasp", "release"):
            args = ("announced",) if rng.random() < 0.5 else ("silent",)
        else:
            args = ()
        events.append(Event(round(t, 3), kind, args))
        t += float(np.clip(rng.exponential(1.0), 0.05, 3.0))
    return events


def other_arm_description() -> str:
    """A second arm's robot_description: the vendored iiwa14 URDF's chain to lbr_link_6 (6 joints)."""
    from data_paths import urdf

    from payload_estimation.model.robot_file import load_robot
    from payload_estimation.model.urdf import to_urdf

    return to_urdf(load_robot(str(urdf("iiwa14")), tip_link="lbr_link_6"))


def changed_description(text: str, k: int) -> str:
    """``text`` with the mass of the ``k``-th <mass> element (cyclic) 2 % higher: a changed model."""
    masses = list(re.finditer(r'<mass value="([^"]+)"/>', text))
    m = masses[k % len(masses)]
    return text[:m.start(1)] + repr(float(m.group(1)) * 1.02) + text[m.end(1):]


def physical_problem(msg: InertiaStamped, max_mass: float = 15.0, max_com: float = 0.5) -> str:
    """Why ``msg`` is not a physical body ('' if it is): NaN, negative or too large mass, CoM out of
    reach, inertia about the CoM not positive semi-definite or violating the triangle inequality."""
    i = msg.inertia
    vals = np.array([i.m, i.com.x, i.com.y, i.com.z, i.ixx, i.ixy, i.ixz, i.iyy, i.iyz, i.izz], float)
    if not np.all(np.isfinite(vals)):
        return f"non-finite values {vals.tolist()}"
    if not 0.0 <= i.m <= max_mass:
        return f"mass {i.m} kg outside [0, {max_mass}]"
    if np.linalg.norm(vals[1:4]) > max_com:
        return f"CoM {vals[1:4].tolist()} m farther than {max_com} m"
    inertia = np.array([[i.ixx, i.ixy, i.ixz], [i.ixy, i.iyy, i.iyz], [i.ixz, i.iyz, i.izz]])
    ev = np.linalg.eigvalsh(inertia)
    tol = 1e-9 + 1e-6 * max(abs(ev).max(), 0.0)
    if ev.min() < -tol:
        return f"inertia not positive semi-definite (eigenvalues {ev.tolist()})"
    if any(2 * e > ev.sum() + tol for e in ev):
        return f"principal moments {ev.tolist()} violate the triangle inequality"
    return ""


@dataclass
class Violation:
    step: int
    event: str
    invariant: str
    detail: str
    node: str = ""

    def __str__(self) -> str:
        return f"step {self.step} [{self.event}] {self.invariant}: {self.detail}"


@dataclass
class SamplerRun:
    """One run of the sampler (``~/sample``, ``~/sweep`` or ``~/record_reference``), from its log lines:
    from "~/<kind>: ..." to "sampling done: ..." or "sampling aborted: ..." (wall clock, s since the epoch)."""

    t_start: float
    kind: str
    amplitude_deg: float
    t_end: float | None = None
    outcome: str = ""


def _pick_key(q: np.ndarray) -> tuple:
    """A pick configuration (rad, from the sampler's status) as a dict key, to 0.1 deg."""
    return tuple(np.round(np.degrees(q), 1))


def _status_values(st) -> dict[str, str]:
    return {kv.key: kv.value for kv in st.values}


def _deg_list(text: str) -> np.ndarray | None:
    return np.radians(json.loads(text)) if text else None


class ChaosProbe(Node):
    """Observes the arm's namespace: joint_states, commands, the sampler's status, the
    monitor's residuals and status, payload/estimate; publishes robot_description and moves."""

    def __init__(self, ns: str, run: ChaosRun):
        super().__init__("chaos_probe", namespace=ns)
        self.run = run
        self.lock = threading.Lock()
        self.q: np.ndarray | None = None
        self.description: str | None = None
        self.names: tuple[str, ...] = ()
        self.sampler: tuple[float, dict, str] | None = None  # (wall, values, message)
        self.monitor_errors: list[float] = []  # wall times of ERROR statuses
        self.monitor_statuses: list[float] = []  # wall times of every status (1 Hz and on events)
        self.episodes: dict[float, bool] = {}  # start of each residual silence > BLIND_LIMIT -> judged
        self.monitor_level: int | None = None
        self.collision = False
        self.last_residual: float | None = None
        self.last_tick = time.monotonic()
        self.starved: list[tuple[float, float]] = []  # (from, to) wall: the probe itself did not run
        self.measured: deque = deque(maxlen=200_000)  # (wall s since the epoch, q)
        self.commanded: deque = deque(maxlen=200_000)  # (wall, q, sender) of every point the nodes command
        self.sampler_history: deque = deque(maxlen=2000)  # (wall, status values)
        self.moving_myself = False
        self.estimates = 0
        self.create_subscription(JointState, "joint_states", self._on_js, SENSOR_QOS)
        self.create_subscription(JointTrajectory, "joint_trajectory", self._on_traj, COMMAND_QOS)
        self.create_subscription(DiagnosticArray, "payload_sampler/status", self._on_sampler, LATCHED_QOS)
        self.create_subscription(DiagnosticArray, "collision_monitor/status", self._on_monitor, LATCHED_QOS)
        self.create_subscription(JointState, "collision_monitor/residual", self._on_residual, EVENT_QOS)
        self.create_subscription(Bool, "collision_monitor/collision", self._on_collision, LATCHED_QOS)
        self.create_subscription(InertiaStamped, "payload/estimate", self._on_estimate, LATCHED_QOS)
        self.create_subscription(String, "robot_description", self._on_description, LATCHED_QOS)
        self.pub_description = self.create_publisher(String, "robot_description", LATCHED_QOS)
        self.pub_traj = self.create_publisher(JointTrajectory, "joint_trajectory", COMMAND_QOS)
        self.create_timer(0.05, self._tick, clock=Clock(clock_type=ClockType.STEADY_TIME))

    # --- observations ------------------------------------------------------------------------------
    def _on_description(self, msg: String) -> None:
        if self.description is None and msg.data.lstrip().startswith("<"):
            self.description = msg.data  # the simulator's: the first one, before the driver publishes any

    def _on_js(self, msg: JointState) -> None:
        q = np.array(msg.position)
        self.names = tuple(msg.name)
        self.q = q
        self.measured.append((time.time(), q))

    def _on_traj(self, msg: JointTrajectory) -> None:
        if self.moving_myself or not self.names:
            return
        try:
            _, q = trajectory_from_msg(msg, self.names)
        except Exception as e:  # noqa: BLE001 - a malformed command is itself a finding
            self.run.violation("command", f"unreadable joint_trajectory from the nodes: {e}", "payload_sampler")
            return
        now = time.time()
        sender = "collision_monitor" if msg.header.frame_id == HOLD_MARK else "payload_sampler"
        self.commanded.extend((now, x, sender) for x in q)

    def _on_sampler(self, msg: DiagnosticArray) -> None:
        if msg.status:
            vals = _status_values(msg.status[0])
            with self.lock:
                self.sampler = (time.monotonic(), vals, msg.status[0].message)
                self.sampler_history.append((time.time(), vals))

    def _on_monitor(self, msg: DiagnosticArray) -> None:
        if not msg.status:
            return
        level = msg.status[0].level
        level = int.from_bytes(level, "little") if isinstance(level, bytes) else int(level)
        with self.lock:
            self.monitor_level = level
            self.monitor_statuses.append(time.monotonic())
            if level == 2:
                self.monitor_errors.append(time.monotonic())

    def _on_residual(self, msg: JointState) -> None:
        now = time.monotonic()
        with self.lock:
            if self.last_residual is not None and now - self.last_residual > BLIND_LIMIT:
                self._blind_episode(self.last_residual)
            self.last_residual = now

    def _on_collision(self, msg: Bool) -> None:
        self.collision = bool(msg.data)

    def _on_estimate(self, msg: InertiaStamped) -> None:
        self.estimates += 1
        why = physical_problem(msg)
        if why:
            self.run.violation("estimate", f"payload/estimate is not a physical body: {why}", "payload_estimator")

    def _blind_episode(self, start: float) -> None:
        """Residuals stopped at ``start`` (wall, monotonic) for longer than BLIND_LIMIT (lock held)."""
        if start not in self.episodes:
            self.episodes[start] = False

    def _tick(self) -> None:
        """Blindness check at 20 Hz; a late tick means this probe itself was starved (no verdict then)."""
        now = time.monotonic()
        if now - self.last_tick > 0.5:
            self.starved.append((self.last_tick, now))
        self.last_tick = now
        verdicts = []
        with self.lock:
            last = self.last_residual
            if last is not None and now - last > BLIND_LIMIT:
                self._blind_episode(last)
            for start, judged in list(self.episodes.items()):
                if not judged and now > start + BLIND_LIMIT + BLIND_VERDICT_DELAY:
                    self.episodes[start] = True
                    verdicts.append((start, self._blind_verdict(start)))
        for start, verdict in verdicts:
            if verdict == "blind":
                self.run.violation("blind", f"no residual from the monitor for more than {BLIND_LIMIT} s (from "
                                            f"{time.time() - (now - start):.3f}, wall) and no ERROR status within "
                                            f"{BLIND_LIMIT} s, though the monitor published its status on time",
                                   "collision_monitor")
            elif verdict == "starved":
                self.run.unjudged += 1

    def _blind_verdict(self, start: float) -> str:
        """'ok' (ERROR in time), 'starved' (this probe or the monitor's own 1 Hz status was late: a starved
        process cannot be judged on latency), else 'blind'."""
        end = start + BLIND_LIMIT
        if any(start < t <= end + 0.1 for t in self.monitor_errors):
            return "ok"
        if any(a < end and b > start for a, b in self.starved):
            return "starved"
        window = [t for t in self.monitor_statuses if start - 1.5 < t < end + BLIND_VERDICT_DELAY]
        resumed = any(t > end for t in window)  # a hung monitor does not come back: that is blind
        late = max(np.diff(sorted([start - 1.5, end + BLIND_VERDICT_DELAY, *window]))) > 1.6
        return "starved" if late and resumed else "blind"

    # --- actions -----------------------------------------------------------------------------------
    def move_to(self, q: np.ndarray, seconds: float) -> None:
        self.moving_myself = True
        self.pub_traj.publish(trajectory_msg(self.names, np.asarray(q)[None], [seconds]))
        time.sleep(0.3)
        self.moving_myself = False

    def sampler_values(self) -> dict[str, str]:
        with self.lock:
            return {} if self.sampler is None else dict(self.sampler[1])


class ChaosRun:
    """One seed: start the processes, play the schedule, check the invariants, run the clean estimate."""

    def __init__(self, seed: int, duration: float = 60.0, log_dir: str | None = None, final_mode: str = "static"):
        self.seed = seed
        self.final_mode = final_mode  # static: anchor, grasp, ~/sample; dynamic: ~/record_reference before the grasp
        self.schedule = make_schedule(seed, duration)
        self.ns = f"/chaos{os.getpid()}s{seed}"
        self.log_dir = Path(log_dir or tempfile.mkdtemp(prefix=f"chaos_seed{seed}_"))
        self.violations: list[Violation] = []
        self.step, self.event = -1, "start-up"
        self.amplitude_deg, self.sweep_amplitude = 7.0, 25.0
        self.procs: dict[str, subprocess.Popen] = {}
        self._log_pos: dict[str, int] = {}
        self.pending: dict[int, tuple] = {}  # id -> (service, sent wall, step, event, future, answer check or None)
        self.answers: list[tuple[int, str, bool, str]] = []  # (step, service, success, message)
        self._ids = 0
        self.probe: ChaosProbe | None = None
        self.clients: dict[str, object] = {}
        self.param_clients: dict[str, object] = {}
        self.dead = False
        self._description_k = 0
        self.final_estimate: tuple[float, np.ndarray, str] | None = None
        self.runs, self.run_kinds, self.probe_estimates = 0, [], 0
        self.unjudged = 0  # residual silences not judged: the probe or the monitor process was starved
        self.current: SamplerRun | None = None
        self.finished: list[SamplerRun] = []
        self.anchor_amplitude: dict[tuple, float] = {}  # pick configuration -> amplitude (deg) of its envelope
        self.refusals: list[tuple[float, str]] = []  # (wall, reason) of consecutive refused motion calls

    # --- reporting ---------------------------------------------------------------------------------
    def violation(self, invariant: str, detail: str, node: str = "") -> None:
        v = Violation(self.step, self.event, invariant, detail, node)
        if any((x.invariant, x.detail) == (v.invariant, v.detail) for x in self.violations):
            return
        self.violations.append(v)

    def tail(self, node: str, n: int = 12) -> str:
        path = self.log_dir / f"{_node_of(node) or node}.log"
        if not path.exists():
            return ""
        lines = path.read_text(errors="replace").splitlines()
        return "\n".join("      " + x[:300] for x in lines[-n:])

    def report(self) -> str:
        """Every violation with seed, step, event, invariant and the node's last log lines."""
        out = [f"chaos seed {self.seed}: {len(self.violations)} violation(s) (rerun: PE_CHAOS_SEEDS={self.seed}; "
               f"logs in {self.log_dir})"]
        for v in self.violations:
            out.append(f"  seed {self.seed} {v}")
            for node in ([v.node] if v.node else []):
                out.append(f"    last lines of {node}:\n{self.tail(node)}")
        ok = sum(a[2] for a in self.answers)
        out.append(f"  {len(self.answers)} Trigger calls answered ({ok} succeeded), {self.runs} sampler runs "
                   f"({', '.join(sorted(set(self.run_kinds))) or 'none'}), {self.probe_estimates} estimates published")
        log = self.log_dir / "sampler.log"
        lost = log.read_text(errors="replace").count("sampling aborted: joint_states lost") if log.exists() else 0
        gaps = sum(e.args == ("gap",) for e in self.schedule)
        out.append(f"  {lost} sampler runs aborted on 'joint_states lost' ({gaps} 1 s gaps scheduled); {self.unjudged} "
                   f"residual silences over {BLIND_LIMIT} s not judged (the monitor's own 1 Hz status was late too)")
        out.append("  schedule up to the first violation:")
        last = self.violations[0].step if self.violations else len(self.schedule) - 1
        out += [f"    {k:3d} {e}" for k, e in enumerate(self.schedule[:max(last, 0) + 1])]
        return "\n".join(out)

    # --- processes ---------------------------------------------------------------------------------
    def start(self) -> None:
        clock = [f"/clock:={self.ns}/clock"]
        over = override_file(NODE_OVERRIDES + [f"calibration_file:={self.log_dir / 'gravity.yaml'}"],
                             ["estimator", "sampler", "monitor"], str(self.log_dir))
        self._start("sim", ros_args(None, self.ns, None, clock, SIM_PARAMS))
        for short in ("estimator", "sampler", "monitor"):
            self._start(short, ros_args(None, self.ns, True, clock) + ["--params-file", str(over)])

    def _start(self, short: str, args: list[str]) -> None:
        log = open(self.log_dir / f"{short}.log", "w")  # noqa: SIM115 - the child writes it until stopped
        env = {**os.environ, "PYTHONUNBUFFERED": "1", "RCUTILS_LOGGING_BUFFERED_STREAM": "0"}
        self.procs[short] = subprocess.Popen([sys.executable, "-m", NODES[short][0], *args], stdout=log,
                                             stderr=subprocess.STDOUT, env=env, preexec_fn=_die_with_parent)
        log.close()

    def stop(self) -> None:
        for p in self.procs.values():
            if p.poll() is None:
                p.send_signal(signal.SIGINT)
        end = time.monotonic() + 5.0
        for p in self.procs.values():
            try:
                p.wait(max(0.1, end - time.monotonic()))
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()

    # --- the run -------------------------------------------------------------------------------------
    def run(self) -> list[Violation]:
        """Start, wait for readiness, play the schedule, drain, run the clean estimate; stop everything."""
        rclpy.init()
        spin = None
        try:
            self.start()
            self.probe = ChaosProbe(self.ns, self)
            for srv in [*SERVICES, "sim_node/attach_payload", "sim_node/detach_payload",
                        *(f"sim_node/fault_{f}" for f in FAULTS)]:
                self.clients[srv] = self.probe.create_client(Trigger, f"{self.ns}/{srv}")
            for node in ("payload_sampler", "payload_estimator", "collision_monitor"):
                self.param_clients[node] = self.probe.create_client(SetParameters, f"{self.ns}/{node}/set_parameters")
            spin = SpinThread(SingleThreadedExecutor(), self.probe)
            if not self._ready(90.0):
                return self.violations
            self.play()
            if not self.dead:
                self.drain()
            if not self.dead:
                self.clean_estimate()
            _wait(lambda: not self.finished and self.current is None, 3.0, self.check)  # the last runs judged
            self.check()
            return self.violations
        finally:
            if spin is not None:
                spin.stop()
            if self.probe is not None:
                self.probe.destroy_node()
            self.stop()
            rclpy.shutdown()

    def _ready(self, timeout: float) -> bool:
        p = self.probe
        ok = _wait(lambda: p.q is not None and p.description is not None and p.last_residual is not None
                   and p.sampler_values().get("busy") == "False"
                   and all(c.service_is_ready() for c in [*self.clients.values(), *self.param_clients.values()]),
                   timeout, self.check)
        if not ok:
            self.violation("start-up", f"the nodes were not ready within {timeout} s (joint_states {p.q is not None}, "
                                       f"description {p.description is not None}, residuals "
                                       f"{p.last_residual is not None}, sampler {p.sampler_values().get('busy')})")
        return ok and not self.dead

    def play(self) -> None:
        t0 = time.monotonic()
        for k, ev in enumerate(self.schedule):
            while time.monotonic() - t0 < ev.t:
                self.check()
                if self.dead:
                    return
                time.sleep(0.05)
            self.step, self.event = k, str(ev)
            self.do(ev)
            self.check()
            if self.dead:
                return

    def do(self, ev: Event) -> None:
        if ev.kind in ("call", "burst"):
            for srv in ev.args:
                self.call(srv)
        elif ev.kind == "param":
            self.set_param(*ev.args)
        elif ev.kind == "description":
            self.publish_description(ev.args[0])
        elif ev.kind in ("grasp", "release"):  # announced first (payload_estimator/grasped, /released) or not
            if ev.args == ("announced",):
                self._sync(self.call("payload_estimator/grasped" if ev.kind == "grasp" else
                                     "payload_estimator/released"), "announcement")
            self.call("sim_node/attach_payload" if ev.kind == "grasp" else "sim_node/detach_payload")
        elif ev.kind == "fault":
            self.call(f"sim_node/fault_{ev.args[0]}")

    def call(self, srv: str):
        fut = self.clients[srv].call_async(Trigger.Request())
        self._track(srv, fut)
        return fut

    def _track(self, name: str, fut, check: Callable | None = None) -> None:
        self._ids += 1
        self.pending[self._ids] = (name, time.monotonic(), self.step, self.event, fut, check)

    def set_param(self, node: str, name: str, value, valid: bool):
        req = SetParameters.Request(parameters=[Parameter(name, value=value).to_parameter_msg()])
        fut = self.param_clients[node].call_async(req)
        self._track(f"{node}/set_parameters {name}={value!r}", fut,
                    lambda res, n=node, k=name, v=value, ok=valid: self._param_answer(n, k, v, ok, res))
        return fut

    def _param_answer(self, node: str, name: str, value, valid: bool, res) -> None:
        r = res.results[0]
        if valid and not r.successful:
            self.violation("parameter", f"{node} refused the valid {name}={value!r}: {r.reason!r}", node)
        elif not valid and r.successful:
            self.violation("parameter", f"{node} accepted the invalid {name}={value!r}", node)
        elif not valid and (not r.reason or any(x in r.reason for x in UNREADABLE)):
            self.violation("parameter", f"{node} refused {name}={value!r} without a readable reason: {r.reason!r}",
                           node)
        if r.successful and name == "amplitude_deg":
            self.amplitude_deg = float(value)

    def publish_description(self, how: str) -> None:
        text = self.probe.description
        if how == "changed":
            self._description_k += 1
            text = changed_description(text, self._description_k)
        elif how == "malformed":
            text = text[: len(text) // 2]
        elif how == "other_arm":
            text = other_arm_description()
        self.probe.pub_description.publish(String(data=text))

    # --- invariants --------------------------------------------------------------------------------
    def check(self) -> None:
        for short, p in self.procs.items():
            if p.poll() is not None and not self.dead:
                self.dead = True
                self.violation("process", f"{NODES[short][0]} exited with code {p.returncode}", short)
        for short in self.procs:
            self._scan_log(short)
        now = time.monotonic()
        for i, (name, sent, step, event, fut, chk) in list(self.pending.items()):
            if fut.done():
                del self.pending[i]
                res = fut.result()
                if chk is not None:
                    chk(res)
                elif res is not None:
                    self.answers.append((step, name, bool(res.success), str(res.message)))
                    if name in MOTION_SERVICES:
                        self._check_refusal(step, event, bool(res.success), str(res.message))
            elif now - sent > SERVICE_LIMIT:
                del self.pending[i]
                where = ""
                if name.startswith("payload_sampler/") and self.probe is not None and self.probe.sampler:
                    _, vals, text = self.probe.sampler
                    where = f" (the sampler's status: {text!r}, phase {vals.get('phase')!r})"
                self.violations.append(Violation(step, event, "service", f"{name} did not answer within "
                                                 f"{SERVICE_LIMIT} s{where}", _node_of(name)))
        self._check_runs()

    def _check_refusal(self, step: int, event: str, ok: bool, message: str) -> None:
        """Stranded: the same refusal of every motion call for STRANDED_S s, naming no service to call."""
        if message.startswith("rejected: a sampling run is already in progress"):
            return
        if ok or not message.startswith("refused"):
            self.refusals.clear()
            return
        reason = message.split(" (took ")[0]
        if self.refusals and self.refusals[-1][1] != reason:
            self.refusals.clear()
        self.refusals.append((time.monotonic(), reason))
        span = self.refusals[-1][0] - self.refusals[0][0]
        if len(self.refusals) >= 3 and span >= STRANDED_S and not WAY_OUT.search(reason):
            self.violations.append(Violation(step, event, "stranded", f"{len(self.refusals)} motion calls over "
                                             f"{span:.0f} s refused with {reason!r}, which names no way out",
                                             "sampler"))
            self.refusals.clear()

    def _scan_log(self, short: str) -> None:
        path = self.log_dir / f"{short}.log"
        if not path.exists():
            return
        with open(path, errors="replace") as f:
            f.seek(self._log_pos.get(short, 0))
            text = f.read()
            self._log_pos[short] = f.tell()
        if short == "sampler":
            self._track_runs(text)
        if short == "sim":  # a command the arm's controller refuses: the arm does not do what the nodes think
            for line in re.findall(r"^.*joint_trajectory rejected.*$", text, re.M):
                self.violation("command", f"sim_node rejected a command of the nodes: {line.split(']: ', 1)[-1]}",
                               "sampler")
        for marker in ("Traceback (most recent call last)", "exception was never retrieved"):
            if marker in text:
                self.violation("traceback", f"{NODES[short][0]}: {_exception(text[text.index(marker):])}", short)

    def _track_runs(self, text: str) -> None:
        """Runs from the sampler's log: start and end lines with their wall-clock stamps."""
        for m in re.finditer(r"^\[\w+\] \[([0-9.]+)\] \[[^\]]+\]: (.*)$", text, re.M):
            t, msg = float(m.group(1)), m.group(2)
            start = re.match(r"~/(sample|sweep|record_reference): ", msg)
            if start:
                kind = start.group(1)
                self.current = SamplerRun(t, kind, self.sweep_amplitude if kind == "sweep" else self.amplitude_deg)
            elif self.current is not None and msg.startswith(("sampling done:", "sampling aborted:")):
                self.current.t_end, self.current.outcome = t, msg[:160]
                self.finished.append(self.current)
                self.current = None

    def _check_runs(self) -> None:
        """Each finished run, once the sampler's status after it is in (1.5 s)."""
        p = self.probe
        if p is None:
            return
        now = time.time()
        for r in [r for r in self.finished if now - r.t_end > 1.5]:
            self.finished.remove(r)
            self.runs += 1
            self.run_kinds.append(r.kind)
            if r.outcome.startswith("sampling aborted: refused"):
                continue  # the arm was not moved
            with p.lock:
                before = [v for t, v in p.sampler_history if t <= r.t_start]
                after = [v for t, v in p.sampler_history if t > r.t_end and v.get("busy") == "False"]
            measured = [(t, q, "") for t, q in list(p.measured) if r.t_start <= t <= r.t_end]
            commanded = [c for c in list(p.commanded) if r.t_start <= c[0] <= r.t_end]
            q_start = next((q for t, q in reversed(list(p.measured)) if t <= r.t_start), None)
            # the probe stamps a sample when its callback runs: a busy probe's backlog is stamped late (seed 16: the
            # arm 3.8 deg into a return move, stamped after the sampler had seen it back and the next run had begun)
            near = [q for t, q in list(p.measured) if abs(t - r.t_start) <= STAMP_LAG]
            anchor = _deg_list(before[-1].get("pick_anchor_deg", "")) if before else None
            reported = _deg_list(after[0].get("last_pick_configuration_deg", "")) if after else None
            if anchor is not None:  # a kept pick keeps the envelope of the run that left it (a sweep's: 25 deg)
                r.amplitude_deg = max(r.amplitude_deg, self.anchor_amplitude.get(_pick_key(anchor), 0.0))
            if reported is not None:
                self.anchor_amplitude[_pick_key(reported)] = r.amplitude_deg
            self._check_envelope(r, q_start, anchor, reported, measured, commanded, near)

    def _check_envelope(self, r: SamplerRun, q_start, anchor, reported, measured: list, commanded: list,
                        near: list = ()) -> None:
        starts = [x for x in (q_start, anchor, *near) if x is not None]
        center = reported if reported is not None else q_start
        if center is None:
            return
        if reported is not None and starts and min(np.max(np.abs(reported - s)) for s in starts) > np.radians(1.0):
            self.violation("envelope", f"~/{r.kind}: the reported pick configuration "
                                       f"{np.round(np.degrees(reported), 2)} deg is neither where the arm was at the "
                                       f"start {None if q_start is None else np.round(np.degrees(q_start), 2)} nor "
                                       f"the kept pick {None if anchor is None else np.round(np.degrees(anchor), 2)}",
                           "payload_sampler")
        limit = np.radians(r.amplitude_deg + ENVELOPE_MARGIN_DEG)
        for what, rows in (("commanded", commanded), ("measured", measured)):
            if not rows:
                continue
            dev = np.abs(np.asarray([q for _, q, _ in rows]) - center)
            worst = np.unravel_index(int(np.argmax(dev)), dev.shape)
            if dev[worst] > limit:
                t, _, sender = rows[worst[0]]
                self.violation("envelope", f"~/{r.kind} ({r.t_end - r.t_start:.1f} s, {r.outcome[:90]!r}): a {what} "
                                           f"position{' from ' + sender if sender else ''} {t - r.t_start:.2f} s "
                                           f"after the start is {np.degrees(dev[worst]):.2f} deg from the pick "
                                           f"configuration at joint {worst[1] + 1} (limit "
                                           f"±{r.amplitude_deg + ENVELOPE_MARGIN_DEG:.1f} deg; pick "
                                           f"{np.round(np.degrees(center), 2)} deg)", "payload_sampler")

    # --- after the schedule ------------------------------------------------------------------------
    def drain(self) -> None:
        self.step, self.event = len(self.schedule), "drain: ~/cancel, then every pending call answered"
        self.call("payload_sampler/cancel")
        _wait(lambda: not self.pending, SERVICE_LIMIT + 1.0, self.check)
        self.check()

    def clean_estimate(self) -> None:
        """The user's sequence on a clean graph: restore, forget the old pick, back to Q0, unloaded
        capture, ~/record_reference, grasp, ~/sample; the estimate within MASS_TOL / COM_TOL."""
        p = self.probe
        self._final("restore the description and the parameters")
        p.pub_description.publish(String(data=p.description))
        mode = {("payload_sampler", "mode"): "static" if self.final_mode == "static" else "auto"}
        for (node, name), value in {**DEFAULTS, **FINAL_TIMEOUTS, **mode}.items():
            self._sync(self.set_param(node, name, value, True), f"{node} {name}")
        for srv in ("payload_estimator/released", "sim_node/detach_payload", "payload_estimator/reset",
                    "payload_estimator/clear_captures", "payload_sampler/forget_pick"):
            self._sync(self.call(srv), srv)
        self._final("move to the pick configuration")
        _wait(lambda: not p.collision, 10.0, self.check)  # a release reads as a collision: let it clear
        time.sleep(2.5)
        p.move_to(Q0, 3.0)
        if not _wait(lambda: p.q is not None and np.max(np.abs(p.q - Q0)) < np.radians(0.3), 20.0, self.check):
            self.violation("final", f"the arm did not reach the pick configuration: at "
                                    f"{None if p.q is None else np.round(np.degrees(p.q), 2)} deg", "collision_monitor")
            return
        _wait(lambda: not p.collision, 10.0, self.check)
        time.sleep(2.5)  # a released collision's resume delay
        self._final("unloaded capture at the pick configuration")
        res = self._retry("payload_estimator/capture_unloaded", 15.0)
        if not res.success:
            return self.violation("final", f"capture_unloaded refused at rest: {res.message}", "payload_estimator")
        if self.final_mode == "dynamic":
            self._final("~/record_reference (unloaded)")
            ok, messages = self._attempts("payload_sampler/record_reference")
            if not ok:
                return self.violation("final", f"record_reference failed twice on a clean graph: {messages}",
                                      "payload_sampler")
        self._final("grasp (announced) and ~/sample")
        self._sync(self.call("payload_estimator/grasped"), "grasped")
        self._sync(self.call("sim_node/attach_payload"), "attach")
        time.sleep(0.5)
        n0 = p.estimates
        ok, messages = self._attempts("payload_sampler/sample")
        if not ok:
            return self.violation("final", f"sample failed twice on a clean graph: {messages}", "payload_sampler")
        res = Trigger.Response(success=True, message=messages[-1])
        if not _wait(lambda: p.estimates > n0, 5.0, self.check):
            return self.violation("final", "no payload/estimate after a successful sample", "payload_estimator")
        m = re.search(r"mass ([0-9.]+) kg.*?CoM \[([^\]]+)\] mm", res.message)
        if m is None:
            return self.violation("final", f"sample answered without a mass and CoM: {res.message}", "payload_sampler")
        mass, com = float(m.group(1)), np.array([float(x) for x in m.group(2).split(",")]) * 1e-3
        self.final_estimate = (mass, com, res.message)
        if abs(mass - MASS) > MASS_TOL * MASS or np.linalg.norm(com - COM) > COM_TOL:
            self.violation("final", f"estimate {mass:.4f} kg, CoM {np.round(com * 1e3, 1)} mm is not within "
                                    f"{MASS_TOL:.0%} / {COM_TOL * 1e3:.0f} mm of {MASS} kg, {COM * 1e3} mm: "
                                    f"{res.message}", "payload_estimator")

    def _final(self, what: str) -> None:
        self.step += 1
        self.event = f"final: {what}"

    def _sync(self, fut, what: str):
        """Wait for an answer (the invariants checked meanwhile); None if there is none."""
        _wait(fut.done, SERVICE_LIMIT, self.check)
        self.check()
        return fut.result() if fut.done() else None

    def _attempts(self, srv: str, n: int = 2) -> tuple[bool, list[str]]:
        """Call ``srv`` until it succeeds, at most ``n`` times (a user retries a run that a loaded machine's
        stream stall aborted); (succeeded, every answer)."""
        messages = []
        for _ in range(n):
            res = self._sync(self.call(srv), srv)
            messages.append("no answer" if res is None else res.message)
            if res is not None and res.success:
                return True, messages
            _wait(lambda: self.probe.sampler_values().get("busy") == "False", 10.0, self.check)
            time.sleep(1.0)
        return False, messages

    def _retry(self, srv: str, timeout: float):
        end, res = time.monotonic() + timeout, None
        while time.monotonic() < end:
            res = self._sync(self.call(srv), srv)
            if res is not None and res.success:
                return res
            time.sleep(0.3)
        return res or Trigger.Response(success=False, message="no answer")


def _exception(text: str) -> str:
    """The exception line of the traceback ``text`` starts with, and its innermost frame in the package."""
    lines = text.splitlines()
    end = next((k for k in range(1, len(lines)) if lines[k] and not lines[k][0].isspace()), len(lines) - 1)
    frames = [k for k in range(1, end) if lines[k].lstrip().startswith("File ")]
    ours = [k for k in frames if "payload_estimation/" in lines[k]] or frames
    where = f"{lines[ours[-1]].strip()}: {lines[ours[-1] + 1].strip()}" if ours else ""
    return f"{lines[end].strip()} ({where})"


def _node_of(name: str) -> str:
    return {"payload_sampler": "sampler", "payload_estimator": "estimator", "collision_monitor": "monitor",
            "sim_node": "sim"}.get(name.split("/")[0], "")


def _wait(pred: Callable[[], bool], timeout: float, tick: Callable[[], None], period: float = 0.05) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if pred():
            return True
        tick()
        time.sleep(period)
    return pred()


def _die_with_parent() -> None:
    """In a child before exec: SIGTERM when the test process dies (no orphaned nodes)."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)
    except Exception:  # noqa: BLE001 - not Linux
        pass


def main(argv: list[str] | None = None) -> int:
    import argparse

    ap = argparse.ArgumentParser(description="Run one chaos seed against the real nodes (see the module docstring).")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--duration", type=float, default=60.0)
    ap.add_argument("--final", choices=("static", "dynamic"), default="static",
                    help="the clean run after the schedule: static sample, or record_reference + dynamic sample")
    a = ap.parse_args(argv)
    from payload_estimation.ros.domain import isolate

    isolate()
    run = ChaosRun(a.seed, a.duration, final_mode=a.final)
    violations = run.run()
    print(run.report())
    return 1 if violations else 0


if __name__ == "__main__":
    sys.exit(main())
