"""Fault injection against the real nodes, each in its own process, fed by an independent rclpy publisher.

What real drivers and supervisors do: a future-stamped message, a stream that starts over (driver
restart, ``/clock`` reset), a stream that stops (also under ``use_sim_time``), an unsafe
``ros2 param set``, a foreign ``payload/estimate``, start-up overrides, SIGTERM/SIGHUP to bringup.
Each test asserts what the user sees: ``~/collision``, ``~/status`` values and levels, exit codes.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time

import numpy as np
import pytest
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus
from geometry_msgs.msg import InertiaStamped
from rcl_interfaces.srv import SetParameters
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node
from rclpy.parameter import Parameter
from ros_helpers import call_trigger, wait_for
from rosgraph_msgs.msg import Clock
from sensor_msgs.msg import JointState
from std_msgs.msg import Bool
from std_srvs.srv import Trigger

from payload_estimation.model.dynamics import RigidBodyDynamics
from payload_estimation.model.robot_file import load_robot
from payload_estimation.ros.bringup import override_file, ros_args, start_processes, stop_processes
from payload_estimation.ros.messages import joint_state_msg, sec_to_time
from payload_estimation.ros.qos import LATCHED_QOS, SENSOR_QOS
from payload_estimation.ros.spin_thread import SpinThread

# Real processes and wall-clock bounds on a shared 2-core machine: a miss that repeats twice is real.
pytestmark = pytest.mark.flaky(reruns=2, reruns_delay=2)

NS = f"/fault{os.getpid()}"
Q0 = np.radians([10, 40, -5, -70, 15, 50, 20])
CONTACT = 30.0  # N m on A2, as in the probe that found the blind monitor
OK, ERROR = 0, 2  # diagnostic levels (DiagnosticStatus.OK/ERROR are bytes in rclpy)


class Feed:
    """A joint_states publisher with its own stamps (a driver), at ``rate`` Hz of wall time, with /clock."""

    def __init__(self, node: Node, dyn: RigidBodyDynamics, rate: float = 500.0):
        self.dyn, self.node = dyn, node
        self.pub = node.create_publisher(JointState, "joint_states", SENSOR_QOS)
        self.pub_clock = node.create_publisher(Clock, "/clock", 10)
        self.period = 1.0 / rate
        self.stamp0 = 100.0  # the driver's clock at start
        self._t0 = time.monotonic()
        self.extra = np.zeros(dyn.n)
        self.running = True
        self.next_stamp_offset: float | None = None  # one message stamped this far from the stream
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()

    def restart(self, stamp0: float) -> None:
        """The driver starts over: stamps continue from ``stamp0``."""
        self.stamp0, self._t0 = stamp0, time.monotonic()

    def stamp(self) -> float:
        return self.stamp0 + time.monotonic() - self._t0

    def _loop(self):
        g = self.dyn.gravity(Q0)
        names = self.dyn.desc.joint_names
        rng = np.random.default_rng(1)
        while not self._stop.is_set():
            if self.running:
                t = self.stamp()
                if self.next_stamp_offset is not None:
                    t, self.next_stamp_offset = t + self.next_stamp_offset, None
                tau = g + self.extra + 0.02 * rng.standard_normal(g.size)
                self.pub.publish(joint_state_msg(names, Q0, np.zeros(g.size), tau, stamp=sec_to_time(t)))
                self.pub_clock.publish(Clock(clock=sec_to_time(t)))
            time.sleep(self.period)

    def close(self):
        self._stop.set()
        self._thread.join(2.0)


class Probe(Node):
    """Records the monitor's collision flag (wall time of each change) and the nodes' status."""

    def __init__(self):
        super().__init__("fault_probe")
        self.collision: list[tuple[float, bool]] = []
        self.status: dict[str, DiagnosticStatus] = {}
        self.create_subscription(Bool, "collision_monitor/collision",
                                 lambda m: self.collision.append((time.monotonic(), m.data)), LATCHED_QOS)
        for node in ("collision_monitor", "payload_estimator"):
            self.create_subscription(DiagnosticArray, f"{node}/status",
                                     lambda m, k=node: self.status.__setitem__(k, m.status[0]), LATCHED_QOS)
        self.pub_estimate = self.create_publisher(InertiaStamped, "payload/estimate", LATCHED_QOS)

    def values(self, node: str) -> dict[str, str]:
        st = self.status.get(node)
        return {} if st is None else {kv.key: kv.value for kv in st.values}

    def level(self, node: str) -> int | None:
        st = self.status.get(node)
        return None if st is None else int.from_bytes(st.level, "little") if isinstance(st.level, bytes) else st.level

    def detected_after(self, t0: float) -> float | None:
        for t, flag in self.collision:
            if flag and t >= t0:
                return t - t0
        return None


@pytest.fixture(scope="module")
def dyn():
    return RigidBodyDynamics(load_robot("lwr4"))


@pytest.fixture
def rig(ros, dyn):
    probe = Probe()
    spin = SpinThread(SingleThreadedExecutor(), probe)
    feed = Feed(probe, dyn)
    procs: list[subprocess.Popen] = []

    def start(nodes, *params, sim_time=False):
        args = ros_args(None, NS, sim_time, (), ["robot:=lwr4", *params])
        new = start_processes(nodes, args)
        procs.extend(new)
        return new

    yield probe, feed, start
    feed.close()
    stop_processes(procs)
    spin.stop()
    probe.destroy_node()


def contact(probe: Probe, feed: Feed, duration: float = 0.4) -> float | None:
    """Push on A2 for ``duration`` s; the detection delay (s) seen by the probe, or None."""
    t0 = time.monotonic()
    feed.extra[1] = CONTACT
    wait_for(lambda: probe.detected_after(t0) is not None, duration)
    feed.extra[1] = 0.0
    wait_for(lambda: probe.collision and not probe.collision[-1][1], 5.0)  # released
    return probe.detected_after(t0)


def ready(probe: Probe) -> bool:
    return probe.level("collision_monitor") == OK and probe.values("collision_monitor").get(
        "collision") == "False"


def test_time_faults_never_blind_the_monitor(rig):
    probe, feed, start = rig
    start(["monitor"])
    assert wait_for(lambda: ready(probe), 20.0), probe.status.get("collision_monitor")
    time.sleep(0.5)
    clean = contact(probe, feed)
    assert clean is not None and clean < 0.3, clean
    # one message stamped 1000 s ahead (the probe that found the monitor blind for good)
    time.sleep(0.5)
    feed.next_stamp_offset = 1000.0
    time.sleep(1.0)
    after_jump = contact(probe, feed)
    assert after_jump is not None and after_jump < clean + 0.1, (clean, after_jump)
    v = probe.values("collision_monitor")
    assert int(v["stamp_faults_rejected"]) >= 1 and "ahead" in v["last_time_fault"]
    # a driver restart: stamps start over from 0; the payload model survives it (a small payload, so its
    # torque, absent from this feed, stays far below the threshold)
    m = InertiaStamped()
    m.header.frame_id = load_robot("lwr4").payload_frame_name
    m.inertia.m = 0.05
    probe.pub_estimate.publish(m)
    assert wait_for(lambda: float(probe.values("collision_monitor").get("payload_mass", -1)) == 0.05, 5.0)
    feed.restart(0.0)
    assert wait_for(lambda: probe.values("collision_monitor").get("stream_restarts") == "1", 5.0)
    time.sleep(1.0)
    after_restart = contact(probe, feed)
    assert after_restart is not None and after_restart < clean + 0.1, (clean, after_restart)
    assert float(probe.values("collision_monitor")["payload_mass"]) == 0.05


def test_a_lost_stream_is_an_error_within_one_second_also_on_sim_time(rig):
    probe, feed, start = rig
    start(["monitor", "estimator"], "use_sim_time:=true")
    assert wait_for(lambda: ready(probe), 20.0)
    assert wait_for(lambda: call_trigger(probe, "payload_estimator/capture", 10.0).success, 10.0)
    feed.running = False  # joint_states and /clock stop together
    t0 = time.monotonic()
    assert wait_for(lambda: probe.level("collision_monitor") == ERROR, 2.0)
    assert time.monotonic() - t0 < 1.0 + 0.2, "ERROR must follow within 1 s of the loss"
    assert "blind" in probe.status["collision_monitor"].message
    time.sleep(1.5)
    res = call_trigger(probe, "payload_estimator/capture", 10.0)
    assert not res.success and "stale" in res.message  # judged on the wall clock, not the stopped sim clock
    feed.running = True
    assert wait_for(lambda: probe.level("collision_monitor") == OK, 2.0)
    assert int(probe.values("collision_monitor")["joint_states_losses"]) == 1


def test_a_node_that_was_stopped_itself_does_not_call_the_stream_lost(rig):
    """Issue 48, starved is not lost: the monitor's process stopped for 0.8 s (SIGSTOP: a busy machine at its worst)
    while the stream went on. It finds its own checks late and the samples waiting: no loss reported, its lateness
    in the status (late_checks, late_max_s); a stream that really stops is still an ERROR within 1 s."""
    probe, feed, start = rig
    mon = start(["monitor"])[0].pid
    assert wait_for(lambda: ready(probe), 20.0)
    time.sleep(0.5)
    os.kill(mon, signal.SIGSTOP)
    time.sleep(0.8)
    os.kill(mon, signal.SIGCONT)
    assert wait_for(lambda: int(probe.values("collision_monitor").get("late_checks", 0)) >= 1, 5.0), \
        probe.values("collision_monitor")
    time.sleep(1.0)
    v = probe.values("collision_monitor")
    assert v["joint_states_losses"] == "0" and float(v["late_max_s"]) >= 0.5, v
    assert probe.level("collision_monitor") == OK
    feed.running = False
    t0 = time.monotonic()
    assert wait_for(lambda: probe.level("collision_monitor") == ERROR, 2.0)
    assert time.monotonic() - t0 < 1.0 + 0.2
    feed.running = True
    assert wait_for(lambda: probe.level("collision_monitor") == OK, 2.0)
    assert probe.values("collision_monitor")["joint_states_losses"] == "1"


def set_params(probe: Node, node: str, **values) -> list[bool]:
    cli = probe.create_client(SetParameters, f"{NS}/{node}/set_parameters")
    try:
        assert cli.wait_for_service(timeout_sec=10.0)
        req = SetParameters.Request(parameters=[Parameter(k, value=v).to_parameter_msg() for k, v in values.items()])
        fut = cli.call_async(req)
        assert wait_for(fut.done, 10.0)
        return [r.successful for r in fut.result().results]
    finally:
        probe.destroy_client(cli)


def test_parameters_and_estimates_the_monitor_must_not_trust(rig):
    probe, feed, start = rig
    start(["monitor"])
    assert wait_for(lambda: ready(probe), 20.0)
    assert set_params(probe, "collision_monitor", thresholds=[1000.0]) == [False]
    assert set_params(probe, "collision_monitor", thresholds=[-6.0]) == [False]
    assert set_params(probe, "collision_monitor", policy="none") == [True]
    assert wait_for(lambda: probe.values("collision_monitor").get("policy") == "none", 5.0)
    for mass, frame in ((500.0, load_robot("lwr4").payload_frame_name), (1.0, "some_other_frame")):
        m = InertiaStamped()
        m.header.frame_id = frame
        m.inertia.m = mass
        n0 = int(probe.values("collision_monitor")["estimates_refused"])
        probe.pub_estimate.publish(m)
        assert wait_for(lambda n0=n0: int(probe.values("collision_monitor")["estimates_refused"]) == n0 + 1, 5.0)
        assert float(probe.values("collision_monitor")["payload_mass"]) == 0.0


def _bringup(*args: str, env=None, sigint_ignored: bool = False) -> subprocess.Popen:
    """bringup as a process; ``sigint_ignored``: as a script's ``bringup ... &`` starts it (SIGINT ignored)."""
    return subprocess.Popen([sys.executable, "-m", "payload_estimation.ros.bringup", "--robot", "lwr4",
                             "--namespace", NS, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=env, preexec_fn=(lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
                            if sigint_ignored else None)


def _children(pid: int) -> list[int]:
    out = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True).stdout
    return [int(x) for x in out.split()]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return stat[0] != "Z"


@pytest.mark.parametrize("sig,ignored", [(signal.SIGTERM, False), (signal.SIGHUP, False), (signal.SIGINT, True)],
                         ids=["SIGTERM", "SIGHUP", "SIGINT-inherited-ignored"])
def test_a_stop_signal_to_bringup_leaves_no_process(ros, sig, ignored):
    """Each stop signal ends bringup and its children; SIGINT also when bringup inherited it ignored (started with
    ``&`` from a script: kill -INT did nothing), and then its children stop on their own SIGINT, not the SIGKILL 3 s
    later."""
    proc = _bringup("--nodes", "estimator,monitor", "--processes", sigint_ignored=ignored)
    try:
        assert wait_for(lambda: len(_children(proc.pid)) == 2, 20.0)
        kids = _children(proc.pid)
        time.sleep(2.0)
        t0 = time.monotonic()
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=10)
        assert wait_for(lambda: not any(_alive(k) for k in kids), 5.0), "orphaned nodes"
        assert f"bringup: {sig.name}: stopping the nodes" in err, err[-2000:]
        assert time.monotonic() - t0 < 2.5, "a child waited for the SIGKILL"
    finally:
        if proc.poll() is None:
            proc.kill()


def test_a_dying_child_is_reported_and_the_others_stopped(ros):
    proc = _bringup("--nodes", "estimator,monitor", "--processes")
    try:
        assert wait_for(lambda: len(_children(proc.pid)) == 2, 20.0)
        kids = _children(proc.pid)
        time.sleep(2.0)
        os.kill(kids[0], signal.SIGKILL)
        _, err = proc.communicate(timeout=15)
        assert proc.returncode != 0 and "exited with code -9" in err
        assert wait_for(lambda: not any(_alive(k) for k in kids), 5.0)
    finally:
        if proc.poll() is None:
            proc.kill()


def test_the_simulator_exiting_leaves_the_nodes_running_and_a_pending_sample_answered(ros):
    """The simulator stands in for the robot: when it dies mid-``sample``, the nodes go on as with a robot driver
    that stops -- the pending ``~/sample`` answers with the reason, bringup says so and keeps the nodes (issue 47:
    it stopped every node and the call never got an answer)."""
    proc = _bringup("--nodes", "sim,estimator,sampler,monitor", "--processes", "--use-sim-time")
    client = Node("sim_exit_client")
    spin = SpinThread(SingleThreadedExecutor(), client)
    try:
        assert wait_for(lambda: len(_children(proc.pid)) == 4, 30.0)
        kids = _children(proc.pid)
        sim = next(k for k in kids if "sim_node" in open(f"/proc/{k}/cmdline").read())
        cli = client.create_client(Trigger, f"{NS}/payload_sampler/sample")
        assert cli.wait_for_service(timeout_sec=20.0)
        time.sleep(4.0)  # the models loaded, the stream flowing
        fut = cli.call_async(Trigger.Request())
        time.sleep(1.5)  # the run under way
        os.kill(sim, signal.SIGKILL)
        assert wait_for(fut.done, 30.0), "~/sample never answered after the simulator died"
        answer = fut.result()
        assert not answer.success and "joint_states" in answer.message, answer.message
        assert proc.poll() is None and all(_alive(k) for k in kids if k != sim), "bringup stopped the other nodes"
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=15)
        assert "sim_node exited with code -9; the other nodes go on" in err, err[-2000:]
        assert wait_for(lambda: not any(_alive(k) for k in kids), 5.0), "orphaned nodes"
    finally:
        spin.stop()
        client.destroy_node()
        if proc.poll() is None:
            proc.kill()


def test_overrides_win_and_bad_values_stop_start_up_with_one_line(ros, tmp_path):
    probe = Node("override_probe")
    spin = SpinThread(SingleThreadedExecutor(), probe)
    got: list = []
    probe.create_subscription(DiagnosticArray, f"{NS}/payload_estimator/status",
                              lambda m: got.append({kv.key: kv.value for kv in m.status[0].values}), LATCHED_QOS)
    proc = _bringup("--nodes", "estimator", "-p", "method:=differential")
    try:
        assert wait_for(lambda: got and got[-1].get("configured_method") == "differential", 20.0), got[-1:]
    finally:
        proc.send_signal(signal.SIGINT)
        proc.communicate(timeout=15)
        spin.stop()
        probe.destroy_node()
    proc = _bringup("--nodes", "estimator", "-p", "method:=bogus")
    out, err = proc.communicate(timeout=30)
    lines = [x for x in err.splitlines() if x.strip() and "[INFO]" not in x]
    assert proc.returncode == 1 and len(lines) == 1, err
    assert "method" in lines[0] and "one-shot, differential" in lines[0]
    f = override_file(["method:=differential", "thresholds:=[7.0, 7.0]"], ["estimator", "monitor"], str(tmp_path))
    assert "/**/payload_estimator" in f.read_text() and "&" not in f.read_text()  # no YAML aliases for rcl
