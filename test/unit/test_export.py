"""Export formats of a payload estimate, each checked against what its consumer documents.

- URDF: the snippet, inserted into a real stack's URDF (lbr iiwa14 as robot_state_publisher publishes
  it), loaded by pinocchio's own URDF parser: its gravity equals our model with the estimate attached.
- KUKA load data: Rz(A) Ry(B) Rx(C) diag(JX, JY, JZ) (...)ᵀ rebuilds the inertia about the CoM
  (KRL ``$LOAD``: M kg, CM X/Y/Z mm and A/B/C deg, J X/Y/Z kg m²); a hand-worked example.
- franka ``SetLoad``: mass, center_of_mass (m), load_inertia column-major 3x3 (kg m²), nothing else.
- KUKA and franka files read back as the vendor defines them (flange frame, mm/kg, A/B/C ZYX, inertia
  about the CoM, column-major), attached by pinocchio at the model's flange, give the estimate's own
  gravity and inverse dynamics at random states (lwr4: flange 0.078 m from the payload frame).
- YAML and the command line.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pinocchio as pin
import pytest
import yaml
from data_paths import urdf

from payload_estimation.files.exports import (
    ExportError,
    export_text,
    franka_set_load,
    kuka_load_data,
    principal_axes,
    urdf_snippet,
    write_exports,
    yaml_float,
    yaml_record,
)
from payload_estimation.model.dynamics import RigidBodyDynamics, build_pinocchio_model
from payload_estimation.model.parameters import vec6_from_sym
from payload_estimation.model.robot_file import load_robot, robot_from_description
from payload_estimation.payload.estimate import PayloadEstimate

ROOT = Path(__file__).resolve().parents[2]
IIWA_URDF = urdf("iiwa14")


def rot(axis: str, deg: float) -> np.ndarray:
    c, s = np.cos(np.radians(deg)), np.sin(np.radians(deg))
    return {"x": np.array([[1, 0, 0], [0, c, -s], [0, s, c]]),
            "y": np.array([[c, 0, s], [0, 1, 0], [-s, 0, c]]),
            "z": np.array([[c, -s, 0], [s, c, 0], [0, 0, 1]])}[axis]


def estimate(inertia_c: np.ndarray | None, frame: str = "lbr_link_ee") -> PayloadEstimate:
    i6 = None if inertia_c is None else vec6_from_sym(inertia_c)
    return PayloadEstimate(2.5, np.array([0.03, -0.02, 0.11]), i6, frame, std={"mass": 0.01}, method="test")


ROTATED = rot("z", 30.0) @ rot("y", -20.0) @ rot("x", 10.0)
INERTIA = ROTATED @ np.diag([0.012, 0.02, 0.006]) @ ROTATED.T
IIWA = load_robot("iiwa14")  # payload frame lbr_link_ee = the flange
LWR = load_robot("lwr4")  # payload frame DH frame 7, the flange 0.078 m along its z


def pose(r: np.ndarray, xyz) -> np.ndarray:
    t = np.eye(4)
    t[:3, :3], t[:3, 3] = r, xyz
    return t


def read_kuka(text: str) -> pin.Inertia:
    """KRL ``$LOAD`` as KUKA defines it: M kg; CM X, Y, Z mm and A, B, C deg (Rz(A) Ry(B) Rx(C): the principal
    axes in the flange frame); J X, Y, Z kg m² principal moments about the CoM."""
    num = r"(-?[\d.]+)"
    m = re.search(rf"\$LOAD=\{{M {num},CM \{{X {num},Y {num},Z {num},A {num},B {num},C {num}\}},"
                  rf"J \{{X {num},Y {num},Z {num}\}}\}}", text)
    assert m, text
    mass, x, y, z, a, b, c, jx, jy, jz = (float(v) for v in m.groups())
    r = rot("z", a) @ rot("y", b) @ rot("x", c)
    return pin.Inertia(mass, np.array([x, y, z]) * 1e-3, r @ np.diag([jx, jy, jz]) @ r.T)


def read_franka(text: str) -> pin.Inertia:
    """franka setLoad: mass kg, centre of mass m in the flange frame, load_inertia column-major about the CoM."""
    d = yaml.safe_load(text)
    assert set(d) == {"mass", "center_of_mass", "load_inertia"}, d  # franka_msgs/srv/SetLoad's request, nothing else
    assert len(d["center_of_mass"]) == 3 and len(d["load_inertia"]) == 9
    assert all(isinstance(x, float) for x in [d["mass"], *d["center_of_mass"], *d["load_inertia"]]), d  # float64
    i = np.reshape(d["load_inertia"], (3, 3), order="F")
    return pin.Inertia(float(d["mass"]), np.asarray(d["center_of_mass"], float), 0.5 * (i + i.T))


def at_flange(desc, load: pin.Inertia) -> RigidBodyDynamics:
    """``desc`` unloaded with ``load`` (given in the flange frame) attached by pinocchio at the model's flange."""
    dyn = RigidBodyDynamics(desc)
    flange = dyn.model.frames[dyn.model.getFrameId("flange")]
    dyn.model.appendBodyToJoint(flange.parentJoint, load, flange.placement)
    dyn.data = dyn.model.createData()
    return dyn


def random_estimate(rng, frame: str) -> PayloadEstimate:
    a = rng.standard_normal((3, 3))
    inertia = 0.01 * (a @ a.T) + 0.002 * np.eye(3)
    return PayloadEstimate(float(rng.uniform(0.5, 5.0)), rng.uniform(-0.1, 0.1, 3) + [0, 0, 0.1],
                           vec6_from_sym(inertia), frame, method="test")


LWR_TURNED = replace(LWR, flange=pose(rot("z", -45.0) @ rot("x", 90.0), [0.01, -0.02, 0.078]))


@pytest.mark.parametrize("desc", [LWR, IIWA, LWR_TURNED], ids=["lwr4", "iiwa14", "lwr4-turned-flange"])
@pytest.mark.parametrize("fmt", ["kuka", "franka"])
def test_vendor_files_read_back_at_the_flange_give_the_estimates_dynamics(desc, fmt, tmp_path):
    rng = np.random.default_rng(7)
    assert build_pinocchio_model(desc).existFrame("flange")
    for _ in range(3):
        est = random_estimate(rng, desc.payload_frame_name)
        path, = write_exports(est, tmp_path, (fmt,), robot=desc)
        text = path.read_text()
        assert "flange frame" in text
        vendor = at_flange(desc, (read_kuka if fmt == "kuka" else read_franka)(text))
        ours = RigidBodyDynamics(desc).with_payload(est.body())
        for _ in range(5):
            q = rng.uniform(*desc.limits.position.T)
            dq, ddq = rng.uniform(-1, 1, desc.n), rng.uniform(-3, 3, desc.n)
            np.testing.assert_allclose(vendor.gravity(q), ours.gravity(q), atol=2e-3)  # file rounding: 0.01 mm
            np.testing.assert_allclose(vendor.inverse_dynamics(q, dq, ddq), ours.inverse_dynamics(q, dq, ddq),
                                       atol=5e-3)


FR3_URDF = urdf("fr3")


def test_the_nodes_robot_description_model_exports_at_the_urdf_tip(tmp_path):
    """The estimator node with its model from robot_description names it 'robot_description': a URDF, whose
    flange is its tip link (fr3_link8 for franka's fr3.urdf, franka's flange F)."""
    desc = load_robot(FR3_URDF)
    assert desc.payload_frame_name == "fr3_link8"
    rng = np.random.default_rng(11)
    est = random_estimate(rng, desc.payload_frame_name)
    paths = {p.name: p.read_text() for p in write_exports(est, tmp_path, model="robot_description")}
    assert "# flange frame: fr3_link8" in paths["payload.franka.yaml"]
    ours = RigidBodyDynamics(desc).with_payload(est.body())
    for fmt, read in (("payload.franka.yaml", read_franka), ("payload.kuka.txt", read_kuka)):
        vendor = at_flange(desc, read(paths[fmt]))
        for _ in range(3):
            q, dq, ddq = rng.uniform(*desc.limits.position.T), rng.uniform(-1, 1, 7), rng.uniform(-3, 3, 7)
            np.testing.assert_allclose(vendor.inverse_dynamics(q, dq, ddq), ours.inverse_dynamics(q, dq, ddq),
                                       atol=5e-3)


FR3_HAND_URDF = urdf("fr3_hand")


def test_franka_with_the_hand_exports_at_franka_s_flange_link8(tmp_path):
    """With the hand in the URDF the payload frame is the hand's TCP (0.103 m and -45° about z from
    fr3_link8); --flange-link fr3_link8 writes the SetLoad request at franka's flange F."""
    hand = load_robot(FR3_HAND_URDF)
    link8 = load_robot(FR3_HAND_URDF, tip_link="fr3_link8")  # same joints; its flange is fr3_link8
    assert hand.payload_frame_name == "fr3_hand_tcp"
    rng = np.random.default_rng(2)
    est = random_estimate(rng, "fr3_hand_tcp")
    (tmp_path / "est.json").write_text(json.dumps(est.to_dict()))
    run = subprocess.run([sys.executable, "-m", "payload_estimation.cli", "export", "--estimate",
                          str(tmp_path / "est.json"), "--robot", str(FR3_HAND_URDF), "--flange-link", "fr3_link8",
                          "--format", "franka"], capture_output=True, text=True, cwd=ROOT)
    assert run.returncode == 0, run.stderr
    assert "# flange frame: fr3_link8" in run.stdout
    vendor, unloaded = at_flange(link8, read_franka(run.stdout)), RigidBodyDynamics(link8)
    ours, ours_unloaded = RigidBodyDynamics(hand).with_payload(est.body()), RigidBodyDynamics(hand)
    for _ in range(5):
        q, dq, ddq = rng.uniform(*hand.limits.position.T), rng.uniform(-1, 1, 7), rng.uniform(-3, 3, 7)
        np.testing.assert_allclose(vendor.inverse_dynamics(q, dq, ddq) - unloaded.inverse_dynamics(q, dq, ddq),
                                   ours.inverse_dynamics(q, dq, ddq) - ours_unloaded.inverse_dynamics(q, dq, ddq),
                                   atol=5e-3)


def test_vendor_files_name_the_flange_and_need_the_robot(tmp_path):
    est = random_estimate(np.random.default_rng(1), LWR.payload_frame_name)
    kuka = export_text(est, "kuka")  # the shipped robot is found from the estimate's frame
    assert "flange frame: lwr4 flange (origin [0, 0, 78] mm in lwr4_dh_frame_7)" in kuka
    assert "flange frame: lbr_link_ee" in export_text(replace(est, frame="lbr_link_ee"), "franka")
    unknown = replace(est, frame="tool0")
    with pytest.raises(ExportError, match="flange frame.*export --robot"):
        export_text(unknown, "kuka")
    with pytest.raises(ExportError, match=r"wrote payload.urdf, payload.yaml .*not written: payload.kuka.txt"):
        write_exports(unknown, tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["payload.urdf", "payload.yaml"]
    with pytest.raises(ExportError, match="payload frame is 'lbr_link_ee'"):
        kuka_load_data(est, IIWA)


def test_urdf_snippet_loaded_by_pinocchio_gives_our_loaded_gravity():
    text = IIWA_URDF.read_text()
    desc = robot_from_description(text)
    est = estimate(INERTIA, desc.payload_frame_name)
    loaded = text.replace("</robot>", urdf_snippet(est) + "</robot>")
    model = pin.buildModelFromXML(loaded)
    data = model.createData()
    ours = RigidBodyDynamics(desc).with_payload(est.body())
    rng = np.random.default_rng(3)
    for _ in range(5):
        q = rng.uniform(*desc.limits.position.T)
        qp = pin.neutral(model)
        for name, value in zip(desc.joint_names, q):
            qp[model.joints[model.getJointId(name)].idx_q] = value
        g = pin.computeGeneralizedGravity(model, data, qp)
        g_by_name = np.array([g[model.joints[model.getJointId(n)].idx_v] for n in desc.joint_names])
        np.testing.assert_allclose(g_by_name, ours.gravity(q), atol=1e-9)
    assert 'parent link="lbr_link_ee"' in loaded


def test_kuka_load_data_rebuilds_the_inertia_and_matches_a_hand_example():
    kuka = kuka_load_data(estimate(INERTIA), IIWA)
    a, b, c = kuka.abc_deg
    r = rot("z", a) @ rot("y", b) @ rot("x", c)
    np.testing.assert_allclose(r @ np.diag(kuka.j_principal) @ r.T, INERTIA, atol=1e-12)
    np.testing.assert_allclose((a, b, c), (30.0, -20.0, 10.0), atol=1e-9)  # the rotation it was built with
    np.testing.assert_allclose(kuka.j_principal, (0.012, 0.02, 0.006), atol=1e-12)
    assert kuka.xyz_mm == pytest.approx((30.0, -20.0, 110.0)) and kuka.mass == 2.5
    krl = kuka.krl()
    m = re.fullmatch(r"\$LOAD=\{M ([\d.]+),CM \{X ([-\d.]+),Y ([-\d.]+),Z ([-\d.]+),A ([-\d.]+),B ([-\d.]+),"
                     r"C ([-\d.]+)\},J \{X ([\d.]+),Y ([\d.]+),Z ([\d.]+)\}\}", krl)
    assert m, krl
    assert [float(x) for x in m.groups()] == pytest.approx([2.5, 30, -20, 110, 30, -20, 10, 0.012, 0.02, 0.006],
                                                          abs=1e-4)


def test_kuka_diagonal_inertia_needs_no_rotation_and_gravity_only_says_so():
    k = kuka_load_data(estimate(np.diag([0.01, 0.02, 0.03])), IIWA)
    assert k.abc_deg == pytest.approx((0.0, 0.0, 0.0), abs=1e-9) and k.j_principal == pytest.approx((0.01, 0.02, 0.03))
    g = kuka_load_data(estimate(None), IIWA)
    assert g.j_principal == (0.0, 0.0, 0.0) and "inertia not estimated" in g.text()


def test_principal_axes_are_a_proper_rotation():
    rng = np.random.default_rng(0)
    for _ in range(50):
        a = rng.standard_normal((3, 3))
        inertia = a @ a.T + 0.01 * np.eye(3)
        w, r = principal_axes(inertia)
        assert np.linalg.det(r) == pytest.approx(1.0) and np.allclose(r.T @ r, np.eye(3))
        np.testing.assert_allclose(r @ np.diag(w) @ r.T, inertia, atol=1e-12)


def test_franka_set_load_arguments():
    d = franka_set_load(estimate(INERTIA), IIWA)
    assert d["mass"] == 2.5 and d["center_of_mass"] == pytest.approx([0.03, -0.02, 0.11])
    np.testing.assert_allclose(np.reshape(d["load_inertia"], (3, 3), order="F"), INERTIA, atol=1e-15)
    assert len(d["load_inertia"]) == 9


def test_yaml_record_and_bad_estimates():
    doc = yaml.safe_load(yaml_record(estimate(INERTIA), model="iiwa14 (identified)"))
    assert doc["mass"] == 2.5 and doc["frame"] == "lbr_link_ee" and doc["model"] == "iiwa14 (identified)"
    assert doc["com"] == pytest.approx([0.03, -0.02, 0.11]) and doc["std"]["mass"] == 0.01
    assert doc["inertia"]["xy"] == pytest.approx(INERTIA[0, 1], rel=1e-5)
    assert yaml.safe_load(yaml_record(estimate(None)))["inertia"] is None
    with pytest.raises(ExportError, match="non-finite"):
        yaml_record(PayloadEstimate(float("nan"), np.zeros(3)))
    with pytest.raises(ExportError, match="parent link"):
        urdf_snippet(estimate(INERTIA, frame=""))


@pytest.mark.parametrize("x", [0.0, 1e-5, -2.6e-14, 2.5, -0.0123456789, 123456789.0, 1e300])
def test_yaml_numbers_are_floats_to_pyyaml(x):
    """PyYAML (ros2 service call's reader) takes '0' as an int and '1e-05' as a string."""
    v = yaml.safe_load(f"v: {yaml_float(x)}")["v"]
    assert isinstance(v, float) and v == pytest.approx(x, rel=1e-5, abs=0)
    assert np.isnan(yaml.safe_load(f"v: {yaml_float(float('nan'))}")["v"])


def test_a_zero_kg_estimate_exports_no_body_and_a_zero_load_that_says_so(tmp_path):
    est = PayloadEstimate(0.0, np.zeros(3), None, "lwr4_dh_frame_7", method="static differential (no payload)")
    paths = {p.name: p.read_text() for p in write_exports(est, tmp_path)}
    assert "<link" not in paths["payload.urdf"] and "no payload detected" in paths["payload.urdf"]
    for name in ("payload.yaml", "payload.kuka.txt", "payload.franka.yaml"):
        assert "no payload detected" in paths[name], name
    assert "inertia not estimated" not in paths["payload.kuka.txt"] + paths["payload.franka.yaml"]
    assert read_kuka(paths["payload.kuka.txt"]).mass == 0.0 and read_franka(paths["payload.franka.yaml"]).mass == 0.0
    assert yaml.safe_load(paths["payload.yaml"])["mass"] == 0.0


def test_export_command_from_an_estimate_json(tmp_path):
    est = tmp_path / "est.json"
    est.write_text(json.dumps(estimate(INERTIA).to_dict()))
    run = subprocess.run([sys.executable, "-m", "payload_estimation.cli", "export", "--estimate", str(est),
                          "--out", str(tmp_path / "out")], capture_output=True, text=True, cwd=ROOT)
    assert run.returncode == 0, run.stderr
    files = sorted(p.name for p in (tmp_path / "out").iterdir())
    assert files == ["payload.franka.yaml", "payload.kuka.txt", "payload.urdf", "payload.yaml"]
    assert "$LOAD={M 2.5000" in (tmp_path / "out" / "payload.kuka.txt").read_text()
    bad = subprocess.run([sys.executable, "-m", "payload_estimation.cli", "export", "--estimate",
                          str(tmp_path / "out" / "payload.urdf")], capture_output=True, text=True, cwd=ROOT)
    assert bad.returncode == 1 and "neither an estimate JSON nor a payload YAML record" in bad.stderr


def test_export_command_takes_the_nodes_payload_yaml(tmp_path):
    """The estimator node's export_dir/payload.yaml (yaml_record, model = its robot parameter) is an input too."""
    est = random_estimate(np.random.default_rng(5), LWR.payload_frame_name)
    write_exports(est, tmp_path / "node", ("yaml",), model="lwr4")
    run = subprocess.run([sys.executable, "-m", "payload_estimation.cli", "export", "--estimate",
                          str(tmp_path / "node" / "payload.yaml"), "--out", str(tmp_path / "out")],
                         capture_output=True, text=True, cwd=ROOT)
    assert run.returncode == 0, run.stderr
    back = read_kuka((tmp_path / "out" / "payload.kuka.txt").read_text())
    direct = read_kuka(export_text(est, "kuka", robot=LWR))
    assert back.mass == pytest.approx(direct.mass, abs=1e-4)
    np.testing.assert_allclose(back.lever, direct.lever, atol=1e-5)
    np.testing.assert_allclose(back.inertia, direct.inertia, atol=1e-5)
    again = yaml.safe_load((tmp_path / "out" / "payload.yaml").read_text())
    assert again["frame"] == "lwr4_dh_frame_7" and again["model"] == "lwr4"
