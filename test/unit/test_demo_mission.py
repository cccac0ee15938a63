"""The demo's task code (cli.demo) without DDS: what it calls, in which order, and what its table counts.

Issue 47: the demo attached the payload without announcing the grasp (the guide says to announce it), so the
monitor stopped the arm at the grasp: its log and fig6 showed a collision that its table did not count.
"""

from __future__ import annotations

import numpy as np
import pytest

from payload_estimation.cli import demo


class Stop(Exception):
    """Ends the fake mission once the grasp is done (the first sample call sets its mode)."""


class FakeClient:
    """The mission client's surface the demo uses up to the first ``sample``: every call logged, always at rest."""

    def __init__(self, n: int):
        self.q, self.q_dot, self.log = np.zeros(n), np.zeros(n), []
        self._t = 1.0

    def now(self) -> float:
        self._t += 0.1
        return self._t

    def nodes_ready(self, nodes) -> bool:
        return True

    def wait_for(self, pred, timeout, what) -> None:
        pass

    def sleep_sim(self, seconds) -> None:
        self._t += seconds

    def residual_arrays(self, monitor):
        return np.array([self._t + 1.0]), np.zeros((1, self.q.size))

    def _answer(self, service):
        class Res:
            success, message = True, "ok"
        self.log.append(service)
        return Res()

    call = call_until_success = lambda self, service, timeout=60.0: self._answer(service)  # noqa: E731
    call_retrying = lambda self, service, timeout=60.0, say=None: self._answer(service)  # noqa: E731

    def announce(self, service, timeout=30.0) -> str:
        self.log.append(f"announce {service}")
        return "grasp announced"

    def set_parameters(self, node, values, timeout=15.0) -> None:
        raise Stop


def test_the_demo_announces_its_grasp_before_and_after_attaching_the_payload():
    from payload_estimation.model.robot_file import load_robot

    desc = load_robot("lwr4")
    client = FakeClient(desc.n)
    with pytest.raises(Stop):
        demo._mission(client, desc, demo.scenario("lwr4", fast=True))
    grasp = client.log[client.log.index("payload_sampler/record_reference") + 1:]
    assert grasp == ["announce payload_estimator/grasped", "sim_node/attach_payload",
                     "announce payload_estimator/grasped"], client.log


def test_the_table_counts_the_collisions_the_monitor_raised_at_the_grasp():
    flags = [(10.0, True), (10.5, False), (12.0, True), (12.2, False), (30.0, True)]
    assert demo.raised(flags, 9.0, 20.0) == 2 and demo.raised(flags, 20.0, 40.0) == 1
    assert demo.raised([], 0.0, 1.0) == 0


@pytest.mark.parametrize("robot", ["lwr4", "iiwa14"])
def test_the_demo_never_pushes_up_where_a_push_would_look_like_the_payload_dropping(robot):
    """With the grasp announced, the monitor judges a residual step matching the carried payload's torque as
    'payload lost'; the demo's 30 N upward push on link_7 was one (78 % of 3 kg) and the arm, stopped on the
    unexplained load, never resumed. Along the demo's path every push is horizontal or downward."""
    from payload_estimation.model import RigidBodyDynamics, load_robot

    dyn, sc = RigidBodyDynamics(load_robot(robot)), demo.scenario(robot, fast=True)
    pts = np.vstack([sc.q_pick, sc.waypoints])
    for a, b in zip(pts[:-1], pts[1:]):
        for s in np.linspace(0.0, 1.0, 11):
            for link, _ in sc.contacts:
                d = demo._contact_direction(dyn, a + (b - a) * s, link)
                assert d[2] <= 0.0 and np.linalg.norm(d) == 1.0, (link, d)


@pytest.mark.parametrize("robot", ["lwr4", "iiwa14"])
def test_the_demos_pushes_enter_within_the_friction_cone_and_are_located_on_their_link(robot):
    """A scripted push is one a contact can hold: within MAX_AXIAL_DEG of the surface normal where it enters (the
    demo's 40 N downward push on lwr4's link_6 was 55° off it: a push that slips, which the contact estimator
    explained on link_7 with p 1.00). Along the demo's path, every push is then located on its link or flagged."""
    from payload_estimation.collision.contact import ContactLocator
    from payload_estimation.collision.geometry import push_point
    from payload_estimation.model import RigidBodyDynamics, load_robot

    dyn, sc = RigidBodyDynamics(load_robot(robot)), demo.scenario(robot, fast=True)
    loc = ContactLocator(dyn)
    rng = np.random.default_rng(0)
    pts = np.vstack([sc.q_pick, sc.waypoints])
    for a, b in zip(pts[:-1], pts[1:]):
        for s in np.linspace(0.0, 1.0, 5):
            q = a + (b - a) * s
            for link, force in sc.contacts:
                cap = loc.geometry.capsules[link - 1]
                d = demo._contact_direction(dyn, q, link, cap)
                rot = dyn.forward_kinematics(q, f"link_{link}")[:3, :3]
                p = push_point(cap, rot.T @ d, 0.6)
                axis = (cap.b - cap.a) / cap.length
                normal = p - (cap.a + ((p - cap.a) @ axis) * axis)
                angle = np.degrees(np.arccos(np.clip(-(rot.T @ d) @ normal / np.linalg.norm(normal), -1.0, 1.0)))
                assert angle <= demo.MAX_AXIAL_DEG + 1e-6, (link, angle)
                tau = dyn.frame_jacobian(q, f"link_{link}", p)[:3].T @ (force * d) + rng.normal(0, 0.05, dyn.n)
                c = loc.locate(q, tau)
                assert c.link == link or c.link_ambiguous, (link, c.summary())
