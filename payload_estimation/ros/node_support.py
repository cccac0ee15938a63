"""What every node of the package shares: the parameter tables of its robot model, joint_states input, static test,
torque and payload limits; its status; its timers and log notes. Its robot model and joint_states input have modules
of their own (:mod:`.robot_model_source`, :mod:`.joint_state_input`).

- :class:`StatusReporter` — ``~/status`` (latched) and ``/diagnostics``, on every event and
  periodically (1 Hz, steady clock: also while ``/clock`` stands still).
"""

from __future__ import annotations

from collections.abc import Callable

from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue
from rclpy.clock import Clock, ClockType
from rclpy.qos import ReliabilityPolicy

from ..errors import PayloadEstimationError
from ..model import RobotDescription
from ..payload.estimator import NODE_LIMITS
from ..signals import SettleConfig
from . import rclpy_compat
from .messages import clock_stamp
from .parameters import Param, ParameterError, ParameterTable
from .qos import LATCHED_QOS

THROTTLE_S = 2.0
"""s between repeats of the same warning."""

STATUS_PERIOD = 1.0
"""s between periodic status messages."""

RETRY_PERIOD = 0.5
"""s between checks whether a node is idle to take a robot_description deferred while busy."""

LEVEL_NAMES = {DiagnosticStatus.OK: "OK", DiagnosticStatus.WARN: "WARN", DiagnosticStatus.ERROR: "ERROR",
               DiagnosticStatus.STALE: "STALE"}

ROBOT_PARAMS = ParameterTable([
    Param("robot", "lwr4", "robot model: a shipped robot (lwr4, iiwa14), a robot YAML or URDF file; empty = "
          "take the URDF from the robot_description topic", read_only=True),
    Param("base_link", "", "first link of the chain in a URDF (empty: the root)", read_only=True),
    Param("tip_link", "", "last link of the chain in a URDF = payload frame (empty: the unique leaf reached "
          "through moving joints)", read_only=True),
    Param("joint_names", [""], "names in joint_states / joint_trajectory, in model order ([\"\"]: the model's)",
          read_only=True),
])
"""Parameters of the robot model, shared by every node."""

STREAM_PARAMS = ParameterTable([
    Param("joint_state_timeout", 0.0, "s without joint_states (wall clock, also under use_sim_time) after which "
          "the stream counts as lost; 0: from the stream's measured rate (50 periods, at least 0.5 s; status "
          "joint_state_timeout_s says the one in use)", low=0.0, high=10.0),
    Param("max_stamp_jump", 1.0, "s a joint_states stamp may run ahead of the wall clock since the previous "
          "sample; further ahead, or not after it, is a time fault (held out, counted)", low=0.0, high=3600.0,
          low_open=True),
    Param("restart_samples", 20, "consecutive consistent samples after a time fault that make a stream restart "
          "(the node re-initialises from them)", low=1, high=10000),
])
"""Parameters of the joint_states input, shared by every node."""


def log_notes(logger, notes) -> bool:
    """Log a core's ``(level, text)`` notes ("error", "warning", else info); True if there were any. One call
    site per severity: rclpy refuses a call site whose severity changes."""
    for level, text in notes:
        if level == "error":
            logger.error(text)
        elif level == "warning":
            logger.warning(text)
        else:
            logger.info(text)
    return bool(notes)


def steady_timer(node, period: float, callback: Callable[[], None]):
    """A timer on the steady (wall) clock: it fires while sim time stands still."""
    return node.create_timer(period, callback, clock=Clock(clock_type=ClockType.STEADY_TIME))


CLOCK_BATCH = 0.05
"""s the /clock thread lets messages gather before it takes the newest (one wake-up instead of ~12 at 250 Hz, issue
48). What reads the clock through :func:`.messages.clock_seconds` (every decision of a node) takes the newest /clock
first: it is never older than the last message; a status' header stamp may be up to this much behind."""


def clock_off_executor(node):
    """Under ``use_sim_time``: ``/clock`` taken on a thread of its own (:class:`.dedicated_subscription.
    DedicatedSubscription`) instead of rclpy's executor, which rebuilt its wait set from every entity of the node for
    each of the simulator's 250 /clock messages a second (~10 % of a core per node, issue 48). The thread calls
    rclpy's own ``TimeSource.clock_callback`` with the newest message every :data:`CLOCK_BATCH` s, and
    :func:`.messages.clock_seconds` takes the newest before it reads the clock: the node's clock follows /clock as
    before where it is read, at a tenth of the wake-ups. Returns the subscription
    (destroy it with the node), or None where there is nothing to move (no sim time) or this rclpy keeps its time
    source otherwise (then the executor serves /clock as usual). A later change of ``use_sim_time`` at run time is
    rclpy's again (a subscription of its own when set true)."""
    clock_callback = rclpy_compat.time_source_clock_callback(node)
    if clock_callback is None:
        return None
    import threading

    from rclpy.qos import QoSProfile
    from rosgraph_msgs.msg import Clock as ClockMsg

    from .dedicated_subscription import DedicatedSubscription

    try:
        dedicated = DedicatedSubscription(node, ClockMsg, "/clock", clock_callback,
                                          QoSProfile(depth=1, reliability=ReliabilityPolicy.BEST_EFFORT),
                                          threading.Lock(), batch=CLOCK_BATCH, newest=True)
    except (ImportError, AttributeError, TypeError):
        return None
    rclpy_compat.drop_time_source_clock_subscription(node)
    node._clock_flush = dedicated.flush  # messages.clock_seconds takes the newest /clock first
    return dedicated


def joint_names_for(desc: RobotDescription, names: list[str]) -> tuple[str, ...]:
    """The message joint names in model order: the ``joint_names`` parameter or the model's own."""
    names = [x for x in names if x]
    if names and len(names) != desc.n:
        raise ParameterError(f"joint_names has {len(names)} names, robot {desc.name} has {desc.n} joints")
    return tuple(names) if names else desc.joint_names


class StatusReporter:
    """``~/status`` (latched) and ``/diagnostics``: ``snapshot()`` -> (level, message, values), plus the
    keys of every callable in ``extra``."""

    def __init__(self, node, name: str, snapshot: Callable[[], tuple[int, str, dict]],
                 period: float = STATUS_PERIOD):
        self.node = node
        self.name = f"{node.get_name()}: {name}"
        self.snapshot = snapshot
        self.pub_status = node.create_publisher(DiagnosticArray, "~/status", LATCHED_QOS)
        self.pub_diag = node.create_publisher(DiagnosticArray, "/diagnostics", 10)
        self.hardware_id = ""
        self.last_level: int | None = None
        self.extra: list[Callable[[], dict]] = []  # more status keys (e.g. RobotModelSource.status_values)
        ignored = getattr(node, "parameters_ignored", None)  # ParameterTable.declare: start-up values of no parameter
        if ignored:
            self.extra.append(lambda: {"parameters_ignored": ", ".join(ignored)})
        self._timer = steady_timer(node, period, self.publish)

    def publish(self) -> None:
        level, message, values = self.snapshot()
        for more in self.extra:
            values = {**values, **more()}
        st = DiagnosticStatus(level=level, name=self.name, message=message, hardware_id=self.hardware_id)
        st.values = [KeyValue(key=k, value=_text(v)) for k, v in values.items()]
        arr = DiagnosticArray(status=[st])
        arr.header.stamp = clock_stamp(self.node)
        self.pub_status.publish(arr)
        self.pub_diag.publish(arr)
        self.last_level = level


def _text(v) -> str:
    if isinstance(v, float):
        return f"{v:.9g}"
    if v is None:
        return ""
    return str(v)



_SETTLE = SettleConfig()  # the core's defaults are the parameters' defaults (one copy)

SETTLE_PARAMS = ParameterTable([
    Param("window", _SETTLE.window, "s of joint_states checked for a static capture",
          low=0.0, high=5.0, low_open=True, applies="next capture"),
    Param("max_velocity", _SETTLE.max_velocity, "rad/s, RMS velocity per joint for 'static'",
          low=0.0, high=1.0, low_open=True, applies="next capture"),
    Param("max_position_spread", _SETTLE.max_position_spread, "rad, max - min per joint over the window",
          low=0.0, high=0.1, low_open=True, applies="next capture"),
    Param("max_torque_std", _SETTLE.max_torque_std, "N m, torque standard deviation per joint over the window",
          low=0.0, high=50.0, low_open=True, applies="next capture"),
    Param("max_torque_drift", _SETTLE.max_torque_drift,
          "N m, |mean of 2nd half - mean of 1st half| per joint, plus ...",
          low=0.0, high=50.0, low_open=True, applies="next capture"),
    Param("torque_drift_relative", _SETTLE.torque_drift_relative, "... this fraction of |mean torque| of that joint",
          low=0.0, high=1.0, applies="next capture"),
    Param("min_average_samples", _SETTLE.min_average_samples,
          "fewer samples in the window (a thinned stream): reach back for them ...",
          low=1, high=100000, applies="next capture"),
    Param("max_window", _SETTLE.max_window, "... at most this many s (all static tests apply to the longer window)",
          low=0.0, high=10.0, low_open=True, applies="next capture"),
])
"""The static test (signals.settle; defaults from SettleConfig): the estimator decides, the sampler pre-checks
with the same values."""


def settle_config(values: dict):
    """signals.settle.SettleConfig from the SETTLE_PARAMS values."""
    return SettleConfig(window=float(values["window"]), max_velocity=float(values["max_velocity"]),
                        max_position_spread=float(values["max_position_spread"]),
                        max_torque_std=float(values["max_torque_std"]),
                        max_torque_drift=float(values["max_torque_drift"]),
                        torque_drift_relative=float(values["torque_drift_relative"]),
                        min_average_samples=int(values["min_average_samples"]), max_window=float(values["max_window"]))


TORQUE_PARAMS = ParameterTable([
    Param("torque_gain", [1.0],
          "N m per unit of joint_states effort, one value for all joints or one per joint, non-zero: -1 where the "
          "driver reports the joint torque with the opposite sign (lbr_fri_ros2_stack: [-1.0]); other values convert "
          "motor current (current-based torque includes the drive's friction, which grows with the load: prefer "
          "method differential). A stream whose torque runs opposite to the model is refused at ERROR, naming the "
          "joints ([1.0]: effort is torque in N m; a ROS list parameter cannot default to empty)",
          low=-1000.0, high=1000.0, min_items=1, applies="next sample"),
])
"""The effort's gain and sign, shared by the estimator and the monitor (the nodes that read torque)."""

LIMIT_PARAMS = ParameterTable([
    Param("max_payload", NODE_LIMITS.max_payload,
          "kg; a heavier estimate is rejected by the estimator and refused by the monitor",
          low=0.0, high=1000.0, low_open=True, applies="next estimate"),
    Param("max_com_radius", NODE_LIMITS.max_com_radius,
          "m, largest CoM distance from the payload frame origin (same rule)",
          low=0.0, high=10.0, low_open=True, applies="next estimate"),
])
"""What counts as a plausible payload (defaults: payload.estimator.NODE_LIMITS): shared by the estimator
(rejects) and the monitor (refuses)."""


def answer(response, call) -> bool:
    """Fill a Trigger ``response`` with ``call()``'s (changed something, message) or its refusal (a
    :class:`errors.PayloadEstimationError`); True if it changed something."""
    try:
        changed, response.message = call()
    except PayloadEstimationError as e:
        changed, response.message = False, str(e)
        response.success = False
    else:
        response.success = True
    return changed


__all__ = ["StatusReporter", "ROBOT_PARAMS", "STREAM_PARAMS", "SETTLE_PARAMS",
           "LIMIT_PARAMS", "settle_config", "steady_timer", "clock_off_executor", "joint_names_for", "LEVEL_NAMES",
           "THROTTLE_S", "answer"]
