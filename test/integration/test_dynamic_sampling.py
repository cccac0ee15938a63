"""The sampler's dynamic mode with the real nodes (a process each) and sim_node, on both robots.

Before the grasp ``payload_sampler/record_reference`` runs the excitation on the unloaded arm; after
it ``payload_sampler/sample`` (``mode: auto`` picks dynamic: there is a reference here) repeats it with
the payload. Every point the sampler commands stays inside ±7° of the pick configuration and the joint
limits; the estimate published on ``payload/estimate`` is within the bench's figures
(docs/bench/dynamic.md) of sim_node's true payload, inertia included; no collision is raised.
"""

from __future__ import annotations

import json
import os
import time

import numpy as np
import pytest
import rclpy
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus
from geometry_msgs.msg import InertiaStamped
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node
from rclpy.parameter import Parameter
from ros_helpers import call_trigger, sim_stack, wait_for
from sensor_msgs.msg import JointState
from std_msgs.msg import Bool
from trajectory_msgs.msg import JointTrajectory

from payload_estimation.model.robot_file import load_robot
from payload_estimation.ros.messages import trajectory_from_msg, trajectory_msg
from payload_estimation.ros.qos import COMMAND_QOS, LATCHED_QOS, SENSOR_QOS
from payload_estimation.ros.spin_thread import SpinThread

pytestmark = pytest.mark.flaky(reruns=1, reruns_delay=2)

AMPLITUDE = np.radians(7.0)
MASS, COM = 3.0, np.array([0.01, -0.01, 0.08])
INERTIA = np.array([0.008125, 0.0, 0.0, 0.009225, 0.0, 0.0061])  # a 3 kg box of 12 x 10 x 15 cm about its CoM
PICK = np.radians([10, 35, -5, -75, 10, 55, 5])


class Probe(Node):
    def __init__(self, names):
        super().__init__("dynamic_probe", parameter_overrides=[Parameter("use_sim_time", value=True)])
        self.names = names
        self.q = None
        self.points: list[np.ndarray] = []  # every commanded point
        self.estimate: InertiaStamped | None = None
        self.collisions = 0
        self.status: dict[str, DiagnosticArray] = {}
        self.create_subscription(JointState, "joint_states", lambda m: setattr(self, "q", np.array(m.position)),
                                 SENSOR_QOS)
        self.create_subscription(JointTrajectory, "joint_trajectory", self._traj, COMMAND_QOS)
        self.create_subscription(InertiaStamped, "payload/estimate", lambda m: setattr(self, "estimate", m),
                                 LATCHED_QOS)
        self.create_subscription(Bool, "collision_monitor/collision", self._collision, LATCHED_QOS)
        for node in ("payload_sampler", "payload_estimator"):
            self.create_subscription(DiagnosticArray, f"{node}/status",
                                     lambda m, k=node: self.status.__setitem__(k, m), LATCHED_QOS)
        self.pub_traj = self.create_publisher(JointTrajectory, "joint_trajectory", COMMAND_QOS)

    def _traj(self, msg):
        _, q = trajectory_from_msg(msg, self.names)
        self.points.extend(q)

    def _collision(self, msg):
        self.collisions += int(msg.data)

    def level(self, node: str) -> bytes | None:
        m = self.status.get(node)
        return None if m is None else m.status[0].level

    def values(self, node: str) -> dict[str, str]:
        m = self.status.get(node)
        return {} if m is None else {kv.key: kv.value for kv in m.status[0].values}


@pytest.fixture(scope="module", params=["lwr4", "iiwa14"])
def system(request):
    robot = request.param
    ns = f"/dyn{os.getpid()}{robot}"
    rclpy.init(args=["--ros-args", "-r", f"__ns:={ns}", "-r", f"/clock:={ns}/clock"])
    desc = load_robot(robot)
    try:
        with sim_stack(ns, [f"robot:={robot}", "noise_std:=[0.1]", "model_error:=0.03",
                            "offset:=[0.3, -0.4, 0.2, 0.5, -0.3, 0.2, -0.1]", f"payload_mass:={MASS}",
                            f"payload_com:={COM.tolist()}", f"payload_inertia:={INERTIA.tolist()}",
                            f"initial_positions:={PICK.tolist()}"],
                       ["robot:=''", "joint_state_timeout:=2.0", "service_timeout:=10.0", "pick_rest_timeout:=10.0"]):
            probe = Probe(desc.joint_names)
            spin = SpinThread(SingleThreadedExecutor(), probe)
            try:
                assert wait_for(lambda: probe.q is not None, 30.0)
                # idle AND with a robot model (the status is an ERROR until robot_description has arrived)
                assert wait_for(lambda: probe.values("payload_sampler").get("busy") == "False"
                                and probe.level("payload_sampler") == DiagnosticStatus.OK, 30.0)
                yield desc, probe
            finally:
                spin.stop()
                probe.destroy_node()
    finally:
        rclpy.shutdown()


def test_dynamic_sample_is_accurate_and_stays_in_its_envelope(system):
    desc, probe = system
    try:
        assert wait_for(lambda: np.max(np.abs(probe.q - PICK)) < np.radians(0.3), 20.0)
        time.sleep(0.5)
        probe.points.clear()
        res = call_trigger(probe, "payload_sampler/record_reference", 60.0)
        assert res.success, res.message
        ref_points = len(probe.points)
        assert ref_points > 100  # one multi-point excitation
        assert call_trigger(probe, "sim_node/attach_payload", 10.0).success  # the grasp
        time.sleep(2.0)  # the monitor reads the grasp as a collision and releases it: not this run's
        collisions = probe.collisions
        res = call_trigger(probe, "payload_sampler/sample", 60.0)
        assert res.success, res.message
        vals = probe.values("payload_sampler")
        assert "excitation" in res.message
        q0 = np.radians(json.loads(vals["last_pick_configuration_deg"]))
        lim = desc.limits.position
        for q in probe.points:  # both runs: every commanded point
            assert np.all(np.abs(q - q0) <= AMPLITUDE + 1e-6), np.degrees(q - q0)
            assert np.all(q >= lim[:, 0]) and np.all(q <= lim[:, 1])
        assert len(probe.points) > ref_points + 100  # the loaded run's excitation too
        assert probe.collisions == collisions  # none raised during the excitation
        duration = float(vals["last_duration_s"])
        print(f"{desc.name}: sample {duration:.2f} s robot time (reference {float(vals['reference_run_s']):.2f} s): "
              f"{res.message}")
        assert wait_for(lambda: probe.estimate is not None and probe.estimate.inertia.m > 0, 10.0)
        est = probe.estimate.inertia
        com = np.array([est.com.x, est.com.y, est.com.z])
        trace = est.ixx + est.iyy + est.izz
        assert abs(est.m - MASS) < 0.005 * MASS
        assert np.linalg.norm(com - COM) < 0.003
        undetermined = probe.values("payload_estimator").get("undetermined")
        if undetermined:  # reported, and then not guessed: a point mass (no earlier inertia to keep)
            assert "inertia not determined" in res.message and trace == 0.0
        else:
            assert abs(trace / (INERTIA[0] + INERTIA[3] + INERTIA[5]) - 1) < 0.3
            assert np.all(np.linalg.eigvalsh([[est.ixx, est.ixy, est.ixz], [est.ixy, est.iyy, est.iyz],
                                              [est.ixz, est.iyz, est.izz]]) > 0)
        assert duration < 4.0  # robot time with DDS and a shared CPU; the bench measures the 2.5 s target
    finally:  # unloaded and back at the pick configuration, whatever failed: a rerun starts clean
        call_trigger(probe, "sim_node/detach_payload", 10.0)
        call_trigger(probe, "payload_estimator/reset", 10.0)
        probe.pub_traj.publish(trajectory_msg(desc.joint_names, PICK[None], [2.0]))


def test_stretched_up_the_sample_tilts_first_and_stays_in_its_envelope(system):
    """At the stretched-up pose (the mass does not show at rest) both runs tilt first, through the nodes: the
    answer says so, every commanded point stays within ±7° of the pick configuration, no collision is raised and
    the estimate is within 0.5 % / 3 mm (the static poses it replaces: 8 s, 1.4 %). One robot: the rule is the
    core's (test_payload_dynamic runs both)."""
    desc, probe = system
    if desc.name != "iiwa14":
        pytest.skip("one robot through the nodes (the core's unit test runs both)")
    up = np.zeros(desc.n)
    try:
        call_trigger(probe, "sim_node/detach_payload", 10.0)
        call_trigger(probe, "payload_estimator/reset", 10.0)
        probe.pub_traj.publish(trajectory_msg(desc.joint_names, up[None], [3.0]))
        assert wait_for(lambda: np.max(np.abs(probe.q - up)) < np.radians(0.3), 20.0)
        time.sleep(0.5)
        probe.points.clear()
        res = call_trigger(probe, "payload_sampler/record_reference", 60.0)
        assert res.success and "tilted first" in res.message, res.message
        assert call_trigger(probe, "sim_node/attach_payload", 10.0).success
        time.sleep(2.0)  # the monitor reads the grasp as a collision and releases it
        collisions = probe.collisions
        res = call_trigger(probe, "payload_sampler/sample", 60.0)
        assert res.success and "tilted first" in res.message, res.message
        vals = probe.values("payload_sampler")
        print(f"{desc.name} stretched up: sample {float(vals['last_duration_s']):.2f} s robot time: {res.message}")
        q0 = np.radians(json.loads(vals["last_pick_configuration_deg"]))
        for q in probe.points:
            assert np.all(np.abs(q - q0) <= AMPLITUDE + 1e-6), np.degrees(q - q0)
        assert probe.collisions == collisions
        assert wait_for(lambda: probe.estimate is not None and probe.estimate.inertia.m > 0, 10.0)
        est = probe.estimate.inertia
        assert abs(est.m - MASS) < 0.005 * MASS
        assert np.linalg.norm(np.array([est.com.x, est.com.y, est.com.z]) - COM) < 0.003
    finally:
        call_trigger(probe, "sim_node/detach_payload", 10.0)
        call_trigger(probe, "payload_estimator/reset", 10.0)
        probe.pub_traj.publish(trajectory_msg(desc.joint_names, PICK[None], [3.0]))
        wait_for(lambda: np.max(np.abs(probe.q - PICK)) < np.radians(0.3), 20.0)
