"""End to end on the simulated arm: sim_node + payload_estimator + payload_sampler + collision_monitor.

Real rclpy, real MuJoCo simulation (sensor noise, 5 % link model error), DDS isolated by conftest.
Pick-estimate-and-move as in paper 000 Sec. VI: an unloaded capture at the pick configuration,
grasp (attach a 3 kg payload with off-axis CoM), ``payload_sampler/sample``, then a move with an
injected contact that the payload-aware monitor must detect, stop on and resume after 2 s.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import numpy as np
import pytest
import rclpy
from data_paths import urdf
from diagnostic_msgs.msg import DiagnosticArray
from geometry_msgs.msg import InertiaStamped, WrenchStamped
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node
from rclpy.parameter import Parameter
from ros_helpers import call_trigger, wait_for
from sensor_msgs.msg import JointState
from std_msgs.msg import Bool
from std_srvs.srv import Trigger

from payload_estimation.ros.bringup import GIL_SWITCH_INTERVAL, ros_args
from payload_estimation.ros.estimator_node import PayloadEstimatorNode
from payload_estimation.ros.messages import estimate_from_msg, trajectory_msg
from payload_estimation.ros.monitor_node import CollisionMonitorNode
from payload_estimation.ros.qos import COMMAND_QOS, LATCHED_QOS, SENSOR_QOS
from payload_estimation.ros.sampler_node import PayloadSamplerNode
from payload_estimation.ros.sim_node import SimNode
from payload_estimation.ros.spin_thread import SpinThread

# Real DDS, real processes, wall-clock timeouts: on a loaded 2-core machine a run can miss a deadline;
# a failure that repeats twice more is real.
pytestmark = pytest.mark.flaky(reruns=2, reruns_delay=2)



Q0 = {"lwr4": np.radians([10, 40, -5, -70, 15, 50, 20]), "iiwa14": np.radians([-10, 35, 5, -75, -10, 55, 15]),
      "fr3": np.radians([5, -20, 5, -125, -5, 110, 45])}
FR3_URDF = urdf("fr3")
MASS = 3.0
COM = np.array([0.03, -0.02, 0.11])  # m, payload frame: off-axis
SIM_PARAMS = dict(noise_std=[0.15], model_error=0.05, seed=3, real_time_factor=1.0, rate_hz=1000.0,
                  payload_mass=MASS, payload_com=COM.tolist(), payload_inertia=[0.01, 0.0, 0.0, 0.01, 0.0, 0.006],
                  contact_duration=0.15)


# This machine's 2 cores are shared with other test runs: tolerate a stalled executor (wall clock).
LOADED_MACHINE = [Parameter("joint_state_timeout", value=2.0), Parameter("dwell", value=3.0)]


def _params(d: dict) -> list[Parameter]:
    return [Parameter(k, value=v) for k, v in d.items()]


class Probe(Node):
    """Test-side observer: joint states, collision flag transitions (sim time), service calls."""

    def __init__(self):
        super().__init__("test_probe", parameter_overrides=[Parameter("use_sim_time", value=True)])
        self.q = None
        self.dq = None
        self.collisions: list[tuple[float, bool]] = []
        self.estimate: InertiaStamped | None = None
        self.monitor_status: DiagnosticArray | None = None
        self._sampler_status: DiagnosticArray | None = None
        self._js_sub = None
        self.watch_joint_states(True)
        self.create_subscription(Bool, "collision_monitor/collision", self._col, LATCHED_QOS)
        self.create_subscription(InertiaStamped, "payload/estimate", self._est, LATCHED_QOS)
        self.create_subscription(DiagnosticArray, "collision_monitor/status", self._mst, LATCHED_QOS)
        self.create_subscription(DiagnosticArray, "payload_sampler/status",
                                 lambda m: setattr(self, "_sampler_status", m), LATCHED_QOS)
        self.traj = self.create_publisher(__import__("trajectory_msgs.msg").msg.JointTrajectory, "joint_trajectory",
                                          COMMAND_QOS)
        self.wrench = self.create_publisher(WrenchStamped, "sim_node/apply_wrench", COMMAND_QOS)
        self.contacts: list[WrenchStamped] = []
        self.create_subscription(WrenchStamped, "collision_monitor/contact_wrench", self.contacts.append, 10)

    def watch_joint_states(self, on: bool) -> None:
        """Subscribe to joint_states only when the test looks (1 kHz callbacks cost CPU the nodes need).
        The change is made on the executor's thread: destroying a subscription while that thread builds
        its wait set kills it (InvalidHandle), and every node of an in-process run with it."""
        def change():
            if on and self._js_sub is None:
                self._js_sub = self.create_subscription(JointState, "joint_states", self._js, SENSOR_QOS)
            elif not on and self._js_sub is not None:
                self.destroy_subscription(self._js_sub)
                self._js_sub = None

        if self.executor is None:
            change()
            return
        task = self.executor.create_task(change)
        assert wait_for(task.done, 5.0), "the executor did not run the subscription change"

    def now(self) -> float:
        return self.get_clock().now().nanoseconds * 1e-9

    def _js(self, msg):
        self.q = np.array(msg.position)
        self.dq = np.array(msg.velocity)

    def _col(self, msg):
        self.collisions.append((self.now(), bool(msg.data)))

    def _est(self, msg):
        self.estimate = msg

    def _mst(self, msg):
        self.monitor_status = msg

    def monitor_value(self, key):
        if self.monitor_status is None:
            return None
        return {kv.key: kv.value for kv in self.monitor_status.status[0].values}.get(key)

    def sampler_status(self, timeout: float = 5.0) -> dict[str, str]:
        """The sampler's newest status values once it is idle again (after a ~/sample call)."""
        def idle():
            st = self._sampler_status
            return st is not None and {kv.key: kv.value for kv in st.status[0].values}.get("busy") == "False"

        assert wait_for(idle, timeout), "no idle sampler status"
        return {kv.key: kv.value for kv in self._sampler_status.status[0].values}

    def call(self, service: str, timeout: float = 30.0) -> Trigger.Response:
        return call_trigger(self, service, timeout)


def sim_seconds(probe: Probe, dt: float, wall_limit: float = 30.0) -> None:
    t0 = probe.now()
    assert wait_for(lambda: probe.now() - t0 >= dt, wall_limit)


def run_pick_estimate_and_move(probe: Probe, robot: str, report: dict, quiet_probe: bool = False,
                               max_duration: float = 10.0, mass_tol: float = 0.01, com_tol: float = 0.005) -> None:
    """The scenario; ``quiet_probe``: stop watching joint_states while sampling (in-process runs share
    one interpreter with the nodes, and 1 kHz of test callbacks would slow them down)."""
    q0 = Q0[robot]
    assert wait_for(lambda: probe.q is not None, 30.0), "no joint_states from sim_node"
    # 1. unloaded capture at the pick configuration (anchors the model locally: differential method)
    assert wait_for(lambda: probe.call("payload_estimator/capture_unloaded").success, 5.0)
    # 2. grasp: the monitor sees an unknown load (a legitimate detection: nothing is known yet)
    assert probe.call("sim_node/attach_payload").success
    sim_seconds(probe, 0.5)
    # 3. sample
    n_before = len(probe.collisions)
    if quiet_probe:
        probe.watch_joint_states(False)
    t_wall = time.monotonic()
    res = probe.call("payload_sampler/sample", timeout=90.0)
    probe.watch_joint_states(True)
    wall = time.monotonic() - t_wall
    assert res.success, res.message
    st = probe.sampler_status()
    assert st["last_outcome"] == "done"
    # Robot (sim) time; the target is 10 s (issue 6). Measured 6.2-6.6 s on an idle machine, 7-9.7 s while
    # other benchmarks share its 2 cores (docs/bench/sampler.md).
    duration = float(st["last_duration_s"])
    est = estimate_from_msg(probe.estimate)
    from payload_estimation.model.robot_file import load_robot

    frame = load_robot(str(FR3_URDF) if robot == "fr3" else robot).payload_frame_name
    assert probe.estimate.header.frame_id == frame  # a frame of the robot's TF tree
    mass_err = abs(est.mass - MASS) / MASS
    com_err = float(np.linalg.norm(est.com - COM))
    report.update(robot=robot, sample_call_sim_s=round(duration, 2), sample_call_wall_s=round(wall, 2),
                  phases={k: st[k] for k in ("startup_s", "move_mean_s", "settle_mean_s", "estimate_s", "return_s")},
                  mass=est.mass, mass_err_pct=100 * mass_err, com_err_mm=1e3 * com_err, message=res.message)
    print(f"\n[{robot}] sample call {duration:.2f} s sim time ({wall:.2f} s wall); mass {est.mass:.4f} kg "
          f"(err {100 * mass_err:.3f} %), CoM {np.round(est.com * 1e3, 2)} mm (err {1e3 * com_err:.2f} mm)")
    assert mass_err < mass_tol
    assert com_err < com_tol
    assert duration < max_duration
    probe.q = None
    assert wait_for(lambda: probe.q is not None, 5.0)
    # back at the pick configuration the sampler took (the grasp may have moved the arm a little)
    q_pick = np.radians(json.loads(st["last_pick_configuration_deg"]))
    assert np.max(np.abs(q_pick - q0)) < np.radians(1.0)
    np.testing.assert_allclose(probe.q, q_pick, atol=np.radians(0.3))
    # no collision raised while sampling (the grasp's detection, if any, must have been cleared)
    during = probe.collisions[n_before:]
    assert not any(v for _, v in during[1:]), f"collision raised during sampling: {during}"
    assert wait_for(lambda: probe.monitor_value("payload_mass") is not None
                    and abs(float(probe.monitor_value("payload_mass")) - est.mass) < 1e-6, 3.0)
    assert not probe.collisions or probe.collisions[-1][1] is False

    # 4. a move with the payload: free motion raises nothing; an injected contact stops and resumes
    target = q0 + np.radians([25, -10, 0, 10, 0, 0, 0])
    n_before = len(probe.collisions)
    probe.traj.publish(trajectory_msg(list(_names(robot)), target[None, :], [4.0]))
    sim_seconds(probe, 1.5)
    assert not any(v for _, v in probe.collisions[n_before:]), "false collision during free motion"
    # a push on link 4's surface (a force at the frame origin would act on the joint axis): F at p is F plus
    # p x F at the origin, which is what sim_node applies
    from payload_estimation.collision.geometry import capsule_geometry, push_point
    from payload_estimation.model.robot_file import load_robot

    desc = load_robot(str(FR3_URDF) if robot == "fr3" else robot)
    force = np.array([60.0, 60.0, 0.0])
    point = push_point(capsule_geometry(desc).capsules[3], force)
    w = WrenchStamped()
    w.header.frame_id = "link_4"
    w.wrench.force.x, w.wrench.force.y, w.wrench.force.z = force
    w.wrench.torque.x, w.wrench.torque.y, w.wrench.torque.z = np.cross(point, force)
    probe.contacts.clear()
    t_contact = probe.now()
    probe.wrench.publish(w)
    assert wait_for(lambda: any(v for _, v in probe.collisions[n_before:]), 5.0), "contact not detected"
    t_detect = next(t for t, v in probe.collisions[n_before:] if v)
    report["detection_delay_ms"] = 1e3 * (t_detect - t_contact)
    # the estimated contact: a wrench in a link frame of the robot; when the monitor names the link, it is link 4
    assert wait_for(lambda: probe.contacts, 5.0), "no ~/contact_wrench"
    c = probe.contacts[-1]
    frames = [desc.link_frame_name(k) for k in range(1, desc.n + 1)]
    assert c.header.frame_id in frames
    got = np.linalg.norm([c.wrench.force.x, c.wrench.force.y, c.wrench.force.z])
    report["contact"] = (c.header.frame_id, round(float(got), 1))
    if probe.monitor_value("link_ambiguous") == "False":
        assert c.header.frame_id == frames[3]
    if probe.monitor_value("force_ambiguous") == "False":
        assert abs(got - np.linalg.norm(force)) < 0.25 * np.linalg.norm(force), (got, np.linalg.norm(force))
    # the status carries the one answer: link with its probability, force with its 95 % range
    assert wait_for(lambda: (probe.monitor_value("contact") or "").startswith("contact on "), 2.0), \
        probe.monitor_value("contact")
    assert 0.0 < float(probe.monitor_value("link_probability")) <= 1.0
    assert ".." in probe.monitor_value("force_range_N")
    sim_seconds(probe, 0.6)
    q_stop = probe.q.copy()
    assert np.max(np.abs(probe.dq)) < 0.02, "arm did not stop"
    assert np.max(np.abs(q_stop - target)) > np.radians(3), "contact came too late to test the stop"
    sim_seconds(probe, 1.0)
    assert np.max(np.abs(probe.q - q_stop)) < np.radians(0.2), "arm moved while stopped"
    # resume after resume_delay (2 s) from the stop: the interrupted trajectory is completed
    assert wait_for(lambda: np.max(np.abs(probe.q - target)) < np.radians(0.3), 15.0), "did not resume"
    t_resumed = probe.now()
    report["stop_to_target_s"] = t_resumed - t_detect
    assert t_resumed - t_detect > 2.0

    # 5. estimator reset returns the monitor to unloaded
    assert probe.call("payload_estimator/reset").success
    assert wait_for(lambda: probe.monitor_value("payload_mass") is not None
                    and float(probe.monitor_value("payload_mass")) == 0.0, 3.0)


def _names(robot: str):
    from payload_estimation.model.robot_file import load_robot

    return load_robot(str(FR3_URDF) if robot == "fr3" else robot).joint_names


# Own namespace and /clock for this run: other test runs may share the DDS domain (conftest picks
# it from the pid) and run a simulator of the same robot.
NS = f"/h5e{os.getpid()}"
ISOLATION = ["-r", f"__ns:={NS}", "-r", f"/clock:={NS}/clock"]


# One interpreter runs the simulator's physics thread and the nodes' executor threads. With CPython's
# default 5 ms GIL switch interval the physics thread, which sleeps between 1 ms steps, waited up to
# 5 ms for the GIL after every step: the simulator ran at 0.2-0.5 x real time (robot time fine, wall
# time 3-4 x longer). 0.5 ms (bringup.GIL_SWITCH_INTERVAL, what the nodes' processes use) keeps it at 1.0 x.


@pytest.fixture
def ros_ctx():
    old = sys.getswitchinterval()
    sys.setswitchinterval(GIL_SWITCH_INTERVAL)
    rclpy.init(args=["--ros-args", *ISOLATION])
    yield
    rclpy.shutdown()
    sys.setswitchinterval(old)


# One robot through the nodes (57 s each): the sweep's plan and identification run on both in test_sweep.py and the
# calibrated file's σ in test_model_uncertainty.py; the service chain sweep -> calibrate -> load is robot-agnostic.
@pytest.mark.parametrize("robot", ["lwr4"])
def test_calibration_sweep_then_estimate(ros_ctx, tmp_path, robot):
    """The calibrated path with the real nodes (issue 17): ``payload_sampler/sweep`` drives the unloaded arm
    (5 % off its model, ±0.5 N m torque offsets, 0.1 N m noise) through a bounded static pose sweep, the
    estimator identifies and loads its gravity model, and the default sample then meets 0.5 % / 3 mm. The nodes
    share this interpreter (the in-process composition); the whole pick-estimate-and-move scenario follows the
    sweep (the differential method runs in the separate-process test below)."""
    offsets = np.random.default_rng(1).uniform(-0.5, 0.5, 7)
    sim = {**SIM_PARAMS, "noise_std": [0.1], "offset": offsets.tolist()}
    sim_time = [Parameter("use_sim_time", value=True)]
    common = [Parameter("robot", value=robot)]
    path = tmp_path / "gravity.yaml"
    nodes = [
        SimNode(parameter_overrides=common + _params(sim) + [Parameter("initial_positions", value=Q0[robot].tolist())]),
        PayloadEstimatorNode(parameter_overrides=common + sim_time + [Parameter("calibration_file", value=str(path))]),
        PayloadSamplerNode(parameter_overrides=common + sim_time + LOADED_MACHINE + _params(
            {"sweep_velocity_scale": 0.6})),  # the default sweep (30 poses within ±25°): what the target is for
        CollisionMonitorNode(parameter_overrides=common + sim_time),
    ]
    probe = Probe()
    spin = SpinThread(SingleThreadedExecutor(), *nodes, probe)
    status: list[DiagnosticArray] = []
    probe.create_subscription(DiagnosticArray, "payload_estimator/status", status.append, LATCHED_QOS)
    try:
        assert wait_for(lambda: probe.q is not None, 30.0), "no joint_states from sim_node"
        commands: list[np.ndarray] = []
        probe.create_subscription(__import__("trajectory_msgs.msg").msg.JointTrajectory, "joint_trajectory",
                                  lambda m: commands.append(np.array(m.points[-1].positions)), COMMAND_QOS)
        n_before = len(probe.collisions)
        probe.watch_joint_states(False)
        res = probe.call("payload_sampler/sweep", timeout=180.0)
        probe.watch_joint_states(True)
        assert res.success, res.message
        assert "calibrated from 30 poses" in res.message and "loaded as gravity_model" in res.message
        print(f"\n[{robot}] sweep: {res.message}")
        assert path.is_file()
        assert not any(v for _, v in probe.collisions[n_before:]), "collision raised during the sweep"
        cmds = np.array(commands)
        assert len(cmds) >= 29 and np.all(np.abs(cmds - Q0[robot]) <= np.radians(25.0) + 1e-9)
        values = {kv.key: kv.value for kv in status[-1].status[0].values}
        assert "identified model gravity.yaml" in values["model"]
        report: dict = {}
        run_pick_estimate_and_move(probe, robot, report, quiet_probe=True, mass_tol=0.005, com_tol=0.003)
        print(f"[{robot}] calibrated: {report}")
    finally:
        nodes[0].stop()
        spin.stop()
        for n in [*nodes, probe]:
            n.destroy_node()


@pytest.mark.parametrize("robot", ["iiwa14", "fr3"])
def test_pick_estimate_and_move_separate_processes(ros_ctx, tmp_path, robot):
    """Each node in its own process (bringup's process mode: python -m <module> --ros-args ...). The FR3
    runs as on a franka_ros2 robot: sim_node publishes franka_description's URDF on robot_description and
    the nodes take their model (fr3 joint names, payload frame fr3_link8) from there."""
    from payload_estimation.ros.bringup import config_file, start_processes, stop_processes

    model = str(FR3_URDF) if robot == "fr3" else robot
    sim_params = [f"robot:={model}", f"initial_positions:={Q0[robot].tolist()}",
                  *[f"{k}:={v}" for k, v in SIM_PARAMS.items()]]
    sim_args = ros_args(None, NS, None, [f"/clock:={NS}/clock"], sim_params)
    override = tmp_path / "override.yaml"
    override.write_text("/**/payload_estimator:\n  ros__parameters:\n    method: differential\n")
    node_args = ros_args(config_file(), NS, True, [f"/clock:={NS}/clock"],
                         ["robot:=''" if robot == "fr3" else f"robot:={robot}"])
    node_args += ["--params-file", str(override), "-p", "joint_state_timeout:=2.0", "-p", "dwell:=3.0"]
    env = dict(os.environ)
    procs = start_processes(["sim"], sim_args, env) + start_processes(["estimator", "sampler", "monitor"],
                                                                       node_args, env)
    probe = Probe()
    spin = SpinThread(SingleThreadedExecutor(), probe)
    report: dict = {}
    try:
        # Five processes on this 2-core machine (shared with other test runs) lag the 1 kHz stream more
        # than one interpreter does.
        run_pick_estimate_and_move(probe, robot, report)
        assert all(p.poll() is None for p in procs), "a node process died"
    finally:
        print(f"[{robot}, processes] report: {report}")
        spin.stop()
        probe.destroy_node()
        stop_processes(procs)
    assert all(p.returncode in (0, -2, 130) for p in procs), [p.returncode for p in procs]


if __name__ == "__main__":  # pragma: no cover
    sys.exit(subprocess.call([sys.executable, "-m", "pytest", __file__, "-q", "-s"]))
