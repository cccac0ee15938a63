"""Real robot descriptions (test/data/urdf, exactly as their ROS 2 stacks publish them).

Independent reference: pinocchio's own URDF parser (``pin.buildModelFromXML``) with the joints off
the chain locked (``pin.buildReducedModel``), MuJoCo for the FR3 end to end. Error paths assert the
operator-facing message.
"""

from __future__ import annotations

import logging
import re
from pathlib import Path

import numpy as np
import pinocchio as pin
import pytest
from data_paths import ROBOTS, dataset, urdf

from payload_estimation.model.description import RobotDescriptionError
from payload_estimation.model.dynamics import RigidBodyDynamics
from payload_estimation.model.parameters import BodyInertia
from payload_estimation.model.robot_file import load_robot, robot_from_description
from payload_estimation.payload.gravity import estimate_payload_gravity

FINGERS = ("fr3_finger_joint1", "fr3_finger_joint2")
GAZ_URDF = dataset("lwr4-iit/kuka_lwr4_gaz.urdf")  # published with xmlns:xacro on its root


def pinocchio_chain(text: str, lock: dict[str, float]) -> tuple[pin.Model, pin.Data, pin.Model]:
    """(reduced model, its data, full model): pinocchio's parse with ``lock`` joints locked."""
    full = pin.buildModelFromXML(text)
    q_ref = pin.neutral(full)
    for name, value in lock.items():
        q_ref[full.joints[full.getJointId(name)].idx_q] = value
    reduced = pin.buildReducedModel(full, [full.getJointId(n) for n in lock], q_ref)
    return reduced, reduced.createData(), full


def random_q(desc, rng):
    lo, hi = desc.limits.position[:, 0], desc.limits.position[:, 1]
    return rng.uniform(lo, hi)


@pytest.mark.parametrize("name", sorted(ROBOTS))
def test_shared_urdf_from_path_and_string_equals_pinocchio(name):
    """Gravity and the payload (tip) frame equal pinocchio's own loading of the same URDF."""
    text = urdf(name).read_text()
    joints, tip = ROBOTS[name]
    from_path = load_robot(urdf(name))
    from_topic = robot_from_description(text)
    for desc in (from_path, from_topic):
        assert list(desc.joint_names) == joints and desc.payload_frame_name == tip
    model, data, _ = pinocchio_chain(text, dict.fromkeys(FINGERS, 0.0) if name == "fr3_hand" else {})
    assert list(model.names)[1:] == joints
    ours, topic = RigidBodyDynamics(from_path), RigidBodyDynamics(from_topic)
    tip_id = model.getFrameId(tip)
    rng = np.random.default_rng(len(name))
    for _ in range(10):
        q = random_q(from_path, rng)
        g_ref = pin.computeGeneralizedGravity(model, data, q)
        assert np.max(np.abs(g_ref)) > 1.0
        np.testing.assert_allclose(ours.gravity(q), g_ref, rtol=0, atol=1e-9)
        np.testing.assert_allclose(topic.gravity(q), g_ref, rtol=0, atol=1e-9)
        pin.framesForwardKinematics(model, data, q)
        np.testing.assert_allclose(ours.forward_kinematics(q, "payload"), data.oMf[tip_id].homogeneous,
                                   rtol=0, atol=1e-12)


def test_fr3_hand_fingers_lumped_with_one_warning_at_zero_or_given_position(caplog):
    """The hand and both fingers (a prismatic pair, one a mimic) are lumped into link 7: gravity
    equals pinocchio's full 9-joint model with the fingers at the same position."""
    text = urdf("fr3_hand").read_text()
    with caplog.at_level(logging.WARNING):
        at_zero = robot_from_description(text, source="/fr3/robot_description")
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1, warnings
    assert re.search(r"/fr3/robot_description: 2 bodies behind joints that are not on the chain.*"
                     r"fr3_finger_joint1 = 0, fr3_finger_joint2 = 0\): fr3_leftfinger, fr3_rightfinger", warnings[0])
    from payload_estimation.model.urdf import load_urdf

    opened = load_urdf(text, locked={"fr3_finger_joint1": 0.03})  # the mimic finger follows
    full = pin.buildModelFromXML(text)
    data = full.createData()
    rng = np.random.default_rng(3)
    bare = RigidBodyDynamics(load_robot(urdf("fr3")))
    for _ in range(5):
        q = random_q(at_zero, rng)
        for desc, finger in ((at_zero, 0.0), (opened, 0.03)):
            g_full = pin.computeGeneralizedGravity(full, data, np.concatenate([q, [finger, finger]]))
            np.testing.assert_allclose(RigidBodyDynamics(desc).gravity(q), g_full[:7], rtol=0, atol=1e-9)
    # the hand is not negligible: dropping it would be off by far more than the tolerance
    assert np.max(np.abs(RigidBodyDynamics(at_zero).gravity(q) - bare.gravity(q))) > 0.1


def test_shipped_iiwa14_payload_frame_is_lbr_link_ee():
    """The shipped DH iiwa14's payload frame (DH frame 7) is the lbr stack's lbr_link_ee, as named."""
    dh = load_robot("iiwa14")
    assert dh.payload_frame_name == "lbr_link_ee" and load_robot("lwr4").payload_frame_name == "lwr4_dh_frame_7"
    model, data, _ = pinocchio_chain(urdf("iiwa14").read_text(), {})
    ours = RigidBodyDynamics(dh)
    rng = np.random.default_rng(4)
    for _ in range(5):
        q = random_q(dh, rng)
        pin.framesForwardKinematics(model, data, q)
        np.testing.assert_allclose(ours.forward_kinematics(q, "payload"),
                                   data.oMf[model.getFrameId("lbr_link_ee")].homogeneous, rtol=0, atol=1e-12)


def test_chain_selection_by_base_and_tip_link():
    text = urdf("fr3_hand").read_text()
    short = robot_from_description(text, base_link="fr3_link2", tip_link="fr3_link8")
    assert short.joint_names[0] == "fr3_joint3" and short.n == 5 and short.payload_frame_name == "fr3_link8"
    # everything below fr3_link8 (hand, fingers) is lumped into link 7 of the shorter chain as well
    np.testing.assert_allclose(short.links[-1].mass, robot_from_description(text).links[-1].mass)
    cli = load_robot(urdf("fr3_hand"), tip_link="fr3_link7")
    assert cli.payload_frame_name == "fr3_link7" and cli.n == 7


TWO_ARMS = """<robot name="twins"><link name="torso"/>
  <link name="l1"><inertial><mass value="1"/><inertia ixx="1e-3" iyy="1e-3" izz="1e-3"/></inertial></link>
  <link name="r1"><inertial><mass value="1"/><inertia ixx="1e-3" iyy="1e-3" izz="1e-3"/></inertial></link>
  <link name="l_tool"/><link name="camera"/>
  <joint name="jl" type="revolute"><parent link="torso"/><child link="l1"/><axis xyz="0 0 1"/>
    <limit lower="-1" upper="1" velocity="1" effort="10"/></joint>
  <joint name="jr" type="revolute"><parent link="torso"/><child link="r1"/><axis xyz="0 0 1"/>
    <limit lower="-1" upper="1" velocity="1" effort="10"/></joint>
  <joint name="jt" type="fixed"><parent link="l1"/><child link="l_tool"/></joint>
  <joint name="jc" type="fixed"><parent link="torso"/><child link="camera"/></joint>
</robot>"""


def test_ambiguous_tip_lists_candidates_and_the_option():
    with pytest.raises(RobotDescriptionError, match=r"robot_description: the chain below 'torso' branches; candidate "
                       r"tip links: l_tool, r1; set tip_link \(--tip-link .*tip_link node parameter"):
        robot_from_description(TWO_ARMS)
    assert robot_from_description(TWO_ARMS, tip_link="r1").joint_names == ("jr",)


MALFORMED = {
    "mass": ('<mass value="2.9274653454"/>', '<mass value="heavy"/>',
             r"fr3.urdf: <link name='fr3_link1'> <mass>: value='heavy' is not a number"),
    "origin": ('<origin rpy="0 0 0" xyz="0 0 0.333"/>', '<origin rpy="0 0" xyz="0 0 0.333"/>',
               r"fr3.urdf: <joint name='fr3_joint1'> <origin rpy>: expected 3 finite numbers, got '0 0'"),
    "child": ('<child link="fr3_link2"/>', "",
              r"fr3.urdf: <joint name='fr3_joint2'>: no <child link='...'>"),
    "parent": ('<parent link="fr3_link2"/>', '<parent link="fr3_link_2"/>',
               r"fr3.urdf: <joint name='fr3_joint3'>: <parent link='fr3_link_2'> is not a <link>"),
    "type": ('<joint name="fr3_joint4" type="revolute">', '<joint name="fr3_joint4">',
             r"fr3.urdf: <joint name='fr3_joint4'>: type=None is not a URDF joint type"),
    "xml": ("</robot>", "", r"fr3.urdf: URDF is not valid XML"),
}


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_malformed_urdf_names_the_file_and_the_element(case, tmp_path):
    old, new, message = MALFORMED[case]
    text = urdf("fr3").read_text()
    assert old in text
    bad = tmp_path / "fr3.urdf"
    bad.write_text(text.replace(old, new, 1))
    with pytest.raises(RobotDescriptionError, match=message):
        load_robot(bad)


def test_xacro_gets_one_line_saying_how_to_expand_it(tmp_path):
    macro = '<robot xmlns:xacro="http://www.ros.org/wiki/xacro" name="r"><xacro:include filename="arm.xacro"/></robot>'
    f = tmp_path / "arm.urdf.xacro"
    f.write_text(macro)
    for call in (lambda: load_robot(f), lambda: robot_from_description(macro)):
        with pytest.raises(RobotDescriptionError) as err:
            call()
        msg = str(err.value)
        assert "is xacro, not URDF: expand it first" in msg and "xacro " in msg and "\n" not in msg
    # xacro text in comments (as franka_description leaves in its expanded URDF) is not xacro
    assert "${xacro.load_yaml" in urdf("fr3").read_text()
    # xacro elements under another prefix are xacro too
    other = '<robot xmlns:x="http://www.ros.org/wiki/xacro" name="r"><x:property name="a" value="1"/></robot>'
    with pytest.raises(RobotDescriptionError, match="is xacro, not URDF"):
        robot_from_description(other)


@pytest.mark.needs_data(GAZ_URDF)
def test_published_urdf_declaring_xmlns_xacro_without_using_it_loads_as_pinocchio_does():
    """The Gaz 2016 LWR URDF as published: its root declares xmlns:xacro (older xacro output) but it
    uses no xacro; from the file and as robot_description text it loads, gravity equal to pinocchio's."""
    text = GAZ_URDF.read_text()
    assert 'xmlns:xacro="http://www.ros.org/wiki/xacro"' in text.split(">", 2)[1]
    model, data, _ = pinocchio_chain(text, {})
    rng = np.random.default_rng(7)
    for desc in (load_robot(GAZ_URDF), robot_from_description(text, source="/lwr/robot_description")):
        assert list(desc.joint_names) == list(model.names)[1:] == [f"lwr_{i}_joint" for i in range(7)]
        q = random_q(desc, rng)
        np.testing.assert_allclose(RigidBodyDynamics(desc).gravity(q), pin.computeGeneralizedGravity(model, data, q),
                                   rtol=0, atol=1e-9)


def test_massless_moving_link_accepted_with_warning_refused_by_simulator(caplog, tmp_path):
    from payload_estimation.sim import SimulatedArm

    text = urdf("iiwa7").read_text()
    start = text.index("<inertial>", text.index('<link name="lbr_link_7">'))
    stop = text.index("</inertial>", start) + len("</inertial>")
    with caplog.at_level(logging.WARNING):
        desc = robot_from_description(text[:start] + text[stop:])
    assert "the links moved by joints lbr_A7 have no mass" in caplog.text
    assert desc.links[-1].mass == 0 and np.all(np.isfinite(RigidBodyDynamics(desc).gravity(np.full(7, 0.3))))
    with pytest.raises(RobotDescriptionError, match=r"links\[6\] \(joint lbr_A7\) has no mass.*simulator"):
        SimulatedArm(desc)


def test_inconsistent_inertia_like_fer_link4_accepted_for_gravity_refused_by_simulator(caplog):
    """franka's older FER link 4 violates the triangle inequality: gravity work goes on (warned)."""
    from payload_estimation.sim import SimulatedArm

    text = urdf("fr3").read_text()
    start = text.index("<inertia ", text.index('<link name="fr3_link4">'))
    stop = text.index("/>", start) + 2
    bad = text[:start] + '<inertia ixx="0.0037" ixy="0" ixz="0" iyy="0.0080" iyz="0" izz="0.0127"/>' + text[stop:]
    with caplog.at_level(logging.WARNING):
        desc = robot_from_description(bad, source="fer.urdf")
    assert "links[3] (joint fr3_joint4) is physically inconsistent" in caplog.text
    model, data, _ = pinocchio_chain(bad, {})
    q = random_q(desc, np.random.default_rng(1))
    np.testing.assert_allclose(RigidBodyDynamics(desc).gravity(q), pin.computeGeneralizedGravity(model, data, q),
                               atol=1e-9)
    with pytest.raises(RobotDescriptionError, match=r"links\[3\] \(joint fr3_joint4\) is physically inconsistent: "
                       r".*triangle inequality.*simulator"):
        SimulatedArm(desc)


def _wrapper(tmp_path, extra: str) -> Path:
    f = tmp_path / "fr3.yaml"
    f.write_text(f"name: fr3\nkinematics:\n  convention: urdf\n  urdf: {urdf('fr3')}\n{extra}")
    return f


def test_robot_yaml_joints_must_be_the_urdf_chain_or_renamed_explicitly(tmp_path):
    names = [f"fr3_joint{i}" for i in range(1, 8)]
    assert load_robot(_wrapper(tmp_path, "")).joint_names == tuple(names)
    assert load_robot(_wrapper(tmp_path, f"joints: [{', '.join(names)}]\n")).joint_names == tuple(names)
    swapped = names.copy()
    swapped[1], swapped[2] = swapped[2], swapped[1]
    with pytest.raises(RobotDescriptionError) as err:
        load_robot(_wrapper(tmp_path, f"joints: [{', '.join(swapped)}]\n"))
    msg = str(err.value)
    assert str(swapped) in msg and str(names) in msg and "rename_joints" in msg
    renamed = load_robot(_wrapper(tmp_path, "rename_joints: {fr3_joint1: j1, fr3_joint7: j7}\n"))
    assert renamed.joint_names[0] == "j1" and renamed.joint_names[-1] == "j7" and renamed.joint_names[1] == "fr3_joint2"
    with pytest.raises(RobotDescriptionError, match=r"rename_joints names \['joint1'\]"):
        load_robot(_wrapper(tmp_path, "rename_joints: {joint1: j1}\n"))
    last = load_robot(_wrapper(tmp_path, "payload_frame: last_link\n"))
    assert last.payload_frame_name == "fr3_link7"
    with pytest.raises(RobotDescriptionError, match="base_link/tip_link choose a chain in a URDF"):
        load_robot("lwr4", tip_link="link_7")


def test_payload_estimate_on_a_real_urdf_model():
    """Torques of the med14 model carrying a known payload in lbr_link_ee (noise 0.05 N m):
    the one-shot static estimate recovers it, in that frame."""
    desc = load_robot(urdf("med14"))
    dyn = RigidBodyDynamics(desc)
    payload = BodyInertia(2.5, np.array([0.02, -0.01, 0.08]), np.diag([0.01, 0.01, 0.005]))
    loaded = dyn.with_payload(payload)
    rng = np.random.default_rng(7)
    q0 = np.radians([0, 30, 0, -60, 0, 60, 0])
    q = q0 + np.radians(7) * rng.uniform(-1, 1, (12, 7))
    tau = np.array([loaded.gravity(qk) for qk in q]) + rng.normal(0, 0.05, (12, 7))
    est = estimate_payload_gravity(dyn, q, tau)
    assert est.frame == "lbr_link_ee"
    assert abs(est.mass - 2.5) < 0.03 and np.max(np.abs(est.com - payload.com)) < 0.005


def test_fr3_end_to_end_in_mujoco_static_payload_estimate():
    """The FR3 URDF (fr3 joint names) runs in the MuJoCo simulator with 5 % link-model error and a
    noisy sensor; a short differential static estimate recovers the attached payload."""
    from payload_estimation.sim import SensorConfig, SimConfig, SimulatedArm, true_links

    desc = load_robot(urdf("fr3"))
    dyn = RigidBodyDynamics(desc)
    payload = BodyInertia(1.5, np.array([0.01, -0.02, 0.06]), np.diag([3e-3, 3e-3, 2e-3]))
    q0 = np.array([0.0, -0.5, 0.0, -2.2, 0.0, 1.7, 0.8])
    q = q0 + np.radians(7) * np.random.default_rng(2).uniform(-1, 1, (10, 7))
    links = true_links(desc, 0.05, 9)
    taus = {}
    for label, body in (("unloaded", None), ("loaded", payload)):
        arm = SimulatedArm(desc, SimConfig(seed=5, true_links=links, sensor=SensorConfig(noise_std=0.05)))
        if body is not None:
            arm.attach_payload(body)
        rows = []
        for qk in q:
            arm.reset(qk)
            arm.step(100)
            rows.append(arm.state())
        np.testing.assert_allclose([r.q for r in rows], q, atol=1e-6)
        taus[label] = np.array([r.tau for r in rows])
    est = estimate_payload_gravity(dyn, q, taus["loaded"], taus["unloaded"])
    assert est.frame == "fr3_link8"
    assert abs(est.mass - 1.5) < 0.03 and np.max(np.abs(est.com - payload.com)) < 0.006, (est.mass, est.com)
