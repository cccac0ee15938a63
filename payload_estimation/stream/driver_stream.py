"""A driver's joint_states as it comes: repeated states dropped, the true rate measured, raw-difference
velocities replaced.

lbr_fri_ros2_stack publishes joint_states at the controller manager's rate (e.g. 400 Hz) while KUKA's FRI
state comes at 100 Hz: each state is published several times with new stamps, and its velocities are a
raw finite difference of the positions. Taken as they are, a momentum observer integrates three zero
steps and one 4x step per state, and p = M(q) q̇ with such velocities, times K = 150, is a 50 N m spike.

:class:`DriverStream` takes one sample at a time (plain numbers, no ROS):

* a **repeated state** -- positions and efforts bit-identical to the previous sample's (a real sensor
  never repeats 14 values exactly) -- is dropped and counted, the first stamp of a state being its time,
  once the stream is known to re-publish: ``RUNS`` states in a row each sent the same number of times
  (>= 2), or a repeat while the arm moved (a noise-free simulator repeats its state at rest without end:
  such a stream keeps every sample);
* the **rate** is the median step of the distinct states (:attr:`rate`);
* **velocities**: on a stream that re-publishes (its velocities belong to the driver's period, not to
  the stamps it publishes) or has none, the velocity of state k is the central difference
  (q_k+1 - q_k-1) / (t_k+1 - t_k-1), with its own t, q and torque: all of one instant, given one state late
  (10 ms at 100 Hz). A backward difference lags half a step: on a real LBR Med 7's motion start (elastic
  joints ringing at ~50 Hz) it gave 17.5 N m of residual where the central difference gives 13.7, below the
  3-sample confirmation (the offline ``residual`` command differentiates the same way). Whether the
  stream's own velocities are raw differences of its positions (within 5 % + 1e-3 rad/s over the distinct
  states' period, in most of ``DECIDE`` moving states) is judged and said in the status.
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
RUNS = 8
"""Completed runs of one equal length (>= 2 messages per state) that show a stream re-publishing its states."""


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
        self.republishes = False      # the stream re-publishes states (module docstring): repeats dropped from then on
        self.has_velocity: bool | None = None   # the stream carries velocities (None: no sample yet)
        self.raw_differences: bool | None = None   # its velocities equal the positions' differences (None: undecided)
        self._moving = False          # the last distinct step moved
        self._run = 0                 # messages of the current state so far
        self._runs: list[int] = []    # lengths of the last completed runs
        self._raw = self._judged = 0
        self._steps = np.zeros(64)
        self._prev: StreamSample | None = None
        self._before: StreamSample | None = None   # the state before _prev (central differences)
        self._rate = 0.0

    def reset(self) -> None:
        """The stream started over (a restart): forget the previous states, keep what was learnt."""
        self._prev = self._before = None
        self._run = 0

    @property
    def rate(self) -> float:
        """Hz: the distinct states' median rate (0 until 8 steps are known)."""
        return self._rate

    @property
    def derives_velocity(self) -> bool:
        """Velocities from the positions: the stream has none, or re-publishes its states (its velocity then
        belongs to the driver's period, not to the stamps, and any difference of re-published positions does)."""
        return self.republishes or self.has_velocity is False

    @property
    def velocity_source(self) -> str:
        if self.has_velocity is False:
            return "positions (none in the stream)"
        raw = {True: "raw differences of the positions", False: "not raw differences", None: "not judged yet"}
        if self.republishes:
            return f"positions (the stream re-publishes its states; its own velocities: {raw[self.raw_differences]})"
        return "stream" if self.has_velocity else "undecided"

    def take(self, t: float, q: np.ndarray, dq: np.ndarray | None, tau: np.ndarray) -> StreamSample | None:
        """The sample for the observer, or None: a repeated state (counted), or the first state of a stream
        whose velocities are derived (it has no previous one)."""
        prev = self._prev
        if prev is not None and (q == prev.q).all() and (tau == prev.tau).all():  # array_equal, without its checks
            self._run += 1
            if self.republishes or self._moving:
                self.republishes = True
                self.repeated += 1
                return None
            if self.derives_velocity:  # at rest on a stream that does not re-publish: a sample at rest
                return StreamSample(float(t), q, np.zeros_like(q), tau) if t > prev.t else None
            return StreamSample(float(t), q, dq, tau)
        self._note_run()
        self.distinct += 1
        if self.has_velocity is None:
            self.has_velocity = dq is not None
        current = StreamSample(float(t), q, dq, tau)
        before, self._before, self._prev = self._before, prev, current
        if prev is None:
            return None if self.derives_velocity else current
        h = current.t - prev.t
        if h <= 0:
            self._before = None
            return None if self.derives_velocity else current   # the stamp guard judges the time itself
        self._note_step(h)
        self._moving = self._rate > 0 and float(np.abs(q - prev.q).max()) * self._rate > MOVING
        if dq is not None and self.raw_differences is None and self._moving:  # at rest: nothing to judge (_judge)
            self._judge(dq, q - prev.q)
        if not self.derives_velocity:
            return current
        if before is None:
            return None
        return StreamSample(prev.t, prev.q, (q - before.q) / (current.t - before.t), prev.tau)

    def _note_run(self) -> None:
        """A state ended after ``_run`` messages: RUNS equal runs of 2 or more make a re-publishing stream (a
        noise-free simulator at rest repeats without end: its run never completes)."""
        if self._run:
            self._runs = (self._runs + [self._run])[-RUNS:]
            if len(self._runs) == RUNS and min(self._runs) >= 2 and len(set(self._runs)) == 1:
                self.republishes = True
        self._run = 1

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
        if np.abs(expected).max() < MOVING:
            return
        self._judged += 1
        if (np.abs(dq - expected) <= 0.05 * np.abs(expected) + 1e-3).all():
            self._raw += 1
        if self._judged >= DECIDE:
            self.raw_differences = self._raw >= RAW_FRACTION * self._judged

    def status_values(self) -> dict[str, object]:
        return {"repeated_states": self.repeated, "stream_rate_hz": round(self._rate, 1),
                "velocity_source": self.velocity_source}


__all__ = ["DriverStream", "StreamSample"]
