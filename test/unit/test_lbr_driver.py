"""A real LBR as lbr_fri_ros2_stack gives it (issue 45): the real LBR Med 7 log of ../shared/datasets/lbr-med7-kcl
exactly as recorded (no time column, q_0.. columns, FRI's measured torque opposite to the URDF's joint torque,
lost states), with KUKA's own external-torque estimate beside it as the reference.

Judged here: the sign is never fitted silently (refused with the joints, the evidence and the fix), a log without
stamps needs its rate, lost states are found, the default identification on the first 70 % predicts the last 30 %
better than KUKA's own model, and the residual on that model raises no alarm over the whole log."""

from __future__ import annotations

import numpy as np
import pytest
from data_paths import dataset

from payload_estimation.cli.command_line import main
from payload_estimation.files import load_recording
from payload_estimation.model import RigidBodyDynamics, load_robot
from payload_estimation.signals import check_torque_sign
from payload_estimation.signals.samples import SampleDataError
from payload_estimation.signals.torque_gains import torque_gains
from payload_estimation.stream.driver_stream import DriverStream

LOG = dataset("lbr-med7-kcl/measurements_with_ext_tau_1.csv")
URDF = dataset("lbr-med7-kcl/med7dock.urdf")
needs_log = pytest.mark.needs_data(LOG, URDF)
KUKA_LAST30_RMS = 0.619  # the README's figure: RMS of tau_ext over the last 30 % of the rows, all joints


def _log_columns():
    d = np.genfromtxt(LOG, delimiter=",", names=True)
    q = np.stack([d[f"q_{i}"] for i in range(7)], 1)
    tau = np.stack([d[f"tau_{i}"] for i in range(7)], 1)
    ext = np.stack([d[f"tau_ext_{i}"] for i in range(7)], 1)
    return q, tau, ext


def test_a_negative_gain_flips_the_sign_and_zero_is_refused():
    assert torque_gains("-1", 3).tolist() == [-1.0, -1.0, -1.0]
    assert torque_gains([1, -1, 2], 3).tolist() == [1.0, -1.0, 2.0]
    with pytest.raises(SampleDataError, match="joint 2 is 0.0: gains must be finite non-zero"):
        torque_gains([1, 0, 1], 3)


def test_the_sign_test_on_synthetic_gravity():
    """Slope +-1 with 20 % mass error and an offset: decided; a joint without gravity torque: undecided."""
    rng = np.random.default_rng(0)
    g = np.column_stack([np.zeros(200), 20 * np.sin(np.linspace(0, 3, 200)), 5 + rng.normal(0, 1, 200)])
    tau = g * np.array([1.0, -1.2, 0.8]) + 0.5 + rng.normal(0, 0.1, g.shape)
    res = check_torque_sign(g, tau, ("A1", "A2", "A3"))
    assert res.reversed_joints == (1,) and res.agreeing_joints == (2,) and np.isnan(res.slope[0])
    text = res.problem("run.csv", "--torque-gain {}")
    assert "A2" in text and "A1 carry too little gravity torque to tell" in text and "--torque-gain 1,-1,1" in text
    assert check_torque_sign(g, -tau, ("A1", "A2", "A3")).suggested_gain() == [1.0, 1.0, -1.0]
    assert check_torque_sign(g[:, :2], tau[:, :2], ("A1", "A2")).suggested_gain() == [-1.0]


@needs_log
def test_the_log_as_recorded_is_refused_with_the_reason_and_the_fix(capsys):
    base = ["residual", "--robot", str(URDF), "--data", str(LOG)]
    assert main(base) == 1
    err = capsys.readouterr().err
    assert "no time stamps" in err and "--rate 100" in err
    assert main(base + ["--rate", "100"]) == 1
    err = capsys.readouterr().err
    assert "runs opposite to the robot model's joint torque on A2" in err and "A4" in err
    assert "give --torque-gain -1" in err and "lbr_fri_ros2_stack" in err


@needs_log
def test_lost_states_are_found_from_the_rate():
    """8 rows of the log carry two periods of motion (a lost FRI state): with stamps made from 100 Hz they get 20 ms."""
    desc = load_robot(URDF)
    rec = load_recording(LOG, desc, rate=100.0)
    timing = rec.report.timing
    assert timing is not None and timing.skipped.size == 8 and set(timing.steps.tolist()) == {2}
    assert rec.samples.t[-1] == pytest.approx((10007 - 1 + 8) / 100.0)
    assert "8 row(s) follow a lost state" in "\n".join(rec.report.lines())


@needs_log
def test_the_torque_runs_opposite_to_the_description_and_the_gain_fixes_it():
    q, tau, _ = _log_columns()
    dyn = RigidBodyDynamics(load_robot(URDF))
    rows = np.arange(0, q.shape[0], 10)
    g = np.array([dyn.gravity(q[k]) for k in rows])
    res = check_torque_sign(g, tau[rows], dyn.desc.joint_names)
    assert {1, 3} <= set(res.reversed_joints) and not res.agreeing_joints
    assert not check_torque_sign(g, -tau[rows], dyn.desc.joint_names).reversed_joints


@needs_log
def test_identified_on_70_percent_beats_kukas_model_on_the_rest_and_the_residual_stays_quiet(tmp_path, capsys):
    """identify (defaults) on the first 70 %, validate on the last 30 %: <= 0.45 N m (KUKA's own model: 0.619);
    the residual on that model over the whole log: no event at 6 N m, max |r| <= 3 N m after the first 0.5 s."""
    params, val, res = tmp_path / "p.yaml", tmp_path / "val.csv", tmp_path / "r.csv"
    common = ["--robot", str(URDF), "--rate", "100", "--torque-gain", "-1"]
    assert main(["identify", *common, "--data", str(LOG), "--hold-out", "0.3", "--out", str(params)]) == 0
    out = capsys.readouterr().out
    assert "torque sign: runs with the model's gravity torque" in out and "8 row(s) follow a lost state" in out
    assert main(["validate", *common, "--data", str(LOG), "--params", str(params), "--hold-out", "0.3",
                 "--out", str(val)]) == 0
    table = np.genfromtxt(val, delimiter=",", names=True)
    err = np.stack([table[f"tau_meas{j}"] - table[f"tau_pred{j}"] for j in range(1, 8)], 1)
    rms = float(np.sqrt(np.mean(err ** 2)))
    assert rms <= 0.45 < KUKA_LAST30_RMS, rms
    capsys.readouterr()
    assert main(["residual", *common, "--data", str(LOG), "--params", str(params), "--out", str(res)]) == 0
    assert "0 collision event(s)" in capsys.readouterr().out
    r = np.genfromtxt(res, delimiter=",", names=True)
    late = np.stack([r[f"r{j}"] for j in range(1, 8)], 1)[r["t"] >= 0.5]
    assert np.abs(late).max() <= 3.0, np.abs(late).max(axis=0)


def test_corrupt_rows_are_named_and_dropped(tmp_path):
    path = tmp_path / "run.csv"
    rows = ["t,q1,q2,tau1,tau2"] + [f"{0.01 * k},{0.001 * k},{0.002 * k},{1 + 0.1 * k},{2 - 0.1 * k}"
                                    for k in range(10)]
    rows[4] = "0.03,nan,0,1,2"
    rows[7] = "0.06,0.006,0,1e300,2"
    path.write_text("\n".join(rows) + "\n")
    rec = load_recording(path)
    assert rec.samples.n_samples == 8 and rec.report.cleaning.corrupt == 2
    assert "2 corrupt rows (NaN/inf or an absurd value) (first at line 5, column 'q1': nan)" in rec.report.lines()[0]


def _driver_messages(q, tau, repeat: int = 4, rate: float = 100.0):
    """The log as lbr_fri_ros2_stack publishes it: each FRI state ``repeat`` times at ``repeat`` x ``rate`` Hz,
    velocities the raw difference of the positions over FRI's sample time."""
    dq = np.vstack([np.zeros((1, q.shape[1])), np.diff(q, axis=0) * rate])
    for k in range(q.shape[0]):
        for i in range(repeat):
            yield (k * repeat + i) / (repeat * rate), q[k], dq[k], tau[k]


@needs_log
def test_the_driver_stream_drops_repeats_and_takes_velocities_from_the_positions():
    q, tau, _ = _log_columns()
    stream = DriverStream()
    out = [s for s in (stream.take(*m) for m in _driver_messages(q[:1500], -tau[:1500])) if s is not None]
    assert stream.republishes and stream.rate == pytest.approx(100.0, rel=0.02)
    assert stream.derives_velocity, stream.velocity_source
    assert stream.repeated >= 3 * 1400  # each state's 3 repeats once the arm moves
    late = [s for s in out if s.t > 5.0]
    k = int(round(late[0].t * 100))  # state k, given when state k + 1 came: the central difference
    np.testing.assert_allclose(late[0].q, q[k], rtol=0, atol=0)
    np.testing.assert_allclose(late[0].dq, (q[k + 1] - q[k - 1]) * 50, rtol=1e-9, atol=1e-12)


def test_a_clean_stream_is_taken_as_it_is():
    """A simulator's stream (no repeats while moving, its own velocities; identical states at rest kept)."""
    t = np.arange(0, 2, 1e-3)
    q = np.column_stack([np.where(t < 1, 0.0, 0.3 * (t - 1) ** 2), np.zeros_like(t)])
    dq = np.gradient(q, t, axis=0) + 1e-3 * np.sin(200 * t)[:, None]
    stream = DriverStream()
    out = [stream.take(t[k], q[k], dq[k], np.ones(2)) for k in range(t.size)]
    assert all(s is not None for s in out) and not stream.republishes and not stream.derives_velocity
    assert stream.repeated == 0


@pytest.mark.slow
@needs_log
def test_a_consistent_fit_its_own_evidence_rejects_is_not_written():
    """The issue's case, at core level (the command refuses the reversed sign before): fitted with the torque as
    recorded, the consistent coefficients miss held-out blocks far worse than least squares; identify then writes
    the least-squares ones and says why (ConsistentFit.rejected / rejection)."""
    from payload_estimation.identification import IdentificationOptions, identify_consistent, preprocess
    from payload_estimation.signals import split_by_time

    desc = load_robot(URDF)
    first, _ = split_by_time(load_recording(LOG, desc, rate=100.0).samples, 0.3)
    opts = IdentificationOptions(friction="auto", rate=100.0)
    fit = identify_consistent(desc, preprocess(first, opts), opts, starts=2)
    assert fit.rejected, (fit.cv_rms, fit.least_squares_cv_rms)
    assert fit.cv_rms > 5 * fit.least_squares_cv_rms
    assert "written instead: the least-squares coefficients" in fit.rejection()
