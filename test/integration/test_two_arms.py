"""Two arms in one ROS graph: ``/two<pid>/left`` (LWR 4, 2 kg) and ``/two<pid>/right`` (iiwa14, 4 kg).

Each namespace has its own sim_node (its own ``/clock``, remapped into the namespace) and its own
estimator, sampler and monitor, all as processes that take the robot model from ``robot_description``
in their namespace (``robot:=''``), as with two ``robot_state_publisher``s. Both arms are sampled at
the same time. Each must estimate its own payload (1 % / 5 mm, as test_end_to_end), in its own
robot's payload frame, and nothing may cross: every topic and service of a node lies in its own
namespace (the global ``/rosout``, ``/parameter_events`` and ``/diagnostics`` aside), and each arm's
``joint_states``, ``joint_trajectory``, ``robot_description`` and ``payload/estimate`` have
publishers and subscribers of that namespace only. The bring-up is docs/two_arms.md.
"""

from __future__ import annotations

import os
import threading
import time
from contextlib import ExitStack

import numpy as np
import pytest
import rclpy
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus
from geometry_msgs.msg import InertiaStamped
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node
from ros_helpers import call_trigger, sim_stack, wait_for
from sensor_msgs.msg import JointState
from std_msgs.msg import Bool

from payload_estimation.model.robot_file import load_robot
from payload_estimation.ros.messages import estimate_from_msg
from payload_estimation.ros.qos import LATCHED_QOS, SENSOR_QOS
from payload_estimation.ros.spin_thread import SpinThread

pytestmark = pytest.mark.flaky(reruns=1, reruns_delay=2)

ROOT = f"/two{os.getpid()}"
ARMS = {  # namespace -> robot, payload (kg, CoM m in the payload frame), pick configuration (deg)
    "left": ("lwr4", 2.0, [0.02, 0.0, 0.06], [10, 40, -5, -70, 15, 50, 20]),
    "right": ("iiwa14", 4.0, [-0.01, 0.03, 0.10], [-10, 35, 5, -75, -10, 55, 15]),
}
GLOBAL_TOPICS = {"/rosout", "/parameter_events", "/diagnostics"}
"""Topics every ROS 2 node shares by design (logging, parameter events, the diagnostics aggregator)."""
NODES = ("sim_node", "payload_estimator", "payload_sampler", "collision_monitor")


class ArmProbe(Node):
    """Observer in one arm's namespace: joint_states names, the estimate, the sampler's active edges (wall s)."""

    def __init__(self, ns: str):
        super().__init__("two_arms_probe", namespace=ns)
        self.names: tuple[str, ...] | None = None
        self.estimate: InertiaStamped | None = None
        self.active: list[tuple[float, bool]] = []
        self.sampler: DiagnosticStatus | None = None
        self.create_subscription(JointState, "joint_states", lambda m: setattr(self, "names", tuple(m.name)),
                                 SENSOR_QOS)
        self.create_subscription(InertiaStamped, "payload/estimate", lambda m: setattr(self, "estimate", m),
                                 LATCHED_QOS)
        self.create_subscription(Bool, "payload_sampler/active",
                                 lambda m: self.active.append((time.monotonic(), bool(m.data))), LATCHED_QOS)
        self.create_subscription(DiagnosticArray, "payload_sampler/status",
                                 lambda m: setattr(self, "sampler", m.status[0]), LATCHED_QOS)
        self.detections: list[str] = []  # the monitor's detections as its status gave them (for a failure's message)
        self.create_subscription(DiagnosticArray, "collision_monitor/status", self._on_monitor, LATCHED_QOS)

    def _on_monitor(self, msg: DiagnosticArray) -> None:
        v = {kv.key: kv.value for kv in msg.status[0].values}
        if "detection_time" in v:
            line = (f"t={v['detection_time']} link {v.get('link')} peak {v.get('peak')} N m, payload "
                    f"{v.get('payload_source')} {v.get('payload_mass')} kg, event {v.get('payload_event')!r}")
            if line not in self.detections:
                self.detections.append(line)

    def sampler_state(self) -> str:
        """The sampler's status message and phase (what a hung run waits for), and the monitor's detections."""
        st = self.sampler
        what = "no status" if st is None else (
            f"{st.message!r}, phase {dict((v.key, v.value) for v in st.values).get('phase')}")
        return f"{what}; monitor detections: {self.detections}"


def _sim_params(robot: str, mass: float, com: list[float], pick_deg: list[float]) -> list[str]:
    return [f"robot:={robot}", "rate_hz:=500.0", "noise_std:=[0.1]", "model_error:=0.03", "seed:=5",
            f"payload_mass:={mass}", f"payload_com:={com}", "payload_inertia:=[0.01, 0.0, 0.0, 0.01, 0.0, 0.006]",
            f"initial_positions:={np.radians(pick_deg).tolist()}"]


LOADED_MACHINE = ["robot:=''", "joint_state_timeout:=2.0", "service_timeout:=10.0", "dwell:=3.0",
                  "pick_rest_timeout:=10.0", "mode:=static"]
"""Overrides of the nodes: the model from the topic; wall-clock bounds for a shared 2-core machine (8 processes)."""


@pytest.fixture(scope="module")
def arms():
    rclpy.init()
    try:
        with ExitStack() as stack:
            probes = {}
            for side, (robot, mass, com, pick) in ARMS.items():
                ns = f"{ROOT}/{side}"
                stack.enter_context(sim_stack(ns, _sim_params(robot, mass, com, pick), LOADED_MACHINE))
                probes[side] = ArmProbe(ns)
            spin = SpinThread(SingleThreadedExecutor(), *probes.values())
            stack.callback(lambda: [p.destroy_node() for p in probes.values()])
            stack.callback(spin.stop)
            for p in probes.values():
                assert wait_for(lambda p=p: p.names is not None, 40.0), f"no joint_states in {p.get_namespace()}"
            yield probes
    finally:
        rclpy.shutdown()


def _foreign(probe: Node, ns: str) -> list[str]:
    """Topics and services of the nodes in ``ns`` that lie outside ``ns`` (the global ones aside)."""
    out = []
    for node in NODES:
        found = (probe.get_publisher_names_and_types_by_node(node, ns)
                 + probe.get_subscriber_names_and_types_by_node(node, ns)
                 + probe.get_service_names_and_types_by_node(node, ns)
                 + probe.get_client_names_and_types_by_node(node, ns))
        out += [f"{node}: {name}" for name, _ in found
                if name not in GLOBAL_TOPICS and not name.startswith(ns + "/")]
    return out


def _endpoint_namespaces(probe: Node, topic: str) -> set[str]:
    """Namespaces of every publisher and subscriber of ``topic`` (this probe's own included)."""
    infos = probe.get_publishers_info_by_topic(topic) + probe.get_subscriptions_info_by_topic(topic)
    return {i.node_namespace for i in infos}


def _sample(probe: ArmProbe, results: dict, side: str) -> None:
    ns = probe.get_namespace()
    try:  # the arm settles after start-up: a capture is refused until it rests
        got = []
        assert wait_for(lambda: got.append(call_trigger(probe, f"{ns}/payload_estimator/capture_unloaded", 30.0))
                        or got[-1].success, 15.0, 0.2), got[-1].message
        assert call_trigger(probe, f"{ns}/sim_node/attach_payload", 10.0).success  # the grasp
        time.sleep(0.5)
        results[side] = call_trigger(probe, f"{ns}/payload_sampler/sample", 90.0)
    except AssertionError as e:
        results[side] = AssertionError(f"{e}; sampler status: {probe.sampler_state()}")


def test_two_arms_sample_at_once_and_nothing_crosses(arms):
    # every node of each arm is up and took its own robot (lwr4 joints A1 A2 E1 ..., iiwa14 A1 ... A7)
    for side, probe in arms.items():
        robot = ARMS[side][0]
        ns = probe.get_namespace()
        assert wait_for(lambda p=probe, ns=ns: all((n, ns) in p.get_node_names_and_namespaces() for n in NODES), 20.0)
        assert probe.names == load_robot(robot).joint_names, (side, probe.names)
    results: dict[str, object] = {}
    threads = [threading.Thread(target=_sample, args=(p, results, s)) for s, p in arms.items()]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join(150.0)
        for side in arms:
            res = results.get(side)
            assert res is not None and not isinstance(res, AssertionError), (side, res)
            assert res.success, (side, res.message, arms[side].sampler_state())
        # both ran at the same time: each sampler's active period overlaps the other's
        spans = {}
        for side, probe in arms.items():
            on = [t for t, v in probe.active if v]
            off = [t for t, v in probe.active if not v and on and t > on[-1]]
            assert on and off, (side, probe.active)
            spans[side] = (on[-1], off[0])
        (a0, a1), (b0, b1) = spans.values()
        assert min(a1, b1) - max(a0, b0) > 2.0, spans
        # each its own payload, in its own robot's payload frame
        for side, probe in arms.items():
            robot, mass, com, _ = ARMS[side]
            assert wait_for(lambda p=probe: p.estimate is not None and p.estimate.inertia.m > 0, 10.0), side
            est = estimate_from_msg(probe.estimate)
            print(f"{side} ({robot}): {est.mass:.4f} kg (true {mass}), CoM {np.round(est.com * 1e3, 2)} mm "
                  f"(true {np.round(np.array(com) * 1e3, 2)}); {results[side].message}")
            assert probe.estimate.header.frame_id == load_robot(robot).payload_frame_name
            assert abs(est.mass - mass) < 0.01 * mass, (side, est.mass)
            assert np.linalg.norm(est.com - np.array(com)) < 0.005, (side, est.com)
        # nothing crosses: the nodes' endpoints, and who is on each arm's topics
        probe = arms["left"]
        for side in arms:
            ns = f"{ROOT}/{side}"
            assert _foreign(probe, ns) == [], side
            for topic in ("joint_states", "joint_trajectory", "robot_description", "payload/estimate", "clock",
                          "payload_sampler/active", "collision_monitor/collision"):
                spaces = _endpoint_namespaces(probe, f"{ns}/{topic}")
                assert spaces and spaces <= {ns}, (topic, spaces)
        assert probe.count_publishers("/clock") == 0  # each simulator's clock stays in its namespace
    finally:
        for p in arms.values():
            ns = p.get_namespace()
            call_trigger(p, f"{ns}/sim_node/detach_payload", 10.0)
            call_trigger(p, f"{ns}/payload_estimator/reset", 10.0)
