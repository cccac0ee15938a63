"""The sampler's envelope, with the real nodes (a process each) and sim_node: aborts at random points.

From random pick configurations a ``~/sample`` call is cut short at a random time — by ``~/cancel``
or by a contact the monitor detects — and then called again (it returns to the first call's pick
configuration first). Every point the sampler commands, in both calls, stays inside ±amplitude of the
*first* call's pick configuration and the joint limits. (The core property test over many more
cases is test_sampling_run.py; the random pick configurations on the simulator: the pick bench.)
"""

from __future__ import annotations

import json
import os
import time

import numpy as np
import pytest
import rclpy
from diagnostic_msgs.msg import DiagnosticArray
from geometry_msgs.msg import WrenchStamped
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node
from rclpy.parameter import Parameter
from ros_helpers import call_trigger, sim_stack, wait_for
from sensor_msgs.msg import JointState
from std_srvs.srv import Trigger
from trajectory_msgs.msg import JointTrajectory

from payload_estimation.model.robot_file import load_robot
from payload_estimation.ros.messages import trajectory_from_msg, trajectory_msg
from payload_estimation.ros.monitor_node import HOLD_MARK
from payload_estimation.ros.qos import COMMAND_QOS, LATCHED_QOS, SENSOR_QOS
from payload_estimation.ros.spin_thread import SpinThread

pytestmark = pytest.mark.flaky(reruns=1, reruns_delay=2)

NS = f"/env{os.getpid()}"
ROBOT = "iiwa14"
AMPLITUDE = np.radians(7.0)


class Probe(Node):
    def __init__(self, names):
        super().__init__("envelope_probe", parameter_overrides=[Parameter("use_sim_time", value=True)])
        self.names = names
        self.q = None
        self.commands: list[tuple[str, np.ndarray]] = []  # (sender, last point)
        self.status = None
        self.create_subscription(JointState, "joint_states", lambda m: setattr(self, "q", np.array(m.position)),
                                 SENSOR_QOS)
        self.create_subscription(JointTrajectory, "joint_trajectory", self._traj, COMMAND_QOS)
        self.create_subscription(DiagnosticArray, "payload_sampler/status", lambda m: setattr(self, "status", m),
                                 LATCHED_QOS)
        self.pub_traj = self.create_publisher(JointTrajectory, "joint_trajectory", COMMAND_QOS)
        self.pub_wrench = self.create_publisher(WrenchStamped, "sim_node/apply_wrench", COMMAND_QOS)
        self.mine = False

    def _traj(self, msg):
        if self.mine:
            return
        _, q = trajectory_from_msg(msg, self.names)
        self.commands.append(("monitor" if msg.header.frame_id == HOLD_MARK else "sampler", q[-1]))

    def values(self) -> dict[str, str]:
        return {} if self.status is None else {kv.key: kv.value for kv in self.status.status[0].values}

    def move_to(self, q, seconds: float = 3.0):
        self.mine = True
        self.pub_traj.publish(trajectory_msg(self.names, np.asarray(q)[None], [seconds]))
        time.sleep(0.2)
        self.mine = False


@pytest.fixture(scope="module")
def system():
    rclpy.init(args=["--ros-args", "-r", f"__ns:={NS}", "-r", f"/clock:={NS}/clock"])
    desc = load_robot(ROBOT)
    try:
        with sim_stack(NS, [f"robot:={ROBOT}", "noise_std:=[0.1]", "model_error:=0.03", "payload_mass:=2.0",
                            "contact_duration:=0.4",
                            f"initial_positions:={np.radians([0, 30, 0, -80, 0, 50, 0]).tolist()}"],
                       ["robot:=''", "joint_state_timeout:=2.0", "service_timeout:=10.0", "dwell:=3.0",
                        "pick_rest_timeout:=10.0"]):
            probe = Probe(desc.joint_names)
            spin = SpinThread(SingleThreadedExecutor(), probe)
            try:
                assert wait_for(lambda: probe.q is not None, 30.0)
                assert wait_for(lambda: probe.values().get("busy") == "False", 30.0)
                yield desc, probe
            finally:
                spin.stop()
                probe.destroy_node()
    finally:
        rclpy.shutdown()


def _sample_async(probe):
    cli = probe.create_client(Trigger, "payload_sampler/sample")
    assert cli.wait_for_service(timeout_sec=10.0)
    return cli.call_async(Trigger.Request())


@pytest.mark.parametrize("case,fault", [(0, "cancel"), (1, "contact")])
def test_aborts_and_retries_never_leave_the_first_envelope(system, case, fault):
    desc, probe = system
    rng = np.random.default_rng(case)
    lim = desc.limits.position
    q_pick = np.clip(np.radians([0, 30, 0, -80, 0, 50, 0]) + rng.uniform(-0.4, 0.4, desc.n),
                     lim[:, 0] + np.radians(10), lim[:, 1] - np.radians(10))
    assert call_trigger(probe, "payload_estimator/reset", 10.0).success  # unloaded model: the arm may move freely
    assert call_trigger(probe, "payload_sampler/forget_pick", 10.0).success  # a failed earlier case may have left one
    assert call_trigger(probe, "sim_node/detach_payload", 10.0).success
    time.sleep(3.0)  # the monitor releases any collision and its resume delay passes
    probe.move_to(q_pick)
    assert wait_for(lambda: np.max(np.abs(probe.q - q_pick)) < np.radians(0.3), 20.0)
    assert call_trigger(probe, "sim_node/attach_payload", 10.0).success  # the grasp
    time.sleep(0.5)
    probe.commands.clear()
    q_call = probe.q.copy()  # the grasp may have sagged the arm a little: the run fixes q0 where it rests
    fut = _sample_async(probe)
    assert wait_for(lambda: sum(s == "sampler" for s, _ in probe.commands) >= 2 + case, 30.0)
    if fault == "cancel":
        assert call_trigger(probe, "payload_sampler/cancel", 10.0).success
    else:
        w = WrenchStamped()
        w.header.frame_id = "link_4"
        w.wrench.force.x = w.wrench.force.y = 80.0
        probe.pub_wrench.publish(w)
    assert wait_for(fut.done, 30.0) and not fut.result().success
    first = probe.values()
    assert first["last_outcome"] in ("cancelled", "collision")
    q0 = np.radians(json.loads(first["last_pick_configuration_deg"]))
    assert np.max(np.abs(q0 - q_call)) < np.radians(0.5) + 1e-6  # arrival_tolerance_deg: rest near the call
    time.sleep(3.0)  # the monitor releases and its resume delay passes
    res = call_trigger(probe, "payload_sampler/sample", 60.0)
    assert res.success, res.message
    assert np.allclose(np.radians(json.loads(probe.values()["last_pick_configuration_deg"])), q0, atol=1e-6)
    sampler = [q for s, q in probe.commands if s == "sampler"]
    assert len(sampler) > 4
    for q in sampler:
        assert np.all(np.abs(q - q0) <= AMPLITUDE + 1e-6), np.degrees(q - q0)
        assert np.all(q >= lim[:, 0]) and np.all(q <= lim[:, 1])
