"""Standard link parameters and the conversions between their forms.

Seeds' order for one body (the package-wide convention):
``p = (m, m*cx, m*cy, m*cz, Jxx, Jxy, Jxz, Jyy, Jyz, Jzz)`` with J the inertia about the
*frame origin* (J = I_c + m S(c)^T S(c)), all expressed in that frame (kg, kg m, kg m^2).
The gravity subset is ``p_g = (m, m*cx, m*cy, m*cz)``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .transforms import skew

N_PARAMS = 10
N_GRAVITY_PARAMS = 4
PARAMETER_NAMES = ("m", "mcx", "mcy", "mcz", "Jxx", "Jxy", "Jxz", "Jyy", "Jyz", "Jzz")

# pinocchio orders the inertia (Ixx, Ixy, Iyy, Ixz, Iyz, Izz); ours is (xx, xy, xz, yy, yz, zz).
# The only place the two orders meet: p_pin = p_seeds[SEEDS_TO_PINOCCHIO].
SEEDS_TO_PINOCCHIO = np.array([0, 1, 2, 3, 4, 5, 7, 6, 8, 9])


def sym_from_vec6(v) -> np.ndarray:
    """3x3 symmetric matrix from (xx, xy, xz, yy, yz, zz)."""
    xx, xy, xz, yy, yz, zz = v
    return np.array([[xx, xy, xz], [xy, yy, yz], [xz, yz, zz]], dtype=float)


def vec6_from_sym(m: np.ndarray) -> np.ndarray:
    """(xx, xy, xz, yy, yz, zz) of a 3x3 symmetric matrix."""
    return np.array([m[0, 0], m[0, 1], m[0, 2], m[1, 1], m[1, 2], m[2, 2]])


@dataclass(frozen=True)
class BodyInertia:
    """Mass (kg), CoM (m) and inertia about the CoM (kg m^2, 3x3), all in one body frame."""

    mass: float
    com: np.ndarray
    inertia_com: np.ndarray

    def to_params(self) -> np.ndarray:
        """The 10 standard parameters (seeds' order, J about the frame origin)."""
        c = np.asarray(self.com, dtype=float)
        s = skew(c)
        j = np.asarray(self.inertia_com, dtype=float) + self.mass * s.T @ s
        return np.concatenate([[self.mass], self.mass * c, vec6_from_sym(j)])

    @classmethod
    def from_params(cls, p) -> BodyInertia:
        """Inverse of :meth:`to_params`; a zero mass gives a zero CoM."""
        p = np.asarray(p, dtype=float)
        m = float(p[0])
        c = p[1:4] / m if m != 0 else np.zeros(3)
        s = skew(c)
        return cls(m, c, sym_from_vec6(p[4:10]) - m * s.T @ s)

    def transformed(self, t: np.ndarray) -> BodyInertia:
        """The same body expressed in a frame B, given ``t`` = pose of this frame in B (4x4)."""
        r = t[:3, :3]
        return BodyInertia(self.mass, r @ self.com + t[:3, 3], r @ self.inertia_com @ r.T)

    def plus(self, other: BodyInertia) -> BodyInertia:
        """Rigid union of two bodies expressed in the same frame (eqs. 16-17 of paper 000)."""
        return BodyInertia.from_params(self.to_params() + other.to_params())


def params_transform_matrix(t: np.ndarray) -> np.ndarray:
    """10x10 matrix T with p_B = T p_A, where ``t`` is the pose (4x4) of frame A in frame B.

    The standard parameters are linear in themselves under a change of frame; this is that linear
    map, used to move parameters between link, joint and payload frames.
    """
    t = np.asarray(t, dtype=float)
    out = np.zeros((N_PARAMS, N_PARAMS))
    for k in range(N_PARAMS):
        e = np.zeros(N_PARAMS)
        e[k] = 1.0
        out[:, k] = _transform_params(e, t)
    return out


def _transform_params(p: np.ndarray, t: np.ndarray) -> np.ndarray:
    # Valid for any (also non-physical) p: J_B = R J_A R^T + m (S(r)^T S(r)) + cross terms with m*c.
    r, d = t[:3, :3], t[:3, 3]
    m, h = p[0], p[1:4]
    j_a = sym_from_vec6(p[4:10])
    h_b = r @ h + m * d
    rh = r @ h
    sd = skew(d)
    j_b = r @ j_a @ r.T + m * sd.T @ sd + skew(rh).T @ sd + sd.T @ skew(rh)
    return np.concatenate([[m], h_b, vec6_from_sym(j_b)])


@dataclass(frozen=True)
class ConsistencyReport:
    """Physical-consistency checks of one body; ``problems`` is empty when it is consistent."""

    principal_moments: np.ndarray
    problems: tuple[str, ...]

    @property
    def ok(self) -> bool:
        return not self.problems


def check_consistency(body: BodyInertia, tol: float = 1e-12) -> ConsistencyReport:
    """Mass > 0, inertia about the CoM positive definite, triangle inequality of principal moments."""
    problems = []
    if not np.isfinite(body.mass) or body.mass <= 0:
        problems.append(f"mass {body.mass} kg is not positive")
    i_c = np.asarray(body.inertia_com, dtype=float)
    if not np.all(np.isfinite(i_c)) or not np.all(np.isfinite(body.com)):
        problems.append("CoM or inertia is not finite")
        return ConsistencyReport(np.full(3, np.nan), tuple(problems))
    moments = np.linalg.eigvalsh(0.5 * (i_c + i_c.T))
    if moments[0] <= tol:
        problems.append(f"inertia about the CoM is not positive definite (principal moments {moments})")
    a, b, c = moments
    if a + b < c - tol:
        problems.append(f"principal moments {moments} violate the triangle inequality")
    return ConsistencyReport(moments, tuple(problems))
