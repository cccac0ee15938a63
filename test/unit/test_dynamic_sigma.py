"""The differential dynamic fit's σ covers the model's error in the torque of the tracking difference it
moves over with the model (issue 32, σ honest). The loaded run here follows the excitation 3 % larger than
the reference run (a payload pulls the arm off its path; exaggerated), both recorded from pinocchio's
inverse dynamics of a robot whose links are 10 % off the model the fit uses (sim.truth's perturbation):
the std of the fit with the declared uncertainty (5 %) includes that torque's error and covers the
error; with none declared it is the noise's alone. (Measured on the MuJoCo bench the term is small: a 3 %
link error moved the CoM by 0.03 mm; it is declared, not fitted, so σ stays on the safe side.)"""

from __future__ import annotations

import numpy as np
import pytest

from payload_estimation.identification.excitation import FourierTrajectory
from payload_estimation.model.dynamics import RigidBodyDynamics
from payload_estimation.model.parameters import BodyInertia
from payload_estimation.model.robot_file import load_robot
from payload_estimation.payload.dynamic import DynamicFitConfig, MotionRecording, estimate_payload_dynamic
from payload_estimation.sampling.payload_excitation import ExcitationPlanConfig, plan_payload_excitation
from payload_estimation.sim.truth import true_description, true_links

DEG = np.pi / 180
PICK = np.array([5, 35, -5, -70, 10, 55, 5]) * DEG
BODY = BodyInertia(2.0, np.array([0.012, -0.025, 0.095]), np.diag([0.012, 0.01, 0.007]))


def recording(dyn: RigidBodyDynamics, traj: FourierTrajectory, rng, rest: float = 0.2) -> MotionRecording:
    t = np.arange(0.0, traj.period + 2 * rest, 1e-3)
    q, dq, ddq = traj.evaluate(np.clip(t - rest, 0.0, traj.period))
    moving = ((t >= rest) & (t <= rest + traj.period))[:, None]
    dq, ddq = dq * moving, ddq * moving
    tau = np.array([dyn.inverse_dynamics(a, b, c) for a, b, c in zip(q, dq, ddq)])
    return MotionRecording(t, q, dq, tau + 0.1 * rng.standard_normal(tau.shape))


@pytest.fixture(scope="module")
def fits():
    desc = load_robot("lwr4")
    dyn = RigidBodyDynamics(desc)
    true = RigidBodyDynamics(true_description(desc, true_links(desc, 0.10, 5)))
    plan = plan_payload_excitation(dyn, PICK, ExcitationPlanConfig(duration=1.6, harmonics=5, velocity_scale=0.8,
                                                                    max_acceleration=25.0, candidates=20))
    tr = plan.trajectory
    larger = FourierTrajectory(tr.q0, 1.03 * tr.a, 1.03 * tr.b, tr.f0, tr.joint_names)
    rng = np.random.default_rng(6)
    loaded = recording(true.with_payload(BODY), larger, rng)
    reference = recording(true, tr, rng)
    return {u: estimate_payload_dynamic(dyn, loaded, reference, DynamicFitConfig(model_uncertainty=u,
                                                                                 estimate_skew=False))
            for u in (0.0, DynamicFitConfig().model_uncertainty)}


def z_scores(est) -> np.ndarray:
    err = np.r_[est.mass - BODY.mass, est.com - BODY.com]
    return err / np.array([est.std[k] for k in ("mass", "cx", "cy", "cz")])


def test_the_std_covers_the_model_error_of_the_tracking_difference(fits):
    est = fits[DynamicFitConfig().model_uncertainty]
    assert np.all(np.abs(z_scores(est)) <= 3), z_scores(est)
    assert any("tracking difference" in note for note in est.notes), est.notes
    assert not any("only its gravity part" in note for note in est.notes), est.notes  # declared in motion


def test_the_declared_uncertainty_widens_the_std(fits):
    with_term, without = fits[DynamicFitConfig().model_uncertainty], fits[0.0]
    for k in ("mass", "cx", "cy", "cz"):
        assert with_term.std[k] > 1.05 * without.std[k], (k, with_term.std[k], without.std[k])
    assert not any("tracking difference" in note for note in without.notes)
