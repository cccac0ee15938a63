"""A driver's joint_states as it comes: repeated states dropped, the true rate measured, raw-difference
velocities replaced.

lbr_fri_ros2_stack publishes joint_states at the controller manager's rate (e.g. 400 Hz) while KUKA's FRI
state comes at 100 Hz: each state is published several times with new stamps, and its velocities are a
raw finite difference of the positions. Taken as they are, a momentum observer integrates three zero
steps and one 4x step per state, and p = M(q) q̇ with such velocities, times K = 150, is a 50 N m spike.

:class:`DriverStream` takes one sample at a time (plain numbers, no ROS):

* a **repeated state** -- positions and efforts bit-identical to the previous sample's (a real sensor
  never repeats 14 values exactly) -- is dropped and counted, the first stamp of a state being its time,
  once the stream is known to re-publish: a repeat arrived while the arm moved (a noise-free simulator
  repeats its state at rest: such a stream keeps every sample);
* the **rate** is the median step of the distinct states (:attr:`rate`);
* **velocities**: after ``DECIDE`` moving states, the stream's own are judged: when they equal the
  backward difference of the positions over the distinct states' period (within 5 % + 1e-3 rad/s) in most
  of them on a stream that re-publishes, or when the stream has none, each state is replaced by the
  midpoint of it and the previous one -- t, q and the torque averaged,
  q̇ = Δq/Δt -- so that velocity, position and torque belong to one instant (no half-step lag): the
  observer then sees a consistent sample half a step late.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

DECIDE = 50
"""Moving distinct states after which the stream's velocities are judged."""
RAW_FRACTION = 0.7
"""Share of judged states whose velocity equals the backward difference for it to count as raw differences."""
MOVING = 1e-2
"""rad/s: a state whose backward difference exceeds this on some joint is judged."""


@dataclass(frozen=True)
class StreamSample:
    """One sample for the observer: t (s), q (rad), dq (rad/s), tau (N m), in model order."""

    t: float
    q: np.ndarray
    dq: np.ndarray
    tau: np.ndarray


class DriverStream:
    """Repeated states out, raw-difference velocities replaced (module docstring). Not thread-safe."""

    def __init__(self) -> None:
        self.repeated = 0             # samples dropped as a repeat of the previous state
        self.distinct = 0             # distinct states taken
        self.velocity_source = "undecided"   # "stream", "positions (raw differences in the stream)", "positions (none)"
        self.republishes = False      # a repeat arrived while the arm moved: repeats are dropped from then on
        self._moving = False          # the last distinct step moved
        self._raw = self._judged = 0
        self._steps = np.zeros(64)
        self._prev: StreamSample | None = None
        self._rate = 0.0

    def reset(self) -> None:
        """The stream started over (a restart): forget the previous state, keep what was learnt."""
        self._prev = None

    @property
    def rate(self) -> float:
        """Hz: the distinct states' median rate (0 until 8 steps are known)."""
        return self._rate

    @property
    def derives_velocity(self) -> bool:
        return self.velocity_source.startswith("positions")

    def take(self, t: float, q: np.ndarray, dq: np.ndarray | None, tau: np.ndarray) -> StreamSample | None:
        """The sample for the observer, or None: a repeated state (counted), or the first state of a stream
        whose velocities are derived (it has no previous one)."""
        prev = self._prev
        if prev is not None and np.array_equal(q, prev.q) and np.array_equal(tau, prev.tau):
            if self.republishes or self._moving:
                self.republishes = True
                self.repeated += 1
                return None
            if self.derives_velocity:  # at rest on a stream that does not re-publish: a sample at rest
                return StreamSample(float(t), q, np.zeros_like(q), tau) if t > prev.t else None
            return StreamSample(float(t), q, dq, tau)
        self.distinct += 1
        if dq is None and self.velocity_source == "undecided":
            self.velocity_source = "positions (none in the stream)"
        current = StreamSample(float(t), q, dq, tau)
        self._prev = current
        if prev is None:
            return None if self.derives_velocity else current
        h = current.t - prev.t
        if h <= 0:
            return None if self.derives_velocity else current   # the stamp guard judges the time itself
        self._note_step(h)
        diff = (q - prev.q) / h
        self._moving = self._rate > 0 and float(np.max(np.abs(q - prev.q))) * self._rate > MOVING
        if self.velocity_source == "undecided":
            self._judge(dq, q - prev.q)
        if not self.derives_velocity:
            return current
        return StreamSample(0.5 * (current.t + prev.t), 0.5 * (q + prev.q), diff, 0.5 * (tau + prev.tau))

    def _note_step(self, h: float) -> None:
        k = self.distinct - 2
        self._steps[k % self._steps.size] = h
        if k + 1 in (8, 16, 32) or (k + 1) % self._steps.size == 0:
            self._rate = 1.0 / float(np.median(self._steps[:min(k + 1, self._steps.size)]))

    def _judge(self, dq: np.ndarray, step: np.ndarray) -> None:
        if self._rate <= 0:
            return
        # a driver differences over its own period (FRI's sample time), not over the stamps it publishes
        expected = step * self._rate
        if np.max(np.abs(expected)) < MOVING:
            return
        self._judged += 1
        if np.all(np.abs(dq - expected) <= 0.05 * np.abs(expected) + 1e-3):
            self._raw += 1
        if self._judged >= DECIDE:
            raw = self._raw >= RAW_FRACTION * self._judged
            if raw and self.republishes:
                self.velocity_source = "positions (the stream re-publishes states and differences them)"
            else:
                self.velocity_source = "stream" + (" (raw differences of its positions)" if raw else "")

    def status_values(self) -> dict[str, object]:
        return {"repeated_states": self.repeated, "stream_rate_hz": round(self._rate, 1),
                "velocity_source": self.velocity_source}


__all__ = ["DriverStream", "StreamSample"]
