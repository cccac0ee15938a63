"""Chaos test (issue 27): sim_node, payload_estimator, payload_sampler and collision_monitor as processes,
driven for 60 s per seed by a seeded random schedule of description re-publications, concurrent
service calls, parameter sets, grasp/release and joint_states faults; invariants checked from outside
after every step, then a clean estimate within 1 % / 5 mm. The driver and the invariants: chaos_driver.py.

Seeds: ``PE_CHAOS_SEEDS`` (comma-separated, default ``1``; CI runs seed 2, on Jazzy only;
empty: the chaos runs are skipped); ``PE_CHAOS_DURATION`` (s, default 60). One seed takes about 110 s of wall time:
start-up, the 60 s schedule, the drain and the clean estimate.
A failure prints its seed, the step, the event, the invariant and the node's last log lines; rerun one
seed with ``PE_CHAOS_SEEDS=<seed> .venv/bin/python -m pytest test/integration/test_chaos.py`` or
``.venv/bin/python test/integration/chaos_driver.py --seed <seed>``. ``PE_CHAOS_FINAL=dynamic``: the clean run after the
schedule records a reference before the grasp and samples dynamically (default ``static``: the issue's
anchor + grasp + sample). The schedule is reproducible from the seed; the
nodes' timing is not (real processes), so a rare failure may need a few runs of its seed.
"""

from __future__ import annotations

import os
import time
from types import SimpleNamespace

import numpy as np
import pytest
import rclpy
from chaos_driver import ChaosProbe, ChaosRun, Event, changed_description, make_schedule, physical_problem
from diagnostic_msgs.msg import DiagnosticArray
from geometry_msgs.msg import InertiaStamped
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node
from ros_helpers import call_trigger, wait_for

from payload_estimation.ros.bringup import ros_args, start_processes, stop_processes
from payload_estimation.ros.qos import LATCHED_QOS
from payload_estimation.ros.spin_thread import SpinThread

SEEDS = [int(s) for s in os.environ.get("PE_CHAOS_SEEDS", "1").split(",") if s.strip()]
DURATION = float(os.environ.get("PE_CHAOS_DURATION", "60"))
FINAL = os.environ.get("PE_CHAOS_FINAL", "static")


def test_the_schedule_is_reproducible_and_covers_every_kind():
    a, b = make_schedule(11, 60.0), make_schedule(11, 60.0)
    assert a == b and a != make_schedule(12, 60.0)
    assert all(isinstance(e, Event) and 0 < e.t < 60.0 for e in a)
    assert 30 <= len(a) <= 120  # about one event a second
    kinds = {e.kind for s in SEEDS or [1, 2] for e in make_schedule(s, DURATION)}  # none run: the defaults
    assert kinds >= {"call", "burst", "param", "description", "fault", "grasp", "release"}


def test_the_invariant_helpers_see_what_they_must():
    text = '<robot><link name="a"><inertial><mass value="2.0"/></inertial></link></robot>'
    assert 'value="2.04"' in changed_description(text, 0)
    msg = InertiaStamped()
    msg.inertia.m, msg.inertia.ixx, msg.inertia.iyy, msg.inertia.izz = 1.0, 0.01, 0.01, 0.01
    assert physical_problem(msg) == ""
    msg.inertia.izz = 0.05  # 0.05 > 0.01 + 0.01: no body has these principal moments
    assert "triangle" in physical_problem(msg)
    msg.inertia.izz, msg.inertia.com.x = 0.01, float("nan")
    assert "non-finite" in physical_problem(msg)
    msg.inertia.com.x, msg.inertia.m = 0.0, -1.0
    assert "mass" in physical_problem(msg)


def test_the_blindness_verdict():
    """Residuals stop at 10 s: an ERROR within 1.5 s is fine; a monitor whose 1 Hz status goes on without
    ERROR is blind, and so is one that never comes back; one whose own status was late too and came back
    was starved (not judged)."""
    def verdict(statuses, errors=()):
        probe = SimpleNamespace(monitor_errors=list(errors), starved=[], monitor_statuses=list(statuses))
        return ChaosProbe._blind_verdict(probe, 10.0)

    on_time = [8.8, 9.8, 10.8, 11.8, 12.8]
    assert verdict(on_time, errors=[10.6]) == "ok"
    assert verdict(on_time) == "blind"
    assert verdict([8.8, 9.8]) == "blind"  # hung: no status after the silence
    assert verdict([8.8, 9.8, 12.1]) == "starved"


def test_sim_node_injects_the_stream_faults_the_monitor_counts():
    """sim_node's ~/fault_* services do to joint_states what the chaos schedule relies on (the monitor's
    counters as the independent witness)."""
    ns = f"/chaosfaults{os.getpid()}"
    clock = [f"/clock:={ns}/clock"]
    rclpy.init()
    procs = start_processes(["sim"], ros_args(None, ns, None, clock, ["robot:=lwr4"]))
    procs += start_processes(["monitor"], ros_args(None, ns, True, clock, ["robot:=''"]))
    probe = Node("fault_probe", namespace=ns)
    got: dict[str, str] = {}
    probe.create_subscription(DiagnosticArray, "collision_monitor/status",
                              lambda m: got.update({kv.key: kv.value for kv in m.status[0].values}), LATCHED_QOS)
    spin = SpinThread(SingleThreadedExecutor(), probe)
    try:
        assert wait_for(lambda: got.get("joint_states_age_s") not in (None, "", "None"), 40.0), got
        time.sleep(1.0)
        assert call_trigger(probe, f"{ns}/sim_node/fault_future_stamp", 10.0).success
        assert wait_for(lambda: int(got["stamp_faults_rejected"]) >= 1 and "ahead" in got["last_time_fault"], 5.0)
        losses = int(got["joint_states_losses"])
        assert call_trigger(probe, f"{ns}/sim_node/fault_gap", 10.0).success
        assert wait_for(lambda: int(got["joint_states_losses"]) == losses + 1, 5.0), got
        assert call_trigger(probe, f"{ns}/sim_node/fault_restart", 10.0).success
        assert wait_for(lambda: int(got["stream_restarts"]) >= 1, 5.0), got
    finally:
        spin.stop()
        probe.destroy_node()
        stop_processes(procs)
        rclpy.shutdown()


@pytest.mark.parametrize("seed", SEEDS)
def test_chaos(seed, tmp_path):
    run = ChaosRun(seed, DURATION, str(tmp_path), FINAL)
    violations = run.run()
    report = run.report()
    print(report)
    if run.final_estimate is not None:
        mass, com, _ = run.final_estimate
        print(f"seed {seed}: clean estimate after the schedule {mass:.4f} kg, CoM {np.round(com * 1e3, 1)} mm")
    assert not violations, report
