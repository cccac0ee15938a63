"""Refusals reach the operator as one line and exit code; a bug (e.g. a numpy shape error) is not
dressed up as one (issue 28: catch the package's error class, not ValueError)."""

from __future__ import annotations

import numpy as np
import pytest

from payload_estimation.cli import command_line
from payload_estimation.errors import PayloadEstimationError
from payload_estimation.ros.bringup import BringupError, override_file
from payload_estimation.ros.robot_model_source import _reason


def run_with(monkeypatch, exc: Exception) -> int:
    """`payload-estimation export --estimate -` whose run raises ``exc`` (the command's own code, not a stand-in
    for ROS or the simulator)."""
    from payload_estimation.cli import export

    def run(args):
        raise exc

    monkeypatch.setattr(export, "run", run)
    return command_line.main(["export", "--estimate", "-"])


def test_a_refusal_is_one_line_and_exit_1(monkeypatch, capsys):
    assert run_with(monkeypatch, command_line.CommandError("--period needs --harmonics")) == 1
    assert capsys.readouterr().err == "payload-estimation export: error: --period needs --harmonics\n"
    assert issubclass(command_line.CommandError, PayloadEstimationError)


def test_an_unreadable_file_is_one_line_and_exit_1(tmp_path, capsys):
    binary = tmp_path / "est.json"
    binary.write_bytes(b"\xff\xfe\x00\x81")
    assert command_line.main(["export", "--estimate", str(binary)]) == 1
    assert capsys.readouterr().err.startswith("payload-estimation export: error: 'utf-8' codec can't decode")


def test_a_numpy_shape_bug_is_not_a_refusal(monkeypatch):
    try:
        np.zeros(3) + np.zeros(4)
    except ValueError as exc:
        bug = exc
    with pytest.raises(ValueError, match="could not be broadcast"):
        run_with(monkeypatch, bug)


def test_the_nodes_name_the_type_of_an_error_that_is_not_ours():
    assert _reason(PayloadEstimationError("joint 3 has no inertia")) == "joint 3 has no inertia"
    assert _reason(ValueError("operands could not be broadcast")) == "ValueError: operands could not be broadcast"


def test_bringup_refuses_a_malformed_override_with_the_package_error():
    with pytest.raises(BringupError, match="must look like name:=value"):
        override_file(["robot=lwr4"])


@pytest.mark.parametrize("argv,words", [
    (["excite", "--robot", "iiwa14", "--harmonics", "5", "--f0", "0.05", "--out", "{tmp}/no_dir/t.csv"],
     "--out {tmp}/no_dir/t.csv: directory {tmp}/no_dir does not exist"),
    (["identify", "--robot", "iiwa14", "--data", "{tmp}/run.csv", "--out", "{tmp}"],
     "--out {tmp}: is a directory (give a file name inside it)"),
    (["validate", "--robot", "iiwa14", "--params", "{tmp}/p.yaml", "--data", "{tmp}/run.csv", "--plot",
      "{tmp}/no_dir/v.png"], "--plot {tmp}/no_dir/v.png: directory {tmp}/no_dir does not exist"),
    (["export-csv", "--data", "{tmp}/run.csv", "--out", "{tmp}/no_dir/x.csv"],
     "--out {tmp}/no_dir/x.csv: directory {tmp}/no_dir does not exist"),
], ids=["excite", "identify", "validate", "export-csv"])
def test_an_output_path_that_cannot_be_written_is_refused_before_the_work(tmp_path, capsys, argv, words):
    """The long commands (an excitation design, an identification) check where they will write first: a mistyped
    path is one line at once, not an OS error after the work (the inputs named here do not even exist)."""
    argv = [a.format(tmp=tmp_path) for a in argv]
    assert command_line.main(argv) == 1
    assert capsys.readouterr().err.strip().endswith(words.format(tmp=tmp_path))
