"""The simulated arm's torque is the inverse dynamics of its own motion for every trajectory style a user sends,
and sim_node interpolates each style as joint_trajectory_controller does (issue 46).

Tolerance: 1e-6 N m, with dq and ddq from the recorded q by central differences (or the simulator's own
acceleration with the recorded dq: the same numbers). The integrator (semi-implicit Euler) makes the second
difference of q exactly the acceleration it applies, and the recorded dq is the central difference of q; the
simulated sensor reports the link-side torque at that q, dq and acceleration: both sides are the same rigid-body
equation evaluated by MuJoCo and by pinocchio, equal to round-off (~1e-9 N m with a second difference of q at
1 kHz). 1e-6 N m leaves a thousand-fold margin over that and is 1e5 below the sensor noise the benches use
(0.1 N m). The central difference of the recorded dq instead is the mean acceleration over two steps: at a jump of
the acceleration (the velocity steps of a positions-only trajectory) the two samples beside it are M Δa / 4 off
in equal and opposite pairs: exactly M(q) times a quarter of the second difference of the acceleration, no bias
(before issue 46 it was 2.7 N m RMS and 2.5 N m over 20 ms on a positions-only move: the recorded velocity was
half a step behind q and the torque).
"""

from __future__ import annotations

import numpy as np
import pytest

from payload_estimation.model.dynamics import RigidBodyDynamics
from payload_estimation.model.parameters import BodyInertia
from payload_estimation.model.robot_file import load_robot
from payload_estimation.sim import SimConfig, SimInputError, SimulatedArm
from payload_estimation.sim.driver import SimDriver, driver_config
from payload_estimation.sim.styles import STYLES, user_trajectory
from payload_estimation.sim.trajectory import JTC, QUINTIC, JointTrajectory, TrajectoryPoint

TOL = 1e-6  # N m (module docstring)
Q0 = np.radians([-10, 35, 5, -75, -10, 55, 15])
MOVE = np.radians([40, -30, 25, 45, -35, 30, 55])
PAYLOAD = BodyInertia(3.0, np.array([0.02, -0.01, 0.08]), np.diag([6e-3, 5e-3, 4e-3]))


@pytest.fixture(scope="module")
def desc():
    return load_robot("iiwa14")


def _record(arm: SimulatedArm, seconds: float):
    rec = [arm.state()]
    acc = [arm.acceleration]
    for _ in range(int(round(seconds / arm.dt))):
        arm.step(1)
        rec.append(arm.state())
        acc.append(arm.acceleration)
    return (np.array([s.t for s in rec]), np.array([s.q for s in rec]), np.array([s.dq for s in rec]),
            np.array([s.tau for s in rec]), np.array(acc))


def _misses(arm, payload, t, q, dq, tau, acc) -> dict[str, np.ndarray]:
    """The torque minus the inverse dynamics (true links + payload) at every inner sample, with (dq, ddq) from q's
    central differences, from the recorded dq and the simulator's acceleration, from the recorded dq and its
    central difference."""
    h = np.diff(t)[:, None]
    dq_q = (q[2:] - q[:-2]) / (h[1:] + h[:-1])
    ddq_q = ((q[2:] - q[1:-1]) / h[1:] - (q[1:-1] - q[:-2]) / h[:-1]) / (0.5 * (h[1:] + h[:-1]))
    ddq_dq = (dq[2:] - dq[:-2]) / (h[1:] + h[:-1])
    true = RigidBodyDynamics(arm.true_description, payload)
    inner = slice(1, -1)

    def miss(dqs, ddqs):
        return tau[inner] - np.array([true.inverse_dynamics(*x) for x in zip(q[inner], dqs, ddqs)])

    return {"q": miss(dq_q, ddq_q), "own": miss(dq[inner], acc[inner]), "dq": miss(dq[inner], ddq_dq),
            "dq_vs_q": dq[inner] - dq_q}


@pytest.mark.parametrize("style", STYLES)
def test_torque_is_the_inverse_dynamics_of_the_recorded_motion(desc, style):
    """Payload attached, model exact, noise off, the style's points interpolated as sim_node does (JTC): the
    measured torque is pinocchio's inverse dynamics (true links + payload) of the recorded q with dq and ddq by
    central differences of q, and of the recorded dq with the simulator's own acceleration, at every sample -- also
    at the velocity steps of the positions-only styles, where the acceleration jumps by tens of rad/s² within a
    step; the recorded dq is the central difference of q; with ddq from the recorded dq the miss averages out over
    20 ms."""
    arm = SimulatedArm(desc, SimConfig(model_error=0.0))
    arm.attach_payload(PAYLOAD)
    arm.reset(Q0)
    arm.step(100)
    points = user_trajectory(style, Q0, Q0 + MOVE, duration=1.5, velocity_limits=desc.limits.velocity,
                             velocity_scale=0.8, acceleration=4.0)
    arm.set_trajectory(points, JTC)
    t, q, dq, tau, acc = _record(arm, max(p[0] for p in points) + 0.2)
    m = _misses(arm, PAYLOAD, t, q, dq, tau, acc)
    assert np.abs(m["q"]).max() < TOL, f"{style}: max miss {np.abs(m['q']).max(axis=0)} N m"
    assert np.abs(m["own"]).max() < TOL, f"{style}: max miss {np.abs(m['own']).max(axis=0)} N m"
    np.testing.assert_allclose(m["dq_vs_q"], 0.0, atol=1e-9)
    # with ddq from the recorded dq: the central difference's own truncation, M(q) (a_(k-1) - 2 a_k + a_(k+1)) / 4
    # (equal and opposite beside a jump of a: summed over a move, only its ends remain)
    true = RigidBodyDynamics(arm.true_description, PAYLOAD)
    curvature = np.array([true.mass_matrix(qk) @ c for qk, c in zip(q[1:-1], acc[:-2] - 2 * acc[1:-1] + acc[2:])])
    np.testing.assert_allclose(m["dq"], -curvature / 4, atol=1e-5)
    # the check sees real motion: the velocity-step styles accelerate hard, every style moves the arm there
    np.testing.assert_allclose(q[-1], Q0 + MOVE, atol=2e-3)
    if style in ("positions", "stop-and-go"):
        assert np.abs(acc).max() > 10.0


def test_quintic_positions_only_move_is_consistent_too(desc):
    """The package's own moves (positions only, the Python API's quintic through every point, the arm stopping at
    each): the same identity; the central difference of the recorded dq is now 0.1 N m RMS off on this move (its
    acceleration's curvature), 2.7 N m before issue 46."""
    arm = SimulatedArm(desc, SimConfig(model_error=0.0))
    arm.attach_payload(PAYLOAD)
    arm.reset(Q0)
    points = [p[:3] for p in user_trajectory("positions", Q0, Q0 + 0.5 * MOVE, duration=1.5)]
    arm.set_trajectory(points)
    m = _misses(arm, PAYLOAD, *_record(arm, 1.5))
    assert np.abs(m["q"]).max() < TOL and np.abs(m["own"]).max() < TOL
    assert np.sqrt(np.mean(m["dq"] ** 2)) < 0.2


def _jtc(points, q0=None):
    q0 = np.zeros(2) if q0 is None else q0
    return JointTrajectory(0.0, q0, np.zeros(2), [TrajectoryPoint(*p) for p in points], JTC)


def test_jtc_interpolates_by_the_fields_both_ends_carry():
    """joint_trajectory_controller's spline (trajectory.cpp): positions only linear, with velocities cubic, with
    accelerations too quintic; the state before the trajectory has positions and velocities, no accelerations."""
    a, b = np.array([0.0, 1.0]), np.array([1.0, 3.0])
    v = np.array([0.5, -0.5])
    traj = _jtc([(1.0, a), (2.0, b)])
    assert traj.kinds == ["linear", "linear"]
    _, dq1, ddq1 = traj.sample(0.5)
    _, dq2, ddq2 = traj.sample(1.5)
    np.testing.assert_allclose(dq1, a)  # from the start at rest: (a - 0) / 1 s
    np.testing.assert_allclose(dq2, b - a)  # the velocity steps at the waypoint
    np.testing.assert_allclose(ddq1, 0.0)
    np.testing.assert_allclose(traj.sample(1.5)[0], 0.5 * (a + b))
    traj = _jtc([(1.0, a, v), (2.0, b, np.zeros(2))])
    assert traj.kinds == ["cubic", "cubic"]
    q, dq, _ = traj.sample(1.0)
    np.testing.assert_allclose(q, a)
    np.testing.assert_allclose(dq, v)
    acc = np.array([1.0, 2.0])
    traj = _jtc([(1.0, a, v, acc), (2.0, b, np.zeros(2), np.zeros(2))])
    assert traj.kinds == ["cubic", "quintic"]  # the current state has no acceleration: the first segment is cubic
    np.testing.assert_allclose(traj.sample(1.0)[2], acc, atol=1e-9)
    # mixed: a point without velocities makes both its segments linear
    assert _jtc([(1.0, a, v), (2.0, b), (3.0, a, v)]).kinds == ["cubic", "linear", "linear"]
    # a first point at time_from_start 0 is the start (MoveIt's trajectories): the current state is not used
    traj = _jtc([(0.0, a, v, acc), (1.0, b, np.zeros(2), np.zeros(2))], q0=np.full(2, 9.0))
    assert traj.kinds == ["quintic"]
    np.testing.assert_allclose(traj.sample(0.0)[0], a)
    # after the end: the last point held at rest
    q, dq, ddq = traj.sample(5.0)
    np.testing.assert_allclose(q, b)
    assert not dq.any() and not ddq.any()


def test_quintic_keeps_the_packages_own_interpolation():
    """The Python API's default: a quintic per segment, missing velocities 0 (rest to rest), zero accelerations."""
    a = np.array([0.3, -0.2])
    traj = JointTrajectory(0.0, np.zeros(2), np.zeros(2), [TrajectoryPoint(1.0, a, np.zeros(2))])
    assert traj.interpolation == QUINTIC and traj.kinds == ["quintic"]
    np.testing.assert_allclose(traj.sample(0.5)[1], 1.875 * a)  # the quintic's peak speed 15/8 d/T
    np.testing.assert_allclose(traj.sample(0.0)[2], 0.0)


def test_arm_and_driver_parse_styles(desc):
    """sim_node's driver follows JTC; the Python API keeps its quintic; accelerations without velocities and a
    first point at 0 s outside JTC are refused with the reason."""
    cfg = driver_config({"noise_std": [0.0], "offset": [0.0], "viscous": [0.0], "coulomb": [0.0], "lowpass_hz": 0.0,
                         "sensor_sees_friction": False, "dt": 0.001, "initial_positions": [0.0], "joint_names": [""],
                         "payload_mass": 1.0, "payload_com": [0.0, 0.0, 0.05],
                         "payload_inertia": [1e-3, 0, 0, 1e-3, 0, 1e-3], "payload_attached": False, "seed": 0,
                         "model_error": 0.0, "rate_hz": 1000.0, "clock_rate_hz": 250.0, "real_time_factor": 0.0,
                         "contact_duration": 0.2}, desc)
    driver = SimDriver(desc, cfg)
    q = driver.arm.state().q
    driver.set_trajectory([(1.0, q + 0.05, None, None)])
    assert driver.arm._traj.kinds == ["linear"]
    driver.set_trajectory([(0.0, q, np.zeros(7), np.zeros(7)), (1.0, q + 0.05, np.zeros(7), np.zeros(7))])
    assert driver.arm._traj.kinds == ["quintic"]
    with pytest.raises(SimInputError, match="accelerations without velocities"):
        driver.set_trajectory([(1.0, q, None, np.zeros(7))])
    driver.arm.set_trajectory([(1.0, q + 0.05, None)])
    assert driver.arm._traj.kinds == ["quintic"]
    with pytest.raises(SimInputError, match="greater than the previous"):
        driver.arm.set_trajectory([(0.0, q, None)])
