"""The model terms of a recorded run, computed before the fit needs them: the ``sample`` call then waits for the
solve, not for a pass of the dynamics over every sample (about two thirds of the fit).

- The loaded run is taken on its fit grid (``step`` s from its first sample; each value the mean over its
  interval, :func:`box_means`): states, torque, the unloaded model's momentum torques and the payload's
  momentum rows (:class:`.filtered.MomentumTerms`). :class:`LoadedTerms` computes a grid point as soon as
  its interval has been recorded (a node calls :meth:`LoadedTerms.update` from a timer while the arm moves),
  :meth:`LoadedTerms.finish` the rest once the recording ends. The result does not depend on how the work was
  split.
- The reference run's momentum torques are computed at each of its samples when it is stored
  (:func:`reference_terms`) and resampled at the fit's instants exactly like its measured torque.

Units: s, rad, rad/s, N m.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from ..model.dynamics import RigidBodyDynamics
from .filtered import MomentumTerms, momentum_terms

if TYPE_CHECKING:
    from .dynamic import MotionRecording


def interp_rows(t_new: np.ndarray, t: np.ndarray, x: np.ndarray) -> np.ndarray:
    """Linear interpolation of the rows of ``x`` (N, ...) at ``t_new`` (inside [t0, tN])."""
    k = np.clip(np.searchsorted(t, t_new, side="right") - 1, 0, len(t) - 2)
    w = ((t_new - t[k]) / (t[k + 1] - t[k])).reshape((-1,) + (1,) * (x.ndim - 1))
    return x[k] * (1 - w) + x[k + 1] * w


def box_means(t_new: np.ndarray, step: float, t: np.ndarray, x: np.ndarray) -> np.ndarray:
    """Means of the piecewise-linear ``x`` (N, ...) over [t - step/2, t + step/2] at each of ``t_new`` (clipped
    to the samples' span), exactly: resampling with an anti-aliasing box (point samples of a faster stream would
    fold its ripple into the band the fit uses)."""
    shape = (-1,) + (1,) * (x.ndim - 1)
    slope = np.diff(x, axis=0) / np.diff(t).reshape(shape)
    integral = np.concatenate([np.zeros((1,) + x.shape[1:]),
                               np.cumsum(0.5 * (x[1:] + x[:-1]) * np.diff(t).reshape(shape), axis=0)])

    def at(u: np.ndarray) -> np.ndarray:  # ∫ x from t[0] to u: the last whole interval, then part of the next
        k = np.clip(np.searchsorted(t, u, side="right") - 1, 0, len(t) - 2)
        d = (u - t[k]).reshape(shape)
        return integral[k] + x[k] * d + 0.5 * slope[k] * d * d

    lo = np.clip(t_new - step / 2, t[0], t[-1])
    hi = np.clip(t_new + step / 2, t[0], t[-1])
    return (at(hi) - at(lo)) / np.maximum(hi - lo, 1e-12).reshape(shape)


def grid_times(first: float, last: float, step: float) -> np.ndarray:
    """The fit grid of a run whose samples span [first, last] s: first + k step, below last."""
    return first + step * np.arange(max(math.ceil((last - first) / step - 1e-9), 1))


CHUNK = 32
"""Grid points computed together (box means, then the model terms) between two looks at the deadline."""


@dataclass(frozen=True)
class GridRun:
    """A recorded run on its fit grid: instants ``t`` (M,) s, box means ``q``, ``dq``, ``tau`` (M, n) and the
    model ``terms`` at (q, dq)."""

    t: np.ndarray
    q: np.ndarray
    dq: np.ndarray
    tau: np.ndarray
    terms: MomentumTerms

    def select(self, keep: np.ndarray) -> GridRun:
        """The grid points where ``keep`` (M,) is true."""
        return GridRun(self.t[keep], self.q[keep], self.dq[keep], self.tau[keep], self.terms.select(keep))


class LoadedTerms:
    """The loaded run's :class:`GridRun`, computed while it is recorded (module docstring).

    ``update`` takes the (t, q, dq, tau) rows recorded so far (the same list each time, growing); a grid point
    is computed once samples beyond its interval have arrived, within a wall-clock ``budget`` per call (the rest
    waits for the next call or :meth:`finish`: a node's timer must not hold its executor). Rows the fit would
    refuse (NaN, stamps going back) stop the work: ``finish`` then computes from the checked recording, which
    raises the fit's error.
    """

    def __init__(self, dyn: RigidBodyDynamics, step: float):
        self.dyn, self.step = dyn, float(step)
        self._t: list[np.ndarray] = []  # stamps taken so far, in chunks
        self._x: list[np.ndarray] = []  # q, dq, tau side by side, per sample, in chunks
        self._seen = 0  # rows taken (repeated stamps included)
        self._last = -math.inf  # the newest stamp taken
        self._points: list[GridRun] = []
        self._done = 0  # grid points computed
        self.broken = False

    def fits(self, dyn: RigidBodyDynamics, step: float) -> bool:
        """Computed for this model and grid step."""
        return dyn is self.dyn and step == self.step and not self.broken

    def update(self, rows: list, budget: float | None = None) -> int:
        """Take the rows recorded beyond those seen and compute the grid points they complete, for at most
        ``budget`` s of wall clock (None: all); returns how many."""
        new = rows[self._seen:]
        if self.broken or not new:
            return 0
        self._seen += len(new)
        x = np.array([np.concatenate(r[1:]) for r in new], float)
        t = np.array([r[0] for r in new], float)
        if not np.all(np.isfinite(x)) or not np.all(np.isfinite(t)):
            self.broken = True
            return 0
        keep = np.ones(t.size, bool)
        for k, tk in enumerate(t):
            if tk < self._last:
                self.broken = True
                return 0
            keep[k] = tk > self._last  # a repeated stamp is dropped, as check_recording drops it
            self._last = max(self._last, tk)
        self._t.append(t[keep])
        self._x.append(x[keep])
        t = np.concatenate(self._t)
        if t.size < 2:
            return 0
        grid = grid_times(t[0], t[-1], self.step)
        ready = int(np.searchsorted(grid + self.step / 2, t[-1], side="left"))  # interval ends before the last
        deadline = None if budget is None else time.perf_counter() + budget
        return self._compute(t, np.concatenate(self._x), grid[:ready], deadline)

    def finish(self, rec: MotionRecording) -> GridRun:
        """The whole run on its grid, from ``rec`` (checked: :func:`.dynamic.check_recording`); the points computed
        while recording are kept where ``rec`` starts with the samples they came from."""
        seen = np.concatenate(self._t) if self._t else np.zeros(0)
        if self.broken or seen.size > rec.t.size or not np.array_equal(seen, rec.t[:seen.size]):
            self._points, self._done = [], 0
        x = np.hstack([rec.q, rec.dq, rec.tau])
        self._compute(rec.t, x, grid_times(rec.t[0], rec.t[-1], self.step))
        parts = self._points
        return GridRun(*(np.concatenate([getattr(p, k) for p in parts]) for k in ("t", "q", "dq", "tau")),
                       MomentumTerms.concatenate([p.terms for p in parts]))

    def _compute(self, t: np.ndarray, x: np.ndarray, grid: np.ndarray, deadline: float | None = None) -> int:
        """The grid points of ``grid`` not computed yet, :data:`CHUNK` at a time until ``deadline``; how many."""
        n, done = self.dyn.n, 0
        while self._done < grid.size:
            new = grid[self._done:self._done + CHUNK]
            # box means of this chunk only (a backlog of thousands of points must not cost each timer call), from
            # the samples up to just past its last interval: integrated from t[0] as over the whole run (the same
            # values to the last bit, however the work is split)
            end = min(int(np.searchsorted(t, new[-1] + self.step / 2, side="right")) + 2, t.size)
            means = box_means(new, self.step, t[:end], x[:end])
            q, dq, tau = means[:, :n], means[:, n:2 * n], means[:, 2 * n:]
            terms = momentum_terms(self.dyn, q, dq, deadline=deadline)
            k = terms.h1.shape[0]
            self._points.append(GridRun(new[:k], q[:k], dq[:k], tau[:k], terms))
            self._done += k
            done += k
            if k < new.size or (deadline is not None and time.perf_counter() > deadline):
                break
        return done


def reference_terms(dyn: RigidBodyDynamics, rec: MotionRecording) -> MomentumTerms:
    """The unloaded model's momentum torques at each sample of a reference run (no payload rows)."""
    return momentum_terms(dyn, rec.q, rec.dq, rows=False)


__all__ = ["GridRun", "LoadedTerms", "box_means", "grid_times", "interp_rows", "reference_terms"]
