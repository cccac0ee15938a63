"""``collision_monitor``'s live threshold calibration with the real node as a process and sim_node's MuJoCo arm
(links 3 % off the model, sensor offsets, 0.1 N m noise): start, the arm's own moves, finish; the thresholds set as
the node's parameter and written as a parameter file; the refusals a user meets (nothing started, nothing moved
yet, a load the model does not know)."""

from __future__ import annotations

import os

import numpy as np
import pytest
import rclpy
import yaml
from diagnostic_msgs.msg import DiagnosticArray
from rcl_interfaces.srv import GetParameters
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node
from rclpy.parameter import Parameter
from ros_helpers import call_trigger, sim_stack, wait_for
from sensor_msgs.msg import JointState
from trajectory_msgs.msg import JointTrajectory

from payload_estimation.model.robot_file import load_robot
from payload_estimation.ros.messages import trajectory_msg
from payload_estimation.ros.qos import COMMAND_QOS, LATCHED_QOS, SENSOR_QOS
from payload_estimation.ros.spin_thread import SpinThread

pytestmark = pytest.mark.flaky(reruns=1, reruns_delay=2)

ROBOT = "lwr4"
Q0 = np.radians([10, 40, -5, -70, 15, 50, 20])
MOVES = [np.radians([35, 55, -25, -90, 35, 30, 0]), Q0]  # 20-25 deg per joint, 2 s each


class Probe(Node):
    def __init__(self):
        super().__init__("calibration_probe", parameter_overrides=[Parameter("use_sim_time", value=True)])
        self.q: np.ndarray | None = None
        self.monitor: dict[str, str] = {}
        self.create_subscription(JointState, "joint_states", lambda m: setattr(self, "q", np.array(m.position)),
                                 SENSOR_QOS)
        self.create_subscription(DiagnosticArray, "collision_monitor/status", lambda m: setattr(
            self, "monitor", {kv.key: kv.value for kv in m.status[0].values}), LATCHED_QOS)
        self.pub_traj = self.create_publisher(JointTrajectory, "joint_trajectory", COMMAND_QOS)

    def thresholds(self) -> list[float]:
        cli = self.create_client(GetParameters, "collision_monitor/get_parameters")
        try:
            assert cli.wait_for_service(timeout_sec=10.0)
            fut = cli.call_async(GetParameters.Request(names=["thresholds"]))
            assert wait_for(fut.done, 10.0)
            return list(fut.result().values[0].double_array_value)
        finally:
            self.destroy_client(cli)


@pytest.fixture(scope="module")
def system(tmp_path_factory):
    ns = f"/cal{os.getpid()}"
    out = tmp_path_factory.mktemp("calibration") / "thresholds.yaml"
    rclpy.init(args=["--ros-args", "-r", f"__ns:={ns}", "-r", f"/clock:={ns}/clock"])
    try:
        with sim_stack(ns, [f"robot:={ROBOT}", "noise_std:=[0.1]", "model_error:=0.03", "seed:=5",
                            "offset:=[0.3, -0.4, 0.2, 0.5, -0.3, 0.2, -0.1]", "payload_mass:=2.5",
                            "payload_com:=[0.02, -0.01, 0.07]", f"initial_positions:={Q0.tolist()}"],
                       ["robot:=''"], extra={"monitor": {"threshold_calibration_file": str(out),
                                                         "joint_state_timeout": 2.0}}):
            probe = Probe()
            spin = SpinThread(SingleThreadedExecutor(), probe)
            try:
                assert wait_for(lambda: probe.q is not None and "threshold_calibration" in probe.monitor, 60.0)
                yield probe, out
            finally:
                spin.stop()
                probe.destroy_node()
    finally:
        rclpy.shutdown()


def _move(probe: Probe, q: np.ndarray) -> None:
    probe.pub_traj.publish(trajectory_msg(load_robot(ROBOT).joint_names, q[None], [2.0]))
    assert wait_for(lambda: np.max(np.abs(probe.q - q)) < np.radians(0.3), 20.0), np.degrees(probe.q - q)


def test_thresholds_calibrated_on_the_arms_own_moves_are_set_and_written(system):
    probe, out = system
    res = call_trigger(probe, "collision_monitor/finish_threshold_calibration")
    assert not res.success and res.message.startswith("no threshold calibration in progress: call "
                                                      "~/start_threshold_calibration"), res.message
    assert probe.thresholds() == [6.0]
    res = call_trigger(probe, "collision_monitor/start_threshold_calibration")
    assert res.success and "move the arm through the task's motions without contact" in res.message
    assert wait_for(lambda: probe.monitor.get("threshold_calibration", "").startswith("recording: "), 5.0)
    res = call_trigger(probe, "collision_monitor/finish_threshold_calibration")  # at rest: nothing moved yet
    assert not res.success and "the recording does not move" in res.message and "goes on" in res.message
    for q in MOVES:
        _move(probe, q)
    res = call_trigger(probe, "collision_monitor/finish_threshold_calibration")
    assert res.success, res.message
    print(res.message)
    applied = probe.thresholds()
    assert len(applied) == 7 and min(applied) >= 2.5 and max(applied) < 6.0, res.message
    assert f"applied: thresholds {applied} N m" in res.message and f"written to {out}" in res.message
    assert yaml.safe_load(out.read_text()) == {"/**/collision_monitor": {"ros__parameters": {"thresholds": applied}}}
    assert wait_for(lambda: probe.monitor.get("threshold_calibration") == "", 5.0)
    assert probe.monitor.get("collision") == "False"
    _move(probe, MOVES[0])  # the calibrated monitor stays silent on the moves it was calibrated on
    assert probe.monitor.get("collision") == "False" and probe.monitor.get("events") == "0", probe.monitor


def test_a_load_the_model_does_not_know_refuses_the_recording(system):
    probe, out = system
    written = out.read_text() if out.exists() else None
    before = probe.thresholds()
    assert call_trigger(probe, "collision_monitor/start_threshold_calibration").success
    assert call_trigger(probe, "sim_node/attach_payload").success  # 2.5 kg nobody announced: ~10 N m on A2
    assert wait_for(lambda: "NOT contact-free" in probe.monitor.get("threshold_calibration", ""), 10.0), probe.monitor
    res = call_trigger(probe, "collision_monitor/finish_threshold_calibration")
    assert not res.success and "the recording is not contact-free: the residual reached" in res.message
    assert "the thresholds are unchanged and the recording is discarded" in res.message
    assert probe.thresholds() == before and (out.read_text() if out.exists() else None) == written
    res = call_trigger(probe, "collision_monitor/cancel_threshold_calibration")
    assert not res.success and res.message.startswith("no threshold calibration in progress")
    call_trigger(probe, "sim_node/detach_payload")
