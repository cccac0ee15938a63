"""A simple link geometry for contact localisation: one capsule per link, in the link frames.

The shipped descriptions carry no collision meshes (and the simulated arm has no geometry), so the
shape is derived from the kinematics (:func:`capsule_geometry`). Each link k owns the segment from
the origin of its joint frame (a point on joint k's axis) to the origin of joint k+1's frame (for
the last link: the flange). Where axes intersect (DH frames at the shoulder, elbow and wrist) a link
owns no length; it then takes the first half of the next link's segment when that segment runs
along the next joint's axis (a roll joint sits inside a tube: KUKA's E1/A4/A6, the iiwa's A3/A5/A7),
else a segment from its joint towards twice its CoM offset (the link's mass lies around its middle).
A link with neither is a sphere at its joint. All capsules share one radius (m).

The contact estimator fits a point force on these surfaces; a real robot's contact surface differs
from capsules by the radius error, which is what the estimated contact point inherits.
Units: m, link frames (as :meth:`RobotDescription.link_poses`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..errors import PayloadEstimationError
from ..model.description import RobotDescription
from ..model.transforms import invert

DEFAULT_RADIUS = 0.065  # m: LWR 4+ and LBR iiwa tubes are about 0.12-0.14 m across
_ROLL_ALIGN = math.cos(math.radians(10.0))


class GeometryError(PayloadEstimationError):
    """A geometry argument is malformed; the message names it."""


@dataclass(frozen=True)
class Capsule:
    """Segment ``a``-``b`` (m, link frame) swept by a sphere of ``radius`` (m)."""

    a: np.ndarray
    b: np.ndarray
    radius: float

    @property
    def length(self) -> float:
        return float(np.linalg.norm(self.b - self.a))


@dataclass(frozen=True)
class LinkGeometry:
    """One :class:`Capsule` per link (link frames), links 1..n in model order."""

    capsules: tuple[Capsule, ...]

    @property
    def n(self) -> int:
        return len(self.capsules)


@dataclass(frozen=True)
class SurfaceSamples:
    """Points sampled on one link's surface (link frame): ``points`` (N, 3) m, outward unit
    ``normals`` (N, 3), ``area`` (N,) m² each point stands for."""

    points: np.ndarray
    normals: np.ndarray
    area: np.ndarray


def capsule_geometry(desc: RobotDescription, radius: float = DEFAULT_RADIUS,
                     min_length: float = 0.02) -> LinkGeometry:
    """Capsules of ``desc``'s links from its kinematics and CoMs (see module docstring).

    ``radius`` (m) of every capsule; ``min_length`` (m): shorter segments count as none.
    """
    if not (math.isfinite(radius) and radius > 0):
        raise GeometryError(f"capsule radius must be > 0 m, got {radius}")
    n = desc.n
    # in link k's frame: the joint-k frame origin (on joint k's axis) and the next joint frame's origin
    starts = [invert(j.post)[:3, 3] for j in desc.joints]
    ends = [desc.joints[k + 1].pre[:3, 3] if k + 1 < n else desc.flange[:3, 3] for k in range(n)]
    seg = [[s.copy(), e.copy()] for s, e in zip(starts, ends)]
    for k in range(n - 1):
        a, b = seg[k + 1]
        length = np.linalg.norm(b - a)
        if np.linalg.norm(seg[k][1] - seg[k][0]) >= min_length or length < 2 * min_length:
            continue
        nxt = desc.joints[k + 1]
        axis = invert(nxt.post)[:3, :3] @ nxt.axis  # joint k+1's axis in link k+1's frame
        if abs(float(np.dot((b - a) / length, axis))) < _ROLL_ALIGN:
            continue
        mid = 0.5 * (a + b)
        # link k+1's frame -> link k's frame: a point on joint k+1's axis does not move with q_{k+1}
        to_k = nxt.pre @ nxt.post
        seg[k] = [(to_k @ np.r_[a, 1.0])[:3], (to_k @ np.r_[mid, 1.0])[:3]]
        seg[k + 1] = [mid, b]
    caps = []
    for k, (a, b) in enumerate(seg):
        if np.linalg.norm(b - a) < min_length:
            b = a + 2.0 * (np.asarray(desc.links[k].com, float) - a)
            if np.linalg.norm(b - a) < min_length:
                b = a.copy()
        caps.append(Capsule(np.asarray(a, float), np.asarray(b, float), float(radius)))
    return LinkGeometry(tuple(caps))


def sample_surface(capsule: Capsule, spacing: float = 0.02) -> SurfaceSamples:
    """Points about ``spacing`` m apart on ``capsule``'s surface (cylinder and two hemispheres)."""
    if not (math.isfinite(spacing) and spacing > 0):
        raise GeometryError(f"surface spacing must be > 0 m, got {spacing}")
    r, a, b = capsule.radius, capsule.a, capsule.b
    length = capsule.length
    axis = (b - a) / length if length > 0 else np.array([0.0, 0.0, 1.0])
    u = np.cross(axis, [1.0, 0.0, 0.0] if abs(axis[0]) < 0.9 else [0.0, 1.0, 0.0])
    u /= np.linalg.norm(u)
    v = np.cross(axis, u)
    n_theta = max(6, int(math.ceil(2 * math.pi * r / spacing)))
    theta = 2 * math.pi * (np.arange(n_theta) + 0.5) / n_theta
    ring = np.cos(theta)[:, None] * u + np.sin(theta)[:, None] * v  # (n_theta, 3) unit radial
    pts, nrm, area = [], [], []
    if length > 0:
        n_s = max(1, int(math.ceil(length / spacing)))
        s = (np.arange(n_s) + 0.5) / n_s * length
        for si in s:
            pts.append(a + si * axis + r * ring)
            nrm.append(ring)
            area.append(np.full(n_theta, 2 * math.pi * r * length / (n_s * n_theta)))
    # hemispheres: latitude bands from the equator (phi = 0) to the pole (phi = pi/2)
    n_phi = max(2, int(math.ceil(0.5 * math.pi * r / spacing)))
    for centre, sign in ((b, 1.0), (a, -1.0)):
        for i in range(n_phi):
            phi0, phi1 = 0.5 * math.pi * i / n_phi, 0.5 * math.pi * (i + 1) / n_phi
            phi = 0.5 * (phi0 + phi1)
            band = 2 * math.pi * r * r * (math.sin(phi1) - math.sin(phi0))
            m = max(3, int(math.ceil(n_theta * math.cos(phi))))
            th = 2 * math.pi * (np.arange(m) + 0.5 * (i % 2)) / m
            dirs = (math.cos(phi) * (np.cos(th)[:, None] * u + np.sin(th)[:, None] * v)
                    + sign * math.sin(phi) * axis)
            pts.append(centre + r * dirs)
            nrm.append(dirs)
            area.append(np.full(m, band / m))
    return SurfaceSamples(np.vstack(pts), np.vstack(nrm), np.concatenate(area))


def push_point(capsule: Capsule, direction_link, s: float = 0.5) -> np.ndarray:
    """The point (m, link frame) on ``capsule`` at fraction ``s`` of its axis where a push along
    ``direction_link`` (link-frame axes) enters the surface head-on (its normal opposes the push).

    For scripted contacts that are physically possible: a force at the link frame origin acts on the
    joint axis, inside the link, where no contact can happen and the contact link is not observable.
    """
    d = np.asarray(direction_link, float)
    a, b = capsule.a, capsule.b
    axis = (b - a) / capsule.length if capsule.length > 0 else np.zeros(3)
    radial = -(d - (d @ axis) * axis)
    nrm = np.linalg.norm(radial)
    if nrm < 1e-9:  # a push along the axis: enter through the end cap it points to
        return (a if d @ axis > 0 else b) - capsule.radius * d / np.linalg.norm(d)
    return a + float(np.clip(s, 0.0, 1.0)) * (b - a) + capsule.radius * radial / nrm


def distance_to_segment(points: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Distance (m) of each of ``points`` (N, 3) to the segment a-b (same frame)."""
    d = b - a
    dd = float(d @ d)
    s = np.zeros(len(points)) if dd == 0 else np.clip((points - a) @ d / dd, 0.0, 1.0)
    return np.linalg.norm(points - (a + s[:, None] * d), axis=1)


__all__ = ["Capsule", "DEFAULT_RADIUS", "GeometryError", "LinkGeometry", "SurfaceSamples", "capsule_geometry",
           "distance_to_segment", "push_point", "sample_surface"]
