"""The estimator's files: where it exports estimates (``export_dir``) and its calibrated gravity model
(``calibration_file``, ``gravity_model``), judged with the real node over DDS.

- ``export_dir`` / ``calibration_file`` are checked when set (a location this process can write); an
  export that fails later (the directory replaced by a file) puts the status at WARN, counted, with
  the reason (issue 27 item 6).
"""

from __future__ import annotations

import os
import time

import pytest
from diagnostic_msgs.msg import DiagnosticStatus
from rcl_interfaces.srv import SetParameters
from rclpy.parameter import Parameter
from ros_helpers import wait_for
from test_nodes import Q0, Rig, StaticArm, status_values
from test_parameters import call

from payload_estimation.model.dynamics import RigidBodyDynamics
from payload_estimation.model.robot_file import load_robot
from payload_estimation.motion.poses import PosePlanConfig, plan_poses
from payload_estimation.ros.estimator_node import PayloadEstimatorNode
from payload_estimation.ros.messages import diagnostic_level

pytestmark = pytest.mark.flaky(reruns=2, reruns_delay=2)
NS = f"/files{os.getpid()}"


def set_params(client, node: str, **values):
    """``ros2 param set`` through the node's own parameter service: [(successful, reason)]."""
    req = SetParameters.Request(parameters=[Parameter(k, value=v).to_parameter_msg() for k, v in values.items()])
    res = call(client, SetParameters, f"{NS}/{node}/set_parameters", req)
    return [(r.successful, r.reason) for r in res.results]


@pytest.fixture
def rig(ros):
    r = Rig()
    yield r
    r.close()


@pytest.fixture(scope="module")
def dyn():
    return RigidBodyDynamics(load_robot("lwr4"))


def capture_and_estimate(rig: Rig, arm: StaticArm, dyn: RigidBodyDynamics):
    """Static captures at 6 poses around Q0, then ~/estimate: its response."""
    for pose in plan_poses(dyn, Q0, PosePlanConfig(n_poses=6)).poses:
        arm.q = pose
        time.sleep(0.05)
        assert wait_for(lambda: rig.call("payload_estimator/capture").success, 3.0)
    return rig.call("payload_estimator/estimate")


def test_export_dir_and_calibration_file_are_checked_when_set(rig, tmp_path):
    rig.add(PayloadEstimatorNode())
    a_file = tmp_path / "notes.txt"
    a_file.write_text("not a directory")
    [(ok, why)] = set_params(rig.client_node, "payload_estimator", export_dir=str(a_file / "exports"))
    assert not ok and why == f"export_dir: {a_file / 'exports'} cannot be created: {a_file} is a file, not a directory"
    [(ok, why)] = set_params(rig.client_node, "payload_estimator", export_dir=str(a_file))
    assert not ok and why == f"export_dir: {a_file} exists and is not a directory", why
    [(ok, why)] = set_params(rig.client_node, "payload_estimator", calibration_file=str(tmp_path))
    assert not ok and why == (f"calibration_file: {tmp_path} is a directory; give a file name in it (e.g. "
                              f"{tmp_path / 'gravity.yaml'})"), why
    [(ok, why)] = set_params(rig.client_node, "payload_estimator", calibration_file=str(a_file / "gravity.yaml"))
    assert not ok and "is a file, not a directory" in why, why
    assert set_params(rig.client_node, "payload_estimator", export_dir=str(tmp_path / "new" / "deeper"),
                      calibration_file=str(tmp_path / "cal" / "gravity.yaml")) == [(True, ""), (True, "")]


def test_a_failed_export_puts_the_status_at_warn(rig, dyn, tmp_path):
    arm = rig.add(StaticArm(dyn, Q0))
    out = tmp_path / "exports"
    rig.add(PayloadEstimatorNode(parameter_overrides=[Parameter("export_dir", value=str(out)),
                                                      Parameter("max_mass_std", value=100.0),
                                                      Parameter("max_com_std", value=10.0)]))
    res = capture_and_estimate(rig, arm, dyn)
    assert res.success and "exported to" in res.message, res.message
    st = status_values(rig, "payload_estimator/status", lambda v: float(v.get("mass", 0)) > 0)
    assert st["level"] == diagnostic_level(DiagnosticStatus.OK) and st["export_failures"] == "0"
    for f in out.iterdir():  # the directory replaced by a file after it was checked: the next export fails
        f.unlink()
    out.rmdir()
    out.write_text("in the way")
    res = capture_and_estimate(rig, arm, dyn)
    assert res.success and "FAILED" in res.message, res.message  # the estimate itself is published
    st = status_values(rig, "payload_estimator/status", lambda v: v.get("export_failures") == "1")
    assert st["level"] == diagnostic_level(DiagnosticStatus.WARN), st
    assert "export FAILED" in st["message"] and str(out) in st["last_export_error"], st
