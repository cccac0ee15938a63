"""Sample data (CSV, rosbag2) and signal processing."""

from __future__ import annotations

import numpy as np
import pytest
from rosbags.rosbag2 import StoragePlugin, Writer
from rosbags.typesys import Stores, get_typestore

from payload_estimation.files.csv_samples import load_csv, write_samples_csv
from payload_estimation.files.recording import load_recording
from payload_estimation.files.rosbag import load_rosbag
from payload_estimation.model.robot_file import load_robot
from payload_estimation.signals.filters import (
    SignalError,
    differentiate,
    fft_differentiate,
    period_average,
    velocity_acceleration,
    zero_phase_lowpass,
)
from payload_estimation.signals.samples import (
    NotStaticError,
    SampleDataError,
    Samples,
    discard_near_zero_velocity,
    require_static,
    select_static,
)


@pytest.fixture(scope="module")
def lwr():
    return load_robot("lwr4")


def _samples(n_s=5, n=7, seed=0, t=True, dq=True):
    rng = np.random.default_rng(seed)
    return Samples(
        q=rng.uniform(-1, 1, (n_s, n)),
        tau=rng.normal(0, 10, (n_s, n)),
        dq=rng.normal(0, 1e-3, (n_s, n)) if dq else None,
        t=np.arange(n_s) * 0.5 if t else None,
    )


def _write_csv(path, header, rows):
    path.write_text("\n".join([",".join(header)] + [",".join(str(v) for v in r) for r in rows]) + "\n")
    return path


# ---------------------------------------------------------------------------------------------- CSV

def test_csv_round_trip(tmp_path, lwr):
    s = _samples()
    back = load_csv(write_samples_csv(s, tmp_path / "s.csv"), lwr)
    for name in ("q", "tau", "dq", "t"):
        np.testing.assert_allclose(getattr(back, name), getattr(s, name), rtol=1e-9)
    assert back.ddq is None and back.joint_names == lwr.joint_names


def test_csv_extra_columns_ignored_and_any_order(tmp_path):
    header = ["note", "tau2", "q2", "q1", "tau1", "t"]
    p = _write_csv(tmp_path / "a.csv", header, [["x", 2, 0.2, 0.1, 1, 0.0], ["y", 4, 0.4, 0.3, 3, 0.1]])
    s = load_csv(p)
    np.testing.assert_allclose(s.q, [[0.1, 0.2], [0.3, 0.4]])
    np.testing.assert_allclose(s.tau, [[1, 2], [3, 4]])


def test_csv_nan_rows_are_dropped_and_a_file_of_only_such_rows_names_line_and_column(tmp_path):
    """A NaN/inf row is corrupt: dropped and named (issue 45); a file with nothing else is refused."""
    p = _write_csv(tmp_path / "n.csv", ["q1", "q2", "tau1", "tau2"], [[0, 0, 1, 1], [0, 0, "nan", 1]])
    assert load_csv(p).n_samples == 1
    p = _write_csv(tmp_path / "i.csv", ["q1", "q2", "tau1", "tau2"], [[0, "inf", 1, 1]])
    with pytest.raises(SampleDataError, match=r"every data row holds a NaN/inf.*line 2, column 'q2'"):
        load_csv(p)


def test_csv_non_numeric(tmp_path):
    p = _write_csv(tmp_path / "x.csv", ["q1", "tau1"], [[0, 1], ["abc", 1]])
    with pytest.raises(SampleDataError, match=r"line 3, column 'q1': 'abc' is not a number"):
        load_csv(p)


def test_csv_missing_and_mismatched_columns(tmp_path, lwr):
    p = _write_csv(tmp_path / "m.csv", ["q1", "q2", "tau1"], [[0, 0, 1]])
    with pytest.raises(SampleDataError, match="1 'tau' columns for 2 position columns.*missing tau2"):
        load_csv(p)
    p = _write_csv(tmp_path / "r.csv", ["q1", "q2", "tau1", "tau2"], [[0, 0, 1]])
    with pytest.raises(SampleDataError, match="line 2 has 3 fields, header has 4"):
        load_csv(p)
    p = _write_csv(tmp_path / "j.csv", ["q1", "q2", "tau1", "tau2"], [[0, 0, 1, 1]])
    with pytest.raises(SampleDataError, match="file has 2 joints.*robot 'lwr4' has 7"):
        load_csv(p, lwr)
    p = _write_csv(tmp_path / "h.csv", ["a", "b"], [[0, 0]])
    with pytest.raises(SampleDataError, match="no position columns"):
        load_csv(p)


def test_csv_non_monotonic_time(tmp_path):
    p = _write_csv(tmp_path / "t.csv", ["t", "q1", "tau1"], [[0.0, 0, 1], [0.2, 0, 1], [0.1, 0, 1]])
    with pytest.raises(SampleDataError, match=r"t.csv: 1 of 3 time stamps go backwards \(first at line 4: "
                                              r"t = 0.1 s after t = 0.2 s at line 3\)"):
        load_csv(p)


def test_samples_validation():
    with pytest.raises(SampleDataError, match="'tau' has shape"):
        Samples(np.zeros((3, 2)), np.zeros((3, 3)))
    with pytest.raises(SampleDataError, match="'q' is NaN/inf at sample 1, joint 2"):
        Samples(np.array([[0, 0], [0, np.nan]]), np.zeros((2, 2)))
    with pytest.raises(SampleDataError, match="not strictly increasing: sample 2"):
        Samples(np.zeros((3, 1)), np.zeros((3, 1)), t=[0.0, 1.0, 1.0])


# ------------------------------------------------------------------------------------------ rosbag2

def _write_bag(path, names, rows, storage, topic="/joint_states", velocity=True):
    ts = get_typestore(Stores.ROS2_HUMBLE)
    js = ts.types["sensor_msgs/msg/JointState"]
    header, stamp = ts.types["std_msgs/msg/Header"], ts.types["builtin_interfaces/msg/Time"]
    with Writer(path, version=9, storage_plugin=storage) as w:
        conn = w.add_connection(topic, js.__msgtype__, typestore=ts)
        for k, (t, q, tau) in enumerate(rows):  # header stamp t; bag (receive) time k s
            sec = int(t)
            msg = js(header=header(stamp=stamp(sec=sec, nanosec=int(round((t - sec) * 1e9))), frame_id=""),
                     name=list(names), position=np.asarray(q, float),
                     velocity=np.zeros(len(names)) if velocity else np.zeros(0), effort=np.asarray(tau, float))
            w.write(conn, (k + 1) * 10**9, ts.serialize_cdr(msg, js.__msgtype__))
    return path


@pytest.mark.parametrize("storage", [StoragePlugin.MCAP, StoragePlugin.SQLITE3])
def test_rosbag_maps_joints_by_name(tmp_path, lwr, storage):
    """Joints in the bag are shuffled and include an extra gripper joint: mapped by name, extra ignored."""
    order = list(lwr.joint_names)
    shuffled = order[::-1] + ["gripper"]
    rng = np.random.default_rng(1)
    q = rng.uniform(-1, 1, (4, 7))
    tau = rng.normal(0, 5, (4, 7))
    rows = []
    for k in range(4):
        by_name = dict(zip(order, zip(q[k], tau[k])))
        rows.append((10.0 + 0.1 * k, [by_name[j][0] for j in shuffled[:-1]] + [0.5],
                     [by_name[j][1] for j in shuffled[:-1]] + [9.0]))
    bag = _write_bag(tmp_path / "bag", shuffled, rows, storage)
    s = load_rosbag(bag, "joint_states", lwr)
    np.testing.assert_allclose(s.q, q)
    np.testing.assert_allclose(s.tau, tau)
    np.testing.assert_allclose(s.t, 10.0 + 0.1 * np.arange(4), atol=1e-9)
    assert s.joint_names == lwr.joint_names and s.dq is not None


def test_rosbag_missing_joint_and_topic(tmp_path, lwr):
    names = list(lwr.joint_names)[:6]
    bag = _write_bag(tmp_path / "bag", names, [(1.0, np.zeros(6), np.zeros(6))], StoragePlugin.MCAP)
    with pytest.raises(SampleDataError, match=f"lacks joint\\(s\\) {lwr.joint_names[6]}"):
        load_rosbag(bag, "joint_states", lwr)
    with pytest.raises(SampleDataError, match="no topic 'other'.*/joint_states"):
        load_rosbag(bag, "other", lwr)


def test_rosbag_non_monotonic_stamps(tmp_path):
    rows = [(2.0, [0.0], [1.0]), (1.0, [0.0], [1.0])]
    bag = _write_bag(tmp_path / "bag", ["j"], rows, StoragePlugin.SQLITE3)
    with pytest.raises(SampleDataError, match=r"bag: 1 of 2 time stamps go backwards \(first at message 1"):
        load_rosbag(bag)


# ---------------------------------------------------------------------------------- static selection

def test_select_and_check_static():
    s = _samples(6)
    dq = s.dq.copy()
    dq[2, 4] = 0.2
    moving = Samples(s.q, s.tau, dq=dq, t=s.t)
    assert select_static(moving, 0.01).n_samples == 5
    with pytest.raises(NotStaticError, match="sample 2 is not static: joint joint5 moves at 0.2 rad/s"):
        require_static(moving, 0.01)
    assert require_static(s, 0.01) is s
    # without dq, speed comes from the positions of a stream (100 Hz: 5 rad/s here) ...
    q = np.zeros((4, 1))
    q[2:] = 0.05
    with pytest.raises(NotStaticError, match="moves at 2.5 rad/s \\(from positions and time stamps"):
        require_static(Samples(q, np.zeros((4, 1)), t=[0, 0.01, 0.02, 0.03]), 0.01)
    # ... but rows seconds apart are separate captures, not motion (issue 14: static CSV without dq)
    captures = Samples(q, np.zeros((4, 1)), t=[0, 1, 2, 3.0])
    assert require_static(captures, 0.01) is captures
    assert select_static(captures, 0.01).n_samples == 4
    with pytest.raises(NotStaticError, match="none of the 6 samples"):
        select_static(moving, 1e-9)


def test_discard_near_zero_velocity():
    dq = np.array([[0.5, 0.3], [0.001, 0.4], [0.6, -0.7]])
    s = Samples(np.zeros((3, 2)), np.zeros((3, 2)), dq=dq)
    kept = discard_near_zero_velocity(s, 0.02)
    np.testing.assert_allclose(kept.dq, dq[[0, 2]])
    assert discard_near_zero_velocity(s, 0.02, joints=[1]).n_samples == 3


# -------------------------------------------------------------------------------------------- signal

def test_lowpass_passes_low_and_removes_high_frequency():
    fs = 200.0
    t = np.arange(2000) / fs
    slow, fast = np.sin(2 * np.pi * 0.5 * t), 0.5 * np.sin(2 * np.pi * 40 * t)
    y = zero_phase_lowpass(np.column_stack([slow + fast, slow]), 5.0, fs)
    inner = slice(200, -200)
    assert np.max(np.abs(y[inner, 0] - slow[inner])) < 1e-3  # zero phase: no lag
    assert np.max(np.abs(y[inner, 1] - slow[inner])) < 1e-4
    with pytest.raises(SignalError, match="cutoff 150 Hz must be in"):
        zero_phase_lowpass(slow, 150, fs)
    with pytest.raises(SignalError, match="NaN/inf at index"):
        zero_phase_lowpass(np.array([0.0, np.nan] * 50), 5, fs)
    with pytest.raises(SignalError, match="needs more than"):
        zero_phase_lowpass(slow[:10], 5, fs)


def test_differentiate_polynomial_exact():
    t = np.linspace(0, 2, 41)
    x = 3 * t**2 - t
    np.testing.assert_allclose(differentiate(x, t[1] - t[0]), 6 * t - 1, atol=1e-9)
    np.testing.assert_allclose(differentiate(x, t), 6 * t - 1, atol=1e-9)
    with pytest.raises(SignalError, match="strictly increasing"):
        differentiate(x, t[::-1])


def test_velocity_acceleration_of_filtered_sinusoid():
    fs = 200.0
    t = np.arange(1000) / fs
    w = 2 * np.pi * 0.5
    rng = np.random.default_rng(2)
    q = np.sin(w * t) + rng.normal(0, 1e-4, t.size)
    _, dq, ddq = velocity_acceleration(q, fs, cutoff=5.0)
    inner = slice(100, -100)
    np.testing.assert_allclose(dq[inner], w * np.cos(w * t[inner]), atol=5e-3)
    np.testing.assert_allclose(ddq[inner], -(w**2) * np.sin(w * t[inner]), atol=0.1)  # 1 %


def test_period_average_reduces_noise_by_sqrt_m():
    k, m = 100, 16
    base = np.sin(np.linspace(0, 2 * np.pi, k, endpoint=False))
    rng = np.random.default_rng(3)
    x = np.tile(base, m) + rng.normal(0, 0.1, k * m)
    avg = period_average(x, k)
    assert avg.shape == (k,)
    assert np.std(avg - base) == pytest.approx(0.1 / np.sqrt(m), rel=0.2)  # paper 003 eq. (11)
    with pytest.raises(SignalError, match="not a whole number of periods"):
        period_average(x[:-1], k)
    assert period_average(x[:-1], k, n_periods=15).shape == (k,)


def test_fft_differentiate_exact_on_harmonics():
    fs, k = 100.0, 200  # one 2 s period
    t = np.arange(k) / fs
    w0 = 2 * np.pi / 2.0
    x = 0.3 * np.sin(w0 * t) + 0.1 * np.cos(3 * w0 * t)
    rng = np.random.default_rng(4)
    noisy = x + rng.normal(0, 0.01, k)
    xf, dx, ddx = fft_differentiate(noisy, fs, harmonics=[1, 3])
    assert np.std(xf - x) < 0.003  # noise left only in the two kept bins
    xf, dx, ddx = fft_differentiate(x, fs, harmonics=5)
    np.testing.assert_allclose(dx, 0.3 * w0 * np.cos(w0 * t) - 0.3 * w0 * np.sin(3 * w0 * t), atol=1e-10)
    np.testing.assert_allclose(ddx, -0.3 * w0**2 * np.sin(w0 * t) - 0.9 * w0**2 * np.cos(3 * w0 * t), atol=1e-9)
    with pytest.raises(SignalError, match="harmonic indices must be in 0..100"):
        fft_differentiate(x, fs, harmonics=[200])


@pytest.mark.parametrize("storage", [StoragePlugin.MCAP, StoragePlugin.SQLITE3])
def test_rosbag_corrupt_messages_are_named_and_dropped(tmp_path, lwr, storage):
    """A message with a NaN or an absurd value (1e300) is dropped and named, as a CSV row is (issue 45)."""
    rng = np.random.default_rng(2)
    q, tau = rng.uniform(-1, 1, (6, 7)), rng.normal(0, 5, (6, 7))
    tau[2, 3] = np.nan
    q[4, 0] = 1e300
    bag = _write_bag(tmp_path / "bag", lwr.joint_names, [(10.0 + 0.1 * k, q[k], tau[k]) for k in range(6)], storage)
    rec = load_recording(bag, lwr)
    assert rec.samples.n_samples == 4 and rec.report.cleaning.corrupt == 2
    np.testing.assert_array_equal(rec.samples.q, q[[0, 1, 3, 5]])
    assert f"first at message 2, effort of joint {lwr.joint_names[3]}: nan" in rec.report.lines()[0]
