"""Real recordings as loggers write them: jittery stamps, gaps, repeated rows, lone .db3/.mcap files,
binary files read by mistake, recorded velocities -- each with a known answer. The end-to-end case is
a MuJoCo arm whose torque sensor sees joint friction and a bias (known values), logged the way the
Panda's logger did (issue 16), identified through the command line."""

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import shutil  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
import pytest  # noqa: E402
from rosbags.rosbag2 import StoragePlugin, Writer  # noqa: E402
from rosbags.typesys import Stores, get_typestore  # noqa: E402

from payload_estimation.cli import main as cli_main
from payload_estimation.files.csv_samples import Rows, clean_rows, load_csv, read_csv_rows, write_samples_csv
from payload_estimation.files.recording import load_recording
from payload_estimation.identification.robot_identification import (  # noqa: E402
    IdentificationError,
    IdentificationOptions,
)
from payload_estimation.identification.torque_models import load_torque_model, read_friction  # noqa: E402
from payload_estimation.model.robot_file import load_robot  # noqa: E402
from payload_estimation.signals.preprocessing import preprocess_filtered, velocity_check
from payload_estimation.signals.resample import derive_velocity, resample, split_by_time, stamp_report
from payload_estimation.signals.samples import SampleDataError, Samples

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.fixture(scope="module")
def lwr():
    return load_robot("lwr4")


# ------------------------------------------------------------------------------- repeats and stamps

def test_clean_rows_drops_and_counts_logger_repeats():
    """A logger re-reading the robot state: whole rows repeated with a new stamp, a stamp repeated with
    new values, a stale torque read while the positions moved -- dropped, counted, first line named."""
    t = np.arange(10) * 1e-3
    q = np.cumsum(np.ones((10, 2)), axis=0) * 1e-3
    tau = np.random.default_rng(0).normal(size=(10, 2))
    q[3], tau[3] = q[2], tau[2]          # line 5: full repeat, new stamp
    t[6] = t[5]                          # line 8: same stamp, other values
    tau[8] = tau[7]                      # line 10: stale torques, positions moved
    rows = Rows("log.csv", q, tau, t=t, where=np.arange(2, 12))
    s, rep = clean_rows(rows)
    assert (rep.rows, rep.repeated_rows, rep.repeated_stamps, rep.stale_torques) == (10, 1, 1, 1)
    assert rep.first == {"repeated_rows": "line 5", "repeated_stamps": "line 8", "stale_torques": "line 10"}
    assert s.n_samples == 7 and np.all(np.diff(s.t) > 0)
    assert "10 rows, 3 dropped: 1 repeated rows (first at line 5)" in rep.describe()
    # rows without stamps are separate captures: kept as they are, even when equal
    s2, rep2 = clean_rows(Rows("caps.csv", q, tau, where=np.arange(2, 12)))
    assert s2.n_samples == 10 and rep2.dropped == 0
    # stamps going backwards cannot be ordered: refused, saying how many and where
    t_back = np.arange(10) * 1e-3
    t_back[[4, 7]] -= 5e-3
    with pytest.raises(SampleDataError, match=r"log.csv: 2 of 10 time stamps go backwards \(first at line 6"):
        clean_rows(Rows("log.csv", q, tau, t=t_back, where=np.arange(2, 12)))



def test_a_noise_free_recording_keeps_its_rows_at_rest_and_a_republishing_driver_loses_its_repeats():
    """Issue 47: a CSV without sensor noise (a simulator at rest) was reduced to one row: every row equals the
    previous one, but under advancing stamps they are samples. Repeats are dropped when they are re-reads: the
    same stamp, a stream that re-publishes each state a fixed number of times (lbr_fri_ros2_stack: each 100 Hz
    FRI state 4 times at 400 Hz), a state reached moving, or one lasting less than 50 ms."""
    n = 1000
    q0, tau0 = np.array([0.1, 0.7, -0.1]), np.array([0.5, -20.0, 3.0])
    flat = Rows("flat.csv", np.tile(q0, (n, 1)), np.tile(tau0, (n, 1)), t=np.arange(n) * 1e-3,
                where=np.arange(2, n + 2))
    s, rep = clean_rows(flat)
    assert s.n_samples == n and rep.dropped == 0 and rep.identical_kept == n - 1
    assert "999 rows identical to the previous one kept as samples" in rep.describe()
    same_t = Rows("relog.csv", flat.q, flat.tau, t=np.repeat(np.arange(n // 2) * 1e-3, 2), where=flat.where)
    assert clean_rows(same_t)[0].n_samples == n // 2  # the same stamp twice: a re-read
    # a noise-free arm that moves, rests 0.5 s, moves on (1 kHz): the rest rows stay
    x = np.linspace(0.0, 1.0, 300)
    move = 0.2 * (10 * x**3 - 15 * x**4 + 6 * x**5)[:, None] * np.ones(3)  # rest to rest
    q = np.vstack([move, np.tile(move[-1], (500, 1)), move[-1] + move])
    tau = tau0 + q
    s, rep = clean_rows(Rows("stop.csv", q, tau, t=np.arange(q.shape[0]) * 1e-3, where=np.arange(2, q.shape[0] + 2)))
    assert s.n_samples == q.shape[0] and rep.identical_kept == 501  # 500 rest rows + the next move's first point
    # each state 4 times at 400 Hz, moving: 3 of 4 dropped; the state at rest at the end too (the stream re-publishes)
    k = 200
    states = np.vstack([np.linspace(0.0, 0.5, k)[:, None] * np.ones(3), np.tile([0.5, 0.5, 0.5], (50, 1))])
    noisy = np.random.default_rng(3).normal(size=(k + 50, 3))
    rows = Rows("fri.csv", np.repeat(states, 4, axis=0), np.repeat(noisy, 4, axis=0), t=np.arange(4 * (k + 50)) / 400,
                where=np.arange(2, 4 * (k + 50) + 2))
    s, rep = clean_rows(rows)
    assert s.n_samples == k + 50 and rep.repeated_rows == 3 * (k + 50) and rep.identical_kept == 0

def test_stamp_report_and_resample_known_answers():
    """Linear signals on jittered stamps with gaps: the report counts them, the resampled grid is
    uniform and exact, a gap above max_gap splits the recording."""
    rng = np.random.default_rng(1)
    t = np.arange(2000) * 1e-3 + rng.uniform(-2e-4, 2e-4, 2000)
    t = np.delete(t, np.r_[500:508, 1500:1600])      # an 9 ms gap and a 101 ms gap
    q = np.column_stack([0.5 + 2.0 * t, -t])
    s = Samples(q, 3.0 * q, dq=np.tile([2.0, -1.0], (t.size, 1)), t=t)
    rep = stamp_report(t)
    assert rep.rate == pytest.approx(1000, rel=0.02) and len(rep.gaps) == 2 and rep.irregular_steps > 100
    assert max(g.length for g in rep.gaps) == pytest.approx(0.101, abs=1e-3)
    res = resample(s, 1000.0, max_gap=0.05)
    assert res.resampled and len(res.segments) == 2 and len(res.bridged) == 1 and len(res.split) == 1
    for seg in res.segments:
        np.testing.assert_allclose(np.diff(seg.t), 1e-3, rtol=1e-9)
        np.testing.assert_allclose(seg.q, np.column_stack([0.5 + 2.0 * seg.t, -seg.t]), atol=1e-12)
        np.testing.assert_allclose(seg.tau, 3.0 * seg.q, atol=1e-12)
    assert "1 gaps bridged" in res.describe() and "split it into 2 segments" in res.describe()
    # regular stamps are used as they are
    reg = Samples(q[:400], q[:400], t=np.arange(400) * 2e-3)
    assert resample(reg).segments[0] is reg
    early, late = split_by_time(s, 0.3)
    assert late.t[0] >= t[0] + 0.7 * (t[-1] - t[0]) > early.t[-1]


def test_velocity_check_finds_known_lag():
    t = np.arange(4000) * 1e-3
    w = 2 * np.pi * 0.5
    dq_pos = np.column_stack([np.cos(w * t), 0.5 * np.cos(2 * w * t)])
    ddq_pos = np.column_stack([-w * np.sin(w * t), -w * np.sin(2 * w * t)])
    lag = 0.004
    dq_rec = np.column_stack([np.cos(w * (t - lag)), 0.5 * np.cos(2 * w * (t - lag))])
    chk = velocity_check(dq_rec, dq_pos, ddq_pos)
    assert chk.lag == pytest.approx(lag, rel=0.02)
    assert "lags by 4.0 ms" in chk.describe()


def test_derived_velocity_and_static_captures_without_dq(tmp_path, capsys):
    t = np.arange(100) * 0.01
    q = np.column_stack([np.sin(t), t ** 2])
    s, note = derive_velocity(Samples(q, q, t=t))
    np.testing.assert_allclose(s.dq[1:-1], np.column_stack([np.cos(t), 2 * t])[1:-1], atol=1e-3)
    assert "derived from the positions" in note
    with pytest.raises(SampleDataError, match="caps.csv: velocities cannot be derived"):
        derive_velocity(Samples(q, q), "caps.csv")
    # issue 14: a static capture file without dq columns is not 'moving' (rows 1.5 s apart); the
    # estimate equals the one from the same file with its recorded (zero) velocities
    src = load_csv(EXAMPLES / "lwr4_loaded_samples.csv")
    unl = load_csv(EXAMPLES / "lwr4_unloaded_samples.csv")
    outs = []
    for name, dq in (("with", True), ("without", False)):
        lo = write_samples_csv(Samples(src.q, src.tau, src.dq if dq else None, None, src.t), tmp_path / f"l_{name}.csv")
        un = write_samples_csv(Samples(unl.q, unl.tau, unl.dq if dq else None, None, unl.t), tmp_path / f"u_{name}.csv")
        assert cli_main(["estimate", "--robot", "lwr4", "--samples", str(lo), "--unloaded", str(un), "--json"]) == 0
        outs.append(capsys.readouterr().out)
    import json

    a, b = (json.loads(o) for o in outs)
    assert a["mass"] == pytest.approx(b["mass"], rel=1e-12) and a["mass"] == pytest.approx(3.0, rel=0.02)


# ------------------------------------------------------------------------------ files as people share them

def _write_bag(path, names, t, q, dq, tau, storage):
    ts = get_typestore(Stores.ROS2_HUMBLE)
    js = ts.types["sensor_msgs/msg/JointState"]
    header, stamp = ts.types["std_msgs/msg/Header"], ts.types["builtin_interfaces/msg/Time"]
    with Writer(path, version=9, storage_plugin=storage) as w:
        conn = w.add_connection("/joint_states", js.__msgtype__, typestore=ts)
        for k in range(len(t)):
            sec = int(t[k])
            msg = js(header=header(stamp=stamp(sec=sec, nanosec=int(round((t[k] - sec) * 1e9))), frame_id=""),
                     name=list(names), position=q[k], velocity=dq[k], effort=tau[k])
            w.write(conn, int(t[k] * 1e9) + 1, ts.serialize_cdr(msg, js.__msgtype__))
    return path


@pytest.mark.parametrize("storage,suffix", [(StoragePlugin.SQLITE3, ".db3"), (StoragePlugin.MCAP, ".mcap")])
def test_lone_storage_files_and_export_csv(tmp_path, lwr, storage, suffix, capsys):
    """A bag shared as one .db3/.mcap file (no metadata.yaml), as a directory that lost its
    metadata.yaml, or under a wrong name: all read, with a repeated message dropped and counted; the
    export-csv command writes the package's CSV with the same values."""
    rng = np.random.default_rng(3)
    n_msg = 40
    t = 1.7e9 + np.arange(n_msg) / 30.0 + rng.uniform(-3e-3, 3e-3, n_msg)   # ROS epoch stamps, ~30 Hz
    q, dq, tau = (rng.normal(size=(n_msg, 7)) for _ in range(3))
    q[11], dq[11], tau[11] = q[10], dq[10], tau[10]  # the logger published the same state twice
    names = list(lwr.joint_names)[::-1] + ["gripper"]
    extra = np.zeros((n_msg, 1))
    bag = _write_bag(tmp_path / "bag", names, t, np.hstack([q[:, ::-1], extra]), np.hstack([dq[:, ::-1], extra]),
                     np.hstack([tau[:, ::-1], extra]), storage)
    lone = next(bag.glob(f"*{suffix}"))
    (bag / "metadata.yaml").unlink()
    renamed = tmp_path / "recording.bin"
    shutil.copy(lone, renamed)
    keep = np.r_[0:11, 12:n_msg]
    for path in (lone, bag, renamed):
        rec = load_recording(path, lwr)
        np.testing.assert_allclose(rec.samples.q, q[keep])
        np.testing.assert_allclose(rec.samples.dq, dq[keep])
        np.testing.assert_allclose(rec.samples.t, t[keep], rtol=0, atol=1e-6)
        assert rec.report.format == "rosbag2" and rec.report.cleaning.repeated_rows == 1
        assert rec.report.cleaning.first["repeated_rows"] == "message 11"
    # the binary file read as a CSV names the file and what it is
    with pytest.raises(SampleDataError, match=f"{renamed}: this is a rosbag2 .* storage file"):
        read_csv_rows(renamed)
    out = tmp_path / "run.csv"
    assert cli_main(["export-csv", "--data", str(lone), "--robot", "lwr4", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert f"{n_msg} rows, 1 dropped: 1 repeated rows (first at message 11)" in text
    back = load_csv(out, lwr)
    np.testing.assert_allclose(back.tau, tau[keep], rtol=1e-9)
    np.testing.assert_allclose(back.t, t[keep], rtol=0, atol=1e-6)   # stamps survive the CSV (float64 at 1.7e9 s)


def test_binary_garbage_names_the_file(tmp_path):
    junk = tmp_path / "data.csv"
    junk.write_bytes(b"t,q1,tau1\n0,1,2\n\xde\xad\xbe\xef\n")
    with pytest.raises(SampleDataError, match=r"data.csv: not a text CSV file \(line 3, byte 18: 0xbe is not UTF-8"):
        load_recording(junk)
    folder = tmp_path / "empty_bag"
    folder.mkdir()
    with pytest.raises(SampleDataError, match="empty_bag: neither a rosbag2 directory .* nor a directory of storage"):
        load_recording(folder)


# ------------------------------------------------------------------ identification from a logged run

@pytest.fixture(scope="module")
def logged_run(tmp_path_factory):
    """A simulated LWR at 1 kHz whose torque sensor sees viscous joint friction and a bias (known), logged
    like the Panda's logger: stamps jittered by +-0.2 ms, three 8 ms gaps, 5 % of the rows logged
    twice, recorded velocities. Returns (desc, truth dict, clean samples, path of the log CSV)."""
    from payload_estimation.identification.excitation import ExcitationConfig, ExcitationDesigner, trajectory_points
    from payload_estimation.sim import SensorConfig, SimConfig, SimulatedArm
    from payload_estimation.sim.recorders import record_trajectory

    desc = load_robot("lwr4")
    # MuJoCo's Coulomb friction is a soft constraint (viscous-like near zero speed), not sign(dq):
    # only its viscous friction is exactly the model's, so the known Coulomb term is zero
    truth = {"viscous": np.array([0.8, 0.6, 0.5, 0.5, 0.3, 0.2, 0.1]), "coulomb": np.zeros(7),
             "offset": np.array([0.3, -0.4, 0.2, 0.0, 0.1, -0.1, 0.05])}
    sensor = SensorConfig(noise_std=0.05, offset=truth["offset"], viscous=truth["viscous"],
                          coulomb=truth["coulomb"], sensor_sees_friction=True)
    arm = SimulatedArm(desc, SimConfig(seed=1, model_error=0.03, sensor=sensor))
    des = ExcitationDesigner(desc, ExcitationConfig(f0=0.2, velocity_factor=0.8, n_eval=40, progress=False))
    traj = des.trajectory(np.random.default_rng(2).normal(size=des.n_free))
    clean = record_trajectory(arm, trajectory_points(traj, 100.0, 2), 1000.0, q_start=traj.q0)
    rng = np.random.default_rng(5)
    keep = np.ones(clean.n_samples, bool)
    for k0 in (2000, 5000, 8000):
        keep[k0:k0 + 7] = False                           # gaps of 8 ms
    idx = np.flatnonzero(keep)
    dup = np.sort(rng.choice(idx[1:], size=int(0.05 * idx.size), replace=False))
    rows = np.sort(np.concatenate([idx, dup]))           # a duplicated row follows its original
    t = clean.t[rows] + rng.uniform(-2e-4, 2e-4, rows.size)
    again = np.flatnonzero(np.diff(rows) == 0) + 1         # the repeat gets a stamp of its own
    t[again] = 0.5 * (t[again - 1] + t[np.minimum(again + 1, rows.size - 1)])
    log = Samples(clean.q[rows], clean.tau[rows], clean.dq[rows], None, t)
    path = write_samples_csv(log, tmp_path_factory.mktemp("log") / "logged.csv", precision=12)
    return desc, truth, clean, path, int(dup.size), traj.period


@pytest.mark.slow
def test_identify_logged_run_with_friction_auto(logged_run, tmp_path, capsys):
    """Through the command line, as a user would: the log loads as it is (repeats and gaps
    counted), friction auto picks viscous + offset and recovers the known values, the
    physical set keeps them in its YAML and URDF and predicts the held-out 30 % as well as the
    coefficients, --essential is never worse."""
    desc, truth, _, path, n_dup, _ = logged_run
    out = tmp_path / "p.yaml"
    assert cli_main(["identify", "--robot", "lwr4", "--data", str(path), "--hold-out", "0.3", "--physical",
                     "--starts", "1", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert f"{n_dup} repeated rows" in text
    # the true friction (viscous + offset): Coulomb would lower the held-out error, but not by one standard error
    assert "3 gaps" in text and "friction: viscous+offset chosen by 5-block cross-validation" in text
    assert "velocities from the recorded dq" in text
    from payload_estimation.identification.robot_identification import IdentifiedModel

    model = IdentifiedModel.load(out)
    fv, fc, fo = model.friction_terms()
    # the coefficient file is the physically consistent set's: its friction as close as the robot files' below
    np.testing.assert_allclose(fv, truth["viscous"], atol=0.05)
    assert not model.coulomb and np.all(fc == 0)
    # an offset the excitation confounds with gravity (A2: σ 0.25 N m, A4: 0.11) within its own 3σ
    std = dict(zip(model.names, model.std))
    fo_std = np.array([std.get(f"Fo{j + 1}", 0.0) for j in range(desc.n)])
    assert np.all(np.abs(fo - truth["offset"]) <= np.maximum(0.05, 3 * fo_std)), (fo, fo_std)
    hold = {line.split("|")[1].strip().split(" (")[0]: float(line.split("|")[2])
            for line in text.splitlines() if line.startswith("| ") and "(" in line.split("|")[1]}
    assert hold["coefficients"] < 0.06 and hold["physical link set"] < 0.06  # noise 0.05 N m raw
    assert hold["nominal description"] > 3 * hold["coefficients"]
    # the physical robot files carry the friction (YAML mapping, URDF <dynamics>/<torque_offset>)
    robot_yaml, robot_urdf = tmp_path / "p_robot.yaml", tmp_path / "p_robot.urdf"
    for f in (robot_yaml, robot_urdf):
        fr = read_friction(f, desc)
        np.testing.assert_allclose(fr.viscous, truth["viscous"], atol=0.05)
        assert np.all(np.abs(fr.offset - truth["offset"]) <= np.maximum(0.05, 3 * fo_std)), (fr.offset, fo_std)
        assert isinstance(load_torque_model(str(f), desc).friction.viscous, np.ndarray)
    # validate the physical file on the hold-out: what it prints is what it writes
    csv_out, png = tmp_path / "v.csv", tmp_path / "v.png"
    assert cli_main(["validate", "--robot", "lwr4", "--params", str(robot_yaml), "--data", str(path),
                     "--hold-out", "0.3", "--out", str(csv_out), "--plot", str(png)]) == 0
    vtext = capsys.readouterr().out
    table = np.loadtxt(csv_out, delimiter=",", skiprows=1)
    rms = np.sqrt(np.mean((table[:, 1:8] - table[:, 8:15]) ** 2))
    printed = float(next(line for line in vtext.splitlines() if line.startswith("| all ")).split("|")[2])
    assert rms == pytest.approx(printed, abs=1e-4) and printed == pytest.approx(hold["physical link set"], abs=1e-3)
    assert f"RMS over {table.shape[0]} samples" in vtext and "Butterworth at 6 Hz" in vtext and png.exists()
    # --essential: the coefficient file is never worse on the hold-out; the physical set is the same
    assert cli_main(["identify", "--robot", "lwr4", "--data", str(path), "--hold-out", "0.3", "--essential",
                     "--friction", "viscous+offset", "--out", str(tmp_path / "e.yaml")]) == 0
    etext = capsys.readouterr().out
    ess = float(next(line for line in etext.splitlines() if line.startswith("| coefficients")).split("|")[2])
    assert ess <= hold["coefficients"] + 2e-3


def test_logged_run_matches_the_clean_recording(logged_run):
    """Resampling the jittered, gappy log gives the same filtered signals as the regular recording."""
    desc, _, clean, path, _, period = logged_run
    a = preprocess_filtered(clean, velocity="recorded")
    b = preprocess_filtered(load_recording(path, desc).samples, velocity="recorded")
    inside = (a.t >= b.t[0]) & (a.t <= b.t[-1])
    assert inside.mean() > 0.95

    def on_a(x):
        return np.column_stack([np.interp(a.t[inside], b.t, x[:, j]) for j in range(x.shape[1])])

    assert np.sqrt(np.mean((a.tau[inside] - on_a(b.tau)) ** 2)) < 0.01     # N m
    assert np.sqrt(np.mean((a.ddq[inside] - on_a(b.ddq)) ** 2)) < 0.005    # rad/s^2 (RMS 1.4)
    assert b.velocity_check is not None and abs(b.velocity_check.lag) < 1e-3
    # the periodic path resamples an irregular log itself: the same coefficients as the clean run
    from payload_estimation.identification.robot_identification import identify_robot

    opts = IdentificationOptions(friction="viscous+offset")
    # (the log's resampled grid ends a fraction of a sample early: one whole period, as the clean's first)
    m_clean = identify_robot(desc, clean.subset(slice(0, 9999)), opts, period=period, harmonics=5, start_index=0)
    m_log = identify_robot(desc, load_recording(path, desc).samples, opts, period=period, harmonics=5,
                           start_index=0)
    assert m_log.info["periods"] == m_clean.info["periods"] == 1
    big = m_clean.rsd < 5
    # stamp jitter and interpolation move the well-identified coefficients by less than their own std
    assert np.median(np.abs(m_log.values - m_clean.values)[big] / m_clean.std[big]) < 1.5


def test_identify_answers_in_user_words(logged_run, tmp_path, capsys):
    desc, _, clean, _, _, _ = logged_run
    cases = [
        (clean.subset(slice(0, 500)), "too short to filter: its longest continuous stretch lasts 0.499 s"),
        (Samples(np.tile(clean.q[0], (3000, 1)), clean.tau[:3000], None, None, clean.t[:3000]), "hardly moves"),
        (clean.subset(slice(0, None, 100)), "rate, 10 Hz, is too low for a 6 Hz torque filter"),
    ]
    for k, (s, msg) in enumerate(cases):
        p = write_samples_csv(s, tmp_path / f"bad{k}.csv")
        assert cli_main(["identify", "--robot", "lwr4", "--data", str(p), "--out", str(tmp_path / "x.yaml")]) == 1
        err = capsys.readouterr().err
        assert f"bad{k}.csv: " in err and msg in err and "fs/2" not in err and "lowpass" not in err
    with pytest.raises(IdentificationError, match="unknown friction term"):
        from payload_estimation.identification.robot_identification import friction_terms

        friction_terms("viscous+stiction")
