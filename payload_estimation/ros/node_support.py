"""What every node of the package shares: its robot model, its joint_states input, its status.

- :class:`RobotModelSource` — the model from the ``robot`` parameter (a shipped name or a file), or,
  when that is empty, from the ``robot_description`` topic (std_msgs/String, reliable +
  transient-local, in the node's namespace: what robot_state_publisher offers). Until a model is
  there the node says so and refuses its services with that reason.
- :class:`JointStateInput` — joint_states mapped by name onto the model, with the stamp guard
  (:class:`stream.StampGuard`: future stamps, steps back, restarts) and the wall-clock watchdog;
  everything it drops is counted and logged (rate-limited).
- :class:`StatusReporter` — ``~/status`` (latched) and ``/diagnostics``, on every event and
  periodically (1 Hz, steady clock: also while ``/clock`` stands still).
"""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue
from rclpy.clock import Clock, ClockType
from rclpy.qos import DurabilityPolicy, ReliabilityPolicy
from sensor_msgs.msg import JointState
from std_msgs.msg import String

from ..errors import PayloadEstimationError
from ..model import RobotDescription, load_robot, robot_from_description
from ..payload.estimator import NODE_LIMITS
from ..signals import SettleConfig
from ..stream import StampGuard, StampVerdict, StreamTimeout, StreamWatchdog
from ..stream.driver_stream import DriverStream
from ..stream.latched_wait import LatchedWait, Publisher
from . import rclpy_compat
from .messages import JointSample, JointStateConverter, clock_stamp
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

    from rclpy.qos import QoSProfile, ReliabilityPolicy
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


class RobotModelSource:
    """The node's robot model, now (``robot`` set) or once ``robot_description`` arrives.

    ``on_model(desc)`` runs for every model taken; it may raise :class:`ParameterError` to refuse a
    model (nothing is replaced then). Every later ``robot_description`` message is judged, because
    real graphs publish it more than once (the simulator and robot_state_publisher both; a restarted
    robot_state_publisher again): the same text or the same model is ignored, a changed model is
    taken (logged with what changed), a malformed or refused one is logged at ERROR, counted and shown
    in the status while the current model is kept. ``busy()`` returning True defers a new
    description (e.g. while sampling); it is taken once the node is idle (:meth:`retry`, also called
    by a timer every :data:`RETRY_PERIOD` s). Until the first model arrives the same timer says what the wait
    means (no publisher, a publisher with another QoS) and subscribes again when a compatible publisher's latched
    message does not come (:class:`stream.latched_wait.LatchedWait`).
    """

    def __init__(self, node, values: dict, on_model: Callable[[RobotDescription], None],
                 busy: Callable[[], bool] = lambda: False):
        self.node = node
        self.on_model = on_model
        self.busy = busy
        self.base_link = values.get("base_link") or None
        self.tip_link = values.get("tip_link") or None
        self.desc: RobotDescription | None = None
        self.source = ""
        self.error = ""
        self.text = ""  # the robot_description text of the current model ("" when not from the topic)
        self.refused = 0
        self.last_refused = ""
        self._refused_text: str | None = None  # the newest refused text: logged once, counted every time
        self.ignored = 0
        self._deferred: str | None = None
        self._subscription = None
        self._wait: LatchedWait | None = None
        status = getattr(node, "status", None)
        if isinstance(status, StatusReporter):  # the node's status shows what happened to its descriptions
            status.extra.append(self.status_values)
        robot = values.get("robot", "")
        if robot:
            try:
                desc = load_robot(robot, self.base_link, self.tip_link)
            except (OSError, PayloadEstimationError) as e:
                raise ParameterError(f"parameter robot: {e}" if robot in str(e) else f"robot {robot!r}: {e}") from e
            self._take(desc, f"robot parameter ({robot})")
        else:
            self._wait = LatchedWait(self._topic())
            self._subscribe()
            steady_timer(node, RETRY_PERIOD, self.retry)
            self.error = f"waiting for the robot model on {self._topic()}"
            node.get_logger().warning(self.error)

    @property
    def ready(self) -> bool:
        return self.desc is not None

    def _topic(self) -> str:
        return self.node.resolve_topic_name("robot_description")

    def _subscribe(self) -> None:
        if self._subscription is not None:
            self.node.destroy_subscription(self._subscription)
        self._subscription = self.node.create_subscription(String, "robot_description", self._on_description,
                                                           LATCHED_QOS)
        self._wait.subscribed(time.monotonic())

    def _publishers(self) -> list[Publisher]:
        return [Publisher(i.node_name, i.qos_profile.reliability == ReliabilityPolicy.RELIABLE,
                          i.qos_profile.durability == DurabilityPolicy.TRANSIENT_LOCAL)
                for i in self.node.get_publishers_info_by_topic(self._topic())]

    def _check_wait(self) -> None:
        """No model yet: what the wait means (the status says it), and a fresh subscription when a compatible
        publisher's latched message has not come."""
        again, text = self._wait.check(time.monotonic(), self._publishers())
        if again:
            self._subscribe()
            self.node.get_logger().warning(text)
        elif text != self.error:
            self.node.get_logger().warning(text, throttle_duration_sec=10.0)
        self.error = text

    def status_values(self) -> dict[str, object]:
        """Status keys: where the model came from, descriptions refused (count, last reason) and pending."""
        return {"robot_model": f"{self.desc.name} (from the {self.source})" if self.desc else "none",
                "robot_description_resubscribed": 0 if self._wait is None else self._wait.resubscribed,
                "robot_descriptions_refused": self.refused, "robot_description_last_refused": self.last_refused,
                "robot_description_pending": "changed model, taken when idle" if self._deferred is not None else ""}

    def _on_description(self, msg: String) -> None:
        if self.desc is not None and msg.data == self.text:
            self._deferred = None  # the newest description is the current one again
            self._ignore("the same text")
            return
        if self.desc is not None and self.busy():
            if self._deferred is None:
                self.node.get_logger().warning(f"{self._topic()} changed while busy: taken when idle")
            self._deferred = msg.data
            return
        self._deferred = None
        self._load_text(msg.data)

    def retry(self) -> None:
        """Take a description deferred while busy, if the node is idle now; without any model yet, check the
        wait."""
        if self.desc is None and self._wait is not None and not self.refused:
            self._check_wait()
        if self._deferred is not None and not self.busy():
            text, self._deferred = self._deferred, None
            self._load_text(text)

    def _ignore(self, what: str) -> None:
        self.ignored += 1
        self.node.get_logger().info(f"{self._topic()} re-published with {what}: current model kept",
                                    throttle_duration_sec=THROTTLE_S)

    def _load_text(self, text: str) -> None:
        try:
            desc = robot_from_description(text, self.base_link, self.tip_link, source=self._topic())
        except Exception as e:  # noqa: BLE001 -- whatever the graph publishes must not stop the node
            self._refuse(_reason(e), text)
            return
        if self.desc is None:
            self._take(desc, "robot_description topic", text)
            return
        changes = model_changes(self.desc, desc)
        if not changes:
            self.text = text
            self._ignore("the same model")
            return
        if desc.joint_names != self.desc.joint_names:
            self._refuse(another_arm(self.desc, desc), text)
            return
        self._take(desc, "robot_description topic", text, changes)

    def _refuse(self, why: str, text: str) -> None:
        """A description that cannot be used: ERROR (once per text), counted, in the status; the current model
        stays."""
        self.refused += 1
        kept = (f"keeping the current model {self.desc.name} (from the {self.source})" if self.desc is not None
                else "no robot model yet")
        self.last_refused = f"{why}; {kept}"
        if text != self._refused_text:
            self.node.get_logger().error(f"robot_description refused: {self.last_refused}. Publish a valid URDF of "
                                         "this robot (or set the robot parameter)")
        self._refused_text = text
        if self.desc is None:
            self.error = f"robot_description rejected: {why}"
        status = getattr(self.node, "status", None)
        if isinstance(status, StatusReporter):
            status.publish()

    def _take(self, desc: RobotDescription, source: str, text: str = "", changes: list[str] | None = None) -> None:
        changed = self.desc is not None
        try:
            self.on_model(desc)  # may raise ParameterError (e.g. joint_names) before anything is replaced
        except Exception as e:  # noqa: BLE001 -- e.g. pinocchio refusing an inertia: the old model stays
            if not text:  # the robot parameter at start-up: the node cannot start
                raise
            self._refuse(_reason(e), text)
            return
        self.desc, self.source, self.error, self.text = desc, source, "", text
        what = f" ({'; '.join(changes)})" if changes else ""
        self.node.get_logger().info(f"robot model {'replaced' if changed else 'loaded'}{what}: {desc.name}, "
                                    f"{desc.n} joints, payload frame {desc.payload_frame_name} (from the {source})")
        log_notes(self.node.get_logger(), desc.notes)  # what loading decided: a URDF's default tip and why, ...


def another_arm(current: RobotDescription, new: RobotDescription) -> str:
    """Why a running node refuses a description of other joints: it runs on the arm whose stream it reads."""
    return (f"it describes another arm ({new.name}: {new.n} joints {list(new.joint_names)}) than the one this node "
            f"runs on ({current.name}: {current.n} joints {list(current.joint_names)}); a second arm's "
            "robot_state_publisher in this namespace? Give each arm its own namespace, or restart the node to change "
            "arms")


def _reason(e: Exception) -> str:
    """An exception as a reason: its message (with its type when it is not one of ours)."""
    return str(e) if isinstance(e, PayloadEstimationError) else f"{type(e).__name__}: {e}"


def model_changes(old: RobotDescription, new: RobotDescription, atol: float = 1e-9) -> list[str]:
    """What differs between two robot models, in words (e.g. ``link masses changed (link 7: 0.3 -> 0.5 kg)``);
    [] for the same model (numbers equal within ``atol``)."""
    out = []
    if old.name != new.name:
        out.append(f"robot name changed ({old.name} -> {new.name})")
    if old.joint_names != new.joint_names:
        out.append(f"joint names changed ({list(old.joint_names)} -> {list(new.joint_names)})")
    if old.n == new.n:
        def differ(get) -> list[int]:
            return [i for i in range(old.n) if not _close(get(old, i), get(new, i), atol)]

        kin = differ(lambda d, i: np.concatenate([d.joints[i].pre.ravel(), d.joints[i].axis.ravel(),
                                                  d.joints[i].post.ravel()]))
        if kin:
            out.append(f"kinematics changed (joints {_indices(kin)})")
        masses = differ(lambda d, i: d.links[i].mass)
        if masses:
            out.append("link masses changed (" + ", ".join(
                f"link {i + 1}: {old.links[i].mass:g} -> {new.links[i].mass:g} kg" for i in masses[:3])
                + (", ..." if len(masses) > 3 else "") + ")")
        for label, get in (("link CoMs", lambda d, i: d.links[i].com),
                           ("link inertias", lambda d, i: d.links[i].inertia_com)):
            idx = differ(get)
            if idx:
                out.append(f"{label} changed (links {_indices(idx)})")
        lim = differ(lambda d, i: np.concatenate([d.limits.position[i], [d.limits.velocity[i], d.limits.effort[i]]]))
        if lim:
            out.append(f"joint limits changed (joints {_indices(lim)})")
    for label, a, b in (("gravity", old.gravity, new.gravity), ("flange", old.flange, new.flange),
                        ("payload frame", old.payload_frame, new.payload_frame)):
        if not _close(a, b, atol):
            out.append(f"{label} changed")
    if old.payload_frame_name != new.payload_frame_name:
        out.append(f"payload frame name changed ({old.payload_frame_name} -> {new.payload_frame_name})")
    return out


def _close(a, b, atol: float) -> bool:
    a, b = np.asarray(a, float), np.asarray(b, float)
    return a.shape == b.shape and bool(np.allclose(a, b, rtol=0.0, atol=atol))


def _indices(idx: list[int]) -> str:
    return ", ".join(str(i + 1) for i in idx)


class JointStateInput:
    """joint_states -> (verdict, t, sample) in model order; counts and logs what it drops. A driver's repeated
    states are dropped and its raw-difference velocities replaced (:class:`stream.driver_stream.DriverStream`)."""

    def __init__(self, node, joint_names, values: dict, require_velocity: bool = True,
                 require_effort: bool = True):
        self.node = node
        self.converter = JointStateConverter(joint_names, require_velocity, require_effort)
        self.guard = StampGuard(float(values["max_stamp_jump"]), int(values["restart_samples"]))
        self.timeout = StreamTimeout(float(values["joint_state_timeout"]))
        self.stream = DriverStream()
        self._rate = 0.0  # Hz, the stream's rate the watchdog's automatic timeout was set for
        self.watchdog = StreamWatchdog(self.timeout.effective(self._rate))
        self._velocity_source = "stream"  # logged when it changes from what a plain stream is
        self._stream_key = self._stream_state()
        self._restart = False  # a restart whose first sample the stream kept back: said with the next one
        self.bad_messages = 0
        self._blind = False  # the loss was reported by lost_changed
        self._created = time.monotonic()

    def configure(self, values: dict) -> None:
        """Apply changed STREAM_PARAMS values (from the next sample on)."""
        self.guard.max_jump = float(values["max_stamp_jump"])
        self.guard.confirm = int(values["restart_samples"])
        self.timeout = StreamTimeout(float(values["joint_state_timeout"]))
        self.watchdog.timeout = self.timeout.effective(self.stream.rate)

    def receive(self, msg: JointState) -> tuple[StampVerdict, float, JointSample] | None:
        """A message in; None if it cannot be used (logged). HOLD: a time fault, held out of use."""
        wall = time.monotonic()
        got = self.converter.receive(msg, self.node, THROTTLE_S)
        if got is None:
            self.bad_messages += 1
            return None
        if self.watchdog.feed(wall):
            self.node.get_logger().info("joint_states are back")
        t, s = got
        verdict = self.guard.check(t, wall)
        if verdict is StampVerdict.HOLD:
            self.node.get_logger().warning(
                f"joint_states time fault, sample held out: {self.guard.counters.last_fault}",
                throttle_duration_sec=THROTTLE_S)
            return verdict, t, s
        if verdict is StampVerdict.RESTART:
            self.node.get_logger().warning(f"joint_states {self.guard.counters.last_fault}: re-initialising")
            self.stream.reset()
        taken = self.stream.take(t, s.q, s.dq, s.tau)
        if self.stream.rate != self._rate:  # measured anew (a few times at the start, then every 64 states)
            self._rate = self.stream.rate
            self.watchdog.timeout = self.timeout.effective(self._rate)
        key = self._stream_state()  # velocity_source's text only when what it is made of changed (every sample)
        if key != self._stream_key and self.stream.velocity_source not in (self._velocity_source, "undecided"):
            self._velocity_source = self.stream.velocity_source
            self.node.get_logger().info(
                f"joint_states: {self.stream.rate:.0f} Hz of distinct states, {self.stream.repeated} repeated states "
                f"dropped so far; velocities: {self._velocity_source}")
        self._stream_key = key
        if taken is None:
            self._restart = self._restart or verdict is StampVerdict.RESTART
            return None
        if self._restart:
            verdict, self._restart = StampVerdict.RESTART, False
        if taken.t != t:
            t, s = taken.t, JointSample(taken.t, taken.q, taken.dq, taken.tau)
        return verdict, t, s

    def _stream_state(self) -> tuple:
        """What the driver stream's ``velocity_source`` text is made of."""
        st = self.stream
        return st.has_velocity, st.republishes, st.raw_differences

    def note(self, msg: JointState) -> JointSample | None:
        """A message taken on demand, outside the stream's sequence (a node that polls the newest state while idle):
        converted and its arrival noted for the watchdog; the stamp guard and the driver stream do not see it (they
        judge consecutive samples). None if it cannot be used (logged, counted)."""
        got = self.converter.receive(msg, self.node, THROTTLE_S)
        if got is None:
            self.bad_messages += 1
            return None
        if self.watchdog.feed(time.monotonic()):
            self.node.get_logger().info("joint_states are back")
        t, s = got
        return s if s.stamp == t else JointSample(t, s.q, s.dq, s.tau)

    def resume(self) -> None:
        """Every sample is taken again after a while of :meth:`note` alone: the next is judged as a stream's first
        (the stamp guard and the driver stream forget the samples before; their counters stay)."""
        self.guard.reset()
        self.stream.reset()

    def lost(self) -> bool:
        """True once no joint_states arrived for ``joint_state_timeout`` s of wall time while this node ran (its own
        lateness does not count: :meth:`awake`)."""
        return self.watchdog.lost(time.monotonic())

    def age(self) -> float | None:
        """Wall s since the newest joint_states (None: none yet)."""
        return self.watchdog.age(time.monotonic())

    def awake(self, period: float) -> bool:
        """The node's periodic check (every ``period`` s) runs now; True when it came late: the node itself was
        starved (executor blocked, machine busy), and the stream's silence until now does not count as a loss
        (:class:`stream.watchdog.StreamWatchdog`; status ``late_checks``, ``late_max_s``)."""
        late = self.watchdog.awake(time.monotonic(), period)
        if late:
            self.node.get_logger().warning(
                f"this node ran {self.watchdog.late_max:.2f} s late at most (the machine busy or its executor "
                "blocked): joint_states silent meanwhile are not counted as lost", throttle_duration_sec=10.0)
        return late

    def silent(self) -> float | None:
        """Wall s the stream has been silent while this node ran (None: no joint_states yet)."""
        return self.watchdog.silent(time.monotonic())

    def problem(self) -> str:
        """What is wrong with the stream for a status line ("": nothing): none for ``joint_state_timeout`` s since
        this input was made (the robot model loaded), or the newest older than that."""
        now = time.monotonic()
        if self.watchdog.age(now) is None:
            missing = now - self._created > self.watchdog.timeout
            return f"no joint_states received in {now - self._created:.0f} s" if missing else ""
        return "joint_states lost" if self.watchdog.lost(now) else ""

    def lost_changed(self, wall: float | None = None) -> bool | None:
        """For a watchdog timer at ``wall`` (monotonic s; None: now): True once when the stream is found lost (none
        yet, or none for ``joint_state_timeout`` s), False once when it is back, None while nothing changed."""
        lost = self.watchdog.lost(time.monotonic() if wall is None else wall)
        if lost == self._blind:
            return None
        self._blind = lost
        return lost

    def counters(self) -> dict[str, object]:
        c = self.guard.counters
        return {"joint_states_age_s": self.age(), "joint_state_timeout_s": round(self.watchdog.timeout, 3),
                "joint_state_timeout_from": self.timeout.describe(self._rate),
                "joint_states_losses": self.watchdog.losses,
                "late_checks": self.watchdog.late, "late_max_s": round(self.watchdog.late_max, 3),
                "bad_messages": self.bad_messages, **self.stream.status_values(), "stamp_faults_held": c.held,
                "stamp_faults_rejected": c.rejected, "stream_restarts": c.restarts,
                "last_time_fault": c.last_fault}


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


__all__ = ["RobotModelSource", "JointStateInput", "StatusReporter", "ROBOT_PARAMS", "STREAM_PARAMS", "SETTLE_PARAMS",
           "LIMIT_PARAMS", "settle_config", "steady_timer", "clock_off_executor", "joint_names_for", "LEVEL_NAMES",
           "THROTTLE_S", "answer"]
