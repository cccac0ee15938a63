"""The collision monitor's rules (collision.supervisor) on the MuJoCo arm, without ROS, and the node's parameter map.

References: the simulator's truth (contacts and payloads MuJoCo applies, not the model), the payload layer's
limit check, and the node's parameter table for the defaults.
"""

import numpy as np
import pytest

from payload_estimation.collision.monitor import MonitorConfig
from payload_estimation.collision.reaction import Action
from payload_estimation.collision.supervisor import EstimateRefused, MonitorSupervisor, SupervisorConfig
from payload_estimation.errors import PayloadEstimationError
from payload_estimation.model.dynamics import RigidBodyDynamics
from payload_estimation.model.parameters import BodyInertia
from payload_estimation.model.robot_file import load_robot
from payload_estimation.payload.estimate import PayloadEstimate
from payload_estimation.payload.limits import check_payload
from payload_estimation.payload.result import PayloadLimits, PayloadRejected
from payload_estimation.sim import SensorConfig, SimConfig, SimulatedArm

Q0 = np.radians([10, 40, -5, -70, 15, 50, 20])
BODY = BodyInertia(3.0, np.array([0.03, -0.02, 0.11]), np.diag([0.01, 0.01, 0.005]))
CONFIG = MonitorConfig(contact=None, quadrature="hold")


@pytest.fixture(scope="module")
def desc():
    return load_robot("lwr4")


def supervisor(desc, **rules) -> MonitorSupervisor:
    return MonitorSupervisor(RigidBodyDynamics(desc), CONFIG, SupervisorConfig(**rules),
                             frame=desc.payload_frame_name, limit_check=check_payload)


def arm_at(desc, q=Q0, noise=0.02) -> SimulatedArm:
    arm = SimulatedArm(desc, SimConfig(seed=1, sensor=SensorConfig(noise_std=noise)))
    arm.reset(q)
    return arm


def feed(arm: SimulatedArm, sup: MonitorSupervisor, seconds: float) -> list:
    """Step the simulated arm and the supervisor together; (t, step, thresholds, |residual|) per sample."""
    out = []
    for s in arm.run(seconds):
        st = sup.update(s.t, s.q, s.dq, s.tau)
        out.append((s.t, st, sup.mon.detector.thresholds.copy(), np.abs(st.monitor.residual)))
    return out


def stop_on_a_push(desc, sup: MonitorSupervisor, arm: SimulatedArm, plan_t, plan_q) -> tuple[float, float]:
    """Command a trajectory, push link 4 (MuJoCo) until the monitor stops the arm: (commanded at, stopped at) s."""
    feed(arm, sup, 0.3)
    t_cmd = arm.time
    sup.commanded(t_cmd, plan_t, plan_q)
    feed(arm, sup, 0.1)  # the arm is on its way (the points before 0.1 s are passed)
    arm.apply_contact("link_4", [0.0, 40.0, 0.0], duration=0.3)
    for t, st, _, _ in feed(arm, sup, 0.3):
        if st.action is Action.HOLD_POSITION:
            assert sup.stop(t)
            return t_cmd, t
    raise AssertionError("the push was not detected")


PLAN_T, PLAN_Q = np.array([0.05, 0.1, 1.0, 1.5]), Q0 + np.radians([[0.5] * 7, [1.0] * 7, [2.0] * 7, [3.0] * 7])


def test_the_interrupted_trajectory_is_resumed_after_the_release_with_what_was_left(desc):
    sup, arm = supervisor(desc, resume_delay=0.3), arm_at(desc)
    t_cmd, t_stop = stop_on_a_push(desc, sup, arm, PLAN_T, PLAN_Q)
    resumed = [(t, st) for t, st, _, _ in feed(arm, sup, 1.5) if st.action is Action.RESUME]
    assert len(resumed) == 1 and resumed[0][0] - t_stop >= 0.3  # after the release and resume_delay
    c = sup.resume(resumed[0][0], first_segment=lambda q, v: 0.7)
    keep = PLAN_T > t_stop - t_cmd
    assert 0 < keep.sum() < len(PLAN_T)  # the push came mid-trajectory
    np.testing.assert_allclose(c.q, PLAN_Q[keep])  # what was left, nothing already passed
    left = PLAN_T[keep] - (t_stop - t_cmd)
    np.testing.assert_allclose(c.t, left - left[0] + max(left[0], 0.7))  # the first segment no faster than asked
    assert c.velocities is None  # none were commanded
    assert sup.resume(resumed[0][0], first_segment=lambda q, v: 0.7) is None  # resumed once


def test_a_new_robot_description_during_a_collision_keeps_it_one_event_until_its_release(desc):
    """The node builds a new supervisor for a re-published robot_description and ``adopt``s the old one. A collision
    active then stays that one event while the contact lasts (no second detection), the arm stays stopped, and the
    release is reported when the contact ends: the reported flag never sticks at True (chaos seed 11: it did, the
    arm resumed, and the sampler refused every run after it)."""
    sup, arm = supervisor(desc, resume_delay=0.3), arm_at(desc)
    stop_on_a_push(desc, sup, arm, PLAN_T, PLAN_Q)  # 40 N on link 4 for 0.3 s, stopped
    assert sup.collision and sup.mon.detector.in_collision
    new = supervisor(desc, resume_delay=0.3)
    new.adopt(sup)
    steps = [st for _, st, _, _ in feed(arm, new, 1.5)]
    reports = [r for st in steps for r in st.reports]
    assert [(r.event.active, r.changed) for r in reports] == [(False, True)]  # its release, once
    assert not new.collision and len(new.mon.detector.events) == len(sup.mon.detector.events) + 1
    actions = [st.action for st in steps if st.action is not Action.NOTHING]
    assert actions == [Action.RESUME]  # after the release, not at the adoption


def test_the_status_shows_the_thresholds_in_use_and_keeps_the_last_collision(desc):
    """What a user asked the status for: the thresholds in use per joint, the collision in progress counted, and the
    last collision still shown after its release (its own key: link, peak and detection_time are the one in
    progress, which status readers rely on)."""
    from payload_estimation.collision.supervisor import status_values

    sup, arm = supervisor(desc, resume_delay=0.3), arm_at(desc)
    assert status_values(sup, "stop_and_resume")["thresholds"] == [6.0] * 7
    stop_on_a_push(desc, sup, arm, PLAN_T, PLAN_Q)
    during = status_values(sup, "stop_and_resume")
    assert during["events"] == 1 and during["link"] and during["peak"] > 6.0
    feed(arm, sup, 1.5)
    after = status_values(sup, "stop_and_resume")
    assert not sup.collision and after["events"] == 1 and "link" not in after  # the keys of one in progress
    assert after["last_collision"].startswith(f"{during['link']}, peak ") and "released at t=" in after[
        "last_collision"]
    sup.mon.detector.scale_thresholds(1.5)
    assert status_values(sup, "stop_and_resume")["thresholds"] == [9.0] * 7


def test_a_robot_description_of_another_arm_is_refused_by_a_running_monitor(desc):
    """A description with another number of joints (here iiwa14's chain cut at link 6) is refused whole: the running
    supervisor keeps its arm, and the reason says what to do."""
    from data_paths import urdf

    six = load_robot(str(urdf("iiwa14")), tip_link="lbr_link_6")
    assert six.n == 6
    sup = supervisor(desc)
    feed(arm_at(desc), sup, 0.05)
    with pytest.raises(PayloadEstimationError, match=r"an arm of 6 joints .* watching one of 7 .* restart "
                                                     "collision_monitor"):
        supervisor(six).adopt(sup)


def test_a_newer_command_while_stopped_is_not_overridden_by_the_old_remainder(desc):
    sup, arm = supervisor(desc, resume_delay=0.3), arm_at(desc)
    _, t_stop = stop_on_a_push(desc, sup, arm, PLAN_T, PLAN_Q)
    assert sup.commanded(t_stop + 0.1, np.array([0.4]), Q0[None, :])  # e.g. the sampler's next move
    resumed = [t for t, st, _, _ in feed(arm, sup, 1.5) if st.action is Action.RESUME]
    assert len(resumed) == 1  # the reaction still ends its stop ...
    assert sup.resume(resumed[0], first_segment=lambda q, v: 0.7) is None  # ... but there is nothing stale to resume


def test_while_sampling_a_stop_keeps_no_remainder(desc):
    sup, arm = supervisor(desc, resume_delay=0.3), arm_at(desc)
    sup.set_sampling(True)
    feed(arm, sup, 0.3)
    sup.commanded(arm.time, np.array([0.5, 1.0]), Q0 + np.radians([[1.0] * 7, [2.0] * 7]))
    assert not sup.stop(arm.time + 0.2)  # the sampler commands its own next move after a collision


def test_the_samplers_trajectory_is_never_resumed_even_when_it_samples_the_unloaded_arm(desc):
    """Chaos seed 2 under CI: a collision during ~/record_reference (the unloaded arm: the sampler's active flag is
    not raised) kept the excitation's remainder, and the monitor resumed it after the sampler had aborted."""
    sup, arm = supervisor(desc, resume_delay=0.3), arm_at(desc)
    feed(arm, sup, 0.3)
    sup.commanded(arm.time, PLAN_T, PLAN_Q, resumable=False)
    assert not sup.sampling and not sup.stop(arm.time + 0.2)
    sup.commanded(arm.time, PLAN_T, PLAN_Q)  # the same points from the user: resumed
    assert sup.stop(arm.time + 0.2)


@pytest.mark.parametrize("mass, com, why", [(20.0, [0.0, 0.0, 0.1], "exceeds the limit of 15"),
                                            (2.0, [0.0, 0.0, 0.6], "beyond max_com_radius 0.5")])
def test_an_implausible_estimate_is_refused_with_the_reason_and_the_payload_kept(desc, mass, com, why):
    sup, arm = supervisor(desc), arm_at(desc)
    arm.attach_payload(BODY)
    feed(arm, sup, 0.3)
    good = PayloadEstimate.from_body(BODY, desc.payload_frame_name)
    sup.estimate(good, desc.payload_frame_name)
    bad = PayloadEstimate(mass, np.array(com), None, frame=desc.payload_frame_name, method="message")
    with pytest.raises(EstimateRefused, match=why):
        sup.estimate(bad, desc.payload_frame_name)
    with pytest.raises(PayloadRejected, match=why):  # the payload layer's own rule, with the node's limits
        check_payload(mass, np.array(com), None, 15.0, 0.5)
    assert sup.payload is good and sup.mon.observer.payload.mass == BODY.mass
    # the kept model is the right one: the residual of the loaded arm at rest stays near zero (MuJoCo truth)
    assert max(r.max() for *_, r in feed(arm, sup, 0.3)[-50:]) < 0.5


def test_a_sampling_run_that_replaces_an_estimate_by_what_it_learns_says_so(desc):
    """A run learns the load at its rest poses: its first provisional fit replaces the estimate in use even when
    the masses agree within the quiet-refit band (3.04 against 3.00 kg was silent for a user whose run then aborted),
    and the sampler going idle without a new estimate says which payload the observer keeps."""
    from payload_estimation.collision.supervisor import MonitorInputs

    sup, arm = supervisor(desc), arm_at(desc)
    arm.attach_payload(BODY)
    feed(arm, sup, 0.3)
    sup.estimate(PayloadEstimate.from_body(BODY, desc.payload_frame_name), desc.payload_frame_name)
    inputs = MonitorInputs()
    assert inputs.set_sampling(sup, True) == "payload sampler active"
    notes = [text for _, st, _, _ in feed(arm, sup, 1.0) for _, text in st.notes]
    assert any(t.startswith("observer model: provisional (1 rest pose(s)) payload ") for t in notes), notes
    assert abs(sup.payload.mass - BODY.mass) < 0.05  # within the quiet band of the estimate, and still said
    note = inputs.set_sampling(sup, False)
    assert note.startswith("payload sampler idle; the observer keeps the payload learnt during the run, provisional")
    assert "until the next payload/estimate" in note


def test_limits_are_the_given_ones_not_the_fit_defaults(desc):
    sup = supervisor(desc, max_payload=30.0, max_com_radius=1.0)
    est = PayloadEstimate(20.0, np.array([0.0, 0.0, 0.6]), None, frame=desc.payload_frame_name, method="message")
    assert PayloadLimits().max_payload != 15.0  # the fits' defaults differ from the node's: the node's are given
    sup.estimate(est, desc.payload_frame_name)
    assert sup.payload is est
    with pytest.raises(EstimateRefused, match="not this model's payload frame"):
        sup.estimate(est, "some_other_frame")


def rest_torque(desc, body: BodyInertia | None, q=Q0) -> np.ndarray:
    """Mean measured torque (N m) of the MuJoCo arm at rest at ``q`` carrying ``body``."""
    arm = arm_at(desc, q, noise=0.0)
    if body is not None:
        arm.attach_payload(body)
    return np.mean([s.tau for s in arm.run(1.0)][-100:], axis=0)


@pytest.mark.slow
def test_provisional_thresholds_cover_the_unknown_load_and_narrow_as_it_is_learnt(desc):
    """While sampling, thresholds = factor x configured + 3 sigma of the torque of the payload not yet known:
    before any rest pose they cover the whole load MuJoCo applies; each new rest pose shrinks the fit's sigma
    and the widening with it, while the residual of the provisional model stays inside (no false collision)."""
    sup, arm = supervisor(desc), arm_at(desc)
    feed(arm, sup, 0.3)
    sup.set_sampling(True)
    arm.attach_payload(BODY)
    base, factor = np.full(desc.n, 6.0), 1.5
    load = np.abs(rest_torque(desc, BODY) - rest_torque(desc, None))  # MuJoCo: the grasped load's torque
    first = feed(arm, sup, 0.001)[0][2] - factor * base  # widening before any rest pose
    assert np.all(first >= load - 1e-6) and np.max(load) > 1.0
    poses = [Q0, Q0 + np.radians([20, -15, 10, 15, -20, 15, 0]), Q0 + np.radians([-25, 10, -15, -10, 25, -20, 0])]
    sigma, widened = [], []
    for k, q in enumerate(poses):
        if k:
            arm.set_trajectory([(1.0, q, None)])
            rows = feed(arm, sup, 1.0)
        rows = feed(arm, sup, 0.6)
        assert len(sup.watch.provisional.poses) == k + 1
        sigma.append(sup.watch.provisional.estimate.mass_std)
        widened.append(sup.watch.bound(Q0, rows[-1][0], settle=sup.settle))  # at one pose, to compare
        t, _, th, r = rows[-1]
        np.testing.assert_allclose(th, factor * base + sup.watch.bound(poses[k], t, settle=sup.settle), atol=1e-3)
        assert np.all(r < th)
    assert sigma[2] < sigma[1] < sigma[0]
    assert np.all(widened[2] <= widened[1] + 1e-9) and np.all(widened[1] <= widened[0] + 1e-9)
    assert np.max(widened[2]) < 0.5 * np.max(first)
    est = sup.watch.provisional.estimate  # the provisional payload is MuJoCo's, to the sigma it claims
    assert abs(est.mass - BODY.mass) <= 3 * est.mass_std + 0.05


def test_the_node_parameters_map_to_the_core_configs():
    """One table of defaults: the node's parameter values map onto MonitorConfig and SupervisorConfig, every
    parameter is either mapped or the node's own, and the core's defaults are the table's."""
    from dataclasses import fields

    from payload_estimation.collision.thresholds import THRESHOLD_MINIMUM, THRESHOLD_SAFETY
    from payload_estimation.ros.monitor_params import CALIBRATION_KEYS, MONITOR_KEYS, PARAMS, monitor_configs
    from payload_estimation.ros.node_support import ROBOT_PARAMS, STREAM_PARAMS

    defaults = {p.name: p.default for p in PARAMS.params}
    mon, rules = monitor_configs(defaults)
    assert rules == SupervisorConfig()  # the core's defaults (benches, tests) are the node's
    assert (rules.max_payload, rules.max_com_radius) == (defaults["max_payload"], defaults["max_com_radius"])
    assert (mon.gains, mon.thresholds, mon.margin, mon.n_sigma, mon.quadrature, mon.confirm_samples) == (
        defaults["gains"][0], defaults["thresholds"][0], defaults["threshold_margin"][0], defaults["n_sigma"],
        defaults["quadrature"], defaults["confirm_samples"])
    assert mon.contact is not None
    node_only = (set(ROBOT_PARAMS.by_name) | set(STREAM_PARAMS.by_name)
                 | {"dynamic_model", "residual_decimation", "torque_gain"}
                 | CALIBRATION_KEYS)
    assert (defaults["threshold_calibration_safety"], defaults["threshold_calibration_minimum"]) == (
        THRESHOLD_SAFETY, THRESHOLD_MINIMUM)  # the command's defaults
    mapped = MONITOR_KEYS | {f.name for f in fields(SupervisorConfig)}
    assert set(PARAMS.by_name) == node_only | mapped and not node_only & mapped
    given = {**defaults, "thresholds": [6.0, 7.0, 8.0, 9.0, 10.0, 11.0, 12.0], "contact_estimation": False,
             "max_payload": 3.0, "policy": "none", "sampling_threshold_factor": 2.0, "quadrature": "hold"}
    mon, rules = monitor_configs(given)
    assert mon.thresholds == (6.0, 7.0, 8.0, 9.0, 10.0, 11.0, 12.0) and mon.contact is None
    assert (rules.max_payload, rules.policy, rules.sampling_threshold_factor) == (3.0, "none", 2.0)
    assert mon.quadrature == "hold"


def test_a_sampling_run_started_in_a_release_window_follows_the_sampling_rules(desc):
    """Two arms under CI: ``~/reset`` after a run (a 0 kg estimate while carrying: a release window), the next
    object grasped and sampled within 5 s. Under the window's rules (gravity-only model, at most the mass
    released) the sampling moves read as collisions at A1 (MuJoCo: 9.1 N m); the run's start ends the window."""
    iiwa = load_robot("iiwa14")
    q0, body = np.radians([-10, 35, 5, -75, -10, 55, 15]), BodyInertia(4.0, np.array([-0.01, 0.03, 0.10]),
                                                                     np.diag([0.01, 0.01, 0.006]))
    sup = supervisor(iiwa)
    arm = SimulatedArm(iiwa, SimConfig(seed=1, model_error=0.03, sensor=SensorConfig(noise_std=0.1)))
    arm.reset(q0)
    arm.attach_payload(body)
    feed(arm, sup, 0.5)
    sup.estimate(PayloadEstimate.from_body(body, iiwa.payload_frame_name), iiwa.payload_frame_name)
    arm.detach_payload()
    feed(arm, sup, 0.3)
    sup.estimate(PayloadEstimate(0.0, np.zeros(3), None, frame=iiwa.payload_frame_name, method="reset"),
                 iiwa.payload_frame_name)
    assert sup.watch.announced is not None and sup.watch.announced.kind == "release"
    feed(arm, sup, 0.5)
    arm.attach_payload(body)  # the next object, not announced
    feed(arm, sup, 0.5)
    sup.set_sampling(True)
    assert sup.watch.announced is None and sup.watch.learning
    assert "release window ended" in sup.watch.last_change
    detections = []
    rng = np.random.default_rng(0)
    for _ in range(3):  # the sampler's moves: every joint 7 deg in 0.55 s
        arm.set_trajectory([(0.55, q0 + np.radians(7 * rng.choice([-1, 1], iiwa.n)), None)])
        detections += [t for t, st, _, _ in feed(arm, sup, 0.8)
                       if st.monitor.event is not None and st.monitor.event.active]
    assert detections == []


def test_a_stream_restart_drops_a_provisional_payload_and_keeps_the_estimate(desc):
    """Issue 47: after an aborted run the monitor kept the 1 kg it had learnt at rest, the simulator restarted with
    nothing held, and the monitor reported a contact at t = 0.04 s. A restart drops a provisional payload (learnt
    from the old stream, never confirmed) back to the last estimate's (here: unloaded) and says so; an estimate's
    payload is kept across a restart (the object is taken to be still held), and that is said too."""
    one_kg = BodyInertia(1.0, np.array([0.0, 0.0, 0.08]), np.diag([0.002, 0.002, 0.001]))
    sup, arm = supervisor(desc), arm_at(desc)
    arm.attach_payload(one_kg)
    feed(arm, sup, 0.3)
    sup.set_sampling(True)
    feed(arm, sup, 1.0)
    sup.set_sampling(False)  # the run aborted: no estimate, the provisional fit stays in use
    assert abs(sup.payload.mass - 1.0) < 0.1 and sup.payload.method.startswith("provisional")
    sup.restart()
    rows = feed(arm_at(desc), sup, 0.5)  # the simulator started over: stamps from 0, nothing held
    notes = [text for _, st, _, _ in rows for level, text in st.notes]
    assert notes[0].startswith("stream restarted: the provisional payload 0.9") and "the unloaded model" in notes[0]
    assert sup.payload is None and sup.mon.observer.payload is None
    assert not [st for _, st, _, _ in rows if st.monitor.event is not None] and not sup.collision

    est = PayloadEstimate.from_body(BODY, desc.payload_frame_name)
    sup, arm = supervisor(desc), arm_at(desc)
    arm.attach_payload(BODY)
    feed(arm, sup, 0.3)
    sup.estimate(est, desc.payload_frame_name)
    feed(arm, sup, 0.3)
    sup.restart()
    arm2 = arm_at(desc)
    arm2.attach_payload(BODY)  # a driver restart: the object is still held
    rows = feed(arm2, sup, 0.5)
    assert sup.payload is est and max(r.max() for *_, r in rows[-50:]) < 0.5
    first = rows[0][1].notes[0][1]
    assert first.startswith("stream restarted: the observer keeps the estimate in use, 3.000 kg") and "reset" in first


def test_an_effort_running_opposite_to_the_model_stops_monitoring_until_the_gain_flips_it():
    """The stream's effort is FRI's measured torque (opposite to the URDF's, lbr_fri_ros2_stack): the supervisor
    judges its sign on the observer's own gravity torque and stops monitoring with the fix in its words; with
    ``set_torque_gain(-1)`` the same stream is monitored and raises nothing (issue 45)."""
    from payload_estimation.collision.supervisor import MonitorInputs, monitor_status

    desc = load_robot("lwr4")
    dyn = RigidBodyDynamics(desc)
    q = np.radians([10, 40, -5, -70, 15, 50, 20])
    effort = -dyn.gravity(q)
    for gain in (None, -1.0):
        sup = supervisor(desc)
        if gain is not None:
            sup.set_torque_gain(np.full(desc.n, gain))
        reported = []
        for k in range(500):
            step = sup.update(k * 1e-3, q, np.zeros(desc.n), effort)
            reported += [r for r in step.reports if r.event.active]
        level, text, _ = monitor_status(sup, "stop_and_resume", MonitorInputs(), "", 0.0, False)
        if gain is None:
            assert sup.sign.fault is not None and level == 2, text
            assert "runs opposite to the robot model's joint torque on" in text and "torque_gain: [-1]" in text
            assert step.action is Action.NOTHING and not step.reports
        else:
            assert sup.sign.fault is None and level == 0 and not reported, text


def test_the_contact_estimate_carries_the_sigma_of_the_payload_in_use(desc):
    """The contact tracker's noise model holds the covariance published with the estimate the observer uses (the
    payload's error enters the contact's force range and link probability); a newer estimate keeps it until its
    own arrives (the thresholds' rule), and its own then replaces it."""
    sup = MonitorSupervisor(RigidBodyDynamics(desc), MonitorConfig(quadrature="hold"), SupervisorConfig(),
                            frame=desc.payload_frame_name, limit_check=check_payload)
    arm = arm_at(desc)
    arm.attach_payload(BODY)
    assert sup.mon.tracker is not None
    feed(arm, sup, 0.1)
    est = PayloadEstimate.from_body(BODY, desc.payload_frame_name)
    cov = np.diag([0.05, 0.004, 0.004, 0.008]) ** 2
    sup.uncertainty(est.mass, est.com, cov)
    sup.estimate(est, desc.payload_frame_name)
    feed(arm, sup, 0.01)
    np.testing.assert_allclose(sup.mon.tracker.payload_covariance, cov)
    newer = PayloadEstimate(3.2, BODY.com, None, frame=desc.payload_frame_name, method="message")
    sup.estimate(newer, desc.payload_frame_name)
    feed(arm, sup, 0.01)
    np.testing.assert_allclose(sup.mon.tracker.payload_covariance, cov)
    sup.uncertainty(newer.mass, newer.com, 4 * cov)
    feed(arm, sup, 0.01)
    np.testing.assert_allclose(sup.mon.tracker.payload_covariance, 4 * cov)
