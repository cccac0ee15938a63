"""A subscription served by its own thread, outside the node's executor (the monitor's 1 kHz input).

rclpy's Python executors rebuild their wait set from every entity of the node on each wake-up
(subscriptions, publishers' and subscriptions' QoS event handlers, parameter services, ...): for the
collision monitor that is ~0.6 ms of CPU per joint_states sample before the callback even starts,
which at 1 kHz fills a core and queues samples behind each other (docs/bench/nodes.md). A dedicated
subscription waits on a wait set holding only its own handle and a stop guard condition, takes the
message and calls the callback in the same thread; the node's other entities stay with the executor.

The subscription belongs to the node (same name resolution, namespace and remapping, listed by
``ros2 node info``) but is not registered in its entity list, so the executor never takes from it.
This uses rclpy's C extension the way ``rclpy.wait_for_message`` does, through :mod:`.rclpy_compat`
(the subscription handle, its take, the wait set). If the interface is not available at all (another rclpy),
:func:`create_dedicated_subscription` falls back to an ordinary executor-served subscription and
says so in the log.

Callbacks run concurrently with the executor's callbacks: guard state shared between them with the
``lock`` passed in (the same lock the node's other callbacks take).
"""

from __future__ import annotations

import atexit
import threading
from collections.abc import Callable
from typing import Any

from rclpy.guard_condition import GuardCondition
from rclpy.node import Node
from rclpy.qos import QoSProfile

from . import rclpy_compat

WAKE_NS = 200_000_000
"""Longest wait (ns) before the thread re-checks that the context is still valid."""


class _TakesNewest:
    """What both subscriptions share: taking the newest of the waiting messages (``_msg_type``, ``_raw``; counts in
    ``taken`` and ``skipped``)."""

    _msg_type: type
    _raw: bool
    taken: int
    skipped: int

    def _take_newest(self, sub, taken):
        """The newest of the messages waiting (``taken`` the first of them); the older ones are counted."""
        while True:
            newer = rclpy_compat.take_message(sub, self._msg_type, self._raw)
            if newer is None:
                return taken
            self.taken += 1
            self.skipped += 1
            taken = newer


class DedicatedSubscription(_TakesNewest):
    """Take ``msg_type`` from ``topic`` in a thread of its own; call ``callback(msg)`` under ``lock``.

    ``with_info``: call ``callback(msg, info)`` instead, ``info`` being rclpy's MessageInfo dict
    (``source_timestamp`` / ``received_timestamp``, ns since the epoch: when the sample was published
    and when it reached this process).

    The thread starts at construction and stops on :meth:`destroy`, on rclpy shutdown, or when the
    context becomes invalid. A subscription still alive when the interpreter exits is destroyed by an
    ``atexit`` hook: a daemon thread left inside rcl's wait at finalization aborts the process
    ("terminate called without an active exception", exit -6 instead of 0).

    An exception in ``callback`` is logged (rate-limited) and the loop goes on: one bad message must
    not end monitoring.

    ``batch`` (s, default 0: every message as it comes): after a wake-up, let messages gather this long
    before taking them all, for a consumer that needs every sample but not at once (the estimator: one
    wake-up per 20 ms instead of per sample at 1 kHz; the queue's depth must hold a batch). Such a
    consumer calls :meth:`flush` before it reads what the samples built (a capture judges the newest).

    ``raw``: the callback gets the serialized message (bytes) instead of a Python message, for a consumer
    that decodes only what it reads (:meth:`.messages.JointStateConverter.convert_raw`).

    ``newest``: of the messages waiting at a take, only the newest is delivered (the others are taken and counted
    in :attr:`skipped`): for a state that each message replaces (``/clock``), with ``batch`` one callback per batch.
    """

    def __init__(self, node: Node, msg_type: type, topic: str, callback: Callable[[Any], None],
                 qos: QoSProfile, lock: threading.Lock, with_info: bool = False, batch: float = 0.0,
                 raw: bool = False, newest: bool = False):
        self._node = node
        self._msg_type = msg_type
        self._callback = callback
        self._lock = lock
        self._with_info = with_info
        self._batch = float(batch)
        self._raw = bool(raw)
        self._newest = bool(newest)
        self.skipped = 0
        """Messages taken but not delivered (``newest``: a newer one was waiting)."""
        self._take_lock = threading.Lock()  # the thread's and flush()'s takes, each delivered in order
        self.topic = node.resolve_topic_name(topic)
        self._handle = rclpy_compat.c_subscription(node, msg_type, topic, qos)
        self._stop = threading.Event()
        self._wake = GuardCondition(None, None, context=node.context)
        node.context.on_shutdown(self._request_stop)
        self.taken = 0
        """Messages taken so far (for diagnostics and tests)."""
        self.faults = 0
        """Failed waits or takes (logged at ERROR; the thread goes on): it never ends silently."""
        self._thread = threading.Thread(target=self._run, name=f"{node.get_name()}:{self.topic}", daemon=True)
        self._thread.start()
        self._destroyed = False
        atexit.register(self.destroy)

    def _request_stop(self) -> None:
        self._stop.set()
        try:
            self._wake.trigger()
        except Exception:  # noqa: BLE001 - the guard condition may already be gone at shutdown
            pass

    def _stopping(self) -> bool:
        return self._stop.is_set() or not self._node.context.ok()

    def _run(self) -> None:
        ws = rclpy_compat.c_wait_set(self._node)

        def failed(e: Exception) -> None:
            self.faults += 1
            _say_wait_failed(self._node, self.topic, e, self._stop)

        while not self._stopping():
            got = _wait_for_message(ws, self._handle, self._wake, self._stopping, failed)
            if got == "stop" or self._stop.is_set():
                break
            if got == "idle":
                continue
            if self._batch > 0 and self._stop.wait(self._batch):
                break
            if not self._drain():
                return

    def flush(self) -> int:
        """Take the messages waiting now and deliver them in this thread (under the lock, in order with the
        subscription's own thread); returns how many. Call it without holding the lock."""
        before = self.taken
        if not self._destroyed:
            self._drain()
        return self.taken - before

    def _drain(self) -> bool:
        """Take and deliver every message waiting; False when shutting down."""
        sub, log = self._handle, self._node.get_logger()
        with self._take_lock:
            while True:
                try:
                    taken = rclpy_compat.take_message(sub, self._msg_type, self._raw)
                except Exception as e:  # noqa: BLE001 - handle destroyed under us at shutdown; otherwise: go on
                    if self._stopping():
                        return False
                    self.faults += 1
                    log.error(f"{self.topic}: taking a message failed ({type(e).__name__}: {e}); message dropped",
                              throttle_duration_sec=2.0)
                    return True
                if self._newest and taken is not None:
                    taken = self._take_newest(sub, taken)
                if taken is None:
                    return True
                self.taken += 1
                try:
                    with self._lock:
                        if self._with_info:
                            self._callback(*taken)
                        else:
                            self._callback(taken[0])
                except Exception as e:  # noqa: BLE001
                    if self._stopping():
                        return False  # shutting down: publishers in the callback are already gone
                    log.error(f"{self.topic} callback failed: {type(e).__name__}: {e}", throttle_duration_sec=2.0)

    def destroy(self) -> None:
        """Stop the thread and destroy the subscription handle (idempotent)."""
        if self._destroyed:
            return
        self._destroyed = True
        atexit.unregister(self.destroy)
        self._request_stop()
        if self._thread is not threading.current_thread():
            self._thread.join(timeout=2.0)
        with self._take_lock:
            rclpy_compat.destroy_c_subscription(self._handle)
        self._wake.destroy()


def _wait_for_message(ws, handle, wake, stopping: Callable[[], bool], failed: Callable[[Exception], None]) -> str:
    """One wait of a subscription thread on ``ws`` (its subscription ``handle`` and guard condition ``wake``), at
    most WAKE_NS: "ready" (a message waits), "idle" (none, or a failed wait: ``failed`` said it) or "stop" (the
    wait failed because the node is stopping)."""
    try:
        ready = rclpy_compat.wait_ready(ws, handle, wake, WAKE_NS)
    except Exception as e:  # noqa: BLE001 - context shut down while waiting; otherwise: say so, go on
        if stopping():
            return "stop"
        failed(e)
        return "idle"
    return "ready" if ready else "idle"


def _say_wait_failed(node: Node, topic: str, e: Exception, stop: threading.Event) -> None:
    node.get_logger().error(f"{topic}: waiting for messages failed ({type(e).__name__}: {e}); retrying",
                            throttle_duration_sec=2.0)
    stop.wait(0.01)  # a wait that keeps failing must not spin a core


def create_dedicated_subscription(node: Node, msg_type: type, topic: str, callback: Callable[[Any], None],
                                  qos: QoSProfile, lock: threading.Lock, batch: float = 0.0, raw: bool = False
                                  ) -> DedicatedSubscription | None:
    """A :class:`DedicatedSubscription` (``batch``, ``raw``: its own), or None after creating an ordinary
    subscription instead (``raw`` passed on: the callback gets the same either way).

    The fallback wraps ``callback`` in ``lock`` too, so the node's code is the same either way.
    """
    try:
        return DedicatedSubscription(node, msg_type, topic, callback, qos, lock, batch=batch, raw=raw)
    except (ImportError, AttributeError, TypeError) as e:
        node.get_logger().warning(f"dedicated {topic} subscription unavailable in this rclpy ({e}); "
                                  "using the executor (higher latency at 1 kHz)")

        def locked(msg):
            with lock:
                callback(msg)

        node.create_subscription(msg_type, topic, locked, qos, raw=raw)
        return None


class PolledSubscription(_TakesNewest):
    """A subscription the executor never waits on: messages wait in the middleware's queue (``qos`` depth, the
    newest kept) until :meth:`take_all` takes them, so an idle node pays nothing in Python for a 1 kHz stream.
    While :meth:`arm` ed, a thread of its own waits for a message and calls ``notify()`` (e.g. a guard condition's
    ``trigger``: the executor then takes the queue on its own thread), once per queue: it waits again only after
    :meth:`take_all` ran (or 0.2 s later). Created at start-up and kept: arming needs no new discovery.
    ``batch`` (s): after a message arrived, let more gather this long before ``notify()`` (one wake-up of the
    executor for several samples; the QoS depth must hold them).
    """

    def __init__(self, node: Node, msg_type: type, topic: str, qos: QoSProfile, notify: Callable[[], None],
                 batch: float = 0.0):
        self._node = node
        self._msg_type = msg_type
        self._notify = notify
        self._batch = float(batch)
        self.topic = node.resolve_topic_name(topic)
        self._handle = rclpy_compat.c_subscription(node, msg_type, topic, qos)
        self._take_lock = threading.Lock()
        self._arm_lock = threading.Lock()  # no notify() after disarm() returned
        self._armed = threading.Event()
        self._taken = threading.Event()
        self._stop = threading.Event()
        self._wake = GuardCondition(None, None, context=node.context)
        node.context.on_shutdown(self._request_stop)
        self.taken = 0
        """Messages taken so far."""
        self._destroyed = False
        self._thread = threading.Thread(target=self._run, name=f"{node.get_name()}:{self.topic}:poll", daemon=True)
        self._thread.start()
        atexit.register(self.destroy)

    @property
    def armed(self) -> bool:
        return self._armed.is_set()

    def arm(self) -> None:
        """Wake the executor (``notify``) whenever a message waits, from now on."""
        self._armed.set()
        self._taken.set()
        self._kick()

    def disarm(self) -> None:
        """Stop waking the executor: messages wait until taken (no ``notify()`` after this returns)."""
        with self._arm_lock:
            self._armed.clear()
        self._kick()

    def take_all(self) -> list:
        """The messages waiting (oldest first; at most the QoS depth, the newest), taken now ([] at shutdown)."""
        out = []
        with self._take_lock:
            if self._destroyed:
                return out
            while True:
                try:
                    got = rclpy_compat.take_message(self._handle, self._msg_type, False)
                except Exception:  # noqa: BLE001 - handle destroyed or context shut down under us
                    break
                if got is None:
                    break
                out.append(got[0])
        self.taken += len(out)
        self._taken.set()
        return out

    def _kick(self) -> None:
        try:
            self._wake.trigger()
        except Exception:  # noqa: BLE001 - destroyed at shutdown
            pass

    def _request_stop(self) -> None:
        self._stop.set()
        self._armed.set()  # out of the idle wait
        self._taken.set()
        self._kick()

    def _stopping(self) -> bool:
        return self._stop.is_set() or not self._node.context.ok()

    def _run(self) -> None:
        ws = rclpy_compat.c_wait_set(self._node)
        while not self._stopping():
            if not self._armed.wait(0.2):
                continue
            self._taken.wait(0.2)  # the executor took the previous queue (or is late: wake it again)
            if self._stopping():
                break
            got = _wait_for_message(ws, self._handle, self._wake, self._stopping,
                                    lambda e: _say_wait_failed(self._node, self.topic, e, self._stop))
            if got == "stop":
                break
            if got == "ready" and self._armed.is_set():
                if self._batch > 0 and self._stop.wait(self._batch):
                    break
                with self._arm_lock:
                    if not self._armed.is_set():
                        continue
                    self._taken.clear()
                    try:
                        self._notify()
                    except Exception:  # noqa: BLE001 - the node's guard condition is gone at shutdown
                        if self._stopping():
                            break
                        raise

    def destroy(self) -> None:
        """Stop the thread and destroy the subscription handle (idempotent)."""
        if self._destroyed:
            return
        atexit.unregister(self.destroy)
        self._request_stop()
        if self._thread is not threading.current_thread():
            self._thread.join(timeout=2.0)
        with self._take_lock:
            self._destroyed = True
            rclpy_compat.destroy_c_subscription(self._handle)
        self._wake.destroy()
