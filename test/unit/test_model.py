"""The model foundation: one robot in every convention, three dynamics engines, loader errors, base counts.

Independent references: MuJoCo (an engine we did not write) loading our URDF text, pinocchio
(RigidBodyDynamics), the sympy potential-energy model (symbolic.py), and hand-converted variants of the
same LWR 4+ (modified DH table, hand-written URDF in test/data).
"""

from __future__ import annotations

from pathlib import Path

import mujoco
import numpy as np
import pytest

from payload_estimation.model.base_parameters import compute_base_parameters, payload_jacobian
from payload_estimation.model.description import RobotDescriptionError
from payload_estimation.model.dynamics import RigidBodyDynamics, gravity_params
from payload_estimation.model.parameters import BodyInertia
from payload_estimation.model.robot_file import load_robot
from payload_estimation.model.symbolic import derive
from payload_estimation.model.urdf import load_urdf, to_urdf

DATA = Path(__file__).resolve().parents[1] / "data"
MUJOCO_COMPILER = ('<mujoco><compiler balanceinertia="false" discardvisual="true" fusestatic="false" '
                   'autolimits="true" inertiafromgeom="false"/></mujoco>')


pytestmark = pytest.mark.usefixtures("private_symbolic_cache")


def mujoco_model(urdf_text: str) -> mujoco.MjModel:
    """MuJoCo model of URDF text; the <mujoco> block keeps the inertias exactly as given."""
    start = urdf_text.index("<robot")
    end = urdf_text.index(">", start) + 1
    return mujoco.MjModel.from_xml_string(urdf_text[:end] + MUJOCO_COMPILER + urdf_text[end:])


def mujoco_gravity(model: mujoco.MjModel, data: mujoco.MjData, q: np.ndarray) -> np.ndarray:
    """Static joint torque: MuJoCo's bias force at zero velocity (gravity only)."""
    data.qpos[:] = q
    data.qvel[:] = 0.0
    mujoco.mj_forward(model, data)
    return data.qfrc_bias.copy()


@pytest.mark.parametrize("robot", ["lwr4", "iiwa14"])
def test_gravity_symbolic_pinocchio_mujoco_agree(robot):
    desc = load_robot(robot)
    dyn = RigidBodyDynamics(desc)
    sc = derive(desc, "gravity")
    pi_g = sc.coefficient_values(gravity_params(desc))
    model = mujoco_model(to_urdf(desc))
    assert model.nv == desc.n
    np.testing.assert_allclose(model.opt.gravity, desc.gravity)
    data = mujoco.MjData(model)
    rng = np.random.default_rng(11)
    for _ in range(20):
        q = rng.uniform(desc.limits.position[:, 0], desc.limits.position[:, 1])
        g_pin = dyn.gravity(q)
        assert np.max(np.abs(g_pin)) > 1.0  # a configuration that actually loads the joints
        np.testing.assert_allclose(sc.gravity(q, pi_g), g_pin, rtol=0, atol=1e-9)
        np.testing.assert_allclose(mujoco_gravity(model, data, q), g_pin, rtol=0, atol=1e-9)


def test_mujoco_mass_matrix_matches_pinocchio():
    desc = load_robot("lwr4")
    dyn = RigidBodyDynamics(desc)
    model = mujoco_model(to_urdf(desc))
    data = mujoco.MjData(model)
    q = np.array([0.3, -0.8, 1.1, 1.2, -0.4, 0.9, 0.2])
    mujoco_gravity(model, data, q)
    m = np.zeros((7, 7))
    mujoco.mj_fullM(model, data, m)
    np.testing.assert_allclose(m, dyn.mass_matrix(q), atol=1e-9)


def _variants() -> dict[str, object]:
    dh = load_robot("lwr4")
    return {
        "dh": dh,
        "mdh": load_robot(DATA / "lwr4_mdh.yaml"),
        "to_urdf": load_urdf(to_urdf(dh)),
        "hand_urdf": load_robot(DATA / "lwr4_hand.urdf"),
    }


def test_same_robot_in_every_convention_has_same_g_and_m():
    variants = _variants()
    assert variants["mdh"].convention == "mdh" and variants["hand_urdf"].convention == "urdf"
    dyns = {k: RigidBodyDynamics(v) for k, v in variants.items()}
    rng = np.random.default_rng(5)
    for _ in range(10):
        q = rng.uniform(-2, 2, 7)
        g_ref, m_ref = dyns["dh"].gravity(q), dyns["dh"].mass_matrix(q)
        for name, dyn in dyns.items():
            np.testing.assert_allclose(dyn.gravity(q), g_ref, atol=1e-10, err_msg=name)
            np.testing.assert_allclose(dyn.mass_matrix(q), m_ref, atol=1e-10, err_msg=name)


def test_same_robot_in_every_convention_has_the_same_gravity_coefficient_span():
    """12 coefficients in every convention and the base regressors span the same functions of q."""
    variants = _variants()
    scs = {k: derive(v, "gravity") for k, v in variants.items()}
    assert {k: sc.rank for k, sc in scs.items()} == dict.fromkeys(variants, 12)
    rng = np.random.default_rng(2)
    qs = rng.uniform(-2, 2, (25, 7))
    stacked = {k: np.vstack([sc.base_regressor_function()(q) for q in qs]) for k, sc in scs.items()}
    for name, y in stacked.items():
        assert np.linalg.matrix_rank(y, tol=1e-9) == 12, name
        assert np.linalg.matrix_rank(np.hstack([stacked["dh"], y]), tol=1e-9) == 12, name
        # and the coefficients of each convention reproduce the same torques
        g = y @ scs[name].coefficient_values(gravity_params(variants[name]))
        np.testing.assert_allclose(g, stacked["dh"] @ scs["dh"].coefficient_values(gravity_params(variants["dh"])),
                                   atol=1e-9, err_msg=name)


def test_urdf_roundtrip_keeps_payload_superposition():
    """Pinocchio with the payload merged into the last link == unloaded + payload regressor (eq. 22)."""
    desc = load_robot("iiwa14")
    payload = BodyInertia(1.7, np.array([0.01, 0.02, 0.09]), np.diag([0.01, 0.012, 0.008]))
    dyn = RigidBodyDynamics(desc)
    loaded = dyn.with_payload(payload)
    rng = np.random.default_rng(9)
    for _ in range(5):
        q, dq, ddq = rng.uniform(-2, 2, 7), rng.uniform(-1, 1, 7), rng.uniform(-2, 2, 7)
        np.testing.assert_allclose(loaded.inverse_dynamics(q, dq, ddq),
                                   dyn.inverse_dynamics(q, dq, ddq) + dyn.payload_regressor(q, dq, ddq)
                                   @ payload.to_params(), atol=1e-9)
        np.testing.assert_allclose(loaded.gravity(q), dyn.gravity(q) + dyn.payload_gravity_regressor(q)
                                   @ payload.to_params()[:4], atol=1e-10)


BAD_FILES = {
    "bad_missing_kinematics.yaml": r"missing key 'kinematics'",
    "bad_dh_row.yaml": r"kinematics\.dh\[1\] must be \[a, alpha, d, theta_offset\]",
    "bad_convention.yaml": r"convention 'hartenberg' is unknown",
    "bad_nan.yaml": r"links\[0\]: 'com' contains NaN",
}


@pytest.mark.parametrize("name", sorted(BAD_FILES))
def test_bad_robot_files_name_the_problem(name):
    with pytest.raises(RobotDescriptionError, match=BAD_FILES[name]):
        load_robot(DATA / name)


def test_inconsistent_link_is_accepted_for_gravity_and_refused_by_the_simulator(caplog):
    """Gravity work does not need a physical inertia (warned); the simulator does (refused, named)."""
    from payload_estimation.sim import SimulatedArm

    with caplog.at_level("WARNING"):
        desc = load_robot(DATA / "bad_inertia.yaml")
    assert "links[1] (joint j2) is physically inconsistent" in caplog.text and "refused by the simulator" in caplog.text
    assert np.all(np.isfinite(RigidBodyDynamics(desc).gravity(np.array([0.3, 0.4]))))
    with pytest.raises(RobotDescriptionError, match=r"links\[1\] \(joint j2\) is physically inconsistent.*triangle "
                       r"inequality.*simulator .*needs a mass and a physically consistent inertia"):
        SimulatedArm(desc)


def test_good_test_robot_loads():
    desc = load_robot(DATA / "planar2r.yaml")
    assert desc.n == 2 and desc.convention == "dh"
    np.testing.assert_allclose(desc.gravity, [0, -9.81, 0])


def test_unknown_robot_and_bad_urdf():
    with pytest.raises(RobotDescriptionError, match="neither a shipped robot"):
        load_robot("lwr5")
    with pytest.raises(RobotDescriptionError, match="not valid XML"):
        load_urdf("<robot><link")


@pytest.mark.parametrize("robot, gravity_count", [("lwr4", 12), ("iiwa14", 12)])
def test_base_parameter_counts_are_stable(robot, gravity_count):
    dyn = RigidBodyDynamics(load_robot(robot))
    full = [compute_base_parameters(dyn, "full", n_samples=30, seed=s).rank for s in (0, 1)]
    grav = [compute_base_parameters(dyn, "gravity", n_samples=30, seed=s).rank for s in (0, 1)]
    assert full[0] == full[1] and grav == [gravity_count] * 2
    assert derive(dyn.desc, "full").rank == full[0]


def test_planar_base_counts_and_numeric_payload_jacobian():
    """2R: 6 full coefficients (eq. 29), 4 gravity ones; numeric J_eps reproduces eps = pi_L - pi."""
    desc = load_robot(DATA / "planar2r.yaml")
    dyn = RigidBodyDynamics(desc)
    base = compute_base_parameters(dyn, "full", n_samples=30)
    assert base.rank == 6
    assert compute_base_parameters(dyn, "gravity", n_samples=30).rank == 4
    payload = BodyInertia(1.5, np.array([0.3, 0.1, 0.0]), np.diag([0.05, 0.05, 0.1813 - 1.5 * 0.1]))
    loaded_params = np.concatenate([desc.links[0].to_params(), desc.links[1].plus(payload).to_params()])
    unloaded = np.concatenate([b.to_params() for b in desc.links])
    eps = base.coefficients(loaded_params) - base.coefficients(unloaded)
    np.testing.assert_allclose(payload_jacobian(base, dyn) @ payload.to_params(), eps, atol=1e-12)


# ------------------------------------------------------------------------------------------------
# Parameter conversions and the numeric dynamics' identities
# ------------------------------------------------------------------------------------------------
def _random_body(rng) -> BodyInertia:
    a = rng.normal(size=(3, 3))
    i_c = a @ a.T * 0.01 + np.eye(3) * 1e-3
    return BodyInertia(float(rng.uniform(0.5, 3)), rng.normal(scale=0.1, size=3), i_c)


def _random_pose(rng) -> np.ndarray:
    from payload_estimation.model.transforms import xyz_rpy

    return xyz_rpy(rng.normal(scale=0.3, size=3), rng.uniform(-np.pi, np.pi, 3))


def test_params_transform_matrix_is_the_change_of_frame():
    from payload_estimation.model.parameters import params_transform_matrix

    rng = np.random.default_rng(21)
    for _ in range(5):
        body, t1, t2 = _random_body(rng), _random_pose(rng), _random_pose(rng)
        np.testing.assert_allclose(params_transform_matrix(t1) @ body.to_params(),
                                   body.transformed(t1).to_params(), atol=1e-12)
        np.testing.assert_allclose(params_transform_matrix(t2 @ t1), params_transform_matrix(t2)
                                   @ params_transform_matrix(t1), atol=1e-12)
        back = BodyInertia.from_params(body.to_params())
        np.testing.assert_allclose(back.com, body.com, atol=1e-14)
        np.testing.assert_allclose(back.inertia_com, body.inertia_com, atol=1e-14)


def test_flange_pose_matches_mujoco():
    desc = load_robot("lwr4")
    dyn = RigidBodyDynamics(desc)
    model = mujoco_model(to_urdf(desc))
    data = mujoco.MjData(model)
    flange = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, "flange")
    rng = np.random.default_rng(8)
    for _ in range(5):
        q = rng.uniform(-2, 2, 7)
        mujoco_gravity(model, data, q)
        pose = dyn.forward_kinematics(q, "flange")
        np.testing.assert_allclose(data.xpos[flange], pose[:3, 3], atol=1e-12)
        np.testing.assert_allclose(data.xmat[flange].reshape(3, 3), pose[:3, :3], atol=1e-12)


def test_bias_forces_and_regressor_match_mujoco_and_identities():
    """MuJoCo's C(q,dq) dq + g(q) equals pinocchio's; tau = Y p; dM/dt = C + C^T; J by finite differences."""
    desc = load_robot("iiwa14")
    dyn = RigidBodyDynamics(desc)
    model = mujoco_model(to_urdf(desc))
    data = mujoco.MjData(model)
    from payload_estimation.model.dynamics import link_params

    p = link_params(desc)
    rng = np.random.default_rng(13)
    h = 1e-6
    for _ in range(4):
        q, dq, ddq = rng.uniform(-2, 2, 7), rng.uniform(-1.5, 1.5, 7), rng.uniform(-3, 3, 7)
        data.qpos[:], data.qvel[:] = q, dq
        mujoco.mj_forward(model, data)
        c = dyn.coriolis(q, dq)
        np.testing.assert_allclose(data.qfrc_bias, c @ dq + dyn.gravity(q), atol=1e-9)
        np.testing.assert_allclose(dyn.regressor(q, dq, ddq) @ p, dyn.inverse_dynamics(q, dq, ddq), atol=1e-9)
        m_dot = (dyn.mass_matrix(q + h * dq) - dyn.mass_matrix(q - h * dq)) / (2 * h)
        np.testing.assert_allclose(m_dot, c + c.T, atol=1e-6)
        jac = dyn.frame_jacobian(q, "flange")
        fd = np.column_stack([(dyn.forward_kinematics(q + h * e, "flange")[:3, 3]
                               - dyn.forward_kinematics(q - h * e, "flange")[:3, 3]) / (2 * h) for e in np.eye(7)])
        np.testing.assert_allclose(jac[:3], fd, atol=1e-7)
