"""The sampler with the real nodes (a process each) and sim_node at its default parameters (issue 27).

- ``~/record_reference`` succeeds run after run at the default ``joint_state_timeout`` (0.5 s): the
  excitation's planning (~0.5-1 s of CPU) no longer holds the sampler's executor, so its own
  watchdog never mistakes it for a lost stream (it did ~12 times in 13).
- After an aborted run (``~/cancel``) and a grasp at its pick configuration (the monitor reports the
  grasp as a collision), ``~/sample`` samples there: no return is needed, so none is required (it
  was refused until the collision cleared, which it cannot without an estimate).
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np
import pytest
import rclpy
from diagnostic_msgs.msg import DiagnosticArray
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node
from rclpy.parameter import Parameter
from ros_helpers import call_trigger, sim_stack, wait_for
from sensor_msgs.msg import JointState
from std_msgs.msg import Bool
from std_srvs.srv import Trigger
from trajectory_msgs.msg import JointTrajectory

from payload_estimation.model.robot_file import load_robot
from payload_estimation.ros.messages import trajectory_from_msg, trajectory_msg
from payload_estimation.ros.qos import COMMAND_QOS, LATCHED_QOS, SENSOR_QOS
from payload_estimation.ros.spin_thread import SpinThread

pytestmark = pytest.mark.flaky(reruns=1, reruns_delay=2)

ROBOT = "iiwa14"
PICK = np.radians([10, 35, -5, -75, 10, 55, 5])


class Probe(Node):
    def __init__(self, names):
        super().__init__("recovery_probe", parameter_overrides=[Parameter("use_sim_time", value=True)])
        self.names = names
        self.q = None
        self.commands = 0  # joint_trajectory messages seen
        self.collision = False
        self.status: DiagnosticArray | None = None
        self.gaps: list[tuple[float, float]] = []  # (wall s, s): joint_states arrival gaps over 0.3 s seen here
        self._last_arrival: float | None = None
        self.create_subscription(JointState, "joint_states", self._joint_states, SENSOR_QOS)
        self.create_subscription(JointTrajectory, "joint_trajectory", self._traj, COMMAND_QOS)
        self.create_subscription(Bool, "collision_monitor/collision", lambda m: setattr(self, "collision", m.data),
                                 LATCHED_QOS)
        self.create_subscription(DiagnosticArray, "payload_sampler/status", lambda m: setattr(self, "status", m),
                                 LATCHED_QOS)
        self.monitor: dict[str, str] = {}  # the collision monitor's status values
        self.create_subscription(DiagnosticArray, "collision_monitor/status", lambda m: setattr(
            self, "monitor", {kv.key: kv.value for kv in m.status[0].values}), LATCHED_QOS)
        self.pub_traj = self.create_publisher(JointTrajectory, "joint_trajectory", COMMAND_QOS)

    def _joint_states(self, msg):
        now = time.monotonic()
        if self._last_arrival is not None and now - self._last_arrival > 0.3:
            self.gaps.append((now, now - self._last_arrival))
        self._last_arrival = now
        self.q = np.array(msg.position)

    def stalled_since(self, t0: float) -> float:
        """The longest joint_states gap (s) this probe saw since wall time ``t0`` (0: none over 0.3 s)."""
        return max([g for t, g in self.gaps if t >= t0], default=0.0)

    def _traj(self, msg):
        trajectory_from_msg(msg, self.names)
        self.commands += 1

    def values(self) -> dict[str, str]:
        if self.status is None:
            return {}
        st = self.status.status[0]
        return {kv.key: kv.value for kv in st.values} | {"message": st.message}


@contextmanager
def stack(ns: str, sim_params: list[str]) -> Iterator[None]:
    """sim_node and the three nodes as processes on its clock, as ros_helpers.sim_stack, with the sampler's
    and the estimator's joint_state_timeout at their default (0.5 s). Patience on a loaded machine for
    the rest: the estimator's answers and the rest at the pick configuration; the collision monitor's
    joint_state_timeout 2 s, so that a starved sim_node does not blind it (which stops every run)."""
    with sim_stack(ns, sim_params, ["robot:=''", "service_timeout:=10.0", "pick_rest_timeout:=10.0"],
                   extra={"monitor": {"joint_state_timeout": 2.0}}):
        yield


@pytest.fixture(scope="module")
def system():
    """iiwa14 at PICK; the payload (2.4 kg, 8 cm) puts ~7.5 N m on A2 at rest: above the monitor's 6 N m
    (an unannounced grasp is detected) and within its 1.5 x 6 N m while the sampler is active (it clears
    then, as after any grasp)."""
    ns = f"/rec{os.getpid()}"
    rclpy.init(args=["--ros-args", "-r", f"__ns:={ns}", "-r", f"/clock:={ns}/clock"])
    desc = load_robot(ROBOT)
    try:
        with stack(ns, [f"robot:={ROBOT}", "noise_std:=[0.1]", "model_error:=0.03", "payload_mass:=2.4",
                        "payload_com:=[0.01, -0.01, 0.08]", f"initial_positions:={PICK.tolist()}"]):
            probe = Probe(desc.joint_names)
            spin = SpinThread(SingleThreadedExecutor(), probe)
            try:
                assert wait_for(lambda: probe.q is not None, 60.0)
                assert wait_for(lambda: probe.values().get("busy") == "False", 60.0)
                yield desc, probe
            finally:
                spin.stop()
                probe.destroy_node()
    finally:
        rclpy.shutdown()


def _at_pick(desc, probe) -> None:
    """Unloaded, the estimator reset, the arm at rest at PICK."""
    call_trigger(probe, "sim_node/detach_payload", 10.0)
    call_trigger(probe, "payload_estimator/reset", 10.0)
    call_trigger(probe, "payload_sampler/forget_pick", 10.0)
    probe.pub_traj.publish(trajectory_msg(desc.joint_names, PICK[None], [2.0]))
    assert wait_for(lambda: np.max(np.abs(probe.q - PICK)) < np.radians(0.3), 20.0)
    time.sleep(2.5)  # the monitor releases any collision of the detach and its resume delay passes
    # the reset of a carried payload opens the monitor's release window (5 s), which explains a grasp: wait for its
    # end, so that a grasp here reads as the collision it is for an unannounced one
    assert wait_for(lambda: probe.monitor.get("payload_event_open") == "False", 10.0), probe.monitor


def test_record_reference_succeeds_repeatedly_at_the_default_joint_state_timeout(system):
    """Three reference runs in a row succeed. A run may fail on a stream loss only where the stream really
    stopped (sim_node starved on an overloaded machine): this test's own subscription, in another process,
    saw a gap too (or the estimator refused the recording for its gap). Before the fix the sampler lost the
    stream alone, in its planning, with no gap anywhere else."""
    desc, probe = system
    _at_pick(desc, probe)
    outcomes: list[str] = []
    while sum(o.startswith("ok") for o in outcomes) < 3:
        assert len(outcomes) < 8, outcomes
        t0 = time.monotonic()
        res = call_trigger(probe, "payload_sampler/record_reference", 60.0)
        if res.success:
            outcomes.append(f"ok: {res.message}")
            continue
        stall = probe.stalled_since(t0)
        outcomes.append(f"failed (longest joint_states gap seen by the test {stall:.2f} s): {res.message}")
        lost = "joint_states lost" in res.message or "collision monitor stopped monitoring" in res.message
        recording_gap = "reference rejected" in res.message and "the stream has a" in res.message
        assert (lost and stall > 0.3) or recording_gap, outcomes
        _at_pick(desc, probe)
    print("\n".join(outcomes))


def test_a_reference_run_cut_by_a_real_stream_gap_is_tried_once_more_by_itself(system):
    """Issue 48: sim_node stops joint_states and /clock for 1 s during the reference excitation (a real gap: the
    automatic timeout at 1 kHz is 0.5 s): the sampler's first attempt ends for the lost stream, the sampler tries
    once more by itself, and the answer says both."""
    from payload_estimation.sampling.sampler import RETRIED_NOTE

    desc, probe = system
    _at_pick(desc, probe)
    fut = _call_async(probe, "payload_sampler/record_reference")
    assert wait_for(lambda: probe.values().get("phase") == "sequence", 60.0), probe.values()
    assert call_trigger(probe, "sim_node/fault_gap", 10.0).success
    assert wait_for(fut.done, 120.0), "record_reference did not answer"
    res = fut.result()
    assert RETRIED_NOTE in res.message and "joint_states lost for" in res.message, res.message
    assert res.success, res.message
    assert probe.values().get("joint_state_timeout_s") == "0.5", probe.values()


def test_after_a_cancel_and_a_grasp_sample_is_not_stranded(system):
    desc, probe = system
    _at_pick(desc, probe)
    fut = _call_async(probe, "payload_sampler/record_reference")
    assert wait_for(lambda: probe.values().get("busy") == "True", 20.0)
    assert call_trigger(probe, "payload_sampler/cancel", 10.0).success
    assert wait_for(fut.done, 30.0) and not fut.result().success
    vals = probe.values()
    assert vals["last_outcome"] == "cancelled" and vals["pick_anchor_deg"] != "", vals
    assert wait_for(lambda: np.max(np.abs(probe.q - PICK)) < np.radians(0.5), 10.0)  # at the pick configuration
    assert call_trigger(probe, "sim_node/attach_payload", 10.0).success  # the grasp
    assert wait_for(lambda: probe.collision, 10.0), "the monitor did not report the grasp"
    time.sleep(2.0)  # as test_dynamic_sampling: the monitor holds the arm at rest after its detection
    assert probe.collision  # still reported: it clears only once the sampler raises active (or an estimate)
    outcomes: list[str] = []
    while True:
        res = call_trigger(probe, "payload_sampler/sample", 90.0)
        outcomes.append(res.message if res.success else f"{res.message} [monitor: {_monitor_brief(probe)}]")
        # it was refused: "... cannot return ... until it clears"
        assert not res.message.startswith("refused"), "\n".join(outcomes)
        if res.success:
            break
        # a try may fail for what the machine's load does to sim_node and the monitor (a stream stall, the
        # monitor slow to clear the grasp under the sampler's active flag), never by a refusal; the next
        # try starts at the same pick configuration again
        assert len(outcomes) < 3, "\n".join(outcomes + [f"monitor: {probe.monitor}"])
        time.sleep(1.5)
    assert probe.values()["pick_anchor_deg"] == ""


def _monitor_brief(probe) -> str:
    """The collision monitor's status values that say why it reported a collision."""
    keys = ("link", "peak", "threshold_scale", "payload_source", "payload_mass", "payload_sigma", "observer_gaps",
            "samples_skipped", "events")
    return ", ".join(f"{k}={probe.monitor[k]}" for k in keys if k in probe.monitor)


def _call_async(probe, service: str):
    cli = probe.create_client(Trigger, service)
    assert cli.wait_for_service(timeout_sec=10.0)
    return cli.call_async(Trigger.Request())
