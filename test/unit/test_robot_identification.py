"""Identification of the unloaded robot on the MuJoCo simulated arm, whose true link parameters
(model_error != 0) the pipeline never sees: base coefficients vs K p_true, validation torques,
gravity-only identification, PARAMS.yaml round trip and the excite/identify/validate commands."""

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # before numpy: BLAS threads thrash on a shared machine


import numpy as np
import pytest
from data_paths import dataset

from payload_estimation.cli import main as cli_main
from payload_estimation.files.csv_samples import write_samples_csv
from payload_estimation.identification.excitation import ExcitationConfig, ExcitationDesigner, trajectory_points
from payload_estimation.identification.identified_model import base_regressor_rows
from payload_estimation.identification.robot_identification import (
    IdentificationError,
    IdentificationOptions,
    IdentifiedModel,
    cosine_trajectory,
    identify_gravity,
    identify_robot,
    random_configurations,
    validate_model,
)
from payload_estimation.model.dynamics import RigidBodyDynamics, gravity_params, link_params
from payload_estimation.model.robot_file import load_robot
from payload_estimation.signals.samples import Samples
from payload_estimation.sim import SensorConfig, SimConfig, SimulatedArm
from payload_estimation.sim.recorders import record_static_poses, record_trajectory

NOISE = 0.1
F0 = 0.25  # Hz: 4 s periods keep the tests short (the bench uses paper 003's 0.05 Hz)


def _arm(desc, seed=0):
    # NB: the seed also draws the hidden truth: the same seed is the same (unknown) robot
    return SimulatedArm(desc, SimConfig(seed=seed, model_error=0.03, sensor=SensorConfig(noise_std=NOISE)))


@pytest.fixture(scope="module", params=["iiwa14", "lwr4"])
def run(request):
    desc = load_robot(request.param)
    des = ExcitationDesigner(desc, ExcitationConfig(f0=F0, velocity_factor=0.8, n_eval=40, progress=False))
    traj = des.trajectory(np.random.default_rng(1).normal(size=des.n_free))
    arm = _arm(desc)
    rec = record_trajectory(arm, trajectory_points(traj, 100.0, 3), 500.0, q_start=traj.q0)
    model = identify_robot(desc, rec, period=traj.period, harmonics=5, start_index=0)
    return desc, des, traj, arm, rec, model


def test_base_coefficients_match_hidden_truth(run):
    desc, _, _, arm, rec, model = run
    assert rec.n_samples == 3 * int(500 / F0)
    true = model.K @ link_params(arm.true_description)
    nominal = model.K @ link_params(desc)
    est = model.base_coefficients()
    well = model.rsd < 5.0  # well-excited coefficients
    assert well.sum() >= 10
    rel = np.abs(est - true)[well] / np.abs(true[well])
    assert rel.max() < 0.1
    # the std is honest to within a small factor (rows decimated to the filter bandwidth)
    assert np.median(np.abs(est - true)[well] / model.std[well]) < 3.0
    # The data moved the model towards the truth. Judged by the torque the coefficient errors make on
    # random states, which does not depend on the choice of base columns: in the paper's regroupings
    # (model.base_parameters) several large inertia sums share one weakly excited direction of this
    # short random motion, so single coefficients say less than the model does (measured: 0.15 x the
    # nominal model's torque error on iiwa14, 0.29 x on lwr4).
    rng = np.random.default_rng(3)
    lim = desc.limits.position
    states = [rng.uniform(lim[:, 0], lim[:, 1], (200, desc.n)), rng.uniform(-1, 1, (200, desc.n)),
              rng.uniform(-2, 2, (200, desc.n))]
    y_b = base_regressor_rows(RigidBodyDynamics(desc), model.selection, *states)
    assert np.std(y_b @ (est - true)) < 0.35 * np.std(y_b @ (nominal - true))
    big = np.abs(true) > 1.0  # the m c terms of the shoulder, the big inertia sums: within a few percent
    assert np.all(np.abs(est - true)[big] / np.abs(true[big]) < 0.06)


def test_validation_on_other_trajectories(run):
    desc, des, _, _, _, model = run
    arm = _arm(desc)  # the same robot, another run
    other = des.trajectory(np.random.default_rng(7).normal(size=des.n_free))
    fourier = record_trajectory(arm, trajectory_points(other, 100.0, 1), 500.0, q_start=other.q0)
    pts = cosine_trajectory(desc, omega=1.0, duration=4.0)
    # starts at rest with a non-zero desired acceleration: drop the tracking transient
    cosine = record_trajectory(arm, pts, 500.0, q_start=pts[0][1], discard=0.5)
    nominal = _nominal_model(model, desc)
    for samples in (fourier, cosine):
        err = validate_model(model, desc, samples)
        err_nom = validate_model(nominal, desc, samples)
        assert err.per_joint_rms.shape == (desc.n,)
        assert err.total_rms < 0.1  # N m; noise 0.1 N m raw, filtered at 6 Hz
        assert err.total_rms < 0.5 * err_nom.total_rms


def _nominal_model(model, desc):
    import dataclasses

    pi = model.K @ link_params(desc)
    return dataclasses.replace(model, values=pi, kept=np.arange(model.rank))


def test_essential_parameters_and_params_file(run, tmp_path):
    desc, _, traj, _, rec, model = run
    ess = identify_robot(desc, rec, IdentificationOptions(essential=True), period=traj.period, harmonics=5,
                         start_index=0)
    assert len(ess.kept) <= len(model.kept)
    bad = (ess.rsd > 40.0) & (np.abs(ess.values) < 0.01)
    assert not bad.any()
    path = ess.save(tmp_path / "params.yaml")
    back = IdentifiedModel.load(path)
    assert back.names == ess.names
    np.testing.assert_allclose(back.K, ess.K)
    np.testing.assert_allclose(back.covariance, ess.covariance)
    dyn = RigidBodyDynamics(desc)
    q, dq, ddq = rec.q[:20], rec.dq[:20], rec.dq[:20] * 0.5
    np.testing.assert_allclose(back.predict(dyn, q, dq, ddq), ess.predict(dyn, q, dq, ddq), atol=1e-10)
    # prediction equals the dynamics of any standard parameters with the same coefficients
    np.testing.assert_allclose(
        _nominal_model(model, desc).predict(dyn, q, dq, ddq),
        np.array([dyn.inverse_dynamics(q[k], dq[k], ddq[k]) for k in range(20)]), atol=1e-8)


def test_alignment_finds_trajectory_start(run):
    desc, _, traj, _, rec, model = run
    # prepend 0.7 s of standing still: the start must be found from the desired trajectory
    k0 = 350
    still = Samples(np.repeat(rec.q[:1], k0, 0), np.repeat(rec.tau[:1], k0, 0), np.zeros((k0, desc.n)), None,
                    np.arange(k0) / 500.0)
    joined = Samples(np.vstack([still.q, rec.q]), np.vstack([still.tau, rec.tau]), np.vstack([still.dq, rec.dq]),
                     None, np.concatenate([still.t, rec.t + k0 / 500.0]))
    q_des = traj.evaluate(np.arange(int(traj.period * 500)) / 500.0)[0]
    aligned = identify_robot(desc, joined, period=traj.period, harmonics=5, q_desired_period=q_des)
    assert aligned.info["periods"] == 3
    np.testing.assert_allclose(aligned.base_coefficients(), model.base_coefficients(), rtol=1e-3, atol=2e-3)


@pytest.mark.slow
def test_gravity_only_from_static_poses(tmp_path, capsys):
    desc = load_robot("lwr4")
    arm = _arm(desc, seed=2)
    static = record_static_poses(arm, random_configurations(desc, 40, seed=3), settle=0.2, window=0.1)
    grav = identify_gravity(desc, static)
    true = grav.K @ gravity_params(arm.true_description)
    est = grav.base_coefficients()
    big = np.abs(true) > 0.05
    assert big.sum() >= 2
    np.testing.assert_allclose(est[big], true[big], rtol=5e-3)
    assert np.max(np.abs(est - true)) < 5e-3  # kg m
    val = record_static_poses(arm, random_configurations(desc, 10, seed=9), 0.2, 0.1)
    err = validate_model(grav, desc, val)
    assert err.total_rms < 0.05
    # the same through the command line
    params = tmp_path / "grav.yaml"
    assert cli_main(["identify", "--robot", "lwr4", "--data", str(write_samples_csv(static, tmp_path / "static.csv")),
                     "--gravity-only", "--out", str(params)]) == 0
    # the command fits a torque offset per joint by default (a torque sensor's bias)
    with_offsets = identify_gravity(desc, static, offset=True)
    assert with_offsets.names[-desc.n:] == tuple(f"Fo{j + 1}" for j in range(desc.n))
    np.testing.assert_allclose(IdentifiedModel.load(params).values, with_offsets.values, rtol=1e-6, atol=1e-9)
    # the file says which kinematics it was identified on: the nodes refuse it on another robot model
    from payload_estimation.model.robot_file import FINGERPRINT_KEY, kinematics_fingerprint

    assert IdentifiedModel.load(params).info[FINGERPRINT_KEY] == kinematics_fingerprint(desc)
    assert kinematics_fingerprint(load_robot("iiwa14")) != kinematics_fingerprint(desc)
    assert cli_main(["validate", "--robot", "lwr4", "--params", str(params), "--data",
                     str(write_samples_csv(val, tmp_path / "val.csv"))]) == 0
    assert any(line.startswith("| all ") for line in capsys.readouterr().out.splitlines())


@pytest.mark.slow
def test_commands_excite_identify_validate(tmp_path, capsys):
    desc = load_robot("iiwa14")
    traj_csv = tmp_path / "traj.csv"
    assert cli_main(["excite", "--robot", "iiwa14", "--f0", "0.25", "--maxiter", "1", "--popsize", "2",
                     "--velocity-factor", "0.8", "--out", str(traj_csv)]) == 0
    out = capsys.readouterr().out
    assert "cond(Y_b)" in out
    traj_file = tmp_path / "traj.trajectory.json"
    from payload_estimation.files.trajectory_file import read_trajectory_file

    _, pts, four = read_trajectory_file(traj_file)
    arm = _arm(desc, seed=5)
    arm.reset(four.q0)
    arm.step(300)  # idle before the motion starts: identify must align by itself
    run_pts = trajectory_points(four, 100.0, 3)
    rec = record_trajectory(arm, [(0.0, four.q0, np.zeros(7))] + [(t + 0.4, q, dq, a) for t, q, dq, a in run_pts],
                            500.0)
    data = write_samples_csv(rec, tmp_path / "run.csv")
    params = tmp_path / "params.yaml"
    assert cli_main(["identify", "--robot", "iiwa14", "--data", str(data), "--trajectory", str(traj_file),
                     "--essential", "--physical", "--starts", "1", "--out", str(params)]) == 0
    out = capsys.readouterr().out
    assert "physical parameters" in out and params.exists()
    robot_yaml = tmp_path / "params_robot.yaml"
    ident = load_robot(robot_yaml)
    assert ident.n == 7 and (tmp_path / "params_robot.urdf").exists()
    val = write_samples_csv(record_trajectory(arm, cosine_trajectory(desc, omega=1.0, duration=3.0), 500.0,
                                     q_start=cosine_trajectory(desc)[0][1], discard=0.5), tmp_path / "val.csv")
    for p in (str(params), str(robot_yaml), "nominal"):
        assert cli_main(["validate", "--robot", "iiwa14", "--params", p, "--data", str(val)]) == 0
    tables = capsys.readouterr().out
    assert sum(line.startswith("| A7 ") for line in tables.splitlines()) == 3
    rms = [float(line.split("|")[2]) for line in tables.splitlines() if line.startswith("| all ")]
    assert rms[0] < rms[2]  # identified coefficients beat the nominal model
    # the physically consistent set trades some accuracy for consistency (paper 003 Fig. 5); on this
    # short, non-optimised excitation it stays within a few tenths of a N m
    assert rms[1] < 0.3
    assert cli_main(["identify", "--robot", "lwr4", "--data", str(data), "--out", str(tmp_path / "x.yaml"),
                     "--gravity-only", "--physical"]) == 1
    assert cli_main(["validate", "--robot", "lwr4", "--params", str(params), "--data", str(val)]) == 1


def test_bad_input(run, tmp_path):
    desc, _, traj, _, rec, model = run
    with pytest.raises(IdentificationError, match="periods"):
        identify_robot(desc, rec.subset(slice(0, 100)), period=traj.period, harmonics=5, start_index=0)
    with pytest.raises(IdentificationError, match="harmonics"):
        identify_robot(desc, rec, period=traj.period)
    no_t = Samples(rec.q, rec.tau)
    with pytest.raises(IdentificationError, match="time stamps"):
        identify_robot(desc, no_t, period=traj.period, harmonics=5)
    with pytest.raises(IdentificationError, match="no such parameter file"):
        IdentifiedModel.load(tmp_path / "nope.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("format: something-else\n")
    with pytest.raises(IdentificationError, match="not a PARAMS file"):
        IdentifiedModel.load(bad)
    with pytest.raises(IdentificationError, match="too few"):
        identify_gravity(desc, Samples(rec.q[:3], rec.tau[:3]))


@pytest.mark.slow
def test_a_params_file_with_other_base_columns_reads_alike(tmp_path):
    """A PARAMS.yaml written with another choice of base columns (an older version chose link-frame
    columns by QR) predicts the same torques: the base regressor is Y K⁺ for whatever K the file has."""
    import dataclasses

    desc = load_robot("lwr4")
    dyn = RigidBodyDynamics(desc)
    static = record_static_poses(_arm(desc, seed=2), random_configurations(desc, 40, seed=3), settle=0.2, window=0.1)
    grav = identify_gravity(desc, static)
    assert grav.kept.size == grav.rank  # every coefficient kept: a change of basis applies to all
    m = np.eye(grav.rank) + 0.3 * np.random.default_rng(5).normal(size=(grav.rank, grav.rank))
    other = dataclasses.replace(grav, K=m @ grav.K, values=m @ grav.values, covariance=m @ grav.covariance @ m.T)
    loaded = IdentifiedModel.load(other.save(tmp_path / "other.yaml"))
    q = random_configurations(desc, 20, seed=4)
    np.testing.assert_allclose(loaded.predict(dyn, q), grav.predict(dyn, q), atol=1e-8)


# Real LWR 4+ logs and the published Gaz 2016 URDF (../shared/datasets/lwr4-iit, LGPL-3.0: not copied), used by
# path; absent: skipped, under CI: an error (test/conftest.py).
LWR_IIT = dataset("lwr4-iit")
needs_lwr_iit = pytest.mark.needs_data(LWR_IIT)


@needs_lwr_iit
@pytest.mark.slow
def test_identify_physical_from_the_published_lwr_urdf_predicts_an_unseen_motion(tmp_path, capsys):
    """The Gaz 2016 URDF as shipped has six links whose inertia is not physically consistent: the prior
    is projected (said in one line) and identify --physical writes a consistent link set. Identified from
    measurements_1 with the default command, both files predict the same excitation (measurements_2)
    and another one (measurements_3, never seen) as `validate` measures: the least-squares coefficients
    of this log predict measurements_3 to 0.98 N m only."""
    from payload_estimation.model.parameters import check_consistency

    urdf = LWR_IIT / "kuka_lwr4_gaz.urdf"
    assert sum(not check_consistency(b).ok for b in load_robot(urdf).links) == 6
    params = tmp_path / "params.yaml"
    assert cli_main(["identify", "--robot", str(urdf), "--data", str(LWR_IIT / "measurements_1.csv"), "--physical",
                     "--starts", "1", "--out", str(params)]) == 0
    out = capsys.readouterr().out
    prior = [line for line in out.splitlines() if line.startswith("prior: ")]
    assert len(prior) == 1 and "links 1 (" in prior[0] and "not physically consistent" in prior[0]
    robot = tmp_path / "params_robot.urdf"
    assert all(check_consistency(b).ok for b in load_robot(robot).links)
    for log, bound in (("measurements_2.csv", 0.25), ("measurements_3.csv", 0.40)):
        for p in (params, robot):
            assert cli_main(["validate", "--robot", str(urdf), "--params", str(p), "--data", str(LWR_IIT / log)]) == 0
            rms = float(next(line for line in capsys.readouterr().out.splitlines()
                             if line.startswith("| all ")).split("|")[2])
            assert rms <= bound, (log, p.name, rms)
    # sigma honest across motions: identified from the other excitation, the coefficients differ by at most
    # 2 std (combined) for >= 90 % of them (the least-squares std: 31 %; scaled by the CV residual alone: 86-88 %)
    other = tmp_path / "other.yaml"
    assert cli_main(["identify", "--robot", str(urdf), "--data", str(LWR_IIT / "measurements_3.csv"), "--friction",
                     "viscous+coulomb+offset", "--starts", "1", "--out", str(other)]) == 0
    a, b = IdentifiedModel.load(params), IdentifiedModel.load(other)
    assert a.names == b.names
    z = np.abs(a.values - b.values) / np.sqrt(a.std ** 2 + b.std ** 2)
    assert np.mean(z <= 2) >= 0.9, np.sort(z)[-8:]
