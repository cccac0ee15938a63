"""Payload lost, not a collision (collision/payload_loss.py): the monitor carries a payload that drops out of
the gripper, or the arm is hit while carrying it. Reference: the MuJoCo arm (3 % model error, 0.1 N m noise),
whose payload is detached or pushed by an engine we did not write; the monitor runs its node defaults."""

import numpy as np
import pytest

from payload_estimation.collision.detector import CollisionEvent
from payload_estimation.collision.monitor import CollisionMonitor, MonitorConfig
from payload_estimation.collision.payload_loss import (
    COLLISION,
    LOST,
    LossConfig,
    PayloadLossClassifier,
    PayloadLossError,
    match_payload_loss,
)
from payload_estimation.model.dynamics import RigidBodyDynamics
from payload_estimation.model.parameters import BodyInertia
from payload_estimation.model.robot_file import load_robot
from payload_estimation.sim import SensorConfig, SimConfig, SimulatedArm

Q0 = np.radians([10, 35, -10, -75, 15, 45, 0])
MOVE = np.radians([40, -15, 20, 25, -30, 30, 20])
BOX = BodyInertia(3.0, np.array([0.02, -0.03, 0.08]), np.diag([0.012, 0.009, 0.006]))
GRAVITY_STD = np.array([0.01, 0.002, 0.002, 0.003])  # kg, kg m: a converged estimate's σ


@pytest.fixture(scope="module")
def iiwa():
    return RigidBodyDynamics(load_robot("iiwa14"))


def _run(dyn, *, event: str, at: float, move: bool, seed: int = 0, link: str = "link_5",
         force=(0.0, 40.0, 0.0), seconds: float = 0.2, body: BodyInertia = BOX, config: LossConfig | None = None):
    """The arm carries BOX (the monitor knows it); at ``at`` s the payload drops or a 40 N contact starts.
    Returns (verdicts, detection times, event time)."""
    arm = SimulatedArm(dyn.desc, SimConfig(seed=seed, model_error=0.03, sensor=SensorConfig(noise_std=0.1)))
    arm.attach_payload(body)
    arm.reset(Q0)
    mon = CollisionMonitor(dyn, MonitorConfig(contact=None))
    mon.set_payload(body)
    loss = PayloadLossClassifier(dyn, config)
    loss.carried(body, GRAVITY_STD)
    if move:
        arm.set_trajectory([(2.0, Q0 + MOVE, None)])
    verdicts, detections, t_event = [], [], None
    for k in range(round((at + seconds) * 1000)):
        if k == round(at * 1000):
            t_event = arm.time
            if event == "drop":
                arm.detach_payload()
            else:
                arm.apply_contact(link, np.array(force), None, 0.3)
        arm.step(1)
        s = arm.state()
        step = mon.update(s.t, s.q, s.dq, s.tau)
        if step.event is not None and step.event.active:
            detections.append(step.event.detection_time)
        v = loss.update(s.t, s.q, s.dq, step.residual, mon.detector.current)
        if v is not None:
            verdicts.append(v)
    return verdicts, detections, t_event


@pytest.mark.parametrize("move", [False, True], ids=["at rest", "during a move"])
def test_a_dropped_payload_is_reported_lost_within_100_ms(iiwa, move):
    verdicts, detections, t_drop = _run(iiwa, event="drop", at=1.0, move=move)
    assert len(detections) == 1 and detections[0] > t_drop  # no false alarm before the drop
    assert len(verdicts) == 1
    v = verdicts[0]
    assert v.verdict == LOST and v.lost
    assert v.time - t_drop <= 0.1
    assert 0.5 * BOX.mass <= v.lost_mass <= BOX.mass
    assert "payload lost" in v.reason and "released" in v.reason


@pytest.mark.parametrize("link,force", [("link_5", (0.0, 40.0, 0.0)), ("link_7", (30.0, 0.0, -27.0)),
                                        ("link_4", (-25.0, -25.0, 20.0))])
def test_a_contact_while_carrying_is_still_a_collision(iiwa, link, force):
    verdicts, detections, t_contact = _run(iiwa, event="contact", at=0.8, move=True, link=link, force=force)
    assert detections and detections[0] > t_contact
    assert [v.verdict for v in verdicts] == [COLLISION]
    assert verdicts[0].time - detections[0] <= 0.06


LIGHT = BodyInertia(0.6, np.array([0.01, 0.02, 0.06]), np.diag([0.002, 0.002, 0.001]))


def test_a_drop_just_above_the_thresholds_is_still_a_loss(iiwa):
    """A payload whose torque barely exceeds the monitor's 6 N m: the residual rises with 1/K_I and crosses the
    threshold ~25 ms after the drop. The step is measured from before the rise, not from 10 ms before the crossing
    (when the residual had already risen most of the way: 5 % of the payload's torque was left, a collision)."""
    unit = np.concatenate([[1.0], BOX.com])
    mass = 5.2 / np.max(np.abs(iiwa.payload_gravity_regressor(Q0) @ unit))  # 5.2 N m; the model error does the rest
    body = BodyInertia(mass, BOX.com, BOX.inertia_com * mass / BOX.mass)
    verdicts, detections, t_drop = _run(iiwa, event="drop", at=1.0, move=False, body=body)
    assert len(detections) == 1 and detections[0] - t_drop > 0.015  # the slow crossing this test is about
    assert [v.verdict for v in verdicts] == [LOST] and verdicts[0].time - t_drop <= 0.1
    assert verdicts[0].fraction > 0.8


@pytest.mark.parametrize("move", [False, True], ids=["at rest", "during a move"])
def test_a_light_payload_below_the_thresholds_is_reported_lost_by_the_watch(iiwa, move):
    # 0.6 kg: its torque stays below the monitor's 6 N m, the detector never fires; the watch (opt-in) does
    verdicts, detections, t_drop = _run(iiwa, event="drop", at=1.2, move=move, body=LIGHT, seconds=0.3)
    assert detections == [] and verdicts == []  # without the watch: nothing
    verdicts, detections, t_drop = _run(iiwa, event="drop", at=1.2, move=move, body=LIGHT, seconds=0.3,
                                        config=LossConfig(watch=True))
    assert detections == [] and len(verdicts) == 1
    v = verdicts[0]
    assert v.lost and t_drop < v.time <= t_drop + 0.1 and 0.8 * LIGHT.mass <= v.lost_mass <= LIGHT.mass


def test_the_watch_does_not_call_a_move_or_a_contact_a_loss(iiwa):
    verdicts, detections, t_contact = _run(iiwa, event="contact", at=1.5, move=True, config=LossConfig(watch=True))
    assert [v.verdict for v in verdicts] == [COLLISION] and verdicts[0].time > t_contact


def test_the_watch_ignores_the_residual_converging_to_a_newly_carried_payload(iiwa):
    # the monitor learns the payload it already holds (an estimate arrives): its residual steps back by the
    # payload's torque over 5/K_I, exactly like a loss; the watch must not call that a loss
    arm = SimulatedArm(iiwa.desc, SimConfig(seed=3, model_error=0.03, sensor=SensorConfig(noise_std=0.1)))
    arm.attach_payload(LIGHT)
    arm.reset(Q0)
    mon = CollisionMonitor(iiwa, MonitorConfig(contact=None))
    loss = PayloadLossClassifier(iiwa, LossConfig(watch=True))
    verdicts = []
    for k in range(700):
        if k == 300:
            mon.set_payload(LIGHT)
            loss.carried(LIGHT, GRAVITY_STD)
        arm.step(1)
        s = arm.state()
        step = mon.update(s.t, s.q, s.dq, s.tau)
        verdicts.append(loss.update(s.t, s.q, s.dq, step.residual, mon.detector.current))
    assert [v for v in verdicts if v is not None] == []


def test_with_nothing_carried_every_event_is_a_collision(iiwa):
    loss = PayloadLossClassifier(iiwa)
    loss.carried(BodyInertia(0.0, np.zeros(3), np.zeros((3, 3))))
    assert loss.body is None
    event = CollisionEvent(0.5, 0.503, np.full(7, 8.0), 8.0, 1, 2, "link_2", (1,))
    assert loss.update(0.50, Q0, np.zeros(7), np.zeros(7), None) is None
    v = loss.update(0.503, Q0, np.zeros(7), np.full(7, 8.0), event)
    assert v.verdict == COLLISION and not v.lost
    assert loss.update(0.504, Q0, np.zeros(7), np.full(7, 8.0), event) is None  # one verdict per event
    with pytest.raises(PayloadLossError, match="4 standard deviations"):
        loss.carried(BOX, [0.1, 0.1])


def test_match_is_the_fraction_of_the_payload_torque_and_its_mismatch():
    torque = np.array([0.0, 20.0, -5.0, 10.0, 1.0, 2.0, 0.0])
    zero = np.zeros(7)
    m = match_payload_loss(0.6 * torque, torque, zero, np.full(7, 0.5))
    assert m.fraction == pytest.approx(0.6) and m.mismatch < 1e-9
    other = np.array([8.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0])  # a torque the payload cannot produce (joint 1)
    m = match_payload_loss(0.6 * torque + other, torque, zero, np.full(7, 0.5))
    assert m.joint == 0 and m.mismatch > 1
    assert match_payload_loss(-torque, torque, zero, np.full(7, 0.5)).fraction == 0.0  # a gained load: no loss


def test_config_is_checked():
    with pytest.raises(PayloadLossError, match="confirm"):
        LossConfig(confirm=0.1, decide_within=0.05)
