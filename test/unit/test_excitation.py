"""Excitation trajectories (paper 003 eqs. 8-10) against independent references: numerical
differentiation, the RigidBodyDynamics regressor, the description's limits and the MuJoCo arm."""

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # before numpy: BLAS threads thrash on a shared machine


import csv

import numpy as np
import pytest

from payload_estimation.files.trajectory_file import read_trajectory_file, write_trajectory_csv, write_trajectory_file
from payload_estimation.identification.excitation import (
    ExcitationConfig,
    ExcitationDesigner,
    ExcitationError,
    FourierTrajectory,
    check_limits,
    constraint_nullspace,
)
from payload_estimation.model.dynamics import RigidBodyDynamics
from payload_estimation.model.robot_file import load_robot


@pytest.fixture(scope="module")
def iiwa():
    return load_robot("iiwa14")


@pytest.fixture(scope="module")
def designer(iiwa):
    return ExcitationDesigner(iiwa, ExcitationConfig(f0=0.2, n_eval=40, maxiter=2, popsize=3, progress=False))


def test_rest_constraints_and_periodicity(designer):
    rng = np.random.default_rng(1)
    for _ in range(5):
        tr = designer.trajectory(rng.normal(size=designer.n_free))
        q, dq, ddq = tr.evaluate([0.0, tr.period])
        np.testing.assert_allclose(q, np.vstack([designer.q0, designer.q0]), atol=1e-12)
        np.testing.assert_allclose(dq, 0.0, atol=1e-12)
        np.testing.assert_allclose(ddq, 0.0, atol=1e-12)
    n = constraint_nullspace(5)
    assert n.shape == (10, 7)
    np.testing.assert_allclose(n.T @ n, np.eye(7), atol=1e-12)


def test_derivatives_match_numerical_differentiation(designer):
    tr = designer.trajectory(np.random.default_rng(2).normal(size=designer.n_free))
    t = np.linspace(0.3, 4.0, 2001)
    h = t[1] - t[0]
    q, dq, ddq = tr.evaluate(t)
    np.testing.assert_allclose(np.gradient(q, h, axis=0)[2:-2], dq[2:-2], atol=2e-5)
    np.testing.assert_allclose(np.gradient(dq, h, axis=0)[2:-2], ddq[2:-2], atol=2e-4)


def test_limits_and_workspace_restriction(iiwa):
    dev = 0.4
    cfg = ExcitationConfig(f0=0.2, velocity_factor=0.5, acceleration_limit=2.0, max_deviation=dev, progress=False,
                           center=(0.0, 0.5, 0.0, -1.0, 0.0, 0.5, 0.0))
    des = ExcitationDesigner(iiwa, cfg)
    tr = des.trajectory(np.random.default_rng(3).normal(size=des.n_free))
    _, q, dq, ddq = tr.sample(2000.0)
    assert np.all(np.abs(q - des.q0) <= dev + 1e-9)
    assert np.all(np.abs(dq) <= 0.5 * iiwa.limits.velocity + 1e-9)
    assert np.all(np.abs(ddq) <= 2.0 + 1e-9)
    assert check_limits(tr, iiwa) == []
    # every joint uses its full allowance on at least one of the three bounds (scaling is tight)
    peak = np.maximum.reduce([np.abs(q - des.q0).max(0) / dev, np.abs(dq).max(0) / (0.5 * iiwa.limits.velocity),
                              np.abs(ddq).max(0) / 2.0])
    assert np.all(peak > 0.99)


def test_cond_matches_independent_regressor(iiwa, designer):
    tr = designer.trajectory(np.random.default_rng(4).normal(size=designer.n_free))
    dyn = RigidBodyDynamics(iiwa)
    q, dq, ddq = tr.evaluate(designer.t_eval)
    rows = []
    for k in range(len(q)):
        y = designer.base.base_regressor(dyn.regressor(q[k], dq[k], ddq[k]))
        rows.append(np.hstack([y, np.diag(dq[k]), np.diag(np.sign(dq[k]))]))
    assert designer.cond(tr) == pytest.approx(np.linalg.cond(np.vstack(rows)), rel=1e-8)


@pytest.mark.slow
def test_optimisation_improves_cond(iiwa):
    cfg = ExcitationConfig(f0=0.2, n_eval=40, maxiter=3, popsize=3, progress=False, seed=5)
    res = ExcitationDesigner(iiwa, cfg).optimise()
    assert res.cond < res.cond_initial
    assert res.cond == pytest.approx(ExcitationDesigner(iiwa, cfg).cond(res.trajectory), rel=1e-9)
    assert check_limits(res.trajectory, iiwa) == []


def test_exports_roundtrip_and_run_on_simulator(tmp_path, iiwa, designer):
    from payload_estimation.sim import SimConfig, SimulatedArm

    tr = designer.trajectory(np.random.default_rng(6).normal(size=designer.n_free))
    path = write_trajectory_csv(tmp_path / "traj.csv", tr, rate=50.0, periods=2)
    rows = list(csv.reader(path.open()))
    assert rows[0][:2] == ["t", "q1"] and rows[0][-1] == "ddq7"
    assert len(rows) == 1 + 2 * 5 * 50 + 1
    data = np.array(rows[1:], float)
    np.testing.assert_allclose(data[:, 1:8], tr.evaluate(data[:, 0])[0], atol=1e-8)

    for suffix in ("json", "yaml"):
        tp = write_trajectory_file(tmp_path / f"traj.trajectory.{suffix}", tr, rate=50.0, periods=1, cond=12.5)
        names, pts, four = read_trajectory_file(tp)
        assert names == iiwa.joint_names and len(pts) == 251
        np.testing.assert_allclose(four.a, tr.a)
        np.testing.assert_allclose(pts[100][1], tr.evaluate(pts[100][0])[0][0], atol=1e-9)

    arm = SimulatedArm(iiwa, SimConfig(seed=0))
    arm.reset(tr.q0)
    t0 = arm.state().t
    arm.set_trajectory([(t, q, dq) for t, q, dq, _ in pts if t > 0])
    errs = []
    for _ in range(50):
        arm.step(40)
        st = arm.state()
        errs.append(np.abs(st.q - tr.evaluate(st.t - t0)[0][0]).max())
    # the simulated controller tracks the designed trajectory (time origin = trajectory start)
    assert max(errs) < 0.02


def test_bad_input(iiwa, tmp_path):
    with pytest.raises(ExcitationError, match="harmonics"):
        ExcitationConfig(harmonics=1)
    with pytest.raises(ExcitationError, match="velocity_factor"):
        ExcitationConfig(velocity_factor=1.5)
    with pytest.raises(ExcitationError, match="outside the reduced position limits"):
        ExcitationDesigner(iiwa, ExcitationConfig(center=(3.0, 0, 0, 0, 0, 0, 0)))
    with pytest.raises(ExcitationError, match="center must give 7"):
        ExcitationDesigner(iiwa, ExcitationConfig(center=(0.0, 0.0)))
    bad = tmp_path / "bad.json"
    bad.write_text('{"joint_names": ["a"], "points": [{"positions": [1, 2], "time_from_start": 1.0}]}')
    with pytest.raises(ExcitationError, match="point 0 has 2 positions"):
        read_trajectory_file(bad)
    with pytest.raises(ExcitationError, match="not a joint trajectory file"):
        read_trajectory_file(tmp_path / "missing.json")
    assert FourierTrajectory.from_dict({"f0": 1, "q0": [0], "a": [[1, -1]], "b": [[0, 0]]}).n == 1


def test_trajectory_file_becomes_a_joint_trajectory_message(tmp_path, designer):
    """The file's points convert to a trajectory_msgs/JointTrajectory the sim node accepts."""
    from payload_estimation.ros.messages import trajectory_from_msg, trajectory_msg

    tr = designer.trajectory(np.random.default_rng(8).normal(size=designer.n_free))
    names, pts, _ = read_trajectory_file(write_trajectory_file(tmp_path / "t.json", tr, rate=20.0))
    moving = [p for p in pts if p[0] > 0]  # t = 0 is the current state, not a waypoint
    msg = trajectory_msg(names, [p[1] for p in moving], [p[0] for p in moving], [p[2] for p in moving])
    t, q = trajectory_from_msg(msg, names)
    np.testing.assert_allclose(q, tr.evaluate(t)[0], atol=1e-9)
    assert len(msg.points) == 100
