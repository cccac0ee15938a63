"""The README's main job: `payload-estimation demo` end to end (all nodes as processes, real DDS):
static and dynamic sampling on the same grasp, then the monitored move; and `demo --online`: a pick and place
with the online estimate (no sampling motion), a push and a drop during the moves."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

# Real DDS, real processes, wall-clock timeouts: on a loaded 2-core machine a run can miss a deadline;
# a failure that repeats twice more is real.
pytestmark = pytest.mark.flaky(reruns=2, reruns_delay=2)



def test_demo_runs_the_whole_mission(tmp_path):
    out = tmp_path / "demo"
    # `python -m` rather than the console script: an ament_python develop install puts scripts in
    # lib/payload_estimation (for `ros2 run`), not on PATH
    proc = subprocess.run([sys.executable, "-m", "payload_estimation.cli", "demo", "--fast", "--out", str(out)],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "contacts detected (with estimate)" in proc.stdout  # the results table is printed
    s = json.loads((out / "summary.json").read_text())
    # both modes on the same grasp: static poses, then the excitation against the reference run
    for mode in ("static", "dynamic"):
        assert abs(s[mode]["mass_error_pct"]) < 2.0 and s[mode]["com_error_mm"] < 8.0, s[mode]
        assert s[mode]["collisions_during_sampling"] == 0
    assert s["collisions_at_grasp"] == 0 and "collisions at the grasp" in proc.stdout  # announced (issue 47)
    assert s["dynamic"]["sample_call_sim_s"] < 0.6 * s["static"]["sample_call_sim_s"]
    assert "excitation" in s["dynamic"]["message"] and "poses" in s["static"]["message"]
    assert s["mass_error_pct"] == s["dynamic"]["mass_error_pct"]  # the move runs with the dynamic estimate
    assert s["with_estimate"]["detected"] == len(s["contacts"]) == 3
    assert s["with_estimate"]["false_alarms"] == 0
    # the paper's point: without the payload update the same run is not monitored correctly
    assert s["without_update"]["time_above_s"] > 1.0
    assert len(s["plots"]) == 3 and s["plots"][2].endswith("fig7_sampling_motion.png")
    for p in s["plots"]:
        assert Path(p).stat().st_size > 20_000


def test_online_demo_estimates_while_moving_catches_the_push_and_reports_the_drop(tmp_path):
    """`demo --online`: the estimate published during the first move lies within 3 σ of MuJoCo's payload (and
    close to it), the monitor widened its thresholds by the estimate's σ, the push during move 2 is a collision
    (not a loss), the drop during move 3 is payload lost (no collision, the arm reaches the place pose) and the
    estimate goes back to 0 kg."""
    out = tmp_path / "online"
    proc = subprocess.run([sys.executable, "-m", "payload_estimation.cli", "demo", "--online", "--fast", "--out",
                           str(out)], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "drop during move 3" in proc.stdout  # the results table is printed
    s = json.loads((out / "online_summary.json").read_text())
    assert s["ok"] and not s["failed"], s["failed"]
    assert s["estimates"] >= 10  # ~10 Hz while moving
    end = s["end_move1"]
    assert end["within_k_sigma"], end
    assert abs(end["mass_error_pct"]) < 2.0 and end["com_error_norm_mm"] < 15.0, end
    assert s["status_scale_max_move1"] > 1.0  # the node's own report: widened by the estimate's σ
    c = s["contact"]
    assert c["taken_for_loss"] == 0 and c["flag_delay_ms"] < 300, c  # a collision, flagged (loaded machine: slack)
    assert c["detection_delay_ms"] < 60, c
    d = s["drop"]
    assert d["reported_lost"] and d["collision_flags"] == 0, d
    assert d["lost_mass"] > 0.6 * s["truth"]["mass"] and d["detection_delay_ms"] < 100, d
    assert d["estimate_zero_after_ms"] < 2000 and d["arm_reached_place_deg"] < 0.5, d
    assert s["false_alarms"] == 0
    assert Path(s["plot"]).stat().st_size > 20_000
