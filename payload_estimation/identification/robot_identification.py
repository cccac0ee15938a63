"""Identification of the unloaded robot from recorded motion (paper 003 Sec. II, paper 001).

Pipeline for a recording of a periodic excitation trajectory (:mod:`.excitation`):

1. align the recording with the trajectory's start, keep M whole periods of K samples;
2. period averaging of q and tau (eq. 11);
3. frequency-domain filtering/differentiation of the averaged q (only the excited harmonics), a
   zero-phase Butterworth response applied to the averaged (periodic) torque in the DFT domain;
4. base regressor Y_b (+ optional viscous/Coulomb friction columns), least squares with RSD (eq. 7),
   optional essential parameters (iterative RSD elimination);
5. validation: per-joint RMS torque error on other recordings (:func:`validate_model`).

Non-periodic recordings use zero-phase low-pass filtering and central differences instead.
The gravity-only variant fits pi_g = K_g p_g from static samples (:func:`identify_gravity`).
Results are :class:`IdentifiedModel` records, saved/loaded as PARAMS.yaml.
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pinocchio as pin
import yaml

from ..model.base_parameters import BaseParameters, compute_base_parameters
from ..model.description import RobotDescription
from ..model.dynamics import RigidBodyDynamics
from ..model.parameters import N_GRAVITY_PARAMS, N_PARAMS, PARAMETER_NAMES
from .data import SampleDataError, Samples
from .least_squares import (
    LSResult,
    TorqueError,
    essential_parameters,
    friction_names,
    friction_regressor,
    solve_least_squares,
    torque_error,
)
from .signal import fft_differentiate, lowpass, period_average, velocity_acceleration

PARAMS_FORMAT = "payload_estimation/identified_coefficients/v1"


class IdentificationError(ValueError):
    """Identification cannot proceed; the message says what is wrong with the data or options."""


def standard_parameter_names(n: int, kind: str = "full") -> tuple[str, ...]:
    """Names of the stacked standard parameters: m1, mcx1, ..., Jzz1, m2, ... (gravity: m, mc only)."""
    per = N_PARAMS if kind == "full" else N_GRAVITY_PARAMS
    return tuple(f"{PARAMETER_NAMES[i]}{k + 1}" for k in range(n) for i in range(per))


# --- the identified model ------------------------------------------------------------------------

@dataclass
class IdentifiedModel:
    """Identified dynamic coefficients of one robot, with what is needed to use and rebuild them.

    ``kind``: "full" (tau = Y_b pi + friction) or "gravity" (g = Y_gb pi_g). ``K`` (r x P) maps
    standard parameters to the r base coefficients; ``independent`` are the standard-parameter
    columns forming Y_b. ``kept`` (indices into the r base coefficients, then the friction columns)
    are the coefficients in the model -- all of them, or the essential ones; dropped coefficients
    count as zero. ``values``/``std``/``rsd`` (%)/``covariance`` belong to the kept ones.
    """

    robot: str
    kind: str
    joint_names: tuple[str, ...]
    K: np.ndarray
    independent: np.ndarray
    base_names: tuple[str, ...]
    viscous: bool
    coulomb: bool
    kept: np.ndarray
    values: np.ndarray
    std: np.ndarray
    rsd: np.ndarray
    covariance: np.ndarray
    sigma2: float
    n_rows: int
    residual_rms: float
    condition_number: float
    rss: float
    per_joint_rms: np.ndarray = field(default_factory=lambda: np.zeros(0))
    info: dict = field(default_factory=dict)

    @property
    def n(self) -> int:
        return len(self.joint_names)

    @property
    def rank(self) -> int:
        return int(self.K.shape[0])

    @property
    def all_names(self) -> tuple[str, ...]:
        """Base coefficient names followed by the friction coefficient names."""
        return self.base_names + friction_names(self.n, self.viscous, self.coulomb)

    @property
    def names(self) -> tuple[str, ...]:
        alln = self.all_names
        return tuple(alln[i] for i in self.kept)

    def full_vector(self) -> np.ndarray:
        """All base (+ friction) coefficients, zeros for the dropped ones."""
        out = np.zeros(len(self.all_names))
        out[self.kept] = self.values
        return out

    def base_coefficients(self) -> np.ndarray:
        """The r rigid-body base coefficients pi_b (zero where dropped)."""
        return self.full_vector()[: self.rank]

    def friction(self) -> tuple[np.ndarray, np.ndarray]:
        """(viscous, Coulomb) coefficients per joint (zeros when not identified)."""
        f = self.full_vector()[self.rank:]
        n = self.n
        fv = f[:n] if self.viscous else np.zeros(n)
        fc = f[n * self.viscous: n * self.viscous + n] if self.coulomb else np.zeros(n)
        return fv, fc

    def check_robot(self, desc: RobotDescription) -> None:
        """Raise unless these parameters belong to ``desc`` (same name, joints and parameter layout)."""
        if desc.name != self.robot:
            raise IdentificationError(f"parameters were identified for robot '{self.robot}', not '{desc.name}'")
        if desc.n != self.n:
            raise IdentificationError(f"parameters are for {self.n} joints ({self.robot}); robot '{desc.name}' "
                                      f"has {desc.n}")
        per = N_PARAMS if self.kind == "full" else N_GRAVITY_PARAMS
        if self.K.shape[1] != per * desc.n:
            raise IdentificationError(f"K has {self.K.shape[1]} columns, robot '{desc.name}' needs {per * desc.n}")

    def regressor(self, dyn: RigidBodyDynamics, q, dq=None, ddq=None) -> np.ndarray:
        """Stacked rows (N n x len(kept)) of the kept coefficients for N samples."""
        q = np.atleast_2d(np.asarray(q, float))
        if self.kind == "gravity":
            y = np.vstack([dyn.gravity_regressor(qk)[:, self.independent] for qk in q])
            return y[:, self.kept]
        if dq is None or ddq is None:
            raise IdentificationError("a full dynamic model needs velocities and accelerations")
        y = base_regressor_rows(dyn, self.independent, q, np.atleast_2d(dq), np.atleast_2d(ddq))
        if self.viscous or self.coulomb:
            y = np.hstack([y, friction_regressor(np.atleast_2d(dq), self.viscous, self.coulomb)])
        return y[:, self.kept]

    def predict(self, dyn: RigidBodyDynamics, q, dq=None, ddq=None) -> np.ndarray:
        """Predicted joint torques (N x n, N m)."""
        q = np.atleast_2d(np.asarray(q, float))
        return (self.regressor(dyn, q, dq, ddq) @ self.values).reshape(q.shape[0], self.n)

    # --- PARAMS.yaml -----------------------------------------------------------------------------
    def to_dict(self) -> dict:
        std_names = standard_parameter_names(self.n, self.kind)
        coeffs = []
        kept_pos = {int(k): i for i, k in enumerate(self.kept)}
        for j, name in enumerate(self.all_names):
            entry: dict = {"name": name}
            if j in kept_pos:
                i = kept_pos[j]
                entry.update(value=float(self.values[i]), std=float(self.std[i]),
                             rsd=None if not np.isfinite(self.rsd[i]) else float(self.rsd[i]))
            else:
                entry.update(value=0.0, dropped=True)
            if j < self.rank:
                row = self.K[j]
                entry["combination"] = {std_names[c]: float(row[c]) for c in np.flatnonzero(np.abs(row) > 0)}
            coeffs.append(entry)
        return {
            "format": PARAMS_FORMAT,
            "robot": self.robot,
            "kind": self.kind,
            "joint_names": list(self.joint_names),
            "friction": {"viscous": bool(self.viscous), "coulomb": bool(self.coulomb)},
            "coefficients": coeffs,
            "independent": [std_names[i] for i in self.independent],
            "fit": {"rows": int(self.n_rows), "sigma2": float(self.sigma2), "residual_rms": float(self.residual_rms),
                    "rss": float(self.rss), "condition_number": float(self.condition_number),
                    "per_joint_rms": [float(v) for v in self.per_joint_rms]},
            "covariance": [[float(v) for v in row] for row in self.covariance],
            "info": self.info,
        }

    def save(self, path: str | Path) -> Path:
        path = Path(path)
        path.write_text("# Identified dynamic coefficients (payload-estimation identify)\n"
                        + yaml.safe_dump(self.to_dict(), sort_keys=False, default_flow_style=None, width=200))
        return path

    @classmethod
    def from_dict(cls, d: dict, where: str = "parameters") -> IdentifiedModel:
        try:
            if d.get("format") != PARAMS_FORMAT:
                raise IdentificationError(f"{where}: not a PARAMS file (format {d.get('format')!r}, "
                                          f"expected {PARAMS_FORMAT})")
            kind = d["kind"]
            names = tuple(d["joint_names"])
            n = len(names)
            std_names = standard_parameter_names(n, kind)
            col = {s: i for i, s in enumerate(std_names)}
            fr = d.get("friction", {})
            viscous, coulomb = bool(fr.get("viscous")), bool(fr.get("coulomb"))
            coeffs = d["coefficients"]
            n_fric = n * (viscous + coulomb)
            rank = len(coeffs) - n_fric
            k = np.zeros((rank, len(std_names)))
            for j, c in enumerate(coeffs[:rank]):
                for sname, v in c["combination"].items():
                    if sname not in col:
                        raise IdentificationError(f"{where}: coefficient {c['name']} combines unknown "
                                                  f"parameter {sname!r}")
                    k[j, col[sname]] = float(v)
            kept = np.array([j for j, c in enumerate(coeffs) if not c.get("dropped")], dtype=int)
            values = np.array([float(coeffs[j]["value"]) for j in kept])
            std = np.array([float(coeffs[j].get("std", 0.0)) for j in kept])
            rsd = np.array([math.inf if coeffs[j].get("rsd") is None else float(coeffs[j]["rsd"]) for j in kept])
            cov = np.asarray(d.get("covariance", np.diag(std ** 2)), float)
            if cov.shape != (kept.size, kept.size):
                raise IdentificationError(f"{where}: covariance is {cov.shape}, expected {(kept.size, kept.size)}")
            fit = d.get("fit", {})
            indep = np.array([col[s] for s in d["independent"]], dtype=int)
            base_names = tuple(c["name"] for c in coeffs[:rank])
        except (KeyError, TypeError, AttributeError) as exc:
            raise IdentificationError(f"{where}: malformed PARAMS file ({exc!r})") from exc
        return cls(d["robot"], kind, names, k, indep, base_names, viscous, coulomb, kept, values, std, rsd, cov,
                   float(fit.get("sigma2", 1.0)), int(fit.get("rows", 0)), float(fit.get("residual_rms", 0.0)),
                   float(fit.get("condition_number", 0.0)), float(fit.get("rss", 0.0)),
                   np.asarray(fit.get("per_joint_rms", []), float), dict(d.get("info", {})))

    @classmethod
    def load(cls, path: str | Path) -> IdentifiedModel:
        path = Path(path)
        if not path.exists():
            raise IdentificationError(f"{path}: no such parameter file")
        try:
            d = yaml.safe_load(path.read_text())
        except yaml.YAMLError as exc:
            raise IdentificationError(f"{path}: not valid YAML: {exc}") from exc
        if not isinstance(d, dict):
            raise IdentificationError(f"{path}: top level must be a mapping")
        return cls.from_dict(d, str(path))


# --- regressors -----------------------------------------------------------------------------------

def base_regressor_rows(dyn: RigidBodyDynamics, independent: np.ndarray, q, dq, ddq) -> np.ndarray:
    """Stacked base regressor (N n x r) of N samples (row k n + j: joint j of sample k)."""
    q, dq, ddq = (np.atleast_2d(np.asarray(a, float)) for a in (q, dq, ddq))
    cols = dyn.maps.link_to_pin[:, independent]
    m, d = dyn.model, dyn.data
    rows = np.vstack([pin.computeJointTorqueRegressor(m, d, q[k], dq[k], ddq[k]) for k in range(q.shape[0])])
    return rows @ cols


# --- preprocessing ----------------------------------------------------------------------------------

@dataclass(frozen=True)
class Preprocessed:
    """Samples ready for regression: q, dq, ddq, tau (N x n) and how they were obtained."""

    q: np.ndarray
    dq: np.ndarray
    ddq: np.ndarray
    tau: np.ndarray
    method: str
    periods: int = 0
    fs: float = 0.0


def sample_rate(samples: Samples) -> float:
    """Median sampling rate (Hz) from the time stamps; error if they are missing or irregular."""
    if samples.t is None:
        raise IdentificationError("the recording has no time stamps 't'; they are needed for differentiation")
    dt = np.diff(samples.t)
    med = float(np.median(dt))
    if np.any(np.abs(dt - med) > 0.25 * med):
        k = int(np.argmax(np.abs(dt - med) > 0.25 * med))
        raise IdentificationError(f"irregular sampling: step {k} is {dt[k]:.4g} s, median {med:.4g} s; resample the "
                                  "recording to a fixed rate")
    return 1.0 / med


def _periodic_lowpass(x: np.ndarray, fs: float, cutoff: float, order: int) -> np.ndarray:
    """Zero-phase Butterworth (|H|^2, as filtfilt) applied to one period in the DFT domain (no edges)."""
    spec = np.fft.rfft(x, axis=0)
    f = np.fft.rfftfreq(x.shape[0], 1.0 / fs)
    gain = 1.0 / (1.0 + (f / cutoff) ** (2 * order))
    return np.fft.irfft(spec * gain[:, None], n=x.shape[0], axis=0)


def align_to_trajectory(samples: Samples, q_desired_period: np.ndarray, fs: float) -> int:
    """Index of the sample where the (first) period of the desired trajectory starts, by matching
    the measured positions against one period of the desired ones (coarse-to-fine search)."""
    k = q_desired_period.shape[0]
    q = samples.q
    span = q.shape[0] - k
    if span < 0:
        raise IdentificationError(f"recording has {q.shape[0]} samples, shorter than one period ({k})")
    stride = max(1, k // 400)
    ref = q_desired_period[::stride]

    def err(s):
        return float(np.mean((q[s:s + k:stride][: len(ref)] - ref) ** 2))

    step = max(1, int(fs * 0.02))
    coarse = np.arange(0, span + 1, step)
    errs = np.array([err(int(c)) for c in coarse])
    # Every period start matches equally well: take the first shift that is (nearly) as good as the best.
    thr = errs.min() + 0.05 * (np.median(errs) - errs.min())
    first = int(np.argmax(errs <= thr))
    while first + 1 < errs.size and errs[first + 1] < errs[first]:
        first += 1
    best = int(coarse[first])
    fine = range(max(0, best - int(fs * 0.02)), min(span, best + int(fs * 0.02)) + 1)
    return min(fine, key=err)


def preprocess_periodic(samples: Samples, period: float, harmonics: int, torque_cutoff: float = 6.0,
                        order: int = 4, start_index: int = 0, skip_periods: int = 0) -> Preprocessed:
    """Period averaging (eq. 11), frequency-domain differentiation of q (harmonics 0..``harmonics``
    of 1/period), zero-phase Butterworth on the averaged torque (paper: order 4, 6 Hz)."""
    fs = sample_rate(samples)
    k = int(round(period * fs))
    if abs(k - period * fs) > 1e-3 * k:
        raise IdentificationError(f"period {period} s is not a whole number of samples at {fs:.6g} Hz")
    m = (samples.n_samples - start_index) // k - skip_periods
    if m < 1:
        raise IdentificationError(f"recording holds {(samples.n_samples - start_index) / k:.2f} periods of "
                                  f"{period} s after sample {start_index}; need at least {skip_periods + 1}")
    s0 = start_index + skip_periods * k
    q_avg = period_average(samples.q[s0:s0 + m * k], k)
    tau_avg = period_average(samples.tau[s0:s0 + m * k], k)
    qf, dq, ddq = fft_differentiate(q_avg, fs, harmonics)
    if not 0 < torque_cutoff < fs / 2:
        raise IdentificationError(f"torque cutoff {torque_cutoff} Hz must be in (0, {fs / 2:.4g}) Hz")
    tau = _periodic_lowpass(tau_avg, fs, torque_cutoff, order)
    return Preprocessed(qf, dq, ddq, tau, "period-average+fft", m, fs)


def preprocess_filtered(samples: Samples, cutoff: float = 6.0, order: int = 4,
                        use_recorded_velocity: bool = False) -> Preprocessed:
    """Non-periodic data: zero-phase low-pass of q and tau at ``cutoff`` Hz, central differences."""
    fs = sample_rate(samples)
    qf, dq, ddq = velocity_acceleration(samples.q, fs, cutoff, order)
    if use_recorded_velocity and samples.dq is not None:
        from .signal import differentiate

        dq = lowpass(samples.dq, cutoff, fs, order)
        ddq = differentiate(dq, 1.0 / fs)
    tau = lowpass(samples.tau, cutoff, fs, order)
    # Drop the edges where the zero-phase filter and the differences are least reliable.
    # (two cut-off periods at each end: filtfilt's padding corrupts the second derivative there).
    cut = int(2.0 * fs / cutoff) + 2
    if samples.n_samples <= 4 * cut:
        raise IdentificationError(f"recording of {samples.n_samples} samples is too short for filtering at {cutoff} Hz "
                                  f"(needs more than {4 * cut}, i.e. {4 * cut / fs:.2f} s)")
    sl = slice(cut, samples.n_samples - cut)
    return Preprocessed(qf[sl], dq[sl], ddq[sl], tau[sl], "lowpass+differences", 0, fs)


# --- identification -------------------------------------------------------------------------------

@dataclass(frozen=True)
class IdentificationOptions:
    """Options of :func:`identify_robot`.

    ``friction``: add viscous + Coulomb friction (only meaningful when the torque sensor sees it,
    i.e. motor-current torques; link-side torque sensors do not). ``essential``: drop poorly
    identified coefficients (|pi| < ``min_abs`` and RSD > ``max_rsd`` %). ``decimate``: use every
    k-th preprocessed sample for the regression; ``None`` picks k = fs / (4 torque_cutoff) so that
    the rows are about as many as the low-passed data have independent samples. Filtering makes
    neighbouring residuals correlated; keeping every row would understate std and RSD (eq. 7
    assumes independent errors) by about sqrt(k) while barely changing the estimate.
    """

    friction: bool = False
    essential: bool = False
    min_abs: float = 0.01
    max_rsd: float = 40.0
    torque_cutoff: float = 6.0
    filter_order: int = 4
    skip_periods: int = 0
    decimate: int | None = None
    min_coulomb_speed: float = 0.02


def _base_names(base: BaseParameters, n: int) -> tuple[str, ...]:
    std = standard_parameter_names(n, base.kind)
    return tuple(f"{std[i]}R" if np.count_nonzero(base.K[r]) > 1 else std[i]
                 for r, i in enumerate(base.independent))


def fit_coefficients(desc: RobotDescription, data: Preprocessed,
                     options: IdentificationOptions = IdentificationOptions(), base: BaseParameters | None = None,
                     dyn: RigidBodyDynamics | None = None) -> IdentifiedModel:
    """Least squares (+ essential parameters) of the base coefficients from preprocessed data."""
    dyn = dyn or RigidBodyDynamics(desc)
    base = base or compute_base_parameters(dyn)
    n = desc.n
    step = options.decimate
    if step is None:
        step = max(1, int(data.fs / (4.0 * options.torque_cutoff))) if data.fs > 0 else 1
        step = max(1, min(step, data.q.shape[0] // 100))  # keep at least ~100 samples
    sl = slice(None, None, max(1, int(step)))
    q, dq, ddq, tau = data.q[sl], data.dq[sl], data.ddq[sl], data.tau[sl]
    y = base_regressor_rows(dyn, base.independent, q, dq, ddq)
    names = list(_base_names(base, n))
    if options.friction:
        y = np.hstack([y, friction_regressor(dq, True, True)])
        names += list(friction_names(n))
    t = tau.reshape(-1)
    weights = None
    if options.friction and options.min_coulomb_speed > 0:
        # Coulomb's sign(dq) is unreliable near zero speed: those rows get no weight.
        weights = (np.abs(dq) >= options.min_coulomb_speed).reshape(-1).astype(float)
    if options.essential:
        kept, res = essential_parameters(y, t, names, min_abs=options.min_abs, max_rsd=options.max_rsd,
                                         weights=weights)
    else:
        res = solve_least_squares(y, t, weights=weights, names=names)
        kept = np.arange(len(names))
    return _model_from_fit(desc, base, kept, res, options.friction, y, t, weights,
                           {"method": data.method, "periods": data.periods, "fs": data.fs,
                            "samples": int(q.shape[0]), "decimate": int(step), "essential": bool(options.essential)})


def _model_from_fit(desc, base, kept, res: LSResult, friction: bool, y, t, weights, info) -> IdentifiedModel:
    resid = t - y[:, kept] @ res.params
    if weights is not None:
        resid = resid * np.sqrt(weights)
    n = desc.n
    per_joint = np.sqrt(np.mean(resid.reshape(-1, n) ** 2, axis=0))
    return IdentifiedModel(desc.name, base.kind, desc.joint_names, base.K, base.independent,
                           _base_names(base, n), friction, friction, np.asarray(kept, int), res.params, res.std,
                           res.rsd, res.covariance, res.sigma2, res.n_rows, res.residual_rms, res.condition_number,
                           float(resid @ resid), per_joint, info)


def identify_robot(desc: RobotDescription, samples: Samples,
                   options: IdentificationOptions = IdentificationOptions(), period: float | None = None,
                   harmonics: int | None = None, q_desired_period: np.ndarray | None = None,
                   start_index: int | None = None) -> IdentifiedModel:
    """Identify the base coefficients of ``desc`` from a recording.

    With ``period`` (s) and ``harmonics`` (the excitation's L) the data are treated as periodic
    (alignment by ``q_desired_period`` -- one period of desired positions at the recording's rate --
    or ``start_index``); otherwise filtered numerical differentiation is used.
    """
    samples = samples.check_robot(desc)
    if period is not None:
        if harmonics is None:
            raise IdentificationError("periodic identification needs the number of excited harmonics")
        if start_index is None:
            start_index = 0 if q_desired_period is None else align_to_trajectory(samples, q_desired_period,
                                                                                sample_rate(samples))
        data = preprocess_periodic(samples, period, harmonics, options.torque_cutoff, options.filter_order,
                                   start_index, options.skip_periods)
    else:
        data = preprocess_filtered(samples, options.torque_cutoff, options.filter_order)
    return fit_coefficients(desc, data, options)


def identify_gravity(desc: RobotDescription, samples: Samples, essential: bool = False, min_abs: float = 0.01,
                     max_rsd: float = 40.0) -> IdentifiedModel:
    """Gravity coefficients pi_g from static samples (one row block per sample; average each pose's
    window before, e.g. 500 random configurations as paper 001 does on the LWR)."""
    samples = samples.check_robot(desc)
    if samples.n_samples * desc.n < 2 * N_GRAVITY_PARAMS * desc.n:
        raise IdentificationError(f"{samples.n_samples} static samples are too few for the gravity model; "
                                  f"use at least {2 * N_GRAVITY_PARAMS} well-spread poses")
    dyn = RigidBodyDynamics(desc)
    base = compute_base_parameters(dyn, "gravity")
    y = np.vstack([dyn.gravity_regressor(q)[:, base.independent] for q in samples.q])
    t = samples.tau.reshape(-1)
    names = list(_base_names(base, desc.n))
    if essential:
        kept, res = essential_parameters(y, t, names, min_abs=min_abs, max_rsd=max_rsd)
    else:
        res = solve_least_squares(y, t, names=names)
        kept = np.arange(len(names))
    return _model_from_fit(desc, base, kept, res, False, y, t, None,
                           {"method": "static", "samples": samples.n_samples, "essential": bool(essential)})


# --- validation -------------------------------------------------------------------------------------

def validate_model(model: IdentifiedModel, desc: RobotDescription, samples: Samples, cutoff: float = 6.0,
                   order: int = 4) -> TorqueError:
    """Per-joint RMS error between the (low-pass filtered) measured torque and the model's prediction
    along a recording (velocities/accelerations by filtered differentiation; static for gravity)."""
    model.check_robot(desc)
    samples = samples.check_robot(desc)
    dyn = RigidBodyDynamics(desc)
    if model.kind == "gravity":
        return torque_error(samples.tau, model.predict(dyn, samples.q))
    data = preprocess_filtered(samples, cutoff, order)
    return torque_error(data.tau, model.predict(dyn, data.q, data.dq, data.ddq))


def error_table(err: TorqueError, joint_names, title: str = "") -> str:
    """Markdown table of per-joint RMS (N m) and relative RMS."""
    lines = ([f"**{title}**", ""] if title else []) + ["| joint | RMS error (N m) | max error (N m) | relative |",
                                                       "|---|---:|---:|---:|"]
    for j, name in enumerate(joint_names):
        lines.append(f"| {name} | {err.per_joint_rms[j]:.4f} | {err.max_abs[j]:.4f} | "
                     f"{err.per_joint_relative[j]:.3f} |")
    lines.append(f"| all | {err.total_rms:.4f} | {err.max_abs.max():.4f} | |")
    return "\n".join(lines)


# --- recordings from a simulated (or any duck-typed) arm ---------------------------------------------

def record_trajectory(arm, points: list[tuple], rate: float, q_start: np.ndarray | None = None,
                      settle: float = 0.5, progress: bool = False, discard: float = 0.0) -> Samples:
    """Run ``points`` [(t, q, dq, ...)] on ``arm`` (``reset``/``set_trajectory``/``step``/``state``/``dt``,
    e.g. :class:`payload_estimation.sim.SimulatedArm`) and record q, measured tau, dq and t at
    ``rate`` Hz (each the mean over the physics steps of one interval) from the trajectory start to
    its end (after ``settle`` s at rest at ``q_start``). ``discard`` s at the start are dropped (e.g.
    the tracking transient of a trajectory that starts with a non-zero acceleration)."""
    every = int(round(1.0 / (rate * arm.dt)))
    if every < 1 or abs(every * arm.dt * rate - 1) > 1e-6:
        raise IdentificationError(f"rate {rate} Hz is not a divisor of the physics rate {1 / arm.dt:.6g} Hz")
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
        if progress and i % int(rate * 5) == 0:
            print(f"\r[record] {i / rate:7.1f} / {t_end:.1f} s", end="", file=sys.stderr, flush=True)
    if progress:
        print(file=sys.stderr)
    k0 = int(round(discard * rate))
    if k0 >= n_rec - 1:
        raise IdentificationError(f"discard {discard} s leaves nothing of a {t_end} s trajectory")
    return Samples(np.array(qs[k0:]), np.array(taus[k0:]), np.array(dqs[k0:]), None, np.array(ts[k0:]) - ts[0])


def random_configurations(desc: RobotDescription, count: int, seed: int = 0, margin: float = 0.1) -> np.ndarray:
    """``count`` uniform random configurations (rad) within the limits shrunk by ``margin`` rad."""
    lo, hi = desc.limits.position[:, 0] + margin, desc.limits.position[:, 1] - margin
    if np.any(lo >= hi):
        raise IdentificationError(f"margin {margin} rad leaves no range at some joint")
    return np.random.default_rng(seed).uniform(lo, hi, size=(count, desc.n))


def record_static_poses(arm, poses: np.ndarray, settle: float = 0.3, window: float = 0.2,
                        progress: bool = False) -> Samples:
    """Static samples: for each pose put ``arm`` at rest there (``reset``), wait ``settle`` s, then
    average the measured torque over ``window`` s. Returns one sample per pose (dq = 0)."""
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
        if progress and (i + 1) % 50 == 0:
            print(f"\r[static] {i + 1}/{len(poses)} poses", end="", file=sys.stderr, flush=True)
    if progress:
        print(file=sys.stderr)
    return Samples(np.array(qs), np.array(taus), np.zeros((len(qs), len(qs[0]))))


def cosine_trajectory(desc: RobotDescription, amplitude=None, b: float = 0.1, omega: float = 0.03,
                      duration: float = 20.0, rate: float = 50.0, center=None) -> list[tuple]:
    """Paper 003's validation trajectory q(t) = center + A (cos(w t) - B) as points [(t, q, dq, ddq)];
    A defaults to (pi/12, pi/6, ...) alternating. ``omega`` in rad/s (paper: 0.03 -- very slow; pass a
    larger one for a dynamic check)."""
    n = desc.n
    a = np.asarray(amplitude, float) if amplitude is not None else np.array(
        [np.pi / 12 if j % 2 == 0 else np.pi / 6 for j in range(n)])
    c = np.zeros(n) if center is None else np.asarray(center, float)
    t = np.arange(int(round(duration * rate)) + 1) / rate
    q = c + a * (np.cos(omega * t)[:, None] - b)
    dq = -a * omega * np.sin(omega * t)[:, None]
    ddq = -a * omega ** 2 * np.cos(omega * t)[:, None]
    return [(float(t[k]), q[k], dq[k], ddq[k]) for k in range(len(t))]


__all__ = [
    "IdentificationError",
    "IdentificationOptions",
    "IdentifiedModel",
    "Preprocessed",
    "SampleDataError",
    "align_to_trajectory",
    "base_regressor_rows",
    "cosine_trajectory",
    "error_table",
    "fit_coefficients",
    "identify_gravity",
    "identify_robot",
    "preprocess_filtered",
    "preprocess_periodic",
    "random_configurations",
    "record_static_poses",
    "record_trajectory",
    "sample_rate",
    "standard_parameter_names",
    "validate_model",
]
