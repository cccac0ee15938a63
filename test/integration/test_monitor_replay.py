"""The running collision_monitor and the core give the same contact answer on the same joint_states stream.

One stream is recorded from the MuJoCo arm (moving, 3 % link error, 0.05 N m sensor noise, a 40 N push on
link 6 mid-motion). It is published over DDS to a ``collision_monitor`` node and replayed through
:func:`collision.monitor.replay` with the config :func:`ros.monitor_params.monitor_configs` makes of the node's
parameter values; the node's answer is read where a program reads it, ``~/contact`` (JSON). Same samples, same
config: the same link, flags, probability and force (to float rounding).
"""

from __future__ import annotations

import json
import os
import time

import numpy as np
import pytest
from rclpy.parameter import Parameter
from ros_helpers import wait_for
from sensor_msgs.msg import JointState
from std_msgs.msg import String

from payload_estimation.collision.geometry import capsule_geometry
from payload_estimation.collision.monitor import CollisionMonitor, MonitorConfig, replay
from payload_estimation.model.dynamics import RigidBodyDynamics
from payload_estimation.model.robot_file import load_robot
from payload_estimation.ros.messages import joint_state_msg, sec_to_time, time_to_sec
from payload_estimation.ros.monitor_node import CollisionMonitorNode
from payload_estimation.ros.monitor_params import PARAMS, monitor_configs
from payload_estimation.ros.qos import LATCHED_QOS, SENSOR_QOS
from payload_estimation.sim import SensorConfig, SimConfig, SimulatedArm

pytestmark = pytest.mark.flaky(reruns=2, reruns_delay=2)  # DDS and wall-clock pacing on a loaded machine

NS = f"/h5r{os.getpid()}"
Q0 = np.radians([10, 40, -5, -70, 15, 50, 20])
LINK, FORCE = 6, 40.0
OVERRIDES = {"robot": "lwr4", "sensor_torque_noise": [0.05], "policy": "none"}
"""The node's parameters for this stream (the simulator's torque and velocity belong to the sample's instant: the
default trapezoid quadrature)."""


def push_on_link(desc, q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(point in link LINK's frame on its capsule surface, force N in base axes pushing into it, slanted)."""
    cap = capsule_geometry(desc).capsules[LINK - 1]
    axis = (cap.b - cap.a) / cap.length
    u = np.cross(axis, [1.0, 0, 0] if abs(axis[0]) < 0.9 else [0, 1.0, 0])
    u /= np.linalg.norm(u)
    radial = np.cos(2.1) * u + np.sin(2.1) * np.cross(axis, u)
    rot = desc.link_poses(q)[LINK - 1][:3, :3]
    d = -(rot @ radial) + 0.6 * (rot @ np.cross(axis, radial))
    return cap.a + 0.8 * (cap.b - cap.a) + cap.radius * radial, FORCE * d / np.linalg.norm(d)


def record(desc) -> tuple[np.ndarray, ...]:
    """The MuJoCo stream: t (s, from 1 s, on the nanosecond grid a message carries), q, dq, tau; the push time."""
    arm = SimulatedArm(desc, SimConfig(seed=5, model_error=0.03, sensor=SensorConfig(noise_std=0.05)))
    arm.reset(Q0)
    rows = [arm.state(), *arm.run(0.4)]
    arm.set_trajectory([(1.5, Q0 + np.array([0.3, 0.2, -0.25, 0.25, 0.3, -0.3, 0.4]), None)])
    rows += list(arm.run(0.6))
    point, force = push_on_link(desc, arm.state().q)
    t_push = arm.time
    arm.apply_contact(f"link_{LINK}", force, point, duration=0.2)
    rows += list(arm.run(0.6))
    t = np.array([time_to_sec(sec_to_time(1.0 + s.t)) for s in rows])
    return t, np.array([s.q for s in rows]), np.array([s.dq for s in rows]), np.array([s.tau for s in rows]), t_push


def core_contacts(desc, config: MonitorConfig, stream) -> list:
    t, q, dq, tau, _ = stream
    names = tuple(desc.link_frame_name(k) for k in range(1, desc.n + 1))  # as the node names its links
    mon = CollisionMonitor(RigidBodyDynamics(desc), config, link_names=names)
    replay(mon, t, q, dq, tau)
    return [e.contact for e in mon.events() if e.contact is not None]


def publish(rig, node, desc, stream) -> int:
    """The stream on joint_states, each message once the node has taken the one before (best effort drops
    messages in bursts on a loaded machine; the node's answer depends on the samples and their stamps, not on
    the pace). A message the node did not take within 0.5 s is sent again; returns how many were."""
    t, q, dq, tau, _ = stream
    pub = rig.on_executor(lambda: rig.client_node.create_publisher(JointState, "joint_states", SENSOR_QOS))
    assert wait_for(lambda: pub.get_subscription_count() > 0, 10.0), "the monitor does not subscribe joint_states"
    time.sleep(0.5)  # discovery completes on the subscriber's side too
    resent = 0
    for k in range(len(t)):
        msg = joint_state_msg(desc.joint_names, q[k], dq[k], tau[k], stamp=sec_to_time(t[k]))
        while True:
            pub.publish(msg)
            end = time.monotonic() + 0.5
            while node.mon.observer.accepted <= k and time.monotonic() < end:
                time.sleep(1e-4)
            if node.mon.observer.accepted > k:
                break
            resent += 1
            assert resent < 50, f"the node does not take joint_states (sample {k})"
    return resent


def test_the_node_and_the_core_name_the_same_contact_on_the_same_stream(rig):
    desc = load_robot("lwr4")
    stream = record(desc)
    values = {**{p.name: p.default for p in PARAMS.params}, **OVERRIDES}
    core = core_contacts(desc, monitor_configs(values)[0], stream)
    assert len(core) == 1, [c.summary() for c in core]
    node = rig.add(CollisionMonitorNode(parameter_overrides=[Parameter(k, value=v) for k, v in OVERRIDES.items()]))
    got: list[dict] = []
    rig.on_executor(lambda: rig.client_node.create_subscription(
        String, "collision_monitor/contact", lambda m: got.append(json.loads(m.data)), LATCHED_QOS))
    resent = publish(rig, node, desc, stream)
    n = len(stream[0])
    assert wait_for(lambda: node.mon.observer.accepted == n and got, 10.0), (
        f"the node took {node.mon.observer.accepted} of {n} samples, {len(got)} contact message(s), "
        f"{node.input.counters()}, skipped {node.mon.observer.skipped} gaps {node.mon.observer.gaps}")
    assert len(got) == 1
    c, m = core[0], got[0]
    print(f"core: {c.summary()}\nnode: {m['summary']}\n|F| core {c.force_norm:.6f} N, node {m['force_norm']:.6f} N; "
          f"range core {c.force_range}, node {m['force_range']}; p core {c.link_probability:.6f}, "
          f"node {m['link_probability']:.6f}; {resent} message(s) sent again")
    assert (m["link"], m["link_name"], m["link_ambiguous"], m["force_ambiguous"]) == (
        c.link, c.link_name, c.link_ambiguous, c.force_ambiguous)
    assert m["link_probability"] == pytest.approx(c.link_probability, abs=1e-6)
    assert m["force_norm"] == pytest.approx(c.force_norm, abs=1e-6)
    lo, hi = c.force_range
    assert m["force_range"][0] == pytest.approx(lo, abs=1e-6)
    assert m["force_range"][1] == (pytest.approx(hi, abs=1e-6) if np.isfinite(hi) else None)
    assert m["stamp"] == pytest.approx(c.time, abs=1e-9)
    # and both are right about MuJoCo's push
    assert c.link == LINK and c.force_range[0] <= FORCE <= c.force_range[1], c.summary()
