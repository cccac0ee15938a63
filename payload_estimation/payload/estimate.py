"""The payload estimate record shared by the estimator, the observer, the nodes and the CLI."""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace

import numpy as np

from ..model.parameters import BodyInertia, sym_from_vec6, vec6_from_sym


@dataclass(frozen=True)
class PayloadEstimate:
    """An estimated payload in the payload frame.

    mass (kg); com (m, payload frame); inertia about the CoM [xx, xy, xz, yy, yz, zz] (kg m^2,
    payload-frame axes) or None when only the gravity parameters were estimated; ``frame`` the payload
    frame's name in the robot's TF tree (``RobotDescription.payload_frame_name``; "" = not named,
    the robot's payload frame); std: standard
    deviation of every estimated quantity by name (``mass``, ``cx``.., ``Ixx``..); fit quality.
    ``params``: the identified linear parameters by name (``m``, ``mcx``.., ``Jxx``.. about the
    payload-frame origin, ``offset_<joint>``); ``offsets``: constant joint-torque offsets (N m) when
    they were estimated, else None. ``undetermined``: quantities the data did not determine (e.g. the
    inertia components ``Ixx``.. of a slow motion; they are then absent: ``inertia`` is None);
    ``notes``: what the estimator found worth saying (inertia not determined and why, std scaling,
    alignment), one line each. ``misfit``: "" when the fit explains the data to its noise model; else what the
    fit does not explain and how far σ was widened for it, in a user's words (:mod:`..signals.misfit`; also
    one of the notes): the status says it (WARN).
    """

    mass: float
    com: np.ndarray
    inertia: np.ndarray | None = None
    frame: str = ""
    std: dict[str, float] = field(default_factory=dict)
    condition_number: float = float("nan")
    residual_rms: float = float("nan")
    samples: int = 0
    method: str = ""
    params: dict[str, float] = field(default_factory=dict)
    offsets: np.ndarray | None = None
    undetermined: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    misfit: str = ""

    def body(self) -> BodyInertia:
        """The payload as a rigid body in the payload frame (zero inertia if not estimated)."""
        i = sym_from_vec6(self.inertia) if self.inertia is not None else np.zeros((3, 3))
        return BodyInertia(float(self.mass), np.asarray(self.com, dtype=float), i)

    def gravity_params(self) -> np.ndarray:
        """p_L,g = (m, m cx, m cy, m cz) in the payload frame."""
        return np.concatenate([[self.mass], self.mass * np.asarray(self.com, dtype=float)])

    def inertia_about_frame(self) -> np.ndarray | None:
        """Inertia about the payload-frame origin [xx, xy, xz, yy, yz, zz], or None."""
        if self.inertia is None:
            return None
        return self.body().to_params()[4:10]

    def to_dict(self) -> dict:
        """JSON-ready mapping (the CLI's ``--json`` format)."""
        return {
            "mass": float(self.mass),
            "com": [float(x) for x in self.com],
            "inertia": None if self.inertia is None else [float(x) for x in self.inertia],
            "inertia_about_frame": None
            if self.inertia is None
            else [float(x) for x in self.inertia_about_frame()],
            "frame": self.frame,
            "std": {k: float(v) for k, v in self.std.items()},
            "condition_number": float(self.condition_number),
            "residual_rms": float(self.residual_rms),
            "samples": int(self.samples),
            "method": self.method,
            "params": {k: float(v) for k, v in self.params.items()},
            "offsets": None if self.offsets is None else [float(x) for x in self.offsets],
            "undetermined": list(self.undetermined),
            "notes": list(self.notes),
            "misfit": self.misfit,
        }

    @classmethod
    def from_dict(cls, d: dict) -> PayloadEstimate:
        """Inverse of :meth:`to_dict` (extra keys ignored)."""
        inertia = d.get("inertia")
        return cls(
            mass=float(d["mass"]),
            com=np.asarray(d["com"], dtype=float),
            inertia=None if inertia is None else np.asarray(inertia, dtype=float),
            frame=str(d.get("frame", "")),
            std={k: float(v) for k, v in d.get("std", {}).items()},
            condition_number=float(d.get("condition_number", float("nan"))),
            residual_rms=float(d.get("residual_rms", float("nan"))),
            samples=int(d.get("samples", 0)),
            method=str(d.get("method", "")),
            params={k: float(v) for k, v in (d.get("params") or {}).items()},
            offsets=None if d.get("offsets") is None else np.asarray(d["offsets"], dtype=float),
            undetermined=tuple(str(x) for x in d.get("undetermined") or ()),
            notes=tuple(str(x) for x in d.get("notes") or ()),
            misfit=str(d.get("misfit") or ""),
        )

    @classmethod
    def from_body(cls, body: BodyInertia, frame: str = "", method: str = "given") -> PayloadEstimate:
        """A known payload (e.g. from a data sheet) as an estimate record."""
        return cls(body.mass, np.asarray(body.com, float), vec6_from_sym(body.inertia_com), frame, method=method)

    def as_point_mass(self) -> PayloadEstimate:
        """A gravity-only estimate as a point mass at its CoM (zero inertia about the CoM), so that
        M and C of a loaded model include the payload's largest inertial effect, m |r|^2."""
        if self.inertia is not None:
            return self
        return replace(self, inertia=np.zeros(6))

    def observer_model(self, point_mass: bool = True) -> tuple[BodyInertia, bool]:
        """(body, gravity_only) for :meth:`collision.observer.MomentumObserver.set_payload`: with
        ``point_mass`` a gravity-only estimate enters M and C as a point mass at its CoM; without, it
        enters gravity only (paper 000 eq. 48)."""
        est = self.as_point_mass() if point_mass else self
        return est.body(), (not point_mass and self.inertia is None)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2)


NO_PAYLOAD = PayloadEstimate(0.0, np.zeros(3), None, method="none")
