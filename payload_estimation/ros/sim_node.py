"""``sim_node``: the MuJoCo simulated torque-sensing arm as a ROS 2 node; translation only, the rules
(stepping, pacing, stamps and stream faults, contacts, payload) are in :class:`sim.driver.SimDriver`.

Publishes ``joint_states`` (reliable depth 10 like joint_state_broadcaster; effort = measured link-side
joint torque; stamp = sim time) at ``rate_hz``, ``/clock`` with a message at most every
1/``clock_rate_hz`` s of sim time, ``~/true_payload`` (InertiaStamped, latched; mass 0 = none; CoM and
inertia about the CoM in the payload frame) and, when ``robot`` names a robot, its URDF on
``robot_description`` (a URDF file's own text; a DH robot as :func:`model.urdf.to_urdf`); with an empty
``robot`` it simulates what arrives on ``robot_description``. Follows ``joint_trajectory`` (joints by
name; replaces the running trajectory from the current state; a violation is rejected and logged) as
joint_trajectory_controller interpolates it: linear between points with positions only, cubic with velocities,
quintic with accelerations too (:mod:`sim.trajectory`).
``~/apply_wrench`` (WrenchStamped): ``header.frame_id`` = a link by the model's name, as contact reports
name it (:mod:`sim.links`), or ``link_1``..``link_n``; force and torque in that link's axes at its origin
for ``contact_duration`` s, on arrival or at ``header.stamp`` (sim time) when that lies ahead.
Services (std_srvs/Trigger): ``~/attach_payload`` / ``~/detach_payload`` (the ``payload_*`` parameters),
the stream faults ``~/fault_future_stamp``, ``~/fault_gap``, ``~/fault_restart`` (docs/ros_interface.md).
The start pose is ``initial_positions``, by default the robot's documented bent pose (``sim.start_pose``).
The node defines sim time: it does not itself follow ``/clock``.
"""

from __future__ import annotations

import sys
import threading
from array import array
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

from ..errors import PayloadEstimationError
from ..model.parameters import vec6_from_sym
from ..model.urdf import to_urdf
from ..payload.estimate import PayloadEstimate
from ..sim import SimDriver, driver_config, payload_body
from ..sim.driver import FAULTS, Contact
from .messages import MessageError, estimate_to_msg, sec_to_time, time_to_sec, trajectory_from_msg
from .node_support import StatusReporter
from .parameters import Param, ParameterError, ParameterTable
from .qos import COMMAND_QOS, LATCHED_QOS
from .robot_model_source import RobotModelSource

STATE_QOS = QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=10, reliability=ReliabilityPolicy.RELIABLE)
"""joint_states QoS: reliable (best-effort subscribers match it too), like joint_state_broadcaster."""


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
    Param("initial_positions", [0.0], "rad, start configuration; [0.0]: the robot's documented bent start pose "
          "(lwr4: [10, 40, -5, -70, 15, 50, 20] deg, iiwa14 and other 7-joint arms: [-10, 35, 5, -75, -10, 55, 15] "
          "deg, the demo's pick configurations), not the stretched-up zeros where the payload's mass does not show "
          "at rest and dynamic sampling must tilt first", read_only=True),
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
        self.driver: SimDriver | None = None
        self.desc = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.pub_state = self.create_publisher(JointState, "joint_states", STATE_QOS)
        self.pub_clock = self.create_publisher(Clock, "/clock", STATE_QOS)
        self.pub_payload = self.create_publisher(InertiaStamped, "~/true_payload", LATCHED_QOS)
        self.create_subscription(JointTrajectory, "joint_trajectory", self._on_trajectory, COMMAND_QOS)
        self.create_subscription(WrenchStamped, "~/apply_wrench", self._on_wrench, COMMAND_QOS)
        self.create_service(Trigger, "~/attach_payload", self._on_attach)
        self.create_service(Trigger, "~/detach_payload", self._on_detach)
        for fault in FAULTS:  # stream faults, as real drivers produce them
            self.create_service(Trigger, f"~/fault_{fault}", lambda req, res, f=fault: self._on_fault(f, res))
        robot = self.values["robot"]
        if robot:
            self.pub_description = self.create_publisher(String, "robot_description", LATCHED_QOS)
        self.status = StatusReporter(self, "simulation", self._snapshot)
        self.model = RobotModelSource(self, self.values, self._start)
        if robot:  # the model this node simulates, for nodes that take it from the topic
            path = Path(robot)
            text = path.read_text() if path.suffix.lower() in (".urdf", ".xml") else to_urdf(self.desc)
            self.pub_description.publish(String(data=text))

    @property
    def arm(self):
        """The simulated arm (None before a robot model)."""
        return None if self.driver is None else self.driver.arm

    def _start(self, desc) -> None:
        """Build the driver for ``desc`` and start the physics thread (once)."""
        if self.driver is not None:
            raise ParameterError("sim_node simulates the first robot model it got; restart it for another one")
        cfg = driver_config(self.values, desc)
        self.desc, self.driver = desc, SimDriver(desc, cfg)
        self.joint_names = list(cfg.joint_names)
        self._msg = JointState(name=list(cfg.joint_names))
        self._clock_msg = Clock()
        self._publish_payload()
        self._thread = threading.Thread(target=self._run, name="sim_physics", daemon=True)
        self._thread.start()
        dt = cfg.sim.dt
        self.get_logger().info(
            f"simulating '{desc.name}' ({desc.n} joints {self.joint_names}) dt={dt} s, joint_states at "
            f"{1.0 / (cfg.steps_per_message * dt):.0f} Hz (sim time), real_time_factor={cfg.real_time_factor}; "
            f"start: {cfg.start}; links for ~/apply_wrench: {', '.join(self.driver.link_names)} (or link_k)")
        if cfg.start_warning:
            self.get_logger().warning(f"start pose: {cfg.start_warning}")

    def _snapshot(self) -> tuple[int, str, dict]:
        if self.driver is None:
            return DiagnosticStatus.ERROR, f"not simulating: no robot model ({self.model.error})", {}
        body = self.arm.true_payload
        return DiagnosticStatus.OK, f"simulating {self.desc.name}", {
            "sim_time_s": self.arm.time, "published": self.driver.published,
            "payload_mass": 0.0 if body is None else body.mass, "pending_contacts": self.driver.pending_contacts}

    # --- physics thread ----------------------------------------------------------------------------
    def _run(self) -> None:
        try:
            self.driver.run(self._stop, self._publish_state, self._log_contact,
                            lambda text: self.get_logger().warning(text, throttle_duration_sec=10.0))
        except Exception as exc:  # noqa: BLE001 - the thread must not die silently while ROS runs
            if self.context.ok() and not self._stop.is_set():
                self.get_logger().fatal(f"physics loop stopped: {exc!r}")
                raise

    def _publish_state(self, s, stamp) -> None:
        """1 kHz: the message and the /clock message are reused, their stamps set in place (sec_to_time built two
        rclpy Time objects per sample: ~25 µs of the physics thread's 1 ms, issue 48); the arrays go in as
        array.array from the bytes (the generated setter checks a list element by element)."""
        msg = self._msg
        st = msg.header.stamp
        st.sec, st.nanosec = divmod(round(stamp.t * 1e9), 1_000_000_000)  # as sec_to_time: the nearest nanosecond
        msg.position, msg.velocity, msg.effort = _doubles(s.q), _doubles(s.dq), _doubles(s.tau)
        self.pub_state.publish(msg)
        if stamp.clock:
            c = self._clock_msg.clock
            c.sec, c.nanosec = st.sec, st.nanosec
            self.pub_clock.publish(self._clock_msg)

    def _log_contact(self, c: Contact | str) -> None:
        if isinstance(c, str):
            self.get_logger().error(f"apply_wrench rejected: {c}")
            return
        self.get_logger().info(f"wrench on {c.name} at t={c.at:.3f} s for {c.duration} s: force {c.force} N, "
                               f"torque {c.torque} N m (link axes)")

    def _on_fault(self, fault: str, response):
        if self.driver is None:
            response.success, response.message = False, f"no robot model ({self.model.error})"
            return response
        response.success, response.message = True, self.driver.inject_fault(fault)
        self.get_logger().warning(response.message)
        return response

    # --- callbacks ---------------------------------------------------------------------------------
    def _on_trajectory(self, msg: JointTrajectory) -> None:
        if self.driver is None:
            self.get_logger().error(f"joint_trajectory rejected: no robot model ({self.model.error})",
                                    throttle_duration_sec=2.0)
            return
        try:
            times, positions = trajectory_from_msg(msg, self.joint_names)
            velocities = _field_by_name(msg, self.joint_names, "velocities")
            accelerations = _field_by_name(msg, self.joint_names, "accelerations")
            self.driver.set_trajectory(list(zip(times, positions, velocities, accelerations)))
        except PayloadEstimationError as exc:
            self.get_logger().error(f"joint_trajectory rejected: {exc}")
            return
        self.get_logger().debug(f"joint_trajectory accepted: {len(times)} point(s), {times[-1]:.3f} s")

    def _on_wrench(self, msg: WrenchStamped) -> None:
        """Apply a contact now, or at ``header.stamp`` (sim time) when that lies in the future."""
        if self.driver is None:
            self.get_logger().error(f"apply_wrench rejected: no robot model ({self.model.error})")
            return
        w = msg.wrench
        try:
            applied = self.driver.push(msg.header.frame_id, [w.force.x, w.force.y, w.force.z],
                                       [w.torque.x, w.torque.y, w.torque.z], time_to_sec(msg.header.stamp),
                                       float(self.values["contact_duration"]))
        except PayloadEstimationError as exc:
            self.get_logger().error(f"apply_wrench rejected: {exc}")
            return
        if applied is not None:
            self._log_contact(applied)

    def _on_attach(self, request, response):
        if self.driver is None:
            response.success, response.message = False, f"no robot model ({self.model.error})"
            return response
        v = self.values
        try:
            body = payload_body(v["payload_mass"], v["payload_com"], v["payload_inertia"])
            self.driver.attach(body)
        except PayloadEstimationError as exc:
            response.success, response.message = False, f"payload not attached: {exc}"
            self.get_logger().error(response.message)
            return response
        self._publish_payload()
        response.success = True
        response.message = f"attached {body.mass} kg, CoM {body.com.tolist()} m in {self.desc.payload_frame_name}"
        self.get_logger().info(response.message)
        return response

    def _on_detach(self, request, response):
        if self.driver is None:
            response.success, response.message = False, f"no robot model ({self.model.error})"
            return response
        had = self.driver.detach()
        self._publish_payload()
        response.success = True
        response.message = "payload detached" if had else "no payload was attached"
        return response

    def _publish_payload(self) -> None:
        b = self.arm.true_payload
        est = PayloadEstimate(0.0, np.zeros(3)) if b is None else PayloadEstimate(
            float(b.mass), np.asarray(b.com, float), vec6_from_sym(b.inertia_com))
        self.pub_payload.publish(estimate_to_msg(est, sec_to_time(self.arm.time), self.desc.payload_frame_name))

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


def _doubles(v: np.ndarray) -> array:
    """A float64 vector as array.array('d') (what a sequence<double> field keeps: its setter takes it whole)."""
    a = array("d")
    a.frombytes(np.ascontiguousarray(v, dtype=np.float64).tobytes())
    return a


# Alias accepted by bringup.
SimArmNode = SimNode


def _field_by_name(msg: JointTrajectory, joint_names, field: str) -> list[np.ndarray | None]:
    """Per point, its ``field`` ("velocities" or "accelerations") in model order, or None where the point does not
    give it: joint_trajectory_controller interpolates each segment by the fields both its ends carry."""
    pos = {name: i for i, name in enumerate(msg.joint_names)}
    idx = [pos[j] for j in joint_names]
    m = len(msg.joint_names)
    out: list[np.ndarray | None] = []
    for k, pt in enumerate(msg.points):
        values = getattr(pt, field)
        if len(values) == 0:
            out.append(None)
            continue
        if len(values) != m:
            raise MessageError(f"joint_trajectory point {k} has {len(values)} {field} for {m} joints")
        out.append(np.asarray(values, dtype=float)[idx])
    return out


def main(argv=None) -> int:
    from .bringup import run_node

    return run_node(SimNode, argv)


__all__ = ["SimNode", "SimArmNode", "STATE_QOS", "main"]

if __name__ == "__main__":
    sys.exit(main())
