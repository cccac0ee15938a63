"""The calibration sweep (sampling.sweep): bounded poses that determine the unloaded gravity model.

Checked against MuJoCo truth: a model identified from the planned sweep of an arm 5 % off its model,
with sensor offsets, predicts that arm's static torques, recovers the offsets and gives the payload
fit its accuracy; and as a :class:`SamplingRun` the sweep never raises ``active``, never leaves its box.
"""

from __future__ import annotations

import numpy as np
import pytest
from test_sampling_run import RUN, SEQ, KinematicArm, drive

from payload_estimation.identification.robot_identification import describe_offsets, identify_gravity
from payload_estimation.model.dynamics import RigidBodyDynamics
from payload_estimation.model.robot_file import load_robot
from payload_estimation.sampling.poses import MotionLimitError, PosePlanConfig, validate_plan
from payload_estimation.sampling.sampling_run import Finished, RunMode, RunSpec, SamplingRun, SetActive
from payload_estimation.sampling.sequence import Capture, Estimate, Move, SequenceConfig
from payload_estimation.sampling.sweep import plan_sweep
from payload_estimation.signals.samples import Samples
from payload_estimation.sim import SensorConfig, SimConfig, SimulatedArm

Q0 = {"lwr4": np.radians([10, 40, -5, -70, 15, 50, 20]), "iiwa14": np.radians([-10, 35, 5, -75, -10, 55, 15])}
SWEEP = PosePlanConfig(n_poses=16, amplitude_deg=20.0, limit_margin_deg=1.0, velocity_scale=0.6, min_duration=0.25,
                       max_candidates=600)


@pytest.mark.parametrize("robot", ["lwr4", "iiwa14"])
def test_a_sweep_stays_in_its_box_and_identifies_the_arm(robot):
    desc = load_robot(robot)
    dyn = RigidBodyDynamics(desc)
    plan = plan_sweep(dyn, Q0[robot], SWEEP)
    assert len(plan.poses) == SWEEP.n_poses and np.allclose(plan.poses[0], Q0[robot])
    assert np.all(np.abs(plan.poses - Q0[robot]) <= np.radians(20.0) + 1e-12)
    validate_plan(plan, desc)  # limits and velocity limits of every move, the return included
    offsets = np.random.default_rng(3).uniform(-0.5, 0.5, desc.n)
    arm = SimulatedArm(desc, SimConfig(seed=4, model_error=0.05, sensor=SensorConfig(noise_std=0.1, offset=offsets)))
    tau = np.array([arm.static_capture(q, 100) for q in plan.poses])
    model = identify_gravity(desc, Samples(plan.poses, tau), offset=True)
    np.testing.assert_allclose(model.friction_terms()[2], offsets, atol=0.15)
    # each offset is reported with a σ that covers its error, and the undetermined ones are named
    std = np.array([dict(zip(model.names, model.std))[f"Fo{j + 1}"] for j in range(desc.n)])
    assert np.all(np.abs(model.friction_terms()[2] - offsets) <= 3 * std), (model.friction_terms()[2] - offsets, std)
    text = describe_offsets(model)
    loose = [desc.joint_names[j] for j in np.flatnonzero(3 * std > 0.1)]
    fo = model.friction_terms()[2]
    assert all(f"{nm} {fo[j]:+.3f} ± {std[j]:.3f}" in text for j, nm in enumerate(desc.joint_names))
    assert (f"not determined by these poses (3 σ above 0.1 N m): {', '.join(loose)}" in text) if loose else \
        "not determined" not in text
    print(robot, text)
    # it predicts the true arm's static torques at new poses in the same box far better than the data sheet
    rng = np.random.default_rng(5)
    held = Q0[robot] + rng.uniform(-1, 1, (20, desc.n)) * np.radians(18.0)
    truth = np.array([arm.static_capture(q, 2000) for q in held])
    calibrated = np.sqrt(np.mean((model.predict(dyn, held) - truth) ** 2))
    nominal = np.sqrt(np.mean((np.array([dyn.gravity(q) for q in held]) - truth) ** 2))
    print(f"{robot}: torque RMS at held-out poses: calibrated {calibrated:.3f} N m, data sheet {nominal:.3f} N m")
    assert calibrated < 0.1 and calibrated < nominal / 5
    # the covariance says how good it is: the prediction error is within 3 σ of the model's own
    y = model.regressor(dyn, held)
    std = np.sqrt(np.einsum("ij,jk,ik->i", y, model.covariance, y)).reshape(truth.shape)
    assert np.mean(np.abs(model.predict(dyn, held) - truth) <= 3 * std + 3 * 0.1 / np.sqrt(2000)) >= 0.9


def test_a_sweep_needs_enough_poses_and_a_box_inside_the_limits():
    dyn = RigidBodyDynamics(load_robot("lwr4"))
    with pytest.raises(ValueError, match="at least"):
        plan_sweep(dyn, Q0["lwr4"], PosePlanConfig(n_poses=4, amplitude_deg=20.0))
    outside = Q0["lwr4"].copy()
    outside[1] = np.radians(150)
    with pytest.raises(MotionLimitError):
        plan_sweep(dyn, outside, SWEEP)


def test_a_sweep_run_never_raises_active_and_keeps_to_its_box():
    """As a run: captures at every pose, one calibrate, back at the start, ``active`` never published (the
    monitor must not learn a provisional payload from an unloaded arm), every command inside the box."""
    dyn = RigidBodyDynamics(load_robot("lwr4"))
    arm = KinematicArm(Q0["lwr4"])
    log: list = []
    seq = SequenceConfig(velocity_scale=SWEEP.velocity_scale, min_duration=SWEEP.min_duration, dwell=SEQ.dwell)
    run = SamplingRun(dyn, RunSpec(RunMode.SWEEP, SWEEP, seq, RUN), 0.0, 0.0)
    fin, _ = drive(run, arm, 0.0, log=log, max_t=60.0)
    assert isinstance(fin, Finished) and fin.ok and fin.text.startswith("calibrated from 16 poses"), fin.text
    assert not any(isinstance(a, SetActive) for a in log)
    assert sum(isinstance(a, Capture) for a in log) == 16 and sum(isinstance(a, Estimate) for a in log) == 1
    targets = np.array([a.target for a in log if isinstance(a, Move)])
    assert np.all(np.abs(targets - Q0["lwr4"]) <= np.radians(20.0) + 1e-9)
    np.testing.assert_allclose(arm.q, Q0["lwr4"], atol=1e-9)
