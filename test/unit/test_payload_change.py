"""Announced grasp and release, the core rule without DDS (collision.payload_change): a residual a plausible
payload change explains is not a collision, a contact a payload cannot explain still is. References: pinocchio
(the payload's gravity torque, a contact's J^T F) and the MuJoCo arm (torques from an engine we did not write).
The same with the real nodes over DDS: test_payload_events.py."""

import numpy as np
import pytest

from payload_estimation.collision.monitor import CollisionMonitor, MonitorConfig
from payload_estimation.collision.payload_change import (
    GRASP,
    RELEASE,
    PayloadEventError,
    PayloadWatch,
    WatchConfig,
    explain_payload_change,
    payload_torque_limit,
)
from payload_estimation.collision.provisional import ProvisionalPayload
from payload_estimation.model.dynamics import RigidBodyDynamics
from payload_estimation.model.parameters import BodyInertia
from payload_estimation.model.robot_file import load_robot

Q0 = np.radians([0, 30, 0, -80, 0, 50, 0])
W = np.full(7, 1 / 6.0)


@pytest.fixture(scope="module")
def iiwa():
    return RigidBodyDynamics(load_robot("iiwa14"))


def _payload(rng, max_mass=15.0, radius=0.5):
    m = rng.uniform(0.1, max_mass)
    c = rng.normal(size=3)
    return np.r_[m, m * c / np.linalg.norm(c) * rng.uniform(0, radius)]


def test_a_plausible_payload_is_explained_whole_and_bounded_by_the_torque_limit(iiwa):
    rng = np.random.default_rng(1)
    lim = iiwa.desc.limits.position
    for _ in range(50):
        q = rng.uniform(lim[:, 0], lim[:, 1])
        y = iiwa.payload_gravity_regressor(q)
        p = _payload(rng)
        r = -(y @ p)  # the payload the model lacks, as the residual (the external torque) sees it
        dp = explain_payload_change(y, r, W, np.zeros(4), (0.0, 15.0), 0.5)
        np.testing.assert_allclose(-(y @ dp), r, atol=1e-6 * max(1.0, np.abs(r).max()))
        assert np.all(np.abs(y @ p) <= payload_torque_limit(y, 15.0, 0.5) + 1e-9)


def test_a_contact_a_payload_cannot_produce_stays_unexplained(iiwa):
    """80 N at the elbow (link_4's origin, sideways): more than half of its torque is left for the detector;
    200 N down at the tool (> 15 kg): what 15 kg cannot explain; both above 1.5 x the 6 N m threshold.
    A vertical 15 N at the tool is a payload's weight and is explained."""
    y = iiwa.payload_gravity_regressor(Q0)
    for frame, force, left in (("link_4", [80.0, 80.0, 0.0], 0.5), ("link_7", [0.0, 0.0, -200.0], 0.1)):
        tau = iiwa.frame_jacobian(Q0, frame, np.zeros(3))[:3].T @ np.array(force)
        dp = explain_payload_change(y, tau, W, np.zeros(4), (0.0, 15.0), 0.5)
        rest = tau + y @ dp
        assert np.max(np.abs(rest)) > left * np.max(np.abs(tau)) and np.max(np.abs(rest)) > 9.0, (frame, rest)
    weight = iiwa.frame_jacobian(Q0, "link_7", np.zeros(3))[:3].T @ np.array([0.0, 0.0, -15.0])
    dp = explain_payload_change(y, weight, W, np.zeros(4), (0.0, 15.0), 0.5)
    assert np.max(np.abs(weight + y @ dp)) < 1e-6


def test_a_release_explains_at_most_the_mass_carried(iiwa):
    y = iiwa.payload_gravity_regressor(Q0)
    carried = np.r_[2.0, 2.0 * np.array([0.0, 0.0, 0.05])]
    gone = y @ carried  # the model still carries it, the arm no longer does: r = +y p
    dp = explain_payload_change(y, gone, W, carried, (0.0, 2.5), 0.5)
    np.testing.assert_allclose(dp, -carried, atol=1e-9)
    heavier = explain_payload_change(y, -3 * gone, W, carried, (0.0, 2.5), 0.5)  # +4 kg more: not a release
    assert heavier[0] == pytest.approx(0.5)


def test_re_learning_at_the_same_pose_only_while_the_load_may_change(iiwa):
    loaded = iiwa.with_payload(BodyInertia(2.0, np.array([0.0, 0.0, 0.05]), np.eye(3) * 1e-3))
    z = np.zeros(7)
    for replace, mass in ((False, 0.0), (True, 2.0)):
        prov = ProvisionalPayload(iiwa)
        prov.start()
        for k in range(100):  # rest, unloaded, then the object is grasped at the same pose
            prov.update(k * 1e-3, Q0, z, iiwa.gravity(Q0), replace=replace)
        for k in range(100, 300):
            prov.update(k * 1e-3, Q0, z, loaded.gravity(Q0), replace=replace)
        assert prov.estimate.mass == pytest.approx(mass, abs=0.25), (replace, prov.estimate)
        assert len(prov.poses) == 1


def test_watch_events_estimates_and_bad_input(iiwa):
    watch = PayloadWatch(iiwa, 6.0, WatchConfig(window=1.0))
    assert watch.scale() == 1.0 and watch.explain(0.0, Q0, np.zeros(7), None) is None
    assert "grasp announced: payload being learned" in watch.announce(GRASP)
    assert watch.learning and watch.scale() == 1.0  # inside the window: the explained part is taken out instead
    assert not watch.estimate(0.0) and watch.learning  # a 0 kg estimate inside the window: still learning
    assert watch.estimate(1.2) and not watch.learning and watch.announced is None and watch.scale() == 1.0
    watch.carried(BodyInertia(1.2, np.zeros(3), np.zeros((3, 3))))
    assert "up to 1.54 kg" in watch.announce(RELEASE)
    assert watch.in_window(100.0) and not watch.in_window(101.5)  # opened by the first sample after it
    watch.restart()  # the stream starts over at t = 0: the window runs from its first sample
    assert watch.in_window(0.0) and watch.in_window(0.9) and not watch.in_window(1.0)
    with pytest.raises(PayloadEventError, match="use one of grasp, release"):
        watch.announce("dropped")
    with pytest.raises(PayloadEventError, match="window must be"):
        WatchConfig(window=0.0)


# ------------------------------------------------------------------------------------------- MuJoCo arm
def _detected(mon):
    ev = mon.detector.current
    return None if ev is None else ev.detection_time


def _run(desc, dyn, announce, release=False, contact=None, seconds=1.6, window=1.0, change=0.3, mass=2.0):
    """The iiwa at rest with 3 % model error and 0.1 N m noise; at 0.3 s the change is announced and at ``change``
    s the payload (``mass`` kg) is attached (or, with ``release``, detached: the monitor carried it and the estimator's
    0 kg arrives with the announcement); ``contact`` (s): 80 N sideways at link_4 for 0.2 s. Returns (detection
    times, the watch)."""
    pytest.importorskip("mujoco")
    from payload_estimation.sim import SensorConfig, SimConfig, SimulatedArm

    arm = SimulatedArm(desc, SimConfig(dt=0.001, seed=0, model_error=0.03, sensor=SensorConfig(noise_std=0.1)))
    body = BodyInertia(mass, np.array([0.0, 0.0, 0.05]), np.eye(3) * 1e-3)
    arm.reset(Q0)
    mon = CollisionMonitor(dyn, MonitorConfig())
    watch = PayloadWatch(dyn, 6.0, WatchConfig(window=window))
    mon.explain = watch.explain
    if release:
        arm.attach_payload(body)
        arm.reset(Q0)
        mon.set_payload(body)
        watch.carried(body)
    detections = []
    for k in range(int(seconds * 1000)):
        if k == 300 and announce:
            watch.announce(RELEASE if release else GRASP)
            if release:
                mon.set_payload(None)
        if k == round(change * 1000):
            arm.detach_payload() if release else arm.attach_payload(body)
        if contact is not None and k == round(contact * 1000):
            arm.apply_contact("link_4", arm.link_pose("link_4")[:3, :3] @ np.array([80.0, 80.0, 0.0]), None, 0.2)
        arm.step(1)
        s = arm.state()
        step = mon.update(s.t, s.q, s.dq, s.tau)
        w = watch.update(s.t, s.q, s.dq, s.tau, detected=_detected(mon))
        if w.fit is not None:
            mon.set_payload(*watch.observer_model(w.fit) if watch.learning else (None, False))
        if w.scale is not None:
            mon.detector.scale_thresholds(w.scale)
        if step.event is not None and step.event.active:
            detections.append(step.event.detection_time)
    return detections, watch


@pytest.fixture(scope="module")
def iiwa_desc(iiwa):
    return iiwa.desc


@pytest.mark.slow
def test_mujoco_announced_grasp_is_learnt_not_a_collision(iiwa_desc, iiwa):
    assert len(_run(iiwa_desc, iiwa, announce=False)[0]) == 1  # unannounced: the grasp reads as a collision
    detections, watch = _run(iiwa_desc, iiwa, announce=True)
    assert detections == []
    assert watch.learning and watch.announced is None  # window closed, the provisional payload carried
    assert watch.provisional.estimate.mass == pytest.approx(2.0, abs=0.2)
    detections, watch = _run(iiwa_desc, iiwa, announce=True, change=9.0)  # announced, nothing grasped
    assert detections == [] and not watch.learning and watch.scale() == 1.0  # back to unloaded


@pytest.mark.parametrize("change,mass", [(0.3, 2.0), (0.6, 4.0)])
def test_mujoco_announced_release_returns_to_the_unloaded_model(iiwa_desc, iiwa, change, mass):
    """Released at the announcement, or 0.3 s later: the object still held is re-learnt at rest, then the
    provisional model drops to 0 kg while the residual still converges (5/K_I) to it."""
    assert len(_run(iiwa_desc, iiwa, announce=False, release=True, seconds=0.6, mass=mass)[0]) == 1
    detections, watch = _run(iiwa_desc, iiwa, announce=True, release=True, change=change, seconds=1.6, mass=mass)
    assert detections == [] and not watch.learning and watch.scale() == 1.0


@pytest.mark.parametrize("release", [False, True])
def test_mujoco_contact_right_after_an_announcement_is_detected(iiwa_desc, iiwa, release):
    """The contact 20 ms after the payload change (the residual still settling): detected within 15 ms."""
    detections, _ = _run(iiwa_desc, iiwa, announce=True, release=release, contact=0.32, seconds=0.6)
    assert len(detections) == 1 and 0.32 < detections[0] < 0.32 + 0.015, detections


def test_a_collision_detected_in_the_window_is_not_learnt_one_from_before_is(iiwa):
    """A contact detected inside an announced window is beyond what a payload explains: not learnt as payload.
    A collision detected before (an unannounced grasp when the sampler starts) is the load the fit must learn."""
    tau = iiwa.with_payload(BodyInertia(2.0, np.array([0.0, 0.0, 0.05]), np.eye(3) * 1e-3)).gravity(Q0)
    z = np.zeros(7)
    for announce, detected, learnt in ((False, -1.0, True), (True, 0.0, False), (True, -1.0, True)):
        watch = PayloadWatch(iiwa, 6.0, WatchConfig(window=1.0))
        watch.set_sampling(True)
        if announce:
            watch.announce(GRASP)
            watch.explain(0.0, Q0, np.zeros(7), None)  # the first sample opens the window at t = 0
        fits = [watch.update(k * 1e-3, Q0, z, tau, detected=detected).fit for k in range(100)]
        assert any(f is not None for f in fits) is learnt, (announce, detected)


def test_the_wide_bound_after_a_refit_outlasts_a_stream_gap(iiwa):
    """After a provisional refit the residual converges to the new model in ~5/K_I s of samples; a stream gap
    holds it (no convergence), so the bound before the refit still applies after the gap."""
    tau = iiwa.with_payload(BodyInertia(3.0, np.array([0.03, -0.02, 0.11]), np.eye(3) * 1e-2)).gravity(Q0)
    z = np.zeros(7)
    scales = {}
    for gap in (0.0, 0.2):
        watch = PayloadWatch(iiwa, 6.0)
        watch.set_sampling(True)
        k = 0
        while watch.update(k * 1e-3, Q0, z, tau, settle=0.033).fit is None:  # the first rest pose: a refit
            k += 1
        t = k * 1e-3 + gap
        for _ in range(3):  # 3 samples after the refit (and after the gap)
            t += 1e-3
            scales[gap] = watch.update(t, Q0, z, tau, settle=0.033).scale
        if gap == 0.0:
            for _ in range(40):  # 40 ms of samples: converged, the posterior's bound
                t += 1e-3
                scales["settled"] = watch.update(t, Q0, z, tau, settle=0.033).scale
    assert np.max(scales[0.0]) > 5 * np.max(scales["settled"])
    np.testing.assert_allclose(scales[0.2], scales[0.0])
