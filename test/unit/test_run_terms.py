"""The dynamic fit's model terms computed ahead (payload/run_terms.py): while the loaded run is recorded and when
the reference is stored. The fit must not depend on how the work was split, rows the fit refuses must stop the work
ahead, and the terms are the model's (pinocchio) at the box means of the stream."""

from __future__ import annotations

import numpy as np
import pytest

from payload_estimation.model.dynamics import RigidBodyDynamics
from payload_estimation.model.parameters import BodyInertia
from payload_estimation.model.robot_file import load_robot
from payload_estimation.payload.dynamic import MotionRecording, check_recording, estimate_payload_dynamic
from payload_estimation.payload.estimator import UNLOADED, EstimatorConfig, PayloadEstimator
from payload_estimation.payload.run_terms import LoadedTerms, box_means, reference_terms

DEG = np.pi / 180
Q0 = np.array([5, 35, -5, -70, 10, 55, 5]) * DEG
BODY = BodyInertia(2.5, np.array([0.01, -0.015, 0.09]), np.diag([0.012, 0.01, 0.007]))
STEP = 1 / 250


def _stream(dyn: RigidBodyDynamics, delay: float, seed: int, seconds: float = 1.6) -> MotionRecording:
    """A 1 kHz stream (0.2 ms jitter) of ``dyn``'s exact torque on a smooth ±6° motion that starts at rest after
    0.2 s + ``delay`` and ends at rest."""
    rng = np.random.default_rng(seed)
    t = 100.0 + np.arange(int((seconds + 0.5) * 1000)) * 1e-3 + rng.uniform(-2e-4, 2e-4, int((seconds + 0.5) * 1000))
    s = np.clip((t - t[0] - 0.2 - delay) / seconds, 0, 1)
    amp = np.array([6, -5, 4, 6, -6, 5, 6]) * DEG
    a, b = np.sin(np.pi * s), np.sin(3 * np.pi * s)
    shape = a ** 2 * b
    d_shape = np.pi / seconds * (np.sin(2 * np.pi * s) * b + 3 * a ** 2 * np.cos(3 * np.pi * s))
    q = Q0 + np.outer(shape, amp)
    dq = np.outer(d_shape, amp)
    ddq = np.gradient(dq, t, axis=0)
    tau = np.array([dyn.inverse_dynamics(a, b, c) for a, b, c in zip(q, dq, ddq)])
    return MotionRecording(t, q, dq, tau)


@pytest.fixture(scope="module")
def iiwa():
    dyn = RigidBodyDynamics(load_robot("iiwa14"))
    return dyn, _stream(dyn.with_payload(BODY), 0.0, 1), _stream(dyn, 0.0123, 2)


def _rows(rec: MotionRecording) -> list:
    return [(rec.t[k], rec.q[k], rec.dq[k], rec.tau[k]) for k in range(rec.t.size)]


def test_the_terms_computed_while_recording_are_those_computed_at_once(iiwa):
    """Updates at random moments of the recording (a repeated stamp among them, as drivers send), unbounded or with
    no time left, give exactly the grid and terms of one pass over the finished recording; each grid value is the
    mean of the stream over its interval, and the terms are pinocchio's at those means."""
    dyn, loaded, _ = iiwa
    rows = _rows(loaded)
    rows.insert(700, rows[699])  # a repeated stamp: dropped by check_recording and by the work ahead
    rec = check_recording(MotionRecording.from_rows(rows), dyn.n, "loaded run", 0.05)
    ahead = LoadedTerms(dyn, STEP)
    done = 0
    for cut in sorted(np.random.default_rng(4).integers(1, len(rows), 25)):
        done += ahead.update(rows[:cut])
    assert 0.8 * 2.1 * 250 < done < 2.1 * 250  # most of the grid is computed before the recording is taken
    # a node's timer gives each call a wall-clock budget: with none left, one point per call, the rest at the end
    budgeted = LoadedTerms(dyn, STEP)
    assert [budgeted.update(rows[:cut], budget=0.0) for cut in range(200, 1200, 200)] == [1] * 5
    whole = LoadedTerms(dyn, STEP).finish(rec)
    for split in (ahead.finish(rec), budgeted.finish(rec)):
        for k in ("t", "q", "dq", "tau"):
            np.testing.assert_array_equal(getattr(split, k), getattr(whole, k))
        for k in ("h1", "h2", "w1", "w2"):
            np.testing.assert_array_equal(getattr(split.terms, k), getattr(whole.terms, k))
    np.testing.assert_allclose(np.diff(whole.t), STEP, atol=1e-9)
    for i in (3, 200, 400):  # the box mean against a fine trapezoid of the linear interpolation
        fine = np.linspace(whole.t[i] - STEP / 2, whole.t[i] + STEP / 2, 4001)
        y = np.array([np.interp(fine, rec.t, rec.q[:, j]) for j in range(dyn.n)]).T
        mean = np.sum(0.5 * (y[1:] + y[:-1]) * np.diff(fine)[:, None], axis=0) / STEP  # trapezoids (any NumPy)
        np.testing.assert_allclose(whole.q[i], mean, atol=1e-9)
        h1, h2 = dyn.momentum_torques(whole.q[i], whole.dq[i])
        w1, w2 = dyn.payload_momentum_rows(whole.q[i], whole.dq[i])
        np.testing.assert_allclose(whole.terms.h1[i], h1, atol=1e-12)
        np.testing.assert_allclose(whole.terms.h2[i], h2, atol=1e-12)
        np.testing.assert_allclose(whole.terms.w2[i], w2, atol=1e-12)
        np.testing.assert_allclose(whole.terms.w1[i], w1, atol=1e-12)


def test_rows_the_fit_refuses_stop_the_work_ahead_and_the_fit_says_why(iiwa):
    dyn, loaded, _ = iiwa
    rows = _rows(loaded)
    bad = list(rows)
    bad[500] = (bad[500][0], bad[500][1], bad[500][2], np.full(dyn.n, np.nan))
    ahead = LoadedTerms(dyn, STEP)
    ahead.update(bad[:800])
    assert ahead.broken and ahead.update(bad) == 0
    with pytest.raises(Exception, match="NaN"):
        estimate_payload_dynamic(dyn, MotionRecording.from_rows(bad), loaded_terms=ahead)
    back = list(rows)
    back[300] = (back[298][0],) + back[300][1:]
    ahead = LoadedTerms(dyn, STEP)
    ahead.update(back[:400])
    assert ahead.broken
    # work done for another recording (or model) is not used: the fit computes what it needs
    other = LoadedTerms(dyn, STEP)
    other.update(_rows(_stream(dyn, 0.05, 9))[:1000])
    rec = check_recording(loaded, dyn.n, "loaded run", 0.05)
    np.testing.assert_array_equal(other.finish(rec).terms.w2, LoadedTerms(dyn, STEP).finish(rec).terms.w2)
    assert not other.fits(RigidBodyDynamics(load_robot("iiwa14")), STEP) and not other.fits(dyn, 1 / 200)


def test_the_estimator_fits_the_same_payload_whether_or_not_the_work_was_done_ahead(iiwa):
    """The core as the node drives it (prepare_recording every 0.1 s of stream) and as a caller that never calls it:
    the same estimate, bit for bit; noise-free, it is the payload (the reference recorded 12.3 ms later in its
    stream). The reference's model torques, computed when it is stored, equal the resampled ones within 1e-4 N m."""
    dyn, loaded, reference = iiwa
    out = []
    for ahead in (True, False):
        core = PayloadEstimator(EstimatorConfig(), look_for_calibration=False)
        core.set_robot(dyn, tuple(dyn.desc.joint_names))
        for k in range(300):  # at rest before the reference: the unloaded anchor
            core.add_sample(reference.t[0] - 0.3 + k * 1e-3, reference.q[0], reference.dq[0] * 0, reference.tau[0])
        assert core.capture(UNLOADED, 0.0).ok
        for rec, finish in ((reference, core.store_reference), (loaded, core.estimate_motion)):
            core.start_recording()
            for k in range(rec.t.size):
                core.add_sample(rec.t[k], rec.q[k], rec.dq[k], rec.tau[k])
                if ahead and k % 100 == 99:
                    core.prepare_recording()
            answer = finish()
            assert answer.ok, answer.message
        out.append(answer.estimate)
    a, b = out
    assert a.mass == b.mass and np.array_equal(a.com, b.com) and a.std == b.std
    assert abs(a.mass / BODY.mass - 1) < 2e-3 and np.linalg.norm(a.com - BODY.com) < 1e-3, (a.mass, a.com)
    # box means of the model torque at the samples vs the model torque at the box means of the states
    ref = check_recording(reference, dyn.n, "reference run", 0.05)
    grid = LoadedTerms(dyn, STEP).finish(ref)
    np.testing.assert_allclose(box_means(grid.t, STEP, ref.t, reference_terms(dyn, ref).h2), grid.terms.h2,
                               atol=1e-4)
