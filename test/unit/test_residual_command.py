"""`payload-estimation residual` on what a new user gives it: a recording sampled slower than the momentum
observer's gap limit (refused, not a silent residual of 0), one with a few stream gaps (a warning; a calibration
refused or honest about them), and mistyped file options (one line naming the option, the path and why, before
any computation)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import yaml
from test_collision import Run, _save_run, simulate

from payload_estimation.cli import residual
from payload_estimation.cli.command_line import CommandError, input_file, main, os_reason, output_file
from payload_estimation.model.dynamics import RigidBodyDynamics
from payload_estimation.model.parameters import BodyInertia
from payload_estimation.model.robot_file import load_robot

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
# a payload the nominal model does not know: a residual of 0.3-3 N m (not zero), below the 6 N m threshold
UNMODELLED = BodyInertia(0.4, np.array([0.0, 0.0, 0.1]), np.zeros((3, 3)))


@pytest.fixture(scope="module")
def run_1khz() -> Run:
    """2 s of the simulated LWR 4+ at 1 kHz carrying :data:`UNMODELLED`."""
    return simulate(RigidBodyDynamics(load_robot("lwr4")).with_payload(UNMODELLED), 2.0)


def _every(run: Run, k: int) -> Run:
    """Every ``k``-th sample (1 kHz / k)."""
    return Run(run.t[::k], run.q[::k], run.dq[::k], run.tau[::k], run.tau_ext[::k])


def _without(run: Run, t0: float, t1: float) -> Run:
    """The samples outside t0 < t < t1 s dropped: a stream gap."""
    keep = ~((run.t > t0) & (run.t < t1))
    return Run(run.t[keep], run.q[keep], run.dq[keep], run.tau[keep], run.tau_ext[keep])


def _residual(*args: str) -> list[str]:
    return ["residual", "--robot", "lwr4", *args]


# ---------------------------------------------------------------------------------------- slow recordings
def test_a_recording_at_2_hz_is_refused_in_one_line(run_1khz, tmp_path, capsys):
    data = _save_run(_every(run_1khz, 500), tmp_path / "run_2hz.csv")
    params = tmp_path / "th.yaml"
    for extra in ([], ["--json"], ["--calibrate", "--params-out", str(params)]):
        assert main(_residual("--data", str(data), *extra)) == 1
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and err.startswith(f"payload-estimation residual: error: {data}: "), err
        assert "median sample interval 0.5 s is longer than the momentum observer's gap limit of 0.1 s" in err
        assert "held its residual over 4 of the 4 steps (100%)" in err
        assert "needs the joint-state stream at its own rate" in err and "(over 10 Hz), 100 Hz or more" in err
        assert ("static captures (like examples/*_samples.csv) are for `payload-estimation estimate`, not "
                "`residual`") in err
    assert not params.exists()


def test_the_shipped_static_captures_are_refused(capsys):
    data = EXAMPLES / "lwr4_loaded_samples.csv"
    assert main(_residual("--data", str(data))) == 1
    err = capsys.readouterr().err
    assert "median sample interval 1.5 s is longer than the momentum observer's gap limit of 0.1 s" in err, err
    assert "are for `payload-estimation estimate`" in err


@pytest.mark.parametrize("k", [1, 10], ids=["1kHz", "100Hz"])
def test_a_recording_at_the_stream_rate_still_works(run_1khz, tmp_path, capsys, k):
    data = _save_run(_every(run_1khz, k), tmp_path / "run.csv")
    params = tmp_path / "th.yaml"
    assert main(_residual("--data", str(data), "--json", "--calibrate", "--params-out", str(params))) == 0
    cap = capsys.readouterr()
    assert cap.err == ""
    out = json.loads(cap.out)
    assert out["observer_gaps"] == 0 and out["events"] == []
    assert 1.0 < out["max_abs_residual_outside_events_overall"] < 6.0  # the unmodelled payload, seen
    cal = out["calibration"]
    assert cal["gap_time"] == 0.0 and cal["duration"] == pytest.approx(2.0, abs=0.011)
    written = yaml.safe_load(params.read_text())["/**/collision_monitor"]["ros__parameters"]["thresholds"]
    assert written == cal["thresholds"] and max(written) > 2.5


def test_a_few_stream_gaps_warn_and_a_calibration_says_or_refuses_them(run_1khz, tmp_path, capsys):
    short = _save_run(_without(run_1khz, 1.0, 1.06), tmp_path / "short_gap.csv")  # 0.06 s: 3 % of the time
    assert main(_residual("--data", str(short), "--calibrate")) == 0
    cap = capsys.readouterr()
    assert cap.err.startswith("payload-estimation residual: warning: the momentum observer held its residual over "
                              "1 of the 1941 steps (0.060 s of 2.000 s)"), cap.err
    assert "thresholds calibrated on 1.9 s (1942 samples; 0.06 s of stream gaps not observed)" in cap.out

    long = _save_run(_without(run_1khz, 1.0, 1.2), tmp_path / "long_gap.csv")  # 0.2 s: 10 % of the time
    params = tmp_path / "th.yaml"
    assert main(_residual("--data", str(long), "--calibrate", "--params-out", str(params))) == 1
    err = capsys.readouterr().err.splitlines()
    assert err[0].startswith("payload-estimation residual: warning:") and len(err) == 2
    assert err[1].startswith("payload-estimation residual: error: the momentum observer held its residual over "
                             "0.200 s of the 2.000 s recorded (10%, 1 of 1801 steps"), err[1]
    assert "with at most 5% of its time in gaps" in err[1]
    assert not params.exists()


# ---------------------------------------------------------------------------------------- file options
@pytest.fixture
def no_computation(monkeypatch):
    """Fail the test if the command gets as far as reading the recording or running the observer."""
    def called(*args, **kwargs):
        raise AssertionError("computed before refusing a file option")

    monkeypatch.setattr(residual, "load_recording", called)
    monkeypatch.setattr(residual, "run_residual", called)


@pytest.mark.parametrize(("options", "message"), [
    (["--payload-file", "nope.json"], "--payload-file nope.json: no such file"),
    (["--payload-file", "config"], "--payload-file config: is a directory, not a file"),
    (["--calibrate", "--params-out", "/nonexistent/dir/t.yaml"],
     "--params-out /nonexistent/dir/t.yaml: directory /nonexistent/dir does not exist"),
    (["--calibrate", "--params-out", "config"], "--params-out config: is a directory (give a file name inside it)"),
    (["--out", "/nonexistent/x.csv"], "--out /nonexistent/x.csv: directory /nonexistent does not exist"),
    (["--out", "README.md/x.csv"], "--out README.md/x.csv: README.md is a file, not a directory"),
], ids=["payload-missing", "payload-dir", "params-out-no-dir", "params-out-dir", "out-no-dir", "out-under-file"])
def test_a_bad_file_option_is_one_line_before_any_computation(no_computation, monkeypatch, capsys, options, message):
    monkeypatch.chdir(Path(__file__).resolve().parents[2])  # config/ and README.md of the repository
    assert main(_residual("--data", "run.csv", *options)) == 1
    cap = capsys.readouterr()
    assert cap.err == f"payload-estimation residual: error: {message}\n" and cap.out == ""


def test_the_path_helpers(tmp_path):
    (tmp_path / "a.json").write_text("{}")
    assert input_file(tmp_path / "a.json", "--x") == tmp_path / "a.json"
    assert output_file(tmp_path / "new.csv", "--out") == tmp_path / "new.csv"
    assert output_file(tmp_path / "a.json", "--out") == tmp_path / "a.json"  # replaced
    with pytest.raises(CommandError, match=r"^--x .*b.json: no such file$"):
        input_file(tmp_path / "b.json", "--x")
    with pytest.raises(CommandError, match=r"^--out .*: is a directory"):
        output_file(tmp_path, "--out")
    with pytest.raises(CommandError, match=r"directory .*missing does not exist$"):
        output_file(tmp_path / "missing" / "x.csv", "--out")
    with pytest.raises(OSError) as exc:
        (tmp_path / "missing" / "x.csv").write_text("")
    assert os_reason(exc.value) == "no such file"
    with pytest.raises(OSError) as exc:
        tmp_path.read_text()
    assert os_reason(exc.value) == "is a directory"


def test_a_noise_free_recording_is_replayed_whole_and_one_too_short_is_refused(tmp_path, capsys):
    """Issue 47: a CSV without sensor noise (the arm at rest) was read as one row and `residual` reported
    '0 collision event(s)'. Its rows are samples (the replay has them all); a recording too short for the observer
    (shorter than 5 / K: 33 ms at the default gain) is refused in one line instead of a residual of nothing."""
    from payload_estimation.files.csv_samples import write_samples_csv
    from payload_estimation.signals.samples import Samples

    dyn = RigidBodyDynamics(load_robot("lwr4"))
    q = np.radians([10, 40, -5, -70, 15, 50, 20])
    n = 1000
    rest = Samples(np.tile(q, (n, 1)), np.tile(dyn.gravity(q), (n, 1)), dq=np.zeros((n, 7)), t=np.arange(n) * 1e-3)
    data = write_samples_csv(rest, tmp_path / "rest.csv")
    assert main(_residual("--data", str(data), "--json")) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["samples"] == n and out["events"] == [] and out["observer_gaps"] == 0
    moving = rest.q[:21] + np.linspace(0.0, 0.002, 21)[:, None]  # 20 ms of a slow move: 21 distinct samples
    short = write_samples_csv(Samples(moving, np.array([dyn.gravity(x) for x in moving]), dq=np.full((21, 7), 0.1),
                                      t=rest.t[:21]),
                              tmp_path / "s.csv")
    assert main(_residual("--data", str(short))) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "21 sample(s) over 0.020 s is too short for the momentum observer" in err, err
    assert "needs at least 0.0333 s (5 / its smallest gain of 150/s)" in err


@pytest.mark.parametrize("threshold, said", [("1.0", True), ("20.0", False)])
def test_a_residual_near_the_thresholds_on_the_nominal_model_says_to_identify(run_1khz, tmp_path, capsys,
                                                                               threshold, said):
    """The unmodelled 0.4 kg gives a residual of 1-6 N m: against 1 N m thresholds (events) the command says the
    nominal model may be what it sees; against 20 N m nothing is said."""
    data = _save_run(_every(run_1khz, 10), tmp_path / "run.csv")
    assert main(_residual("--data", str(data), "--threshold", threshold)) == 0
    out = capsys.readouterr().out
    assert ("nominal dynamics" in out and "payload-estimation identify" in out) is said, out
