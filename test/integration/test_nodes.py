"""The three nodes over real rclpy (DDS isolated by conftest), driven by a test-only arm.

``StaticArm`` is a tiny joint_states publisher written for these tests: a kinematic arm that
jumps to the last point of every joint_trajectory it receives (or ignores them) and reports the
torque of the nominal model plus a known payload. It makes the node logic (captures, rejections,
races, aborts) testable in a few seconds; the physics run is in test_end_to_end.py.
"""

from __future__ import annotations

import json
import os
import threading
import time

import numpy as np
import pytest
import rclpy
import yaml
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus
from geometry_msgs.msg import InertiaStamped
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node
from rclpy.parameter import Parameter
from ros_helpers import call_trigger, wait_for
from sensor_msgs.msg import JointState
from std_msgs.msg import Bool
from std_srvs.srv import Trigger
from trajectory_msgs.msg import JointTrajectory

from payload_estimation.model.dynamics import RigidBodyDynamics
from payload_estimation.model.parameters import BodyInertia
from payload_estimation.ros.estimator_node import PayloadEstimatorNode
from payload_estimation.ros.messages import diagnostic_level, joint_state_msg, trajectory_from_msg, trajectory_msg
from payload_estimation.ros.monitor_node import CollisionMonitorNode
from payload_estimation.ros.qos import COMMAND_QOS, LATCHED_QOS, SENSOR_QOS
from payload_estimation.ros.sampler_node import PayloadSamplerNode
from payload_estimation.ros.spin_thread import SpinThread
from payload_estimation.sampling.poses import PosePlanConfig, plan_poses

# Real DDS, real processes, wall-clock timeouts: on a loaded 2-core machine a run can miss a deadline;
# a failure that repeats twice more is real.
pytestmark = pytest.mark.flaky(reruns=2, reruns_delay=2)


Q0 = np.radians([10, 40, -5, -70, 15, 50, 20])
PAYLOAD = BodyInertia(3.0, np.array([0.02, -0.03, 0.12]), np.diag([0.01, 0.01, 0.005]))


class StaticArm(Node):
    """Test-only kinematic arm: publishes joint_states at ``rate`` Hz (wall clock) from its own thread.

    Not from an executor timer: the timer shares the test's executor threads with the nodes under
    test, and on a loaded machine it stalled long enough that a static window held too few samples
    ("only 4 samples over 0.025 s"). The thread keeps an absolute schedule; after a stall it skips
    the missed ticks rather than bursting them (a burst would only overflow the depth-5 queues).
    Call :meth:`stop` before destroying the node (Rig.remove / Rig.close do).
    """

    def __init__(self, dyn: RigidBodyDynamics, q0, payload: BodyInertia | None = PAYLOAD, follow: bool = True,
                 names=None, rate: float = 250.0, noise: float = 0.02, namespace: str | None = None):
        super().__init__("test_static_arm", **({} if namespace is None else
                                                {"namespace": namespace, "use_global_arguments": False}))
        self.dyn_loaded = dyn.with_payload(payload) if payload is not None else dyn
        self.names = list(names or dyn.desc.joint_names)
        self.q = np.array(q0, float)
        self.follow = follow
        self.noise = noise
        self.nan_torque = False
        self.publishing = True
        self.rng = np.random.default_rng(0)
        self.commands: list[np.ndarray] = []
        self.period = 1.0 / rate
        self.pub = self.create_publisher(JointState, "joint_states", SENSOR_QOS)
        self.create_subscription(JointTrajectory, "joint_trajectory", self._on_traj, COMMAND_QOS)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True, name="static_arm")
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=2.0)

    def _on_traj(self, msg):
        _, q = trajectory_from_msg(msg, self.dyn_loaded.desc.joint_names)
        self.commands.append(q[-1])
        if self.follow:
            self.q = q[-1].copy()

    def _loop(self):
        next_t = time.monotonic()
        while not self._stop.is_set():
            self._tick()
            next_t += self.period
            now = time.monotonic()
            if next_t < now:  # stalled: skip the missed ticks
                next_t = now + self.period
            time.sleep(next_t - now if next_t > now else 0.0)

    def _tick(self):
        if not self.publishing:
            return
        tau = self.dyn_loaded.gravity(self.q) + self.noise * self.rng.standard_normal(self.q.size)
        if self.nan_torque:
            tau[2] = np.nan
        idx = [self.dyn_loaded.desc.joint_names.index(n) if n in self.dyn_loaded.desc.joint_names else 0
               for n in self.names]
        self.pub.publish(joint_state_msg(self.names, self.q[idx], np.zeros(len(idx)), tau[idx],
                                         stamp=self.get_clock().now().to_msg()))


class Rig:
    """rclpy context + background SingleThreadedExecutor + helpers for one test."""

    def __init__(self):
        self.executor = SingleThreadedExecutor()
        self.nodes: list[Node] = []
        self.client_node = Node("test_client")
        self.add(self.client_node)
        self.spin = SpinThread(self.executor)

    def add(self, node: Node) -> Node:
        self.nodes.append(node)
        self.executor.add_node(node)
        return node

    def remove(self, node: Node) -> None:
        if isinstance(node, StaticArm):
            node.stop()
        self.executor.remove_node(node)
        self.nodes.remove(node)
        node.destroy_node()

    def call(self, service: str, timeout: float = 30.0) -> Trigger.Response:
        return call_trigger(self.client_node, service, timeout, discovery=5.0)

    def call_async(self, service: str):
        cli = self.client_node.create_client(Trigger, service)
        assert cli.wait_for_service(timeout_sec=5.0)
        return cli.call_async(Trigger.Request())

    def latest(self, msg_type, topic: str, qos=LATCHED_QOS, timeout: float = 10.0, predicate=None):
        """Wait for a message on ``topic`` (satisfying ``predicate``) and return it."""
        got = []
        sub = self.on_executor(lambda: self.client_node.create_subscription(msg_type, topic, got.append, qos))
        try:
            end = time.monotonic() + timeout
            while time.monotonic() < end:
                if got and (predicate is None or predicate(got[-1])):
                    return got[-1]
                time.sleep(0.01)
            return got[-1] if got else None
        finally:
            self.on_executor(lambda: self.client_node.destroy_subscription(sub))

    def on_executor(self, fn):
        """``fn()`` run on the executor's thread, its result: creating or destroying an entity while that
        thread builds its wait set can kill it (InvalidHandle), and with it every node of the test."""
        task = self.executor.create_task(fn)
        assert wait_for(task.done, 5.0), "the executor did not run the task"
        return task.result()

    def close(self):
        for n in self.nodes:
            if isinstance(n, StaticArm):
                n.stop()
        self.spin.stop()
        for n in list(self.nodes):
            n.destroy_node()


# Every node of this test run lives under its own namespace: other test runs on this machine may
# share the DDS domain (conftest picks it from the pid) and publish lwr4 joint_states too.
NS = f"/h5t{os.getpid()}"


def status_values(rig, topic: str, predicate=None, timeout: float = 10.0) -> dict[str, str]:
    """The key/values (plus ``level`` and ``message``) of the newest latched status on ``topic``."""
    def as_dict(msg):
        st = msg.status[0]
        return {**{kv.key: kv.value for kv in st.values}, "level": int.from_bytes(st.level, "little")
                if isinstance(st.level, bytes) else int(st.level), "message": st.message}

    msg = rig.latest(DiagnosticArray, topic, timeout=timeout,
                     predicate=None if predicate is None else lambda m: predicate(as_dict(m)))
    assert msg is not None, f"no status on {topic}"
    return as_dict(msg)


def latest_estimate(rig, predicate=lambda m: m.inertia.m > 0) -> InertiaStamped:
    return rig.latest(InertiaStamped, "payload/estimate", predicate=predicate)


def test_estimator_captures_estimates_and_resets(rig, dyn, tmp_path):
    arm = rig.add(StaticArm(dyn, Q0))
    rig.add(PayloadEstimatorNode(parameter_overrides=[Parameter("export_dir", value=str(tmp_path / "exports")),
                                                      Parameter("max_mass_std", value=0.001)]))
    assert wait_for(lambda: rig.call("payload_estimator/capture").success, 3.0)
    # static kinematic arm, exact model: poses around Q0 give the payload back
    for pose in plan_poses(dyn, Q0, PosePlanConfig(n_poses=6)).poses[1:]:
        arm.q = pose
        time.sleep(0.05)
        assert wait_for(lambda: rig.call("payload_estimator/capture").success, 2.0)
    res = rig.call("payload_estimator/estimate")
    assert res.success, res.message
    # method auto without an unloaded reference: one-shot, whose σ includes the model's 5 % and 0.5 N m
    # offsets: above max_mass_std 1 g, so published but flagged
    assert res.message.startswith("IMPRECISE (mass σ") and "no unloaded reference" in res.message
    st = status_values(rig, "payload_estimator/status", lambda v: float(v.get("mass", 0)) > 0)
    assert st["level"] == diagnostic_level(DiagnosticStatus.WARN) and "imprecise" in st["message"]
    assert "declared 5 %" in st["model"] and st["method"] == "gravity one-shot"
    est = latest_estimate(rig)  # a late subscriber gets it
    assert est.inertia.m == pytest.approx(3.0, abs=0.01)
    np.testing.assert_allclose([est.inertia.com.x, est.inertia.com.y, est.inertia.com.z], PAYLOAD.com, atol=3e-3)
    assert est.header.frame_id == dyn.desc.payload_frame_name
    st = status_values(rig, "payload_estimator/status", lambda v: float(v.get("mass", 0)) > 0)
    assert float(st["mass"]) == pytest.approx(est.inertia.m, rel=1e-5) and float(st["std_mass"]) > 0
    assert float(st["condition_number"]) > 1 and float(st["residual_rms"]) < 0.1
    exported = yaml.safe_load((tmp_path / "exports" / "payload.yaml").read_text())  # export_dir: written per estimate
    assert exported["mass"] == pytest.approx(est.inertia.m, rel=1e-5) and exported["frame"] == est.header.frame_id
    assert sorted(p.name for p in (tmp_path / "exports").iterdir()) == [
        "payload.franka.yaml", "payload.kuka.txt", "payload.urdf", "payload.yaml"]
    res = rig.call("payload_estimator/reset")
    assert res.success
    est = rig.latest(InertiaStamped, "payload/estimate", predicate=lambda m: m.inertia.m == 0.0)
    assert est.inertia.m == 0.0


def test_estimator_loads_a_gravity_model_by_parameter(rig, dyn, tmp_path):
    """``gravity_model``: a PARAMS.yaml from identify --gravity-only replaces the description's gravity and
    its covariance gives σ; a file that does not load is an ERROR at start and a refused parameter later."""
    from payload_estimation.identification.robot_identification import identify_gravity, random_configurations
    from payload_estimation.signals.samples import Samples

    sweep = random_configurations(dyn.desc, 40, seed=1, margin=0.3)
    tau = np.array([dyn.gravity(q) for q in sweep]) + np.random.default_rng(0).normal(0.0, 0.01, (40, dyn.n))
    good = tmp_path / "gravity.yaml"
    identify_gravity(dyn.desc, Samples(sweep, tau), offset=True).save(good)
    arm = rig.add(StaticArm(dyn, Q0))
    node = rig.add(PayloadEstimatorNode(parameter_overrides=[Parameter("gravity_model",
                                                                       value=str(tmp_path / "missing.yaml"))]))
    st = status_values(rig, "payload_estimator/status", lambda v: "did not load" in v["message"])
    assert st["level"] == diagnostic_level(DiagnosticStatus.ERROR) and "does not exist" in st["model"]
    assert wait_for(lambda: rig.call("payload_estimator/capture").success, 3.0)
    res = rig.call("payload_estimator/estimate")
    assert not res.success and "gravity_model" in res.message and "did not load" in res.message
    # ros2 param set: a malformed file is refused with the reason, a good one is loaded
    (tmp_path / "bad.yaml").write_text("coefficients: [1, 2\n")
    bad = node.set_parameters([Parameter("gravity_model", value=str(tmp_path / "bad.yaml"))])[0]
    assert not bad.successful and "gravity_model" in bad.reason
    assert node.set_parameters([Parameter("gravity_model", value=str(good))])[0].successful
    st = status_values(rig, "payload_estimator/status", lambda v: "identified model gravity.yaml" in v["model"])
    assert st["level"] == diagnostic_level(DiagnosticStatus.OK)
    for pose in plan_poses(dyn, Q0, PosePlanConfig(n_poses=6)).poses[1:]:
        arm.q = pose
        time.sleep(0.05)
        assert wait_for(lambda: rig.call("payload_estimator/capture").success, 2.0)
    res = rig.call("payload_estimator/estimate")
    assert res.success and not res.message.startswith("IMPRECISE"), res.message
    assert "no unloaded reference" not in res.message  # against a calibrated model one-shot is the accurate method
    est = latest_estimate(rig)
    assert est.inertia.m == pytest.approx(PAYLOAD.mass, abs=0.01)


def test_estimator_rejects_bad_input_and_impossible_fits(rig, dyn):
    arm = rig.add(StaticArm(dyn, Q0, names=list(dyn.desc.joint_names[:6])))  # A6 missing
    rig.add(PayloadEstimatorNode())
    time.sleep(0.5)
    res = rig.call("payload_estimator/capture")
    assert not res.success and "no valid joint_states" in res.message
    arm.names = list(dyn.desc.joint_names) + ["gripper_finger"]  # extra joint: ignored
    assert wait_for(lambda: rig.call("payload_estimator/capture").success, 3.0)
    arm.nan_torque = True
    time.sleep(0.6)  # no valid sample for > joint_state_timeout
    res = rig.call("payload_estimator/capture")
    assert not res.success and "stale" in res.message
    arm.nan_torque = False
    arm.noise = 3.0  # torque not steady

    def torque_rejected():
        res = rig.call("payload_estimator/capture")
        assert not res.success, res.message
        return "not static" in res.message and "torque" in res.message

    assert wait_for(torque_rejected, 3.0)
    # an impossible payload (60 kg > max_payload) is rejected and the previous (none) kept
    assert rig.call("payload_estimator/reset").success  # publishes 0 kg
    arm.noise = 0.02
    arm.dyn_loaded = dyn.with_payload(BodyInertia(60.0, np.zeros(3), np.eye(3)))
    rig.call("payload_estimator/clear_captures")
    for off in np.radians([[0, 0, 0, 0, 0, 0, 0], [0, 0, 0, 7, 7, 0, 0], [0, 7, 0, 0, -7, 7, 0],
                           [7, 0, 0, -7, 0, -7, 7]]):
        arm.q = Q0 + off
        time.sleep(0.2)
        assert wait_for(lambda: rig.call("payload_estimator/capture").success, 2.0)
    res = rig.call("payload_estimator/estimate")
    assert not res.success and "rejected" in res.message and "previous payload kept" in res.message
    est = rig.latest(InertiaStamped, "payload/estimate")
    assert est is not None and est.inertia.m == 0.0


def test_estimator_refuses_a_reference_run_with_a_gap_before_the_grasp(rig, dyn):
    """~/store_reference checks the recording as the fit will (a 135 ms gap in CI's stream was found
    only at ~/estimate_motion, after the grasp): refused at once with the reason; a clean one is kept."""
    arm = rig.add(StaticArm(dyn, Q0))
    rig.add(PayloadEstimatorNode())
    assert wait_for(lambda: rig.call("payload_estimator/capture").success, 5.0)

    def record(gap: bool) -> Trigger.Response:
        assert rig.call("payload_estimator/start_recording").success
        time.sleep(0.1)
        for k, off in enumerate(np.radians([1, 2, 3, 2, 1, 0])):
            arm.q = Q0 + off
            if gap and k == 2:
                arm.publishing = False
                time.sleep(0.15)
                arm.publishing = True
            time.sleep(0.05)
        time.sleep(0.1)
        return rig.call("payload_estimator/store_reference")

    res = record(gap=True)
    assert not res.success and "gap" in res.message and "record it again" in res.message, res.message
    res = record(gap=False)
    assert res.success and "reference run stored" in res.message, res.message


def test_sampler_full_run_on_kinematic_arm(rig, dyn):
    arm = rig.add(StaticArm(dyn, Q0))
    rig.add(PayloadEstimatorNode())
    # dwell, joint_state_timeout: patience on a loaded machine only (a capture is still taken as soon as
    # the arm is static; losing joint_states is tested below with the default timeout)
    sampler = rig.add(PayloadSamplerNode(parameter_overrides=[rclpy.parameter.Parameter("require_monitor", value=False),
        rclpy.parameter.Parameter("min_duration", value=0.1), rclpy.parameter.Parameter("dwell", value=3.0),
        rclpy.parameter.Parameter("joint_state_timeout", value=2.0)]))
    time.sleep(0.5)
    t0 = time.monotonic()
    res = rig.call("payload_sampler/sample", timeout=30.0)
    assert res.success, res.message
    assert latest_estimate(rig).inertia.m == pytest.approx(3.0, abs=0.01)
    assert time.monotonic() - t0 < 15.0
    # every command stayed inside ±7° and the run ends at the pick configuration
    cmds = np.array(arm.commands)
    assert len(cmds) == 10 and np.all(np.abs(cmds - Q0) <= np.radians(7) + 1e-9)
    np.testing.assert_allclose(cmds[-1], Q0)
    st = status_values(rig, "payload_sampler/status", lambda v: v.get("last_outcome") == "done")
    assert st["level"] == 0 and st["busy"] == "False" and st["pick_anchor_deg"] == ""
    assert rig.latest(Bool, "payload_sampler/active").data is False
    # phase timings: pose 1 is q0 (no move), 9 moves, 10 captures, the return
    assert float(st["attempts"]) >= 10 and float(st["return_s"]) > 0 and float(st["estimate_s"]) >= 0
    tm = sampler.last_timings
    assert len(tm.settles) == 10 and tm.moves[0] == 0.0 and all(m > 0 for m in tm.moves[1:])


def test_sampler_refuses_to_move_without_a_monitoring_collision_monitor(rig, dyn):
    arm = rig.add(StaticArm(dyn, Q0))
    rig.add(PayloadEstimatorNode())
    rig.add(PayloadSamplerNode(parameter_overrides=[rclpy.parameter.Parameter("monitor_timeout", value=0.5)]))
    time.sleep(0.3)
    res = rig.call("payload_sampler/sample")
    assert not res.success and "collision monitor is not monitoring" in res.message, res.message
    assert arm.commands == []  # the arm was not moved
    assert outcome(rig)["last_outcome"] == "refused"


def outcome(rig) -> dict[str, str]:
    return status_values(rig, "payload_sampler/status", lambda v: v.get("busy") == "False" and v["last_outcome"])


def test_sampler_busy_cancel_and_estimator_down(rig, dyn):
    arm = rig.add(StaticArm(dyn, Q0))
    rig.add(PayloadSamplerNode(parameter_overrides=[rclpy.parameter.Parameter("service_timeout", value=1.0),
                                                    rclpy.parameter.Parameter("require_monitor", value=False)]))
    time.sleep(0.3)
    res = rig.call("payload_sampler/sample")
    assert not res.success and outcome(rig)["last_outcome"] == "refused"
    assert arm.commands == []  # nothing moved
    est = rig.add(PayloadEstimatorNode())
    time.sleep(0.3)
    fut = rig.call_async("payload_sampler/sample")
    assert wait_for(lambda: len(arm.commands) >= 2, 5.0)  # moving between poses
    busy = status_values(rig, "payload_sampler/status", lambda v: v["busy"] == "True")
    assert busy["phase"] in ("sequence", "rest")
    assert not rig.call("payload_sampler/sample").success  # a second request while busy
    assert rig.call("payload_sampler/cancel").success
    assert wait_for(fut.done, 5.0) and not fut.result().success
    st = outcome(rig)
    assert st["last_outcome"] == "cancelled"
    np.testing.assert_allclose(np.radians(json.loads(st["pick_anchor_deg"])), Q0, atol=1e-4)  # kept for the retry
    np.testing.assert_allclose(arm.commands[-1], Q0)  # cancel returns to the pick configuration
    # the estimator goes away in the middle of a run: the arm returns to the pick configuration too
    fut = rig.call_async("payload_sampler/sample")
    n0 = len(arm.commands)
    assert wait_for(lambda: len(arm.commands) >= n0 + 2, 5.0)
    rig.remove(est)
    assert wait_for(fut.done, 20.0) and not fut.result().success
    assert outcome(rig)["last_outcome"] in ("estimator_timeout", "refused")
    np.testing.assert_allclose(arm.commands[-1], Q0)


def test_sampler_pose_not_reached_and_lost_joint_states(rig, dyn):
    arm = rig.add(StaticArm(dyn, Q0, follow=False))  # ignores commands
    rig.add(PayloadEstimatorNode())
    rig.add(PayloadSamplerNode(parameter_overrides=[rclpy.parameter.Parameter("arrival_timeout", value=0.5),
                                                    rclpy.parameter.Parameter("require_monitor", value=False)]))
    time.sleep(0.5)
    res = rig.call("payload_sampler/sample")
    assert not res.success and outcome(rig)["last_outcome"] == "not_reached"
    arm.follow = True
    fut = rig.call_async("payload_sampler/sample")
    assert wait_for(lambda: len(arm.commands) >= 4, 5.0)
    arm.publishing = False
    assert wait_for(fut.done, 5.0) and not fut.result().success
    st = outcome(rig)
    assert st["last_outcome"] == "stream_lost"
    assert st["pick_anchor_deg"] != ""  # left away from q0: the next run must return there first


def test_sampler_aborts_on_collision_and_the_next_run_returns_first(rig, dyn):
    arm = rig.add(StaticArm(dyn, Q0))
    rig.add(PayloadEstimatorNode())
    # the test plays the monitor's flag
    rig.add(PayloadSamplerNode(parameter_overrides=[rclpy.parameter.Parameter("require_monitor", value=False)]))
    pub = rig.client_node.create_publisher(Bool, "collision_monitor/collision", LATCHED_QOS)
    pub.publish(Bool(data=False))
    time.sleep(0.3)
    fut = rig.call_async("payload_sampler/sample")
    assert wait_for(lambda: len(arm.commands) >= 3, 5.0)
    n_before = len(arm.commands)
    pub.publish(Bool(data=True))
    assert wait_for(fut.done, 5.0) and not fut.result().success
    st = outcome(rig)
    assert st["last_outcome"] == "collision" and st["pick_anchor_deg"] != ""
    assert len(arm.commands) <= n_before + 1  # the monitor holds; the sampler commands nothing more
    pub.publish(Bool(data=False))
    time.sleep(0.3)
    n0 = len(arm.commands)
    res = rig.call("payload_sampler/sample", timeout=30.0)
    assert res.success, res.message
    np.testing.assert_allclose(arm.commands[n0], Q0)  # back to the first run's pick configuration first
    env = np.radians(7.0) + 1e-9
    assert np.all(np.abs(np.array(arm.commands) - Q0) <= env)  # both runs stayed in the first envelope
    assert outcome(rig)["pick_anchor_deg"] == ""


@pytest.mark.parametrize("newer_command", [False, True])
def test_monitor_resumes_the_interrupted_trajectory_only_if_nothing_newer_was_commanded(rig, dyn, newer_command):
    """stop_and_resume: after the release the monitor resumes what the collision interrupted, unless a newer
    command (the sampler's next move after a grasp detection) came meanwhile: resuming the stale remainder
    then would override that command (found in CI: the sampler's pose 3 was never reached)."""
    arm = rig.add(StaticArm(dyn, Q0, payload=None, follow=False))
    rig.add(CollisionMonitorNode(parameter_overrides=[Parameter("resume_delay", value=0.3)]))
    flags: list[bool] = []
    rig.client_node.create_subscription(Bool, "collision_monitor/collision", lambda m: flags.append(m.data),
                                        LATCHED_QOS)
    pub = rig.client_node.create_publisher(JointTrajectory, "joint_trajectory", COMMAND_QOS)
    assert wait_for(lambda: flags, 5.0)
    q_old, q_new = Q0 + np.radians(5.0), Q0 - np.radians(3.0)
    pub.publish(trajectory_msg(list(dyn.desc.joint_names), q_old[None], [30.0]))
    time.sleep(0.3)
    arm.dyn_loaded = dyn.with_payload(BodyInertia(10.0, np.array([0.0, 0.0, 0.1]), np.eye(3) * 1e-2))  # a push
    assert wait_for(lambda: flags[-1], 5.0)
    if newer_command:
        pub.publish(trajectory_msg(list(dyn.desc.joint_names), q_new[None], [2.0]))
        time.sleep(0.3)
    n_before = len(arm.commands)
    arm.dyn_loaded = dyn  # the push ends: released, then resumed after 0.3 s
    assert wait_for(lambda: not flags[-1], 5.0)
    time.sleep(1.0)
    resumed = [c for c in arm.commands[n_before:] if np.allclose(c, q_old)]
    assert bool(resumed) is not newer_command


def test_monitor_residual_names_and_missing_joint(rig, dyn):
    arm = rig.add(StaticArm(dyn, Q0, payload=None, names=list(dyn.desc.joint_names)[::-1]))
    rig.add(CollisionMonitorNode())
    res = rig.latest(JointState, "collision_monitor/residual", qos=10, timeout=3.0)
    assert res is not None and list(res.name) == list(dyn.desc.joint_names)
    assert np.max(np.abs(res.effort)) < 1.0  # nominal arm, exact model: no residual
    assert rig.latest(Bool, "collision_monitor/collision").data is False
    arm.names = list(dyn.desc.joint_names[1:])  # A1 missing: no output at all
    time.sleep(0.3)
    assert rig.latest(JointState, "collision_monitor/residual", qos=10, timeout=0.5) is None
    arm.names = list(dyn.desc.joint_names)
    arm.nan_torque = True  # NaN torque: no output either
    time.sleep(0.3)
    assert rig.latest(JointState, "collision_monitor/residual", qos=10, timeout=0.5) is None
    arm.nan_torque = False
    assert rig.latest(JointState, "collision_monitor/residual", qos=10, timeout=3.0) is not None


def test_bringup_console_script_starts_nodes_and_exits_cleanly(rig):
    """``bringup`` (in-process mode) with a namespace: services appear there; SIGINT exits 0."""
    import signal
    import subprocess
    import sys

    proc = subprocess.Popen([sys.executable, "-m", "payload_estimation.ros.bringup", "--robot", "iiwa14",
                             "--nodes", "estimator,monitor", "--namespace", f"{NS}/arm"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        res = rig.call(f"{NS}/arm/payload_estimator/capture", timeout=20.0)
        assert not res.success and "no valid joint_states" in res.message  # nothing publishes /arm/joint_states
        st = rig.latest(DiagnosticArray, f"{NS}/arm/collision_monitor/status", timeout=5.0)
        assert st is not None and st.status[0].hardware_id == "iiwa14"
    finally:
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=20)
    assert proc.returncode == 0, out


def test_monitor_processes_every_sample_and_copies_its_stamp(rig, dyn):
    """The 1 kHz path (convert, observer, detector, reaction, residual publish) on 2000 samples: every
    one reaches the observer; the residual carries the input stamp. Its cost: bench/bench_nodes.py."""
    from payload_estimation.ros.messages import sec_to_time

    mon = rig.add(CollisionMonitorNode())
    q = Q0
    msgs = [joint_state_msg(dyn.desc.joint_names, q, np.zeros(7), dyn.gravity(q), stamp=sec_to_time(1 + k * 1e-3))
            for k in range(2000)]
    for m in msgs:
        mon._on_joint_states(m)
    assert mon._residual_msg.header.stamp == msgs[-1].header.stamp
    assert mon.mon.observer.accepted == 2000 and not mon.mon.detector.in_collision
