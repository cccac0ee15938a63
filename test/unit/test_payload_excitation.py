"""The payload excitation around the pick configuration (sampling/payload_excitation.py, issue 18):
bounded like every commanded motion, rest to rest, better conditioned than a random series, and on
the MuJoCo arm enough for the payload's mass and CoM within issue 18's goals."""

from __future__ import annotations

import numpy as np
import pytest

from payload_estimation.collision.provisional import payload_gravity_posterior
from payload_estimation.model.dynamics import RigidBodyDynamics
from payload_estimation.model.parameters import BodyInertia
from payload_estimation.model.robot_file import load_robot
from payload_estimation.sampling.payload_excitation import (
    ExcitationPlanConfig,
    UnknownPayload,
    UnsafeExcitation,
    check_excitation,
    plan_payload_excitation,
    unknown_payload_torque,
)
from payload_estimation.sampling.poses import MotionLimitError

DEG = np.pi / 180
PICK = np.array([0, 30, 0, -60, 0, 60, 0]) * DEG


@pytest.fixture(scope="module", params=["lwr4", "iiwa14"])
def dyn(request):
    return RigidBodyDynamics(load_robot(request.param))


def test_every_commanded_point_is_inside_the_envelope_and_budgets(dyn):
    """At 1 kHz, for the pick pose and random configurations (some near the limits): inside ±7° and
    the limits less 1°, within the velocity and acceleration budgets, from rest at q0 back to rest."""
    rng = np.random.default_rng(0)
    lim = dyn.desc.limits.position
    cfg = ExcitationPlanConfig(duration=2.0, velocity_scale=0.5, max_acceleration=4.0, candidates=40)
    for q0 in [PICK, *rng.uniform(lim[:, 0] + 0.02, lim[:, 1] - 0.02, (4, dyn.n))]:
        plan = plan_payload_excitation(dyn, q0, cfg)
        check_excitation(plan, dyn.desc)
        t, q, dq, ddq = plan.trajectory.sample(1000.0)
        assert t[-1] == pytest.approx(2.0)
        for k in (0, -1):
            np.testing.assert_allclose(q[k], q0, atol=1e-9)
            np.testing.assert_allclose(dq[k], 0.0, atol=1e-9)
        assert np.all(np.abs(q - q0) <= 7 * DEG + 1e-9)
        assert np.all(np.abs(dq) <= 0.5 * dyn.desc.limits.velocity + 1e-9)
        assert np.all(np.abs(ddq) <= 4.0 + 1e-6)
        assert np.all(q >= plan.envelope.lower - 1e-9) and np.all(q <= plan.envelope.upper + 1e-9)


def test_a_joint_at_its_limit_margin_does_not_move(dyn):
    q0 = PICK.copy()
    q0[1] = dyn.desc.limits.position[1, 1] - 1 * DEG  # exactly at the 1° margin
    plan = plan_payload_excitation(dyn, q0, ExcitationPlanConfig(candidates=10))
    assert plan.peak_deviation[1] == 0.0 and np.all(plan.peak_deviation[[0, 2, 3, 4, 5, 6]] > 0)


def test_the_plan_is_better_conditioned_than_a_random_series(dyn):
    best = plan_payload_excitation(dyn, PICK, ExcitationPlanConfig(candidates=200))
    single = [plan_payload_excitation(dyn, PICK, ExcitationPlanConfig(candidates=1, seed=s)).condition_number
              for s in range(20)]
    assert best.condition_number < np.median(single)


FAST = ExcitationPlanConfig(duration=1.6, harmonics=5, velocity_scale=0.8, max_acceleration=25.0, candidates=40)


def test_the_unseen_payload_torque_is_kept_within_the_budget(dyn):
    """Where one rest pose leaves the mass uncertain (σ 0.35 kg) the full-speed plan would put more than
    3 N m on a joint at 3 σ; the planned one is scaled down until it does not (checked against an
    independent evaluation: the payload regressor at 1 kHz, not the planner's samples)."""
    sigma = 0.35
    full = plan_payload_excitation(dyn, PICK, FAST)
    assert unknown_payload_torque(dyn, full.trajectory, sigma) > 3.0
    plan = plan_payload_excitation(dyn, PICK, FAST, unknown=UnknownPayload(sigma, 3.0))
    assert 0.3 <= plan.scale < 1.0 and plan.unknown_torque <= 3.0
    t, q, dq, ddq = plan.trajectory.sample(1000.0)
    y0 = dyn.payload_gravity_regressor(PICK)[:, 0]
    worst = max(np.max(np.abs(dyn.payload_regressor(a, b, c)[:, 0] - y0)) for a, b, c in zip(q, dq, ddq))
    assert 3 * sigma * worst <= 3.0 * 1.02  # the planner samples 80 points per period
    check_excitation(plan, dyn.desc)


def test_stretched_up_no_useful_excitation_is_safe(dyn):
    """At the stretched-up pose the mass does not show at rest (the monitor's posterior keeps its prior):
    planning says so instead of running a motion whose unseen inertial torque would read as a collision."""
    q0 = np.zeros(dyn.n)
    _, cov = payload_gravity_posterior(dyn, q0[None])
    sigma = min(float(np.sqrt(cov[0, 0])), 5.0)
    assert sigma > 1.0
    with pytest.raises(UnsafeExcitation, match="does not show at rest"):
        plan_payload_excitation(dyn, q0, FAST, unknown=UnknownPayload(sigma, 3.0))


def test_bad_settings_and_configurations_are_refused(dyn):
    with pytest.raises(MotionLimitError, match="amplitude_deg"):
        plan_payload_excitation(dyn, PICK, ExcitationPlanConfig(amplitude_deg=20.0))
    with pytest.raises(MotionLimitError, match="duration"):
        plan_payload_excitation(dyn, PICK, ExcitationPlanConfig(duration=0.0))
    outside = PICK.copy()
    outside[3] = dyn.desc.limits.position[3, 1] + 0.1
    with pytest.raises(MotionLimitError, match="outside its limits"):
        plan_payload_excitation(dyn, outside)


def test_a_two_second_excitation_gives_mass_and_com_on_the_mujoco_arm():
    """The planned 2 s excitation, run without and with a 2.5 kg payload on the MuJoCo LWR (3 % link
    error, offsets, 0.1 N m noise), recorded at 1 kHz: the filtered differential fit is within issue
    18's 0.5 % mass and 3 mm CoM."""
    from payload_estimation.payload.filtered import estimate_payload_filtered
    from payload_estimation.sim import SensorConfig, SimConfig, SimulatedArm, true_links
    from payload_estimation.sim.recorders import record_trajectory

    desc = load_robot("lwr4")
    dyn = RigidBodyDynamics(desc)
    body = BodyInertia(2.5, np.array([0.01, 0.02, 0.09]), np.diag([0.01, 0.012, 0.006]))
    plan = plan_payload_excitation(dyn, PICK, ExcitationPlanConfig(duration=2.0))
    links = true_links(desc, 0.03, 1)
    offsets = np.random.default_rng(2).uniform(-0.5, 0.5, 7)
    runs = []
    for seed, load in ((3, None), (4, body)):
        arm = SimulatedArm(desc, SimConfig(seed=seed, true_links=links,
                                           sensor=SensorConfig(noise_std=0.1, offset=offsets)))
        if load is not None:
            arm.attach_payload(load)
        runs.append(record_trajectory(arm, plan.points(100.0), 1000.0, q_start=PICK))
    u, ld = runs
    est = estimate_payload_filtered(dyn, ld.t, ld.q, ld.dq, ld.tau, u.tau, reference_q=u.q, reference_dq=u.dq)
    print(f"cond {plan.condition_number:.1f}: mass {100 * (est.mass / body.mass - 1):+.3f} %, CoM "
          f"{1e3 * np.linalg.norm(est.com - body.com):.2f} mm, undetermined {est.undetermined}")
    assert abs(est.mass - body.mass) < 0.005 * body.mass and np.linalg.norm(est.com - body.com) < 0.003
