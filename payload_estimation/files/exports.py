"""A payload estimate in the formats robot controllers take.

The URDF and YAML formats describe the payload in the estimate's payload frame (``est.frame``); the
vendor formats in the robot's flange frame, as the controllers define their load data, so the estimate is
first moved there (:func:`in_flange_frame`: CoM and the inertia's axes; the robot model says where its
flange is, ``RobotDescription.flange``; for a URDF model the flange is the tip link, also when the
estimator node names its model ``robot_description``: :func:`resolve_robot`):

- :func:`urdf_snippet` — a ``<link>`` with the ``<inertial>`` (mass kg, CoM m as ``origin xyz``,
  inertia about the CoM in kg m²) and the fixed ``<joint>`` that attaches it to the payload frame;
- :func:`yaml_record` — mass, CoM, inertia about the CoM, frame, standard deviations, method, model;
- :func:`kuka_load_data` — KUKA load data as the KRC ``$LOAD`` / Sunrise "Load data" dialog take it
  (flange frame): mass M (kg), centre of mass X, Y, Z (mm) and the orientation A, B, C (deg; A about Z,
  then B about the new Y, then C about the new X) of the principal inertia axes, principal moments
  JX, JY, JZ (kg m²) about the CoM;
- :func:`franka_set_load` — the request of franka_ros2's ``franka_msgs/srv/SetLoad`` (the arguments of
  libfranka's ``Robot::setLoad``): ``mass`` (kg), ``center_of_mass`` (m, in the flange frame F =
  ``fr3_link8``; libfranka's ``F_x_Cload``), ``load_inertia`` (3x3 about the CoM, kg m², column-major;
  libfranka's ``I_load``). The file is that request as YAML (``ros2 service call .../set_load
  franka_msgs/srv/SetLoad "$(cat payload.franka.yaml)"``).

A gravity-only estimate has no inertia: every format then carries zeros (a point mass) and says so. An
estimate of 0 kg (no payload detected, or reset) exports no body: the URDF file holds only a comment, the
YAML, KUKA and franka files a zero load (what clears a configured load) and say so.
"""

from __future__ import annotations

import json
import logging
import math
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import yaml

from ..errors import PayloadEstimationError
from ..model.description import RobotDescription, RobotDescriptionError
from ..model.parameters import sym_from_vec6, vec6_from_sym
from ..model.robot_file import SHIPPED_ROBOTS, load_robot
from ..model.urdf_tree import parse_urdf
from ..payload.estimate import PayloadEstimate

log = logging.getLogger(__name__)

FORMATS = ("urdf", "yaml", "kuka", "franka")
FLANGE_FORMATS = ("kuka", "franka")
"""Formats the vendor defines in the flange frame: they need the robot model."""
EXTENSIONS = {"urdf": "urdf", "yaml": "yaml", "kuka": "kuka.txt", "franka": "franka.yaml"}


class ExportError(PayloadEstimationError):
    """An estimate that cannot be exported (not finite, negative mass, no frame for a URDF joint)."""


def _inertia(est: PayloadEstimate) -> np.ndarray:
    """Inertia about the CoM, 3x3 kg m² (zeros when not estimated)."""
    return np.zeros((3, 3)) if est.inertia is None else sym_from_vec6(np.asarray(est.inertia, float))


def _check(est: PayloadEstimate) -> None:
    values = np.r_[est.mass, est.com, _inertia(est).ravel()]
    if not np.all(np.isfinite(values)):
        raise ExportError("the estimate has non-finite values; nothing exported")
    if est.mass < 0:
        raise ExportError(f"the estimate's mass {est.mass:g} kg is negative; nothing exported")


ROBOT_DESCRIPTION_MODEL = "robot_description"
"""The model name the estimator node gives its exports when its model is the URDF on ``robot_description``:
a URDF's flange is its tip link, the payload frame (``model.urdf``)."""


@dataclass(frozen=True)
class Flange:
    """Where the flange frame of the vendor formats is: ``payload_in_flange`` the pose (4x4) of the payload
    frame ``payload_frame`` in it; ``name`` how the files name it."""

    name: str
    payload_frame: str
    payload_in_flange: np.ndarray

    @classmethod
    def of(cls, robot: RobotDescription) -> Flange:
        """``robot``'s flange (``RobotDescription.flange``; a URDF's tip link)."""
        t = np.linalg.inv(robot.payload_frame) @ robot.flange  # the flange in the payload frame
        name = robot.payload_frame_name
        if not np.allclose(t, np.eye(4), rtol=0, atol=1e-9):
            xyz = ", ".join(f"{1e3 * x:.4g}" for x in t[:3, 3])
            turned = "" if np.allclose(t[:3, :3], np.eye(3), rtol=0, atol=1e-9) else ", axes rotated"
            name = f"{robot.name} flange (origin [{xyz}] mm in {robot.payload_frame_name}{turned})"
        return cls(name, robot.payload_frame_name, np.linalg.inv(t))

    @classmethod
    def urdf_tip(cls, frame: str) -> Flange:
        """The flange of a URDF model: its tip link ``frame``, which is also the payload frame."""
        return cls(frame, frame, np.eye(4))


def urdf_flange(text: str, payload_link: str, flange_link: str, source: str = "URDF") -> Flange:
    """The flange ``flange_link`` of a URDF for an estimate in the frame of ``payload_link``: the two joined
    by fixed joints, either below the other (e.g. franka's flange ``fr3_link8`` above the hand's TCP
    ``fr3_hand_tcp``, the tip of a URDF with the hand)."""
    tree = parse_urdf(text, source)
    for link in (payload_link, flange_link):
        if link not in tree.links:
            raise ExportError(f"{source} has no link '{link}' (links: {', '.join(tree.links)})")
    for base, tip in ((flange_link, payload_link), (payload_link, flange_link)):
        try:
            path = tree.path(base, tip)
        except RobotDescriptionError:
            continue
        moving = [j.name for j in path if j.type != "fixed"]
        if moving:
            raise ExportError(f"{source}: joints {', '.join(moving)} move between '{flange_link}' and "
                              f"'{payload_link}': the flange must be fixed to the payload frame")
        t = np.eye(4)
        for j in path:
            t = t @ j.origin
        return Flange(flange_link, payload_link, t if base == flange_link else np.linalg.inv(t))
    raise ExportError(f"{source}: '{flange_link}' and '{payload_link}' are not on one branch of the tree")


def _flange(robot: RobotDescription | Flange) -> Flange:
    return robot if isinstance(robot, Flange) else Flange.of(robot)


def flange_frame_name(robot: RobotDescription | Flange) -> str:
    """How the files name the flange frame: the payload frame's TF name when the two coincide (a URDF's
    tip link, iiwa14's ``lbr_link_ee``), else where the flange is from the payload frame."""
    return _flange(robot).name


def in_flange_frame(est: PayloadEstimate, robot: RobotDescription | Flange) -> PayloadEstimate:
    """The estimate moved from its payload frame into ``robot``'s flange frame: CoM (m) and inertia about
    the CoM (kg m²) in the flange's axes; mass unchanged. Only mass, CoM and inertia are carried over
    (standard deviations, parameters and offsets stay with the payload-frame estimate)."""
    flange = _flange(robot)
    if est.frame and est.frame != flange.payload_frame:
        raise ExportError(f"the estimate is in frame '{est.frame}' but the robot's payload frame is "
                          f"'{flange.payload_frame}': give the robot the estimate was made with")
    body = est.body().transformed(flange.payload_in_flange)
    inertia = None if est.inertia is None else vec6_from_sym(body.inertia_com)
    return replace(est, com=body.com, inertia=inertia, frame=flange.name, std={}, params={}, offsets=None)


def _shipped_robot_in(frame: str) -> RobotDescription | None:
    """The shipped robot whose payload frame is named ``frame``, if any."""
    for name in SHIPPED_ROBOTS:
        robot = load_robot(name)
        if frame and robot.payload_frame_name == frame:
            return robot
    return None


def resolve_robot(est: PayloadEstimate, model: str = "") -> RobotDescription | Flange | None:
    """What places the flange for ``est``: ``model`` when it names a shipped robot or a robot YAML/URDF
    file; for :data:`ROBOT_DESCRIPTION_MODEL` (a URDF from the topic) the estimate's frame, the tip link;
    else the shipped robot whose payload frame is ``est.frame``; None if none of these."""
    path = Path(model) if model else None
    if model in SHIPPED_ROBOTS or (path is not None and path.suffix.lower() in (".yaml", ".yml", ".urdf")
                                   and path.is_file()):
        try:
            return load_robot(model)
        except RobotDescriptionError as exc:  # e.g. a gravity PARAMS.yaml named as the model
            log.info("export: model %r is not a robot description (%s); the estimate's frame decides", model, exc)
    if model == ROBOT_DESCRIPTION_MODEL and est.frame:
        return Flange.urdf_tip(est.frame)
    return _shipped_robot_in(est.frame)


def _robot_for_flange(est: PayloadEstimate, robot: RobotDescription | Flange | None, fmt: str
                      ) -> RobotDescription | Flange:
    if robot is None:
        raise ExportError(f"{fmt} load data are given in the robot's flange frame, and the robot model that "
                          f"places the flange relative to the estimate's frame '{est.frame}' is not known: give "
                          f"the robot the estimate was made with (export --robot ROBOT)")
    return robot


NO_PAYLOAD_TEXT = "no payload detected (0 kg)"


def yaml_float(x: float) -> str:
    """``x`` to 6 significant digits as a YAML 1.1 float (what PyYAML and ``ros2 service call`` read as a
    float: always a '.', so ``0`` is ``0.0`` and ``1e-05`` is ``1.0e-05``; NaN ``.nan``)."""
    x = float(x)
    if not math.isfinite(x):
        return ".nan" if math.isnan(x) else ("-.inf" if x < 0 else ".inf")
    mantissa, e, exponent = f"{x:.6g}".partition("e")
    if "." not in mantissa:
        mantissa += ".0"
    return mantissa + (f"e{int(exponent):+03d}" if e else "")


def _nothing(est: PayloadEstimate) -> bool:
    """A 0 kg estimate: no payload held (detected as such, or reset)."""
    return est.mass == 0.0


def urdf_snippet(est: PayloadEstimate, parent: str | None = None, name: str = "payload") -> str:
    """A URDF link ``name`` carrying the payload, fixed to ``parent`` (default: the estimate's frame); for a
    0 kg estimate only a comment (no body to attach)."""
    _check(est)
    if _nothing(est):
        return f"<!-- {NO_PAYLOAD_TEXT}: no payload link to attach; remove an earlier '{name}' link -->\n"
    parent = parent or est.frame
    if not parent:
        raise ExportError("the estimate names no frame: give the parent link of the payload")
    i = _inertia(est)
    cx, cy, cz = (float(x) for x in est.com)
    note = "" if est.inertia is not None else "    <!-- inertia not estimated: point mass (zeros) -->\n"
    return (f'<link name="{name}">\n'
            f"  <inertial>\n{note}"
            f'    <origin xyz="{cx:.6g} {cy:.6g} {cz:.6g}" rpy="0 0 0"/>\n'
            f'    <mass value="{est.mass:.6g}"/>\n'
            f'    <inertia ixx="{i[0, 0]:.6g}" ixy="{i[0, 1]:.6g}" ixz="{i[0, 2]:.6g}" '
            f'iyy="{i[1, 1]:.6g}" iyz="{i[1, 2]:.6g}" izz="{i[2, 2]:.6g}"/>\n'
            f"  </inertial>\n</link>\n"
            f'<joint name="{name}_joint" type="fixed">\n'
            f'  <parent link="{parent}"/>\n  <child link="{name}"/>\n'
            f'  <origin xyz="0 0 0" rpy="0 0 0"/>\n</joint>\n')


def yaml_record(est: PayloadEstimate, model: str = "") -> str:
    """The estimate as a small YAML document (SI units; inertia about the CoM, frame axes)."""
    _check(est)
    i = _inertia(est)
    std = "".join(f"  {k}: {yaml_float(v)}\n" for k, v in est.std.items()) or "  {}\n"
    inertia = ("null  # not estimated\n" if est.inertia is None else
               "{" + ", ".join(f"{k}: {yaml_float(v)}" for k, v in zip(("xx", "xy", "xz", "yy", "yz", "zz"),
                                                             (i[0, 0], i[0, 1], i[0, 2], i[1, 1], i[1, 2],
                                                              i[2, 2]))) + "}\n")
    frame = est.frame or '""'
    nothing = f"# {NO_PAYLOAD_TEXT}: a zero load\n" if _nothing(est) else ""
    return (f"# payload estimate: mass kg, com m, inertia kg m^2 about the CoM in the frame's axes\n{nothing}"
            f"frame: {frame}\n"
            f"mass: {yaml_float(est.mass)}\n"
            f"com: [{', '.join(f'{yaml_float(x)}' for x in est.com)}]\n"
            f"inertia: {inertia}"
            f"std:\n{std}"
            f"method: \"{est.method}\"\n"
            f"model: \"{model}\"\n")


_INERTIA_KEYS = ("xx", "xy", "xz", "yy", "yz", "zz")


def _from_yaml_record(doc: dict) -> PayloadEstimate:
    """Inverse of :func:`yaml_record` (6 significant digits)."""
    inertia = doc.get("inertia")
    if inertia is not None:
        if not isinstance(inertia, dict) or set(inertia) != set(_INERTIA_KEYS):
            raise ValueError(f"'inertia' must be null or a mapping with keys {', '.join(_INERTIA_KEYS)}")
        inertia = np.array([float(inertia[k]) for k in _INERTIA_KEYS])
    com = np.asarray(doc["com"], dtype=float)
    if com.shape != (3,):
        raise ValueError(f"'com' must be 3 numbers (m), got {doc['com']!r}")
    return PayloadEstimate(float(doc["mass"]), com, inertia, str(doc.get("frame") or ""),
                           std={k: float(v) for k, v in (doc.get("std") or {}).items()},
                           method=str(doc.get("method") or ""))


def read_estimate(text: str, source: str = "the estimate") -> tuple[PayloadEstimate, str]:
    """(estimate, model name) from the JSON of ``estimate --json`` or the YAML record :func:`yaml_record`
    writes (the estimator node's ``export_dir/payload.yaml``); the model name is "" for the JSON."""
    try:
        return PayloadEstimate.from_dict(json.loads(text)), ""
    except json.JSONDecodeError:
        pass  # not JSON: the YAML record
    except (ValueError, KeyError, TypeError) as exc:
        raise ExportError(f"{source}: not an estimate JSON ({exc}); write one with "
                          "`payload-estimation estimate ... --json > est.json`") from exc
    try:
        doc = yaml.safe_load(text)
        if not isinstance(doc, dict):
            raise ValueError("not a mapping")
        return _from_yaml_record(doc), str(doc.get("model") or "")
    except (yaml.YAMLError, ValueError, KeyError, TypeError) as exc:
        raise ExportError(f"{source}: neither an estimate JSON nor a payload YAML record ({exc}); give the JSON of "
                          "`payload-estimation estimate ... --json` or the payload.yaml the estimator node writes "
                          "into its export_dir") from exc


@dataclass(frozen=True)
class KukaLoadData:
    """KUKA load data: M kg; X, Y, Z mm; A, B, C deg (principal axes, ZYX); JX, JY, JZ kg m² (about the CoM)."""

    mass: float
    xyz_mm: tuple[float, float, float]
    abc_deg: tuple[float, float, float]
    j_principal: tuple[float, float, float]
    inertia_estimated: bool
    frame: str = "flange"

    def krl(self) -> str:
        """The KRL ``$LOAD`` aggregate, e.g. ``$LOAD={M 3.0,CM {X 30.0,...},J {X 0.012,...}}``."""
        x, y, z = self.xyz_mm
        a, b, c = self.abc_deg
        jx, jy, jz = self.j_principal
        return (f"$LOAD={{M {self.mass:.4f},CM {{X {x:.2f},Y {y:.2f},Z {z:.2f},A {a:.2f},B {b:.2f},C {c:.2f}}},"
                f"J {{X {jx:.6f},Y {jy:.6f},Z {jz:.6f}}}}}")

    def text(self) -> str:
        note = ("; inertia not estimated: J = 0 (enter a value from CAD if known)" if not self.inertia_estimated
                else "")
        if self.mass == 0.0:
            note = f"\n; {NO_PAYLOAD_TEXT}: zero load"
        return (f"; KUKA load data in the flange frame: {self.frame}{note}\n{self.krl()}\n"
                f"; Sunrise load data: mass {self.mass:.4f} kg; MS X {self.xyz_mm[0]:.2f} Y {self.xyz_mm[1]:.2f} "
                f"Z {self.xyz_mm[2]:.2f} mm; A {self.abc_deg[0]:.2f} B {self.abc_deg[1]:.2f} "
                f"C {self.abc_deg[2]:.2f} deg; JX {self.j_principal[0]:.6f} JY {self.j_principal[1]:.6f} "
                f"JZ {self.j_principal[2]:.6f} kg m^2\n")


def principal_axes(inertia: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(moments (3,), rotation R (3x3, det +1)) with ``inertia = R diag(moments) Rᵀ``; R's columns are the
    principal axes in the frame, ordered so that R is closest to the identity (a diagonal inertia gives R = I)."""
    w, v = np.linalg.eigh(inertia)
    order = [int(np.argmax(np.abs(v[k, :]))) for k in range(3)]
    if len(set(order)) == 3:  # each frame axis has its own principal axis: keep the frame's ordering
        w, v = w[order], v[:, order]
    v = v * np.where(np.diag(v) < 0, -1.0, 1.0)
    if np.linalg.det(v) < 0:
        v[:, 2] *= -1.0
    return w, v


def euler_zyx_deg(r: np.ndarray) -> tuple[float, float, float]:
    """(A, B, C) deg with ``r = Rz(A) Ry(B) Rx(C)`` (KUKA's convention)."""
    a = math.atan2(r[1, 0], r[0, 0])
    b = math.atan2(-r[2, 0], math.hypot(r[0, 0], r[1, 0]))
    c = math.atan2(r[2, 1], r[2, 2])
    return tuple(float(math.degrees(x)) for x in (a, b, c))  # type: ignore[return-value]


def kuka_load_data(est: PayloadEstimate, robot: RobotDescription | Flange) -> KukaLoadData:
    """KUKA load data of the estimate in ``robot``'s flange frame."""
    _check(est)
    est = in_flange_frame(est, robot)
    moments, r = principal_axes(_inertia(est))
    return KukaLoadData(float(est.mass), tuple(float(1e3 * x) for x in est.com), euler_zyx_deg(r),
                        tuple(float(max(x, 0.0)) for x in moments), est.inertia is not None, est.frame)


FRANKA_SET_LOAD_FIELDS = ("mass", "center_of_mass", "load_inertia")
"""The request of ``franka_msgs/srv/SetLoad``: float64 mass, float64[3] center_of_mass, float64[9] load_inertia."""


def franka_set_load(est: PayloadEstimate, robot: RobotDescription | Flange) -> dict:
    """The ``franka_msgs/srv/SetLoad`` request ``{"mass", "center_of_mass", "load_inertia"}`` in ``robot``'s
    flange frame (inertia about the CoM, column-major)."""
    _check(est)
    est = in_flange_frame(est, robot)
    return {"mass": float(est.mass), "center_of_mass": [float(x) for x in est.com],
            "load_inertia": [float(x) for x in _inertia(est).ravel(order="F")]}


def franka_yaml(est: PayloadEstimate, robot: RobotDescription | Flange) -> str:
    """The SetLoad request as YAML, with comments saying the frame and conventions."""
    d = franka_set_load(est, robot)
    note = "" if est.inertia is not None or _nothing(est) else "  # inertia not estimated: zeros"
    nothing = f"# {NO_PAYLOAD_TEXT}: zero load (clears a configured load)\n" if _nothing(est) else ""
    return (f"{nothing}# franka_msgs/srv/SetLoad request (franka_ros2 set_load; libfranka Robot::setLoad): mass kg,\n"
            "# center_of_mass m in the flange frame (franka: F = fr3_link8), load_inertia kg m^2 about the CoM,\n"
            "# column-major 3x3\n"
            f"# flange frame: {flange_frame_name(robot)}\n"
            f"mass: {yaml_float(d['mass'])}\n"
            f"center_of_mass: [{', '.join(f'{yaml_float(x)}' for x in d['center_of_mass'])}]\n"
            f"load_inertia: [{', '.join(f'{yaml_float(x)}' for x in d['load_inertia'])}]{note}\n")


def export_text(est: PayloadEstimate, fmt: str, model: str = "", parent: str | None = None,
           robot: RobotDescription | Flange | None = None) -> str:
    """The text of one format (``urdf``, ``yaml``, ``kuka``, ``franka``). ``robot`` places the flange for
    the vendor formats (default: :func:`resolve_robot` from ``model`` or the estimate's frame)."""
    if fmt == "urdf":
        return urdf_snippet(est, parent)
    if fmt == "yaml":
        return yaml_record(est, model)
    if fmt in FLANGE_FORMATS:
        robot = _robot_for_flange(est, robot or resolve_robot(est, model), fmt)
        return kuka_load_data(est, robot).text() if fmt == "kuka" else franka_yaml(est, robot)
    raise ExportError(f"unknown export format {fmt!r}; one of: {', '.join(FORMATS)}")


def write_exports(est: PayloadEstimate, directory: str | Path, formats: tuple[str, ...] = FORMATS, model: str = "",
                  parent: str | None = None, stem: str = "payload", robot: RobotDescription | Flange | None = None
                  ) -> list[Path]:
    """Write ``stem.<ext>`` per format into ``directory`` (created); the paths written. A format that cannot
    be written (e.g. a vendor format without the robot model) does not stop the others: they are written,
    then :class:`ExportError` names what was and what was not."""
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    if robot is None and any(f in FLANGE_FORMATS for f in formats):
        robot = resolve_robot(est, model)
    paths, failed = [], []
    for fmt in formats:
        path = out / f"{stem}.{EXTENSIONS[fmt]}"
        try:
            text = export_text(est, fmt, model, parent, robot)
        except ExportError as exc:
            failed.append(f"{path.name}: {exc}")
            continue
        path.write_text(text)
        paths.append(path)
    if failed:
        written = ", ".join(p.name for p in paths) or "nothing"
        raise ExportError(f"wrote {written} in {out}; not written: " + "; ".join(failed))
    return paths
