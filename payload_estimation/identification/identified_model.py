"""Identified dynamic coefficients: the :class:`IdentifiedModel` record and its PARAMS.yaml file.

A model holds the base coefficients pi_b of ``tau = Y_b(q, dq, ddq) pi_b + tau_f(dq)`` (or the
gravity coefficients of ``g = Y_gb(q) pi_g``), their statistics, and what is needed to rebuild
them: the map K from standard link parameters (seeds' order) and the regressor's columns.
"""

from __future__ import annotations

import difflib
import math
import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pinocchio as pin
import yaml

from ..errors import PayloadEstimationError
from ..model.base_parameters import KINDS
from ..model.description import RobotDescription
from ..model.dynamics import RigidBodyDynamics
from ..model.parameters import N_GRAVITY_PARAMS, N_PARAMS, PARAMETER_NAMES
from .least_squares import friction_names, friction_regressor

PARAMS_FORMAT = "payload_estimation/identified_coefficients/v1"
_TOP_REQUIRED = ("format", "robot", "kind", "joint_names", "coefficients", "independent")
_TOP_KEYS = (*_TOP_REQUIRED, "friction", "fit", "covariance", "info")
_FRICTION_KEYS = ("viscous", "coulomb", "offset")
_COEFFICIENT_KEYS = ("name", "value", "std", "rsd", "dropped", "combination")
_FIT_KEYS = ("rows", "sigma2", "residual_rms", "rss", "condition_number", "per_joint_rms")
_PARAMETER_NAME = re.compile(rf"^({'|'.join(PARAMETER_NAMES)})([1-9][0-9]*)$")
_FRICTION_NAME = re.compile(r"^F[vco]([1-9][0-9]*)$")


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
        """The model a PARAMS mapping describes (``where``: the file, for messages). Every key, number and
        flag is checked: :class:`IdentificationError` says what is wrong, where, and what to do."""
        if not isinstance(d, dict):
            raise IdentificationError(f"{where}: top level must be a mapping")
        if d.get("format") != PARAMS_FORMAT:
            raise IdentificationError(f"{where}: not a PARAMS file (format {d.get('format')!r}, "
                                      f"expected {PARAMS_FORMAT})")
        _check_keys(d, _TOP_KEYS, _TOP_REQUIRED, "top level", where)
        robot = d["robot"]
        if not isinstance(robot, str) or not robot:
            raise IdentificationError(f"{where}: 'robot' must be the robot's name, got {robot!r}")
        kind = d["kind"]
        if kind not in KINDS:
            raise IdentificationError(f"{where}: kind {kind!r} is not one of {', '.join(KINDS)} (full: tau = Y_b pi "
                                      "+ friction, gravity: g = Y_gb pi_g)")
        names = _joint_names(d["joint_names"], where)
        n = len(names)
        fr = _mapping(d.get("friction", {}), "'friction'", where)
        _check_keys(fr, _FRICTION_KEYS, (), "'friction'", where)
        viscous, coulomb, offset = (_flag(fr.get(key, False), f"friction.{key}", where) for key in _FRICTION_KEYS)
        if kind == "gravity" and (viscous or coulomb):
            raise IdentificationError(f"{where}: a gravity model has no viscous or Coulomb friction (only offset); "
                                      "set friction.viscous and friction.coulomb to false")
        coeffs = _coefficient_list(d["coefficients"], where)
        fit = _mapping(d.get("fit", {}), "'fit'", where)
        _check_keys(fit, _FIT_KEYS, (), "'fit'", where)
        per_joint = [_number(v, f"fit.per_joint_rms[{j}]", where, minimum=0.0)
                     for j, v in enumerate(_list(fit.get("per_joint_rms", []), "fit.per_joint_rms", where))]
        indep_names = _list(d["independent"], "'independent'", where)
        _check_joint_count(n, coeffs, indep_names, len(per_joint), where)
        rank = _check_friction_names(coeffs, n, (viscous, coulomb, offset), where)
        std_names = standard_parameter_names(n, kind)
        col = {s: i for i, s in enumerate(std_names)}
        k = _combinations(coeffs[:rank], col, kind, n, where)
        indep = np.array([_column(s, col, kind, n, "'independent' lists", where) for s in indep_names], dtype=int)
        if indep.size != rank:
            raise IdentificationError(f"{where}: 'independent' lists {indep.size} parameters for {rank} base "
                                      "coefficients (one each)")
        dropped = [_flag(c.get("dropped", False), f"coefficient {c['name']}: 'dropped'", where) for c in coeffs]
        kept = np.flatnonzero(~np.array(dropped, bool))
        values = np.array([_number(c["value"], f"coefficient {c['name']}: value", where) for c in coeffs])[kept]
        std = np.array([_number(coeffs[j].get("std", 0.0), f"coefficient {coeffs[j]['name']}: std", where,
                                minimum=0.0) for j in kept])
        rsd = np.array([math.inf if coeffs[j].get("rsd") is None else
                        _number(coeffs[j]["rsd"], f"coefficient {coeffs[j]['name']}: rsd", where, finite=False,
                                minimum=0.0) for j in kept])
        cov = _covariance(d["covariance"], [coeffs[j]["name"] for j in kept], where) if "covariance" in d \
            else np.diag(std ** 2)
        info = _mapping(d.get("info", {}), "'info'", where)
        figures = {key: _number(fit.get(key, default), f"fit.{key}", where, finite=key != "condition_number",
                                minimum=0.0)
                   for key, default in (("sigma2", 1.0), ("rows", 0), ("residual_rms", 0.0),
                                        ("condition_number", 0.0), ("rss", 0.0))}
        return cls(robot, kind, names, k, indep, tuple(c["name"] for c in coeffs[:rank]), viscous, coulomb, kept,
                   values, std, rsd, cov, figures["sigma2"], int(figures["rows"]), figures["residual_rms"],
                   figures["condition_number"], figures["rss"], np.asarray(per_joint, float), dict(info), offset)

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


# --- reading PARAMS.yaml ---------------------------------------------------------------------------

def _show(v: object) -> str:
    text = repr(v)
    return text if len(text) <= 40 else text[:37] + "..."


def _check_keys(block: dict, allowed: tuple[str, ...], required: tuple[str, ...], what: str, where: str) -> None:
    """Refuse a missing required key or an unknown key of ``block``, naming it and the allowed ones."""
    unknown = [str(key) for key in block if key not in allowed]
    for key in required:
        if key not in block:
            typo = difflib.get_close_matches(key, unknown, 1)
            hint = f" ('{typo[0]}' misspelt?)" if typo else ""
            raise IdentificationError(f"{where}: {what}: missing key '{key}'{hint}; required keys: "
                                      f"{', '.join(required)}")
    if unknown:
        near = difflib.get_close_matches(unknown[0], allowed, 1)
        hint = f" (did you mean '{near[0]}'?)" if near else ""
        raise IdentificationError(f"{where}: {what}: unknown key '{unknown[0]}'{hint}; remove or rename it "
                                  f"(allowed keys: {', '.join(allowed)})")


def _mapping(v: object, what: str, where: str) -> dict:
    if not isinstance(v, dict):
        raise IdentificationError(f"{where}: {what} must be a mapping (key: value), got {_show(v)}")
    return v


def _list(v: object, what: str, where: str) -> list:
    if not isinstance(v, list):
        raise IdentificationError(f"{where}: {what} must be a list, got {_show(v)}")
    return v


def _flag(v: object, what: str, where: str) -> bool:
    if not isinstance(v, bool):
        raise IdentificationError(f"{where}: {what} must be true or false, got {_show(v)}")
    return v


def _number(v: object, what: str, where: str, finite: bool = True, minimum: float | None = None) -> float:
    """``v`` as a float; refused unless a number (a numeric string counts), finite unless ``finite`` is
    False, and at least ``minimum``."""
    if isinstance(v, bool) or not isinstance(v, (int, float, str)):
        raise IdentificationError(f"{where}: {what} must be a number, got {_show(v)}")
    try:
        x = float(v)
    except ValueError:
        raise IdentificationError(f"{where}: {what} {_show(v)} is not a number; write a number such as 0.25") from None
    if finite and not math.isfinite(x):
        raise IdentificationError(f"{where}: {what} is {x}, not a finite number; correct the file or identify "
                                  "the robot again")
    if minimum is not None and not x >= minimum:
        raise IdentificationError(f"{where}: {what} is {x}; it must be at least {minimum:g}")
    return x


def _joint_names(v: object, where: str) -> tuple[str, ...]:
    names = _list(v, "'joint_names'", where)
    if not names or not all(isinstance(s, str) and s for s in names):
        raise IdentificationError(f"{where}: 'joint_names' must list the robot's joint names, got {_show(v)}")
    twice = sorted({s for s in names if names.count(s) > 1})
    if twice:
        raise IdentificationError(f"{where}: 'joint_names' lists {', '.join(twice)} more than once")
    return tuple(names)


def _coefficient_list(v: object, where: str) -> list[dict]:
    """The coefficient entries, each a mapping with known keys and a unique name."""
    coeffs = _list(v, "'coefficients'", where)
    if not coeffs:
        raise IdentificationError(f"{where}: 'coefficients' is empty")
    seen: set[str] = set()
    for i, c in enumerate(coeffs):
        c = _mapping(c, f"coefficients entry {i + 1}", where)
        name = c.get("name")
        label = f"coefficient {name}" if isinstance(name, str) and name else f"coefficients entry {i + 1}"
        _check_keys(c, _COEFFICIENT_KEYS, ("name", "value"), label, where)
        if not isinstance(name, str) or not name:
            raise IdentificationError(f"{where}: {label}: 'name' must be a non-empty string, got {_show(name)}")
        if name in seen:
            raise IdentificationError(f"{where}: coefficient {name} appears more than once")
        seen.add(name)
    return coeffs


def _check_joint_count(n: int, coeffs: list[dict], independent: list, n_rms: int, where: str) -> None:
    """Refuse ``joint_names`` whose length is not the number of joints the coefficients are for."""
    friction = [(int(m.group(1)), c["name"]) for c in coeffs if (m := _FRICTION_NAME.match(c["name"]))]
    params = [s for c in coeffs if isinstance(c.get("combination"), dict) for s in c["combination"]]
    seen = friction + [(int(m.group(2)), s) for s in params + independent
                       if isinstance(s, str) and (m := _PARAMETER_NAME.match(s))]
    top, name = max(seen, default=(0, ""))
    listed = f"{where}: 'joint_names' lists {n} joints"
    if top > n:
        raise IdentificationError(f"{listed}, but the coefficients are for {top} (they use {name}); list every joint "
                                  "of the robot, in order")
    if n_rms and n_rms != n:
        raise IdentificationError(f"{listed}, but fit.per_joint_rms has {n_rms} values (one per joint); list every "
                                  "joint of the robot, in order")
    if friction and max(friction)[0] < n:
        raise IdentificationError(f"{listed}, but the friction coefficients are for {max(friction)[0]}; list every "
                                  "joint of the robot, in order")


def _check_friction_names(coeffs: list[dict], n: int, terms: tuple[bool, bool, bool], where: str) -> int:
    """Refuse friction coefficients other than the ``friction`` flags' (last, in order); the base coefficients'
    count."""
    fric = friction_names(n, *terms)
    rank = len(coeffs) - len(fric)
    in_file = [c["name"] for c in coeffs if _FRICTION_NAME.match(c["name"])]
    if rank < 1 or in_file != list(fric) or [c["name"] for c in coeffs[rank:]] != list(fric):
        label = "+".join(key for key, on in zip(_FRICTION_KEYS, terms) if on) or "none"
        raise IdentificationError(f"{where}: friction {label} on {n} joints needs the friction coefficients "
                                  f"[{_span(fric)}] after the base coefficients; the file has [{_span(in_file)}] "
                                  "(the 'friction' flags and the coefficients must agree)")
    return rank


def _combinations(base: list[dict], col: dict[str, int], kind: str, n: int, where: str) -> np.ndarray:
    """K (r x P): each base coefficient's combination of standard parameters."""
    k = np.zeros((len(base), len(col)))
    for j, c in enumerate(base):
        if "combination" not in c:
            raise IdentificationError(f"{where}: coefficient {c['name']} has no 'combination' (the standard "
                                      "parameters it sums); every base coefficient needs one")
        comb = _mapping(c["combination"], f"the combination of coefficient {c['name']}", where)
        if not comb:
            raise IdentificationError(f"{where}: coefficient {c['name']} combines no standard parameters; its "
                                      "'combination' must name at least one (e.g. {Jzz7: 1.0})")
        for sname, v in comb.items():
            k[j, _column(sname, col, kind, n, f"coefficient {c['name']} combines", where)] = _number(
                v, f"coefficient {c['name']}: the factor of {sname}", where)
    return k


def _column(sname: object, col: dict[str, int], kind: str, n: int, what: str, where: str) -> int:
    """Index of the standard parameter ``sname`` in the stacked parameters of ``kind``."""
    if isinstance(sname, str) and sname in col:
        return col[sname]
    m = _PARAMETER_NAME.match(str(sname))
    if m and kind == "gravity" and m.group(1) not in PARAMETER_NAMES[:N_GRAVITY_PARAMS]:
        raise IdentificationError(f"{where}: {what} {sname}, an inertia parameter, but kind is gravity (m, mcx, mcy, "
                                  "mcz per link only): kind full?")
    raise IdentificationError(f"{where}: {what} unknown parameter {_show(sname)} (standard parameters: "
                              f"{', '.join(PARAMETER_NAMES[:N_PARAMS if kind == 'full' else N_GRAVITY_PARAMS])} "
                              f"followed by the link number 1..{n})")


def _covariance(v: object, names: list[str], where: str) -> np.ndarray:
    size = len(names)
    try:
        cov = np.array(_list(v, "'covariance'", where), dtype=float)
    except (TypeError, ValueError):
        raise IdentificationError(f"{where}: 'covariance' must be a {size} x {size} matrix of numbers (a list of "
                                  "rows, one per kept coefficient)") from None
    if cov.shape != (size, size):
        raise IdentificationError(f"{where}: covariance is {cov.shape}, expected {(size, size)} (one row and column "
                                  "per kept coefficient)")
    bad = np.argwhere(~np.isfinite(cov))
    if bad.size:
        i, j = bad[0]
        raise IdentificationError(f"{where}: covariance entry ({names[i]}, {names[j]}) is {cov[i, j]}, not a finite "
                                  "number; correct the file or identify the robot again")
    scale = float(np.max(np.abs(cov), initial=0.0))
    i, j = np.unravel_index(np.argmax(np.abs(cov - cov.T)), cov.shape) if size else (0, 0)
    if size and abs(cov[i, j] - cov[j, i]) > 1e-6 * scale:
        raise IdentificationError(f"{where}: covariance is not symmetric: ({names[i]}, {names[j]}) is {cov[i, j]:.6g} "
                                  f"but ({names[j]}, {names[i]}) is {cov[j, i]:.6g}; correct the file or identify the "
                                  "robot again")
    if size and float(np.min(np.linalg.eigvalsh((cov + cov.T) / 2))) < -1e-6 * scale:
        raise IdentificationError(f"{where}: covariance is not positive semi-definite (a negative variance along some "
                                  "combination of coefficients): not what identify writes; correct the file or "
                                  "identify the robot again")
    return cov


def _span(names: tuple[str, ...] | list[str]) -> str:
    """``Fv1..Fv7, Fo1..Fo7`` for friction coefficient names."""
    groups: dict[str, list[str]] = {}
    for s in names:
        groups.setdefault(s[:2], []).append(s)
    return ", ".join(g[0] if len(g) == 1 else f"{g[0]}..{g[-1]}" for g in groups.values()) or "none"


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
