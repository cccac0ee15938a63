"""Offline report on a recording made with the MuJoCo arm (truth hidden from the report)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from payload_estimation.cli import main
from payload_estimation.collision.scoring import score_detections, time_above
from payload_estimation.files.csv_samples import write_samples_csv
from payload_estimation.model.dynamics import RigidBodyDynamics
from payload_estimation.model.parameters import BodyInertia
from payload_estimation.model.robot_file import load_robot
from payload_estimation.sampling.poses import plan_poses
from payload_estimation.signals.samples import Samples
from payload_estimation.signals.segments import static_captures
from payload_estimation.sim import SensorConfig, SimConfig, SimulatedArm

MASS, COM = 2.5, np.array([0.02, -0.01, 0.1])


@pytest.fixture(scope="module")
def recording(tmp_path_factory):
    """Rests at the sampler's ±7° poses, then a 3 s move; 200 Hz, 0.05 N m torque noise."""
    desc = load_robot("lwr4")
    q0 = np.radians([10, 40, -5, -70, 15, 50, 20])
    arm = SimulatedArm(desc, SimConfig(seed=2, sensor=SensorConfig(noise_std=0.05)))
    arm.reset(q0)
    arm.attach_payload(BodyInertia(MASS, COM, np.diag([0.01, 0.01, 0.005])))
    rows = []

    def run(seconds):
        for _ in range(int(round(seconds / arm.dt))):
            arm.step(1)
            if int(round(arm.time / arm.dt)) % 5 == 0:
                s = arm.state()
                rows.append((s.t, s.q, s.dq, s.tau))

    run(0.6)
    plan = plan_poses(RigidBodyDynamics(desc), q0)
    for target, duration in plan.moves():
        arm.set_trajectory([(duration, target, None)])
        run(duration + 1.0)  # the paper dwells 1 s per pose
    arm.set_trajectory([(3.0, q0 + np.radians([20, -10, 0, 10, 0, 0, 0]), None)])
    run(3.6)
    t, q, dq, tau = (np.array(x) for x in zip(*rows))
    path = write_samples_csv(Samples(q, tau, dq=dq, t=t), tmp_path_factory.mktemp("rec") / "run.csv")
    return desc, path, len(plan.moves())


def test_static_captures_find_every_rest(recording):
    desc, path, n_moves = recording
    from payload_estimation.files.csv_samples import load_csv

    caps = static_captures(load_csv(path, desc))
    assert len(caps) == n_moves + 2  # the start, one rest after every sampler move, the end of the move


@pytest.mark.slow
def test_report_estimates_the_payload_and_compares_residuals(recording, tmp_path, capsys):
    desc, path, _ = recording
    out = tmp_path / "rep"
    assert main(["report", "--robot", "lwr4", "--data", str(path), "--out", str(out), "--json"]) == 0
    summary = json.loads((out / "summary.json").read_text())
    est = summary["estimate"]
    assert abs(est["mass"] - MASS) / MASS < 0.02
    assert np.linalg.norm(np.array(est["com"]) - COM) < 0.01
    with_est = summary["residual"]["with the payload estimate"]
    without = summary["residual"]["without payload"]
    assert with_est["max_abs_residual"] < 3.0 < 6.0 < without["max_abs_residual"]
    assert not with_est["events"] and without["events"]
    for p in summary["plots"]:
        assert (out / p.split("/")[-1]).stat().st_size > 10_000


def test_report_rejects_a_recording_of_another_robot(recording, tmp_path, capsys):
    _, path, _ = recording
    # a recording of the 7-joint LWR cannot be analysed with a 2-joint robot
    two_r = tmp_path / "2r.yaml"
    two_r.write_text(
        "name: r2\njoints: [a, b]\nkinematics: {convention: dh, dh: [[1, 0, 0, 0], [0.5, 0, 0, 0]]}\n"
        "limits: {position: [[-3, 3], [-3, 3]], velocity: [1, 1], effort: [10, 10]}\n"
        "links: [{mass: 1, com: [0, 0, 0], inertia: [0.1, 0, 0, 0.1, 0, 0.1]},"
        " {mass: 1, com: [0, 0, 0], inertia: [0.1, 0, 0, 0.1, 0, 0.1]}]\n")
    assert main(["report", "--robot", str(two_r), "--data", str(path), "--out", str(tmp_path)]) == 1
    assert "joints" in capsys.readouterr().err


def test_scoring_matches_detections_to_contacts():
    s = score_detections([(1.0, 1.2), (5.0, 5.2), (9.0, 9.1)], [1.05, 1.3, 3.0, 9.4], window=0.5)
    assert s.detected == 2
    np.testing.assert_allclose(s.delays[:2], [0.05, np.nan], equal_nan=True)
    assert s.false_alarms == (3.0,)
    t = np.linspace(0, 10, 1001)
    r = np.zeros((t.size, 2))
    r[(t > 2) & (t < 3), 1] = 8.0
    assert time_above(t, r, 6.0) == pytest.approx(1.0, abs=0.02)
    assert time_above(t, r, 6.0, exclude=[(1.5, 3.5)]) == 0.0
