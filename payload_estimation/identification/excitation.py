"""Optimal excitation trajectories: finite Fourier series (paper 003, eqs. 8-10).

Per joint i (L harmonics, fundamental frequency f0, w = 2 pi f0)::

    q_i(t)   = q0_i + sum_l  a_il/(w l) sin(w l t) - b_il/(w l) cos(w l t)
    dq_i(t)  = sum_l  a_il cos(w l t) + b_il sin(w l t)
    ddq_i(t) = sum_l -a_il w l sin(w l t) + b_il w l cos(w l t)

The trajectory starts and ends (every period) at rest at q0 with zero acceleration:
``sum_l b_il / l = 0`` (q(0) = q0), ``sum_l a_il = 0`` (dq(0) = 0), ``sum_l l b_il = 0`` (ddq(0) = 0).
The three equality constraints are eliminated exactly (the coefficients live in their null space)
and the inequality constraints -- reduced position, velocity and acceleration limits and an optional
workspace restriction |q - q0| <= max_deviation -- are met by scaling each joint's coefficients
(a homogeneous scale keeps the equality constraints). The free coefficients minimise cond(Y_b) of
the base regressor sampled along one period (eq. 9) with scipy's differential evolution.

Units: rad, rad/s, rad/s^2, s, Hz.
"""

from __future__ import annotations

import inspect
import logging
import math
import time
from dataclasses import dataclass, field

import numpy as np
import pinocchio as pin
import scipy.linalg
import scipy.optimize

from ..errors import PayloadEstimationError
from ..model.base_parameters import BaseParameters, compute_base_parameters
from ..model.description import RobotDescription
from ..model.dynamics import RigidBodyDynamics

log = logging.getLogger(__name__)

# SciPy >= 1.15 takes the generator as ``rng``; older ones (Ubuntu 24.04: 1.11) as ``seed``. A
# Generator gives the same stream through either.
_DE_RNG = "rng" if "rng" in inspect.signature(scipy.optimize.differential_evolution).parameters else "seed"


class ExcitationError(PayloadEstimationError):
    """An excitation trajectory cannot be designed or written; the message says what to change."""


@dataclass(frozen=True)
class ExcitationConfig:
    """Design options of an excitation trajectory.

    ``position_factor`` shrinks the position range about its middle, ``velocity_factor`` scales
    the description's velocity limits (paper 003 uses reduced velocity limits), ``acceleration_limit``
    (rad/s^2, scalar or per joint). ``center`` is q0 (default: middle of the reduced range, 0 for
    symmetric limits); ``max_deviation`` (rad, scalar or per joint) restricts the workspace around it.
    ``n_eval`` samples per period for cond(Y_b); ``friction`` adds viscous + Coulomb columns
    (the paper's 57 = 43 + 14 coefficients of the iiwa).
    """

    harmonics: int = 5
    f0: float = 0.05
    position_factor: float = 0.9
    velocity_factor: float = 0.6
    acceleration_limit: float | tuple[float, ...] = 3.0
    center: tuple[float, ...] | None = None
    max_deviation: float | tuple[float, ...] | None = None
    n_eval: int = 100
    friction: bool = True
    maxiter: int = 60
    popsize: int = 8
    seed: int = 0
    progress: bool = True

    def __post_init__(self):
        if self.harmonics < 2:
            raise ExcitationError(f"harmonics must be >= 2 (3 constraints on 2L coefficients), got {self.harmonics}")
        if not self.f0 > 0:
            raise ExcitationError(f"fundamental frequency f0 must be > 0 Hz, got {self.f0}")
        for name in ("position_factor", "velocity_factor"):
            v = getattr(self, name)
            if not 0 < v <= 1:
                raise ExcitationError(f"{name} must be in (0, 1], got {v}")
        if self.n_eval < 10:
            raise ExcitationError(f"n_eval must be >= 10 samples per period, got {self.n_eval}")

    @property
    def period(self) -> float:
        return 1.0 / self.f0


@dataclass(frozen=True)
class FourierTrajectory:
    """A periodic finite-Fourier-series joint trajectory (module docstring); a, b: n x L."""

    q0: np.ndarray
    a: np.ndarray
    b: np.ndarray
    f0: float
    joint_names: tuple[str, ...] = field(default_factory=tuple)

    @property
    def n(self) -> int:
        return int(self.a.shape[0])

    @property
    def harmonics(self) -> int:
        return int(self.a.shape[1])

    @property
    def period(self) -> float:
        return 1.0 / self.f0

    def evaluate(self, t) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """q, dq, ddq (each len(t) x n) at times ``t`` (s)."""
        t = np.atleast_1d(np.asarray(t, dtype=float))
        w = 2 * np.pi * self.f0
        wl = w * np.arange(1, self.harmonics + 1)  # L
        s, c = np.sin(np.outer(t, wl)), np.cos(np.outer(t, wl))  # T x L
        q = self.q0 + s @ (self.a / wl).T - c @ (self.b / wl).T
        dq = c @ self.a.T + s @ self.b.T
        ddq = -s @ (self.a * wl).T + c @ (self.b * wl).T
        return q, dq, ddq

    def sample(self, rate: float, periods: int = 1) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """t, q, dq, ddq at ``rate`` Hz over ``periods`` whole periods (last sample = end, at rest)."""
        if rate <= 0 or periods < 1:
            raise ExcitationError(f"sampling rate must be > 0 Hz and periods >= 1, got {rate}, {periods}")
        n = int(round(periods * self.period * rate))
        t = np.arange(n + 1) / rate
        return (t, *self.evaluate(t))

    def to_dict(self) -> dict:
        return {"f0": float(self.f0), "q0": self.q0.tolist(), "a": self.a.tolist(), "b": self.b.tolist(),
                "joint_names": list(self.joint_names)}

    @classmethod
    def from_dict(cls, d: dict) -> FourierTrajectory:
        try:
            return cls(np.asarray(d["q0"], float), np.asarray(d["a"], float), np.asarray(d["b"], float),
                       float(d["f0"]), tuple(d.get("joint_names", ())))
        except KeyError as exc:
            raise ExcitationError(f"Fourier trajectory record misses key {exc}") from exc


def constraint_nullspace(harmonics: int) -> np.ndarray:
    """Orthonormal basis N (2L x 2L-3) of coefficient vectors x = (a_1..a_L, b_1..b_L) that start at
    rest at q0 with zero acceleration (the equality constraints of eq. 10)."""
    ell = np.arange(1, harmonics + 1, dtype=float)
    z = np.zeros(harmonics)
    a_eq = np.array([np.concatenate([np.ones(harmonics), z]),
                     np.concatenate([z, 1.0 / ell]),
                     np.concatenate([z, ell])])
    return scipy.linalg.null_space(a_eq)


@dataclass
class ExcitationResult:
    """The designed trajectory, its cond(Y_b) (eq. 9) and how the optimisation went."""

    trajectory: FourierTrajectory
    cond: float
    cond_initial: float
    evaluations: int
    seconds: float
    config: ExcitationConfig


class ExcitationDesigner:
    """Evaluates cond(Y_b) of candidate coefficients and optimises them (eqs. 8-10)."""

    def __init__(self, desc: RobotDescription, config: ExcitationConfig = ExcitationConfig(),
                 base: BaseParameters | None = None):
        self.desc = desc
        self.cfg = config
        self.dyn = RigidBodyDynamics(desc)
        self.base = base if base is not None else compute_base_parameters(self.dyn)
        n, L = desc.n, config.harmonics
        lo, hi = desc.limits.position[:, 0], desc.limits.position[:, 1]
        mid, half = 0.5 * (lo + hi), 0.5 * (hi - lo) * config.position_factor
        self.q0 = np.asarray(config.center, dtype=float) if config.center is not None else mid.copy()
        if self.q0.shape != (n,):
            raise ExcitationError(f"center must give {n} joint angles (rad), got {self.q0.shape}")
        dev = np.minimum(mid + half - self.q0, self.q0 - (mid - half))
        if np.any(dev <= 0):
            bad = [desc.joint_names[i] for i in np.flatnonzero(dev <= 0)]
            raise ExcitationError(f"center lies outside the reduced position limits at joints {bad}")
        if config.max_deviation is not None:
            dev = np.minimum(dev, np.broadcast_to(np.asarray(config.max_deviation, float), (n,)))
        self.max_dev = dev
        self.max_vel = desc.limits.velocity * config.velocity_factor
        self.max_acc = np.broadcast_to(np.asarray(config.acceleration_limit, float), (n,)).copy()
        if np.any(self.max_dev <= 0) or np.any(self.max_acc <= 0):
            raise ExcitationError("max_deviation and acceleration_limit must be positive")
        self.null = constraint_nullspace(L)  # 2L x (2L-3)
        self.t_eval = np.arange(config.n_eval) * (config.period / config.n_eval)
        self._t_check = np.linspace(0, config.period, 8 * L * 20 + 1)
        self._cols = self.dyn.maps.link_to_pin @ self.base.selection
        self.evaluations = 0
        self.best = math.inf  # lowest log10 cond(Y_b) evaluated so far

    @property
    def n_free(self) -> int:
        return self.desc.n * self.null.shape[1]

    def trajectory(self, z: np.ndarray) -> FourierTrajectory:
        """Feasible trajectory from free coefficients z (n * (2L-3)): null-space map, then scaling."""
        n, L = self.desc.n, self.cfg.harmonics
        x = (self.null @ np.asarray(z, float).reshape(n, -1).T).T  # n x 2L
        raw = FourierTrajectory(np.zeros(n), x[:, :L], x[:, L:], self.cfg.f0)
        q, dq, ddq = raw.evaluate(self._t_check)
        peak = np.maximum.reduce([np.abs(q).max(0) / self.max_dev, np.abs(dq).max(0) / self.max_vel,
                                  np.abs(ddq).max(0) / self.max_acc])
        scale = np.where(peak > 0, 1.0 / np.maximum(peak, 1e-300), 0.0)[:, None] * 0.999
        return FourierTrajectory(self.q0.copy(), x[:, :L] * scale, x[:, L:] * scale, self.cfg.f0,
                                 self.desc.joint_names)

    def random_trajectory(self, seed: int) -> FourierTrajectory:
        """A feasible trajectory from random free coefficients (no optimisation): a quick, reproducible
        excitation within the configured limits, e.g. for Monte-Carlo benches."""
        return self.trajectory(np.random.default_rng(seed).normal(size=self.n_free))

    def observation_matrix(self, traj: FourierTrajectory, t: np.ndarray | None = None) -> np.ndarray:
        """Stacked base regressor Y_b (n len(t) x r [+ 2n friction columns]) along ``traj``."""
        t = self.t_eval if t is None else t
        q, dq, ddq = traj.evaluate(t)
        model, data = self.dyn.model, self.dyn.data
        rows = np.vstack([pin.computeJointTorqueRegressor(model, data, q[k], dq[k], ddq[k]) for k in range(len(t))])
        yb = rows @ self._cols
        if self.cfg.friction:
            n = self.desc.n
            fr = np.zeros((len(t) * n, 2 * n))
            idx = np.arange(len(t)) * n
            for j in range(n):
                fr[idx + j, j] = dq[:, j]
                fr[idx + j, n + j] = np.sign(dq[:, j])
            yb = np.hstack([yb, fr])
        return yb

    def cond(self, traj: FourierTrajectory) -> float:
        """cond(Y_b) = sigma_max / sigma_min of the observation matrix (eq. 9)."""
        s = np.linalg.svd(self.observation_matrix(traj), compute_uv=False)
        return float(s[0] / s[-1]) if s[-1] > 0 else math.inf

    def _objective(self, z: np.ndarray) -> float:
        self.evaluations += 1
        c = self.cond(self.trajectory(z))
        value = math.log10(c) if np.isfinite(c) else 30.0
        self.best = min(self.best, value)
        return value

    def optimise(self) -> ExcitationResult:
        """Global minimisation of cond(Y_b) by differential evolution (progress logged: INFO with
        ``config.progress``, else DEBUG)."""
        cfg = self.cfg
        rng = np.random.default_rng(cfg.seed)
        vmax = np.repeat(self.max_vel, self.null.shape[1])
        bounds = list(zip(-vmax, vmax))
        z0 = rng.uniform(-vmax, vmax)
        cond0 = self.cond(self.trajectory(z0))
        start, gen = time.monotonic(), [0]

        def progress(xk, convergence=None):  # the callback form every supported SciPy calls
            gen[0] += 1
            log.log(logging.INFO if cfg.progress else logging.DEBUG,
                    "excitation design: generation %d/%d, cond(Y_b) = %.1f (%d evaluations, %.1f s)", gen[0],
                    cfg.maxiter, 10 ** self.best, self.evaluations, time.monotonic() - start)

        res = scipy.optimize.differential_evolution(
            self._objective, bounds, maxiter=cfg.maxiter, popsize=cfg.popsize, tol=1e-6,
            polish=False, init="sobol", callback=progress, x0=z0, updating="immediate",
            **{_DE_RNG: np.random.default_rng(cfg.seed)})
        traj = self.trajectory(res.x)
        return ExcitationResult(traj, self.cond(traj), cond0, self.evaluations, time.monotonic() - start, cfg)


def design_excitation(desc: RobotDescription, config: ExcitationConfig = ExcitationConfig()) -> ExcitationResult:
    """Design an optimal excitation trajectory for ``desc`` (eqs. 8-10); see :class:`ExcitationConfig`."""
    return ExcitationDesigner(desc, config).optimise()


def check_limits(traj: FourierTrajectory, desc: RobotDescription, rate: float = 200.0) -> list[str]:
    """Violations of the description's position and velocity limits along one period (empty: ok)."""
    _, q, dq, _ = traj.sample(rate)
    problems = []
    lo, hi = desc.limits.position[:, 0], desc.limits.position[:, 1]
    for j, name in enumerate(desc.joint_names):
        if q[:, j].min() < lo[j] or q[:, j].max() > hi[j]:
            problems.append(f"joint {name}: position range [{q[:, j].min():.3f}, {q[:, j].max():.3f}] rad "
                            f"exceeds limits [{lo[j]:.3f}, {hi[j]:.3f}]")
        if np.abs(dq[:, j]).max() > desc.limits.velocity[j]:
            problems.append(f"joint {name}: speed {np.abs(dq[:, j]).max():.3f} rad/s exceeds "
                            f"{desc.limits.velocity[j]:.3f}")
    return problems


def trajectory_points(traj: FourierTrajectory, rate: float = 50.0, periods: int = 1) -> list[tuple]:
    """[(time_from_start s, positions, velocities, accelerations), ...] for a trajectory controller
    (``SimulatedArm.set_trajectory`` takes the first three)."""
    t, q, dq, ddq = traj.sample(rate, periods)
    return [(float(t[k]), q[k].copy(), dq[k].copy(), ddq[k].copy()) for k in range(len(t))]


