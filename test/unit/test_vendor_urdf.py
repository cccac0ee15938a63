"""Robot descriptions exactly as their vendors ship them (test/data/urdf, issue 47): CAD-rounded angles
(Kinova Gen3: ``rpy="1.5708 -5.5511E-17 ..."``), collision-only side links beside the chain (franka_ros's
expanded Panda: ``panda_link7_sc``), no ``<inertial>`` at all (that Panda), and ``${...}`` left inside a
``<ros2_control>`` block of an expanded URDF (Kinova's gen3_2f85.urdf).

Independent references: pinocchio's own URDF parser on the same text, and an exact-angle rewrite of the
vendor file made here.
"""

from __future__ import annotations

import json
import logging
import re

import numpy as np
import pinocchio as pin
import pytest
from data_paths import urdf

from payload_estimation.cli.command_line import main
from payload_estimation.model.base_parameters import compute_base_parameters, sample_regressor
from payload_estimation.model.description import RobotDescriptionError
from payload_estimation.model.dynamics import RigidBodyDynamics
from payload_estimation.model.parameters import BodyInertia
from payload_estimation.model.robot_file import load_robot, robot_from_description
from payload_estimation.model.urdf_tree import snap_written

GEN3 = urdf("kinova_gen3_v12_vision")
PANDA = urdf("franka_panda_fer")
GEN3_JOINTS = [f"Actuator{i}" for i in range(1, 8)]


pytestmark = pytest.mark.usefixtures("private_symbolic_cache")


@pytest.fixture(autouse=True)
def _cli_log_to_this_tests_stderr():
    """The command line's log handler writes to the sys.stderr of the main() call that made it: make it anew."""
    def drop():
        logger = logging.getLogger("payload_estimation")
        for h in [h for h in logger.handlers if getattr(h, "_payload_estimation_cli", False)]:
            logger.removeHandler(h)

    drop()
    yield
    drop()


def exact_angles(text: str) -> str:
    """The vendor text with the angles it means: 1.5708 -> pi/2, 3.1416 -> pi, 1e-17 residues -> 0."""
    text = re.sub(r'(?<![\d.])1\.5708(?![\d])', repr(np.pi / 2), text)
    text = re.sub(r'(?<![\d.])3\.1416(?![\d])', repr(np.pi), text)
    text = text.replace("3.14159265358979 ", repr(np.pi) + " ")
    return re.sub(r'-?\d+(\.\d+)?E-(1[5-9]|[2-9]\d)', "0", text)


def pinocchio_model(text: str) -> pin.Model:
    """pinocchio's parse, continuous joints as revolute (one angle each, as ours; pinocchio's own take cos, sin)."""
    return pin.buildModelFromXML(text.replace('type="continuous"', 'type="revolute"'))


def pinocchio_gravity(text: str, q: np.ndarray) -> np.ndarray:
    model = pinocchio_model(text)
    return pin.computeGeneralizedGravity(model, model.createData(), q)


def random_q(desc, count: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    lo, hi = np.maximum(desc.limits.position[:, 0], -np.pi), np.minimum(desc.limits.position[:, 1], np.pi)
    return rng.uniform(lo, hi, (count, desc.n))


# ------------------------------------------------------------------------------------------ 1. rounded angles
@pytest.mark.parametrize(("written", "step", "meant"), [
    ("1.5708", np.pi / 2, np.pi / 2), ("-1.5708", np.pi / 2, -np.pi / 2), ("3.1416", np.pi / 2, np.pi),
    ("1.57", np.pi / 2, np.pi / 2), ("3.14", np.pi / 2, np.pi), ("6.28", np.pi / 2, 2 * np.pi),
    ("3.14159265358979", np.pi / 2, np.pi), ("-5.5511E-17", np.pi / 2, 0.0), ("1.2E-07", np.pi / 2, 0.0),
    ("1.5700", np.pi / 2, None), ("1.570022855", np.pi / 2, None), ("1.6", np.pi / 2, None),
    ("0.001", np.pi / 2, None), ("0.7854", np.pi / 2, None), ("1.5707963267948966", np.pi / 2, None),
    ("0.9999", 1.0, 1.0), ("2.2E-16", 1.0, 0.0), ("0.7071", 1.0, None),
])
def test_a_number_is_read_as_the_multiple_it_rounds_to_its_written_decimals(written, step, meant):
    got = snap_written(written, step)
    assert got == (None if meant is None else pytest.approx(meant, abs=1e-15))


def test_kinova_gen3_as_shipped_has_the_structure_of_its_exact_angles(caplog):
    """16 gravity coefficients with couplings like 1837/1000000000*c6z*m6 and cond(Y_b) ~ 1e17 before; now the
    exact-angle rewrite's 12 and the same base columns, said in one note with the count and the largest correction."""
    from payload_estimation.model.symbolic import derive

    text = GEN3.read_text()
    exact = exact_angles(text)
    assert "1.5708" in text and "1.5708" not in exact and "E-17" not in exact
    with caplog.at_level(logging.WARNING):
        shipped = load_robot(GEN3)
    notes = [r.getMessage() for r in caplog.records if "read as the exact values" in r.getMessage()]
    assert len(notes) == 1, notes
    assert re.search(r"kinova_gen3_v12_vision.urdf: 23 joint <origin>/<axis> numbers read as the exact values they "
                     r"round .*largest correction 7.3e-06 rad \(joint Actuator1 rpy\[0\]: 3.1416 -> pi\)", notes[0])
    assert [n for lvl, n in shipped.notes if lvl == "warning"] == notes
    reference = robot_from_description(exact, source="gen3_exact.urdf")
    assert not [n for _, n in reference.notes if "read as the exact values" in n]  # nothing above 1e-12 to snap
    assert list(shipped.joint_names) == GEN3_JOINTS
    for a, b in zip(shipped.joints, reference.joints):
        np.testing.assert_allclose(a.pre, b.pre, rtol=0, atol=1e-15)
        np.testing.assert_array_equal(a.axis, b.axis)
    g_shipped, g_exact = derive(shipped, "gravity"), derive(reference, "gravity")
    assert len(g_shipped.coefficients) == len(g_exact.coefficients) == 12
    assert [str(c) for c in g_shipped.coefficients] == [str(c) for c in g_exact.coefficients]
    assert "1837/1000000000" not in " ".join(map(str, g_shipped.coefficients))
    # the numeric base columns (what excite's cond(Y_b) is made of) are the exact file's
    dyn, dyn_exact = RigidBodyDynamics(shipped), RigidBodyDynamics(reference)
    base, base_exact = compute_base_parameters(dyn, "full"), compute_base_parameters(dyn_exact, "full")
    assert base.rank == base_exact.rank
    np.testing.assert_array_equal(base.independent, base_exact.independent)
    cond = np.linalg.cond(base.base_regressor(sample_regressor(dyn, "full", 60, seed=3)))
    cond_exact = np.linalg.cond(base_exact.base_regressor(sample_regressor(dyn_exact, "full", 60, seed=3)))
    assert cond < 1e6 and cond == pytest.approx(cond_exact, rel=1e-6)


def test_pinocchio_agrees_with_the_snapped_kinova_model():
    """Our model of the shipped file equals pinocchio's parse of the exact-angle text to 1e-9 N m (and the payload
    frame to 1e-12); against pinocchio's parse of the rounded text it differs by what the rounding is worth."""
    shipped = load_robot(GEN3)
    text = GEN3.read_text()
    exact = exact_angles(text)
    model = pinocchio_model(exact)
    data = model.createData()
    assert list(model.names)[1:] == GEN3_JOINTS
    tip = model.getFrameId("EndEffector_Link")
    dyn = RigidBodyDynamics(shipped)
    worst = 0.0
    for q in random_q(shipped, 8, seed=5):
        g = dyn.gravity(q)
        assert np.max(np.abs(g)) > 1.0
        np.testing.assert_allclose(g, pin.computeGeneralizedGravity(model, data, q), rtol=0, atol=1e-9)
        pin.framesForwardKinematics(model, data, q)
        np.testing.assert_allclose(dyn.forward_kinematics(q, "payload"), data.oMf[tip].homogeneous, rtol=0, atol=1e-12)
        worst = max(worst, np.max(np.abs(g - pinocchio_gravity(text, q))))
    assert 1e-9 < worst < 1e-3  # the rounding is worth microradians: 1e-4 N m, never structure


def test_coefficients_command_on_the_shipped_kinova_file(capsys, caplog):
    with caplog.at_level(logging.WARNING):
        assert main(["coefficients", "--robot", str(GEN3), "--gravity"]) == 0
    out = capsys.readouterr()
    assert "GEN3_URDF_V12: 12 gravity coefficients" in out.out and "payload frame: EndEffector_Link" in out.out
    assert "/1000000000*c6z*m6" not in out.out
    assert "23 joint <origin>/<axis> numbers read as the exact values" in caplog.text
    assert "note: " in out.err and "tip link EndEffector_Link (the payload frame) chosen by default" in out.err


# ------------------------------------------------------------------------------------------ 2. side branches
def test_panda_collision_side_links_are_not_the_tip_the_flange_panda_link8_is(caplog):
    """panda_link7 carries panda_link7_sc (collision only) and panda_link8 (the flange, 107 mm on): the payload frame
    was panda_link7, 107 mm off the flange; the choice is said with its reason."""
    with caplog.at_level(logging.INFO, logger="payload_estimation"):
        desc = load_robot(PANDA)
    assert desc.joint_names == tuple(f"panda_joint{i}" for i in range(1, 8))
    assert desc.payload_frame_name == "panda_link8"
    np.testing.assert_allclose(desc.flange[:3, 3], [0, 0, 0.107], rtol=0, atol=1e-15)
    np.testing.assert_allclose(desc.payload_frame, desc.flange, rtol=0, atol=0)
    tip_notes = [n for lvl, n in desc.notes if "chosen by default" in n]
    assert len(tip_notes) == 1 and tip_notes[0] in caplog.text
    assert re.search(r"franka_panda_fer.urdf: tip link panda_link8 \(the payload frame\) chosen by default: the last "
                     r"link moved by the chain \(panda_link7, joint panda_joint7\), continued through fixed joints to "
                     r"panda_link8; collision-only side links not followed: panda_link7_sc\. For another, set "
                     r"tip_link \(--tip-link", tip_notes[0])
    # pinocchio's panda_link8 frame is our payload frame
    model = pinocchio_model(PANDA.read_text())
    data = model.createData()
    q = random_q(desc, 1, seed=2)[0]
    pin.framesForwardKinematics(model, data, q)
    np.testing.assert_allclose(RigidBodyDynamics(desc).forward_kinematics(q, "payload"),
                               data.oMf[model.getFrameId("panda_link8")].homogeneous, rtol=0, atol=1e-12)
    assert load_robot(PANDA, tip_link="panda_link7").payload_frame_name == "panda_link7"  # still on request


def test_kinova_gen3_tip_is_the_vendors_end_effector_link():
    desc = load_robot(GEN3)
    assert desc.payload_frame_name == "EndEffector_Link"  # joint "EndEffector" (fixed) below Bracelet_Link
    np.testing.assert_allclose(desc.flange[:3, 3], [0, 0, -0.061525], rtol=0, atol=1e-15)
    np.testing.assert_allclose(desc.flange[:3, :3], np.diag([1.0, -1.0, -1.0]), rtol=0, atol=1e-15)


GRIPPER = """
  <link name="gripper_base"><inertial><origin xyz="0 0 0.03"/><mass value="0.66"/>
    <inertia ixx="5e-4" iyy="5e-4" izz="4e-4"/></inertial></link>
  <link name="finger_a"><inertial><mass value="0.05"/><inertia ixx="1e-5" iyy="1e-5" izz="1e-5"/></inertial></link>
  <link name="finger_b"><inertial><mass value="0.05"/><inertia ixx="1e-5" iyy="1e-5" izz="1e-5"/></inertial></link>
  <joint name="gripper_mount" type="fixed"><parent link="EndEffector_Link"/><child link="gripper_base"/></joint>
  <joint name="finger_a_joint" type="revolute"><parent link="gripper_base"/><child link="finger_a"/>
    <origin xyz="0.03 0 0.055"/><axis xyz="0 -1 0"/><limit lower="0" upper="0.8" effort="50" velocity="0.5"/></joint>
  <joint name="finger_b_joint" type="revolute"><parent link="gripper_base"/><child link="finger_b"/>
    <origin xyz="-0.03 0 0.055"/><axis xyz="0 -1 0"/><limit lower="-0.8" upper="0" effort="50" velocity="0.5"/>
    <mimic joint="finger_a_joint" multiplier="-1"/></joint>
  <link name="camera_mount"><inertial><mass value="0.5"/><inertia ixx="6e-4" iyy="4e-4" izz="6e-4"/></inertial></link>
  <joint name="camera_mount_joint" type="fixed"><parent link="Bracelet_Link"/><child link="camera_mount"/></joint>
  <link name="wrist_camera_link"/>
  <joint name="wrist_camera_joint" type="fixed"><parent link="Bracelet_Link"/><child link="wrist_camera_link"/>
    <origin xyz="0 -0.06841 -0.05044" rpy="0 1.7444444444444447 -1.5708"/></joint>
"""

CAMERA_FRAMES = "".join(
    f'<link name="{f}"/><joint name="{f}_joint" type="fixed"><parent link="EndEffector_Link"/><child link="{f}"/>'
    f'<origin xyz="0 0.05639 -0.00305" rpy="3.14159265358979 3.14159265358979 0"/></joint>'
    for f in ("camera_link", "camera_depth_frame", "camera_color_frame"))


def test_of_several_fixed_branches_the_tool_is_followed_and_equal_ones_stop_with_a_warning(caplog):
    """Gen3 + a gripper and a wrist camera (Kinova's gen3_2f85.urdf, as a Robotiq 2F-85 is mounted): the tip was
    Bracelet_Link, silently. The branch with the gripper's joints is followed; three camera frames on the end-effector
    link (ros2_kortex's vision module) leave the tip there, with a warning naming them."""
    text = GEN3.read_text()
    with_tool = robot_from_description(text.replace("</robot>", GRIPPER + "</robot>"), source="gen3_2f85")
    assert with_tool.payload_frame_name == "gripper_base"
    note = next(n for _, n in with_tool.notes if "chosen by default" in n)
    assert ("at Bracelet_Link the branch with a tool (joints off the chain) followed: EndEffector_Link, not "
            "camera_mount, wrist_camera_link") in note
    with caplog.at_level(logging.WARNING):
        cameras = robot_from_description(text.replace("</robot>", CAMERA_FRAMES + "</robot>"), source="gen3_vision")
    assert cameras.payload_frame_name == "EndEffector_Link"
    level, note = next((lvl, n) for lvl, n in cameras.notes if "chosen by default" in n)
    assert level == "warning" and note in caplog.text
    assert ("stopped at EndEffector_Link: its fixed branches camera_link, camera_depth_frame, camera_color_frame are "
            "alike") in note


def test_two_real_arms_with_side_links_name_the_candidates_and_the_option():
    """Two Pandas on one root (each with its *_sc side links): no rule decides; the error lists both flanges."""
    arm = PANDA.read_text().split("<robot name=\"panda\">", 1)[1].rsplit("</robot>", 1)[0]
    left, right = (arm.replace("panda_", f"{side}_") for side in ("left", "right"))
    text = ('<robot name="twins"><link name="torso"/>' + left + right +
            '<joint name="l_mount" type="fixed"><parent link="torso"/><child link="left_link0"/></joint>'
            '<joint name="r_mount" type="fixed"><parent link="torso"/><child link="right_link0"/></joint></robot>')
    with pytest.raises(RobotDescriptionError, match=r"candidate tip links: left_link8, right_link8; set tip_link "
                                                    r"\(--tip-link on the command line, the tip_link node parameter"):
        robot_from_description(text)
    assert robot_from_description(text, tip_link="right_link8").joint_names[0] == "right_joint1"


class _Logger:
    def __init__(self):
        self.lines: list[tuple[str, str]] = []

    def info(self, text, **_):
        self.lines.append(("info", text))

    def warning(self, text, **_):
        self.lines.append(("warning", text))

    def error(self, text, **_):
        self.lines.append(("error", text))


class _Node:
    def __init__(self):
        self.logger = _Logger()

    def get_logger(self):
        return self.logger


def test_the_nodes_log_the_tip_choice_and_the_snapping():
    """RobotModelSource (every node's model) logs what loading decided through the node's logger."""
    from payload_estimation.ros.robot_model_source import RobotModelSource

    for path, expected in ((PANDA, ("info", "tip link panda_link8 (the payload frame) chosen by default")),
                           (GEN3, ("warning", "23 joint <origin>/<axis> numbers read as the exact values"))):
        node = _Node()
        RobotModelSource(node, {"robot": str(path)}, on_model=lambda desc: None)
        assert any(lvl == expected[0] and expected[1] in text for lvl, text in node.logger.lines), node.logger.lines


# ------------------------------------------------------------------------------------------ 3. no inertials
def _panda_truth():
    """The vendor Panda's kinematics with franka's FR3 link masses (the same arm family): a robot to record."""
    return load_robot(PANDA).with_links(load_robot(urdf("fr3")).links)


def test_without_masses_the_warning_says_what_works_and_what_is_refused(caplog):
    with caplog.at_level(logging.WARNING):
        desc = load_robot(PANDA)
    assert all(b.mass == 0 for b in desc.links)
    assert "fine for gravity and residual work" not in caplog.text
    warning = next(n for _, n in desc.notes if "no moving link has a mass" in n)
    assert warning in caplog.text
    for words in ("Works without masses: the payload from loaded and unloaded captures (estimate --unloaded",
                  "least-squares identification of the coefficients (identify --unconstrained or --gravity-only)",
                  "Refused until a dynamic model is given: the collision residual, a one-shot payload estimate",
                  "the collision monitor", "Fix: identify the robot", "--params params.yaml", "dynamic_model"):
        assert words in warning


def test_residual_without_params_is_refused_on_a_robot_without_masses(capsys):
    """At rest, the Panda's own weight (up to 18 N m at joint 2 with FR3-like masses) read as a collision before."""
    truth = RigidBodyDynamics(_panda_truth())
    assert np.max(np.abs(truth.gravity(np.radians([0, -45, 0, -135, 0, 90, 45])))) > 15.0
    assert main(["residual", "--robot", str(PANDA), "--data", "run.csv"]) == 1
    err = capsys.readouterr().err.splitlines()
    assert err[0].startswith("WARNING payload_estimation.model.description: robot 'panda': no moving link has a mass")
    assert "tip link panda_link8" in err[1] and len(err) == 3
    err = err[2]
    assert err.startswith("payload-estimation residual: error: robot 'panda' has no link masses")
    assert "the collision residual against the robot description (no --params) needs its dynamic model" in err
    assert "identify the robot" in err and "--params params.yaml" in err


def _write_csv(path, columns: dict[str, np.ndarray]):
    """A recording as the commands read it: ``t`` and per-joint blocks ``q`` -> q1..q7, ``tau`` -> tau1..tau7."""
    header = ["t"] + [f"{key}{i}" for key, v in columns.items() if key != "t" for i in range(1, v.shape[1] + 1)]
    rows = np.column_stack(list(columns.values()))
    path.write_text(",".join(header) + "\n" + "\n".join(",".join(f"{v:.12g}" for v in row) for row in rows) + "\n")
    return path


def test_identified_coefficients_give_the_residual_the_model_the_urdf_lacks(tmp_path, capsys):
    """What works without masses, end to end: identify --unconstrained on an excitation run (the consistent default
    refuses with that fix), then residual --params at rest: no collision (the description gave 19 N m on joint 4)."""
    truth = RigidBodyDynamics(_panda_truth())
    period, harmonics, w = 10.0, 3, 2 * np.pi / 10.0
    rng = np.random.default_rng(4)
    a, b = rng.uniform(-0.25, 0.25, (2, 7, harmonics))
    q0 = np.radians([0, -30, 0, -120, 0, 90, 45])
    t = np.arange(0, 2 * period, 0.01)
    k = np.arange(1, harmonics + 1) * w
    s, c = np.sin(np.outer(t, k)), np.cos(np.outer(t, k))
    q, dq, ddq = q0 + s @ a.T + c @ b.T, (c * k) @ a.T - (s * k) @ b.T, -(s * k * k) @ a.T - (c * k * k) @ b.T
    tau = np.array([truth.inverse_dynamics(*x) for x in zip(q, dq, ddq)]) + rng.normal(0, 0.05, q.shape)
    run = _write_csv(tmp_path / "run.csv", {"t": t, "q": q, "dq": dq, "ddq": ddq, "tau": tau})
    params = tmp_path / "params.yaml"
    common = ["identify", "--robot", str(PANDA), "--data", str(run), "--period", str(period), "--harmonics",
              str(harmonics), "--out", str(params)]
    assert main(common) == 1
    assert ("robot 'panda' has no link masses: the physically consistent fit (identify's default, --physical) starts "
            "from them; identify its coefficients by least squares (--unconstrained)") in capsys.readouterr().err
    assert main([*common, "--unconstrained"]) == 0 and params.is_file()
    capsys.readouterr()
    q_rest = np.radians([0, -45, 0, -135, 0, 90, 45])
    assert np.max(np.abs(truth.gravity(q_rest))) > 18.0
    t_rest = np.arange(0, 2.0, 0.001)
    rest = _write_csv(tmp_path / "rest.csv", {"t": t_rest, "q": np.tile(q_rest, (t_rest.size, 1)),
                                              "dq": np.zeros((t_rest.size, 7)),
                                              "tau": truth.gravity(q_rest) + rng.normal(0, 0.01, (t_rest.size, 7))})
    assert main(["residual", "--robot", str(PANDA), "--data", str(rest), "--params", str(params), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["events"] == [] and out["max_abs_residual_outside_events_overall"] < 0.5


def _captures(dyn, payload, path, seed):
    rng = np.random.default_rng(seed)
    q0 = np.radians([0, -30, 0, -120, 0, 90, 45])
    q = q0 + np.radians(7) * rng.uniform(-1, 1, (10, 7))
    loaded = dyn.with_payload(payload) if payload is not None else dyn
    tau = np.array([loaded.gravity(qk) for qk in q]) + rng.normal(0, 0.02, q.shape)
    return _write_csv(path, {"t": 1.5 * np.arange(len(q)), "q": q, "tau": tau})


def test_a_payload_estimate_without_masses_needs_unloaded_captures(tmp_path, capsys):
    """Differential (loaded and unloaded captures of the same poses) needs only the kinematics: it recovers the
    payload at panda_link8; one-shot against the massless description is refused with the fix."""
    truth = RigidBodyDynamics(_panda_truth())
    payload = BodyInertia(2.0, np.array([0.01, -0.02, 0.05]), np.diag([4e-3, 4e-3, 2e-3]))
    loaded = _captures(truth, payload, tmp_path / "loaded.csv", seed=1)
    unloaded = _captures(truth, None, tmp_path / "unloaded.csv", seed=1)
    assert main(["estimate", "--robot", str(PANDA), "--samples", str(loaded), "--json"]) == 1
    err = capsys.readouterr().err
    assert ("robot 'panda' has no link masses (no <inertial> in its description): a one-shot payload estimate against "
            "the robot description (no --unloaded or --model) needs its dynamic model") in err
    assert "--unloaded" in err.splitlines()[-1]
    assert main(["estimate", "--robot", str(PANDA), "--samples", str(loaded), "--unloaded", str(unloaded),
                 "--json"]) == 0
    est = json.loads(capsys.readouterr().out)
    assert est["frame"] == "panda_link8"
    assert est["mass"] == pytest.approx(2.0, abs=0.02)
    np.testing.assert_allclose(est["com"], payload.com, atol=3e-3)


def test_the_static_core_and_the_monitor_refuse_the_massless_nominal_model():
    """The estimator node's one-shot fit (payload.static) and the collision monitor with dynamic_model '' take the
    description as the unloaded robot: refused, with the fix (ParameterError: the node refuses the model)."""
    from payload_estimation.payload.static import StaticFitConfig, estimate_payload_static
    from payload_estimation.ros.monitor_params import PARAMS
    from payload_estimation.ros.monitor_setup import monitor_supervisor
    from payload_estimation.ros.parameters import ParameterError

    desc = load_robot(PANDA)
    dyn = RigidBodyDynamics(desc)
    q = random_q(desc, 4, seed=1)
    tau = np.array([RigidBodyDynamics(_panda_truth()).gravity(qk) for qk in q])
    with pytest.raises(RobotDescriptionError, match=r"a one-shot payload estimate against the robot description \(no "
                                                    r"unloaded captures\) needs its dynamic model; identify the robot"):
        estimate_payload_static(dyn, q, tau, None, None, StaticFitConfig())
    defaults = {p.name: p.default for p in PARAMS.params}
    with pytest.raises(ParameterError, match=r"dynamic_model '': robot 'panda' has no link masses .*the collision "
                                             r"monitor with dynamic_model '' \(the robot description\) needs its "
                                             r"dynamic model; identify the robot .*dynamic_model parameter"):
        monitor_supervisor(desc, defaults)


# ------------------------------------------------------------------------------------------ 4. ros2_control text
ROS2_CONTROL = """
  <ros2_control name="${prefix}KortexMultiInterfaceHardware" type="system">
    <hardware><plugin>kortex2_driver/KortexMultiInterfaceHardware</plugin>
      <param name="tf_prefix">"${prefix}"</param></hardware>
    <joint name="Actuator1"><command_interface name="position">
      <param name="min">${-2*pi}</param><param name="max">${2*pi}</param></command_interface>
      <state_interface name="position"/><state_interface name="effort"/></joint>
  </ros2_control>
  <gazebo><plugin filename="libgz_ros2_control-system.so" name="gz_ros2_control::GazeboSimROS2ControlPlugin">
    <parameters>$(find kortex_description)/config/ros2_controllers.yaml</parameters></plugin></gazebo>
"""


def test_xacro_text_inside_ros2_control_or_gazebo_blocks_is_ignored_like_the_blocks(tmp_path):
    """An expanded URDF whose only ${...} / $(...) sit in the blocks the reader ignores loads (Kinova's
    gen3_2f85.urdf keeps ${-2*pi} in its ros2_control limits); the same text outside them is still xacro."""
    text = GEN3.read_text().replace("</robot>", ROS2_CONTROL + "</robot>")
    f = tmp_path / "gen3_ros2_control.urdf"
    f.write_text(text)
    for desc in (load_robot(f), robot_from_description(text)):
        assert list(desc.joint_names) == GEN3_JOINTS and desc.payload_frame_name == "EndEffector_Link"
    outside = text.replace('<mass value="1.697" />', '<mass value="${base_mass}" />')
    with pytest.raises(RobotDescriptionError, match="is xacro, not URDF: expand it first"):
        robot_from_description(outside)
