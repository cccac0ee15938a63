"""Numeric rigid-body dynamics of a :class:`RobotDescription` (pinocchio).

The pinocchio model has one revolute joint per description joint; its joint frame i is
``link_{i-1} @ pre_i`` and the body of link i is attached through ``post_i``. Regressors are
returned in the package's parameter convention (seeds' order, link frames, J about the frame
origin), converted here and only here.

Torques in N m, configurations in rad, velocities rad/s, accelerations rad/s^2.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pinocchio as pin

from .description import RobotDescription
from .parameters import N_GRAVITY_PARAMS, N_PARAMS, SEEDS_TO_PINOCCHIO, BodyInertia, params_transform_matrix
from .transforms import invert

_Z = np.array([0.0, 0.0, 1.0])


def _joint_model(axis: np.ndarray):
    if np.allclose(axis, _Z):
        return pin.JointModelRZ()
    if np.allclose(axis, [1.0, 0, 0]):
        return pin.JointModelRX()
    if np.allclose(axis, [0, 1.0, 0]):
        return pin.JointModelRY()
    return pin.JointModelRevoluteUnaligned(np.asarray(axis, dtype=float))


def _pin_inertia(body: BodyInertia) -> pin.Inertia:
    i = 0.5 * (body.inertia_com + body.inertia_com.T)
    return pin.Inertia(float(body.mass), np.asarray(body.com, dtype=float), i)


def build_pinocchio_model(desc: RobotDescription, payload: BodyInertia | None = None) -> pin.Model:
    """Pinocchio model of ``desc``; ``payload`` (in the payload frame) is merged into the last link.

    Frames ``link_1..link_n``, ``flange`` and ``payload`` are added as operational frames.
    """
    model = pin.Model()
    model.name = desc.name
    model.gravity = pin.Motion(np.concatenate([desc.gravity, np.zeros(3)]))
    parent = 0
    placement = np.eye(4)
    for k, (joint, body) in enumerate(zip(desc.joints, desc.links)):
        jid = model.addJoint(parent, _joint_model(joint.axis), pin.SE3(placement @ joint.pre), joint.name)
        if k == desc.n - 1 and payload is not None:
            body = body.plus(payload.transformed(desc.payload_frame))
        model.appendBodyToJoint(jid, _pin_inertia(body.transformed(joint.post)), pin.SE3.Identity())
        model.addFrame(pin.Frame(f"link_{k + 1}", jid, pin.SE3(joint.post), pin.FrameType.OP_FRAME))
        parent = jid
        placement = joint.post
    last = desc.joints[-1].post
    model.addFrame(pin.Frame("flange", parent, pin.SE3(last @ desc.flange), pin.FrameType.OP_FRAME))
    model.addFrame(pin.Frame("payload", parent, pin.SE3(last @ desc.payload_frame), pin.FrameType.OP_FRAME))
    model.lowerPositionLimit = desc.limits.position[:, 0].copy()
    model.upperPositionLimit = desc.limits.position[:, 1].copy()
    model.velocityLimit = desc.limits.velocity.copy()
    model.effortLimit = desc.limits.effort.copy()
    return model


@dataclass(frozen=True)
class ParameterMaps:
    """Constant linear maps from the package's parameters to pinocchio's.

    ``link_to_pin`` is block-diagonal (10n x 10n): p_pin = link_to_pin @ p_links.
    ``payload_to_pin`` (10n x 10) maps payload parameters (payload frame) to their contribution.
    """

    link_to_pin: np.ndarray
    payload_to_pin: np.ndarray


def parameter_maps(desc: RobotDescription) -> ParameterMaps:
    n = desc.n
    perm = np.eye(N_PARAMS)[SEEDS_TO_PINOCCHIO]
    blocks = np.zeros((N_PARAMS * n, N_PARAMS * n))
    for k, joint in enumerate(desc.joints):
        sl = slice(N_PARAMS * k, N_PARAMS * (k + 1))
        blocks[sl, sl] = perm @ params_transform_matrix(joint.post)
    payload = np.zeros((N_PARAMS * n, N_PARAMS))
    payload[N_PARAMS * (n - 1):, :] = perm @ params_transform_matrix(desc.joints[-1].post @ desc.payload_frame)
    return ParameterMaps(blocks, payload)


class RigidBodyDynamics:
    """g(q), M(q), C(q, dq), inverse dynamics and regressors of one robot (optionally loaded).

    Holds the constant pinocchio model and its own workspace (not thread-safe: one per thread).
    """

    def __init__(self, desc: RobotDescription, payload: BodyInertia | None = None):
        self.desc = desc
        self.payload = payload
        self.model = build_pinocchio_model(desc, payload)
        self.data = self.model.createData()
        self.maps = parameter_maps(desc)
        self._zero = np.zeros(desc.n)
        self._lower = np.tril_indices(desc.n, -1)
        n = desc.n
        grav_cols = np.concatenate([np.arange(N_PARAMS * k, N_PARAMS * k + N_GRAVITY_PARAMS) for k in range(n)])
        self._grav_cols = grav_cols
        # Gravity parameters only feed pinocchio's (m, mc) entries: a 4n x 4n sub-map.
        self._link_to_pin_g = self.maps.link_to_pin[np.ix_(grav_cols, grav_cols)]
        self._payload_to_pin_g = self.maps.payload_to_pin[np.ix_(grav_cols, np.arange(N_GRAVITY_PARAMS))]
        self._payload_to_last = self.maps.payload_to_pin[N_PARAMS * (n - 1):]  # the last joint's body carries it
        self._motion_zero = pin.Motion.Zero()

    @property
    def n(self) -> int:
        return self.desc.n

    def with_payload(self, payload: BodyInertia | None) -> RigidBodyDynamics:
        """A new model of the same robot carrying ``payload`` (payload frame), eqs. 16-18."""
        return RigidBodyDynamics(self.desc, payload)

    def gravity(self, q: np.ndarray) -> np.ndarray:
        """Gravity torque g(q) (N m)."""
        return pin.computeGeneralizedGravity(self.model, self.data, np.asarray(q, dtype=float)).copy()

    def mass_matrix(self, q: np.ndarray) -> np.ndarray:
        """Symmetric joint-space inertia matrix M(q) (kg m^2)."""
        m = pin.crba(self.model, self.data, np.asarray(q, dtype=float)).copy()
        lower = self._lower  # pinocchio fills the upper triangle only; mirror it (cheaper than np.triu)
        m[lower] = m.T[lower]
        return m

    def coriolis(self, q: np.ndarray, dq: np.ndarray) -> np.ndarray:
        """Coriolis matrix C(q, dq) with dM/dt = C + C^T (so S^T dq of eq. 48 is C^T dq)."""
        return pin.computeCoriolisMatrix(self.model, self.data, np.asarray(q, float), np.asarray(dq, float)).copy()

    def inverse_dynamics(self, q, dq, ddq) -> np.ndarray:
        """tau = M(q) ddq + C(q, dq) dq + g(q) (N m)."""
        q, dq, ddq = (np.asarray(v, dtype=float) for v in (q, dq, ddq))
        return pin.rnea(self.model, self.data, q, dq, ddq).copy()

    def forward_kinematics(self, q: np.ndarray, frame: str = "flange") -> np.ndarray:
        """4x4 pose of ``frame`` (``link_k``, ``flange`` or ``payload``) in the base frame."""
        pin.framesForwardKinematics(self.model, self.data, np.asarray(q, float))
        return self.data.oMf[self.model.getFrameId(frame)].homogeneous.copy()

    def frame_jacobian(self, q: np.ndarray, frame: str, point: np.ndarray | None = None) -> np.ndarray:
        """6 x n geometric Jacobian (linear; angular, base-frame axes) of a point fixed to ``frame``.

        ``point`` is given in ``frame`` coordinates (default: the frame origin).
        """
        q = np.asarray(q, float)
        fid = self.model.getFrameId(frame)
        pin.computeJointJacobians(self.model, self.data, q)
        pin.framesForwardKinematics(self.model, self.data, q)
        j = pin.getFrameJacobian(self.model, self.data, fid, pin.LOCAL_WORLD_ALIGNED).copy()
        if point is not None:
            r = self.data.oMf[fid].rotation @ np.asarray(point, float)
            j[:3] -= np.cross(r, j[3:].T).T  # v_p = v - S(r) w
        return j

    def regressor(self, q, dq, ddq) -> np.ndarray:
        """Y(q, dq, ddq) (n x 10n) with tau = Y p, p the stacked link parameters (seeds' order)."""
        y = pin.computeJointTorqueRegressor(self.model, self.data, np.asarray(q, float),
                                            np.asarray(dq, float), np.asarray(ddq, float))
        return y @ self.maps.link_to_pin

    def gravity_regressor(self, q) -> np.ndarray:
        """Y_g(q) (n x 4n) with g(q) = Y_g p_g, p_g = (m_k, m_k c_k) stacked over links."""
        y = pin.computeJointTorqueRegressor(self.model, self.data, np.asarray(q, float), self._zero, self._zero)
        return y[:, self._grav_cols] @ self._link_to_pin_g

    def payload_regressor(self, q, dq, ddq) -> np.ndarray:
        """n x 10 regressor of the payload parameters (payload frame): tau_L - tau = Y_L p_L."""
        y = pin.computeJointTorqueRegressor(self.model, self.data, np.asarray(q, float),
                                            np.asarray(dq, float), np.asarray(ddq, float))
        return y @ self.maps.payload_to_pin

    def payload_momentum_rows(self, q, dq) -> tuple[np.ndarray, np.ndarray]:
        """(W1, W2), each n x 10, of the payload parameters (payload frame) in the momentum form
        (:func:`payload.filtered.momentum_rows`): W1 p_L = M_L(q) dq and W2 p_L = C_L dq + g_L - dM_L/dt dq, exactly
        (no step along the motion) and in one kinematic pass: with the last joint's local Jacobian J, its time
        variation J̇, v = J dq, gravity g in that joint's frame and the body regressor Y (I a + v x* I v = Y(v, a) p),
        W1 = Jᵀ Y(0, v) and W2 = Jᵀ Y(v, -g) - J̇ᵀ Y(0, v) (τ_L = Jᵀ(I(a - g) + v x* I v);
        d/dt(Jᵀ I v) = J̇ᵀ I v + Jᵀ I a)."""
        q, dq = np.asarray(q, float), np.asarray(dq, float)
        last = self.model.njoints - 1
        pin.computeJointJacobiansTimeVariation(self.model, self.data, q, dq)
        j = pin.getJointJacobian(self.model, self.data, last, pin.LOCAL)
        jd = pin.getJointJacobianTimeVariation(self.model, self.data, last, pin.LOCAL)
        v = pin.Motion(j @ dq)
        g = self.data.oMi[last].actInv(self.model.gravity)
        h = pin.bodyRegressor(self._motion_zero, v) @ self._payload_to_last
        return j.T @ h, j.T @ (pin.bodyRegressor(v, -g) @ self._payload_to_last) - jd.T @ h

    def momentum_torques(self, q, dq) -> tuple[np.ndarray, np.ndarray]:
        """(M(q) dq, C dq + g - dM/dt dq = g - Cᵀ dq) (n each; N m s, N m) of this model's bodies, exactly
        (dM/dt = C + Cᵀ)."""
        q, dq = np.asarray(q, float), np.asarray(dq, float)
        return self.mass_matrix(q) @ dq, self.gravity(q) - self.coriolis(q, dq).T @ dq

    def payload_gravity_regressor(self, q) -> np.ndarray:
        """n x 4 regressor of p_L,g = (m_L, m_L c_L) (payload frame): g_L(q) - g(q) = Y_Lg p_L,g."""
        y = pin.computeJointTorqueRegressor(self.model, self.data, np.asarray(q, float), self._zero, self._zero)
        return y[:, self._grav_cols] @ self._payload_to_pin_g


def link_params(desc: RobotDescription) -> np.ndarray:
    """Stacked standard parameters (10n) of the description's links (seeds' order, link frames)."""
    return np.concatenate([b.to_params() for b in desc.links])


def gravity_params(desc: RobotDescription) -> np.ndarray:
    """Stacked gravity parameters (4n): (m_k, m_k c_k) per link, link frames."""
    return np.concatenate([b.to_params()[:N_GRAVITY_PARAMS] for b in desc.links])


__all__ = ["RigidBodyDynamics", "build_pinocchio_model", "link_params", "gravity_params", "invert"]
