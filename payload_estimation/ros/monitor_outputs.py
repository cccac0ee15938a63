"""What the collision monitor publishes besides its status: ``~/residual``, ``~/collision``, the contact estimate
(``~/contact``, ``~/contact_wrench``, ``~/contact_marker``), ``~/payload_lost`` and its own trajectories on
``joint_trajectory`` (the stop and the resumed remainder), each with its log line and the status it publishes."""

from __future__ import annotations

import json

from geometry_msgs.msg import WrenchStamped
from sensor_msgs.msg import JointState
from std_msgs.msg import Bool, String
from trajectory_msgs.msg import JointTrajectory
from visualization_msgs.msg import Marker

from ..collision.contact import ContactEstimate
from ..collision.supervisor import Command
from .contact_messages import contact_line, contact_messages
from .messages import trajectory_msg
from .qos import COMMAND_QOS, EVENT_QOS, LATCHED_QOS

HOLD_MARK = "collision_monitor/hold"
"""header.frame_id of the monitor's own trajectories (so it does not learn them as 'active')."""


class MonitorOutputs:
    """The publishers of ``node`` (the collision monitor; ``node.status`` is published after each event)."""

    def __init__(self, node):
        self.node = node
        self.residual = node.create_publisher(JointState, "~/residual", EVENT_QOS)
        self.collision = node.create_publisher(Bool, "~/collision", LATCHED_QOS)
        self.trajectory = node.create_publisher(JointTrajectory, "joint_trajectory", COMMAND_QOS)
        self.wrench = node.create_publisher(WrenchStamped, "~/contact_wrench", EVENT_QOS)
        self.marker = node.create_publisher(Marker, "~/contact_marker", EVENT_QOS)
        self.contact_record = node.create_publisher(String, "~/contact", LATCHED_QOS)
        self.lost = node.create_publisher(String, "~/payload_lost", LATCHED_QOS)

    def event(self, text: str, active: bool, changed: bool) -> None:
        """A collision event described by the core (``text``): logged; ~/collision and the status when it
        ``changed``."""
        self.node.get_logger().warning(text) if active else self.node.get_logger().info(text)
        if changed:
            self.collision.publish(Bool(data=active))
            self.node.status.publish()

    def contact(self, c: ContactEstimate, stamp) -> None:
        """The contact estimate of the active event (``stamp``: the sample it was made at; a collision decided by the
        payload-loss check comes later): the log, ~/contact (JSON: link, probability, force range),
        ~/contact_wrench and ~/contact_marker in the contact link's frame, the status."""
        self.node.get_logger().warning(contact_line(c))  # one answer per contact
        record, wrench, marker = contact_messages(c, stamp)
        self.contact_record.publish(record)
        if wrench is not None:  # else no link explains the torque: nothing to show
            self.wrench.publish(wrench)
            self.marker.publish(marker)
        self.node.status.publish()

    def payload_lost(self, report: dict) -> None:
        """A payload loss (the core logged it): ~/payload_lost (JSON, latched) and the status."""
        self.lost.publish(String(data=json.dumps(report)))
        self.node.status.publish()

    def command(self, joint_names, c: Command) -> None:
        """The core's trajectory (a stop or the resumed remainder) on joint_trajectory, marked as the monitor's."""
        msg = trajectory_msg(joint_names, c.q, c.t, velocities=c.velocities)
        msg.header.frame_id = HOLD_MARK
        self.trajectory.publish(msg)
