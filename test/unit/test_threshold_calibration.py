"""Thresholds calibrated on a contact-free recording (collision.thresholds): on the MuJoCo arm (links 3 % off the
model, sensor offsets, 0.1 N m noise) they stay silent on moves the calibration never saw and catch a contact that
the paper's 6 N m misses; the ``residual --calibrate`` command and its refusals."""

from __future__ import annotations

import json
from dataclasses import dataclass

import numpy as np
import pytest
import yaml

from payload_estimation.collision import CollisionMonitor, MonitorConfig, ThresholdCalibration, calibrate_thresholds
from payload_estimation.collision.detector import DetectorInputError
from payload_estimation.model.dynamics import RigidBodyDynamics
from payload_estimation.model.robot_file import load_robot

Q0 = np.array([0.3, 0.7, -0.2, -1.3, 0.3, 0.6, 0.2])


@pytest.fixture(scope="module")
def lwr4():
    return RigidBodyDynamics(load_robot("lwr4"))


def _arm(dyn, seed: int = 3):
    pytest.importorskip("mujoco")
    from payload_estimation.sim import SensorConfig, SimConfig, SimulatedArm
    from payload_estimation.sim.truth import true_links

    offsets = np.random.default_rng(seed).uniform(-0.5, 0.5, dyn.n)
    arm = SimulatedArm(dyn.desc, SimConfig(seed=seed, true_links=true_links(dyn.desc, 0.03, seed),
                                           sensor=SensorConfig(noise_std=0.1, offset=offsets)))
    arm.reset(Q0)
    return arm


@dataclass
class Recorded:
    """What the monitor saw: t (N,) s, q, dq, tau (N, n) as measured, its residual r (N, n) N m, its detections."""

    t: np.ndarray
    q: np.ndarray
    dq: np.ndarray
    tau: np.ndarray
    r: np.ndarray
    events: list


def _moves(arm, mon, rng, n: int, contact=None) -> Recorded:
    """n random point-to-point moves (20-60 deg in total, 1.5-2.5 s, 0.3 s rest after each) watched by ``mon``;
    ``contact`` (time s into the first move, link, force N): applied for 0.2 s."""
    rows, rs, events = [], [], []
    q = arm.state().q
    for i in range(n):
        step = rng.normal(size=q.size)
        q = q + step / np.abs(step).sum() * np.radians(rng.uniform(20, 60))
        duration = rng.uniform(1.5, 2.5)
        arm.set_trajectory([(duration, q, None)])
        for k in range(round((duration + 0.3) * 1000)):
            if contact is not None and i == 0 and k == round(contact[0] * 1000):
                arm.apply_contact(contact[1], contact[2], None, 0.2)
            arm.step(1)
            s = arm.state()
            st = mon.update(s.t, s.q, s.dq, s.tau)
            rows.append(s)
            rs.append(st.residual)
            if st.event is not None and st.event.active:
                events.append(st.event)
    t, qs, dqs, taus = (np.array([getattr(s, k) for s in rows]) for k in ("t", "q", "dq", "tau"))
    return Recorded(t, qs, dqs, taus, np.array(rs), events)


@pytest.mark.slow
def test_calibrated_thresholds_stay_silent_on_unseen_moves_and_catch_what_6_n_m_misses(lwr4):
    arm = _arm(lwr4)
    recorder = CollisionMonitor(lwr4, MonitorConfig(contact=None, thresholds=100.0))
    seen = _moves(arm, recorder, np.random.default_rng(10), 3)
    cal = calibrate_thresholds(seen.t, seen.r, seen.dq)
    assert cal.still == () and cal.samples == seen.t.size
    np.testing.assert_allclose(cal.peak, np.abs(seen.r).max(axis=0))
    np.testing.assert_allclose(cal.thresholds, np.maximum(2.5, 2.0 * cal.peak))
    assert np.all(cal.thresholds < 6.0), cal.thresholds  # a 3 % model: far below the paper's floor

    # other moves, never seen by the calibration: no detection
    mon = CollisionMonitor(lwr4, MonitorConfig(contact=None, thresholds=tuple(cal.thresholds)))
    unseen = _moves(arm, mon, np.random.default_rng(11), 3)
    assert unseen.events == [], [(e.detection_time, e.peak_joint) for e in unseen.events]
    assert np.all(np.abs(unseen.r).max(axis=0) < cal.thresholds)

    # a push at link 3's origin scaled to 1.6x the calibrated threshold on its most loaded joint, below 6 N m on
    # every joint: the calibrated monitor detects it within 30 ms, the paper's 6 N m does not see it at all
    direction = np.array([0.3, -0.8, 0.5]) / np.linalg.norm([0.3, -0.8, 0.5])
    detections, force = {}, None
    for name, th in (("calibrated", tuple(cal.thresholds)), ("6 N m", 6.0)):
        arm = _arm(lwr4)
        mon = CollisionMonitor(lwr4, MonitorConfig(contact=None, thresholds=th))
        _moves(arm, mon, np.random.default_rng(10), 1)  # the same first move as the calibration's, then the push
        if force is None:  # at the pose of the push (the next move has barely started 50 ms later)
            jac = lwr4.frame_jacobian(arm.state().q, "link_3")[:3]
            force = direction * 1.6 / np.max(np.abs(jac.T @ direction) / cal.thresholds)
            assert np.abs(jac.T @ force).max() < 5.5, jac.T @ force
        t0 = arm.time
        pushed = _moves(arm, mon, np.random.default_rng(11), 1, contact=(0.05, "link_3", force))
        detections[name] = [e.detection_time - t0 - 0.05 for e in pushed.events]
    assert len(detections["calibrated"]) == 1 and detections["calibrated"][0] < 0.03, detections
    assert detections["6 N m"] == [], detections


def test_calibration_rules_and_refusals():
    rng = np.random.default_rng(0)
    t = np.arange(2000) * 1e-3
    dq = np.zeros((2000, 3))
    dq[:, :2] = rng.uniform(-1.0, 1.0, (2000, 2))  # joint 3 never moves
    r = rng.normal(0.0, [0.2, 1.0, 0.1], (2000, 3))
    cal = calibrate_thresholds(t, r, dq, safety=2.0, minimum=2.5)
    peak = np.abs(r).max(axis=0)
    np.testing.assert_allclose(cal.thresholds, [2.5, 2 * peak[1], 2.5])
    assert cal.still == (2,) and cal.duration == pytest.approx(1.999)
    text = "\n".join(cal.lines(("a1", "a2", "a3")))
    assert f"a2: largest |r| {peak[1]:.2f} N m -> threshold {2 * peak[1]:.2f} N m (2 x |r|)" in text
    assert "a1: largest |r|" in text and "(minimum)" in text
    assert "not moved in the recording" in text and text.rstrip().endswith("a3")
    d = cal.to_dict()
    assert d["joints_not_moved"] == [3] and d["thresholds"][0] == 2.5
    doc = yaml.safe_load(cal.params_file("run.csv"))
    assert doc == {"/**/collision_monitor": {"ros__parameters": {"thresholds": d["thresholds"]}}}

    bad = r.copy()
    bad[17, 1] = np.nan
    with pytest.raises(DetectorInputError, match="r is not finite at sample 17, joint 2"):
        calibrate_thresholds(t, bad, dq)
    with pytest.raises(DetectorInputError, match="does not move"):
        calibrate_thresholds(t, r, np.zeros_like(dq))
    with pytest.raises(DetectorInputError, match="safety must be >= 1"):
        calibrate_thresholds(t, r, dq, safety=0.5)
    with pytest.raises(DetectorInputError, match="minimum must be > 0"):
        calibrate_thresholds(t, r, dq, minimum=0.0)
    with pytest.raises(DetectorInputError, match="N >= 2"):
        calibrate_thresholds(t[:5], r, dq)
    assert isinstance(cal, ThresholdCalibration)


def test_a_recording_the_observer_mostly_held_over_is_refused_and_gaps_are_reported():
    """observer_coverage: steps longer than the observer's gap limit are not integrated; a replay with more than half
    of them gaps is refused (with the median interval and the limit), a few give a warning; a calibration refuses
    more than 5 % of its time in gaps and leaves fewer out of its duration."""
    from payload_estimation.collision.thresholds import observer_coverage

    slow = observer_coverage(np.arange(9) * 0.5)  # 2 Hz: every step over the 0.1 s limit
    assert (slow.steps, slow.gaps, slow.gap_time, slow.median_step) == (8, 8, 4.0, 0.5)
    assert slow.warning() is None
    with pytest.raises(DetectorInputError, match=r"^median sample interval 0.5 s is longer than the momentum "
                                                 r"observer's gap limit of 0.1 s: it held its residual over 8 of the "
                                                 r"8 steps \(100%\).* 100 Hz or more"):
        slow.check()
    t = np.arange(2000) * 1e-3
    fine = observer_coverage(t)
    assert fine.gaps == 0 and fine.refusal() is None and fine.warning() is None and fine.check() is fine
    flags = np.zeros(t.size, bool)
    flags[[500, 1500]] = True  # the observer's own count: steps over 4 x its typical step
    some = observer_coverage(t, flags, max_gap=0.1)
    assert some.gaps == 2 and some.refusal() is None
    assert "held its residual over 2 of the 1999 steps (0.002 s of 1.999 s)" in some.warning()
    with pytest.raises(DetectorInputError, match="gap must be one flag per sample"):
        observer_coverage(t, flags[:-1])

    rng = np.random.default_rng(1)
    dq = rng.uniform(-1.0, 1.0, (t.size, 2))
    r = rng.normal(0.0, 1.0, (t.size, 2))
    with pytest.raises(DetectorInputError, match=r"held its residual over 4.000 s of the 4.000 s recorded \(100%"):
        calibrate_thresholds(np.arange(9) * 0.5, r[:9], dq[:9])  # no gap flags: steps over max_gap
    stalled = t.copy()
    stalled[1000:] += 0.15  # one 0.151 s step in 2.15 s: 7 %
    with pytest.raises(DetectorInputError, match=r"over 0.151 s of the 2.149 s recorded \(7%, 1 of 1999 steps.*at "
                                                 r"most 5% of its time in gaps"):
        calibrate_thresholds(stalled, r, dq)
    cal = calibrate_thresholds(t, r, dq, gap=flags)
    assert cal.gap_time == pytest.approx(0.002) and cal.duration == pytest.approx(1.997)
    assert "(2000 samples; 0.002 s of stream gaps not observed)" in cal.lines()[0]
    assert cal.to_dict()["gap_time"] == 0.002 and "stream gaps not observed" in cal.params_file()
    assert calibrate_thresholds(t, r, dq).gap_time == 0.0


@pytest.mark.slow
def test_residual_command_calibrates_and_refuses_a_recording_with_a_contact(lwr4, tmp_path, capsys):
    from payload_estimation.cli import main
    from payload_estimation.files.csv_samples import write_samples_csv
    from payload_estimation.signals.samples import Samples

    def record(contact=None) -> Samples:
        run = _moves(_arm(lwr4), CollisionMonitor(lwr4, MonitorConfig(contact=None, thresholds=100.0)),
                     np.random.default_rng(10), 2, contact)
        return Samples(run.q, run.tau, dq=run.dq, t=run.t)

    clean = write_samples_csv(record(), tmp_path / "clean.csv")
    params = tmp_path / "thresholds.yaml"
    base = ["residual", "--robot", "lwr4", "--data", str(clean), "--calibrate"]
    assert main(base + ["--params-out", str(params), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    cal = out["calibration"]
    assert out["events"] == [] and len(cal["thresholds"]) == 7 and min(cal["thresholds"]) >= 2.5
    np.testing.assert_allclose(cal["peak_abs_residual"], out["max_abs_residual_outside_events"], atol=1e-4)
    written = yaml.safe_load(params.read_text())["/**/collision_monitor"]["ros__parameters"]["thresholds"]
    assert written == cal["thresholds"]
    assert main(base) == 0
    text = capsys.readouterr().out
    assert "thresholds calibrated on" in text and "collision_monitor: thresholds:=[" in text

    pushed = write_samples_csv(record((0.5, "link_5", [0.0, 60.0, 0.0])), tmp_path / "pushed.csv")
    assert main(["residual", "--robot", "lwr4", "--data", str(pushed), "--calibrate", "--params-out",
                 str(tmp_path / "no.yaml")]) == 1
    err = capsys.readouterr().err
    assert "--calibrate: the recording is not contact-free at --threshold 6 N m: 1 event(s)" in err, err
    assert not (tmp_path / "no.yaml").exists()
    assert main(["residual", "--robot", "lwr4", "--data", str(clean), "--params-out", str(params)]) == 1
    assert "--params-out writes calibrated thresholds: add --calibrate" in capsys.readouterr().err


def test_an_announced_window_keeps_the_paper_floor_over_calibrated_thresholds(lwr4):
    """A grasp is in no calibration recording: inside its window the thresholds are at least 6 N m (``window_floor``),
    joints calibrated higher keep theirs; the calibrated ones apply again once the window closes."""
    from payload_estimation.collision import GRASP, MonitorSupervisor, PayloadWatch, SupervisorConfig

    calibrated = np.array([2.5, 2.5, 3.0, 2.5, 7.0, 2.5, 2.5])
    sup = MonitorSupervisor(lwr4, MonitorConfig(contact=None, thresholds=tuple(calibrated)))
    np.testing.assert_allclose(sup.mon.detector.thresholds, calibrated)
    sup.announce(GRASP)
    np.testing.assert_allclose(sup.mon.detector.thresholds, np.maximum(6.0, calibrated))
    assert sup.widening == pytest.approx(6.0 / 2.5)
    sup.configure(sup.mon.config, SupervisorConfig(payload_event_floor=4.0))  # the node's payload_event_floor
    np.testing.assert_allclose(sup.mon.detector.thresholds, np.maximum(4.0, calibrated))  # in the open window too
    assert sup.watch.estimate(1.5) and sup.watch.scale() == 1.0  # the window closed: the calibrated thresholds
    default = PayloadWatch(lwr4, 6.0)
    default.announce(GRASP)
    assert default.scale() == 1.0  # at the paper's 6 N m nothing changes


class _Watched:
    """A :class:`MonitorSupervisor` seen as ``_moves`` sees a monitor: its per-sample monitor step."""

    def __init__(self, sup):
        self.sup = sup

    def update(self, t, q, dq, tau):
        return self.sup.update(t, q, dq, tau).monitor


@pytest.mark.slow
def test_the_monitor_calibrates_live_as_the_command_does_on_the_recording(lwr4):
    """collision_monitor's ~/start ... ~/finish_threshold_calibration (the supervisor's rule): the live recorder
    gives the thresholds calibrate_thresholds gives on the same residual; a contact refuses the recording and
    ends it, a recording that has not moved yet goes on; the payload sampler's time is left out."""
    from payload_estimation.collision import CalibrationRefused, MonitorSupervisor

    sup = MonitorSupervisor(lwr4, MonitorConfig(contact=None))
    watched, arm = _Watched(sup), _arm(lwr4)
    with pytest.raises(CalibrationRefused, match="no threshold calibration in progress"):
        sup.finish_calibration(2.0, 2.5)
    assert "move the arm through the task's motions" in sup.start_calibration()
    for _ in range(200):  # at rest first: nothing moved yet, so finishing is refused and the recording goes on
        arm.step(1)
        s = arm.state()
        sup.update(s.t, s.q, s.dq, s.tau)
    with pytest.raises(CalibrationRefused, match="does not move .*; the recording goes on"):
        sup.finish_calibration(2.0, 2.5)
    run = _moves(arm, watched, np.random.default_rng(10), 2)
    assert run.events == [] and sup.recorder is not None
    cal = sup.finish_calibration(2.0, 2.5)
    ref = calibrate_thresholds(run.t, run.r, run.dq)
    np.testing.assert_allclose(cal.thresholds, ref.thresholds)  # the rest before the moves stays below them
    assert cal.samples == len(run.t) + 200 and sup.recorder is None
    assert cal.duration == pytest.approx(run.t[-1] - run.t[0] + 0.2, abs=2e-3)

    sup.start_calibration()
    sup.set_sampling(True)  # the sampler's motion: widened for already, not the task's
    _moves(arm, watched, np.random.default_rng(11), 1)
    sup.set_sampling(False)
    rec = sup.recorder
    assert rec.samples == 0 and rec.excluded["payload sampler active"] > 1.5
    with pytest.raises(CalibrationRefused, match=r"nothing recorded yet: 0 sample\(s\) \(payload sampler active\)"):
        sup.finish_calibration(2.0, 2.5)
    assert "was discarded" in sup.start_calibration()
    pushed = _moves(arm, watched, np.random.default_rng(12), 1, (0.5, "link_5", [0.0, 60.0, 0.0]))
    assert pushed.events, "the 60 N push was not detected"
    assert "NOT contact-free" in sup.recorder.summary()
    with pytest.raises(CalibrationRefused, match=r"not contact-free: the residual reached .* the recording is "
                                                 "discarded"):
        sup.finish_calibration(2.0, 2.5)
    assert sup.recorder is None
    with pytest.raises(CalibrationRefused, match="no threshold calibration in progress"):
        sup.cancel_calibration()


def test_the_live_recorder_counts_what_it_leaves_out_and_never_holds_a_nan():
    from payload_estimation.collision import ThresholdRecorder

    rec = ThresholdRecorder(2)
    r, dq = np.array([0.5, -1.0]), np.array([0.3, 0.0])
    rec.add(0.000, r, dq)
    rec.add(0.001, np.array([np.nan, 0.0]), dq)  # left out, counted
    rec.add(0.002, 2 * r, dq)
    rec.add(5.000, r, dq)  # after a 5 s stream gap: a sample, no time
    rec.add(5.001, r, dq, exclude="grasp/release window")
    assert rec.samples == 3 and rec.duration == pytest.approx(0.001)
    assert rec.excluded == {"residual or velocity not finite": pytest.approx(0.001),
                            "grasp/release window": pytest.approx(0.001)}
    np.testing.assert_allclose(rec.peak, [1.0, 2.0])
    cal = rec.result(2.0, 2.5)
    np.testing.assert_allclose(cal.thresholds, [2.5, 4.0])
    assert cal.still == (1,)
    assert "left out: 0.0 s residual or velocity not finite, 0.0 s grasp/release window" in rec.summary()
    rec.add(5.002, np.array([0.0, -6.5]), dq)
    with pytest.raises(DetectorInputError, match="reached 6.50 N m on joint 2 at t=5.002 s, above the 6 N m"):
        rec.result()
    with pytest.raises(DetectorInputError, match="safety must be >= 1"):
        ThresholdRecorder(2).result(safety=0.9)


def test_a_calibration_in_progress_survives_a_stream_restart_and_a_new_robot_description(lwr4):
    """The monitor node re-creates its supervisor on a re-published robot_description (``adopt``) and re-initialises
    it when the stream starts over (``restart``): the recording goes on through both, and a restart's time jump
    adds no recorded time."""
    from payload_estimation.collision import MonitorSupervisor

    q = np.radians([10, 40, -5, -70, 15, 50, 20])
    sup = MonitorSupervisor(lwr4, MonitorConfig(contact=None))
    sup.start_calibration()
    dq = np.full(7, 0.1)
    for k in range(100):
        sup.update(k * 1e-3, q, dq, lwr4.gravity(q))
    rec = sup.recorder
    sup.restart()
    for k in range(100):  # stamps start over from 0
        sup.update(k * 1e-3, q, dq, lwr4.gravity(q))
    assert sup.recorder is rec and rec.samples == 200 and rec.duration == pytest.approx(0.198)
    new = MonitorSupervisor(lwr4, MonitorConfig(contact=None))
    new.adopt(sup)
    assert new.recorder is rec
    assert np.all(new.finish_calibration(2.0, 2.5).thresholds == 2.5) and new.recorder is None
