"""Export formats of a payload estimate, each checked against what its consumer documents.

- URDF: the snippet, inserted into a real stack's URDF (lbr iiwa14 as robot_state_publisher publishes
  it), loaded by pinocchio's own URDF parser: its gravity equals our model with the estimate attached.
- KUKA load data: Rz(A) Ry(B) Rx(C) diag(JX, JY, JZ) (...)ᵀ rebuilds the inertia about the CoM
  (KRL ``$LOAD``: M kg, CM X/Y/Z mm and A/B/C deg, J X/Y/Z kg m²); a hand-worked example.
- franka ``setLoad``: mass, F_x_Cload (m), load_inertia column-major 3x3 (kg m²).
- YAML and the command line.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pinocchio as pin
import pytest
import yaml

from payload_estimation.identification.estimate import PayloadEstimate
from payload_estimation.identification.export import (
    ExportError,
    franka_set_load,
    kuka_load_data,
    principal_axes,
    urdf_snippet,
    yaml_record,
)
from payload_estimation.model.dynamics import RigidBodyDynamics
from payload_estimation.model.parameters import vec6_from_sym
from payload_estimation.model.robot_file import robot_from_description

ROOT = Path(__file__).resolve().parents[1]
IIWA_URDF = ROOT.parent / "shared" / "robots" / "urdf" / "iiwa14.urdf"


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


@pytest.mark.skipif(not IIWA_URDF.exists(), reason="../shared/robots/urdf not present")
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
    kuka = kuka_load_data(estimate(INERTIA))
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
    k = kuka_load_data(estimate(np.diag([0.01, 0.02, 0.03])))
    assert k.abc_deg == pytest.approx((0.0, 0.0, 0.0), abs=1e-9) and k.j_principal == pytest.approx((0.01, 0.02, 0.03))
    g = kuka_load_data(estimate(None))
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
    d = franka_set_load(estimate(INERTIA))
    assert d["mass"] == 2.5 and d["F_x_Cload"] == pytest.approx([0.03, -0.02, 0.11])
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
    assert bad.returncode == 1 and "not an estimate JSON" in bad.stderr
