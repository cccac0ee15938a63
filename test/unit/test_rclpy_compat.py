"""Each rclpy internal behind ros/rclpy_compat.py exists and does what the nodes rely on, on the installed rclpy
(Kilted in .venv, Jazzy in CI's .venv-jazzy): a new distro fails here, one test per internal."""

from __future__ import annotations

import time

import pytest
import rclpy
from rcl_interfaces.srv import SetParameters, SetParametersAtomically
from rclpy.context import Context
from rclpy.guard_condition import GuardCondition
from rclpy.node import Node
from rclpy.parameter import Parameter
from rclpy.qos import QoSProfile
from std_msgs.msg import String

from payload_estimation.ros import rclpy_compat


@pytest.fixture
def node():
    ctx = Context()
    rclpy.init(context=ctx, args=["--ros-args", "-p", "given:=3", "-p", "use_sim_time:=true"])
    n = Node("compat_probe", context=ctx)
    yield n
    n.destroy_node()
    rclpy.shutdown(context=ctx)


def test_parameter_overrides_are_rclpys_own(node):
    overrides = rclpy_compat.parameter_overrides(node)
    assert overrides["given"].value == 3
    overrides["declared_later"] = Parameter("declared_later", value=7)  # the dict declare_parameter reads
    assert node.declare_parameter("declared_later", 1).value == 7


def test_parameter_service_callbacks_are_replaced(node):
    def answer(request, response):
        return response

    assert rclpy_compat.replace_service_callback(node, SetParameters, "set_parameters", answer) == 1
    assert rclpy_compat.replace_service_callback(node, SetParametersAtomically, "set_parameters_atomically",
                                                 answer) == 1
    served = [s.callback for s in node.services if s.service_name.endswith("compat_probe/set_parameters")]
    assert served == [answer]


def test_time_source_clock_subscription_is_dropped(node):
    callback = rclpy_compat.time_source_clock_callback(node)  # use_sim_time: the time source subscribes /clock
    assert callable(callback)
    clock_subs = [s for s in node.subscriptions if s.topic_name == "/clock"]
    assert len(clock_subs) == 1
    rclpy_compat.drop_time_source_clock_subscription(node)
    assert [s for s in node.subscriptions if s.topic_name == "/clock"] == []
    assert rclpy_compat.time_source_clock_callback(node) is None


def test_no_time_source_subscription_without_sim_time():
    ctx = Context()
    rclpy.init(context=ctx, args=[])
    n = Node("compat_wall", context=ctx)
    try:
        assert rclpy_compat.time_source_clock_callback(n) is None
    finally:
        n.destroy_node()
        rclpy.shutdown(context=ctx)


def test_c_subscription_take_and_wait(node):
    """The C extension's subscription (off the node's entity list), its take and the wait set: a message
    published in the same context is seen by the wait and taken; then nothing waits."""
    handle = rclpy_compat.c_subscription(node, String, "compat_probe_topic", QoSProfile(depth=5))
    assert not [s for s in node.subscriptions if s.topic_name.endswith("compat_probe_topic")]
    pub = node.create_publisher(String, "compat_probe_topic", 5)
    ws = rclpy_compat.c_wait_set(node)
    guard = GuardCondition(None, None, context=node.context)
    try:
        ready = False
        for _ in range(50):  # discovery within the process: up to 5 s
            pub.publish(String(data="x"))
            if rclpy_compat.wait_ready(ws, handle, guard, 100_000_000):
                ready = True
                break
        assert ready
        got = rclpy_compat.take_message(handle, String, False)
        assert got is not None and got[0].data == "x"
        while rclpy_compat.take_message(handle, String, False) is not None:
            pass
        assert rclpy_compat.take_message(handle, String, True) is None  # taken: nothing waits
        pub.publish(String(data="y"))
        assert rclpy_compat.wait_ready(ws, handle, guard, 5_000_000_000)
        raw = rclpy_compat.take_message(handle, String, True)
        assert isinstance(raw[0], bytes) and b"y" in raw[0]
        guard.trigger()  # wakes a wait with nothing to take well before its 60 s
        start = time.monotonic()
        rclpy_compat.wait_ready(ws, handle, guard, 60_000_000_000)
        assert time.monotonic() - start < 30.0
    finally:
        guard.destroy()
        rclpy_compat.destroy_c_subscription(handle)
