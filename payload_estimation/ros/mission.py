"""A client node for scripted missions (the demo): records topics, calls services, injects contacts.

It is what a user's task code would do, over the public interface only: ``joint_states``,
``collision_monitor/*`` (residual, collision, contact, payload_lost, status), ``payload/estimate``,
``payload_estimator/online_estimate`` and ``payload_estimator/status``, the Trigger services and the simulator's
``sim_node/apply_wrench``. Times are node-clock seconds (sim time with ``use_sim_time``).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field

import numpy as np
import rclpy
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus
from geometry_msgs.msg import InertiaStamped, WrenchStamped
from rcl_interfaces.srv import GetParameters, SetParameters
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node
from rclpy.parameter import Parameter, parameter_value_to_python
from sensor_msgs.msg import JointState
from std_msgs.msg import Bool, String
from std_srvs.srv import Trigger
from trajectory_msgs.msg import JointTrajectory

from ..payload.estimate import PayloadEstimate
from .messages import clock_seconds, diagnostic_level, estimate_from_msg, sec_to_time, time_to_sec, trajectory_msg
from .qos import COMMAND_QOS, LATCHED_QOS, SENSOR_QOS
from .spin_thread import SpinThread


@contextmanager
def mission_client(joint_names: Sequence[str], monitors: Sequence[str] = ("collision_monitor",),
                   name: str = "mission_client") -> Iterator[MissionClient]:
    """rclpy initialised, a :class:`MissionClient` spinning in a background executor; all torn down after."""
    rclpy.init()
    client = MissionClient(joint_names, monitors, name)
    spin = SpinThread(SingleThreadedExecutor(), client)
    try:
        yield client
    finally:
        spin.stop()
        client.destroy_node()
        rclpy.try_shutdown()


_ERROR = diagnostic_level(DiagnosticStatus.ERROR)


class MissionError(RuntimeError):
    """A mission step failed (service down, timeout, refused request)."""


@dataclass
class Trace:
    """A growing time series: stamps (s) and one row of values per stamp."""

    t: list[float] = field(default_factory=list)
    rows: list[np.ndarray] = field(default_factory=list)

    def add(self, t: float, row: np.ndarray) -> None:
        self.t.append(t)
        self.rows.append(row)

    def arrays(self, t0: float = -np.inf, t1: float = np.inf) -> tuple[np.ndarray, np.ndarray]:
        n = min(len(self.t), len(self.rows))  # a sample may be half-appended by the executor thread
        t = np.asarray(self.t[:n])
        if n == 0:
            return t, np.zeros((0, 0))
        keep = (t >= t0) & (t <= t1)
        return t[keep], np.asarray(self.rows[:n])[keep]


class MissionClient(Node):
    """Records joint states, residuals and collision flags of any number of monitors."""

    def __init__(self, joint_names: Sequence[str], monitors: Sequence[str] = ("collision_monitor",),
                 name: str = "mission_client"):
        super().__init__(name, parameter_overrides=[Parameter("use_sim_time", value=True)])
        self.joint_names = list(joint_names)
        self._lock = threading.Lock()
        self.q = self.q_dot = self.tau = None
        self.states = {"q": Trace(), "dq": Trace(), "tau": Trace()}
        self.residuals = {m: Trace() for m in monitors}
        self.collisions: dict[str, list[tuple[float, bool]]] = {m: [] for m in monitors}
        self.contacts: dict[str, list[dict]] = {m: [] for m in monitors}
        """each monitor's ~/contact answers (JSON: stamp, summary, link, probability, force range, ...)."""
        self.lost: dict[str, list[dict]] = {m: [] for m in monitors}
        """each monitor's ~/payload_lost reports (JSON: verdict, time, detection_time, lost_mass, reason, ...)."""
        self.estimate = None
        self.estimates = 0
        """payload/estimate messages received so far (to wait for the next one)."""
        self.estimate_log: list[tuple[float, PayloadEstimate]] = []
        """every payload/estimate as (header stamp s, estimate)."""
        self.online: list[dict] = []
        """every payload_estimator/online_estimate (JSON: state, t, mass, com, gravity_covariance)."""
        self.truth: list[tuple[float, PayloadEstimate]] = []
        """sim_node/true_payload (MuJoCo's payload; mass 0 = none) as (header stamp s, payload): the reference."""
        self.estimator_status: dict[str, str] = {}
        self.status_log: dict[str, list[tuple[float, str, dict[str, str]]]] = {}
        """per node, every ~/status as (header stamp s, message, key -> value)."""
        self.create_subscription(JointState, "joint_states", self._on_js, SENSOR_QOS)
        self.create_subscription(InertiaStamped, "payload/estimate", self._on_estimate, LATCHED_QOS)
        for m in monitors:
            self.create_subscription(JointState, f"{m}/residual", lambda msg, m=m: self._on_residual(m, msg),
                                     SENSOR_QOS)
            self.create_subscription(Bool, f"{m}/collision", lambda msg, m=m: self._on_collision(m, msg),
                                     LATCHED_QOS)
            self.create_subscription(String, f"{m}/contact", lambda msg, m=m: self._on_contact(m, msg), LATCHED_QOS)
            self.create_subscription(String, f"{m}/payload_lost", lambda msg, m=m: self._on_lost(m, msg), LATCHED_QOS)
        self.create_subscription(DiagnosticArray, "payload_estimator/status", self._on_estimator_status, LATCHED_QOS)
        self.create_subscription(String, "payload_estimator/online_estimate", self._on_online, LATCHED_QOS)
        self.create_subscription(InertiaStamped, "sim_node/true_payload", self._on_truth, LATCHED_QOS)
        # every node's status level (a node without its robot model yet reports ERROR)
        self.levels: dict[str, int] = {}
        for node in ("payload_estimator", "payload_sampler", *monitors):
            self.create_subscription(DiagnosticArray, f"{node}/status",
                                     lambda msg, node=node: self._on_status(node, msg), LATCHED_QOS)
        self.pub_traj = self.create_publisher(JointTrajectory, "joint_trajectory", COMMAND_QOS)
        self.pub_wrench = self.create_publisher(WrenchStamped, "sim_node/apply_wrench", COMMAND_QOS)

    # --------------------------------------------------------------------- recording
    def now(self) -> float:
        return clock_seconds(self)

    def _index(self, names: Sequence[str]) -> list[int] | None:
        try:
            return [list(names).index(n) for n in self.joint_names]
        except ValueError:
            return None

    def _on_js(self, msg: JointState) -> None:
        idx = self._index(msg.name)
        if idx is None or len(msg.effort) != len(msg.name):
            return
        t = time_to_sec(msg.header.stamp)
        q = np.asarray(msg.position)[idx]
        dq = np.asarray(msg.velocity)[idx] if len(msg.velocity) == len(msg.name) else np.zeros(len(idx))
        tau = np.asarray(msg.effort)[idx]
        with self._lock:
            self.q, self.q_dot, self.tau = q, dq, tau
            self.states["q"].add(t, q)
            self.states["dq"].add(t, dq)
            self.states["tau"].add(t, tau)

    def _on_residual(self, monitor: str, msg: JointState) -> None:
        idx = self._index(msg.name)
        if idx is not None:
            with self._lock:
                self.residuals[monitor].add(time_to_sec(msg.header.stamp), np.asarray(msg.effort)[idx])

    def _on_collision(self, monitor: str, msg: Bool) -> None:
        self.collisions[monitor].append((self.now(), bool(msg.data)))

    def _on_contact(self, monitor: str, msg: String) -> None:
        with self._lock:
            self.contacts[monitor].append(json.loads(msg.data))

    def _on_lost(self, monitor: str, msg: String) -> None:
        with self._lock:
            self.lost[monitor].append(json.loads(msg.data))

    def _on_estimate(self, msg: InertiaStamped) -> None:
        self.estimate = estimate_from_msg(msg)
        self.estimates += 1
        with self._lock:
            self.estimate_log.append((time_to_sec(msg.header.stamp), self.estimate))

    def _on_truth(self, msg: InertiaStamped) -> None:
        with self._lock:
            self.truth.append((time_to_sec(msg.header.stamp), estimate_from_msg(msg)))

    def _on_online(self, msg: String) -> None:
        with self._lock:
            self.online.append(json.loads(msg.data))

    def _on_estimator_status(self, msg: DiagnosticArray) -> None:
        if msg.status:
            self.estimator_status = {kv.key: kv.value for kv in msg.status[0].values}

    def _on_status(self, node: str, msg: DiagnosticArray) -> None:
        if msg.status:
            st = msg.status[0]
            self.levels[node] = diagnostic_level(st.level)
            with self._lock:
                self.status_log.setdefault(node, []).append(
                    (time_to_sec(msg.header.stamp), st.message, {kv.key: kv.value for kv in st.values}))

    def nodes_ready(self, nodes: Sequence[str]) -> bool:
        """Every node in ``nodes`` has published a status below ERROR (robot model loaded, stream seen)."""
        return all(self.levels.get(n, _ERROR) < _ERROR for n in nodes)

    # --------------------------------------------------------------------- actions
    def wait_for(self, pred: Callable[[], bool], timeout: float, what: str) -> None:
        """Wait (wall clock) until ``pred()``; raise MissionError naming ``what`` on timeout."""
        end = time.monotonic() + timeout
        while not pred():
            if time.monotonic() > end:
                raise MissionError(f"timed out after {timeout:.0f} s waiting for {what}")
            time.sleep(0.01)

    def sleep_sim(self, seconds: float, wall_timeout: float = 120.0) -> None:
        """Let ``seconds`` of node-clock (sim) time pass."""
        t0 = self.now()
        self.wait_for(lambda: self.now() - t0 >= seconds, wall_timeout, f"{seconds} s of sim time")

    def _request(self, srv_type, service: str, request, timeout: float):
        """Call ``service``; raise MissionError if unavailable or unanswered within ``timeout`` s (wall)."""
        cli = self.create_client(srv_type, service)
        try:
            if not cli.wait_for_service(timeout_sec=15.0):
                raise MissionError(f"service {service} is not available")
            fut = cli.call_async(request)
            self.wait_for(fut.done, timeout, f"an answer from {service}")
            return fut.result()
        finally:
            self.destroy_client(cli)

    def call(self, service: str, timeout: float = 60.0) -> Trigger.Response:
        """Call a std_srvs/Trigger service; raise MissionError if unavailable or unanswered."""
        return self._request(Trigger, service, Trigger.Request(), timeout)

    def call_retrying(self, service: str, timeout: float = 60.0, say: Callable[[str], None] | None = None
                      ) -> Trigger.Response:
        """:meth:`call` a sampler service; an answer that failed for a real gap in joint_states
        (:func:`sampling.sampler.stream_fault`) and that the sampler did not retry already is called once more, and
        ``say`` is told why. The answer of the second call says what ended the first."""
        from ..sampling.sampler import RETRIED_NOTE, stream_fault

        res = self.call(service, timeout)
        why = "" if res.success or RETRIED_NOTE in res.message else stream_fault(res.message)
        if not why:
            return res
        if say is not None:
            say(f"{service} failed ({why}): calling it once more")
        first = res.message
        res = self.call(service, timeout)
        res.message = f"{res.message} [{RETRIED_NOTE}: the first call failed: {first}]"
        return res

    def set_parameters(self, node: str, values: dict[str, object], timeout: float = 15.0) -> None:
        """Set parameters of ``node`` as ``ros2 param set`` does; raise MissionError naming a refused one."""
        req = SetParameters.Request(parameters=[Parameter(k, value=v).to_parameter_msg() for k, v in values.items()])
        res = self._request(SetParameters, f"{node}/set_parameters", req, timeout)
        for name, r in zip(values, res.results):
            if not r.successful:
                raise MissionError(f"{node} refused {name} = {values[name]!r}: {r.reason}")

    def get_parameters(self, node: str, names: Sequence[str], timeout: float = 15.0) -> dict[str, object]:
        """Parameters of ``node`` as ``ros2 param get`` reads them (name -> Python value)."""
        res = self._request(GetParameters, f"{node}/get_parameters", GetParameters.Request(names=list(names)), timeout)
        if len(res.values) != len(names):
            raise MissionError(f"{node} answered {len(res.values)} of the parameters {list(names)}")
        return {n: parameter_value_to_python(v) for n, v in zip(names, res.values)}

    def call_until_success(self, service: str, timeout: float = 15.0) -> Trigger.Response:
        """Call ``service`` until it succeeds (e.g. a node still waiting for its first message)."""
        end = time.monotonic() + timeout
        while True:
            res = self.call(service)
            if res.success or time.monotonic() > end:
                return res
            time.sleep(0.2)

    def announce(self, service: str, timeout: float = 30.0) -> str:
        """Call ``service`` (``payload_estimator/grasped`` or ``released``) until it succeeds and its answer no longer
        says that no collision monitor got the announcement: on a loaded machine DDS discovery can lag the nodes'
        readiness, and an announcement the monitor misses leaves it to stop the arm at the grasp (and to call a
        later drop a collision). Returns the answer; raises MissionError after ``timeout`` s (wall)."""
        from .estimator_node import NO_LISTENER

        end = time.monotonic() + timeout
        while True:
            res = self.call(service)
            if res.success and NO_LISTENER not in res.message:
                return res.message
            if time.monotonic() > end:
                raise MissionError(f"{service}: after {timeout:.0f} s the answer still says: {res.message}")
            time.sleep(0.2)

    def send_trajectory(self, positions: np.ndarray, times: Sequence[float]) -> None:
        """Publish a joint trajectory (positions (k, n) rad at ``times`` s from start), at rest at every waypoint:
        the velocities (0) are sent, so joint_trajectory_controller interpolates by cubics, not linearly with
        velocity steps (positions alone, which a real JTC and sim_node interpolate linearly)."""
        p = np.atleast_2d(positions)
        self.pub_traj.publish(trajectory_msg(self.joint_names, p, list(times), velocities=np.zeros_like(p)))

    def push(self, link: str, force: Sequence[float], delay: float = 0.1,
             point: Sequence[float] | None = None) -> float:
        """Schedule a contact force (N, ``link`` axes) at ``point`` (m, ``link`` frame; default its origin) in
        the simulator, ``delay`` s of sim time from now; returns the sim time at which it is applied."""
        w = WrenchStamped()
        w.header.frame_id = link
        t = self.now() + delay
        w.header.stamp = sec_to_time(t)
        w.wrench.force.x, w.wrench.force.y, w.wrench.force.z = (float(f) for f in force)
        if point is not None:  # the wrench is applied at the frame origin: F at p is F plus p x F there
            w.wrench.torque.x, w.wrench.torque.y, w.wrench.torque.z = (float(x) for x in np.cross(point, force))
        self.pub_wrench.publish(w)
        return t

    def snapshot(self) -> dict[str, tuple[np.ndarray, np.ndarray]]:
        """Copies of the recorded joint-state traces."""
        with self._lock:
            return {k: v.arrays() for k, v in self.states.items()}

    def residual_arrays(self, monitor: str) -> tuple[np.ndarray, np.ndarray]:
        """Copy of the recorded residual of ``monitor`` (stamps s, residual N m)."""
        with self._lock:
            return self.residuals[monitor].arrays()
