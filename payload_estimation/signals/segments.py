"""Static segments of a recording: where the arm rested, as one averaged capture per rest.

This turns a recorded ``joint_states`` stream (e.g. a rosbag of the sampler's ±7° poses on a real
robot) into the static captures the payload estimator takes live: each maximal run of slow samples
that lasts at least ``config.window`` s gives the mean (q, tau) of its last window, provided that
window passes the same settle test the estimator node uses (:func:`signals.settle.check_static`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .samples import SampleDataError, Samples
from .settle import SettleConfig, check_static


@dataclass(frozen=True)
class StaticCapture:
    """A rest of the arm: start/end time (s), mean q (rad) and tau (N m) of its last window."""

    t_start: float
    t_end: float
    q: np.ndarray
    tau: np.ndarray


def static_captures(samples: Samples, config: SettleConfig | None = None, guard: float = 0.1) -> list[StaticCapture]:
    """One capture per rest period of ``samples`` (needs time stamps; velocities if recorded).

    The last ``guard`` s of every slow run are dropped: the next move starts slowly, and its
    first samples already carry acceleration torques.
    """
    cfg = config or SettleConfig()
    if samples.t is None:
        raise SampleDataError("finding static segments needs time stamps (column 't' or the bag's stamps)")
    t, q, tau = samples.t, samples.q, samples.tau
    if samples.dq is not None:
        speed = np.max(np.abs(samples.dq), axis=1)
    else:
        speed = np.max(np.abs(np.gradient(q, t, axis=0)), axis=1) if t.size > 1 else np.zeros(t.size)
    slow = speed < cfg.max_velocity
    out = []
    edges = np.flatnonzero(np.diff(np.concatenate([[0], slow.astype(int), [0]])))
    for a, b in zip(edges[::2], edges[1::2]):  # slow run = samples a .. b-1
        b = a + int(np.searchsorted(t[a:b], t[b - 1] - guard, side="right"))
        if b - a < 2 or t[b - 1] - t[a] < cfg.window:
            continue
        sel = slice(a, b)
        res = check_static(t[sel], q[sel], None if samples.dq is None else samples.dq[sel], tau[sel], cfg,
                           samples.joint_names)
        if res.static:
            out.append(StaticCapture(float(t[a]), float(t[b - 1]), res.q, res.tau))
    return out


def match_captures(loaded: list[StaticCapture], unloaded: list[StaticCapture],
                   tol: float = np.radians(0.2)) -> list[tuple[StaticCapture, StaticCapture]]:
    """Pairs (loaded, unloaded) at the same configuration (max joint difference <= ``tol`` rad)."""
    pairs = []
    for c in loaded:
        if not unloaded:
            break
        d = [float(np.max(np.abs(c.q - u.q))) for u in unloaded]
        k = int(np.argmin(d))
        if d[k] <= tol:
            pairs.append((c, unloaded[k]))
    return pairs
