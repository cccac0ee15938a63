"""Announced grasp and release with the real nodes (a process each) and sim_node over DDS (issue 27 item 4).

``payload_estimator/grasped`` / ``released`` before sim_node attaches / detaches the payload: the collision
monitor raises no collision and does not stop the arm. Unannounced, the same grasp and release are collisions
(as before). A contact (sim_node's ``~/apply_wrench``) right after an announcement is still detected and stops
the arm. The core rule without DDS: test_payload_change.py.
"""

from __future__ import annotations

import os
import time

import numpy as np
import pytest
import rclpy
from builtin_interfaces.msg import Time
from diagnostic_msgs.msg import DiagnosticArray
from geometry_msgs.msg import WrenchStamped
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node
from rclpy.parameter import Parameter
from ros_helpers import call_trigger, sim_stack, wait_for
from std_msgs.msg import Bool
from trajectory_msgs.msg import JointTrajectory

from payload_estimation.ros.monitor_node import HOLD_MARK
from payload_estimation.ros.qos import COMMAND_QOS, LATCHED_QOS
from payload_estimation.ros.spin_thread import SpinThread

pytestmark = pytest.mark.flaky(reruns=1, reruns_delay=2)

NS = f"/grasp{os.getpid()}"
ROBOT = "iiwa14"
Q0 = np.radians([0, 30, 0, -80, 0, 50, 0]).tolist()
WINDOW = 5.0  # s, the monitor's default payload_event_window


class Probe(Node):
    """Counts the monitor's collisions (rising edges of ~/collision) and stops (hold trajectories)."""

    def __init__(self):
        super().__init__("grasp_probe", parameter_overrides=[Parameter("use_sim_time", value=True)])
        self.collisions: list[float] = []  # probe sim time (s) of each rising edge
        self.holds = 0
        self.status: DiagnosticArray | None = None
        self.detections: set[float] = set()  # the monitor's detection times (s, sample stamps) from its status
        self._flag = False
        self.create_subscription(Bool, "collision_monitor/collision", self._collision, LATCHED_QOS)
        self.create_subscription(JointTrajectory, "joint_trajectory", self._traj, COMMAND_QOS)
        self.create_subscription(DiagnosticArray, "collision_monitor/status", self._status, LATCHED_QOS)
        self.pub_wrench = self.create_publisher(WrenchStamped, "sim_node/apply_wrench", COMMAND_QOS)

    def _collision(self, msg):
        if msg.data and not self._flag:
            self.collisions.append(self.now())
        self._flag = bool(msg.data)

    def _status(self, msg):
        self.status = msg
        t = self.values().get("detection_time")
        if t is not None:
            self.detections.add(float(t))

    def _traj(self, msg):
        self.holds += int(msg.header.frame_id == HOLD_MARK)

    def now(self) -> float:
        return self.get_clock().now().nanoseconds * 1e-9

    def values(self) -> dict[str, str]:
        return {} if self.status is None else {kv.key: kv.value for kv in self.status.status[0].values}

    def text(self) -> str:
        return "" if self.status is None else self.status.status[0].message

    def contact(self, link: str, force, delay: float) -> float:
        """Schedule a contact on ``link`` ``delay`` s of sim time from now (sim_node applies it at the stamp)."""
        at = self.now() + delay
        w = WrenchStamped()
        w.header.frame_id = link
        w.header.stamp = Time(sec=int(at), nanosec=int((at % 1.0) * 1e9))
        w.wrench.force.x, w.wrench.force.y, w.wrench.force.z = (float(f) for f in force)
        self.pub_wrench.publish(w)
        return at


@pytest.fixture(scope="module")
def probe():
    rclpy.init(args=["--ros-args", "-r", f"__ns:={NS}", "-r", f"/clock:={NS}/clock"])
    try:
        with sim_stack(NS, [f"robot:={ROBOT}", "noise_std:=[0.1]", "model_error:=0.03", "payload_mass:=2.0",
                            "contact_duration:=0.3", f"initial_positions:={Q0}"],
                       ["robot:=''", "joint_state_timeout:=2.0", "service_timeout:=10.0"]):
            node = Probe()
            spin = SpinThread(SingleThreadedExecutor(), node)
            try:
                assert wait_for(lambda: node.text().startswith("monitoring"), 60.0), node.text()
                yield node
            finally:
                spin.stop()
                node.destroy_node()
    finally:
        rclpy.shutdown()


def _unloaded(p: Probe) -> None:
    """Nothing attached, the estimator and the monitor unloaded, no collision pending: counters cleared."""
    call_trigger(p, "sim_node/detach_payload", 10.0)
    assert call_trigger(p, "payload_estimator/reset", 10.0).success
    assert wait_for(lambda: p.values().get("payload_source") == "none" and p.values().get("collision") == "False"
                    and p.values().get("reaction_state") == "moving", 20.0), p.values()
    time.sleep(1.0)
    p.collisions.clear()
    p.holds = 0
    p.detections.clear()


def _settle(p: Probe, seconds: float) -> None:
    """Wait ``seconds`` of sim time (the simulator may run slower than the wall clock on a loaded machine)."""
    end = p.now() + seconds
    assert wait_for(lambda: p.now() >= end, 10 * seconds + 10.0)


def test_announced_grasp_and_release_neither_collide_nor_stop(probe):
    _unloaded(probe)
    res = call_trigger(probe, "payload_estimator/grasped", 10.0)
    assert res.success and "grasp announced" in res.message and "WARNING" not in res.message, res.message
    assert wait_for(lambda: "grasp announced" in probe.text(), 5.0), probe.text()
    assert call_trigger(probe, "sim_node/attach_payload", 10.0).success
    _settle(probe, WINDOW + 1.0)  # the window closes with the payload learnt provisionally
    v = probe.values()
    assert probe.collisions == [] and probe.holds == 0, f"{probe.collisions} {v}"
    assert v["payload_source"].startswith("provisional") and abs(float(v["payload_mass"]) - 2.0) < 0.3, v

    res = call_trigger(probe, "payload_estimator/released", 10.0)
    assert res.success and "release announced" in res.message, res.message
    assert call_trigger(probe, "sim_node/detach_payload", 10.0).success
    _settle(probe, WINDOW + 1.0)
    v = probe.values()
    assert probe.collisions == [] and probe.holds == 0, f"{probe.collisions} {v}"
    assert v["payload_source"] == "none" and v["payload_learning"] == "False", v  # release complete: unloaded
    assert "release announced" in v["payload_event"]


def test_unannounced_grasp_and_release_are_collisions(probe):
    _unloaded(probe)
    assert call_trigger(probe, "sim_node/attach_payload", 10.0).success
    assert wait_for(lambda: len(probe.collisions) == 1 and probe.holds == 1, 10.0), (probe.collisions, probe.values())
    # a learnt provisional payload (announced grasp, window closed), then a release nobody announced
    call_trigger(probe, "sim_node/detach_payload", 10.0)
    assert wait_for(lambda: probe.values().get("reaction_state") == "moving", 20.0), probe.values()
    assert call_trigger(probe, "payload_estimator/grasped", 10.0).success
    assert call_trigger(probe, "sim_node/attach_payload", 10.0).success
    _settle(probe, WINDOW + 1.0)  # window closed
    assert wait_for(lambda: probe.values().get("reaction_state") == "moving", 10.0), probe.values()
    probe.collisions.clear()
    probe.holds = 0
    assert call_trigger(probe, "sim_node/detach_payload", 10.0).success
    assert wait_for(lambda: len(probe.collisions) == 1 and probe.holds == 1, 10.0), (probe.collisions, probe.values())


@pytest.mark.parametrize("event", ["grasped", "released"])
def test_a_contact_right_after_an_announcement_is_detected(probe, event):
    _unloaded(probe)
    if event == "released":  # carry a learnt payload first
        assert call_trigger(probe, "payload_estimator/grasped", 10.0).success
        assert call_trigger(probe, "sim_node/attach_payload", 10.0).success
        _settle(probe, WINDOW + 1.0)
        assert probe.collisions == [], probe.values()
    assert call_trigger(probe, f"payload_estimator/{event}", 10.0).success
    change = "sim_node/attach_payload" if event == "grasped" else "sim_node/detach_payload"
    assert call_trigger(probe, change, 10.0).success
    at = probe.contact("link_4", [80.0, 80.0, 0.0], 0.2)  # 80 N at the elbow, 0.2 s after the payload change
    assert wait_for(lambda: len(probe.collisions) >= 1 and probe.holds >= 1, 10.0), f"{probe.values()}"
    assert len(probe.collisions) == 1 and probe.holds == 1, (probe.collisions, probe.holds)
    assert wait_for(lambda: len(probe.detections) == 1, 5.0), probe.detections
    detected = probe.detections.pop()
    assert at <= detected < at + 0.05, (at, detected)  # sim time: the contact's start, the detecting sample
    assert "announced" in probe.values()["payload_event"]
