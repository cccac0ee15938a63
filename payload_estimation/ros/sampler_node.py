"""``payload_sampler``: visit the ±7° static poses around the pick configuration and estimate.

Interface (relative names, remappable):

- subscribes ``joint_states`` (sensor_msgs/JointState) and ``collision_monitor/collision``
  (std_msgs/Bool, transient local);
- publishes ``joint_trajectory`` (trajectory_msgs/JointTrajectory, one point per move, zero end
  velocity), ``~/active`` (std_msgs/Bool, transient local: True while sampling; the collision
  monitor takes a provisional payload on its rising edge) and ``~/status`` (DiagnosticArray);
- services ``~/sample`` and ``~/cancel`` (std_srvs/Trigger);
- calls ``payload_estimator/clear_captures``, ``payload_estimator/capture`` and
  ``payload_estimator/estimate`` (std_srvs/Trigger).

``~/sample`` takes the current configuration as the pick configuration q0 and raises ``~/active``
(the monitor fits its provisional payload meanwhile), waits for rest, plans the pose set
(motion.poses.plan_poses) and runs it with motion.sequence.SamplingSequence: per pose a validated
move (envelope, limits, velocity), arrival, then static captures asked of the estimator as soon as
this node's own static pre-check passes (retried until ``dwell`` s); after the last capture the
estimate is requested while the arm already returns to q0. The first move waits until the monitor's
collision flag (the grasp) has cleared and ``monitor_fit_delay`` s have passed since ``~/active``.
It aborts with a reason — in the Trigger response and on ``~/status`` — on: a collision,
``~/cancel``, a pose not reached, lost joint_states, the estimator not answering, or a second
request while busy. On an abort other than a collision it commands a hold at the current position
(the monitor owns the reaction to collisions). Phase timings (start-up, per-pose move and
settle/capture, estimate, return) are logged, kept in ``last_timings`` and published on ``~/status``.

All waits use the node clock (``use_sim_time`` honoured); loss of joint_states is judged on the
wall clock so a stopped simulator is detected too.
"""

from __future__ import annotations

import sys
import threading
import time

import numpy as np
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue
from rclpy.callback_groups import MutuallyExclusiveCallbackGroup, ReentrantCallbackGroup
from rclpy.node import Node
from sensor_msgs.msg import JointState
from std_msgs.msg import Bool
from std_srvs.srv import Trigger
from trajectory_msgs.msg import JointTrajectory

from ..model.dynamics import RigidBodyDynamics
from ..model.robot_file import load_robot
from ..motion.poses import MotionLimitError, PosePlanConfig, plan_poses, stop_point
from ..motion.sequence import (
    Capture,
    Done,
    Estimate,
    Move,
    PhaseTimings,
    SamplingSequence,
    SequenceAborted,
    SequenceConfig,
)
from ..motion.settle import SampleWindow, SettleConfig, check_static
from .messages import JointStateConverter, trajectory_msg
from .qos import COMMAND_QOS, LATCHED_QOS, SENSOR_LATEST_QOS

THROTTLE_S = 2.0


class SamplingAborted(RuntimeError):
    """The sampling run stopped; the message says why."""


class PayloadSamplerNode(Node):
    """Sequences poses, captures and the estimate; motion decisions are in motion.poses."""

    needs_multithreaded_executor = True

    def __init__(self, **kwargs):
        super().__init__("payload_sampler", **kwargs)
        dp = self.declare_parameter
        dp("robot", "lwr4")
        dp("joint_names", [""])
        dp("n_poses", 10)
        dp("amplitude_deg", 7.0)
        dp("limit_margin_deg", 1.0)
        dp("velocity_scale", 0.9)
        dp("min_duration", 0.25)
        dp("arrival_tolerance_deg", 0.5)
        dp("arrival_timeout", 2.0)
        dp("dwell", 1.0)
        dp("pick_rest_timeout", 3.0)
        dp("capture_period", 0.005)
        dp("poll_period", 0.002)
        dp("monitor_fit_delay", 0.25)
        # static test (same names and defaults as payload_estimator's; the estimator decides)
        dp("window", 0.12)
        dp("max_velocity", 0.005)
        dp("max_position_spread", 5e-4)
        dp("max_torque_std", 0.5)
        dp("max_torque_drift", 0.1)
        dp("torque_drift_relative", 0.005)
        dp("min_average_samples", 30)
        dp("max_window", 0.4)
        dp("joint_state_timeout", 0.5)
        dp("service_timeout", 3.0)
        dp("collision_clear_timeout", 1.0)
        p = lambda k: self.get_parameter(k).value  # noqa: E731
        self.desc = load_robot(p("robot"))
        self.dyn = RigidBodyDynamics(self.desc)
        names = [x for x in p("joint_names") if x]
        if names and len(names) != self.desc.n:
            raise ValueError(f"joint_names has {len(names)} names, robot {self.desc.name} has {self.desc.n} joints")
        self.joint_names = tuple(names) if names else self.desc.joint_names
        self.plan_config = PosePlanConfig(n_poses=int(p("n_poses")), amplitude_deg=float(p("amplitude_deg")),
                                          limit_margin_deg=float(p("limit_margin_deg")),
                                          velocity_scale=float(p("velocity_scale")),
                                          min_duration=float(p("min_duration")))
        self.pick_rest_timeout = float(p("pick_rest_timeout"))
        self.poll_period = float(p("poll_period"))
        self.monitor_fit_delay = float(p("monitor_fit_delay"))
        self.js_timeout = float(p("joint_state_timeout"))
        self.service_timeout = float(p("service_timeout"))
        self.collision_clear_timeout = float(p("collision_clear_timeout"))
        self.settle = SettleConfig(window=float(p("window")), max_velocity=float(p("max_velocity")),
                                   max_position_spread=float(p("max_position_spread")),
                                   max_torque_std=float(p("max_torque_std")),
                                   max_torque_drift=float(p("max_torque_drift")),
                                   torque_drift_relative=float(p("torque_drift_relative")),
                                   min_average_samples=int(p("min_average_samples")),
                                   max_window=float(p("max_window")))
        self.seq_config = SequenceConfig(velocity_scale=self.plan_config.velocity_scale,
                                         min_duration=self.plan_config.min_duration,
                                         arrival_tolerance=float(np.radians(p("arrival_tolerance_deg"))),
                                         arrival_timeout=float(p("arrival_timeout")), dwell=float(p("dwell")),
                                         retry_period=float(p("capture_period")),
                                         clear_timeout=float(p("collision_clear_timeout"))
                                         + float(p("monitor_fit_delay")))
        # small: checked while settling (on each new sample)
        # (longer than max_window: a history shorter than max_window reads as "collecting samples")
        self._window = SampleWindow(horizon=max(1.5 * self.settle.window, 1.25 * self.settle.max_window))

        self._lock = threading.Lock()
        self._busy = False
        self._cancel = threading.Event()
        self._conv = JointStateConverter(self.joint_names, require_velocity=False, require_effort=False)
        self._q: np.ndarray | None = None
        self._dq: np.ndarray | None = None
        self._rx_wall: float | None = None
        self._t_msg: float | None = None  # stamp (s) of the newest joint_states
        self._static_cache: tuple[float | None, bool] = (None, False)  # (newest stamp checked, result)
        self._collision = False
        self._collision_count = 0
        self._collision_base = 0
        self._collision_armed = True
        self._may_arm = True
        self.last_timings: PhaseTimings | None = None
        self.last_duration: float | None = None  # s, node clock (sim time when use_sim_time)
        self.last_wall_duration: float | None = None

        self._io_group = MutuallyExclusiveCallbackGroup()
        self._client_group = ReentrantCallbackGroup()
        self._srv_group = ReentrantCallbackGroup()
        # the current state, not every sample: a busy executor must not judge arrival and rest on a backlog
        self.create_subscription(JointState, "joint_states", self._on_joint_states, SENSOR_LATEST_QOS,
                                 callback_group=self._io_group)
        self.create_subscription(Bool, "collision_monitor/collision", self._on_collision, LATCHED_QOS,
                                 callback_group=self._io_group)
        self.pub_traj = self.create_publisher(JointTrajectory, "joint_trajectory", COMMAND_QOS)
        self.pub_active = self.create_publisher(Bool, "~/active", LATCHED_QOS)
        self.pub_status = self.create_publisher(DiagnosticArray, "~/status", LATCHED_QOS)
        cg = self._client_group
        self.cli_clear = self.create_client(Trigger, "payload_estimator/clear_captures", callback_group=cg)
        self.cli_capture = self.create_client(Trigger, "payload_estimator/capture", callback_group=cg)
        self.cli_estimate = self.create_client(Trigger, "payload_estimator/estimate", callback_group=cg)
        self.create_service(Trigger, "~/sample", self._srv_sample, callback_group=self._srv_group)
        self.create_service(Trigger, "~/cancel", self._srv_cancel, callback_group=self._srv_group)
        self.pub_active.publish(Bool(data=False))
        self._status(DiagnosticStatus.OK, "idle")
        self.get_logger().info(f"payload_sampler ready: robot {self.desc.name}, {self.plan_config.n_poses} poses, "
                               f"±{self.plan_config.amplitude_deg} deg")

    # ------------------------------------------------------------------ inputs
    def _now(self) -> float:
        return self.get_clock().now().nanoseconds * 1e-9

    def _on_joint_states(self, msg: JointState) -> None:
        got = self._conv.receive(msg, self, THROTTLE_S)
        if got is None:
            return
        t, s = got
        with self._lock:
            self._q, self._dq, self._rx_wall, self._t_msg = s.q, s.dq, time.monotonic(), t
            self._window.append(t, s.q, s.dq, s.tau)

    def _on_collision(self, msg: Bool) -> None:
        with self._lock:
            if msg.data and not self._collision:
                self._collision_count += 1
            self._collision = bool(msg.data)

    # ------------------------------------------------------------------ services
    def _srv_cancel(self, request, response):
        if self._busy:
            self._cancel.set()
            response.success, response.message = True, "cancel requested: the sampler holds and stops"
        else:
            response.success, response.message = False, "nothing to cancel: the sampler is idle"
        return response

    def _srv_sample(self, request, response):
        with self._lock:
            if self._busy:
                response.success = False
                response.message = "rejected: a sampling run is already in progress (call ~/cancel to stop it)"
                return response
            self._busy = True
        self._cancel.clear()
        t_wall, t_node = time.monotonic(), self._now()
        try:
            text = self._run()
            self.last_duration = self._now() - t_node
            self.last_wall_duration = time.monotonic() - t_wall
            response.success = True
            response.message = (f"{text} (took {self.last_duration:.2f} s node-clock time, "
                                f"{self.last_wall_duration:.2f} s wall; {self.last_timings.summary()})")
            self._status(DiagnosticStatus.OK, f"done: {response.message}")
        except SamplingAborted as e:
            response.success, response.message = False, f"aborted: {e}"
            self.get_logger().error(response.message)
            self._status(DiagnosticStatus.ERROR, response.message)
        except Exception as e:  # keep the node alive and the arm held on a programming error
            response.success, response.message = False, f"aborted: internal error {type(e).__name__}: {e}"
            self.get_logger().error(response.message)
            self._hold("internal error")
            self._status(DiagnosticStatus.ERROR, response.message)
        finally:
            self.pub_active.publish(Bool(data=False))
            with self._lock:
                self._busy = False
        return response

    # ------------------------------------------------------------------ the run
    def _run(self) -> str:
        """Start-up here; the pose sequence is motion.sequence.SamplingSequence (this loop only does I/O)."""
        t_start = self._now()
        for cli in (self.cli_capture, self.cli_estimate):
            if not cli.wait_for_service(timeout_sec=self.service_timeout):
                raise SamplingAborted(f"estimator not available (service {cli.srv_name} does not answer)")
        t_wall = time.monotonic()
        while self._q is None and time.monotonic() - t_wall < self.service_timeout:
            time.sleep(0.01)  # just started: give discovery a moment
        self._fresh_q()
        # Tell the monitor first: it fits its provisional payload monitor_fit_delay s later, while this
        # node waits for rest, plans and captures at q0 (none of which moves the arm).
        self.last_timings = None
        with self._lock:
            self._collision_armed = self._may_arm = False
        t_active = self._now()
        self.pub_active.publish(Bool(data=True))
        # after a grasp the arm needs longer than the per-pose dwell to come to rest under the new load
        t_ready = self._now()
        self._wait(self._locally_static, self.pick_rest_timeout, "the arm is not static at the pick configuration")
        t_rest = self._now()
        with self._lock:
            self._may_arm = True  # a grasp detected until now is not a collision of this run
        q0 = self._fresh_q()
        try:
            plan = plan_poses(self.dyn, q0, self.plan_config)
        except MotionLimitError as e:
            raise SamplingAborted(f"cannot plan poses at this pick configuration: {e}") from e
        self.get_logger().info(
            f"sampling around q0 = {np.round(np.degrees(q0), 2).tolist()} deg: {len(plan.poses)} poses, planned motion "
            f"{plan.total_motion_time:.2f} s, cond {plan.condition_number:.3g}")
        if self.cli_clear.service_is_ready():
            self._call(self.cli_clear, "clear captures")
        seq = SamplingSequence(plan, self.desc, self.seq_config, self.joint_names)
        seq.timings.startup = self._now() - t_start
        self.get_logger().info(
            f"start-up {seq.timings.startup:.2f} s: services and joint_states {t_ready - t_start:.2f} s, rest at q0 "
            f"{t_rest - t_ready:.2f} s, plan and clear captures {self._now() - t_rest:.2f} s")
        estimate = None  # (future, wall start)
        ages: list[float] = []  # node clock - stamp of the newest joint_states (s): how far this node lags
        n = seq.n
        while True:
            self._check_abort()
            now = self._now()
            with self._lock:
                q, t_msg = self._q, self._t_msg
            ages.append(now - t_msg)
            clear = self._collision_armed and now - t_active >= self.monitor_fit_delay
            try:
                act = seq.update(now, q, seq.wants_static and self._locally_static(), clear_to_move=clear)
            except SequenceAborted as e:
                if e.hold:
                    self._hold("sequence aborted")
                if not self._collision_armed:
                    raise SamplingAborted("the collision monitor still reports a collision at the pick "
                                          f"configuration ({e})") from e
                raise SamplingAborted(str(e)) from e
            if isinstance(act, Move):
                if act.label != "pick configuration":
                    self._status(DiagnosticStatus.OK, f"sampling {act.label}")
                self.pub_traj.publish(trajectory_msg(self.joint_names, act.target[None, :], [act.duration]))
                continue
            if isinstance(act, Capture):
                ok, reason = self._call(self.cli_capture, "capture")
                try:
                    seq.captured(ok, reason, self._now())
                except SequenceAborted as e:
                    self._hold("not static")
                    raise SamplingAborted(str(e)) from e
                if ok:
                    k = act.pose
                    self.get_logger().info(
                        f"pose {k + 1}/{n}: move {seq.timings.moves[k]:.2f} s, static capture after "
                        f"{seq.timings.settles[k]:.2f} s ({seq.timings.attempts[k]} attempt(s)): {reason}")
                continue
            if isinstance(act, Estimate):
                self.get_logger().info("all poses captured; estimating while returning to the pick configuration")
                self._status(DiagnosticStatus.OK, "estimating and returning to the pick configuration")
                self._require(self.cli_estimate, "estimate")
                estimate = (self.cli_estimate.call_async(Trigger.Request()), time.monotonic())
                continue
            if isinstance(act, Done):
                break
            if estimate is not None and estimate[0].done():
                res = estimate[0].result()
                seq.estimated(bool(res.success), str(res.message), self._now())
                estimate = None
                continue
            if estimate is not None and time.monotonic() - estimate[1] > self.service_timeout:
                self._abandon(self.cli_estimate, estimate[0])
                raise SamplingAborted(f"estimator did not answer estimate within {self.service_timeout:.1f} s")
            time.sleep(self.poll_period)
        self.last_timings = seq.timings
        self.get_logger().info(f"sampling timings: {seq.timings.summary()}; joint_states age at this node: median "
                               f"{1e3 * np.median(ages):.0f} ms, 95 % {1e3 * np.percentile(ages, 95):.0f} ms")
        if not act.ok:
            raise SamplingAborted(f"estimator rejected the fit: {act.text} (arm returned to the pick configuration)")
        return (f"estimated from {n} poses around q0 = {np.round(np.degrees(plan.q0), 2).tolist()} deg "
                f"(back there now): {act.text}")

    def _fresh_q(self) -> np.ndarray:
        with self._lock:
            q, rx = self._q, self._rx_wall
        if q is None:
            raise SamplingAborted("no valid joint_states received (check the topic and joint names)")
        if time.monotonic() - rx > self.js_timeout:
            raise SamplingAborted(f"joint_states lost: none for {time.monotonic() - rx:.2f} s")
        return q.copy()

    def _check_abort(self) -> None:
        if self._cancel.is_set():
            self._hold("cancel")
            raise SamplingAborted("cancelled by ~/cancel; holding the current position")
        with self._lock:
            rx = self._rx_wall
            if self._may_arm and not self._collision_armed and not self._collision:
                # the grasp's detection (if any) has cleared: from now on every collision aborts
                self._collision_armed = True
                self._collision_base = self._collision_count
            collided = self._collision_armed and (self._collision or self._collision_count > self._collision_base)
        if collided:
            raise SamplingAborted("collision reported by the collision monitor; the monitor stops the arm")
        if rx is None or time.monotonic() - rx > self.js_timeout:
            raise SamplingAborted(f"joint_states lost for more than {self.js_timeout} s")

    def _wait(self, predicate, timeout: float, what: str) -> None:
        """Poll ``predicate`` until true; ``timeout`` in node-clock seconds (sim time if enabled)."""
        start = self._now()
        wall_start = time.monotonic()
        while True:
            self._check_abort()
            if predicate():
                return
            now = self._now()
            if now < start:  # clock went backwards (sim reset)
                start = now
            if now - start > timeout or time.monotonic() - wall_start > 20 * timeout + 5.0:
                raise SamplingAborted(f"timeout after {timeout:.2f} s: {what}")
            time.sleep(self.poll_period)

    def _locally_static(self) -> bool:
        """This node's static pre-check on its window; re-evaluated only when a new sample arrived (it
        runs every poll while settling, and the GIL it holds is the simulator's in a one-process set-up)."""
        with self._lock:
            last = self._window.last_time
            if last is not None and self._static_cache[0] == last:
                return self._static_cache[1]
            t, q, dq, tau = self._window.arrays()
        static = check_static(t, q, dq, tau, self.settle, self.joint_names).static
        self._static_cache = (last, static)
        return static

    def _require(self, client, what: str) -> None:
        if not client.service_is_ready():
            raise SamplingAborted(f"estimator not available (service {client.srv_name} does not answer) at {what}")

    @staticmethod
    def _abandon(client, future) -> None:
        try:
            client.remove_pending_request(future)
        except Exception:  # the server side went away: nothing left to clean up
            pass

    def _call(self, client, what: str) -> tuple[bool, str]:
        """Blocking Trigger call (wall-clock ``service_timeout``): (success, message)."""
        self._require(client, what)
        future = client.call_async(Trigger.Request())
        wall_start = time.monotonic()
        while not future.done():
            if time.monotonic() - wall_start > self.service_timeout:
                self._abandon(client, future)
                raise SamplingAborted(f"estimator did not answer {what} within {self.service_timeout:.1f} s")
            time.sleep(0.0005)
        res = future.result()
        return bool(res.success), str(res.message)

    # ------------------------------------------------------------------ outputs
    def _hold(self, why: str) -> None:
        with self._lock:
            q, dq = self._q, self._dq
        if q is None:
            return
        q_stop, t_stop = stop_point(self.desc, q, dq)
        self.pub_traj.publish(trajectory_msg(self.joint_names, q_stop[None, :], [t_stop],
                                             velocities=np.zeros((1, q.size))))
        self.get_logger().warning(f"holding the current position ({why})")

    def _status(self, level: int, text: str) -> None:
        st = DiagnosticStatus(level=level, name=f"{self.get_name()}: sampling", message=text,
                              hardware_id=self.desc.name)
        st.values = [KeyValue(key="busy", value=str(self._busy)),
                     KeyValue(key="last_duration_s", value=str(self.last_duration)),
                     KeyValue(key="last_wall_duration_s", value=str(self.last_wall_duration))]
        if self.last_timings is not None:
            st.values += [KeyValue(key=k, value=f"{v:.4f}") for k, v in self.last_timings.as_dict().items()]
        arr = DiagnosticArray(status=[st])
        arr.header.stamp = self.get_clock().now().to_msg()
        self.pub_status.publish(arr)


def main(args=None) -> int:
    from .bringup import run_node

    return run_node(PayloadSamplerNode, args)


if __name__ == "__main__":
    sys.exit(main())
