"""The provisional payload while sampling: learnt from the static torques at rest poses, never invented."""

import numpy as np
import pytest

from payload_estimation.collision.detector import CollisionDetector
from payload_estimation.collision.provisional import ProvisionalPayload, payload_gravity_posterior
from payload_estimation.model.dynamics import RigidBodyDynamics
from payload_estimation.model.parameters import BodyInertia
from payload_estimation.model.robot_file import load_robot
from payload_estimation.sampling.poses import PosePlanConfig, plan_poses, unknown_payload_duration

Q0 = np.radians([10, 40, -5, -70, 15, 50, 20])
TRUE = BodyInertia(3.0, np.array([0.03, -0.02, 0.11]), np.diag([0.01, 0.01, 0.005]))


@pytest.fixture(scope="module")
def dyn():
    return RigidBodyDynamics(load_robot("lwr4"))


def rest(prov, dyn_loaded, q, t0, seconds=0.1, dt=1e-3, noise=0.0, rng=None):
    """Feed ``seconds`` of rest at ``q``; the last provisional estimate returned (or None)."""
    out = None
    z = np.zeros(len(q))
    for k in range(int(seconds / dt)):
        tau = dyn_loaded.gravity(q) + (noise * rng.standard_normal(len(q)) if noise else 0.0)
        out = prov.update(t0 + k * dt, q, z, tau) or out
    return out


def test_one_rest_pose_explains_the_load_there_and_more_poses_give_the_payload(dyn):
    loaded = dyn.with_payload(TRUE)
    prov = ProvisionalPayload(dyn)
    prov.start()
    est = rest(prov, loaded, Q0, 0.0)
    assert est is not None and est.poses == 1
    y = dyn.payload_gravity_regressor(Q0)
    truth = np.r_[TRUE.mass, TRUE.mass * TRUE.com]
    # at one pose: the load's torque is explained (to the prior's pull, well below the noise level)
    assert np.max(np.abs(y @ est.gravity_params() - y @ truth)) < 0.05
    assert rest(prov, loaded, Q0 + 1e-4, 1.0) is None  # the same pose again adds nothing
    rng = np.random.default_rng(0)
    for k, q in enumerate(plan_poses(dyn, Q0, PosePlanConfig(n_poses=6)).poses[1:]):
        est = rest(prov, loaded, q, 2.0 + k, noise=0.1, rng=rng) or est
    assert est.poses == 6
    assert est.mass == pytest.approx(TRUE.mass, abs=0.05)
    np.testing.assert_allclose(est.com, TRUE.com, atol=0.01)


def test_at_the_stretched_up_pose_the_mass_stays_unknown_not_invented(dyn):
    """The mass of a load on the vertical axis does not show in the torques: the fit keeps the prior (0 kg)
    and the posterior says the mass is unknown, so the sampler slows its first move."""
    up = np.zeros(dyn.n)
    loaded = dyn.with_payload(BodyInertia(5.0, np.array([0, 0, 0.05]), np.eye(3) * 1e-3))
    prov = ProvisionalPayload(dyn)
    prov.start()
    est = rest(prov, loaded, up, 0.0)
    assert est.mass < 0.1 and est.mass_std > 5.0
    _, cov = payload_gravity_posterior(dyn, Q0[None])
    assert np.sqrt(cov[0, 0]) < 0.2  # a bent pose determines the mass
    tilt = up.copy()
    tilt[1] = np.radians(7)
    _, at_up = payload_gravity_posterior(dyn, up[None])
    slow = unknown_payload_duration(dyn, up, tilt, at_up, 3.0)
    assert slow > 3 * 0.25 and unknown_payload_duration(dyn, up, tilt, np.zeros((4, 4)), 3.0) == 0.0  # vs 0.25 s


def test_motion_resets_the_rest_window(dyn):
    prov = ProvisionalPayload(dyn)
    prov.start()
    z = np.zeros(dyn.n)
    moving = np.full(dyn.n, 0.05)
    for k in range(200):  # alternating motion and 40 ms of rest: never 50 ms at rest
        assert prov.update(k * 1e-3, Q0, moving if (k // 40) % 2 else z, dyn.gravity(Q0)) is None


def test_detector_threshold_scale_while_the_payload_is_provisional():
    r = np.array([0.0, 7.0, 0.0])
    plain, widened = CollisionDetector(3, 6.0), CollisionDetector(3, 6.0)
    widened.scale_thresholds(1.5)
    assert plain.update(0.0, r) is not None and widened.update(0.0, r) is None
    widened.scale_thresholds(1.0)
    assert widened.update(0.001, r) is not None


@pytest.mark.slow
def test_an_unknown_com_slows_the_first_move_so_the_monitor_stays_quiet():
    """After the first rest pose the mass is known but the CoM along gravity is not (MuJoCo truth, no model
    error or noise): 4.25 kg with its CoM 15 cm out reads as 10 N m of external torque if the first move
    takes the usual 0.27 s. The move is slowed until 3 σ of the unknown first moment's inertial torque
    stays below unknown_payload_torque; the run completes without a collision."""
    from payload_estimation.sampling.bare_run import BareRunConfig, bare_run

    desc = load_robot("iiwa14")
    q0 = np.radians([-123.8, -48.27, 29.61, -34.49, 88.91, 102.38, -55.49])
    body = BodyInertia(4.25, np.array([0.037, 0.039, 0.145]), np.diag([0.0031, 0.0032, 0.0045]))
    r = bare_run(desc, q0, body, BareRunConfig(noise_std=0.0))
    assert r.finished.code == "done" and r.collisions == 0, r.finished.text
    assert r.peak_ratio < 0.5
    dyn = RigidBodyDynamics(desc)
    _, after_one = payload_gravity_posterior(dyn, q0[None])
    first = unknown_payload_duration(dyn, q0, r.commands[0], after_one, 3.0)
    assert first > 3 * 0.27
    # once the poses determine mass and CoM, the same step needs a third of that or less
    _, after_all = payload_gravity_posterior(dyn, np.array(r.commands[:6]))
    assert unknown_payload_duration(dyn, q0, r.commands[0], after_all, 3.0) < first / 3
