"""Provisional payload from a static residual: explains the new load at the grasp pose."""

import numpy as np

from payload_estimation.collision.observer import MomentumObserver
from payload_estimation.collision.provisional import provisional_payload
from payload_estimation.model.dynamics import RigidBodyDynamics
from payload_estimation.model.parameters import BodyInertia
from payload_estimation.model.robot_file import load_robot


def _settle(obs, q, tau, seconds=1.0, dt=1e-3):
    z = np.zeros(len(q))
    for k in range(int(seconds / dt)):
        r = obs.update(k * dt, q, z, tau)
    return r


def test_provisional_payload_cancels_the_static_residual_of_an_unknown_load():
    desc = load_robot("lwr4")
    dyn = RigidBodyDynamics(desc)
    q = np.radians([10, 40, -5, -70, 15, 50, 20])
    true = BodyInertia(3.0, np.array([0.03, -0.02, 0.11]), np.diag([0.01, 0.01, 0.005]))
    tau = dyn.with_payload(true).gravity(q)  # static measured torque with the load
    obs = MomentumObserver(dyn, 25.0)
    r = _settle(obs, q, tau)
    assert np.abs(r).max() > 6.0  # the unknown load looks like a collision
    prov = provisional_payload(dyn, q, r, None, "last_link")
    # it explains the load at this pose: the same gravity torque as the true payload
    np.testing.assert_allclose(dyn.payload_gravity_regressor(q) @ prov.gravity_params(),
                               dyn.payload_gravity_regressor(q) @ np.r_[true.mass, true.mass * true.com], atol=1e-6)
    obs.set_payload(prov)
    obs.reset()
    assert np.abs(_settle(obs, q, tau)).max() < 1e-6
    # a correction on top of the current payload: with nothing left to explain it keeps that payload
    same = provisional_payload(dyn, q, np.zeros(desc.n), prov, "last_link")
    np.testing.assert_allclose(same.gravity_params(), prov.gravity_params(), atol=1e-12)


def test_detector_threshold_scale_while_the_payload_is_provisional():
    from payload_estimation.collision.detector import CollisionDetector

    r = np.array([0.0, 7.0, 0.0])
    plain, widened = CollisionDetector(3, 6.0), CollisionDetector(3, 6.0)
    widened.scale_thresholds(1.5)
    assert plain.update(0.0, r) is not None and widened.update(0.0, r) is None
    widened.scale_thresholds(1.0)
    assert widened.update(0.001, r) is not None
