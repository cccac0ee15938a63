"""Identified dynamic coefficients: the :class:`IdentifiedModel` record and its PARAMS.yaml file.

A model holds the base coefficients pi_b of ``tau = Y_b(q, dq, ddq) pi_b + tau_f(dq)`` (or the
gravity coefficients of ``g = Y_gb(q) pi_g``), their statistics, and what is needed to rebuild
them: the map K from standard link parameters (seeds' order) and the regressor's columns.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pinocchio as pin
import yaml

from ..errors import PayloadEstimationError
from ..model.description import RobotDescription
from ..model.dynamics import RigidBodyDynamics
from ..model.parameters import N_GRAVITY_PARAMS, N_PARAMS, PARAMETER_NAMES
from .least_squares import friction_names, friction_regressor

PARAMS_FORMAT = "payload_estimation/identified_coefficients/v1"


class IdentificationError(PayloadEstimationError):
    """Identification cannot proceed; the message says what is wrong with the data or options."""


def standard_parameter_names(n: int, kind: str = "full") -> tuple[str, ...]:
    """Names of the stacked standard parameters: m1, mcx1, ..., Jzz1, m2, ... (gravity: m, mc only)."""
    per = N_PARAMS if kind == "full" else N_GRAVITY_PARAMS
    return tuple(f"{PARAMETER_NAMES[i]}{k + 1}" for k in range(n) for i in range(per))


# --- the identified model ------------------------------------------------------------------------

@dataclass
class IdentifiedModel:
    """Identified dynamic coefficients of one robot, with what is needed to use and rebuild them.

    ``kind``: "full" (tau = Y_b pi + friction) or "gravity" (g = Y_gb pi_g). Friction terms per
    joint (:func:`friction_regressor`): ``viscous`` Fv dq, ``coulomb`` Fc sign(dq), ``offset`` Fo.
    ``K`` (r x P) maps standard parameters to the r base coefficients; ``independent`` names the
    joint-frame standard parameters kept as base columns (:mod:`~payload_estimation.model.base_parameters`).
    ``kept`` (indices into the r base coefficients, then the friction columns) are the coefficients in
    the model -- all of them, or the essential ones; dropped coefficients count as zero.
    ``values``/``std``/``rsd`` (%)/``covariance`` belong to the kept ones.
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
    offset: bool = False
    _selection: np.ndarray | None = field(default=None, init=False, repr=False, compare=False)

    @property
    def n(self) -> int:
        return len(self.joint_names)

    @property
    def selection(self) -> np.ndarray:
        """P x r: the base regressor Y_b = Y @ selection of a link-frame standard regressor Y. Any K
        with Y = Y_b K (the structural identity of base parameters) gives Y_b = Y K⁺, so files written
        with another choice of columns read alike."""
        if self._selection is None or self._selection.shape != self.K.shape[::-1]:
            self._selection = np.linalg.pinv(self.K)
        return self._selection

    @property
    def rank(self) -> int:
        return int(self.K.shape[0])

    @property
    def all_names(self) -> tuple[str, ...]:
        """Base coefficient names followed by the friction coefficient names."""
        return self.base_names + friction_names(self.n, self.viscous, self.coulomb, self.offset)

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

    @property
    def has_friction(self) -> bool:
        return bool(self.viscous or self.coulomb or self.offset)

    def friction_terms(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(viscous N m s/rad, Coulomb N m, offset N m) per joint (zeros when not identified)."""
        f = self.full_vector()[self.rank:]
        n, out, k = self.n, [], 0
        for on in (self.viscous, self.coulomb, self.offset):
            out.append(f[k * n:(k + 1) * n] if on else np.zeros(n))
            k += int(on)
        return out[0], out[1], out[2]

    def friction(self) -> tuple[np.ndarray, np.ndarray]:
        """(viscous, Coulomb) coefficients per joint (zeros when not identified)."""
        fv, fc, _ = self.friction_terms()
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
            y = np.vstack([dyn.gravity_regressor(qk) @ self.selection for qk in q])
            if self.offset:
                y = np.hstack([y, friction_regressor(np.zeros_like(q), False, False, True)])
            return y[:, self.kept]
        if dq is None or ddq is None:
            raise IdentificationError("a full dynamic model needs velocities and accelerations")
        y = base_regressor_rows(dyn, self.selection, q, np.atleast_2d(dq), np.atleast_2d(ddq))
        if self.has_friction:
            y = np.hstack([y, friction_regressor(np.atleast_2d(dq), self.viscous, self.coulomb, self.offset)])
        return y[:, self.kept]

    def link_set(self, desc: RobotDescription) -> RobotDescription:
        """``desc`` with link parameters p that realise these coefficients (K p = π_b): the nearest such p
        to desc's own p0 in the scaled metric Σ ((p - p0) / s)², s = (m,
        0.1 m [x3], 0.01 m² m [x6]) per link (m: its mass in desc; kg, kg m, kg m²), so each link's change is
        relative to its size: p = p0 + S (K S)⁺ (π_b - K p0). Its rigid-body dynamics (M, C, g) equal this
        model's exactly (the rest of p is what no motion sees); not necessarily physically consistent
        (:class:`~payload_estimation.model.parameter_dynamics.ParameterDynamics` takes it). A gravity model
        changes (m, m c) only: M and C stay near the description's."""
        self.check_robot(desc)
        from ..model.parameters import BodyInertia

        p = np.array([b.to_params() for b in desc.links])
        m = np.maximum(np.abs(p[:, 0]), 1e-3)[:, None]
        per = N_PARAMS if self.kind == "full" else N_GRAVITY_PARAMS
        scale = (m * np.array([1.0, 0.1, 0.1, 0.1, *([0.01] * 6)]))[:, :per].reshape(-1)
        p0 = p[:, :per].reshape(-1)
        ks = self.K * scale
        step = scale * (np.linalg.pinv(ks) @ (self.base_coefficients() - self.K @ p0))
        p[:, :per] = (p0 + step).reshape(desc.n, per)
        return desc.with_links([BodyInertia.from_params(row) for row in p])

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
            "friction": {"viscous": bool(self.viscous), "coulomb": bool(self.coulomb), "offset": bool(self.offset)},
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
            viscous, coulomb, offset = bool(fr.get("viscous")), bool(fr.get("coulomb")), bool(fr.get("offset"))
            coeffs = d["coefficients"]
            n_fric = n * (viscous + coulomb + offset)
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
                   np.asarray(fit.get("per_joint_rms", []), float), dict(d.get("info", {})), offset)

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

def base_regressor_rows(dyn: RigidBodyDynamics, selection: np.ndarray, q, dq, ddq) -> np.ndarray:
    """Stacked base regressor (N n x r) of N samples (row k n + j: joint j of sample k); ``selection``
    (P x r) as :attr:`~payload_estimation.model.base_parameters.BaseParameters.selection`."""
    q, dq, ddq = (np.atleast_2d(np.asarray(a, float)) for a in (q, dq, ddq))
    cols = dyn.maps.link_to_pin @ selection
    m, d = dyn.model, dyn.data
    rows = np.vstack([pin.computeJointTorqueRegressor(m, d, q[k], dq[k], ddq[k]) for k in range(q.shape[0])])
    return rows @ cols


__all__ = [
    "PARAMS_FORMAT",
    "IdentificationError",
    "IdentifiedModel",
    "base_regressor_rows",
    "standard_parameter_names",
]
