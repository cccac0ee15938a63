"""Waiting for the first message of a latched topic (``robot_description``): what the wait means and when to
subscribe again.

A reliable + transient-local subscription is handed the publisher's last message when the two match. Two ways
that never happens, both seen on real graphs:

- the publisher offers another QoS (a plain ``create_publisher(String, ...)`` is volatile): the endpoints never
  match and nothing arrives, ever. Subscribing again does not help; the user must fix the publisher.
- a compatible publisher is there, yet its latched message did not arrive (CI, five node processes on two
  cores: a node waited for its model while its neighbours got theirs). A new subscription is handed the
  message again, so :meth:`LatchedWait.check` asks for one once ``patience`` s have passed without it,
  then after twice as long, up to ``max_patience``.

Plain Python (no rclpy): the node reports the publishers it sees; times are wall s on the caller's
monotonic clock.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import PayloadEstimationError


@dataclass(frozen=True)
class Publisher:
    """A publisher of the topic as the graph reports it: ``node`` (its name) and whether its QoS can
    serve a reliable, transient-local subscription (``reliable``, ``transient_local``)."""

    node: str
    reliable: bool
    transient_local: bool

    @property
    def compatible(self) -> bool:
        return self.reliable and self.transient_local

    def mismatch(self) -> str:
        """What of its QoS keeps the latched message away ('' if nothing)."""
        what = [w for w, ok in (("best-effort reliability", self.reliable),
                                ("volatile durability", self.transient_local)) if not ok]
        return " and ".join(what)


@dataclass
class LatchedWait:
    """The wait for ``topic``'s first message since :meth:`subscribed`; ``resubscribed`` counts the fresh
    subscriptions :meth:`check` asked for."""

    topic: str
    patience: float = 2.0
    max_patience: float = 8.0
    since: float | None = None
    resubscribed: int = 0
    _wait: float = 0.0

    def __post_init__(self):
        if not (0 < self.patience <= self.max_patience):
            raise PayloadEstimationError(f"latched wait: need 0 < patience <= max_patience, got {self.patience} "
                                         f"and {self.max_patience} s")
        self._wait = self.patience

    def subscribed(self, wall: float) -> None:
        """A subscription was created at ``wall`` (the first, or a fresh one)."""
        self.since = wall

    def check(self, wall: float, publishers: list[Publisher]) -> tuple[bool, str]:
        """(subscribe again now, what the wait means in the user's terms) at ``wall`` while no message has
        arrived, given the topic's ``publishers``."""
        waited = 0.0 if self.since is None else wall - self.since
        if not publishers:
            return False, (f"waiting for the robot model on {self.topic}: no node publishes it yet (start "
                           "robot_state_publisher or the driver that publishes it, or set the robot parameter)")
        good = [p for p in publishers if p.compatible]
        if not good:
            bad = "; ".join(f"{p.node or 'a node'} offers {p.mismatch()}" for p in publishers)
            return False, (f"waiting for the robot model on {self.topic}: its publishers cannot deliver it ({bad}); "
                           "this node needs a reliable, transient-local publisher (robot_state_publisher's QoS): "
                           "publish it with that QoS, or set the robot parameter")
        if waited >= self._wait:
            self.resubscribed += 1
            self.since, self._wait = wall, min(2 * self._wait, self.max_patience)
            return True, (f"waiting for the robot model on {self.topic}: {len(good)} publisher(s), but nothing "
                          f"arrived in {waited:.1f} s; subscribed again ({self.resubscribed} time(s)) to be "
                          "handed it anew")
        again = f"; subscribed again {self.resubscribed} time(s)" if self.resubscribed else ""
        return False, f"waiting for the robot model on {self.topic}: {len(good)} publisher(s){again}"


__all__ = ["LatchedWait", "Publisher"]
