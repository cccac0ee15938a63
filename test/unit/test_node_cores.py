"""The in-process wiring of the three nodes' cores (sampling.node_cores): a run's requests reach the estimator
service of its mode, as the sampler node's calls do, and the real estimator core answers them."""

from __future__ import annotations

import numpy as np
import pytest

from payload_estimation.collision.monitor import MonitorConfig
from payload_estimation.collision.supervisor import SupervisorConfig
from payload_estimation.errors import PayloadEstimationError
from payload_estimation.model.dynamics import RigidBodyDynamics
from payload_estimation.model.robot_file import load_robot
from payload_estimation.payload.estimator import LOADED, EstimatorConfig
from payload_estimation.sampling.excitation_sequence import Record
from payload_estimation.sampling.node_cores import NodeCores, estimator_service
from payload_estimation.sampling.run_states import RunMode
from payload_estimation.sampling.sampling_run import ClearCaptures, SetActive
from payload_estimation.sampling.sequence import Capture, Estimate
from payload_estimation.sim import SensorConfig, SimConfig, SimulatedArm

PICK = np.radians([5, 35, -5, -70, 10, 55, 5])


def test_each_mode_calls_the_estimator_services_the_sampler_node_calls():
    assert [estimator_service(RunMode.STATIC, a) for a in (ClearCaptures(), Capture(0), Estimate())] == [
        "clear_captures", "capture", "estimate"]
    assert [estimator_service(RunMode.SWEEP, a) for a in (Capture(3), Estimate())] == ["capture_calibration",
                                                                                       "calibrate"]
    assert [estimator_service(RunMode.DYNAMIC, a) for a in (Record(), Estimate())] == ["start_recording",
                                                                                      "estimate_motion"]
    assert estimator_service(RunMode.RECORD_REFERENCE, Estimate()) == "store_reference"
    assert estimator_service(RunMode.STATIC, SetActive(True)) == ""


def test_the_cores_answer_a_runs_requests_as_the_nodes_do():
    desc = load_robot("lwr4")
    cores = NodeCores(RigidBodyDynamics(desc), EstimatorConfig(), MonitorConfig(contact=None),
                      SupervisorConfig(policy="none"))
    arm = SimulatedArm(desc, SimConfig(seed=1, sensor=SensorConfig(noise_std=0.1)))
    arm.reset(PICK)
    for s in arm.run(1.0):
        cores.joint_state(s.t, s.q, s.dq, s.tau)
    assert cores.sampler.static()  # the sampler's pre-check saw the same samples
    answer, est = cores.carry_out(RunMode.STATIC, Capture(0))
    assert answer[:2] == ("capture", True) and est is None and cores.estimator.captures(LOADED) == 1, answer
    assert cores.carry_out(RunMode.STATIC, ClearCaptures()) == (None, None)
    assert cores.estimator.captures(LOADED) == 0
    assert cores.carry_out(RunMode.STATIC, SetActive(True)) == (None, None) and cores.active
    with pytest.raises(PayloadEstimationError, match="capture_calibration.*run the nodes"):
        cores.carry_out(RunMode.SWEEP, Capture(0))
