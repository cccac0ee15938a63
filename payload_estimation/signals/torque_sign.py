"""Does the measured joint torque run with the model's joint torque? A per-joint sign test on the data.

Drivers differ in the sign of ``joint_states.effort``: lbr_fri_ros2_stack passes KUKA's FRI
``measured_torque`` on, which runs opposite to the URDF's joint torque (correlation with the
description's gravity torque -0.999 on A2 and A4 of a real LBR Med 7). Fitted as it is, such a
recording gives a model 45 N m off, or a monitor that sees a collision in the arm's own weight.

The test: per joint, the least-squares slope a_j of the measured torque on the description's gravity
torque g_j(q) (through the origin: offsets and friction are small against the gravity of a joint that
carries weight), over the samples at hand. A joint is judged only where its gravity torque is large
enough to tell (RMS >= ``min_gravity`` N m): a_j <= -``decisive`` says the effort runs opposite,
a_j >= ``decisive`` that it runs with the model; a joint that carries no gravity (A1 of an upright
arm, a wrist axis pointing down) stays undecided. The masses of a description may be 20 % off and the
arm may move: the slope stays near +1 or -1, far from the decision level 0.5.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

MIN_GRAVITY = 2.0
"""N m: RMS gravity torque a joint must carry over the samples for its sign to be judged."""
DECISIVE_SLOPE = 0.5
"""|slope| of torque on gravity torque beyond which a joint's sign is decided."""


@dataclass(frozen=True)
class TorqueSign:
    """The sign test's result: per joint the slope (nan where undecided: too little gravity torque)."""

    joint_names: tuple[str, ...]
    slope: np.ndarray          # (n,) measured torque per unit of the model's gravity torque
    gravity_rms: np.ndarray    # (n,) N m
    samples: int

    @property
    def reversed_joints(self) -> tuple[int, ...]:
        return tuple(int(j) for j in np.flatnonzero(self.slope <= -DECISIVE_SLOPE))

    @property
    def agreeing_joints(self) -> tuple[int, ...]:
        return tuple(int(j) for j in np.flatnonzero(self.slope >= DECISIVE_SLOPE))

    @property
    def decided(self) -> bool:
        """True when at least one joint carries enough gravity torque to tell."""
        return bool(self.reversed_joints or self.agreeing_joints)

    def suggested_gain(self, current: np.ndarray | None = None) -> list[float]:
        """Per-joint gains that fix the sign: -1 x the current gain where reversed; one value when all agree."""
        g = np.ones(len(self.slope)) if current is None else np.asarray(current, float).copy()
        rev = list(self.reversed_joints)
        if rev and not self.agreeing_joints and np.all(g == g[0]):
            return [float(-g[0])]          # every joint that could tell runs opposite: one value for all
        g[rev] = -g[rev]
        return [float(x) for x in g]

    def problem(self, source: str, gain_option: str) -> str | None:
        """None when no joint runs opposite; else one message: which joints, the evidence, the fix.
        ``gain_option`` formats the fix (e.g. '--torque-gain {}' or 'torque_gain: [{}]')."""
        rev = self.reversed_joints
        if not rev:
            return None
        names = [self._name(j) for j in rev]
        evidence = ", ".join(f"{self._name(j)} {self.slope[j]:+.2f}" for j in rev)
        ok = [self._name(j) for j in self.agreeing_joints]
        undecided = [self._name(j) for j in range(len(self.slope))
                     if j not in rev and j not in self.agreeing_joints]
        fix = gain_option.format(",".join(f"{g:g}" for g in self.suggested_gain()))
        return (f"{source}: the measured torque runs opposite to the robot model's joint torque on "
                f"{', '.join(names)} (slope of the effort on the description's gravity torque: {evidence}, "
                f"over {self.samples} samples; "
                + (f"{', '.join(ok)} agree; " if ok else "")
                + (f"{', '.join(undecided)} carry too little gravity torque to tell; " if undecided else "")
                + "a fit or a collision monitor on it would be wrong). The driver reports the torque with the "
                f"opposite sign (lbr_fri_ros2_stack does): give {fix}")

    def describe(self) -> str:
        """One line for a command's output."""
        if not self.decided:
            return (f"torque sign: not checked (no joint carries {MIN_GRAVITY:g} N m RMS of gravity torque in "
                    "these samples)")
        agree = ", ".join(f"{self._name(j)} {self.slope[j]:+.2f}" for j in self.agreeing_joints)
        return f"torque sign: runs with the model's gravity torque (slope {agree})"

    def _name(self, j: int) -> str:
        return self.joint_names[j] if j < len(self.joint_names) else f"joint {j + 1}"


def check_torque_sign(gravity: np.ndarray, tau: np.ndarray, joint_names: tuple[str, ...] = (),
                min_gravity: float = MIN_GRAVITY) -> TorqueSign:
    """The sign test on (N, n) gravity torques of the description and measured torques (N m)."""
    g = np.atleast_2d(np.asarray(gravity, float))
    t = np.atleast_2d(np.asarray(tau, float))
    gg = np.einsum("ij,ij->j", g, g)
    gt = np.einsum("ij,ij->j", g, t)
    return _result(gg, gt, g.shape[0], joint_names, min_gravity)


def _result(gg, gt, count: int, joint_names, min_gravity: float) -> TorqueSign:
    rms = np.sqrt(gg / max(count, 1))
    with np.errstate(invalid="ignore", divide="ignore"):
        slope = np.where(rms >= min_gravity, gt / np.where(gg > 0, gg, 1.0), np.nan)
    return TorqueSign(tuple(joint_names), slope, rms, int(count))


class TorqueSignWatch:
    """The same test on a live stream: sums updated per sample (a few multiplications), judged on demand."""

    def __init__(self, n: int, joint_names: tuple[str, ...] = (), min_gravity: float = MIN_GRAVITY):
        self.joint_names = tuple(joint_names)
        self.min_gravity = float(min_gravity)
        self.reset(n)

    def reset(self, n: int | None = None) -> None:
        n = len(self._gg) if n is None else n
        self._gg = np.zeros(n)
        self._gt = np.zeros(n)
        self.count = 0

    def add(self, gravity: np.ndarray, tau: np.ndarray) -> None:
        self._gg += gravity * gravity
        self._gt += gravity * tau
        self.count += 1

    def result(self) -> TorqueSign:
        return _result(self._gg, self._gt, self.count, self.joint_names, self.min_gravity)




class TorqueSignGate:
    """A node's sign check on its live stream: fed at most every ``every`` s of stream time (the model's gravity
    torque and the torque after the gain), judged at most every ``judge_every`` s; :attr:`fault` holds the
    refusal once a joint runs opposite (and stays until :meth:`reset`: a new gain or model). The node refuses to
    estimate or monitor while it is set, at ERROR, with the words of :meth:`TorqueSign.problem`. By time, not by
    samples: a 100 Hz stream is judged as soon as a 1 kHz one."""

    def __init__(self, joint_names: tuple[str, ...], every: float = 0.01, judge_every: float = 0.1):
        self.joint_names = tuple(joint_names)
        self.every, self.judge_every = float(every), float(judge_every)
        self.watch = TorqueSignWatch(len(joint_names), joint_names)
        self.fault: str | None = None
        self._fed = self._judged = -np.inf

    def reset(self) -> None:
        self.watch.reset()
        self.fault = None
        self._fed = self._judged = -np.inf

    def due(self, t: float) -> bool:
        """True when the sample at stream time ``t`` (s) is one to feed (the caller then computes the gravity)."""
        if t < self._fed:  # the stream started over: time runs from its new start
            self._fed = self._judged = -np.inf
        if self.fault is not None or not t - self._fed >= self.every:
            return False
        self._fed = t
        return True

    def feed(self, gravity: np.ndarray, tau: np.ndarray) -> str | None:
        """The sample :meth:`due` accepted; returns the refusal when it is first found (None otherwise)."""
        self.watch.add(np.asarray(gravity, float), np.asarray(tau, float))
        if not self._fed - self._judged >= self.judge_every:
            return None
        self._judged = self._fed
        self.fault = self.watch.result().problem("joint_states effort", "torque_gain: [{}]")
        return self.fault


__all__ = ["DECISIVE_SLOPE", "MIN_GRAVITY", "TorqueSign", "TorqueSignGate", "TorqueSignWatch", "check_torque_sign"]
