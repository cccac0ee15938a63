"""The node's robot model: from the ``robot`` parameter (a shipped name or a file), or, when that is empty, from the
``robot_description`` topic (std_msgs/String, reliable + transient-local, in the node's namespace: what
robot_state_publisher offers). Until a model is there the node says so and refuses its services with that reason.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np
from rclpy.qos import DurabilityPolicy, ReliabilityPolicy
from std_msgs.msg import String

from ..errors import PayloadEstimationError
from ..model import RobotDescription, load_robot, robot_from_description
from ..stream.latched_wait import LatchedWait, Publisher
from .node_support import RETRY_PERIOD, THROTTLE_S, StatusReporter, log_notes, steady_timer
from .parameters import ParameterError
from .qos import LATCHED_QOS


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
