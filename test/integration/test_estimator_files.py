"""The estimator's files: where it exports estimates (``export_dir``) and its calibrated gravity model
(``calibration_file``, ``gravity_model``), judged with the real node over DDS.

- ``export_dir`` / ``calibration_file`` are checked when set (a location this process can write); an
  export that fails later (the directory replaced by a file) puts the status at WARN, counted, with
  the reason (issue 27 item 6).
- The calibrated gravity model persists (issue 29 item 5): ``~/calibrate`` writes it with the model's
  kinematics fingerprint; a new estimator finds it at ``calibration_file``, checks it belongs (joint
  names, fingerprint), uses it and says so; a file of another model (other joint names, other
  kinematics) is refused at ERROR and the nominal model used, said in the status; a ``gravity_model``
  of another model is refused (estimates refused) instead of giving a wrong payload.
"""

from __future__ import annotations

import os
import time

import pytest
import yaml
from diagnostic_msgs.msg import DiagnosticStatus
from rcl_interfaces.msg import Log
from rcl_interfaces.srv import SetParameters
from rclpy.parameter import Parameter
from rclpy.qos import QoSProfile
from ros_helpers import wait_for
from test_nodes import Q0, Rig, StaticArm, status_values
from test_parameters import call

from payload_estimation.model.dynamics import RigidBodyDynamics
from payload_estimation.model.robot_file import kinematics_fingerprint, robots_dir
from payload_estimation.ros.estimator_node import PayloadEstimatorNode
from payload_estimation.ros.messages import diagnostic_level
from payload_estimation.sampling.poses import PosePlanConfig, plan_poses
from payload_estimation.sampling.sweep import plan_sweep

pytestmark = pytest.mark.flaky(reruns=2, reruns_delay=2)
NS = f"/files{os.getpid()}"


def set_params(client, node: str, **values):
    """``ros2 param set`` through the node's own parameter service: [(successful, reason)]."""
    req = SetParameters.Request(parameters=[Parameter(k, value=v).to_parameter_msg() for k, v in values.items()])
    res = call(client, SetParameters, f"{NS}/{node}/set_parameters", req)
    return [(r.successful, r.reason) for r in res.results]


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
    assert not ok and why == f"export_dir {a_file / 'exports'}: {a_file} is a file, not a directory"
    [(ok, why)] = set_params(rig.client_node, "payload_estimator", export_dir=str(a_file))
    assert not ok and why == f"export_dir {a_file}: exists and is not a directory", why
    [(ok, why)] = set_params(rig.client_node, "payload_estimator", calibration_file=str(tmp_path))
    assert not ok and why == f"calibration_file {tmp_path}: is a directory (give a file name inside it)", why
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


def calibrate(rig: Rig, dyn: RigidBodyDynamics) -> str:
    """The unloaded arm through a 16-pose sweep around Q0, ~/capture_calibration at each, ~/calibrate (to the
    default calibration_file): its answer."""
    arm = rig.add(StaticArm(dyn, Q0, payload=None))
    node = rig.add(PayloadEstimatorNode())
    sweep = plan_sweep(dyn, Q0, PosePlanConfig(n_poses=16, amplitude_deg=20.0, limit_margin_deg=1.0))
    for pose in sweep.poses:
        arm.q = pose
        time.sleep(0.05)
        assert wait_for(lambda: rig.call("payload_estimator/capture_calibration").success, 3.0)
    res = rig.call("payload_estimator/calibrate")
    assert res.success, res.message
    rig.remove(node)
    rig.remove(arm)
    return res.message


def started(rig: Rig, logs: list, **params) -> tuple[dict, list[Log]]:
    """A new estimator with ``params``: its first status (with the calibration key) and its log lines."""
    n0 = len(logs)
    node = rig.add(PayloadEstimatorNode(parameter_overrides=[Parameter(k, value=v) for k, v in params.items()]))
    st = status_values(rig, "payload_estimator/status", lambda v: bool(v.get("calibration")) or "did not load" in
                       v["message"])
    time.sleep(0.2)  # /rosout is best effort
    rig.remove(node)
    return st, [m for m in logs[n0:] if m.name.endswith("payload_estimator")]


def rewritten(src, dst, **changes):
    """A copy of the identified model file ``src`` at ``dst`` with top-level keys or ``info`` keys changed."""
    data = yaml.safe_load(src.read_text())
    for k, v in changes.items():
        if k in data:
            data[k] = v
        elif v is None:
            data["info"].pop(k, None)
        else:
            data["info"][k] = v
    dst.write_text(yaml.safe_dump(data, sort_keys=False))
    return dst


def test_the_calibrated_model_is_found_on_start_checked_and_used(rig, dyn, tmp_path, monkeypatch):
    monkeypatch.setenv("ROS_HOME", str(tmp_path))  # the default calibration_file: $ROS_HOME/payload_estimation/...
    path = tmp_path / "payload_estimation" / "gravity_lwr4.yaml"
    msg = calibrate(rig, dyn)
    assert f"written to {path} and loaded as gravity_model (found there and checked against the robot model on " \
           "the next start)" in msg, msg
    info = yaml.safe_load(path.read_text())["info"]
    assert info["kinematics_fingerprint"] == kinematics_fingerprint(dyn.desc)
    logs: list[Log] = []
    rig.on_executor(lambda: rig.client_node.create_subscription(Log, "/rosout", logs.append, QoSProfile(depth=100)))

    # restart: the file at the default calibration_file is found, checked and used
    st, said = started(rig, logs)
    assert st["calibration"].startswith(f"using {path} (joint names and kinematics fingerprint match); written by "
                                        "~/calibrate (payload_sampler/sweep) on "), st
    assert "to forget it and use the nominal model, delete the file" in st["calibration"]  # issue 47
    assert "identified model gravity_lwr4.yaml" in st["model"] and st["level"] == diagnostic_level(
        DiagnosticStatus.OK), st
    assert any(m.msg.startswith(f"calibrated gravity model found at {path} and used (joint names and kinematics "
                                "fingerprint match): written by ~/calibrate (payload_sampler/sweep) on ")
               and "to forget it" in m.msg for m in said), [m.msg for m in said]

    # a file written before fingerprints: joint names checked, the kinematics said to be unchecked
    old = rewritten(path, tmp_path / "old.yaml", kinematics_fingerprint=None)
    st, _ = started(rig, logs, calibration_file=str(old))
    assert st["calibration"].startswith(f"using {old} (joint names match; the kinematics could not be checked"), st

    # another model's file (joint names lbr_A1.. on this A1.. model): refused at ERROR, the nominal model used
    names = [f"lbr_{n}" for n in dyn.desc.joint_names]
    other = rewritten(path, tmp_path / "other_names.yaml", joint_names=names)
    st, said = started(rig, logs, calibration_file=str(other))
    assert st["calibration"].startswith(f"REFUSED {other}: it was identified for joints {names}, this robot model "
                                        f"(lwr4) has {list(dyn.desc.joint_names)}"), st
    assert st["calibration"].endswith("the nominal model is used") and "declared 5 %" in st["model"], st
    assert st["level"] == diagnostic_level(DiagnosticStatus.WARN) and "calibration file refused" in st["message"]
    assert any(m.level == Log.ERROR and m.msg.startswith(f"calibration file {other} refused") for m in said)

    # the same file on other kinematics (a link 2 cm longer): refused by the fingerprint
    yaml_text = (robots_dir() / "lwr4.yaml").read_text().replace("[0.0, -1.5707963267948966, 0.4, 0.0]",
                                                                  "[0.0, -1.5707963267948966, 0.42, 0.0]")
    longer = tmp_path / "robots" / "lwr4.yaml"
    longer.parent.mkdir()
    longer.write_text(yaml_text)
    st, _ = started(rig, logs, robot=str(longer), calibration_file=str(path))
    assert st["calibration"].startswith(f"REFUSED {path}: it was identified on other kinematics"), st

    # gravity_model of another model: refused, estimates refused (it gave 4.72 kg for 3.0 kg before)
    st, _ = started(rig, logs, gravity_model=str(other))
    assert st["level"] == diagnostic_level(DiagnosticStatus.ERROR), st
    assert st["message"].startswith(f"gravity_model {other} did not load: it was identified for joints {names}"), st
