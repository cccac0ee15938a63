"""A fit that does not fit says so (issue 46): the online estimate checks its residual against its noise model and,
when the data disagree, widens σ by what the misfit can explain and says it in words; on data its model explains,
nothing changes.

The misfit is the simulator's recording before issue 46, reproduced: its velocity was MuJoCo's, half a step behind
the positions and the torque (to within the Coriolis torque of that half step's velocity change, ~0.01 N m), on the
move that showed it -- a planner's points every 0.1 s sent with positions only, the arm stopping at each (CoM errors
of 15-55 mm reported with σ of 3-15 mm: 4-9σ, on six such moves).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from payload_estimation.model.dynamics import RigidBodyDynamics
from payload_estimation.model.parameters import BodyInertia
from payload_estimation.model.robot_file import load_robot
from payload_estimation.payload.online import OnlineConfig, OnlinePayloadEstimator
from payload_estimation.payload.online_session import OnlineSession
from payload_estimation.sim import SensorConfig, SimConfig, SimulatedArm
from payload_estimation.sim.styles import user_trajectory

# the first of those six moves (bench_online's case generator): 25-55 deg per joint in 2.5 s, a 4 kg box
Q0 = np.radians([-2.7, -75.4, 54.3, 23.8, -10.5, -61.4, -31.1])
MOVE = np.radians([-54.1, 35.9, -36.3, 36.4, 28.0, 47.3, 33.0])
PAYLOAD = BodyInertia(3.99, np.array([0.0011, 0.0249, 0.1345]), np.diag([0.01009, 0.00557, 0.01407]))
CFG = OnlineConfig(model_uncertainty=0.03, torque_noise=0.1, torque_offset_std=0.5)
KEYS = ("mass", "cx", "cy", "cz")


@pytest.fixture(scope="module")
def dyn():
    return RigidBodyDynamics(load_robot("iiwa14"))


def _run(dyn, smooth: bool, old_rig: bool, duration: float = 2.5) -> dict:
    """The arm at rest 0.6 s (the anchor), the payload grasped, 0.2 s later the move; estimators with the misfit
    check (default) and without it (misfit_chi2 inf: the estimator before issue 46) on the same samples.
    Returns {name: (status at the end of the move, error (mass, CoM) against the truth)}."""
    arm = SimulatedArm(dyn.desc, SimConfig(seed=0, model_error=0.03, sensor=SensorConfig(noise_std=0.1)))
    arm.reset(Q0)
    ests = {"checked": OnlinePayloadEstimator(dyn, CFG),
            "unchecked": OnlinePayloadEstimator(dyn, replace(CFG, misfit_chi2=np.inf))}
    k_grasp, k_move = 600, 800
    for k in range(k_move + int(round(duration * 1000)) + 1):
        if k == k_grasp:
            arm.attach_payload(PAYLOAD)
            for e in ests.values():
                e.grasped()
        if k == k_move:
            if smooth:
                arm.set_trajectory([(duration, Q0 + MOVE, None)])
            else:  # the package's quintic through every point: the arm stops at each (as sim_node did)
                arm.set_trajectory([p[:3] for p in user_trajectory("positions", Q0, Q0 + MOVE, duration)])
        arm.step(1)
        s = arm.state()
        dq = s.dq
        if old_rig:  # MuJoCo's velocity, half a step behind q and the torque
            dq = dq - 0.5 * arm.dt * arm.acceleration
        for e in ests.values():
            e.update(s.t, s.q, dq, s.tau)
    truth = np.array([PAYLOAD.mass, *PAYLOAD.com])
    out = {}
    for name, e in ests.items():
        st = e.solve()
        est = st.estimate
        out[name] = (st, np.array([est.mass, *est.com]) - truth, np.array([est.std[k] for k in KEYS]))
    return out


@pytest.mark.slow
def test_misfit_is_flagged_and_sigma_covers_the_error(dyn):
    """The old rig's torque on a positions-only move: the unchecked σ misses the CoM by more than 3σ; the checked
    estimate says the motion has torque the model does not explain (against what it expected) and how uncertain
    that leaves the CoM, and its σ covers the error (mass and every CoM component within 3σ)."""
    out = _run(dyn, smooth=False, old_rig=True)
    st, err, std = out["unchecked"]
    assert np.max(np.abs(err) / std) > 3.0, (err, std)  # the check is needed here
    assert st.misfit == "" and st.widening == 1.0
    st, err, std = out["checked"]
    assert np.all(np.abs(err) <= 3 * std), (err, std)
    assert st.misfit_ratio > 100 and st.widening > 2
    assert st.fit_rms > 10 * st.expected_rms
    assert st.misfit.startswith("the motion has torque the model does not explain: ")
    assert "N m RMS against" in st.misfit and "CoM uncertain to ±" in st.misfit
    assert st.reason.startswith(st.misfit) and st.misfit in st.estimate.notes
    np.testing.assert_allclose(out["checked"][1], out["unchecked"][1], atol=1e-12)  # the estimate itself unchanged


@pytest.mark.slow
def test_smooth_move_nothing_changes(dyn):
    """A smooth move the model explains (χ²/ν about 1): no words, σ as without the check."""
    out = _run(dyn, smooth=True, old_rig=False)
    st, err, std = out["checked"]
    assert st.misfit == "" and st.widening == 1.0 and 0.5 < st.misfit_ratio < 2.0
    np.testing.assert_allclose(std, out["unchecked"][2], rtol=0.01)
    np.testing.assert_allclose(err, out["unchecked"][1], atol=1e-12)
    assert np.all(np.abs(err) <= 3 * std)


def test_session_says_it_in_the_status_and_the_log(dyn):
    """The node's session: while the fit fits, no words; with a torque the model lacks the words lead the state's
    reason and the status (online_misfit and the numbers) and the log note says it once, when it starts."""
    session = OnlineSession(config=CFG)
    session.use(dyn, None)
    q = Q0.copy()
    for k in range(400):  # unloaded at rest: the anchor
        session.add_sample(0.001 * k, q, np.zeros(7), dyn.gravity(q))
    session.grasped()
    loaded = RigidBodyDynamics(dyn.desc, PAYLOAD)
    rng = np.random.default_rng(0)
    notes = []
    for k in range(2000):
        t = 0.4 + 0.001 * k
        w = 2 * np.pi * 0.5
        q = Q0 + 0.3 * np.sin(w * (t - 0.4)) * np.ones(7)
        dq = 0.3 * w * np.cos(w * (t - 0.4)) * np.ones(7)
        ddq = -0.3 * w * w * np.sin(w * (t - 0.4)) * np.ones(7)
        torque = loaded.inverse_dynamics(q, dq, ddq) + 0.1 * rng.standard_normal(7)
        if k >= 800:
            torque[1] += 3.0 * np.sign(np.sin(2 * np.pi * 7 * t))  # a torque the model lacks (joint 2) from 1.2 s
        session.add_sample(t, q, dq, torque)
        if k % 100 == 99:
            tick = session.tick()
            if tick.note:
                notes.append((k, tick.note))
            if k == 799:
                vals = session.status_values()
                assert vals["online_misfit"] == "" and vals["online_sigma_widening"] == 1.0
                assert vals["online_fit_chi2"] < 2.0
    vals = session.status_values()
    assert vals["online_misfit"].startswith("the motion has torque the model does not explain")
    assert vals["online_reason"].startswith(vals["online_misfit"])
    assert vals["online_fit_rms"] > 2 * vals["online_expected_rms"] and vals["online_sigma_widening"] > 1
    assert vals["online_fit_chi2"] > CFG.misfit_chi2
    said = [k for k, n in notes if "does not explain" in n]
    assert len(said) >= 1 and said[0] >= 800


def test_the_rest_after_a_jerky_move_keeps_its_weight(dyn):
    """Issue 46: positions only with two stops on the way (their accelerations are faster than the 5 ms rows: χ²/ν
    10-30), 0.5 s at rest after the grasp and 1.5 s at rest after the move (the payload tilted 74 deg between the
    two rests). The motion's rows are deflated; the rest's, which fit their noise model, keep their weight: the
    estimate ends ``converged`` within 3σ, the words say which rows carry it (before, one check over all rows
    deflated the rest's too: σ of the CoM 2-6 mm after the rest, 'converging')."""
    target = Q0 + np.radians([-40, 50, -30, 35, 25, 90, 30])
    arm = SimulatedArm(dyn.desc, SimConfig(seed=0, model_error=0.03, sensor=SensorConfig(noise_std=0.1)))
    arm.reset(Q0)
    est = OnlinePayloadEstimator(dyn, CFG)
    for k in range(600 + 500 + 2500 + 1500):
        if k == 600:
            arm.attach_payload(PAYLOAD)
            est.grasped()
        if k == 1100:
            arm.set_trajectory(user_trajectory("stop-and-go", Q0, target, 2.5), "jtc")
        if k == 3600:
            end = est.solve()
        arm.step(1)
        s = arm.state()
        est.update(s.t, s.q, s.dq, s.tau)
    st = est.solve()
    err = np.array([st.estimate.mass - PAYLOAD.mass, *(st.estimate.com - PAYLOAD.com)])
    std = np.array([st.estimate.std[k] for k in KEYS])
    assert end.misfit, (end.state, end.reason)  # the move's stops: σ widened
    assert st.misfit and "at rest fit their noise model and carry the estimate" in st.misfit, st.misfit
    assert st.rest_rows > end.rest_rows + 200, (st.rest_rows, end.rest_rows)
    assert st.state == "converged", st.reason
    assert np.all(np.abs(err) <= 3 * std), (err, std)
