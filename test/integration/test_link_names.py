"""One link naming (issue 30 item 6, issue 31): the link a collision_monitor contact report names is a name
sim_node's ~/apply_wrench takes. Real nodes in-process over DDS (sim_node and collision_monitor on a shipped DH
robot file: its links are <robot>_dh_frame_1..7)."""

import threading

import numpy as np
import pytest
from geometry_msgs.msg import WrenchStamped
from rcl_interfaces.msg import Log
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node
from rclpy.parameter import Parameter
from rclpy.qos import QoSProfile
from ros_helpers import wait_for
from sensor_msgs.msg import JointState

from payload_estimation.collision.geometry import capsule_geometry, push_point
from payload_estimation.model.robot_file import load_robot
from payload_estimation.ros.monitor_node import CollisionMonitorNode
from payload_estimation.ros.qos import COMMAND_QOS
from payload_estimation.ros.sim_node import SimNode
from payload_estimation.ros.spin_thread import SpinThread
from payload_estimation.sim import link_names

# Real DDS, in-process nodes, wall-clock timeouts: on a loaded 2-core machine a run can miss a deadline.
pytestmark = pytest.mark.flaky(reruns=2, reruns_delay=2)

NS = "/link_names"


class Probe(Node):
    """Records the monitor's contact reports, /rosout and whether joint_states flow; pushes on sim_node."""

    def __init__(self):
        super().__init__("link_probe")
        self.lock = threading.Lock()
        self.contacts: list[WrenchStamped] = []
        self.logs: list[str] = []
        self.states = 0
        self.create_subscription(WrenchStamped, "collision_monitor/contact_wrench", self.contacts.append, 10)
        self.create_subscription(Log, "/rosout", lambda m: self.logs.append(m.msg), QoSProfile(depth=100))
        self.create_subscription(JointState, "joint_states", self._on_state, 10)
        self.wrench = self.create_publisher(WrenchStamped, "sim_node/apply_wrench", COMMAND_QOS)

    def _on_state(self, _msg) -> None:
        self.states += 1

    def push(self, frame: str, force, torque) -> None:
        w = WrenchStamped()
        w.header.frame_id = frame
        w.wrench.force.x, w.wrench.force.y, w.wrench.force.z = (float(x) for x in force)
        w.wrench.torque.x, w.wrench.torque.y, w.wrench.torque.z = (float(x) for x in torque)
        self.wrench.publish(w)

    def logged(self, text: str) -> bool:
        return any(text in s for s in list(self.logs))


@pytest.mark.parametrize("robot", ["lwr4", "iiwa14"])
def test_the_link_a_contact_report_names_is_one_sim_node_pushes_on(ros, robot):
    desc = load_robot(robot)
    names = link_names(desc)
    assert names[3] == f"{robot}_dh_frame_4"  # the model's names, not sim_node's former link_1..link_7 only
    common = [Parameter("robot", value=robot)]
    sim = SimNode(parameter_overrides=common + [Parameter("rate_hz", value=500.0),
                                                Parameter("contact_duration", value=0.3)])
    monitor = CollisionMonitorNode(parameter_overrides=common + [Parameter("use_sim_time", value=True)])
    probe = Probe()
    spin = SpinThread(SingleThreadedExecutor(), sim, monitor, probe)
    try:
        assert wait_for(lambda: probe.states > 200, 30.0), "no joint_states"
        # a push on link 4's surface (the generic name): F at p is F plus p x F at the link frame's origin
        force = np.array([60.0, 60.0, 0.0])
        point = push_point(capsule_geometry(desc).capsules[3], force)
        probe.push("link_4", force, np.cross(point, force))
        assert wait_for(lambda: probe.contacts, 15.0), "the monitor reported no contact"
        reported = probe.contacts[-1]
        name = reported.header.frame_id
        assert name in names, (name, names)
        # that name, fed back as it came, is applied (sim_node logs 'wrench on <name> at t=...')
        w = reported.wrench
        probe.push(name, [w.force.x, w.force.y, w.force.z], [w.torque.x, w.torque.y, w.torque.z])
        assert wait_for(lambda: probe.logged(f"wrench on {name} at t="), 10.0), [s for s in probe.logs if "wrench" in s]
        assert not probe.logged(f"unknown link '{name}'")
        # anything else is refused with the names sim_node takes
        probe.push("tool0", [1.0, 0.0, 0.0], [0.0, 0.0, 0.0])
        assert wait_for(lambda: probe.logged("unknown link 'tool0'"), 10.0)
        refusal = next(s for s in probe.logs if "unknown link 'tool0'" in s)
        assert all(n in refusal for n in names) and "link_1..link_7" in refusal, refusal
    finally:
        sim.stop()
        spin.stop()
        for node in (sim, monitor, probe):
            node.destroy_node()
