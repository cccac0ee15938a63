"""joint_states mapped by name onto the model, with the stamp guard (:class:`stream.StampGuard`: future stamps, steps
back, restarts) and the wall-clock watchdog; everything it drops is counted and logged (rate-limited)."""

from __future__ import annotations

import time

from sensor_msgs.msg import JointState

from ..stream import StampGuard, StampVerdict, StreamTimeout, StreamWatchdog
from ..stream.driver_stream import DriverStream
from .messages import JointSample, JointStateConverter
from .node_support import THROTTLE_S


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
