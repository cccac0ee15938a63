"""The sampler plans on the path the controller executes, not only on its waypoints (issue 32, planner
velocity margin): the simulator's own limit check (sim.trajectory.JointTrajectory.check_limits, what
sim_node applies to every trajectory it receives) is the independent reference. Before, an lwr4
excitation at velocity_scale 1 and a full-envelope move starting with a small residual velocity were
refused by it ("A2 needs 1.923 rad/s, above 1.920") although every waypoint respected the limits."""

from __future__ import annotations

import numpy as np
import pytest

from payload_estimation.model.dynamics import RigidBodyDynamics
from payload_estimation.model.robot_file import load_robot
from payload_estimation.sampling.payload_excitation import ExcitationPlanConfig, plan_payload_excitation
from payload_estimation.sampling.poses import checked_move, executed_path, make_envelope, move_duration
from payload_estimation.sampling.sequence import Move, SamplingSequence, SequenceConfig
from payload_estimation.sim.config import SimInputError
from payload_estimation.sim.trajectory import JointTrajectory, TrajectoryPoint

DEG = np.pi / 180
Q0 = np.array([10, 40, 0, -60, 0, 50, 0]) * DEG


@pytest.fixture(scope="module")
def dyn():
    return RigidBodyDynamics(load_robot("lwr4"))


def executor(q, dq, points) -> JointTrajectory:
    return JointTrajectory(0.0, q, dq, [TrajectoryPoint(t, np.asarray(p, float), np.zeros(len(q)) if v is None
                                                        else np.asarray(v, float)) for t, p, v in points])


@pytest.mark.parametrize("seed", [1, 3, 4])
def test_excitation_at_full_speed_passes_the_executors_check(dyn, seed):
    """1.08 s excitations at velocity_scale 1 (108 points at 100 Hz) whose quintic interpolation between
    the points overshot a velocity limit by up to 0.02 % (seeds 1, 3, 4 were refused by the simulator)."""
    cfg = ExcitationPlanConfig(duration=1.08, harmonics=5, velocity_scale=1.0, max_acceleration=50.0, candidates=20,
                               seed=seed)
    plan = plan_payload_excitation(dyn, Q0, cfg)
    points = [p for p in plan.points(100.0) if p[0] > 0]
    assert len(points) == 108
    executor(Q0, np.zeros(7), points).check_limits(dyn.desc.limits, dyn.desc.joint_names)


def test_move_from_a_moving_state_is_stretched_to_the_limits(dyn):
    """A move across the ±10° envelope at velocity_scale 1 (the quintic's peak exactly at A6's limit) that
    starts with 0.2 rad/s left on the joints away from the target: the duration the planner gives keeps the
    executor's path from that state within the limits; the rest-to-rest closed form alone did not."""
    desc = dyn.desc
    env = make_envelope(desc, Q0, 10.0, 1.0)
    q, target = env.lower.copy(), env.upper.copy()
    dq = np.full(7, -0.2)
    duration = checked_move(q, target, env, desc, 1.0, 0.05, dq=dq)
    executor(q, dq, [(duration, target, None)]).check_limits(desc.limits, desc.joint_names)
    closed_form = move_duration(q, target, desc.limits.velocity, 1.0, 0.05)
    assert duration > closed_form
    with pytest.raises(SimInputError, match="above its velocity limit"):
        executor(q, dq, [(closed_form, target, None)]).check_limits(desc.limits, desc.joint_names)


def test_sequence_moves_start_from_the_measured_velocity(dyn):
    """The pose sequence hands out moves the executor accepts from the measured (q, dq)."""
    desc = dyn.desc
    env = make_envelope(desc, Q0, 10.0, 1.0)

    class Plan:  # the two fields the sequence reads
        poses = np.array([env.upper])
        envelope = env
        q0 = Q0

    seq = SamplingSequence(Plan(), desc, SequenceConfig(velocity_scale=1.0, min_duration=0.05))
    q, dq = env.lower.copy(), np.full(7, -0.2)
    act = seq.update(0.0, q, dq=dq)
    assert isinstance(act, Move)
    executor(q, dq, [(act.duration, act.target, None)]).check_limits(desc.limits, desc.joint_names)


def test_the_planners_path_is_the_executors():
    """executed_path (vectorised) is sim.trajectory.JointTrajectory's interpolation at the same instants."""
    rng = np.random.default_rng(2)
    q0, dq0 = rng.normal(size=7), rng.normal(size=7)
    points = [(0.1 * (k + 1), rng.normal(size=7), None if k == 2 else rng.normal(size=7)) for k in range(3)]
    q, dq = executed_path(q0, dq0, points, samples=5)
    times = np.concatenate([0.1 * k + 0.1 * np.linspace(0, 1, 6)[1:] for k in range(3)])
    ref = executor(q0, dq0, points)
    for k, t in enumerate(times[:-1]):  # the last instant is the end, where the executor holds
        assert np.allclose(q[k], ref.sample(t)[0]) and np.allclose(dq[k], ref.sample(t)[1])
