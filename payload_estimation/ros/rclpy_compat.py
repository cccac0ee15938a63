"""Every rclpy internal the nodes use, each behind one function (issue 49): a new ROS release that changes one
fails here and in ``test/unit/test_rclpy_compat.py``, nowhere else (``test_architecture`` checks that no other
module names them).

Checked on rclpy 9.1.2 (Kilted, ``.venv``) by ``test_rclpy_compat``. Jazzy (rclpy 7, ``.venv-jazzy`` made by
``.ci/venv-jazzy``) runs the same test in CI's Jazzy unit run; the C subscription constructor's two forms are the
one difference known there (:func:`c_subscription`). Each function's docstring says what its caller falls back to
when the internal is missing.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rclpy.node import Node
from rclpy.qos import QoSProfile


def c_extension():
    """rclpy's C extension module (``rclpy.impl.implementation_singleton.rclpy_implementation``), the way
    ``rclpy.wait_for_message`` uses it. Missing: ``ImportError``/``AttributeError``, on which a dedicated
    subscription falls back to an executor-served one (:func:`.dedicated_subscription.create_dedicated_subscription`)
    and /clock stays with the executor (:func:`.node_support.clock_off_executor`)."""
    from rclpy.impl.implementation_singleton import rclpy_implementation
    return rclpy_implementation


def c_subscription(node: Node, msg_type: type, topic: str, qos: QoSProfile):
    """A C subscription handle of ``node`` that is not in the node's entity list (the executor never takes from
    it). Kilted and later take content-filter options (None here); Jazzy's constructor (rclpy 7) has no such
    argument. Missing: ``TypeError``/``AttributeError``, the same fallback as :func:`c_extension`."""
    from rclpy.type_support import check_is_valid_msg_type

    check_is_valid_msg_type(msg_type)  # also loads the type support the C constructor needs
    impl = c_extension()
    c_qos = qos.get_c_qos_profile()
    with node.handle:
        try:
            return impl.Subscription(node.handle, msg_type, topic, c_qos, None)
        except TypeError:  # Jazzy (rclpy 7): (node, msg_type, topic, qos)
            return impl.Subscription(node.handle, msg_type, topic, c_qos)


def take_message(handle, msg_type: type, raw: bool) -> tuple[Any, Any] | None:
    """``(message, message info)`` of the oldest message waiting on a :func:`c_subscription` handle (``raw``:
    the serialized bytes), None when none waits. Only reached once :func:`c_subscription` worked (no fallback)."""
    return handle.take_message(msg_type, raw)


def destroy_c_subscription(handle) -> None:
    """Destroy a :func:`c_subscription` handle once no wait uses it."""
    handle.destroy_when_not_in_use()


def c_wait_set(node: Node):
    """A C wait set for one subscription and one guard condition in ``node``'s context (made once per thread).
    Missing: it raises at the start of the subscription's thread, which then ends (Python prints the traceback;
    nothing more is taken from that subscription): no fallback, as before this module; the unit test is the guard."""
    return c_extension().WaitSet(1, 1, 0, 0, 0, 0, node.context.handle)


def wait_ready(ws, handle, guard, timeout_ns: int) -> bool:
    """Wait on ``ws`` for a message on ``handle`` or a trigger of ``guard`` (a ``rclpy.guard_condition.
    GuardCondition``), at most ``timeout_ns``; True when a message waits. A failed wait raises (the caller
    tells a shutdown from a fault)."""
    ws.clear_entities()
    ws.add_subscription(handle)
    ws.add_guard_condition(guard.handle)
    ws.wait(timeout_ns)
    return handle.pointer in ws.get_ready_entities("subscription")


def parameter_overrides(node: Node) -> dict[str, Any]:
    """The start-up values given to ``node`` (parameter files and ``-p``), name -> ``rclpy.parameter.Parameter``:
    rclpy's own dict (``Node._parameter_overrides``), so a value replaced in it is the one ``declare_parameter``
    takes. Missing: an empty dict (start-up values then reach rclpy's own type and range checks unconverted, and
    names no node has are not reported)."""
    return getattr(node, "_parameter_overrides", {})


def replace_service_callback(node: Node, srv_type: type, name: str, callback: Callable[[Any, Any], Any]) -> int:
    """Serve ``node``'s own service ``~/name`` of ``srv_type`` (one rclpy created, e.g. ``~/set_parameters``) by
    ``callback(request, response)``: the service stays, the callback the executor calls (``Service.callback``) is
    replaced. Returns how many services were replaced; 0 (no such service) leaves rclpy's own handler."""
    suffix, n = f"{node.get_name()}/{name}", 0
    for srv in node.services:
        if srv.srv_type is srv_type and srv.service_name.endswith(suffix):
            srv.callback = callback
            n += 1
    return n


def time_source_clock_callback(node: Node) -> Callable[[Any], None] | None:
    """The callback of ``node``'s time source for a /clock message (``TimeSource.clock_callback``) while the time
    source has a /clock subscription of its own (``Node._time_source``, ``TimeSource._clock_sub``: under
    ``use_sim_time``); None otherwise or when either internal is missing (the executor then serves /clock as
    usual)."""
    ts = getattr(node, "_time_source", None)
    if getattr(ts, "_clock_sub", None) is None or not callable(getattr(ts, "clock_callback", None)):
        return None
    return ts.clock_callback


def drop_time_source_clock_subscription(node: Node) -> None:
    """Destroy the /clock subscription of ``node``'s time source (after :func:`time_source_clock_callback` gave
    its callback to a subscription that replaces it). A later ``use_sim_time`` change makes rclpy's own again."""
    ts = node._time_source
    node.destroy_subscription(ts._clock_sub)
    ts._clock_sub = None
