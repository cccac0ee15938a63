"""The nodes take their model from ``robot_description`` (std_msgs/String, transient-local), as on a real robot.

Each real description in test/data/urdf is published by a test node the way robot_state_publisher
does; the estimator (``robot: ''``) says it waits until it arrives, then estimates a payload from a
static arm of that model, in that robot's tip frame. sim_node publishes the description it simulates.
"""

from __future__ import annotations

import os
import time

import numpy as np
import pytest
from data_paths import ROBOTS, urdf
from diagnostic_msgs.msg import DiagnosticArray
from geometry_msgs.msg import InertiaStamped
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node
from rclpy.parameter import Parameter
from ros_helpers import call_trigger, wait_for
from std_msgs.msg import String
from test_nodes import PAYLOAD, StaticArm

from payload_estimation.model.dynamics import RigidBodyDynamics
from payload_estimation.model.robot_file import load_robot, robot_from_description
from payload_estimation.ros.estimator_node import PayloadEstimatorNode
from payload_estimation.ros.qos import LATCHED_QOS
from payload_estimation.ros.sim_node import SimNode
from payload_estimation.ros.spin_thread import SpinThread
from payload_estimation.sampling.poses import PosePlanConfig, plan_poses

pytestmark = [pytest.mark.flaky(reruns=2, reruns_delay=2)]
NS = f"/rd{os.getpid()}"


@pytest.fixture
def spin(ros):
    ex = SingleThreadedExecutor()
    nodes: list[Node] = []

    def add(node):
        nodes.append(node)
        ex.add_node(node)
        return node

    client = add(Node("rd_client"))
    spin = SpinThread(ex)
    yield client, add
    for n in nodes:
        if isinstance(n, StaticArm):
            n.stop()
    spin.stop()
    for n in nodes:
        n.destroy_node()


def latest(client: Node, msg_type, topic: str, predicate, timeout: float = 10.0):
    got = []
    sub = client.create_subscription(msg_type, topic, got.append, LATCHED_QOS)
    try:
        wait_for(lambda: got and predicate(got[-1]), timeout)
        return got[-1] if got else None
    finally:
        client.destroy_subscription(sub)


@pytest.mark.parametrize("name", sorted(ROBOTS))
def test_estimator_takes_the_model_from_the_topic_and_answers_in_its_tip_frame(spin, name):
    client, add = spin
    text = urdf(name).read_text()
    desc = robot_from_description(text)
    ns = f"{NS}/{name}"
    add(PayloadEstimatorNode(namespace=ns, use_global_arguments=False,
                             parameter_overrides=[Parameter("robot", value="")]))
    res = call_trigger(client, f"{ns}/payload_estimator/capture", 10.0)
    assert not res.success and "robot model" in res.message  # refused, with the reason
    st = latest(client, DiagnosticArray, f"{ns}/payload_estimator/status", lambda m: True)
    assert st.status[0].level == b"\x02" and "robot_description" in st.status[0].message
    pub = client.create_publisher(String, f"{ns}/robot_description", LATCHED_QOS)  # robot_state_publisher
    pub.publish(String(data=text))
    dyn = RigidBodyDynamics(desc)
    q0 = np.clip(np.where(np.arange(desc.n) % 2, 0.6, 0.2), *desc.limits.position.T)  # a bent pose
    arm = add(StaticArm(dyn, q0, names=desc.joint_names, namespace=ns))
    assert wait_for(lambda: call_trigger(client, f"{ns}/payload_estimator/capture", 10.0).success, 10.0)
    for pose in plan_poses(dyn, q0, PosePlanConfig(n_poses=6)).poses[1:]:
        arm.q = pose
        time.sleep(0.05)
        assert wait_for(lambda: call_trigger(client, f"{ns}/payload_estimator/capture", 10.0).success, 3.0)
    assert call_trigger(client, f"{ns}/payload_estimator/estimate", 10.0).success
    est = latest(client, InertiaStamped, f"{ns}/payload/estimate", lambda m: m.inertia.m > 0)
    assert est.header.frame_id == ROBOTS[name][1] == desc.payload_frame_name
    assert est.inertia.m == pytest.approx(PAYLOAD.mass, abs=0.02)
    np.testing.assert_allclose([est.inertia.com.x, est.inertia.com.y, est.inertia.com.z], PAYLOAD.com, atol=3e-3)


@pytest.mark.parametrize("robot", ["lwr4", "iiwa14"])
def test_sim_node_publishes_the_description_it_simulates(spin, robot):
    client, add = spin
    ns = f"{NS}/sim_{robot}"
    sim = add(SimNode(namespace=ns, use_global_arguments=False, parameter_overrides=[Parameter("robot", value=robot)]))
    try:
        msg = latest(client, String, f"{ns}/robot_description", lambda m: bool(m.data))
        got = robot_from_description(msg.data)
        ref = load_robot(robot)
        assert got.payload_frame_name == ref.payload_frame_name and got.joint_names == ref.joint_names
        q = np.linspace(-0.5, 0.5, ref.n)
        np.testing.assert_allclose(RigidBodyDynamics(got).gravity(q), RigidBodyDynamics(ref).gravity(q), atol=1e-9)
    finally:
        sim.stop()


def test_the_wait_for_a_description_says_why_and_subscribes_again_while_a_publisher_stays_silent(spin):
    """A volatile publisher never delivers to the node's transient-local subscription: the status says so (and
    what to do). A compatible publisher that has not delivered its message is subscribed to again (CI once left
    a node waiting while its neighbours had their model); a description published later still arrives."""
    from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy

    client, add = spin
    ns = f"{NS}/wait"
    add(PayloadEstimatorNode(namespace=ns, use_global_arguments=False,
                             parameter_overrides=[Parameter("robot", value="")]))
    topic = f"{ns}/payload_estimator/status"

    def status(predicate, timeout=10.0):
        return latest(client, DiagnosticArray, topic, lambda m: predicate(m.status[0]), timeout).status[0]

    assert "no node publishes it yet" in status(lambda s: "no node publishes" in s.message).message
    volatile = client.create_publisher(String, f"{ns}/robot_description", QoSProfile(
        depth=1, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.VOLATILE))
    st = status(lambda s: "volatile" in s.message)
    assert st.level == b"\x02" and "rd_client offers volatile durability" in st.message
    client.destroy_publisher(volatile)
    latched = client.create_publisher(String, f"{ns}/robot_description", LATCHED_QOS)  # silent so far
    st = status(lambda s: "subscribed again" in s.message, timeout=15.0)
    values = {kv.key: kv.value for kv in st.values}
    assert int(values["robot_description_resubscribed"]) >= 1
    latched.publish(String(data=urdf("iiwa14").read_text()))
    st = status(lambda s: s.level != b"\x02")
    assert "iiwa" in {kv.key: kv.value for kv in st.values}["robot_model"]
