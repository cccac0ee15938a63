"""The momentum-observer residual on an identified model (issue 29.4): `residual --params` takes what
`validate --params` takes -- a coefficient file or an identified link set, with its joint friction and
offsets -- so the observer's torque balance holds the arm's friction and the model's identified
dynamics instead of the robot description's. References: a MuJoCo arm whose torque sensor reads
viscous friction and a bias (known), identified from another motion; pinocchio inverse dynamics of
the coefficients' regressor; the real LWR 4+ logs (no contact in them)."""

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import json  # noqa: E402

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import yaml  # noqa: E402
from data_paths import dataset  # noqa: E402

from payload_estimation.cli import main as cli_main
from payload_estimation.collision import MomentumObserver, make_friction  # noqa: E402
from payload_estimation.files.csv_samples import write_samples_csv
from payload_estimation.files.robot_writer import write_identified_robot
from payload_estimation.identification.dynamic_model import load_dynamic_model  # noqa: E402
from payload_estimation.identification.identified_model import IdentifiedModel  # noqa: E402
from payload_estimation.identification.robot_identification import (  # noqa: E402
    IdentificationOptions,
    identify_robot,
)
from payload_estimation.identification.torque_models import JointFriction, TorqueModelError  # noqa: E402
from payload_estimation.model.dynamics import RigidBodyDynamics  # noqa: E402
from payload_estimation.model.parameter_dynamics import ParameterDynamics  # noqa: E402
from payload_estimation.model.parameters import BodyInertia  # noqa: E402
from payload_estimation.model.robot_file import load_robot  # noqa: E402

VISCOUS = np.array([2.0, 2.5, 1.5, 1.5, 0.8, 0.5, 0.3])  # N m s/rad, read by the torque sensor
OFFSET = np.array([0.5, -0.8, 0.4, 0.3, 0.2, -0.2, 0.1])  # N m sensor bias
Q0 = np.radians([0, 30, 0, -60, 0, 45, 0])
LWR = "lwr4-iit"


def multisine(seed: int, duration: float, rate: float = 100.0) -> list[tuple]:
    """A smooth multi-sine around Q0 (0.1-0.5 Hz, ±0.05-0.25 rad per harmonic), faded in over 3 s."""
    rng = np.random.default_rng(seed)
    w = 2 * np.pi * np.array([0.1, 0.2, 0.3, 0.5])
    a = rng.uniform(0.05, 0.25, (w.size, 7)) * np.array([1, 0.8, 1, 0.8, 1, 1, 1])
    ph = rng.uniform(0, 2 * np.pi, (w.size, 7))
    t = np.arange(int(duration * rate) + 1) / rate
    x = np.minimum(1.0, t / 3.0)[:, None]
    fade = x ** 3 * (10 - 15 * x + 6 * x ** 2)
    s = np.einsum("lj,tlj->tj", a, np.sin(w[None, :, None] * t[:, None, None] + ph[None]))
    q = Q0 + fade * (s - np.einsum("lj,lj->j", a, np.sin(ph)))
    dq = np.gradient(q, t, axis=0)
    return [(float(t[k]), q[k], dq[k], None) for k in range(t.size)]


@pytest.fixture(scope="module")
def friction_arm(tmp_path_factory):
    """A simulated LWR (links 5 % off the description) whose torque sensor reads viscous friction and a
    bias; a coefficient file identified from one multi-sine (least squares, viscous + offset) and a
    CSV of another motion. Returns (desc, params path, test CSV path)."""
    from payload_estimation.sim import SensorConfig, SimConfig, SimulatedArm
    from payload_estimation.sim.recorders import record_trajectory

    desc = load_robot("lwr4")

    def record(seed: int):
        sensor = SensorConfig(noise_std=0.05, offset=OFFSET, viscous=VISCOUS, sensor_sees_friction=True)
        arm = SimulatedArm(desc, SimConfig(seed=1, model_error=0.05, sensor=sensor))
        return record_trajectory(arm, multisine(seed, 15.0), 500.0, q_start=Q0)

    folder = tmp_path_factory.mktemp("friction_arm")
    model = identify_robot(desc, record(2), IdentificationOptions(friction="viscous+offset", velocity="recorded"))
    params = model.save(folder / "params.yaml")
    data = write_samples_csv(record(3), folder / "other_motion.csv", precision=12)
    return desc, params, data


def _residual_json(capsys, *args) -> dict:
    assert cli_main(["residual", *args, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


@pytest.mark.slow
def test_residual_on_identified_model_holds_the_friction(friction_arm, capsys):
    """On a motion the model was not identified from, the description's residual shows the sensor's
    friction and bias (several N m); the identified model's stays within a few tenths."""
    desc, params, data = friction_arm
    nominal = _residual_json(capsys, "--robot", "lwr4", "--data", str(data))
    ident = _residual_json(capsys, "--robot", "lwr4", "--data", str(data), "--params", str(params))
    r_nom = np.array(nominal["max_abs_residual_outside_events"])
    r_id = np.array(ident["max_abs_residual_outside_events"])
    assert ident["dynamic_model"] == "coefficients" and not ident["events"]
    np.testing.assert_allclose(ident["friction"]["viscous"], VISCOUS, atol=0.05)
    np.testing.assert_allclose(ident["friction"]["offset"], OFFSET, atol=0.1)
    assert r_nom.max() > 2.0  # friction (up to 2.5 N m s/rad) and bias in the description's residual
    assert r_id.max() < 0.6, r_id
    assert np.all(r_id[:4] < 0.35 * r_nom[:4]), (r_id, r_nom)


def test_identified_link_set_realises_the_coefficients(friction_arm):
    """The coefficient file's link set (K p = π_b) has the coefficients' dynamics exactly: pinocchio's
    inverse dynamics of it plus the file's friction equals the regressor prediction (random states);
    it carries a payload like any link set (against RigidBodyDynamics where both apply)."""
    desc, params, _ = friction_arm
    model = IdentifiedModel.load(params)
    dm = load_dynamic_model(str(params), desc)
    dyn, own = RigidBodyDynamics(desc), dm.dynamics()
    rng = np.random.default_rng(4)
    for _ in range(5):
        q, dq, ddq = rng.normal(size=(3, desc.n))
        want = model.predict(dyn, q, dq, ddq)[0]
        np.testing.assert_allclose(own.inverse_dynamics(q, dq, ddq) + dm.friction.torque(dq), want, atol=1e-9)
    payload = BodyInertia(2.0, np.array([0.01, 0.02, 0.1]), np.diag([0.01, 0.02, 0.015]))
    q, dq, ddq = rng.normal(size=(3, desc.n))
    np.testing.assert_allclose(ParameterDynamics(desc).with_payload(payload).inverse_dynamics(q, dq, ddq),
                               RigidBodyDynamics(desc, payload).inverse_dynamics(q, dq, ddq), atol=1e-10)


def test_link_set_file_and_refusals(tmp_path, friction_arm):
    """A robot YAML with a friction mapping (what `identify --physical` writes) gives its links and
    friction; a file of other joints is refused with the reason."""
    desc, params, _ = friction_arm
    fr = JointFriction(VISCOUS.copy(), np.zeros(7), OFFSET.copy())
    path = tmp_path / "links.yaml"
    write_identified_robot("lwr4", desc, list(desc.links), path, friction=fr)
    dm = load_dynamic_model(str(path), desc)
    assert dm.kind == "link set" and "viscous+offset" in dm.note
    np.testing.assert_allclose(dm.friction.viscous, VISCOUS)
    np.testing.assert_allclose(dm.friction.offset, OFFSET)
    doc = yaml.safe_load(params.read_text())
    doc["joint_names"] = [f"A{k + 1}" for k in range(7)]
    other = tmp_path / "other.yaml"
    other.write_text(yaml.safe_dump(doc))
    with pytest.raises(TorqueModelError, match="belongs to another robot model"):
        load_dynamic_model(str(other), desc)


def test_observer_subtracts_the_friction_offset():
    """A sensor bias at rest is no external torque for an observer that knows it (friction offset)."""
    dyn = RigidBodyDynamics(load_robot("lwr4"))
    tau = dyn.gravity(Q0) + OFFSET
    plain = MomentumObserver(dyn, 150.0)
    known = MomentumObserver(dyn, 150.0, friction=make_friction(7, offset=OFFSET))
    for k in range(200):
        r_plain = plain.update(k * 1e-3, Q0, np.zeros(7), tau)
        r_known = known.update(k * 1e-3, Q0, np.zeros(7), tau)
    np.testing.assert_allclose(r_plain, -OFFSET, atol=1e-6)  # an extra measured torque reads as -tau_ext
    np.testing.assert_allclose(r_known, 0.0, atol=1e-9)


@pytest.mark.needs_data(dataset(f"{LWR}/measurements_1.csv"), dataset(f"{LWR}/measurements_3.csv"))
@pytest.mark.slow
def test_real_lwr_residual_on_least_squares_model(tmp_path, capsys):
    """Real LWR 4+ (no contact): the description alone raises false alarms at 6 N m on the unseen
    excitation; coefficients fitted on measurements_1 (least squares with viscous + Coulomb + offset, a
    few seconds) raise none on measurements_3."""
    from payload_estimation.files.recording import load_recording
    from payload_estimation.signals.resample import derive_velocity

    urdf = dataset(f"{LWR}/kuka_lwr4_gaz.urdf")
    desc = load_robot(urdf)
    train, _ = derive_velocity(load_recording(dataset(f"{LWR}/measurements_1.csv"), desc).samples, "measurements_1")
    model = identify_robot(desc, train, IdentificationOptions(friction="viscous+coulomb+offset", velocity="recorded"))
    params = model.save(tmp_path / "lwr_ls.yaml")
    data = str(dataset(f"{LWR}/measurements_3.csv"))
    nominal = _residual_json(capsys, "--robot", str(urdf), "--data", data)
    ident = _residual_json(capsys, "--robot", str(urdf), "--data", data, "--params", str(params))
    assert len(nominal["events"]) >= 4
    assert not ident["events"]
    assert ident["max_abs_residual_outside_events_overall"] < 5.0


def test_gravity_coefficients_as_observer_model(tmp_path):
    """A gravity model with offsets (`identify --gravity-only`) gives the observer its g and sensor bias
    exactly (M and C stay the description's): 5 % heavier links and a bias, 60 static poses."""
    from payload_estimation.identification.robot_identification import identify_gravity, random_configurations
    from payload_estimation.signals.samples import Samples

    desc = load_robot("lwr4")
    dyn = RigidBodyDynamics(desc)
    q = random_configurations(desc, 60, seed=3)
    model = identify_gravity(desc, Samples(q, np.array([1.05 * dyn.gravity(x) + OFFSET for x in q])), offset=True)
    dm = load_dynamic_model(str(model.save(tmp_path / "gravity.yaml")), desc)
    own = dm.dynamics()
    np.testing.assert_allclose(dm.friction.offset, OFFSET, atol=1e-9)
    for x in q[:5]:
        np.testing.assert_allclose(own.gravity(x), 1.05 * dyn.gravity(x), atol=1e-9)
    np.testing.assert_allclose(own.mass_matrix(q[0]), dyn.mass_matrix(q[0]), rtol=0.1, atol=0.05)
