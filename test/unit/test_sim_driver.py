"""sim_node's rules without ROS (sim.driver, sim.links): parameter mapping and start pose, link names, contacts
in link axes now or at a stamp, stream stamps and faults, real-time pacing. References: pinocchio
(RigidBodyDynamics), the MuJoCo arm's own time, hand-computed stamps."""

import numpy as np
import pytest
from data_paths import urdf

from payload_estimation.collision.contact import ContactLocator
from payload_estimation.collision.geometry import capsule_geometry, push_point
from payload_estimation.errors import PayloadEstimationError
from payload_estimation.model.dynamics import RigidBodyDynamics
from payload_estimation.model.parameters import BodyInertia
from payload_estimation.model.robot_file import load_robot
from payload_estimation.model.urdf import load_urdf, to_urdf
from payload_estimation.ros.sim_node import PARAMS
from payload_estimation.sim import SimDriver, UnknownLinkError, driver_config, link_index, link_names, start_pose
from payload_estimation.sim.driver import FAULT_FUTURE_S, FAULT_GAP_S, START_POSES_DEG, Contact, Pacer, StreamStamps

DEFAULTS = {p.name: p.default for p in PARAMS.params}
DATA = urdf("iiwa14").parents[1]


def values(**changes):
    return {**DEFAULTS, **changes}


@pytest.fixture(scope="module")
def lwr4():
    return load_robot("lwr4")


# --- link names ------------------------------------------------------------------------------------------
def test_link_names_are_the_models_and_link_k_stays_accepted(lwr4):
    assert link_names(lwr4) == tuple(f"lwr4_dh_frame_{k}" for k in range(1, 8))
    lbr = load_robot(urdf("iiwa14"))
    assert link_names(lbr) == lbr.link_frame_names and link_names(lbr)[4] == "lbr_link_5"
    assert link_names(load_urdf(to_urdf(lwr4))) == tuple(f"link_{k}" for k in range(1, 8))  # the URDF's names
    for desc in (lwr4, lbr):
        for k, name in enumerate(link_names(desc), 1):
            assert link_index(desc, name) == k and link_index(desc, f"link_{k}") == k


@pytest.mark.parametrize("name", ["tool0", "link_0", "link_8", "link_04", "lwr4_dh_frame_8", ""])
def test_an_unknown_link_is_refused_naming_the_accepted_ones(lwr4, name):
    with pytest.raises(UnknownLinkError) as err:
        link_index(lwr4, name)
    msg = str(err.value)
    assert f"'{name}'" in msg and all(n in msg for n in link_names(lwr4)) and "link_1..link_7" in msg
    assert isinstance(err.value, PayloadEstimationError)


def test_the_link_a_contact_estimate_names_is_the_link_pushed(lwr4):
    """The name the contact locator reports with the model's names maps back to its link number, and a push on
    link 4 (observable from 4 joints) is reported on lwr4_dh_frame_4."""
    drv = SimDriver(lwr4, driver_config(values(contact_duration=10.0), lwr4))
    dyn = RigidBodyDynamics(lwr4)
    locator = ContactLocator(dyn, link_names=link_names(lwr4))
    for k in (4, 7):
        s0, _ = drv.advance()
        force = np.array([0.0, 40.0, 20.0])
        point = push_point(capsule_geometry(lwr4).capsules[k - 1], force)
        applied = drv.push(link_names(lwr4)[k - 1], force, np.cross(point, force))
        s1, _ = drv.advance()
        est = locator.locate(s1.q, dyn.gravity(s1.q) - s1.tau)  # tau_ext = g - tau_J at rest
        assert isinstance(applied, Contact) and applied.link == k
        assert est.link > 0 and link_index(lwr4, est.link_name) == est.link
        assert est.link != k or est.link_name == link_names(lwr4)[k - 1]
        if k == 4:
            assert est.link_name == "lwr4_dh_frame_4"
        drv.arm.clear_contacts()


# --- parameter mapping and start pose ----------------------------------------------------------------------
@pytest.mark.parametrize("robot", ["lwr4", "iiwa14"])
def test_default_start_is_the_documented_bent_pose_where_the_payload_shows(robot):
    desc = load_robot(robot)
    cfg = driver_config(values(), desc)
    np.testing.assert_allclose(cfg.q0, np.radians(START_POSES_DEG[robot]))
    assert "documented start pose" in cfg.start
    drv = SimDriver(desc, cfg)
    np.testing.assert_allclose(drv.arm.state().q, cfg.q0, atol=1e-12)
    # why: 1 kg on the flange axis changes the torques at the start pose, not stretched up (pinocchio)
    body = BodyInertia(1.0, np.array([0.0, 0.0, 0.1]), np.eye(3) * 1e-3)

    def payload_torque(q):
        return RigidBodyDynamics(desc, body).gravity(q) - RigidBodyDynamics(desc).gravity(q)

    assert np.max(np.abs(payload_torque(np.zeros(desc.n)))) < 1e-9
    assert np.max(np.abs(payload_torque(cfg.q0))) > 2.0


def test_start_pose_of_other_robots():
    fr3 = load_robot(urdf("fr3"))  # 7 joints, another name: the iiwa14 pose fits its limits
    q, what, bent = start_pose(fr3)
    np.testing.assert_allclose(q, np.radians(START_POSES_DEG["iiwa14"]))
    assert bent and not driver_config(values(), fr3).start_warning
    three = load_robot(DATA / "spatial3r.yaml")  # no documented pose: zeros clipped, and it says so
    q, what, bent = start_pose(three)
    lim = three.limits.position
    np.testing.assert_allclose(q, np.clip(np.zeros(3), lim[:, 0], lim[:, 1]))
    assert not bent and "no documented start pose" in what and "initial_positions" in what
    assert driver_config(values(), three).start_warning == what
    assert not driver_config(values(initial_positions=[0.1, 0.2, 0.3]), three).start_warning


def test_parameter_mapping(lwr4):
    q0 = [0.0] * 7  # all zeros given explicitly: honoured (only the one-value default means the start pose)
    cfg = driver_config(values(initial_positions=q0, rate_hz=250.0, dt=0.001, clock_rate_hz=100.0,
                               noise_std=[0.1], offset=[0.0, 0.5, 0, 0, 0, 0, 0], payload_attached=True,
                               payload_mass=2.0, real_time_factor=0.0, contact_duration=0.5, seed=4), lwr4)
    np.testing.assert_array_equal(cfg.q0, np.zeros(7))
    assert cfg.steps_per_message == 4 and cfg.clock_period == pytest.approx(0.01) and cfg.real_time_factor == 0.0
    assert cfg.contact_duration == 0.5 and cfg.sim.seed == 4 and cfg.payload.mass == 2.0
    np.testing.assert_allclose(cfg.sim.sensor.noise_std, np.full(7, 0.1))
    assert cfg.sim.sensor.offset[1] == 0.5 and cfg.joint_names == lwr4.joint_names
    assert driver_config(values(), lwr4).payload is None
    with pytest.raises(PayloadEstimationError, match="joint_names: need 7 distinct names"):
        driver_config(values(joint_names=["a", "a", "b", "c", "d", "e", "f"]), lwr4)
    with pytest.raises(PayloadEstimationError, match="payload_com"):
        driver_config(values(payload_com=[0.0, 0.1]), lwr4)
    with pytest.raises(PayloadEstimationError, match="parameter 'offset'"):
        driver_config(values(offset=[0.0, 0.5]), lwr4)


def test_every_parameter_reaches_the_driver_or_is_the_nodes(lwr4):
    """Each table parameter changes what driver_config returns, except the robot model source (the node's)."""
    node_only = {"robot", "base_link", "tip_link"}
    changed = {"joint_names": [f"j{k}" for k in range(7)], "rate_hz": 500.0, "clock_rate_hz": 100.0,
               "real_time_factor": 2.0, "dt": 0.002, "noise_std": [0.2], "offset": [0.3], "lowpass_hz": 10.0,
               "viscous": [0.1], "coulomb": [0.1], "sensor_sees_friction": True, "seed": 5, "model_error": 0.1,
               "initial_positions": [0.1] * 7, "payload_mass": 2.0, "payload_com": [0.0, 0.0, 0.1],
               "payload_inertia": [2e-3, 0.0, 0.0, 2e-3, 0.0, 2e-3], "payload_attached": False,
               "contact_duration": 0.5}
    assert set(changed) | node_only == set(DEFAULTS)
    base = repr(driver_config(values(payload_attached=True), lwr4))
    for name, value in changed.items():
        assert repr(driver_config(values(**{"payload_attached": True, name: value}), lwr4)) != base, name


# --- contacts ------------------------------------------------------------------------------------------------
def test_a_wrench_in_link_axes_changes_the_torque_by_the_jacobian(lwr4):
    """Applied now: once the arm is back at rest (integral action, 3 s) the measured torque is
    g(q) - J^T R f - J_w^T R mu (pinocchio), for the model's name and for link_k alike."""
    dyn = RigidBodyDynamics(lwr4)
    f, mu = np.array([5.0, -10.0, 3.0]), np.array([0.2, 0.0, -0.4])
    for name in ("lwr4_dh_frame_4", "link_4"):
        drv = SimDriver(lwr4, driver_config(values(contact_duration=10.0, rate_hz=100.0), lwr4))
        s0, _ = drv.advance()
        applied = drv.push(name, f, mu, at=0.0)
        assert isinstance(applied, Contact) and applied.at == pytest.approx(s0.t) and applied.name == name
        for _ in range(300):
            s, _ = drv.advance()
        r = dyn.forward_kinematics(s.q, "link_4")[:3, :3]
        jac = dyn.frame_jacobian(s.q, "link_4")
        expected = dyn.gravity(s.q) - jac[:3].T @ (r @ f) - jac[3:].T @ (r @ mu)
        np.testing.assert_allclose(s.tau, expected, atol=1e-5)
        assert np.max(np.abs(s.tau - dyn.gravity(s.q))) > 1.0
    with pytest.raises(UnknownLinkError):
        drv.push("tool0", f, mu)


def test_a_wrench_stamped_ahead_is_applied_at_its_time(lwr4):
    drv = SimDriver(lwr4, driver_config(values(rate_hz=250.0), lwr4))  # 4 steps of 1 ms per message
    t0 = drv.arm.time
    at = t0 + 0.0105
    assert drv.push("lwr4_dh_frame_6", [0.0, 0.0, 1.0], [0.0, 0.0, 0.0], at=at) is None
    assert drv.pending_contacts == 1
    times, applied = [], []
    while not applied:
        s, applied = drv.advance()
        times.append(s.t)
    assert times[-2] < at <= times[-1] == pytest.approx(t0 + 0.012)  # the first message at or after its stamp
    assert applied[0].at == pytest.approx(times[-1]) and applied[0].link == 6 and drv.pending_contacts == 0


# --- stamps, faults and pacing ----------------------------------------------------------------------------
def test_stream_stamps_clock_ticks_and_faults():
    st = StreamStamps(clock_period=0.004)
    out = [st.next(t, 0.0) for t in np.arange(1, 11) * 0.001]
    assert [o.clock for o in out] == [True, False, False, False, True, False, False, False, True, False]
    assert [o.t for o in out] == pytest.approx(np.arange(1, 11) * 0.001)
    st.future_stamp()
    ahead = st.next(0.011, 0.0)
    assert ahead.t == pytest.approx(0.011 + FAULT_FUTURE_S) and ahead.clock
    assert st.next(0.012, 0.0).t == pytest.approx(0.012)  # once only
    st.gap(now_wall=5.0)
    assert st.next(0.013, 5.0) is None and st.next(0.014, 5.0 + 0.99 * FAULT_GAP_S) is None
    assert st.next(0.015, 5.0 + FAULT_GAP_S).t == pytest.approx(0.015)
    st.restart(0.020)
    again = st.next(0.021, 7.0)
    assert again.t == pytest.approx(0.001) and again.clock  # starts over from 0, with a clock tick


def test_driver_faults_by_name(lwr4):
    drv = SimDriver(lwr4, driver_config(values(), lwr4))
    drv.advance()
    assert "start over" in drv.inject_fault("restart") and drv.stamps.origin == drv.arm.time
    with pytest.raises(PayloadEstimationError, match="unknown stream fault 'jump'"):
        drv.inject_fault("jump")


def test_pacer_keeps_real_time_and_restarts_after_a_stall():
    p = Pacer(real_time_factor=2.0)
    assert p.pace(100.0, 1.0) == (0.0, "")  # the first message starts the pacing
    wait, warning = p.pace(100.1, 1.4)  # 0.4 s of sim time = 0.2 s wall: 0.1 s early
    assert wait == pytest.approx(0.1) and not warning
    assert p.pace(100.3, 1.4) == (0.0, "")  # 0.1 s late: catches up, no restart
    wait, warning = p.pace(101.0, 1.5)  # 0.75 s behind after 1 s: restart, too early to warn
    assert wait == 0.0 and not warning and p.restarts == 1
    wait, warning = p.pace(104.0, 2.5)  # 2.5 s behind over 3 s: restart and say so
    assert p.restarts == 2 and "fell 2.50 s behind real time" in warning
    assert "0.33 achieved over the last 3.0 s" in warning
    assert p.pace(104.1, 2.7) == (pytest.approx(0.0), "")  # paced from the restart on
    assert Pacer(0.0).pace(1.0, 5.0) == (0.0, "")  # as fast as possible
