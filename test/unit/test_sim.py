"""Simulated arm (MuJoCo) against independent references (pinocchio via RigidBodyDynamics)."""

from pathlib import Path

import numpy as np
import pytest

from payload_estimation.model.dynamics import RigidBodyDynamics
from payload_estimation.model.parameters import BodyInertia, check_consistency
from payload_estimation.model.robot_file import load_robot
from payload_estimation.model.urdf import load_urdf, to_urdf
from payload_estimation.sim import SensorConfig, SimConfig, SimulatedArm

DATA = Path(__file__).resolve().parents[1] / "data"
PAYLOAD = BodyInertia(1.7, np.array([0.03, -0.02, 0.09]), np.diag([4e-3, 5e-3, 3e-3]))


def random_q(desc, rng, shrink=0.8):
    lim = desc.limits.position
    return rng.uniform(lim[:, 0] * shrink, lim[:, 1] * shrink)


def move_duration(desc, dq, margin=1.2):
    """Shortest rest-to-rest quintic duration within the velocity limits (peak = 1.875 dq / T)."""
    return margin * float(np.max(1.875 * np.abs(dq) / desc.limits.velocity))


@pytest.fixture(scope="module", params=["lwr4", "iiwa14"])
def robot(request):
    return load_robot(request.param)


def test_mjcf_kinematics_match_pinocchio_for_dh_mdh_urdf():
    import mujoco

    lwr = load_robot("lwr4")
    descs = [lwr, load_robot(DATA / "lwr4_mdh.yaml"), load_robot(DATA / "lwr4_hand.urdf"),
             load_urdf(to_urdf(lwr))]
    rng = np.random.default_rng(3)
    for desc in descs:
        arm = SimulatedArm(desc)
        dyn = RigidBodyDynamics(desc)
        for _ in range(3):
            q = random_q(desc, rng)
            arm.reset(q)
            for k in range(desc.n):
                bid = arm.model.body(f"link_{k + 1}").id
                ref = dyn.forward_kinematics(q, f"link_{k + 1}")
                np.testing.assert_allclose(arm.data.xpos[bid], ref[:3, 3], atol=1e-12)
                np.testing.assert_allclose(arm.data.xmat[bid].reshape(3, 3), ref[:3, :3], atol=1e-12)
            sid = mujoco.mj_name2id(arm.model, mujoco.mjtObj.mjOBJ_SITE, "flange")
            np.testing.assert_allclose(arm.data.site_xpos[sid], dyn.forward_kinematics(q, "flange")[:3, 3],
                                       atol=1e-12)
            np.testing.assert_allclose(arm.state().tau, dyn.gravity(q), atol=1e-9)
        np.testing.assert_allclose(arm.model.jnt_range, desc.limits.position)


def test_static_torque_equals_true_gravity(robot):
    rng = np.random.default_rng(11)
    arm = SimulatedArm(robot, SimConfig(model_error=0.15, seed=4))
    true = RigidBodyDynamics(arm.true_description)
    nominal = RigidBodyDynamics(robot)
    for _ in range(5):
        q = random_q(robot, rng)
        arm.reset(q)
        arm.step(50)
        s = arm.state()
        np.testing.assert_allclose(s.q, q, atol=1e-12)
        np.testing.assert_allclose(s.tau, true.gravity(s.q), atol=1e-6)
        # the truth really differs from the nominal model the nodes use
        assert np.max(np.abs(s.tau - nominal.gravity(s.q))) > 0.05


def test_run_yields_one_measurement_per_physics_step(robot):
    arm = SimulatedArm(robot, SimConfig(seed=1))
    arm.reset(np.zeros(robot.n))
    t0 = arm.state().t
    states = list(arm.run(0.0104))  # rounds to 10 steps of 1 ms
    assert len(states) == 10
    np.testing.assert_allclose([s.t for s in states], t0 + arm.dt * np.arange(1, 11), atol=1e-12)
    assert states[-1].t == arm.state().t
    np.testing.assert_array_equal(states[-1].tau, arm.state().tau)


def test_payload_attach_at_run_time_then_detach(robot):
    rng = np.random.default_rng(5)
    arm = SimulatedArm(robot, SimConfig(model_error=0.1, seed=1))
    q = random_q(robot, rng)
    arm.reset(q)
    arm.attach_payload(PAYLOAD)
    assert arm.true_payload is not None and arm.true_payload.mass == PAYLOAD.mass
    arm.step(2500)  # the integral action pulls the sagging arm back; wait until it is static
    s = arm.state()
    loaded = RigidBodyDynamics(arm.true_description, PAYLOAD)
    assert np.max(np.abs(s.dq)) < 1e-6
    np.testing.assert_allclose(s.q, q, atol=1e-6)
    np.testing.assert_allclose(s.tau, loaded.gravity(s.q), atol=1e-6)
    arm.detach_payload()
    assert arm.true_payload is None
    arm.step(2500)
    s = arm.state()
    np.testing.assert_allclose(s.tau, RigidBodyDynamics(arm.true_description).gravity(s.q), atol=1e-6)
    # detached means exactly the robot alone, also right after a reset
    arm.reset(q)
    np.testing.assert_allclose(arm.state().tau, RigidBodyDynamics(arm.true_description).gravity(q), atol=1e-9)


def test_seven_degree_move_settles_and_tracks(robot):
    rng = np.random.default_rng(8)
    arm = SimulatedArm(robot, SimConfig(model_error=0.1, seed=2))
    q0 = random_q(robot, rng, 0.6)
    arm.reset(q0)
    true = RigidBodyDynamics(arm.true_description)
    worst_track = 0.0
    for j in (1, 3, 5):  # shoulder, elbow, wrist joints, +7 then back -7 deg
        for sign in (1.0, -1.0):
            target = arm.state().q.copy()
            target[j] += sign * np.deg2rad(7)
            T = move_duration(robot, target - arm.state().q)
            arm.set_trajectory([(T, target, None)])
            t_end = arm.time + T
            settled_at = None
            while arm.time < t_end + 1.0:
                arm.step()
                s = arm.state()
                worst_track = max(worst_track, np.max(np.abs(arm.desired[0] - s.q)))
                static = np.max(np.abs(s.dq)) < 1e-3 and np.max(np.abs(s.tau - true.gravity(s.q))) < 1e-3
                if arm.trajectory_done and settled_at is None and static:
                    settled_at = arm.time - t_end
                elif not static:
                    settled_at = None
            assert arm.trajectory_done
            assert settled_at is not None and settled_at < 0.5, f"joint {j}: settled after {settled_at}"
            np.testing.assert_allclose(arm.state().q, target, atol=1e-5)
    assert np.rad2deg(worst_track) < 0.5


def test_multi_point_trajectory_with_velocities_passes_waypoints():
    desc = load_robot("iiwa14")
    arm = SimulatedArm(desc)
    q0 = np.zeros(desc.n)
    arm.reset(q0)
    q1 = q0 + 0.1
    q2 = q0 + 0.2
    v1 = np.full(desc.n, 0.2)
    arm.set_trajectory([(1.0, q1, v1), (2.0, q2, None)])
    arm.step(1000)
    qd, dqd, _ = arm.desired
    np.testing.assert_allclose(qd, q1, atol=1e-9)
    np.testing.assert_allclose(dqd, v1, atol=1e-9)
    np.testing.assert_allclose(arm.state().q, q1, atol=np.deg2rad(0.05))
    arm.step(1500)
    assert arm.trajectory_done
    np.testing.assert_allclose(arm.state().q, q2, atol=1e-4)
    # hold() freezes the current position; a new trajectory replaces the old one mid-way
    arm.set_trajectory([(1.0, q0, None)])
    arm.step(300)
    arm.hold()
    q_hold = arm.state().q.copy()
    arm.step(800)
    np.testing.assert_allclose(arm.state().q, q_hold, atol=2e-3)
    np.testing.assert_allclose(arm.desired[0], q_hold)


def test_bad_trajectories_are_refused_and_change_nothing():
    desc = load_robot("lwr4")
    arm = SimulatedArm(desc)
    q = np.zeros(desc.n)
    arm.reset(q)
    arm.set_trajectory([(1.0, q + 0.05, None)])
    before = arm.desired[0].copy()
    lo, hi = desc.limits.position[:, 0], desc.limits.position[:, 1]
    over = q.copy()
    over[3] = hi[3] + 0.01
    with pytest.raises(ValueError, match="E1|A3|outside its limits"):
        arm.set_trajectory([(5.0, over, None)])
    too_fast = q.copy()
    too_fast[0] += np.deg2rad(20)
    with pytest.raises(ValueError, match="velocity limit"):
        arm.set_trajectory([(0.1, too_fast, None)])
    with pytest.raises(ValueError, match="NaN"):
        arm.set_trajectory([(1.0, np.full(desc.n, np.nan), None)])
    with pytest.raises(ValueError, match="6 positions given for 7 joints"):
        arm.set_trajectory([(1.0, q[:6], None)])
    with pytest.raises(ValueError, match="greater than the previous"):
        arm.set_trajectory([(1.0, q, None), (1.0, q, None)])
    with pytest.raises(ValueError, match="velocity"):
        arm.set_trajectory([(1.0, q, np.full(desc.n, 10.0))])
    with pytest.raises(ValueError, match="no points"):
        arm.set_trajectory([])
    np.testing.assert_allclose(arm.desired[0], before)
    with pytest.raises(ValueError, match="outside its limits"):
        arm.reset(lo - 0.1)


def test_static_contact_changes_torque_by_minus_jacobian_transpose_force(robot):
    rng = np.random.default_rng(21)
    arm = SimulatedArm(robot, SimConfig(model_error=0.1, seed=3))
    true = RigidBodyDynamics(arm.true_description)
    q = random_q(robot, rng, 0.6)
    for link, point in (("link_4", np.array([0.02, 0.05, -0.03])), (f"link_{robot.n}", np.zeros(3))):
        arm.reset(q)
        force = np.array([12.0, -7.0, 9.0])
        torque = np.array([0.0, 0.5, -0.3])
        arm.apply_contact(link, force, point, duration=10.0, torque=torque)
        arm.step(2500)
        s = arm.state()
        assert np.max(np.abs(s.dq)) < 1e-6
        jac = true.frame_jacobian(s.q, link, point)
        expected = true.gravity(s.q) - jac[:3].T @ force - jac[3:].T @ torque
        np.testing.assert_allclose(s.tau, expected, atol=1e-6)
    # after the duration the contact is gone
    arm.reset(q)
    arm.apply_contact("link_2", [0.0, 0.0, -50.0], duration=0.05)
    arm.step(2000)
    s = arm.state()
    np.testing.assert_allclose(s.tau, true.gravity(s.q), atol=1e-6)
    with pytest.raises(ValueError, match="unknown link 'link_99'"):
        arm.apply_contact("link_99", [1.0, 0, 0])


def test_weight_as_contact_equals_payload_gravity():
    """A contact force m*g at the payload CoM must look exactly like the attached payload."""
    desc = load_robot("iiwa14")
    q = random_q(desc, np.random.default_rng(2), 0.5)
    with_payload = SimulatedArm(desc)
    with_payload.attach_payload(PAYLOAD)
    with_payload.reset(q)
    pushed = SimulatedArm(desc)
    pushed.reset(q)
    point = (desc.payload_frame @ np.append(PAYLOAD.com, 1.0))[:3]  # in the last link frame
    pushed.apply_contact(f"link_{desc.n}", PAYLOAD.mass * desc.gravity, point, duration=10.0)
    pushed.step(2500)
    np.testing.assert_allclose(pushed.state().tau, with_payload.state().tau, atol=1e-6)


def test_link_side_torque_during_motion_with_friction():
    """In motion the sensor reads M ddq + C dq + g of the true robot with the acceleration MuJoCo
    really integrates (friction on the motor side), or that plus viscous and Coulomb friction when
    configured to see friction; the recorded dq is the velocity at the sample's instant, the central difference
    of the recorded positions (issue 46)."""
    desc = load_robot("lwr4")
    viscous = np.linspace(2.0, 0.5, desc.n)
    coulomb = np.linspace(3.0, 0.5, desc.n)
    for sees in (False, True):
        sensor = SensorConfig(viscous=viscous, coulomb=coulomb, sensor_sees_friction=sees)
        arm = SimulatedArm(desc, SimConfig(model_error=0.1, sensor=sensor))
        true = RigidBodyDynamics(arm.true_description)
        arm.reset(np.zeros(desc.n))
        arm.set_trajectory([(1.0, np.full(desc.n, 0.3), None)])
        for steps in (40, 360):  # accelerating, then near peak speed
            arm.step(steps - 1)
            q_before = arm.state().q
            arm.step()
            s = arm.state()
            ddq = arm.acceleration
            expected = true.inverse_dynamics(s.q, s.dq, ddq)
            if sees:  # MuJoCo's dry friction is regularised at low speed: compare when sliding (MuJoCo's viscous
                # friction acts at the end-of-step velocity, half a step after the sample's)
                expected = expected + viscous * (s.dq + 0.5 * arm.dt * ddq) + coulomb * np.sign(s.dq)
            if not sees or np.min(np.abs(s.dq)) > 0.2:
                np.testing.assert_allclose(s.tau, expected, atol=1e-6)
            arm.step()
            q_after = arm.state().q
            np.testing.assert_allclose(s.dq, (q_after - q_before) / (2 * arm.dt), atol=1e-9)
            np.testing.assert_allclose(ddq, (q_after - 2 * s.q + q_before) / arm.dt ** 2, rtol=1e-6, atol=1e-5)
        assert np.min(s.dq) > 0.2 and np.max(np.abs(ddq)) > 0.1
        # at rest again, the link-side torque is the true gravity torque (static friction may
        # hold part of the load, so the motor side may differ by up to the Coulomb level)
        arm.step(2000)
        s = arm.state()
        err = np.abs(s.tau - true.gravity(s.q))
        assert np.all(err < (coulomb + 1e-3 if sees else 1e-3))


@pytest.mark.slow
def test_noise_statistics_offsets_and_seed():
    desc = load_robot("lwr4")
    sigma = np.array([0.1, 0.2, 0.05, 0.3, 0.1, 0.02, 0.04])
    offset = np.array([0.5, -0.3, 0.0, 0.1, 0.0, -0.05, 0.2])
    cfg = SimConfig(seed=7, sensor=SensorConfig(noise_std=sigma, offset=offset))
    q = np.full(desc.n, 0.2)
    true_g = RigidBodyDynamics(desc).gravity(q)

    def record(config, steps=8000):
        arm = SimulatedArm(desc, config)
        arm.reset(q)
        out = np.empty((steps, desc.n))
        for i in range(steps):
            arm.step()
            out[i] = arm.state().tau
        return out

    a = record(cfg)
    err = a - true_g
    np.testing.assert_allclose(err.std(axis=0), sigma, rtol=0.05)
    np.testing.assert_allclose(err.mean(axis=0), offset, atol=4 * sigma.max() / np.sqrt(len(a)) + 1e-3)
    np.testing.assert_array_equal(record(cfg, 500), a[:500])  # same seed, same noise
    other = record(SimConfig(seed=8, sensor=cfg.sensor), 500)
    assert np.max(np.abs(other - a[:500])) > 0.01
    # first-order low-pass at 10 Hz: white noise variance shrinks by alpha / (2 - alpha)
    lp = SimConfig(seed=7, sensor=SensorConfig(noise_std=sigma, offset=offset, lowpass_hz=10.0))
    b = record(lp, 20000)[2000:] - true_g
    alpha = 1 - np.exp(-2 * np.pi * 10.0 * 0.001)
    np.testing.assert_allclose(b.std(axis=0), sigma * np.sqrt(alpha / (2 - alpha)), rtol=0.15)
    np.testing.assert_allclose(b.mean(axis=0), offset, atol=0.02)


def test_model_error_is_seeded_and_physically_consistent():
    desc = load_robot("iiwa14")
    a = SimulatedArm(desc, SimConfig(model_error=0.2, seed=3)).true_description
    b = SimulatedArm(desc, SimConfig(model_error=0.2, seed=3)).true_description
    c = SimulatedArm(desc, SimConfig(model_error=0.2, seed=4)).true_description
    for la, lb, lc, nom in zip(a.links, b.links, c.links, desc.links):
        assert check_consistency(la).ok
        np.testing.assert_array_equal(la.to_params(), lb.to_params())
        assert not np.allclose(la.to_params(), lc.to_params())
        assert abs(la.mass / nom.mass - 1) <= 0.2 + 1e-12
    exact = SimulatedArm(desc, SimConfig(model_error=0.0)).true_description
    for le, nom in zip(exact.links, desc.links):
        np.testing.assert_array_equal(le.to_params(), nom.to_params())
    # another public set of true links
    custom = SimulatedArm(desc, SimConfig(true_links=tuple(c.links))).true_description
    assert custom.links == tuple(c.links)
    with pytest.raises(ValueError, match="noise_std"):
        SimulatedArm(desc, SimConfig(sensor=SensorConfig(noise_std=[0.1, 0.2])))
    with pytest.raises(ValueError, match="physically inconsistent"):
        SimulatedArm(desc).attach_payload(BodyInertia(1.0, np.zeros(3), np.diag([1e-3, 1e-3, 5e-3])))
