"""QoS profiles used by every node of the package (one place, so remaps stay compatible).

- :data:`LATCHED_QOS` — reliable + transient-local, depth 1: the current payload estimate and
  status; a late subscriber (e.g. a monitor started after the estimate) gets the last value.
- :data:`SENSOR_QOS` — best effort, keep last: joint_states. A best-effort subscriber accepts
  both reliable (ros2_control's joint_state_broadcaster) and best-effort publishers.
- :data:`SENSOR_LATEST_QOS` — best effort, depth 5: joint_states for a node that needs the current
  state rather than every sample (the sampler): a busy executor reads fresh data, not a backlog.
- :data:`COMMAND_QOS` — reliable, volatile: joint_trajectory commands (what
  joint_trajectory_controller's ``~/joint_trajectory`` subscription expects).
- :data:`EVENT_QOS` — reliable, volatile, deeper queue: collision events, residuals.
"""

from __future__ import annotations

from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy

LATCHED_QOS = QoSProfile(
    history=HistoryPolicy.KEEP_LAST,
    depth=1,
    reliability=ReliabilityPolicy.RELIABLE,
    durability=DurabilityPolicy.TRANSIENT_LOCAL,
)

SENSOR_QOS = QoSProfile(
    history=HistoryPolicy.KEEP_LAST,
    depth=200,  # 0.2 s at 1 kHz: rides out a busy Python executor without dropping samples
    reliability=ReliabilityPolicy.BEST_EFFORT,
    durability=DurabilityPolicy.VOLATILE,
)

SENSOR_LATEST_QOS = QoSProfile(
    history=HistoryPolicy.KEEP_LAST,
    depth=5,  # a consumer that needs the *current* state, not every sample (the sampler)
    reliability=ReliabilityPolicy.BEST_EFFORT,
    durability=DurabilityPolicy.VOLATILE,
)

COMMAND_QOS = QoSProfile(
    history=HistoryPolicy.KEEP_LAST,
    depth=10,
    reliability=ReliabilityPolicy.RELIABLE,
    durability=DurabilityPolicy.VOLATILE,
)

EVENT_QOS = QoSProfile(
    history=HistoryPolicy.KEEP_LAST,
    depth=50,
    reliability=ReliabilityPolicy.RELIABLE,
    durability=DurabilityPolicy.VOLATILE,
)

__all__ = ["LATCHED_QOS", "SENSOR_QOS", "SENSOR_LATEST_QOS", "COMMAND_QOS", "EVENT_QOS"]
