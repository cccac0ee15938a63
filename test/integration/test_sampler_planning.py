"""The sampler's motion planning never blocks its executor (issue 27 item 2), over real rclpy in one process.

Planning an excitation takes ~0.5-1 s of CPU. It used to run inside the executor's callback: no
joint_states were handled meanwhile, and the sampler's own watchdog (``joint_state_timeout`` 0.5 s by
default) aborted ``~/record_reference`` with "joint_states lost". Here the real sampler and estimator
run in one SingleThreadedExecutor (as ``bringup`` runs them) beside the test's kinematic arm
(test_nodes.StaticArm, 250 Hz from its own thread): joint_states keep being handled while the plan is
computed, the run succeeds at the default timeout, and ``~/cancel`` ends a run that is still planning.
The same with sim_node and the nodes as processes: test_sampler_recovery.py.
"""

from __future__ import annotations

import os
import time

import numpy as np
import pytest
from rclpy.parameter import Parameter
from ros_helpers import wait_for
from std_srvs.srv import Trigger
from test_nodes import Q0, StaticArm, status_values

from payload_estimation.ros.estimator_node import PayloadEstimatorNode
from payload_estimation.ros.messages import trajectory_from_msg
from payload_estimation.ros.sampler_node import PayloadSamplerNode

pytestmark = pytest.mark.flaky(reruns=1, reruns_delay=2)

NS = f"/plan{os.getpid()}"


class PlayingArm(StaticArm):
    """StaticArm that plays a commanded trajectory in wall time (linear between its points) instead of
    jumping to its end: the estimator takes a reference run only if the arm moved."""

    def __init__(self, *args, **kwargs):
        self.playing: tuple[float, np.ndarray, np.ndarray] | None = None  # (wall start, times s, q rad)
        super().__init__(*args, **kwargs)

    def _on_traj(self, msg):
        super()._on_traj(msg)
        times, q = trajectory_from_msg(msg, self.dyn_loaded.desc.joint_names)
        self.playing = (time.monotonic(), np.concatenate([[0.0], times]), np.vstack([getattr(self, "q_from", q[0]), q]))

    def _tick(self):
        if self.playing is not None:
            t0, times, q = self.playing
            t = time.monotonic() - t0
            self.q = np.array([np.interp(t, times, q[:, j]) for j in range(q.shape[1])])
        self.q_from = self.q.copy()
        super()._tick()


class CountingSampler(PayloadSamplerNode):
    """The real sampler, noting (wall s, run phase) of every joint_states callback its executor runs
    during a run."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.events: list[tuple[float, str]] = []
        self.plan_delay = 0.0  # s added to the planning (on the worker): time to cancel in it

    def _plan(self, job) -> None:
        delay = self.plan_delay

        class Slow:
            def compute(self):
                time.sleep(delay)
                return job.compute()

        super()._plan(Slow())

    def _on_joint_states(self, msg) -> None:
        if self._run is not None:
            self.events.append((time.monotonic(), self._run.phase))
        super()._on_joint_states(msg)

    def planning_gap(self) -> tuple[float, int]:
        """(longest wall gap between two joint_states callbacks from the last one at rest to the first one
        of the sequence, i.e. around the planning; callbacks run in phase ``planning``)."""
        phases = [p for _, p in self.events]
        start = len(phases) - 1 - phases[::-1].index("rest")
        end = phases.index("sequence")
        times = [t for t, _ in self.events[start:end + 1]]
        return float(np.max(np.diff(times))), phases.count("planning")


def _sampler(rig, **params) -> CountingSampler:
    """joint_state_timeout 2 s: patience on a loaded machine (the stream the executor handles is measured
    directly; the default 0.5 s with the nodes as processes: test_sampler_recovery.py); the test plays
    no collision monitor."""
    values = {"require_monitor": False, "mode": "dynamic", "joint_state_timeout": 2.0, **params}
    return rig.add(CountingSampler(parameter_overrides=[Parameter(k, value=v) for k, v in values.items()]))


def test_joint_states_are_handled_while_the_excitation_is_planned(rig, dyn):
    arm = rig.add(PlayingArm(dyn, Q0, payload=None))
    rig.add(PayloadEstimatorNode())
    sampler = _sampler(rig)
    time.sleep(0.5)
    res = rig.call("payload_sampler/record_reference", timeout=60.0)
    # (whether the estimator takes the recording is test_sampler_recovery's: under heavy load this in-process
    # arm's own thread can stall during the excitation, and the estimator rightly refuses a gap)
    gap, planning = sampler.planning_gap()
    st = status_values(rig, "payload_sampler/status", lambda v: v.get("busy") == "False" and v["last_outcome"])
    print(f"around the planning ({float(st['planning_s']):.2f} s): longest gap between joint_states callbacks "
          f"{gap:.3f} s, {planning} callbacks while planning; {res.message}")
    # the arm publishes every 4 ms and planning takes 0.5-4 s: no gap may reach the default
    # joint_state_timeout (0.5 s; before the fix the gap was the whole planning time)
    assert gap < 0.5
    assert planning >= 20
    assert len(arm.commands) == 1  # the run went on: the excitation, one multi-point trajectory


def test_cancel_while_planning_ends_the_run_without_moving_the_arm(rig, dyn):
    arm = rig.add(PlayingArm(dyn, Q0, payload=None))
    rig.add(PayloadEstimatorNode())
    sampler = _sampler(rig)
    sampler.plan_delay = 3.0
    cancel = rig.client_node.create_client(Trigger, "payload_sampler/cancel")
    assert cancel.wait_for_service(timeout_sec=5.0)
    time.sleep(0.5)
    fut = rig.call_async("payload_sampler/record_reference")
    assert wait_for(lambda: sampler._run is not None and sampler._run.phase == "planning", 20.0)
    t0 = time.monotonic()
    answer = cancel.call_async(Trigger.Request())
    assert wait_for(answer.done, 5.0) and answer.result().success, answer.result()
    assert wait_for(fut.done, 5.0)
    waited = time.monotonic() - t0
    assert not fut.result().success and "cancelled by the user" in fut.result().message, fut.result().message
    assert "nan" not in fut.result().message
    assert waited < 2.0, f"the run ended {waited:.2f} s after ~/cancel"
    assert arm.commands == []  # nothing was commanded
    # a cancel the user asked for is no fault (issue 30.6): WARN, not ERROR
    st = status_values(rig, "payload_sampler/status", lambda v: v.get("busy") == "False" and v["last_outcome"])
    assert st["last_outcome"] == "cancelled" and st["level"] == 1, st
    assert st["message"].startswith("cancelled by the user"), st["message"]
    # the abandoned plan finishes on the worker and is ignored; the next run plans afresh and succeeds
    sampler.plan_delay = 0.0
    res = rig.call("payload_sampler/record_reference", timeout=60.0)
    assert len(arm.commands) == 1, res.message  # planned and excited (the estimator may refuse a recording
    # with a gap of this in-process arm's own thread when the machine is overloaded: not this test's point)
    assert res.success or "the stream has a" in res.message, res.message
    assert np.allclose(arm.q, Q0)


def test_a_stalled_executor_is_not_a_lost_stream(rig, dyn):
    """Another callback of the same executor holds it for 0.8 s mid-run (bringup runs every node in one
    executor) while the arm keeps publishing. rclpy runs the ready steady-clock tick before the waiting
    joint_states sample: the tick must take that sample rather than abort on a stream that never stopped."""
    arm = rig.add(StaticArm(dyn, Q0))
    rig.add(PayloadEstimatorNode())
    rig.add(CountingSampler(parameter_overrides=[Parameter("require_monitor", value=False),
                                                 Parameter("mode", value="static"), Parameter("dwell", value=3.0)]))
    time.sleep(0.5)
    fut = rig.call_async("payload_sampler/sample")
    assert wait_for(lambda: len(arm.commands) >= 3, 30.0)
    rig.on_executor(lambda: time.sleep(0.8))  # the executor thread is busy: nothing of the sampler runs
    assert wait_for(fut.done, 60.0)
    assert fut.result().success, fut.result().message
