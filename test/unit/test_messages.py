"""ros/messages.py: JointState mapping by name, trajectories, payload <-> InertiaStamped."""

import math

import numpy as np
import pytest
from sensor_msgs.msg import JointState

from payload_estimation.payload.estimate import PayloadEstimate
from payload_estimation.ros.messages import (
    JointStateConverter,
    MessageError,
    estimate_from_msg,
    estimate_to_msg,
    joint_state_msg,
    sec_to_duration,
    sec_to_time,
    time_to_sec,
    trajectory_from_msg,
    trajectory_msg,
    trajectory_velocities,
)

NAMES = ["A1", "A2", "E1", "A3", "A4", "A5", "A6"]


def _js(names, q, dq=None, tau=None, stamp=1.5):
    return joint_state_msg(names, q, dq, tau, stamp=sec_to_time(stamp))


def test_joint_state_reordered_and_extra_joints_ignored():
    conv = JointStateConverter(NAMES)
    order = [3, 0, 6, 1, 5, 2, 4]
    names = [NAMES[i] for i in order] + ["gripper"]
    q = np.arange(7) * 0.1
    msg = _js(names, np.r_[q[order], 9.0], np.r_[-q[order], 9.0], np.r_[10 * q[order], 9.0])
    s = conv.convert(msg)
    assert s.stamp == pytest.approx(1.5)
    np.testing.assert_allclose(s.q, q)
    np.testing.assert_allclose(s.dq, -q)
    np.testing.assert_allclose(s.tau, 10 * q)
    # cached path gives the same result; a different order is remapped, not reused
    np.testing.assert_allclose(conv.convert(msg).q, q)
    np.testing.assert_allclose(conv.convert(_js(NAMES, q, q, q)).q, q)


def test_joint_state_errors():
    conv = JointStateConverter(NAMES)
    z = np.zeros(6)
    with pytest.raises(MessageError, match="missing joint.*A6"):
        conv.convert(_js(NAMES[:6], z, z, z))
    bad = _js(NAMES, np.zeros(7), np.zeros(7), np.zeros(7))
    bad.effort = [0.0] * 6
    with pytest.raises(MessageError, match="effort has 6 entries"):
        conv.convert(bad)
    tau = np.zeros(7)
    tau[4] = math.nan
    with pytest.raises(MessageError, match="effort is not finite.*4"):
        conv.convert(_js(NAMES, np.zeros(7), np.zeros(7), tau))
    with pytest.raises(MessageError, match="velocity has 0"):
        conv.convert(_js(NAMES, np.zeros(7), None, np.zeros(7)))
    with pytest.raises(MessageError, match="more than once"):
        conv.convert(_js(NAMES + ["A1"], np.zeros(8), np.zeros(8), np.zeros(8)))
    lenient = JointStateConverter(NAMES, require_velocity=False)
    assert lenient.convert(_js(NAMES, np.zeros(7), None, np.zeros(7))).dq is None


def test_time_conversions():
    for s in (0.0, 1.25, 12.999999999, 1e6 + 0.5):
        assert time_to_sec(sec_to_time(s)) == pytest.approx(s, abs=1e-9)
        assert time_to_sec(sec_to_duration(s)) == pytest.approx(s, abs=1e-9)


def test_trajectory_roundtrip_and_validation():
    p = np.random.default_rng(0).uniform(-1, 1, (3, 7))
    msg = trajectory_msg(NAMES, p, [0.5, 1.0, 2.25])
    assert msg.joint_names == NAMES
    assert list(msg.points[-1].velocities) == [0.0] * 7
    # reorder joints in the message: the reader maps by name
    t, q = trajectory_from_msg(msg, list(reversed(NAMES)))
    np.testing.assert_allclose(t, [0.5, 1.0, 2.25])
    np.testing.assert_allclose(q, p[:, ::-1])
    with pytest.raises(MessageError, match="strictly increasing"):
        trajectory_msg(NAMES, p, [0.5, 0.5, 1.0])
    with pytest.raises(MessageError, match="non-finite"):
        trajectory_msg(NAMES, np.full((1, 7), np.nan), [1.0])
    with pytest.raises(MessageError, match="missing joint"):
        trajectory_from_msg(msg, NAMES + ["X"])


def test_trajectory_velocities_are_read_by_name_or_none_unless_every_point_has_them():
    rng = np.random.default_rng(1)
    p, v = rng.uniform(-1, 1, (3, 7)), rng.uniform(-1, 1, (3, 7))
    msg = trajectory_msg(NAMES, p, [0.5, 1.0, 2.25], velocities=v)
    np.testing.assert_allclose(trajectory_velocities(msg, list(reversed(NAMES))), v[:, ::-1])
    assert trajectory_velocities(trajectory_msg(NAMES, p, [0.5, 1.0, 2.25]), NAMES) is None  # only the last's 0
    msg.points[1].velocities = [float("nan")] * 7
    with pytest.raises(MessageError, match="non-finite velocities"):
        trajectory_velocities(msg, NAMES)


def test_payload_roundtrip():
    est = PayloadEstimate(3.0, np.array([0.01, -0.02, 0.13]), None, frame="link_7")
    msg = estimate_to_msg(est)
    assert msg.header.frame_id == "link_7"
    assert msg.inertia.m == 3.0 and msg.inertia.com.z == pytest.approx(0.13)
    back = estimate_from_msg(msg)
    assert back.inertia is None and back.frame == "link_7"
    np.testing.assert_allclose(back.com, est.com)
    full = PayloadEstimate(1.0, np.zeros(3), np.array([1e-3, 0, 0, 2e-3, 0, 3e-3]))
    np.testing.assert_allclose(estimate_from_msg(estimate_to_msg(full)).inertia, full.inertia)
    msg.inertia.m = -1.0
    with pytest.raises(MessageError, match="negative mass"):
        estimate_from_msg(msg)
    msg.inertia.m = math.nan
    with pytest.raises(MessageError, match="non-finite"):
        estimate_from_msg(msg)


def test_joint_state_msg_length_checked():
    with pytest.raises(MessageError):
        joint_state_msg(NAMES, np.zeros(6))
    assert isinstance(joint_state_msg(NAMES, np.zeros(7)), JointState)


@pytest.mark.parametrize("frame", ["", "a", "abc", "base_link_x"])
@pytest.mark.parametrize("names", [NAMES, NAMES[::-1], ["gripper", *NAMES], [f"{n}_long_joint_name" for n in NAMES]])
@pytest.mark.parametrize("fields", ["all", "no velocity", "no effort"])
def test_serialized_joint_states_decode_as_the_message_does(frame, names, fields):
    """A raw take's bytes (what the monitor and the estimator read, issue 48) give the sample of the message, for any
    frame_id and name lengths (CDR alignment), reordered or extra joints and empty fields; the stamp exactly."""
    from rclpy.serialization import serialize_message

    rng = np.random.default_rng(len(frame) + len(names[0]))
    n = len(names)
    msg = joint_state_msg(names, rng.normal(size=n), None if fields == "no velocity" else rng.normal(size=n),
                          None if fields == "no effort" else rng.normal(size=n), frame_id=frame,
                          stamp=sec_to_time(1.7e9 + rng.uniform()))
    arm = [x for x in names if x != "gripper"]
    for model, required in [(arm, False), (arm[::-1], False), (arm, True), (arm[::-1], True)]:
        a, b = JointStateConverter(model, required, required), JointStateConverter(model, required, required)
        try:
            want = a.convert(msg)
        except MessageError as e:
            with pytest.raises(MessageError, match=str(e)[:30]):
                b.convert(serialize_message(msg))
            continue
        for _ in range(2):  # the second time through the cached names
            got = b.convert(serialize_message(msg))
            assert got.stamp == want.stamp and b.last_stamp == a.last_stamp == (msg.header.stamp.sec,
                                                                                 msg.header.stamp.nanosec)
            assert np.array_equal(got.q, want.q) and np.array_equal(got.tau, want.tau)
            assert (got.dq is None and want.dq is None) or np.array_equal(got.dq, want.dq)
            assert got.q.flags.writeable


def test_serialized_joint_states_with_nan_are_refused_and_unknown_layouts_deserialized():
    from rclpy.serialization import serialize_message

    msg = _js(NAMES, np.ones(7), np.ones(7), np.ones(7))
    msg.effort[2] = math.inf
    with pytest.raises(MessageError, match="effort is not finite"):
        JointStateConverter(NAMES).convert(serialize_message(msg))
    good = serialize_message(_js(NAMES, np.arange(7.0), np.zeros(7), np.ones(7)))
    other = bytes([0, 7]) + good[2:]  # an encapsulation this decoder does not read: rclpy deserializes it
    with pytest.raises(Exception):  # noqa: B017 - rclpy's own error for a buffer it cannot read either
        JointStateConverter(NAMES).convert(other)
    assert np.array_equal(JointStateConverter(NAMES).convert(good).q, np.arange(7.0))


def test_time_to_sec_is_rclpys_conversion():
    from builtin_interfaces.msg import Duration, Time
    from rclpy.duration import Duration as RD
    from rclpy.time import Time as RT

    for sec, ns in [(0, 0), (1, 5), (1_700_000_000, 123_456_789), (2**31 - 1, 999_999_999)]:
        assert time_to_sec(Time(sec=sec, nanosec=ns)) == RT.from_msg(Time(sec=sec, nanosec=ns)).nanoseconds * 1e-9
    for sec, ns in [(-3, 5), (12, 999_999_999)]:
        d = Duration(sec=sec, nanosec=ns)
        assert time_to_sec(d) == RD.from_msg(d).nanoseconds * 1e-9
