"""bringup/launch data: running the monitor under a prefix (real-time priority on a robot PC)."""

import os
import re
import time
from pathlib import Path

import pytest

from payload_estimation.ros.bringup import launch_entries, main, ros_args, start_processes, stop_processes


def test_monitor_prefix_goes_to_the_monitor_only():
    e = launch_entries("lwr4", ["estimator", "sampler", "monitor"], monitor_prefix="  chrt -f 80 ")
    assert [x.get("prefix") for x in e] == [None, None, "chrt -f 80"]
    assert all("prefix" not in x for x in launch_entries("lwr4", ["monitor"]))


def test_launch_entries_and_launch_files():
    e = launch_entries("iiwa14", ["sim", "estimator", "sampler"], "lbr", True,
                       joint_trajectory="/lbr/joint_trajectory_controller/joint_trajectory")
    assert [x["executable"] for x in e] == ["sim_node", "payload_estimator", "payload_sampler"]
    assert e[0]["parameters"] == [{"robot": "iiwa14"}]  # sim defines sim time itself
    assert e[1]["parameters"][0].endswith("config/payload_estimation.yaml")
    assert e[1]["parameters"][1] == {"robot": "iiwa14", "use_sim_time": True}
    assert ("joint_trajectory", "/lbr/joint_trajectory_controller/joint_trajectory") in e[2]["remappings"]
    # real robots: the model from robot_description (the default); a simulator publishes it for the others
    assert all(x["parameters"][-1]["robot"] == "" for x in launch_entries())
    e = launch_entries("lwr4", ["sim", "estimator", "monitor"], model_from_topic=True)
    assert [x["parameters"][-1]["robot"] for x in e] == ["lwr4", "", ""]
    with pytest.raises(ValueError, match="unknown node"):
        launch_entries(nodes=["planner"])
    for f in Path(__file__).resolve().parents[2].joinpath("launch").glob("*.launch.py"):
        compile(f.read_text(), str(f), "exec")  # the launch package is not installable here


def test_a_calibrated_thresholds_file_is_layered_for_the_monitor_and_checked_before_anything_starts(tmp_path, capsys):
    """What ~/finish_threshold_calibration writes (ThresholdCalibration.params_file) goes to the monitor between the
    package's file and the launch arguments; a file without thresholds is refused in words, not by rcl."""
    import numpy as np

    from payload_estimation.collision import calibrate_thresholds
    from payload_estimation.ros.bringup import BringupError, thresholds_file

    t = np.arange(100) * 1e-3
    cal = calibrate_thresholds(t, np.full((100, 7), 1.6), np.ones((100, 7)))
    good = tmp_path / "thresholds.yaml"
    good.write_text(cal.params_file("test"))
    e = launch_entries("lwr4", ["estimator", "monitor"], thresholds=good)
    assert e[0]["parameters"][0].endswith("config/payload_estimation.yaml") and len(e[0]["parameters"]) == 2
    assert e[1]["parameters"][0].endswith("config/payload_estimation.yaml")
    assert e[1]["parameters"][1:] == [str(good), {"robot": "lwr4", "use_sim_time": False}]
    bad = {"missing.yaml": None, "prose.yaml": "thresholds: 3\n: : :", "other.yaml": "/**/payload_sampler:\n  "
           "ros__parameters:\n    thresholds: [3.0]\n", "negative.yaml": "/**/collision_monitor:\n  ros__parameters:\n"
           "    thresholds: [3.0, -1.0]\n", "list.yaml": "- 1\n- 2\n", "three.yaml": "/**/collision_monitor:\n"
           "  ros__parameters:\n    thresholds: [3.0, 4.0, 5.0]\n"}
    words = {"missing.yaml": "missing.yaml: no such file", "prose.yaml": "not valid YAML at line 2, column 1",
             "other.yaml": "no collision_monitor: ros__parameters: thresholds in it",
             "negative.yaml": "thresholds: -1 (item 2 of [3, -1]) is out of range; allowed: (0, 200]",
             "list.yaml": "not a mapping of node names",
             "three.yaml": "thresholds: give one value or 7 (one per joint), got 3"}
    for name, text in bad.items():
        if text is not None:
            (tmp_path / name).write_text(text)
        with pytest.raises(BringupError, match=re.escape(words[name])):
            thresholds_file(tmp_path / name, 7)
        with pytest.raises(BringupError, match=re.escape(words[name])):
            launch_entries("lwr4", ["monitor"], thresholds=tmp_path / name)
    assert main(["--nodes", "monitor", "--thresholds-file", str(tmp_path / "other.yaml")]) == 2
    assert "residual --calibrate --params-out" in capsys.readouterr().err


def test_a_parameter_file_rcl_cannot_read_is_refused_in_words_before_any_node_starts(tmp_path, capsys):
    """rcl's answer to these is a traceback from every node ("Couldn't parse params file"); bringup and the launch
    data say what is wrong with the file and exit 2."""
    from payload_estimation.ros.bringup import BringupError

    bad = {"missing.yaml": (None, "missing.yaml: no such file"),
           "unclosed.yaml": ("a: [b\n", "not valid YAML at line 2, column 1"),
           "flat.yaml": ("amplitude_deg: 5.0\n", "the section 'amplitude_deg' has no 'ros__parameters' mapping"),
           "empty.yaml": ("", "empty; a ROS 2 parameter file maps node names to their ros__parameters")}
    for name, (text, words) in bad.items():
        if text is not None:
            (tmp_path / name).write_text(text)
        assert main(["--nodes", "monitor", "--params-file", str(tmp_path / name)]) == 2
        assert words in capsys.readouterr().err
        with pytest.raises(BringupError, match=re.escape(words)):
            launch_entries("lwr4", ["monitor"], params_file=tmp_path / name)
    assert main(["--nodes", "monitor", "--params-file", str(tmp_path)]) == 2
    assert "is a directory" in capsys.readouterr().err


def test_monitor_prefix_needs_processes(capsys):
    assert main(["--nodes", "monitor", "--monitor-prefix", "chrt -f 80"]) == 2
    assert "--processes" in capsys.readouterr().err


@pytest.mark.slow
def test_start_processes_runs_the_node_under_the_prefix():
    """The child really runs under the prefix: ``nice -n 7`` shows in its scheduling niceness."""
    base = os.nice(0)
    procs = start_processes(["monitor"], ros_args(params=["robot:=lwr4"]), prefix=["nice", "-n", "7"])
    try:
        stat = Path(f"/proc/{procs[0].pid}/stat")
        deadline = time.monotonic() + 20.0
        def running_node() -> bool:  # forked (parent's argv), then ``nice`` (argv0 nice), then it execs python
            argv = Path(f"/proc/{procs[0].pid}/cmdline").read_text().split("\0")
            return argv[0] != "nice" and "payload_estimation.ros.monitor_node" in argv

        while not running_node() and time.monotonic() < deadline:
            time.sleep(0.02)
        nice = int(stat.read_text().rsplit(")", 1)[1].split()[16])
        assert nice == min(19, base + 7)
        assert procs[0].poll() is None, "monitor exited"
    finally:
        stop_processes(procs)


if __name__ == "__main__":
    pytest.main([__file__])
