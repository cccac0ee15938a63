"""Recordings from a simulated (or any duck-typed) arm, as identification data.

The arm needs ``reset(q)``, ``set_trajectory(points)``, ``step(k)``, ``state()`` and ``dt``
(:class:`payload_estimation.sim.SimulatedArm`). Results are identification
:class:`~payload_estimation.signals.samples.Samples`; progress is logged (INFO with
``progress=True``, else DEBUG).
"""

from __future__ import annotations

import logging

import numpy as np

from ..signals.samples import SampleDataError, Samples

log = logging.getLogger(__name__)


def record_trajectory(arm, points: list[tuple], rate: float, q_start: np.ndarray | None = None,
                      settle: float = 0.5, progress: bool = False, discard: float = 0.0) -> Samples:
    """Run ``points`` [(t, q, dq, ...)] on ``arm`` and record q, measured tau, dq and t at ``rate`` Hz
    (each the mean over the physics steps of one interval) from the trajectory start to its end
    (after ``settle`` s at rest at ``q_start``). ``discard`` s at the start are dropped (e.g. the
    tracking transient of a trajectory that starts with a non-zero acceleration)."""
    every = int(round(1.0 / (rate * arm.dt)))
    if every < 1 or abs(every * arm.dt * rate - 1) > 1e-6:
        raise SampleDataError(f"rate {rate} Hz is not a divisor of the physics rate {1 / arm.dt:.6g} Hz")
    level = logging.INFO if progress else logging.DEBUG
    if q_start is not None:
        arm.reset(q_start)
    arm.step(int(round(settle / arm.dt)))
    arm.set_trajectory([(p[0], p[1], p[2]) for p in points if p[0] > 0])
    t_end = max(p[0] for p in points)
    n_rec = int(round(t_end * rate))
    qs, taus, dqs, ts = [], [], [], []
    for i in range(n_rec):
        # Average over the physics steps of one recording interval: an anti-aliasing (box) filter,
        # as a real sensor chain has; point sampling would fold physics-rate ripple into the data.
        acc = np.zeros((3, arm.n))
        t_sum = 0.0
        for _ in range(every):
            st = arm.state()
            acc += (st.q, st.dq, st.tau)
            t_sum += st.t
            arm.step(1)
        qs.append(acc[0] / every)
        dqs.append(acc[1] / every)
        taus.append(acc[2] / every)
        ts.append(t_sum / every)
        if i % int(rate * 5) == 0:
            log.log(level, "recording %.1f / %.1f s", i / rate, t_end)
    k0 = int(round(discard * rate))
    if k0 >= n_rec - 1:
        raise SampleDataError(f"discard {discard} s leaves nothing of a {t_end} s trajectory")
    return Samples(np.array(qs[k0:]), np.array(taus[k0:]), np.array(dqs[k0:]), None, np.array(ts[k0:]) - ts[0])


def record_static_poses(arm, poses: np.ndarray, settle: float = 0.3, window: float = 0.2,
                        progress: bool = False) -> Samples:
    """Static samples: for each pose put ``arm`` at rest there (``reset``), wait ``settle`` s, then
    average the measured torque over ``window`` s. Returns one sample per pose (dq = 0)."""
    level = logging.INFO if progress else logging.DEBUG
    qs, taus = [], []
    n_settle, n_win = int(round(settle / arm.dt)), max(1, int(round(window / arm.dt)))
    for i, q in enumerate(np.atleast_2d(poses)):
        arm.reset(q)
        arm.step(n_settle)
        acc_q, acc_t = np.zeros(len(q)), np.zeros(len(q))
        for _ in range(n_win):
            arm.step(1)
            st = arm.state()
            acc_q += st.q
            acc_t += st.tau
        qs.append(acc_q / n_win)
        taus.append(acc_t / n_win)
        if (i + 1) % 50 == 0:
            log.log(level, "static poses %d / %d", i + 1, len(poses))
    return Samples(np.array(qs), np.array(taus), np.zeros((len(qs), len(qs[0]))))


__all__ = ["record_static_poses", "record_trajectory"]
