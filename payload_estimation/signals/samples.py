"""Joint samples: the validated record, the recorded rows it is built from, CSV files, static selection.

A :class:`Samples` record holds N samples of an n-joint robot in the model's joint order:
positions q (rad), measured joint torques tau (N m), optional velocities dq (rad/s),
accelerations ddq (rad/s^2) and time stamps t (s, strictly increasing).

Recorded streams are read as :class:`Rows` (values as logged, with the file line or bag message of
each) and turned into samples by :func:`clean_rows`, which drops -- and counts -- what loggers
repeat: whole rows re-read with a new stamp, rows sharing a stamp, stale torque reads.

CSV format: one header row, then one row per sample. Columns ``q1..qn`` and ``tau1..taun`` are
required, ``dq1..dqn``, ``ddq1..ddqn`` and ``t`` are optional (a group is all-or-nothing);
other columns are ignored. Joint indices are 1-based in the model's joint order.
:func:`write_table` is the package's one CSV writer.

Loading any recording (CSV, rosbag2 directory, lone .db3/.mcap) with a report of its sampling:
:func:`payload_estimation.files.recording.load_recording`.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace

import numpy as np

from ..errors import PayloadEstimationError
from ..model.description import RobotDescription

log = logging.getLogger(__name__)


class SampleDataError(PayloadEstimationError):
    """Sample data are malformed; the message names the file, row, column or joint."""


class NotStaticError(SampleDataError):
    """A sample meant to be static was captured while the arm moved."""


@dataclass(frozen=True)
class Samples:
    """N joint samples in model joint order (see module docstring for units)."""

    q: np.ndarray
    tau: np.ndarray
    dq: np.ndarray | None = None
    ddq: np.ndarray | None = None
    t: np.ndarray | None = None
    joint_names: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        q = _as_2d(self.q, "q")
        n_s, n = q.shape
        object.__setattr__(self, "q", q)
        for name in ("tau", "dq", "ddq"):
            v = getattr(self, name)
            if v is None:
                if name == "tau":
                    raise SampleDataError("samples need measured torques 'tau'")
                continue
            a = _as_2d(v, name)
            if a.shape != (n_s, n):
                raise SampleDataError(f"'{name}' has shape {a.shape}, expected {(n_s, n)} like 'q'")
            object.__setattr__(self, name, a)
        if self.t is not None:
            t = np.asarray(self.t, dtype=float).reshape(-1)
            if t.shape != (n_s,):
                raise SampleDataError(f"'t' has {t.shape[0]} entries for {n_s} samples")
            _finite(t[:, None], "t")
            d = np.diff(t)
            if (d <= 0).any():
                k = int(np.argmax(d <= 0))
                raise SampleDataError(
                    f"time stamps are not strictly increasing: sample {k + 1} has t={t[k + 1]} s after "
                    f"t={t[k]} s (sample {k})"
                )
            object.__setattr__(self, "t", t)
        names = tuple(self.joint_names) if self.joint_names else tuple(f"joint{j + 1}" for j in range(n))
        if len(names) != n:
            raise SampleDataError(f"{len(names)} joint names for {n} joints")
        object.__setattr__(self, "joint_names", names)

    @property
    def n_samples(self) -> int:
        return int(self.q.shape[0])

    @property
    def n_joints(self) -> int:
        return int(self.q.shape[1])

    def __len__(self) -> int:
        return self.n_samples

    def subset(self, index) -> Samples:
        """Samples at ``index`` (boolean mask or integer indices)."""
        def pick(a):
            return None if a is None else a[index]

        return Samples(self.q[index], self.tau[index], pick(self.dq), pick(self.ddq), pick(self.t),
                       self.joint_names)

    def check_robot(self, desc: RobotDescription) -> Samples:
        """Raise unless the joint count matches ``desc``; returns self with the robot's joint names."""
        if self.n_joints != desc.n:
            raise SampleDataError(
                f"samples have {self.n_joints} joints but robot '{desc.name}' has {desc.n} "
                f"({', '.join(desc.joint_names)})"
            )
        return replace(self, joint_names=desc.joint_names)


def _as_2d(v, name: str) -> np.ndarray:
    try:
        a = np.asarray(v, dtype=float)
    except (TypeError, ValueError) as exc:
        raise SampleDataError(f"'{name}' must be numeric: {exc}") from exc
    if a.ndim != 2 or a.shape[0] == 0 or a.shape[1] == 0:
        raise SampleDataError(f"'{name}' must be a non-empty (N samples, n joints) array, got shape {a.shape}")
    _finite(a, name)
    return a


def _finite(a: np.ndarray, name: str) -> None:
    bad = ~np.isfinite(a)
    if bad.any():
        k, j = np.argwhere(bad)[0]
        raise SampleDataError(f"'{name}' is NaN/inf at sample {k}, joint {j + 1}")


# ------------------------------------------------------------------------------- recorded rows


# ---------------------------------------------------------------------------------------------- CSV


# ---------------------------------------------------------------------------------- sample selection

STREAM_MAX_STEP = 0.1
"""s: neighbours farther apart than this are separate captures, not a stream; their position
difference is not a velocity (a file of static captures has no dq columns and seconds between rows)."""


def position_speeds(samples: Samples, max_step: float = STREAM_MAX_STEP) -> tuple[np.ndarray, int]:
    """(|d q / dt| (N, n) rad/s, number of isolated samples) from positions and time stamps.

    Differences are taken only between neighbours at most ``max_step`` s apart (a recorded stream);
    a sample with no such neighbour is a separate capture whose motion cannot be judged from
    positions: its speed is 0 and it is counted.
    """
    q, t = samples.q, samples.t
    n_s = q.shape[0]
    speed = np.zeros_like(q)
    if t is None or n_s < 2:
        return speed, n_s
    dt = np.diff(t)
    ok = dt <= max_step
    v = np.abs(np.diff(q, axis=0)) / dt[:, None]
    acc, cnt = np.zeros_like(q), np.zeros(n_s)
    acc[:-1][ok] += v[ok]
    cnt[:-1][ok] += 1
    acc[1:][ok] += v[ok]
    cnt[1:][ok] += 1
    has = cnt > 0
    speed[has] = acc[has] / cnt[has, None]
    return speed, int((~has).sum())


def _speeds(samples: Samples, what: str) -> np.ndarray:
    if samples.dq is not None:
        return np.abs(samples.dq)
    if samples.t is not None:
        speed, isolated = position_speeds(samples)
        if isolated:
            log.info("%s: %d of %d samples have no neighbour within %g s (separate captures): taken as at rest",
                     what, isolated, samples.n_samples, STREAM_MAX_STEP)
        return speed
    raise SampleDataError(f"{what} needs velocities dq or time stamps t to judge motion")


def static_mask(samples: Samples, max_speed: float) -> np.ndarray:
    """Boolean (N,): samples where every joint speed is <= ``max_speed`` (rad/s)."""
    if not max_speed > 0:
        raise SampleDataError(f"max_speed must be > 0 rad/s, got {max_speed}")
    return np.all(_speeds(samples, "select_static") <= max_speed, axis=1)


def select_static(samples: Samples, max_speed: float = 0.01) -> Samples:
    """Keep only the static samples (all joint speeds <= ``max_speed`` rad/s); error if none."""
    mask = static_mask(samples, max_speed)
    if not mask.any():
        raise NotStaticError(f"none of the {samples.n_samples} samples is static (all joints <= {max_speed} rad/s)")
    return samples.subset(mask)


def require_static(samples: Samples, max_speed: float = 0.01) -> Samples:
    """Raise :class:`NotStaticError` naming the first moving sample and joint; return ``samples``.

    Speeds are the recorded dq, else position differences within a stream (:func:`position_speeds`:
    rows seconds apart are separate captures, not motion); without either nothing can be judged.
    """
    if samples.dq is None and samples.t is None:
        return samples
    dq = _speeds(samples, "require_static")
    bad = dq > max_speed
    if bad.any():
        k, j = np.argwhere(bad)[0]
        source = "recorded" if samples.dq is not None else "from positions and time stamps"
        raise NotStaticError(
            f"sample {k} is not static: joint {samples.joint_names[j]} moves at {dq[k, j]:.4g} rad/s ({source}; "
            f"limit {max_speed} rad/s); {int(bad.any(axis=1).sum())} of {samples.n_samples} samples move. "
            "Wait for the arm to settle before capturing."
        )
    return samples


def near_zero_velocity_mask(dq: np.ndarray, min_speed: float) -> np.ndarray:
    """Boolean (N, n): True where |dq| < ``min_speed`` (rad/s) — Coulomb friction sign is unreliable."""
    return np.abs(np.asarray(dq, dtype=float)) < min_speed


def discard_near_zero_velocity(samples: Samples, min_speed: float = 0.02,
                               joints: list[int] | None = None) -> Samples:
    """Drop samples where any of ``joints`` (0-based; default all) moves slower than ``min_speed``.

    For friction identification; per-row weighting instead: ``near_zero_velocity_mask``.
    """
    dq = _speeds(samples, "discard_near_zero_velocity")
    cols = list(range(samples.n_joints)) if joints is None else list(joints)
    keep = ~near_zero_velocity_mask(dq[:, cols], min_speed).any(axis=1)
    if not keep.any():
        raise SampleDataError(f"every sample has a joint slower than {min_speed} rad/s")
    return samples.subset(keep)


__all__ = [
    "STREAM_MAX_STEP", "NotStaticError", "SampleDataError", "Samples", "require_static",
    "discard_near_zero_velocity", "near_zero_velocity_mask", "position_speeds", "select_static", "static_mask",
]
