"""A grasp announced before any collision monitor listens reaches the monitor once it does (real DDS, in-process).

``payload_estimator/payload_event`` is reliable and volatile: a subscription matched after the announcement never
gets it. In one demo run in six on a loaded machine the monitor had not been discovered yet, so it stopped the arm at
the grasp and called the later drop a collision. The estimator now says so in its answer and publishes the newest
unheard announcement again as soon as a listener is matched (within 5 s). The listener here subscribes exactly as the
collision monitor does (same topic, EVENT_QOS); the core rule: test_estimator_reports.py.
"""

from __future__ import annotations

import os

from diagnostic_msgs.msg import DiagnosticArray
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node
from rclpy.parameter import Parameter
from ros_helpers import call_trigger, wait_for
from std_msgs.msg import String

from payload_estimation.ros.estimator_node import NO_LISTENER, PayloadEstimatorNode
from payload_estimation.ros.qos import EVENT_QOS, LATCHED_QOS
from payload_estimation.ros.spin_thread import SpinThread

NS = f"/relay{os.getpid()}"


def test_an_announcement_made_before_the_monitor_listens_reaches_it_once_it_does(ros):
    ex = SingleThreadedExecutor()
    est = PayloadEstimatorNode(parameter_overrides=[Parameter("robot", value="lwr4")])
    client = Node("relay_client")
    status: list[DiagnosticArray] = []
    client.create_subscription(DiagnosticArray, "payload_estimator/status", status.append, LATCHED_QOS)
    for n in (est, client):
        ex.add_node(n)
    spin = SpinThread(ex)
    try:
        def values() -> dict[str, str]:
            return {kv.key: kv.value for kv in status[-1].status[0].values} if status else {}

        res = call_trigger(client, "payload_estimator/grasped", 10.0)
        assert res.success and NO_LISTENER in res.message and "sent again" in res.message, res.message
        assert wait_for(lambda: values().get("announcement_unheard") == "grasped", 5.0), values()
        heard: list[str] = []
        client.create_subscription(String, "payload_estimator/payload_event", lambda m: heard.append(m.data),
                                   EVENT_QOS)  # the collision monitor's subscription, matched late
        assert wait_for(lambda: heard == ["grasped"], 5.0), heard
        assert wait_for(lambda: values().get("announcements_late") == "1"
                        and values().get("announcement_unheard") == "", 5.0), values()
        res = call_trigger(client, "payload_estimator/released", 10.0)  # heard at once now: sent once
        assert NO_LISTENER not in res.message, res.message
        assert wait_for(lambda: heard == ["grasped", "released"], 5.0), heard
    finally:
        spin.stop()
        est.destroy_node()
        client.destroy_node()
