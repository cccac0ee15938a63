"""``sim_node``: the MuJoCo simulated torque-sensing arm as a ROS 2 node (thin; logic in ``sim/``).

Publishes
  ``joint_states`` (sensor_msgs/JointState, reliable depth 10 like joint_state_broadcaster; name,
  position, velocity, effort = measured link-side joint torque; stamp = sim time) at ``rate_hz``;
  ``/clock`` (rosgraph_msgs/Clock) with a joint_states message at most every 1/``clock_rate_hz`` s
  of sim time (default 250 Hz: 4 ms timer granularity for nodes on sim time, a third less CPU per
  message at 1 kHz; set it to ``rate_hz`` for a clock tick with every message);
  ``~/true_payload`` (geometry_msgs/InertiaStamped, transient-local; mass 0 = no payload; CoM and
  inertia about the CoM in the payload frame).
Subscribes
  ``joint_trajectory`` (trajectory_msgs/JointTrajectory): joints matched by name (any order, extra
  joints ignored); replaces the running trajectory and starts now from the current state (header
  stamp ignored); a missing joint, a limit or velocity-limit violation is rejected and logged;
  ``~/apply_wrench`` (geometry_msgs/WrenchStamped): ``header.frame_id`` = ``link_1``..``link_n``;
  force and torque are given in that link frame's axes (ROS convention), converted to base axes when
  applied, at the link frame origin for ``contact_duration`` s; applied on arrival, or at
  ``header.stamp`` (sim time) when that lies in the future, so scripted contacts have exact times.
  ``robot_description`` (std_msgs/String, transient-local) with the URDF it simulates when the ``robot``
  parameter names one (a URDF file's own text; a DH robot as :func:`model.urdf.to_urdf`), so the other
  nodes can take their model from the topic as on a real robot; with an empty ``robot`` it subscribes
  to ``robot_description`` instead and simulates what arrives there.
Services
  ``~/attach_payload`` / ``~/detach_payload`` (std_srvs/Trigger): the ``payload_*`` parameters
  (mass kg, CoM m and inertia about the CoM [xx, xy, xz, yy, yz, zz] kg m^2 in the payload frame);
  ``payload_attached:=true`` starts with it attached.
  Stream faults, as real drivers produce them (for fault and chaos tests): ``~/fault_future_stamp``
  (the next joint_states message, and a /clock tick with it, stamped ``FAULT_FUTURE_S`` ahead),
  ``~/fault_gap`` (neither joint_states nor /clock for ``FAULT_GAP_S`` s of wall time; the physics
  goes on) and ``~/fault_restart`` (stamps and /clock start over from 0, as after a driver restart).

Physics runs in its own thread: ``round(1 / (rate_hz * dt))`` steps per message, paced to
``real_time_factor`` (0 = as fast as possible). The node defines sim time: it does not itself
follow ``/clock``.
"""

from __future__ import annotations

import sys
import threading
import time
from pathlib import Path

import numpy as np
from diagnostic_msgs.msg import DiagnosticStatus
from geometry_msgs.msg import InertiaStamped, WrenchStamped
from rclpy.node import Node
from rclpy.qos import HistoryPolicy, QoSProfile, ReliabilityPolicy
from rosgraph_msgs.msg import Clock
from sensor_msgs.msg import JointState
from std_msgs.msg import String
from std_srvs.srv import Trigger
from trajectory_msgs.msg import JointTrajectory

from ..model.joint_vectors import per_joint
from ..model.parameters import BodyInertia, sym_from_vec6
from ..model.urdf import to_urdf
from ..sim import SensorConfig, SimConfig, SimulatedArm
from .messages import MessageError, sec_to_time, time_to_sec, trajectory_from_msg
from .node_support import RobotModelSource, StatusReporter
from .parameters import Param, ParameterError, ParameterTable
from .qos import COMMAND_QOS, LATCHED_QOS

STATE_QOS = QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=10, reliability=ReliabilityPolicy.RELIABLE)
"""joint_states QoS: reliable (best-effort subscribers match it too), like joint_state_broadcaster."""

FAULT_FUTURE_S = 1000.0
"""s a ``~/fault_future_stamp`` message is stamped ahead of the stream."""
FAULT_GAP_S = 1.0
"""s (wall clock) of silence after ``~/fault_gap``."""



PARAMS = ParameterTable([
    Param("robot", "lwr4", "robot to simulate: a shipped robot (lwr4, iiwa14), a robot YAML or URDF file (its "
          "description is published on robot_description); empty = simulate what arrives on robot_description",
          read_only=True),
    Param("base_link", "", "first link of the chain in a URDF (empty: the root)", read_only=True),
    Param("tip_link", "", "last link of the chain in a URDF = payload frame (empty: the unique tip)", read_only=True),
    Param("joint_names", [""], "joint names to publish, in model order ([\"\"]: the model's)", read_only=True),
    Param("rate_hz", 1000.0, "joint_states rate (Hz of sim time)", low=0.0, high=10000.0, low_open=True,
          read_only=True),
    Param("clock_rate_hz", 250.0, "/clock rate (Hz of sim time)", low=0.0, high=10000.0, low_open=True,
          read_only=True),
    Param("real_time_factor", 1.0, "sim time per wall time (0: as fast as possible)", low=0.0, high=100.0,
          read_only=True),
    Param("dt", 0.001, "physics step (s)", low=0.0, high=0.01, low_open=True, read_only=True),
    Param("noise_std", [0.0], "N m, torque sensor noise (one value or one per joint)", low=0.0, high=100.0,
          min_items=1, read_only=True),
    Param("offset", [0.0], "N m, torque sensor offsets (one value or one per joint)", low=-1000.0, high=1000.0,
          min_items=1, read_only=True),
    Param("lowpass_hz", 0.0, "Hz, first-order low-pass of the torque sensor (0: none)", low=0.0, high=10000.0,
          read_only=True),
    Param("viscous", [0.0], "N m s/rad, viscous joint friction (motor side)", low=0.0, high=1000.0, min_items=1,
          read_only=True),
    Param("coulomb", [0.0], "N m, Coulomb joint friction (motor side)", low=0.0, high=1000.0, min_items=1,
          read_only=True),
    Param("sensor_sees_friction", False, "the torque sensor reads the friction too", read_only=True),
    Param("seed", 0, "random seed of noise and model error", low=0, high=2**31 - 1, read_only=True),
    Param("model_error", 0.0, "relative link-parameter error of the simulated (true) robot vs the model",
          low=0.0, high=0.5, read_only=True),
    Param("initial_positions", [0.0], "rad, start configuration ([0.0]: zeros clipped to the limits)",
          read_only=True),
    Param("payload_mass", 1.0, "kg, payload of ~/attach_payload", low=0.0, high=1000.0, low_open=True,
          applies="next ~/attach_payload"),
    Param("payload_com", [0.0, 0.0, 0.05], "m, its CoM in the payload frame", low=-10.0, high=10.0, min_items=3,
          applies="next ~/attach_payload"),
    Param("payload_inertia", [1e-3, 0.0, 0.0, 1e-3, 0.0, 1e-3], "kg m^2, its inertia about the CoM "
          "[xx, xy, xz, yy, yz, zz]", low=-100.0, high=100.0, min_items=6, applies="next ~/attach_payload"),
    Param("payload_attached", False, "start with the payload attached", read_only=True),
    Param("contact_duration", 0.2, "s, duration of an ~/apply_wrench contact", low=0.0, high=3600.0, low_open=True),
])


class SimNode(Node):
    """Simulated arm node; see the module docstring for the interface."""

    def __init__(self, node_name: str = "sim_node", **kwargs):
        super().__init__(node_name, **kwargs)
        self.values = PARAMS.declare(self, on_change=lambda names: self.values.update(PARAMS.values(self, names)))
        self.arm: SimulatedArm | None = None
        self.desc = None
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._pending: list[tuple[float, str, np.ndarray, np.ndarray]] = []  # scheduled contacts
        self.published = 0
        self.pub_state = self.create_publisher(JointState, "joint_states", STATE_QOS)
        self.pub_clock = self.create_publisher(Clock, "/clock", STATE_QOS)
        self.pub_payload = self.create_publisher(InertiaStamped, "~/true_payload", LATCHED_QOS)
        self.create_subscription(JointTrajectory, "joint_trajectory", self._on_trajectory, COMMAND_QOS)
        self.create_subscription(WrenchStamped, "~/apply_wrench", self._on_wrench, COMMAND_QOS)
        self.create_service(Trigger, "~/attach_payload", self._on_attach)
        self.create_service(Trigger, "~/detach_payload", self._on_detach)
        self._stamp_origin = 0.0  # s of sim time subtracted from the stamps (~/fault_restart)
        self._future_stamp = False  # the next message is stamped FAULT_FUTURE_S ahead
        self._gap_until = 0.0  # time.monotonic() until which nothing is published
        self.create_service(Trigger, "~/fault_future_stamp", self._on_fault_future)
        self.create_service(Trigger, "~/fault_gap", self._on_fault_gap)
        self.create_service(Trigger, "~/fault_restart", self._on_fault_restart)
        robot = self.values["robot"]
        if robot:
            self.pub_description = self.create_publisher(String, "robot_description", LATCHED_QOS)
        self.status = StatusReporter(self, "simulation", self._snapshot)
        self.model = RobotModelSource(self, self.values, self._start)
        if robot:  # the model this node simulates, for nodes that take it from the topic
            path = Path(robot)
            text = path.read_text() if path.suffix.lower() in (".urdf", ".xml") else to_urdf(self.desc)
            self.pub_description.publish(String(data=text))

    def _start(self, desc) -> None:
        """Build the simulated arm for ``desc`` and start the physics thread (once)."""
        if self.arm is not None:
            raise ParameterError("sim_node simulates the first robot model it got; restart it for another one")
        v, n = self.values, desc.n
        sensor = SensorConfig(
            noise_std=per_joint(v["noise_std"], n, "parameter 'noise_std'"),
            offset=per_joint(v["offset"], n, "parameter 'offset'"),
            lowpass_hz=float(v["lowpass_hz"]) or None,
            viscous=per_joint(v["viscous"], n, "parameter 'viscous'"),
            coulomb=per_joint(v["coulomb"], n, "parameter 'coulomb'"),
            sensor_sees_friction=bool(v["sensor_sees_friction"]))
        dt = float(v["dt"])
        cfg = SimConfig(dt=dt, seed=int(v["seed"]), model_error=float(v["model_error"]), sensor=sensor)
        q0 = np.asarray(v["initial_positions"], dtype=float)
        if q0.size == 1 and q0[0] == 0.0:
            q0 = np.clip(np.zeros(n), desc.limits.position[:, 0], desc.limits.position[:, 1])
        names = [s for s in v["joint_names"] if s] or list(desc.joint_names)
        if len(names) != n or len(set(names)) != n:
            raise ParameterError(f"joint_names: need {n} distinct names for robot '{desc.name}', got {names}")
        if self._payload_body_shape_error():
            raise ParameterError(self._payload_body_shape_error())
        self.joint_names = names
        self.real_time_factor = float(v["real_time_factor"])
        self.clock_period = 1.0 / float(v["clock_rate_hz"])
        self.steps_per_message = max(1, int(round(1.0 / (float(v["rate_hz"]) * dt))))
        self.contact_duration = float(v["contact_duration"])
        arm = SimulatedArm(desc, cfg)
        if v["payload_attached"]:
            arm.attach_payload(self._payload_body())
        arm.reset(q0)
        self.desc, self.arm = desc, arm
        self._next_clock = -np.inf
        self._msg = JointState()
        self._msg.name = list(self.joint_names)
        self._publish_payload()
        self._thread = threading.Thread(target=self._run, name="sim_physics", daemon=True)
        self._thread.start()
        self.get_logger().info(
            f"simulating '{desc.name}' ({n} joints {self.joint_names}) dt={dt} s, joint_states at "
            f"{1.0 / (self.steps_per_message * dt):.0f} Hz (sim time), real_time_factor={self.real_time_factor}")

    def _snapshot(self) -> tuple[int, str, dict]:
        if self.arm is None:
            return DiagnosticStatus.ERROR, f"not simulating: no robot model ({self.model.error})", {}
        body = self.arm.true_payload
        return DiagnosticStatus.OK, f"simulating {self.desc.name}", {
            "sim_time_s": self.arm.time, "published": self.published,
            "payload_mass": 0.0 if body is None else body.mass, "pending_contacts": len(self._pending)}

    def _payload_body_shape_error(self) -> str:
        if len(self.values["payload_com"]) != 3 or len(self.values["payload_inertia"]) != 6:
            return ("parameters 'payload_com' (3 values, m) and 'payload_inertia' (xx, xy, xz, yy, yz, zz about the "
                    "CoM, kg m^2) have the wrong length")
        return ""

    # --- physics loop ------------------------------------------------------------------------------
    def _run(self) -> None:
        try:
            self._loop()
        except Exception as exc:  # noqa: BLE001 - the thread must not die silently while ROS runs
            if self.context.ok() and not self._stop.is_set():
                self.get_logger().fatal(f"physics loop stopped: {exc!r}")
                raise

    def _loop(self) -> None:
        wall0, sim0 = None, self.arm.time
        while not self._stop.is_set():
            with self._lock:
                self.arm.step(self.steps_per_message)
                s = self.arm.state()
                due = [c for c in self._pending if c[0] <= s.t]
                self._pending = self._pending[len(due):]
            for _, link, f, mu in due:
                self._apply_wrench(link, f, mu)
            self._publish_state(s)
            if self.real_time_factor <= 0:
                time.sleep(0)  # as fast as possible, but let the executor's threads run
                continue
            now = time.perf_counter()
            if wall0 is None:  # pace from the first published message (start-up is slow)
                wall0, sim0 = now, s.t
                continue
            lag = now - (wall0 + (s.t - sim0) / self.real_time_factor)
            if lag < 0:
                time.sleep(-lag)
            elif lag > 0.5:  # cannot keep up: restart pacing instead of bursting to catch up
                achieved = (s.t - sim0) / max(now - wall0, 1e-9)
                if now - wall0 > 2.0:
                    # the average can still read 1.00 when one stall (a starved process) caused the lag
                    self.get_logger().warning(
                        f"simulation fell {lag:.2f} s behind real time (real_time_factor {self.real_time_factor}; "
                        f"{achieved:.2f} achieved over the last {now - wall0:.1f} s); pacing restarts from now. "
                        "Often: lower rate_hz, or run the other nodes in their own processes",
                        throttle_duration_sec=10.0)
                wall0, sim0 = now, s.t

    def _publish_state(self, s) -> None:
        if self._gap_until and time.monotonic() < self._gap_until:
            return
        future, self._future_stamp = self._future_stamp, False
        t = s.t - self._stamp_origin
        stamp = sec_to_time(t + FAULT_FUTURE_S if future else t)
        msg = self._msg
        msg.header.stamp = stamp
        msg.position = s.q.tolist()
        msg.velocity = s.dq.tolist()
        msg.effort = s.tau.tolist()
        self.pub_state.publish(msg)
        if future or t >= self._next_clock - 1e-9:
            self.pub_clock.publish(Clock(clock=stamp))
            self._next_clock = t + self.clock_period
        self.published += 1

    # --- stream faults -----------------------------------------------------------------------------
    def _on_fault_future(self, request, response):
        self._future_stamp = True
        response.success, response.message = True, f"the next joint_states message is stamped {FAULT_FUTURE_S} s ahead"
        self.get_logger().warning(response.message)
        return response

    def _on_fault_gap(self, request, response):
        self._gap_until = time.monotonic() + FAULT_GAP_S
        response.success, response.message = True, f"no joint_states nor /clock for {FAULT_GAP_S} s"
        self.get_logger().warning(response.message)
        return response

    def _on_fault_restart(self, request, response):
        with self._lock:
            self._stamp_origin = self.arm.time if self.arm is not None else 0.0
            self._next_clock = -np.inf
        response.success, response.message = True, "joint_states and /clock stamps start over from 0 s"
        self.get_logger().warning(response.message)
        return response

    # --- callbacks ---------------------------------------------------------------------------------
    def _on_trajectory(self, msg: JointTrajectory) -> None:
        if self.arm is None:
            self.get_logger().error(f"joint_trajectory rejected: no robot model ({self.model.error})",
                                    throttle_duration_sec=2.0)
            return
        try:
            times, positions = trajectory_from_msg(msg, self.joint_names)
            velocities = _velocities_by_name(msg, self.joint_names)
            points = [(t, q, None if velocities is None else velocities[k])
                      for k, (t, q) in enumerate(zip(times, positions))]
            with self._lock:
                self.arm.set_trajectory(points)
        except (MessageError, ValueError) as exc:
            self.get_logger().error(f"joint_trajectory rejected: {exc}")
            return
        self.get_logger().debug(f"joint_trajectory accepted: {len(times)} point(s), {times[-1]:.3f} s")

    def _on_wrench(self, msg: WrenchStamped) -> None:
        """Apply a contact now, or at ``header.stamp`` (sim time) when that lies in the future."""
        link = msg.header.frame_id
        f = np.array([msg.wrench.force.x, msg.wrench.force.y, msg.wrench.force.z])
        mu = np.array([msg.wrench.torque.x, msg.wrench.torque.y, msg.wrench.torque.z])
        if self.arm is None:
            self.get_logger().error(f"apply_wrench rejected: no robot model ({self.model.error})")
            return
        if link not in self.arm.link_names:
            self.get_logger().error(f"apply_wrench rejected: unknown link '{link}' (use one of {self.arm.link_names})")
            return
        at = time_to_sec(msg.header.stamp)
        with self._lock:
            if at > self.arm.time:
                self._pending.append((at, link, f, mu))
                self._pending.sort(key=lambda c: c[0])
                return
        self._apply_wrench(link, f, mu)

    def _apply_wrench(self, link: str, f: np.ndarray, mu: np.ndarray) -> None:
        try:
            with self._lock:
                r = self.arm.link_pose(link)[:3, :3]
                self.arm.apply_contact(link, r @ f, None, self.contact_duration, torque=r @ mu)
                t = self.arm.time
        except ValueError as exc:
            self.get_logger().error(f"apply_wrench rejected: {exc}")
            return
        self.get_logger().info(f"wrench on {link} at t={t:.3f} s for {self.contact_duration} s: force {f} N, "
                               f"torque {mu} N m (link axes)")

    def _payload_body(self) -> BodyInertia:
        v = self.values
        return BodyInertia(float(v["payload_mass"]), np.asarray(v["payload_com"], float),
                           sym_from_vec6(np.asarray(v["payload_inertia"], float)))

    def _on_attach(self, request, response):
        if self.arm is None:
            response.success, response.message = False, f"no robot model ({self.model.error})"
            return response
        try:
            with self._lock:
                self.arm.attach_payload(self._payload_body())
        except ValueError as exc:
            response.success, response.message = False, f"payload not attached: {exc}"
            self.get_logger().error(response.message)
            return response
        self._publish_payload()
        response.success = True
        body = self._payload_body()
        response.message = (f"attached {body.mass} kg, CoM {body.com.tolist()} m in {self.desc.payload_frame_name}")
        self.get_logger().info(response.message)
        return response

    def _on_detach(self, request, response):
        if self.arm is None:
            response.success, response.message = False, f"no robot model ({self.model.error})"
            return response
        with self._lock:
            had = self.arm.true_payload is not None
            self.arm.detach_payload()
        self._publish_payload()
        response.success = True
        response.message = "payload detached" if had else "no payload was attached"
        return response

    def _publish_payload(self) -> None:
        body = self.arm.true_payload
        msg = InertiaStamped()
        msg.header.stamp = sec_to_time(self.arm.time)
        msg.header.frame_id = self.desc.payload_frame_name
        if body is not None:
            i = body.inertia_com
            msg.inertia.m = float(body.mass)
            msg.inertia.com.x, msg.inertia.com.y, msg.inertia.com.z = (float(x) for x in body.com)
            msg.inertia.ixx, msg.inertia.ixy, msg.inertia.ixz = float(i[0, 0]), float(i[0, 1]), float(i[0, 2])
            msg.inertia.iyy, msg.inertia.iyz, msg.inertia.izz = float(i[1, 1]), float(i[1, 2]), float(i[2, 2])
        self.pub_payload.publish(msg)

    def stop(self) -> None:
        """Stop the physics thread (no more joint_states); idempotent."""
        self._stop.set()
        t = self._thread
        if t is not None and t.is_alive() and threading.current_thread() is not t:
            t.join(timeout=2.0)

    def destroy_node(self) -> None:
        try:
            self.stop()
        finally:
            super().destroy_node()


# Alias accepted by bringup.
SimArmNode = SimNode


def _velocities_by_name(msg: JointTrajectory, joint_names) -> np.ndarray | None:
    """(m, n) waypoint velocities in model order, or None if no point gives velocities."""
    if not any(len(pt.velocities) for pt in msg.points):
        return None
    pos = {name: i for i, name in enumerate(msg.joint_names)}
    idx = [pos[j] for j in joint_names]
    m = len(msg.joint_names)
    out = np.zeros((len(msg.points), len(joint_names)))
    for k, pt in enumerate(msg.points):
        if len(pt.velocities) == 0:
            continue
        if len(pt.velocities) != m:
            raise MessageError(f"joint_trajectory point {k} has {len(pt.velocities)} velocities for {m} joints")
        out[k] = np.asarray(pt.velocities, dtype=float)[idx]
    return out


def main(argv=None) -> int:
    from .bringup import run_node

    return run_node(SimNode, argv)


__all__ = ["SimNode", "SimArmNode", "STATE_QOS", "main"]

if __name__ == "__main__":
    sys.exit(main())
