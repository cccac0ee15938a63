"""Node parameters: one table per node, descriptors, refusals with a reason, run-time changes, one doc copy."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import numpy as np
import pytest
from rcl_interfaces.srv import DescribeParameters, SetParameters
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node
from rclpy.parameter import Parameter

from payload_estimation.collision import calibrate_thresholds
from payload_estimation.ros.bringup import launch_entries
from payload_estimation.ros.estimator_node import PayloadEstimatorNode
from payload_estimation.ros.interface import DOCS, PARAMS_FILE, render_all
from payload_estimation.ros.monitor_node import CollisionMonitorNode
from payload_estimation.ros.parameters import Param, ParameterError
from payload_estimation.ros.sampler_node import PayloadSamplerNode
from payload_estimation.ros.sampler_params import PARAMS as PARAMS_SAMPLER
from payload_estimation.ros.sampler_params import sampler_config
from payload_estimation.ros.spin_thread import SpinThread
from payload_estimation.sampling.sampler import run_spec
from payload_estimation.sampling.sampling_run import RunMode

ROOT = Path(__file__).resolve().parents[2]
NS = f"/param{os.getpid()}"


def test_param_checks_bounds_choices_and_lists():
    p = Param("amplitude_deg", 7.0, "deg", low=0.0, high=10.0, low_open=True)
    assert p.check(10.0) is None and p.check(0.1) is None
    assert "out of range" in p.check(0.0) and "(0, 10]" in p.check(90.0)
    assert p.check(float("nan")) is not None and p.check(float("inf")) is not None
    c = Param("method", "one-shot", "how", choices=("one-shot", "differential"))
    assert c.check("differential") is None and "one-shot, differential" in c.check("bogus")
    a = Param("thresholds", [6.0], "N m", low=0.0, high=200.0, low_open=True, min_items=1)
    assert a.check([6.0, 7.0]) is None and a.check([6.0, -1.0]) is not None and a.check([]) is not None
    d = p.descriptor()
    assert d.floating_point_range[0].from_value == 0.0 and d.floating_point_range[0].to_value == 10.0
    assert "(0, 10]" in d.additional_constraints


def test_docs_and_the_package_parameter_file_are_generated_from_the_tables():
    docs, params = render_all((ROOT / DOCS).read_text())
    assert docs == (ROOT / DOCS).read_text(), "docs/ros_interface.md is stale: run tools/gen_ros_docs.py"
    assert params == (ROOT / PARAMS_FILE).read_text(), f"{PARAMS_FILE} is stale: run tools/gen_ros_docs.py"


@pytest.fixture
def spin(ros):
    ex = SingleThreadedExecutor()
    client = Node("param_client")
    spin = SpinThread(ex, client)
    nodes = []

    def add(node):
        nodes.append(node)
        ex.add_node(node)
        return node

    yield client, add
    spin.stop()
    for n in [client, *nodes]:
        n.destroy_node()


def call(client, srv_type, name, request, timeout=10.0):
    cli = client.create_client(srv_type, name)
    try:
        assert cli.wait_for_service(timeout_sec=5.0), name
        fut = cli.call_async(request)
        ev = threading.Event()
        fut.add_done_callback(lambda f: ev.set())
        assert ev.wait(timeout), f"{name} did not answer"
        return fut.result()
    finally:
        client.destroy_client(cli)


def set_params(client, node: str, **values):
    """``ros2 param set`` through the node's own parameter service: [(successful, reason)]."""
    req = SetParameters.Request(parameters=[Parameter(k, value=v).to_parameter_msg() for k, v in values.items()])
    res = call(client, SetParameters, f"{NS}/{node}/set_parameters", req)
    return [(r.successful, r.reason) for r in res.results]


def test_unsafe_values_are_refused_with_a_reason_and_safe_ones_applied(spin):
    client, add = spin
    sampler = add(PayloadSamplerNode())
    monitor = add(CollisionMonitorNode())
    estimator = add(PayloadEstimatorNode())
    for key, bad in (("amplitude_deg", 90.0), ("velocity_scale", 5.0), ("n_poses", 0), ("amplitude_deg", 0.0)):
        [(ok, why)] = set_params(client, "payload_sampler", **{key: bad})
        assert not ok and key in why and ("allowed" in why or "range" in why), (key, why)
    assert sampler.values["amplitude_deg"] == 7.0 and sampler.get_parameter("amplitude_deg").value == 7.0
    for key, bad in (("thresholds", [1000.0]), ("thresholds", [-1.0]), ("gains", [float("nan")]),
                     ("thresholds", [6.0, 6.0]), ("policy", "bogus")):
        [(ok, why)] = set_params(client, "collision_monitor", **{key: bad})
        assert not ok and key in why, (key, why)
    [(ok, why)] = set_params(client, "payload_estimator", max_payload=1e6)
    assert not ok and "max_payload" in why
    [(ok, _)] = set_params(client, "payload_estimator", robot="iiwa14")
    assert not ok  # read-only: fixed at start-up
    # safe values take effect: the sampler's next run, the monitor's detector and reaction now
    assert set_params(client, "payload_sampler", amplitude_deg=5.0, n_poses=6) == [(True, ""), (True, "")]
    plan = run_spec(sampler_config(sampler.values), RunMode.STATIC).plan
    assert plan.amplitude_deg == 5.0 and plan.n_poses == 6
    assert set_params(client, "collision_monitor", thresholds=[8.0], policy="none") == [(True, ""), (True, "")]
    assert monitor.mon.detector.thresholds.tolist() == [8.0] * 7 and monitor.reaction.policy == "none"
    assert set_params(client, "payload_estimator", method="differential")[0][0]
    assert estimator.values["method"] == "differential"


def test_descriptors_tell_units_ranges_and_read_only(spin):
    client, add = spin
    add(PayloadSamplerNode())
    res = call(client, DescribeParameters, f"{NS}/payload_sampler/describe_parameters",
               DescribeParameters.Request(names=["amplitude_deg", "robot"]))
    amp, robot = res.descriptors
    assert "deg" in amp.description and amp.floating_point_range[0].to_value == 10.0 and not amp.read_only
    assert robot.read_only


@pytest.mark.parametrize("override,words", [
    (Parameter("method", value="bogus"), ["method", "one-shot, differential"]),
    (Parameter("amplitude_deg", value=90.0), ["parameter amplitude_deg: 90 is out of range; allowed: (0, 10]"]),
    (Parameter("robot", value="/no/such/robot.yaml"), ["robot", "/no/such/robot.yaml"]),
])
def test_bad_start_up_values_fail_with_one_line_naming_the_parameter(ros, override, words):
    cls = PayloadSamplerNode if override.name == "amplitude_deg" else PayloadEstimatorNode
    with pytest.raises(ParameterError) as exc:
        cls(parameter_overrides=[override])
    text = str(exc.value)
    assert "\n" not in text and all(w in text for w in words), text
    assert "Invalid parameter value" not in text and "expected a number" not in text, text  # rclpy's words, garbled


def test_whole_numbers_are_taken_for_double_parameters_and_then_range_checked(spin):
    """``ros2 param set ... amplitude_deg 5`` sends an integer, ``[8, 8, ...]`` an integer array."""
    client, add = spin
    sampler = add(PayloadSamplerNode())
    monitor = add(CollisionMonitorNode())
    assert set_params(client, "payload_sampler", amplitude_deg=5) == [(True, "")]
    assert sampler.values["amplitude_deg"] == 5.0 and isinstance(sampler.get_parameter("amplitude_deg").value, float)
    assert set_params(client, "collision_monitor", thresholds=[8] * 7) == [(True, "")]
    assert monitor.mon.detector.thresholds.tolist() == [8.0] * 7
    assert set_params(client, "collision_monitor", thresholds=9) == [(True, "")]  # one number for all joints
    assert monitor.values["thresholds"] == [9.0]
    [(ok, why)] = set_params(client, "payload_sampler", amplitude_deg=90)
    assert not ok and why == "amplitude_deg: 90 is out of range; allowed: (0, 10]", why
    [(ok, why)] = set_params(client, "collision_monitor", thresholds=[6, 6])
    assert not ok and why == "thresholds: give one value or 7 (one per joint), got 2", why
    [(ok, why)] = set_params(client, "collision_monitor", thresholds=[6.0, 0.0, 6.0, 6.0, 6.0, 6.0, 6.0])
    assert not ok and why == "thresholds: 0 (item 2 of [6, 0, 6, 6, 6, 6, 6]) is out of range; allowed: (0, 200] " \
                             "each; one value or more", why
    [(ok, why)] = set_params(client, "collision_monitor", thresholds=[0.0])
    assert not ok and "array(" not in why and why.startswith("thresholds: 0 is out of range"), why


def test_wrong_types_unknown_names_and_read_only_are_refused_in_words(spin):
    client, add = spin
    sampler = add(PayloadSamplerNode())
    [(ok, why)] = set_params(client, "payload_sampler", amplitude_deg="five")
    assert not ok and why == "amplitude_deg takes a number, e.g. 5 or 5.0, got the text 'five'", why
    [(ok, why)] = set_params(client, "payload_sampler", n_poses=6.5)
    assert not ok and why == "n_poses takes a whole number, e.g. 10, got the fractional number 6.5", why
    [(ok, why)] = set_params(client, "payload_sampler", amplitude=5.0)
    assert not ok and "has no parameter 'amplitude' (did you mean amplitude_deg?)" in why and "[]" not in why, why
    [(ok, why)] = set_params(client, "payload_sampler", robot="iiwa14")
    assert not ok and "robot is fixed at start-up (read-only)" in why and "restart" in why, why
    assert sampler.values["amplitude_deg"] == 7.0


def test_one_request_is_applied_whole_or_not_at_all(spin):
    """``ros2 param load`` and a client's SetParameters with several values: one bad value refuses them all."""
    client, add = spin
    sampler = add(PayloadSamplerNode())
    res = set_params(client, "payload_sampler", amplitude_deg=5.0, n_poses=0)
    assert [ok for ok, _ in res] == [False, False], res
    assert res[0][1] == ("amplitude_deg not applied: n_poses in the same request was refused (a request is applied "
                         "whole or not at all)"), res
    assert res[1][1].startswith("n_poses: 0 is out of range"), res
    assert sampler.get_parameter("amplitude_deg").value == 7.0 and sampler.values["amplitude_deg"] == 7.0
    assert set_params(client, "payload_sampler", amplitude_deg=5, n_poses=6) == [(True, ""), (True, "")]
    assert sampler.values["amplitude_deg"] == 5.0 and sampler.values["n_poses"] == 6


def test_a_parameter_file_with_whole_numbers_for_doubles_starts(ros, tmp_path):
    path = tmp_path / "params.yaml"
    path.write_text("/**:\n  ros__parameters:\n    max_payload: 20\n    torque_gain: [2, 2, 2, 2, 2, 2, 2]\n")
    node = PayloadEstimatorNode(cli_args=["--ros-args", "--params-file", str(path)])
    try:
        assert node.values["max_payload"] == 20.0 and isinstance(node.get_parameter("max_payload").value, float)
        assert node.values["torque_gain"] == [2.0] * 7 and node.gain.tolist() == [2.0] * 7
    finally:
        node.destroy_node()
    path.write_text("/**:\n  ros__parameters:\n    max_payload: heavy\n")
    with pytest.raises(ParameterError) as exc:
        PayloadEstimatorNode(cli_args=["--ros-args", "--params-file", str(path)])
    assert str(exc.value) == ("parameter max_payload takes a number, e.g. 5 or 5.0, got the text 'heavy' (from the "
                              "parameter file or -p)")


def test_a_misspelt_parameter_in_a_file_is_said_and_in_the_status_not_silently_dropped(ros, tmp_path):
    """rclpy drops a parameter-file value of an undeclared name without a word, so ``amplitude_degs: 3.0`` left the
    sampler at the default ±7° in silence. The node names it with the parameter meant and keeps it in its status; a
    name another node of the package has (a shared ``/**`` section) is not one."""
    path = tmp_path / "params.yaml"
    path.write_text("/**:\n  ros__parameters:\n    thresholds: [6.0]\n"
                    "/**/payload_sampler:\n  ros__parameters:\n    amplitude_degs: 3.0\n    n_poses: 6\n")
    node = PayloadSamplerNode(cli_args=["--ros-args", "--params-file", str(path), "-p", "robot:=lwr4"])
    try:
        assert node.parameters_ignored == ["amplitude_degs"]
        assert node.values["amplitude_deg"] == 7.0 and node.values["n_poses"] == 6
        assert ("payload_sampler has no parameter 'amplitude_degs' (did you mean amplitude_deg?): the value(s) given "
                "in a parameter file or with -p are ignored") in PARAMS_SAMPLER.ignored_words(node)
        values = {k: v for more in node.status.extra for k, v in more().items()}
        assert values["parameters_ignored"] == "amplitude_degs"
    finally:
        node.destroy_node()
    node = PayloadSamplerNode(cli_args=["--ros-args", "-p", "robot:=lwr4", "-p", "amplitude_deg:=5.0"])
    try:
        assert node.parameters_ignored == []
        assert "parameters_ignored" not in {k for more in node.status.extra for k in more()}
    finally:
        node.destroy_node()


def test_a_calibrated_thresholds_file_is_what_the_monitor_runs_with(ros, tmp_path):
    """``payload-estimation residual --calibrate --params-out F`` writes a parameter file; rcl reads it back (any
    namespace), layered over the package's file as the launch files do (``thresholds_file``), and the monitor's
    detector runs with those thresholds per joint."""
    t = np.arange(3000) * 1e-3
    dq = np.sin(np.outer(t, np.arange(1, 8)))
    r = np.outer(np.ones_like(t), [0.4, 2.1, 0.9, 1.7, 0.3, 0.2, 0.1]) * np.sin(7 * t)[:, None]
    cal = calibrate_thresholds(t, r, dq)
    path = tmp_path / "thresholds.yaml"
    path.write_text(cal.params_file("run.csv"))
    entry = launch_entries("lwr4", ["monitor"], thresholds=path)[0]  # the package's file, then the thresholds
    files = [x for f in entry["parameters"][:-1] for x in ("--params-file", f)]
    assert files[1].endswith(PARAMS_FILE) and files[3] == str(path)
    node = CollisionMonitorNode(cli_args=["--ros-args", "-r", "__ns:=/cell/arm_left", *files, "-p", "robot:=lwr4"])
    try:
        assert node.get_fully_qualified_name() == "/cell/arm_left/collision_monitor"
        assert node.values["thresholds"] == [round(float(x), 3) for x in cal.thresholds]
        np.testing.assert_allclose(node.mon.detector.thresholds, cal.thresholds, atol=1e-3)
        assert node.mon.detector.thresholds[1] > 4.0 and node.mon.detector.thresholds[0] == 2.5
    finally:
        node.destroy_node()


def test_estimator_node_torque_gain_parameter(ros):
    """The node's torque_gain: one value for all joints, checked against the robot at start-up; the
    conversion is the core's (effort_to_torque)."""
    node = PayloadEstimatorNode(parameter_overrides=[Parameter("torque_gain", value=[2.5])])
    try:
        np.testing.assert_array_equal(node.gain, np.full(7, 2.5))
        bad = node.set_parameters([Parameter("torque_gain", value=[1.0, 2.0])])[0]
        assert not bad.successful and "2 values, the robot has 7 joints" in bad.reason
        gains = [1.0, 1.1, 1.2, 1.3, 1.4, 1.5, 1.6]
        assert node.set_parameters([Parameter("torque_gain", value=gains)])[0].successful
        np.testing.assert_array_equal(node.gain, gains)
    finally:
        node.destroy_node()
    with pytest.raises(ParameterError, match="torque_gain: torque gain has 3 values, the robot has 7 joints"):
        PayloadEstimatorNode(parameter_overrides=[Parameter("torque_gain", value=[1.0, 2.0, 3.0])])
