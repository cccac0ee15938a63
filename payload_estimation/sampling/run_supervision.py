"""What a sampling run watches besides its motion: the node clock and the stream, and the collision gate.

:class:`StreamClock` turns observations into the faults of the run's time base (the clock went back, joint_states
lost, the node clock standing still while joint_states arrive); :class:`CollisionGate` decides from when a
collision the monitor reports belongs to this run (before the arm came to rest at q0 it is the grasp). Both are
parts of :class:`.sampling_run.SamplingRun`, which asks them in its supervision order.
"""

from __future__ import annotations

import numpy as np

from .run_states import Ending, Outcome

CLOCK_BACK_TOLERANCE = 1e-3
"""s the node clock may step back between observations before a run counts it as a restart."""

Fault = tuple[str, Ending, Outcome]
"""(reason, how the run ends, outcome code) of an abort an observation forces."""


class StreamClock:
    """The run's time base: the node clock ``t`` and the wall clock of the observations (s).

    ``joint_state_timeout``: wall s without joint_states that abort the run; ``clock_timeout``: wall s the node clock
    may stand still while joint_states keep arriving (a stream gap or a starved caller, no observation for
    ``joint_state_timeout``, does not count)."""

    def __init__(self, t: float, wall: float, joint_state_timeout: float, clock_timeout: float):
        self.joint_state_timeout = joint_state_timeout
        self.clock_timeout = clock_timeout
        self.t_seen = -np.inf  # s, the latest node-clock time observed
        self.t_prev = -np.inf  # s, the latest node-clock time observed before the current observation
        self._clock_moved = (t, wall)  # (node-clock s, wall s) when the node clock last changed
        self._wall_seen = wall  # wall s of the latest observation

    def observe(self, t: float, wall: float) -> None:
        """An observation at node-clock ``t`` and ``wall`` (every one, also before the run checks faults)."""
        self.t_prev, self.t_seen = self.t_seen, max(self.t_seen, t)
        if t != self._clock_moved[0] or wall - self._wall_seen > self.joint_state_timeout:
            self._clock_moved = (t, wall)  # (after a gap in the observations: a starved process)
        self._wall_seen = wall

    def fault(self, t: float, wall: float, stream_age: float | None) -> Fault | None:
        """The fault of the observation last given to :meth:`observe` (``stream_age``: wall s since the newest
        joint_states, None: none yet), or None."""
        if t < self.t_prev - CLOCK_BACK_TOLERANCE:  # every duration of this run was measured on the old clock
            return (f"the clock went back {self.t_prev - t:.2f} s (the simulator or the robot driver restarted): "
                    "this run's timing no longer holds; call ~/sample again", Ending.HOLD, Outcome.CLOCK_RESTART)
        if stream_age is None or stream_age > self.joint_state_timeout:
            what = ("no joint_states received" if stream_age is None else
                    f"joint_states lost for {stream_age:.2f} s")
            # no hold: its target would be a stale position, reached too fast from where the arm really is;
            # the last command is a bounded move that ends at rest inside the envelope
            return f"{what} (joint_state_timeout {self.joint_state_timeout:.2f} s)", Ending.NONE, Outcome.STREAM_LOST
        stood = wall - stream_age - self._clock_moved[1]  # s of joint_states arriving on a still clock
        if stood > self.clock_timeout:  # every wait of the run is on the node clock: it would wait forever
            return (f"the node clock stood still at {t:.3f} s for {stood:.1f} s of wall time while joint_states "
                    "kept arriving (/clock not advancing: a paused or restarted simulator, or /clock not received "
                    "— check use_sim_time and the /clock remapping); this run cannot time its moves; call ~/sample "
                    "again once the clock runs", Ending.HOLD, Outcome.CLOCK_STOPPED)
        return None


class CollisionGate:
    """Which collisions the monitor reports are this run's: none until :meth:`allow` (the arm came to rest at
    q0: a collision reported before is the grasp); once the flag has then been clear (armed), a collision
    reported or a new rising edge of the flag is."""

    def __init__(self):
        self.armed = False
        self._may_arm = False
        self._base = 0  # rising edges of the monitor's flag when the gate armed

    def allow(self) -> None:
        """The arm rests at q0: arm at the first observation with the flag clear."""
        self._may_arm = True

    def collision(self, flag: bool, edges: int, returning_first: bool) -> bool:
        """Whether the monitor's ``flag`` now and its rising ``edges`` so far report a collision of this run
        (``returning_first``: the run moves back to an aborted run's q0, where any collision counts)."""
        if self._may_arm and not self.armed and not flag:
            self.armed, self._base = True, edges
        return (self.armed or returning_first) and (flag or (self.armed and edges > self._base))


__all__ = ["StreamClock", "CollisionGate", "Fault", "CLOCK_BACK_TOLERANCE"]
