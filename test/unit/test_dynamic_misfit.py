"""A dynamic sample that does not fit says so (issue 46): the excitation's fit checks its residual against the
stream's noise through its filter and, when the loaded run has torque the model cannot explain, widens σ to cover it
and says it in words; on runs its model explains σ is what it was.

Truth: the MuJoCo arm (3 % link model error, sensor offsets, 0.1 N m noise, 1 kHz), a reference run before the grasp
and the same excitation with the payload (the differential fit the sampler's dynamic ``sample`` makes). The misfits,
in the loaded run only: a hose carried with the part pulls on joint 6 like a spring, 10 N m/rad about the pick
configuration (up to 0.9 N m over the ±5° excitation); a joint 4 whose friction the reference run did not have
(0.5 N m Coulomb). The fit's σ before issue 46 (its residual's scatter, scaled by the residual's correlation and a
jackknife over stretches of the motion) already covered both (within 1.6σ): what was missing is that it said so --
the estimate was published as if it fitted.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from payload_estimation.model.dynamics import RigidBodyDynamics
from payload_estimation.model.parameters import BodyInertia
from payload_estimation.model.robot_file import load_robot
from payload_estimation.payload.dynamic import DynamicFitConfig, MotionRecording, estimate_payload_dynamic
from payload_estimation.sim import SensorConfig, SimConfig, SimulatedArm, true_links

DEG = np.pi / 180
PICK = np.array([5, 35, -5, -70, 10, 55, 5]) * DEG
BODY = BodyInertia(2.5, np.array([0.01, -0.015, 0.09]), np.diag([0.012, 0.01, 0.007]))
OFFSETS = np.array([0.3, -0.4, 0.2, 0.1, -0.2, 0.15, -0.1])
AMPLITUDE = np.array([4, 5, -4, 5, -5, 5, 5]) * DEG
KEYS = ("mass", "cx", "cy", "cz")
MISFITS = {"hose on joint 6": lambda rec: SPRING * (rec.q[:, 5] - PICK[5]),
           "friction on joint 4": lambda rec: 0.5 * np.tanh(rec.dq[:, 3] / 0.01)}
SPRING = 10.0  # N m/rad


def _record(desc, body: BodyInertia | None, seed: int) -> MotionRecording:
    """0.3 s at rest at PICK, out and back through two points in 1.6 s, 0.4 s at rest: (t, q, dq, tau)."""
    arm = SimulatedArm(desc, SimConfig(seed=seed, true_links=true_links(desc, 0.03, 3),
                                       sensor=SensorConfig(noise_std=0.1, offset=OFFSETS)))
    if body is not None:
        arm.attach_payload(body)
    arm.reset(PICK)
    rows = [(s.t, s.q.copy(), s.dq.copy(), s.tau.copy()) for s in arm.run(0.3)]
    arm.set_trajectory([(0.5, PICK + AMPLITUDE, None), (1.1, PICK - AMPLITUDE, None), (1.6, PICK, None)])
    rows += [(s.t, s.q.copy(), s.dq.copy(), s.tau.copy()) for s in arm.run(2.0)]
    return MotionRecording.from_rows(rows)


@pytest.fixture(scope="module")
def runs():
    desc = load_robot("lwr4")
    return RigidBodyDynamics(desc), _record(desc, BODY, 4), _record(desc, None, 5)


def _fit(dyn, loaded, reference, cfg: DynamicFitConfig):
    est = estimate_payload_dynamic(dyn, loaded, reference, cfg)
    err = np.array([est.mass, *est.com]) - np.array([BODY.mass, *BODY.com])
    return est, err, np.array([est.std[k] for k in KEYS])


def test_fitting_runs_leave_sigma_unchanged(runs):
    """Runs the model explains: no misfit said, σ exactly the one without the check, the truth within 3σ."""
    dyn, loaded, reference = runs
    est, err, std = _fit(dyn, loaded, reference, DynamicFitConfig())
    _, _, std0 = _fit(dyn, loaded, reference, DynamicFitConfig(misfit_chi2=np.inf))
    assert est.misfit == ""
    np.testing.assert_array_equal(std, std0)
    assert np.all(np.abs(err) <= 3 * std), (err, std)


@pytest.mark.parametrize("misfit", sorted(MISFITS))
def test_unexplained_torque_is_flagged_and_sigma_covers_the_error(runs, misfit):
    """A torque the model lacks in the loaded run: the estimate says the excitation has torque the model does not
    explain (against what the noise explains) and how uncertain that leaves the CoM, σ is wider than the fit's own, and
    mass and every CoM component lie within 3σ. The status (estimator core) says it too."""
    dyn, loaded, reference = runs
    tau = loaded.tau.copy()
    extra = MISFITS[misfit](loaded)
    tau[:, 5 if "joint 6" in misfit else 3] += extra
    bent = replace(loaded, tau=tau)
    _, _, std0 = _fit(dyn, bent, reference, DynamicFitConfig(misfit_chi2=np.inf))
    est, err, std = _fit(dyn, bent, reference, DynamicFitConfig())
    assert est.misfit and est.misfit in est.notes
    assert est.misfit.startswith("the excitation has torque the model does not explain:")
    assert "N m RMS against" in est.misfit and "CoM uncertain to ±" in est.misfit
    assert np.all(std > std0)
    assert np.all(np.abs(err) <= 3 * std), (err, std)
