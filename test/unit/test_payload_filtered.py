"""The payload from a motion without accelerations (payload/filtered.py): the filtered
momentum form against pinocchio's inverse dynamics (exact) and against the MuJoCo arm (truth)."""

from __future__ import annotations

import numpy as np
import pytest

from payload_estimation.identification.excitation import ExcitationConfig, ExcitationDesigner, trajectory_points
from payload_estimation.model.dynamics import RigidBodyDynamics
from payload_estimation.model.parameters import BodyInertia
from payload_estimation.model.robot_file import load_robot
from payload_estimation.payload.filtered import estimate_payload_filtered
from payload_estimation.payload.model_uncertainty import declared_uncertainty
from payload_estimation.payload.result import PayloadDataError
from payload_estimation.signals.causal import causal_lowpass, causal_lowpass_derivative
from payload_estimation.signals.filters import SignalError

DEG = np.pi / 180
PICK = np.array([0, 30, 0, -60, 0, 60, 0]) * DEG
PAYLOAD = BodyInertia(2.0, np.array([0.01, -0.02, 0.1]), np.diag([0.02, 0.025, 0.01]))


def _excitation(desc, q0, seed: int, period: float = 3.0):
    """A rest-to-rest Fourier motion within ±7° of ``q0`` (half the velocity limits, 4 rad/s²)."""
    des = ExcitationDesigner(desc, ExcitationConfig(f0=1 / period, center=tuple(q0), max_deviation=7 * DEG,
                                                    velocity_factor=0.5, acceleration_limit=4.0, n_eval=20,
                                                    position_factor=1.0, progress=False))
    return des.random_trajectory(seed)


@pytest.fixture(scope="module")
def lwr4():
    return RigidBodyDynamics(load_robot("lwr4"))


def _truth(body: BodyInertia) -> np.ndarray:
    i = body.inertia_com
    return np.array([body.mass, *body.com, i[0, 0], i[0, 1], i[0, 2], i[1, 1], i[1, 2], i[2, 2]])


def _found(est) -> np.ndarray:
    return np.array([est.mass, *est.com, *est.inertia])


@pytest.mark.parametrize("reference", ["differential", "one-shot"])
def test_the_filtered_form_is_exact_without_accelerations(lwr4, reference):
    """Torques of pinocchio's loaded model along a ±7° motion sampled at 1 kHz with ±0.3 ms jitter in
    the stamps: all ten parameters come back (the filtered identity holds; no acceleration is used)."""
    traj = _excitation(lwr4.desc, PICK, 1)
    rng = np.random.default_rng(2)
    t = np.arange(3001) / 1000.0 + np.r_[0.0, rng.uniform(-3e-4, 3e-4, 2999), 0.0]
    q, dq, ddq = traj.evaluate(t)
    heavy = lwr4.with_payload(PAYLOAD)
    tau = np.array([heavy.inverse_dynamics(a, b, c) for a, b, c in zip(q, dq, ddq)])
    ref = np.array([lwr4.inverse_dynamics(a, b, c) for a, b, c in zip(q, dq, ddq)]) \
        if reference == "differential" else None
    est = estimate_payload_filtered(lwr4, t, q, dq, tau, ref, correlated=False)
    assert est.method.startswith(f"filtered {reference}") and not est.undetermined
    np.testing.assert_allclose(_found(est), _truth(PAYLOAD), atol=2e-5)


@pytest.mark.slow
def test_mujoco_differential_motion_gives_mass_com_and_inertia():
    """The MuJoCo LWR (3 % link-model error, ±0.5 N m offsets, 0.1 N m noise) runs one 3 s excitation
    within ±7° without and with a payload, recorded at 1 kHz with the measured velocities. The
    differential filtered fit (with the tracking difference between the runs moved over) gives the
    mass, CoM and inertia, σ covering the error; without moving it over, the tracking difference the
    payload causes reads as payload."""
    from payload_estimation.sim import SensorConfig, SimConfig, SimulatedArm, true_links
    from payload_estimation.sim.recorders import record_trajectory

    desc = load_robot("lwr4")
    dyn = RigidBodyDynamics(desc)
    body = BodyInertia(3.0, np.array([0.02, -0.01, 0.08]), np.diag([0.012, 0.016, 0.008]))
    traj = _excitation(desc, PICK, 3)
    links = true_links(desc, 0.03, 4)
    offsets = np.random.default_rng(5).uniform(-0.5, 0.5, 7)
    runs = []
    for seed, load in ((6, None), (7, body)):
        arm = SimulatedArm(desc, SimConfig(seed=seed, true_links=links,
                                           sensor=SensorConfig(noise_std=0.1, offset=offsets)))
        if load is not None:
            arm.attach_payload(load)
        runs.append(record_trajectory(arm, trajectory_points(traj, 100.0), 1000.0, q_start=PICK))
    u, ld = runs
    est = estimate_payload_filtered(dyn, ld.t, ld.q, ld.dq, ld.tau, u.tau, reference_q=u.q, reference_dq=u.dq)
    err = _found(est) - _truth(body)
    trace = est.inertia[0] + est.inertia[3] + est.inertia[5]
    print(f"mass {100 * err[0] / body.mass:+.3f} %, CoM {1e3 * np.linalg.norm(err[1:4]):.2f} mm, inertia trace "
          f"{100 * (trace / 0.036 - 1):+.1f} %")
    assert abs(err[0]) < 0.002 * body.mass and np.linalg.norm(err[1:4]) < 1e-3
    assert abs(trace / 0.036 - 1) < 0.15
    assert np.all(np.abs(err[:4]) <= 3 * np.array([est.std[k] for k in ("mass", "cx", "cy", "cz")]))
    plain = estimate_payload_filtered(dyn, ld.t, ld.q, ld.dq, ld.tau, u.tau)
    assert np.linalg.norm(plain.com - body.com) > np.linalg.norm(err[1:4])
    # against the nominal model instead of the unloaded run: far less accurate, and σ says so
    unc = declared_uncertainty(dyn, 0.05, offset_std=0.5)
    one = estimate_payload_filtered(dyn, ld.t, ld.q, ld.dq, ld.tau, model_uncertainty=unc)
    assert abs(one.mass - body.mass) <= 3 * one.std["mass"] and one.std["mass"] > 20 * est.std["mass"]


def test_bad_stamps_and_orders_are_refused(lwr4):
    t = np.array([0.0, 0.001, 0.001, 0.003])
    with pytest.raises(SignalError, match="time stamps must increase: sample 2"):
        causal_lowpass(t, np.zeros((4, 7)), 8.0)
    with pytest.raises(SignalError, match="cutoff"):
        causal_lowpass(np.arange(4.0), np.zeros((4, 7)), 0.0)
    q = np.tile(PICK, (4, 1))
    with pytest.raises(PayloadDataError, match="order"):
        estimate_payload_filtered(lwr4, np.arange(4.0), q, 0 * q, 0 * q, order=0)
    with pytest.raises(PayloadDataError, match="3 stamps for 4 samples"):
        estimate_payload_filtered(lwr4, np.arange(3.0), q, 0 * q, 0 * q)


@pytest.mark.parametrize("robot", ["lwr4", "iiwa14"])
def test_the_one_pass_momentum_rows_are_the_regressors(robot):
    """The payload's momentum rows from the last joint's Jacobian and the body regressor (what the dynamic
    sample's fit uses) equal the rows from seven joint-torque-regressor calls with a step along the motion
    (W2 to that step's error), and times the payload's parameters they are the loaded minus the unloaded model's
    M dq and C dq + g - dM/dt dq; the model's own momentum torques likewise (pinocchio's M, C, g: exact)."""
    from payload_estimation.payload.filtered import momentum_rows, momentum_torques

    dyn = RigidBodyDynamics(load_robot(robot))
    heavy = dyn.with_payload(PAYLOAD)
    rng = np.random.default_rng(3)
    q = rng.uniform(-1.5, 1.5, (20, dyn.n))
    dq = rng.uniform(-1.5, 1.5, (20, dyn.n))
    w1, w2 = momentum_rows(dyn.payload_regressor, q, dq)
    p = PAYLOAD.to_params()
    m_dq, rest = momentum_torques(dyn, q, dq)
    m_dq_heavy, rest_heavy = momentum_torques(heavy, q, dq)
    for k in range(len(q)):
        f1, f2 = dyn.payload_momentum_rows(q[k], dq[k])
        np.testing.assert_allclose(f1, w1[k], atol=1e-12)
        np.testing.assert_allclose(f2, w2[k], atol=1e-7)
        np.testing.assert_allclose(f1 @ p, m_dq_heavy[k] - m_dq[k], atol=1e-10)
        np.testing.assert_allclose(f2 @ p, rest_heavy[k] - rest[k], atol=1e-10)
    # the unloaded model's own: M dq and, along the motion, g - Cᵀ dq = C dq + g - dM/dt dq (finite difference)
    step = 1e-6
    for k in range(3):
        np.testing.assert_allclose(m_dq[k], dyn.mass_matrix(q[k]) @ dq[k], atol=1e-12)
        dm = (dyn.mass_matrix(q[k] + step * dq[k]) - dyn.mass_matrix(q[k] - step * dq[k])) / (2 * step)
        expect = dyn.coriolis(q[k], dq[k]) @ dq[k] + dyn.gravity(q[k]) - dm @ dq[k]
        np.testing.assert_allclose(rest[k], expect, atol=1e-6)


@pytest.mark.parametrize("jitter", [0.0, 0.3])
def test_the_causal_filters_are_their_recursions_on_a_grid_and_on_irregular_stamps(jitter):
    # the definition, sample by sample: y_k = a_k y_(k-1) + (1 - a_k) (x_k + x_(k-1)) / 2, and for the derivative
    # (1 - a_k) (x_k - x_(k-1)) / dt_k, a_k = exp(-2 pi fc dt_k); a 250 Hz grid (one recursion) or stamps 30 % off
    rng = np.random.default_rng(5)
    dt = 0.004 * (1 + jitter * rng.uniform(-1, 1, 400))
    t = 1.75e3 + np.concatenate([[0.0], np.cumsum(dt)])
    x = rng.normal(size=(t.size, 3, 4)).cumsum(axis=0)
    a = np.exp(-2 * np.pi * 6.0 * np.diff(t))
    low, der = np.empty_like(x), np.zeros_like(x)
    low[0] = x[0]
    for k in range(1, t.size):
        low[k] = a[k - 1] * low[k - 1] + (1 - a[k - 1]) * 0.5 * (x[k] + x[k - 1])
        der[k] = a[k - 1] * der[k - 1] + (1 - a[k - 1]) * (x[k] - x[k - 1]) / (t[k] - t[k - 1])
    np.testing.assert_allclose(causal_lowpass(t, x, 6.0), low, rtol=1e-9, atol=1e-9 * np.abs(low).max())
    np.testing.assert_allclose(causal_lowpass_derivative(t, x, 6.0), der, rtol=1e-9, atol=1e-9 * np.abs(der).max())
