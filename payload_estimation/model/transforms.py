"""Homogeneous transforms (4x4, SI units) used by every kinematic convention."""

from __future__ import annotations

import numpy as np


def rot_x(angle: float) -> np.ndarray:
    """4x4 rotation about x by ``angle`` rad."""
    c, s = np.cos(angle), np.sin(angle)
    return np.array([[1, 0, 0, 0], [0, c, -s, 0], [0, s, c, 0], [0, 0, 0, 1.0]])


def rot_y(angle: float) -> np.ndarray:
    """4x4 rotation about y by ``angle`` rad."""
    c, s = np.cos(angle), np.sin(angle)
    return np.array([[c, 0, s, 0], [0, 1, 0, 0], [-s, 0, c, 0], [0, 0, 0, 1.0]])


def rot_z(angle: float) -> np.ndarray:
    """4x4 rotation about z by ``angle`` rad."""
    c, s = np.cos(angle), np.sin(angle)
    return np.array([[c, -s, 0, 0], [s, c, 0, 0], [0, 0, 1, 0], [0, 0, 0, 1.0]])


def translation(x: float, y: float, z: float) -> np.ndarray:
    """4x4 pure translation (m)."""
    t = np.eye(4)
    t[:3, 3] = (x, y, z)
    return t


def rot_axis(axis: np.ndarray, angle: float) -> np.ndarray:
    """4x4 rotation about the unit vector ``axis`` by ``angle`` rad (Rodrigues)."""
    k = np.asarray(axis, dtype=float)
    k = k / np.linalg.norm(k)
    kx = skew(k)
    r = np.eye(3) + np.sin(angle) * kx + (1 - np.cos(angle)) * kx @ kx
    t = np.eye(4)
    t[:3, :3] = r
    return t


def rpy_matrix(roll: float, pitch: float, yaw: float) -> np.ndarray:
    """4x4 rotation of URDF's fixed-axis roll/pitch/yaw: Rz(yaw) Ry(pitch) Rx(roll)."""
    return rot_z(yaw) @ rot_y(pitch) @ rot_x(roll)


def xyz_rpy(xyz, rpy) -> np.ndarray:
    """4x4 transform of a URDF ``<origin xyz rpy>``."""
    t = rpy_matrix(*rpy)
    t[:3, 3] = xyz
    return t


def skew(v: np.ndarray) -> np.ndarray:
    """3x3 skew-symmetric matrix S(v) with S(v) w = v x w."""
    return np.array([[0.0, -v[2], v[1]], [v[2], 0.0, -v[0]], [-v[1], v[0], 0.0]])


def dh_transform(a: float, alpha: float, d: float) -> np.ndarray:
    """Constant part of a classical DH row: Tz(d) Tx(a) Rx(alpha)."""
    return translation(0, 0, d) @ translation(a, 0, 0) @ rot_x(alpha)


def mdh_transform(a_prev: float, alpha_prev: float) -> np.ndarray:
    """Constant part before the joint of a modified DH row: Rx(alpha_{i-1}) Tx(a_{i-1})."""
    return rot_x(alpha_prev) @ translation(a_prev, 0, 0)


def invert(t: np.ndarray) -> np.ndarray:
    """Inverse of a 4x4 rigid transform."""
    inv = np.eye(4)
    inv[:3, :3] = t[:3, :3].T
    inv[:3, 3] = -t[:3, :3].T @ t[:3, 3]
    return inv
