"""A simulated torque-sensing arm: MuJoCo physics, a position controller, joint-torque sensors.

Physics: MuJoCo (``implicitfast``, contacts off) of the *true* robot, which differs from the
description the nodes use by ``SimConfig.model_error`` (or ``SimConfig.true_links``).

Controller (what a KUKA joint position controller does, plus an integral term)::

    tau_m = ID_nom(q_d, dq_d, ddq_d) + B ddq_d + Kp (q_d - q) + Kd (dq_d - dq) + Ki * integral(q_d - q)

``ID_nom`` is inverse dynamics of the *nominal* description (gravity feed-forward at rest), ``B``
the drives' reflected rotor inertia (``SimConfig.armature``); the
integral removes the steady-state error of the model error and of an unmodelled payload. The
damping term is a MuJoCo velocity servo so it is integrated implicitly (stable for any gain);
``Kp (q_d - q) + ID_nom + Ki * integral`` saturates at the effort limits.

Sensor: the link-side joint torque transmitted to each link,

    tau_J = M(q) ddq + C(q, dq) dq + g(q) - tau_ext,   tau_ext = sum_k J_k(q)^T [F_k; mu_k]

(true robot + payload; ``J_k`` the base-frame-axes geometric Jacobian of the contact point, as
:meth:`RigidBodyDynamics.frame_jacobian`). Friction (``SensorConfig.viscous``/``coulomb``) sits on
the motor side: tau_m = tau_J + tau_f, and the sensor reads tau_J unless ``sensor_sees_friction``.
In motion ``ddq`` is the acceleration the integrator really applies over the next step
(:attr:`SimulatedArm.acceleration`; ``implicitfast`` evaluates the servo damping and viscous
friction at the end-of-step velocity, so MuJoCo's explicit ``qacc`` would not match the motion).
So at rest a contact force F at a point of link k changes the measurement by ``-J_k^T F``, and the
momentum-observer residual of a correct model converges to ``+J_k^T F``. Noise and offset are added
at every physics step, then the optional first-order low-pass filters the sensor signal.

One sample, one instant (issue 46). The integrator is semi-implicit Euler, v' = v + dt a, q' = q + dt v': its
positions are those of the motion at the steps and its velocity MuJoCo's ``qvel`` the motion's half a step
*earlier* (the mean slope of q over the step before); the acceleration a it applies over the next step is the
motion's at the step: the second difference of q, (q(t + dt) - 2 q(t) + q(t - dt)) / dt^2, is exactly a. So the
recorded velocity is the one at the sample's instant, dq = qvel + dt a / 2 = (q(t + dt) - q(t - dt)) / (2 dt), and
the measured torque is M(q) a + C(q, dq) dq + g(q) - tau_ext at that q, dq and a (MuJoCo's bias forces evaluated
at the recorded dq): torque and recorded motion satisfy the rigid-body equation exactly, with q's central
differences for dq and ddq, and the torque integrated by the trapezoidal rule is the change of the recorded
momentum M(q) dq to second order (what a momentum observer and the online estimate's first-order hold assume of a
sampled sensor). The central difference of the recorded dq gives (a(t - dt) + 2 a(t) + a(t + dt)) / 4: a up to
its curvature, except beside a jump of a (a velocity step of a positions-only trajectory), where the two samples
around it are M Δa / 4 off, in equal and opposite pairs. Until issue 46 the recorded velocity was ``qvel``, half
a step behind q and the torque: M j dt / 2 off for a jerk j, 2.7 N m RMS (9.3 max) against the central
difference of dq on a positions-only move, CoM errors of 15-55 mm in the online estimate.

Time is continuous over resets (a ROS clock never jumps back).
"""

from __future__ import annotations

from collections.abc import Iterator

import mujoco
import numpy as np

from ..model.description import RobotDescription, require_physical
from ..model.dynamics import RigidBodyDynamics
from ..model.joint_vectors import per_joint
from ..model.parameters import BodyInertia, check_consistency
from .config import ArmState, SimConfig, SimInputError
from .mjcf import PAYLOAD_BODY, build_mjcf, principal_inertia
from .trajectory import QUINTIC, JointTrajectory, parse_points
from .truth import SIMULATOR, true_description, true_links

# Payload allowance used when deriving default gains (kg, m in the payload frame).
_GAIN_PAYLOAD = BodyInertia(3.0, np.array([0.0, 0.0, 0.1]), np.eye(3) * 5e-3)
_GAIN_SAMPLES = 64


def default_gains(desc: RobotDescription, bandwidth: float, armature: np.ndarray | float = 0.0
                  ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(kp, kd, ki) per joint: triple closed-loop pole at ``bandwidth`` rad/s for the largest
    joint inertia M_ii over random configurations with a 3 kg payload allowance; lighter
    configurations get a stable, better damped loop (Routh: any inertia up to 9x the design one)."""
    dyn = RigidBodyDynamics(desc, _GAIN_PAYLOAD)
    rng = np.random.default_rng(12345)
    lo, hi = desc.limits.position[:, 0], desc.limits.position[:, 1]
    m = np.zeros(desc.n)
    for _ in range(_GAIN_SAMPLES):
        m = np.maximum(m, np.diag(dyn.mass_matrix(rng.uniform(lo, hi))))
    m = m + armature
    w = float(bandwidth)
    return 3 * m * w**2, 3 * m * w, m * w**3


class SimulatedArm:
    """Position-controlled, torque-sensing arm simulated with MuJoCo (see module docstring).

    ``desc`` is the description the rest of the system believes in; the true robot differs by
    ``config.model_error``. Not thread-safe: one caller at a time.
    """

    def __init__(self, desc: RobotDescription, config: SimConfig | None = None):
        cfg = SimConfig() if config is None else config
        if not (np.isfinite(cfg.dt) and 0 < cfg.dt <= 0.01):
            raise SimInputError(f"SimConfig.dt must be in (0, 0.01] s, got {cfg.dt}")
        if not (np.isfinite(cfg.model_error) and cfg.model_error >= 0):
            raise SimInputError(f"SimConfig.model_error must be >= 0, got {cfg.model_error}")
        require_physical(desc, SIMULATOR)
        n = desc.n
        self.desc = desc
        self.config = cfg
        if cfg.true_links is not None:
            links = tuple(cfg.true_links)
        else:
            links = true_links(desc, cfg.model_error, cfg.seed)
        self._true_desc = true_description(desc, links)
        s = cfg.sensor
        self._noise_std = per_joint(s.noise_std, n, "SensorConfig.noise_std", nonnegative=True, error=SimInputError)
        self._offset = per_joint(s.offset, n, "SensorConfig.offset", error=SimInputError)
        self._noisy = bool(np.any(self._noise_std > 0))
        self._sees_friction = bool(s.sensor_sees_friction)
        viscous = per_joint(s.viscous, n, "SensorConfig.viscous", nonnegative=True, error=SimInputError)
        coulomb = per_joint(s.coulomb, n, "SensorConfig.coulomb", nonnegative=True, error=SimInputError)
        if s.lowpass_hz is not None and not (np.isfinite(s.lowpass_hz) and s.lowpass_hz > 0):
            raise SimInputError(f"SensorConfig.lowpass_hz must be > 0 or None, got {s.lowpass_hz}")
        self._alpha = None if s.lowpass_hz is None else 1.0 - np.exp(-2 * np.pi * s.lowpass_hz * cfg.dt)
        self.armature = per_joint(cfg.armature, n, "SimConfig.armature", nonnegative=True, error=SimInputError)
        kp0, kd0, ki0 = default_gains(desc, cfg.bandwidth, self.armature)
        self.kp = kp0 if cfg.kp is None else per_joint(cfg.kp, n, "SimConfig.kp", nonnegative=True, error=SimInputError)
        self.kd = kd0 if cfg.kd is None else per_joint(cfg.kd, n, "SimConfig.kd", nonnegative=True, error=SimInputError)
        self.ki = ki0 if cfg.ki is None else per_joint(cfg.ki, n, "SimConfig.ki", nonnegative=True, error=SimInputError)
        self._nominal = RigidBodyDynamics(desc)
        self._viscous = viscous
        self._mfull = np.zeros((n, n))
        self._diag = np.diag_indices(n)
        self._implicit_d = cfg.dt * (self.kd + viscous)
        self._acc = np.zeros(n)
        self._dq = np.zeros(n)  # rad/s, the velocity at the sample's instant (module docstring)
        self._bias = np.zeros(n)
        xml = build_mjcf(self._true_desc, dt=cfg.dt, damping=viscous, frictionloss=coulomb, kd=self.kd,
                         armature=self.armature)
        self.mjcf = xml
        self.model = mujoco.MjModel.from_xml_string(xml)
        self.data = mujoco.MjData(self.model)
        self._scratch = mujoco.MjData(self.model)
        self._payload_id = self.model.body(PAYLOAD_BODY).id
        self._link_ids = {f"link_{k + 1}": self.model.body(f"link_{k + 1}").id for k in range(n)}
        self._rng = np.random.default_rng(cfg.seed)
        self._effort = desc.limits.effort
        self._integral = np.zeros(n)
        self._integral_max = np.where(self.ki > 0, 2 * self._effort / np.maximum(self.ki, 1e-300), 0.0)
        self._contacts: list[tuple[int, np.ndarray, np.ndarray, np.ndarray, float]] = []
        self._had_contacts = False
        self._payload: BodyInertia | None = None
        self._traj = JointTrajectory(0.0, np.zeros(n), np.zeros(n), [])
        self._meas = np.zeros(n)
        self._filtered = None
        q0 = np.clip(np.zeros(n), desc.limits.position[:, 0], desc.limits.position[:, 1])
        self.reset(q0)

    # --- properties -----------------------------------------------------------------------------
    @property
    def n(self) -> int:
        return self.desc.n

    @property
    def dt(self) -> float:
        return self.config.dt

    @property
    def time(self) -> float:
        return float(self.data.time)

    @property
    def true_description(self) -> RobotDescription:
        """The simulated robot's true description (for tests and benchmarks only)."""
        return self._true_desc

    @property
    def true_payload(self) -> BodyInertia | None:
        """The attached payload (payload frame) or None."""
        return self._payload

    @property
    def trajectory_done(self) -> bool:
        return self.data.time >= self._traj.t_end - 0.5 * self.dt

    @property
    def link_names(self) -> tuple[str, ...]:
        """Names accepted by :meth:`apply_contact` and :meth:`link_pose`."""
        return tuple(self._link_ids)

    def link_pose(self, link: str) -> np.ndarray:
        """4x4 pose of link frame ``link`` in the base frame now."""
        if link not in self._link_ids:
            raise SimInputError(f"unknown link '{link}'; expected one of {list(self._link_ids)}")
        bid = self._link_ids[link]
        t = np.eye(4)
        t[:3, :3] = self.data.xmat[bid].reshape(3, 3)
        t[:3, 3] = self.data.xpos[bid]
        return t

    @property
    def desired(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Desired (q, dq, ddq) of the controller now."""
        return self._traj.sample(self.data.time)

    # --- commands --------------------------------------------------------------------------------
    def reset(self, q0) -> None:
        """Put the arm at rest at ``q0`` (rad), holding it, with settled torques and filter."""
        q0 = self._check_q(q0, "reset q0")
        d = self.data
        d.qpos[:] = q0
        d.qvel[:] = 0.0
        d.qacc_warmstart[:] = 0.0
        self._contacts.clear()
        d.xfrc_applied[:] = 0.0
        self._traj = JointTrajectory(d.time, q0, np.zeros(self.n), [])
        # Preload the integral so the motor torque equals the true static torque: exactly at rest.
        mujoco.mj_fwdPosition(self.model, d)
        mujoco.mj_fwdVelocity(self.model, d)
        g_true = d.qfrc_bias.copy()
        g_nom = self._nominal.gravity(q0)
        self._integral = np.where(self.ki > 0, (g_true - g_nom) / np.maximum(self.ki, 1e-300), 0.0)
        self._refresh()
        self._filtered = None
        self._measure()

    def static_capture(self, q, samples: int = 120) -> np.ndarray:
        """Mean measured torque (N m) of ``samples`` sensor readings at rest at ``q`` (rad): the true
        static torque (payload included) plus the sensor's offset and its noise averaged over
        ``samples``; what a settled capture measures, without simulating the move there (Monte-Carlo
        benches). Leaves the arm at rest at ``q``."""
        if int(samples) < 1:
            raise SimInputError(f"static_capture needs samples >= 1, got {samples}")
        self.reset(q)
        link, motor = self._torques()
        raw = motor if self._sees_friction else link
        noise = self._noise_std * self._rng.standard_normal(self.n) / np.sqrt(int(samples)) if self._noisy else 0.0
        return raw + self._offset + noise

    def set_trajectory(self, points, interpolation: str = QUINTIC) -> None:
        """Replace the trajectory: ``points`` = [(time_from_start_s, positions, velocities|None
        [, accelerations|None])], interpolated as ``interpolation`` says (:mod:`.trajectory`: ``"quintic"``
        the package's own smooth moves, missing velocities and accelerations 0; ``"jtc"`` what
        joint_trajectory_controller does with the fields given: linear, cubic or quintic).

        Starts from the current state at the current time; raises SimInputError (nothing changes)
        on bad shapes/NaN, waypoint positions outside the limits, non-increasing times, or a
        segment needing more than the velocity limits.
        """
        pts = parse_points(points, self.n, self.desc.joint_names, self.desc.limits, interpolation)
        q = self.data.qpos.copy()
        dq = np.clip(self._dq, -self.desc.limits.velocity, self.desc.limits.velocity)  # the measured state's
        traj = JointTrajectory(self.data.time, q, dq, pts, interpolation)
        traj.check_limits(self.desc.limits, self.desc.joint_names)
        self._traj = traj

    def hold(self) -> None:
        """Stop at the current position (the desired velocity becomes zero)."""
        self._traj = JointTrajectory(self.data.time, self.data.qpos.copy(), np.zeros(self.n), [])

    def step(self, n: int = 1) -> None:
        """Advance ``n`` physics steps of ``dt``."""
        m, d = self.model, self.data
        for _ in range(int(n)):
            mujoco.mj_implicit(m, d)
            desired = self._traj.sample(d.time)
            integral = self._integral + (desired[0] - d.qpos) * self.dt
            self._integral = np.minimum(np.maximum(integral, -self._integral_max), self._integral_max)
            self._refresh(desired)
            self._measure()

    def run(self, seconds: float) -> Iterator[ArmState]:
        """Advance ``seconds`` (rounded to whole steps of ``dt``), yielding the measurement after each step."""
        for _ in range(int(round(seconds / self.dt))):
            self.step(1)
            yield self.state()

    def state(self) -> ArmState:
        """The current measurement (time s, q rad, dq rad/s at this instant: see the module docstring, measured
        torque N m)."""
        d = self.data
        return ArmState(float(d.time), d.qpos.copy(), self._dq.copy(), self._meas.copy())

    def attach_payload(self, body: BodyInertia) -> None:
        """Rigidly attach ``body`` (mass, CoM, inertia in the description's payload frame)."""
        report = check_consistency(body)
        if not report.ok:
            raise SimInputError("attach_payload: payload is physically inconsistent: " + "; ".join(report.problems))
        moments, quat = principal_inertia(body)
        self._set_payload_body(float(body.mass), np.asarray(body.com, float), quat, moments)
        self._payload = BodyInertia(float(body.mass), np.asarray(body.com, float).copy(),
                                    np.asarray(body.inertia_com, float).copy())

    def detach_payload(self) -> None:
        """Remove the payload (the payload body gets exactly zero mass and inertia)."""
        self._set_payload_body(0.0, np.zeros(3), np.array([1.0, 0, 0, 0]), np.zeros(3))
        self._payload = None

    def apply_contact(self, link: str, force, point=None, duration: float = 0.1, torque=None) -> None:
        """Apply ``force`` (N, base-frame axes) at ``point`` (m, link frame; default origin) of
        ``link`` ('link_1'..'link_n'), plus an optional pure ``torque`` (N m, base axes), for
        ``duration`` s from now."""
        if link not in self._link_ids:
            raise SimInputError(f"apply_contact: unknown link '{link}'; expected one of {list(self._link_ids)}")
        force = _vec3(force, "apply_contact force")
        point = np.zeros(3) if point is None else _vec3(point, "apply_contact point")
        torque = np.zeros(3) if torque is None else _vec3(torque, "apply_contact torque")
        if not (np.isfinite(duration) and duration > 0):
            raise SimInputError(f"apply_contact: duration must be > 0 s, got {duration}")
        self._contacts.append((self._link_ids[link], force, point, torque, self.data.time + float(duration)))
        self._refresh()

    def clear_contacts(self) -> None:
        """Remove all applied contact forces now."""
        self._contacts.clear()
        self._refresh()

    # --- internals -------------------------------------------------------------------------------
    def _check_q(self, q, what: str) -> np.ndarray:
        q = np.asarray(q, dtype=float)
        if q.shape != (self.n,) or not np.all(np.isfinite(q)):
            raise SimInputError(f"{what}: expected {self.n} finite joint positions, got {q}")
        lim = self.desc.limits.position
        bad = np.flatnonzero((q < lim[:, 0]) | (q > lim[:, 1]))
        if bad.size:
            j = bad[0]
            raise SimInputError(f"{what}: joint {self.desc.joint_names[j]} = {q[j]:.4f} rad is outside its limits "
                             f"[{lim[j, 0]:.4f}, {lim[j, 1]:.4f}]")
        return q

    def _set_payload_body(self, mass, com, quat, moments) -> None:
        m, i = self.model, self._payload_id
        m.body_mass[i] = mass
        m.body_ipos[i] = com
        m.body_iquat[i] = quat
        m.body_inertia[i] = moments
        # Constants derived from masses (subtree masses, invweights) live in the model.
        mujoco.mj_setConst(m, self._scratch)
        self._refresh()

    def _refresh(self, desired=None) -> None:
        """Forward dynamics at the current state with the current control and contact forces."""
        m, d = self.model, self.data
        mujoco.mj_fwdPosition(m, d)
        q_d, dq_d, ddq_d = self._traj.sample(d.time) if desired is None else desired
        tau = (self._nominal.inverse_dynamics(q_d, dq_d, ddq_d) + self.armature * ddq_d
               + self.kp * (q_d - d.qpos) + self.ki * self._integral)
        d.qfrc_applied[:] = np.minimum(np.maximum(tau, -self._effort), self._effort)
        d.ctrl[:] = dq_d
        if self._contacts or self._had_contacts:
            d.xfrc_applied[:] = 0.0
            self._had_contacts = bool(self._contacts)
        if self._contacts:
            self._contacts = [c for c in self._contacts if d.time < c[4] - 1e-12]
            for bid, f, p, mu, _ in self._contacts:
                p_w = d.xpos[bid] + d.xmat[bid].reshape(3, 3) @ p
                d.xfrc_applied[bid, :3] += f
                d.xfrc_applied[bid, 3:] += np.cross(p_w - d.xipos[bid], f) + mu
        mujoco.mj_forwardSkip(m, d, mujoco.mjtStage.mjSTAGE_POS, 0)
        # The acceleration implicitfast will integrate: (M + B + dt D) a = f, D = diag(kd + viscous)
        # (MuJoCo's d.qacc is the explicit one, which differs in transients).
        mujoco.mj_fullM(m, d, self._mfull)
        self._mfull[self._diag] += self._implicit_d
        self._acc = np.linalg.solve(self._mfull, d.qfrc_smooth + d.qfrc_constraint)

    def _torques(self) -> tuple[np.ndarray, np.ndarray]:
        """(link-side torque tau_J, motor-side torque tau_J + friction) consistent with the motion
        actually integrated over the next step (see :attr:`acceleration`), at the velocity of this instant
        (:attr:`_dq`, set here)."""
        m, d = self.model, self.data
        a = self._acc
        v_next = d.qvel + self.dt * a
        # implicitfast evaluates the velocity-proportional forces at the end-of-step velocity
        motor = d.qfrc_applied + self.kd * (d.ctrl - v_next) - self.armature * a
        link = motor - self._viscous * v_next + d.qfrc_constraint
        # the velocity at this instant, half a step after qvel's, and the bias forces (Coriolis, centrifugal) at it
        self._dq = d.qvel + 0.5 * self.dt * a
        if np.any(a != 0.0):
            qvel = d.qvel.copy()
            d.qvel[:] = self._dq
            mujoco.mj_comVel(m, d)
            mujoco.mj_rne(m, d, 0, self._bias)
            d.qvel[:] = qvel
            mujoco.mj_comVel(m, d)
            shift = self._bias - d.qfrc_bias
            link, motor = link + shift, motor + shift
        return link, motor

    def _measure(self) -> None:
        link, motor = self._torques()
        raw = motor if self._sees_friction else link
        signal = raw + self._offset
        if self._noisy:
            signal = signal + self._noise_std * self._rng.standard_normal(self.n)
        if self._alpha is None:
            self._meas = signal
        else:
            if self._filtered is None:
                self._filtered = raw + self._offset
            self._filtered = self._filtered + self._alpha * (signal - self._filtered)
            self._meas = self._filtered.copy()

    def link_side_torque(self) -> np.ndarray:
        """Noise-free link-side joint torque tau_J now (N m), whatever the sensor settings."""
        return self._torques()[0]

    @property
    def acceleration(self) -> np.ndarray:
        """Joint acceleration (rad/s^2) the integrator applies over the next step from the current
        state: MuJoCo's qvel(t + dt) = qvel(t) + dt * acceleration; the motion's at this instant, the second
        difference of q. With it the measured link-side torque satisfies tau_J = M(q) ddq + C(q, dq) dq + g(q) -
        tau_ext exactly (true robot, the recorded q and dq)."""
        return self._acc.copy()


def _vec3(v, what: str) -> np.ndarray:
    a = np.asarray(v, dtype=float)
    if a.shape != (3,) or not np.all(np.isfinite(a)):
        raise SimInputError(f"{what}: expected 3 finite numbers, got {v}")
    return a
