"""The payload from recordings as they are: a loaded run against an unloaded run of the same motion, or
against a torque model (an identified one with its friction), static captures or any motion.

* :func:`torque_gains` / :func:`apply_torque_gain` -- drives that report motor current: tau = G i
  per joint (N m per unit), applied on load (and by the estimator node);
* :func:`find_time_shift` / :func:`align_recordings` -- two recordings of one motion with different
  start times, lengths, rates and stamp jitter: the time shift that minimises the mean squared
  joint-position difference over their overlap (every lag at once by FFT cross-correlation, then a
  parabolic and a continuous refinement), the common span resampled to one grid, and the residual
  position mismatch; a mismatch too large is not the same motion and is refused;
* :func:`estimate_payload_recordings` -- static captures (gravity: mass and CoM) or a motion
  (positions low-passed and differentiated by :func:`.preprocessing.preprocess_filtered`; mass, CoM
  and, where the motion determines it, the inertia: :func:`.payload_motion.estimate_payload_motion`).

Time convention: ``shift`` is what is added to the unloaded recording's stamps to put the same point
of the motion at the loaded recording's stamp (loaded clock).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np
import scipy.optimize
import scipy.signal

from ..model.dynamics import RigidBodyDynamics
from .data import (
    STREAM_MAX_STEP,
    SampleDataError,
    Samples,
    check_static,
    near_zero_velocity_mask,
    position_speeds,
)
from .estimate import PayloadEstimate
from .model_uncertainty import DATASHEET_RELATIVE, ModelUncertainty, declared_uncertainty, identified_uncertainty
from .payload import PayloadLimits, estimate_payload_gravity
from .payload_motion import INERTIA_RSD, estimate_payload_motion
from .preprocessing import Preprocessed, preprocess_filtered
from .recording import GAP_FACTOR, MAX_GAP, resample, stamp_report

CURRENT_WARNING = (
    "torques computed from motor currents (--torque-gain / torque_gain) include the drive's friction, and "
    "gear friction grows with the load: against a model or the nominal description the payload then absorbs "
    "the change; an unloaded recording of the same motion (differential) cancels the unloaded part only")
"""Printed whenever a torque gain is applied."""

MAX_MISMATCH = 0.02
"""rad: largest RMS joint-position difference of two aligned recordings that still counts as one motion."""
MIN_OVERLAP = 0.5
"""Fraction of the shorter recording that two aligned recordings must share."""
ALIGN_RATE = 200.0
"""Hz: the coarse shift search runs at most at this rate (refined continuously afterwards)."""
COULOMB_MIN_SPEED = 0.02
"""rad/s: joint rows slower than this get no weight against a model with Coulomb friction (sign(dq)
is unreliable there), as in identification."""


class AlignmentError(SampleDataError):
    """Two recordings cannot be lined up as one motion; the message says why and what to do."""


# ------------------------------------------------------------------------------------ torque gain

def torque_gains(gain, n: int, joint_names: tuple[str, ...] = ()) -> np.ndarray:
    """Per-joint gains (n,) N m per unit from one value for all joints or n values (a list, an array or
    a string "G" / "G1,...,Gn"); an empty list means 1 (torque already in N m). Raises
    :class:`~.data.SampleDataError` naming the joint of a gain that is not a finite number > 0."""
    if isinstance(gain, str):
        try:
            gain = [float(x) for x in gain.replace(" ", "").split(",") if x != ""]
        except ValueError:
            raise SampleDataError(f"torque gain {gain!r}: expected one number or {n} numbers separated by commas "
                                  "(N m per unit of the recorded effort)") from None
    g = np.atleast_1d(np.asarray(gain, dtype=float)).reshape(-1)
    if g.size == 0:
        return np.ones(n)
    if g.size == 1:
        g = np.full(n, float(g[0]))
    if g.size != n:
        raise SampleDataError(f"torque gain has {g.size} values, the robot has {n} joints "
                              "(give one value for all joints or one per joint)")
    bad = np.flatnonzero(~np.isfinite(g) | (g <= 0))
    if bad.size:
        j = int(bad[0])
        name = joint_names[j] if j < len(joint_names) else f"{j + 1}"
        raise SampleDataError(f"torque gain of joint {name} is {g[j]}: gains must be finite numbers > 0 "
                              "(N m per unit of the recorded effort)")
    return g


def effort_to_torque(effort: np.ndarray, gains: np.ndarray) -> np.ndarray:
    """Joint torque (N m) from a recorded effort (n,) or (N, n) and per-joint gains from :func:`torque_gains`."""
    return np.asarray(effort, dtype=float) * gains


def apply_torque_gain(samples: Samples, gain) -> Samples:
    """``samples`` with tau = G * effort per joint (see :func:`torque_gains`)."""
    g = torque_gains(gain, samples.n_joints, samples.joint_names)
    return samples if np.all(g == 1.0) else replace(samples, tau=effort_to_torque(samples.tau, g))


# -------------------------------------------------------------------------------------- alignment

@dataclass(frozen=True)
class Alignment:
    """Two recordings of one motion on one grid (loaded clock).

    ``shift`` s added to the unloaded stamps; ``start``/``end`` the common span (s, loaded clock),
    ``overlap`` its length; ``rate`` Hz of the grid; ``rms`` per joint (rad) of the position difference
    on the grid; ``loaded``/``unloaded``: the resampled samples (identical ``t``; gaps of either
    recording longer than ``max_gap`` are left out of both).
    """

    shift: float
    start: float
    end: float
    rate: float
    rms: np.ndarray
    loaded: Samples
    unloaded: Samples
    joint_names: tuple[str, ...] = ()

    @property
    def overlap(self) -> float:
        return self.end - self.start

    @property
    def mismatch(self) -> float:
        """RMS position difference over all joints (rad)."""
        return float(np.sqrt(np.mean(self.rms ** 2)))

    def describe(self) -> str:
        j = int(np.argmax(self.rms))
        name = self.joint_names[j] if j < len(self.joint_names) else f"{j + 1}"
        return (f"alignment: unloaded run shifted by {self.shift:+.4f} s; overlap {self.overlap:.3f} s "
                f"(t = {self.start:.3f}..{self.end:.3f} s, loaded clock), {self.loaded.n_samples} samples at "
                f"{self.rate:.4g} Hz; residual position mismatch RMS {self.mismatch:.3g} rad "
                f"(worst joint {name} {self.rms[j]:.3g} rad)")

    def to_dict(self) -> dict:
        return {"shift_s": self.shift, "overlap_s": self.overlap, "start_s": self.start, "end_s": self.end,
                "rate_hz": self.rate, "samples": self.loaded.n_samples, "mismatch_rms_rad": self.mismatch,
                "mismatch_rms_per_joint_rad": [float(x) for x in self.rms]}


def _stamped(samples: Samples, what: str) -> np.ndarray:
    if samples.t is None or samples.n_samples < 4:
        raise AlignmentError(f"{what}: lining two runs up needs time stamps (CSV column 't' or the bag's stamps) "
                             "and at least 4 samples")
    return samples.t


def _uniform_positions(samples: Samples, fs: float) -> tuple[float, np.ndarray]:
    t = samples.t
    grid = t[0] + np.arange(int(np.floor((t[-1] - t[0]) * fs + 1e-9)) + 1) / fs
    return float(t[0]), np.column_stack([np.interp(grid, t, samples.q[:, j]) for j in range(samples.n_joints)])


def _mismatch(loaded: Samples, unloaded: Samples, shift: float) -> tuple[np.ndarray, int]:
    """Per-joint mean squared position difference on the loaded stamps inside the overlap."""
    tl, tu = loaded.t, unloaded.t + shift
    inside = (tl >= tu[0]) & (tl <= tu[-1])
    if inside.sum() < 2:
        return np.full(loaded.n_joints, np.inf), 0
    t = tl[inside]
    d = np.column_stack([loaded.q[inside, j] - np.interp(t, tu, unloaded.q[:, j]) for j in range(loaded.n_joints)])
    return np.mean(d ** 2, axis=0), int(inside.sum())


def find_time_shift(loaded: Samples, unloaded: Samples, rate: float | None = None,
                    min_overlap: float = MIN_OVERLAP) -> float:
    """The shift (s, added to the unloaded stamps) that best lines ``unloaded`` up with ``loaded``.

    Both are interpolated to a uniform grid (the lower median rate, at most :data:`ALIGN_RATE`), the mean
    squared position difference over the overlap is computed for every lag at once (FFT
    cross-correlation plus running sums of squares), lags sharing less than ``min_overlap`` of the
    shorter recording are not considered; among the local minima at most 1.5 x the best (a periodic
    motion has one per period) the one with the largest overlap wins; then a parabola through the
    neighbouring lags and a bounded scalar minimisation on the loaded stamps refine it below one sample.
    """
    _stamped(loaded, "loaded recording")
    _stamped(unloaded, "unloaded recording")
    if loaded.n_joints != unloaded.n_joints:
        raise AlignmentError(f"the loaded recording has {loaded.n_joints} joints, the unloaded one {unloaded.n_joints}")
    fs = float(rate) if rate is not None else min(stamp_report(loaded.t).rate, stamp_report(unloaded.t).rate,
                                                  ALIGN_RATE)
    ta0, a = _uniform_positions(loaded, fs)
    tb0, b = _uniform_positions(unloaded, fs)
    mean = a.mean(axis=0)
    a, b = a - mean, b - mean
    na, nb = a.shape[0], b.shape[0]
    cross = sum(scipy.signal.correlate(a[:, j], b[:, j], mode="full", method="fft") for j in range(a.shape[1]))
    lags = scipy.signal.correlation_lags(na, nb, mode="full")
    ea = np.concatenate([[0.0], np.cumsum(np.sum(a ** 2, axis=1))])
    eb = np.concatenate([[0.0], np.cumsum(np.sum(b ** 2, axis=1))])
    lo = np.maximum(0, -lags)
    hi = np.minimum(nb, na - lags)
    count = hi - lo
    need = max(3, int(np.ceil(min_overlap * min(na, nb))))
    ok = count >= need
    if not ok.any():
        raise AlignmentError("the recordings are too short to line up")
    ssd = (ea[np.where(ok, hi + lags, 0)] - ea[np.where(ok, lo + lags, 0)]) + (eb[np.where(ok, hi, 0)]
                                                                               - eb[np.where(ok, lo, 0)]) - 2 * cross
    msd = np.where(ok, np.maximum(ssd, 0.0) / np.maximum(count, 1), np.inf)
    best = float(msd.min())
    interior = np.zeros(msd.size, bool)
    interior[1:-1] = (msd[1:-1] <= msd[:-2]) & (msd[1:-1] <= msd[2:]) & np.isfinite(msd[1:-1])
    interior[int(np.argmin(msd))] = True
    cand = np.flatnonzero(interior & (msd <= 1.5 * best + 1e-12))
    k = int(cand[np.argmax(count[cand])])
    frac = 0.0
    if 0 < k < msd.size - 1 and np.isfinite(msd[k - 1]) and np.isfinite(msd[k + 1]):
        den = msd[k - 1] - 2 * msd[k] + msd[k + 1]
        if den > 0:
            frac = float(np.clip(0.5 * (msd[k - 1] - msd[k + 1]) / den, -0.5, 0.5))
    shift = ta0 - tb0 + (lags[k] + frac) / fs
    res = scipy.optimize.minimize_scalar(lambda s: float(np.sum(_mismatch(loaded, unloaded, s)[0])),
                                         bounds=(shift - 1.0 / fs, shift + 1.0 / fs), method="bounded",
                                         options={"xatol": 1e-5})
    return float(res.x) if res.fun <= np.sum(_mismatch(loaded, unloaded, shift)[0]) else float(shift)


def _valid_mask(t_src: np.ndarray, at: np.ndarray, max_gap: float) -> np.ndarray:
    """True where ``at`` lies inside ``t_src`` and not inside a step longer than the gap limit."""
    med = float(np.median(np.diff(t_src)))
    limit = max(max_gap, GAP_FACTOR * med)
    j = np.searchsorted(t_src, at)
    inside = (at >= t_src[0]) & (at <= t_src[-1])
    jj = np.clip(j, 1, t_src.size - 1)
    step = t_src[jj] - t_src[jj - 1]
    exact = np.isin(at, t_src)
    return inside & ((step <= limit) | exact)


def _interp(samples: Samples, at: np.ndarray, t_src: np.ndarray) -> dict:
    def f(x):
        return None if x is None else np.column_stack([np.interp(at, t_src, x[:, j]) for j in range(x.shape[1])])

    return {"q": f(samples.q), "tau": f(samples.tau), "dq": f(samples.dq)}


def align_recordings(loaded: Samples, unloaded: Samples, rate: float | None = None, max_gap: float = MAX_GAP,
                     max_mismatch: float = MAX_MISMATCH, min_overlap: float = MIN_OVERLAP,
                     shift: float | None = None) -> Alignment:
    """Line ``unloaded`` up with ``loaded`` (:func:`find_time_shift`, or the given ``shift`` s) and
    resample both on one grid over their common span: the loaded recording's grid at ``rate`` Hz (default
    its median rate; :func:`.recording.resample`), the unloaded one interpolated at the same instants.
    Samples inside a gap (> ``max_gap`` s) of either recording are left out of both. Recorded
    velocities are kept only when both recordings have them.

    Raises :class:`AlignmentError` when the RMS position difference after alignment exceeds
    ``max_mismatch`` rad (not the same motion) or the overlap is shorter than ``min_overlap`` of the
    shorter recording.
    """
    tl = _stamped(loaded, "loaded recording")
    tu = _stamped(unloaded, "unloaded recording")
    if shift is None:
        shift = find_time_shift(loaded, unloaded, None, min_overlap)
    start, end = max(tl[0], tu[0] + shift), min(tl[-1], tu[-1] + shift)
    shorter = min(tl[-1] - tl[0], tu[-1] - tu[0])
    if not end - start >= min_overlap * shorter or end <= start:
        raise AlignmentError(
            f"the recordings share only {max(0.0, end - start):.3f} s after a shift of {shift:+.3f} s (less than "
            f"{min_overlap:.0%} of the shorter one, {shorter:.3f} s): record the same motion for both runs")
    inside = (tl >= start) & (tl <= end)
    if inside.sum() < 4:
        raise AlignmentError("fewer than 4 loaded samples lie in the common span of the two recordings")
    both_dq = loaded.dq is not None and unloaded.dq is not None
    lsub = loaded.subset(inside)
    if not both_dq:
        lsub = replace(lsub, dq=None)
    res = resample(lsub, rate, max_gap)
    fs = res.rate
    ts, parts_l, parts_u = [], [], []
    for seg in res.segments:
        ok = _valid_mask(tu + shift, seg.t, max_gap) & _valid_mask(lsub.t, seg.t, max_gap)
        if ok.sum() < 2:
            continue
        g = seg.t[ok]
        ts.append(g)
        parts_l.append({"q": seg.q[ok], "tau": seg.tau[ok], "dq": None if seg.dq is None else seg.dq[ok]})
        parts_u.append(_interp(unloaded if both_dq else replace(unloaded, dq=None), g, tu + shift))
    if not ts:
        raise AlignmentError("no common stretch of the two recordings is free of gaps")
    t = np.concatenate(ts)

    def cat(parts, key):
        return None if parts[0][key] is None else np.concatenate([p[key] for p in parts])

    names = loaded.joint_names
    al = Samples(cat(parts_l, "q"), cat(parts_l, "tau"), cat(parts_l, "dq"), None, t, names)
    au = Samples(cat(parts_u, "q"), cat(parts_u, "tau"), cat(parts_u, "dq"), None, t, names)
    rms = np.sqrt(np.mean((al.q - au.q) ** 2, axis=0))
    out = Alignment(float(shift), float(t[0]), float(t[-1]), fs, rms, al, au, names)
    if out.mismatch > max_mismatch:
        raise AlignmentError(
            f"the loaded and unloaded recordings are not the same motion: after the best time shift "
            f"({shift:+.3f} s) their joint positions still differ by RMS {out.mismatch:.3g} rad (worst joint "
            f"{names[int(np.argmax(rms))]} {rms.max():.3g} rad; limit {max_mismatch:g} rad). Record the unloaded run "
            "with the same trajectory (any start time), or raise --max-mismatch if the tracking differs this much")
    return out


# ------------------------------------------------------------------------------- the whole estimate

@dataclass(frozen=True)
class PayloadOptions:
    """How recordings become a payload estimate.

    ``cutoff`` Hz / ``order``: zero-phase Butterworth low-pass of q and tau before differentiation
    (motions); ``velocity``: "auto" (recorded dq when present), "positions" or "recorded";
    ``rate``/``max_gap``: resampling (Hz, s); ``max_speed`` rad/s: a recording whose joints all stay
    slower counts as static captures; ``motion``: treat it as a motion regardless; ``max_mismatch``
    rad / ``min_overlap``: alignment limits; ``transport``: move the unloaded torque to the loaded run's
    states with the robot model (first-order correction of the residual tracking difference);
    ``offsets``: fit joint-torque offsets (static one-shot only); ``inertia_rsd``: see
    :data:`.payload_motion.INERTIA_RSD`; ``limits``: plausibility limits. Static captures against a model:
    its error enters σ (:mod:`.model_uncertainty`): an identified model's covariance, else the nominal
    description's declared ``model_uncertainty`` (relative, 1 σ) and ``torque_offset_std`` (N m).
    """

    cutoff: float = 6.0
    order: int = 4
    velocity: str = "auto"
    rate: float | None = None
    max_gap: float = MAX_GAP
    max_speed: float = 0.02
    motion: bool = False
    max_mismatch: float = MAX_MISMATCH
    min_overlap: float = MIN_OVERLAP
    transport: bool = True
    offsets: bool = False
    inertia_rsd: float = INERTIA_RSD
    limits: PayloadLimits = field(default_factory=PayloadLimits)
    model_uncertainty: float = DATASHEET_RELATIVE
    torque_offset_std: float = 0.5


@dataclass(frozen=True)
class PayloadResult:
    """An estimate and how it was obtained: ``kind`` "static" or "motion"; ``reference`` what the
    unloaded torque came from; ``lines`` what was done, in words; ``alignment`` of two runs, if any."""

    estimate: PayloadEstimate
    kind: str
    reference: str
    lines: tuple[str, ...] = ()
    alignment: Alignment | None = None

    def to_dict(self) -> dict:
        d = self.estimate.to_dict()
        d["kind"] = self.kind
        d["reference"] = self.reference
        d["processing"] = list(self.lines)
        d["alignment"] = None if self.alignment is None else self.alignment.to_dict()
        return d


def is_motion(samples: Samples, max_speed: float) -> bool:
    """True when ``samples`` are a stream (time stamps, or dq and ddq columns) in which some joint moves
    faster than ``max_speed`` rad/s (recorded dq, else positions over time stamps); captures without time
    stamps are static captures (a moving one is refused as such)."""
    if samples.t is None and samples.ddq is None:
        return False
    if samples.dq is not None:
        return bool(np.any(np.abs(samples.dq) > max_speed))
    if samples.t is None:
        return False
    return bool(np.any(position_speeds(samples)[0] > max_speed))


def _stream(samples: Samples) -> bool:
    """Time-stamped samples logged as a stream (median step below data.STREAM_MAX_STEP), not captures."""
    return samples.t is not None and samples.n_samples >= 4 and stamp_report(samples.t).median_step <= STREAM_MAX_STEP


def _model_reference(model, dyn: RigidBodyDynamics, q, dq=None, ddq=None) -> np.ndarray:
    if getattr(model, "kind", "full") == "gravity":
        if dq is not None and np.any(np.abs(dq) > 0):
            raise SampleDataError("a gravity-only model (identify --gravity-only) cannot predict the torques of a "
                                  "motion: give static captures, or a model identified from a motion")
        return np.asarray(model.predict(dyn, q), float)
    z = np.zeros_like(q)
    return np.asarray(model.predict(dyn, q, z if dq is None else dq, z if ddq is None else ddq), float)


def _coulomb_weights(model, dq: np.ndarray) -> np.ndarray | None:
    """Zero weight on joint rows slower than COULOMB_MIN_SPEED when the model has Coulomb friction."""
    coulomb = False
    if hasattr(model, "friction_terms"):
        coulomb = bool(getattr(model, "coulomb", False))
    elif hasattr(model, "friction"):
        coulomb = bool(np.any(np.asarray(model.friction.coulomb) != 0))
    if not coulomb:
        return None
    return np.where(near_zero_velocity_mask(dq, COULOMB_MIN_SPEED), 0.0, 1.0)


def _inverse_dynamics(dyn: RigidBodyDynamics, pre: Preprocessed) -> np.ndarray:
    return np.array([dyn.inverse_dynamics(a, b, c) for a, b, c in zip(pre.q, pre.dq, pre.ddq)])


def _preprocess(samples: Samples, opt: PayloadOptions, rate: float | None = None) -> Preprocessed:
    velocity = opt.velocity if samples.dq is not None or opt.velocity != "auto" else "positions"
    return preprocess_filtered(samples, opt.cutoff, opt.order, velocity, rate if rate is not None else opt.rate,
                               opt.max_gap)


def estimate_payload_recordings(dyn: RigidBodyDynamics, loaded: Samples, unloaded: Samples | None = None,
                                model=None, options: PayloadOptions | None = None,
                                model_label: str = "model") -> PayloadResult:
    """Payload from a loaded recording and one reference: an ``unloaded`` recording of the same poses
    or motion (differential), a torque ``model`` with its friction and offsets (anything with
    ``predict(dyn, q, dq, ddq)``, e.g. :func:`.torque_models.load_torque_model`), or neither (the
    nominal description of ``dyn``, one-shot).

    Static captures (no joint faster than ``options.max_speed``) give mass and CoM from gravity; a
    motion gives mass, CoM and, where determined, the inertia (:func:`.payload_motion.estimate_payload_motion`):
    two runs are aligned first (:func:`align_recordings`), velocities and accelerations derived when
    not recorded. Errors are exceptions naming what to do.
    """
    opt = options if options is not None else PayloadOptions()
    if unloaded is not None and model is not None:
        raise SampleDataError("give either an unloaded recording or a model as the reference, not both")
    ref = "unloaded recording" if unloaded is not None else (model_label if model is not None else "nominal model")
    moving = opt.motion or is_motion(loaded, opt.max_speed) or (unloaded is not None
                                                                and is_motion(unloaded, opt.max_speed))
    if not moving and unloaded is not None and unloaded.n_samples != loaded.n_samples and _stream(loaded) \
            and _stream(unloaded):
        moving = True  # two logged streams of different length cannot be paired row by row: align them in time
    if not moving:
        return _static(dyn, loaded, unloaded, model, opt, ref)
    if opt.offsets:
        raise SampleDataError("--offsets applies to static captures; in a motion, offsets cancel against an unloaded "
                              "run or come with the model (identify --friction ...+offset)")
    lines: list[str] = []
    alignment = None
    if loaded.t is None:
        if loaded.dq is None or loaded.ddq is None:
            raise SampleDataError("a motion needs time stamps (CSV column 't' or the bag's stamps) to derive "
                                  "velocities and accelerations, or dq1.., ddq1.. columns")
        q, dq, ddq, tau = loaded.q, loaded.dq, loaded.ddq, loaded.tau
        lines.append(f"{loaded.n_samples} samples with recorded dq and ddq, used as they are (no time stamps)")
        if unloaded is not None:
            if unloaded.n_samples != loaded.n_samples or unloaded.dq is None or unloaded.ddq is None:
                raise SampleDataError("without time stamps the unloaded samples must match the loaded ones row by "
                                      "row (same count, with dq and ddq columns)")
            reference = unloaded.tau
        elif model is not None:
            reference = _model_reference(model, dyn, q, dq, ddq)
        else:
            reference = np.array([dyn.inverse_dynamics(a, b, c) for a, b, c in zip(q, dq, ddq)])
        weights = _coulomb_weights(model, dq) if model is not None else None
    elif unloaded is not None:
        alignment = align_recordings(loaded, unloaded, opt.rate, opt.max_gap, opt.max_mismatch, opt.min_overlap)
        lines.append(alignment.describe())
        pre_l = _preprocess(alignment.loaded, opt, alignment.rate)
        pre_u = _preprocess(alignment.unloaded, opt, alignment.rate)
        if pre_l.t.shape != pre_u.t.shape or not np.allclose(pre_l.t, pre_u.t, atol=1e-9):
            raise AlignmentError("the aligned recordings were filtered onto different grids (internal error)")
        lines.append("preprocessing (both runs alike): " + pre_l.describe())
        q, dq, ddq, tau = pre_l.q, pre_l.dq, pre_l.ddq, pre_l.tau
        reference = pre_u.tau
        if opt.transport:
            reference = reference + _inverse_dynamics(dyn, pre_l) - _inverse_dynamics(dyn, pre_u)
            lines.append("unloaded torque moved to the loaded run's q, dq, ddq with the robot model "
                         "(first-order correction of the remaining tracking difference)")
        weights = None
    else:
        pre = _preprocess(loaded, opt)
        lines.append("preprocessing: " + pre.describe())
        q, dq, ddq, tau = pre.q, pre.dq, pre.ddq, pre.tau
        if model is not None:
            reference = _model_reference(model, dyn, q, dq, ddq)
            weights = _coulomb_weights(model, dq)
            lines.append(f"unloaded torque predicted by {model_label} (rigid body, friction and offsets)"
                         + ("; joint rows slower than 0.02 rad/s left out (Coulomb friction)"
                            if weights is not None else ""))
        else:
            reference = _inverse_dynamics(dyn, pre)
            weights = None
            lines.append("unloaded torque from the nominal description (no friction): use an unloaded recording "
                         "or --model for real drives")
    how = "differential" if unloaded is not None else ("model" if model is not None else "one-shot")
    unc = None if unloaded is not None else _reference_uncertainty(dyn, model, opt, ref)
    est = estimate_payload_motion(dyn, q, dq, ddq, tau - reference, weights=weights, method=f"motion {how}",
                                  limits=opt.limits, inertia_rsd=opt.inertia_rsd, model_uncertainty=unc)
    return PayloadResult(est, "motion", ref, tuple(lines), alignment)


def _reference_uncertainty(dyn: RigidBodyDynamics, model, opt: PayloadOptions, label: str) -> ModelUncertainty:
    """How wrong the reference model may be: an identified model's covariance, else the nominal
    description's declared ``opt.model_uncertainty``; offsets the model did not fit (and the fit does
    not estimate) are declared as ``opt.torque_offset_std``."""
    fitted = opt.offsets or bool(getattr(model, "offset", False))
    offsets = 0.0 if fitted else opt.torque_offset_std
    if model is not None and getattr(model, "covariance", None) is not None:
        return identified_uncertainty(dyn, model, label, offsets)
    return declared_uncertainty(dyn, opt.model_uncertainty, offsets)


def _static(dyn, loaded: Samples, unloaded: Samples | None, model, opt: PayloadOptions, ref: str) -> PayloadResult:
    check_static(loaded, opt.max_speed)
    if unloaded is not None:
        check_static(unloaded, opt.max_speed)
    lines = [f"static captures: every joint slower than {opt.max_speed:g} rad/s in {loaded.n_samples} samples"]
    if unloaded is not None:
        if unloaded.n_samples != loaded.n_samples:
            raise SampleDataError(
                f"static captures: {unloaded.n_samples} unloaded samples for {loaded.n_samples} loaded ones; the "
                "differential method compares the same poses row by row -- capture the unloaded arm at the same "
                "poses in the same order, or record both runs as one motion (they are then aligned in time)")
        gap = float(np.abs(unloaded.q - loaded.q).max())
        if gap > 1e-2:
            raise SampleDataError(f"static captures: unloaded poses differ from the loaded ones by up to {gap:.3g} "
                                  "rad; capture both at the same poses in the same order")
        est = estimate_payload_gravity(dyn, loaded.q, loaded.tau, unloaded.tau, limits=opt.limits)
    elif model is not None:
        # the model's prediction at rest plays the part of the measured unloaded torque
        unc = _reference_uncertainty(dyn, model, opt, ref)
        est = estimate_payload_gravity(dyn, loaded.q, loaded.tau, None, "one-shot", estimate_offsets=opt.offsets,
                                       limits=opt.limits, model_uncertainty=unc,
                                       unloaded_gravity=lambda qk: _model_reference(model, dyn, qk[None])[0])
        est = replace(est, method=est.method.replace("one-shot", "against the model"))
        lines.append(f"unloaded torque at rest predicted by {ref} (gravity and offsets)")
    else:
        unc = _reference_uncertainty(dyn, None, opt, ref)
        est = estimate_payload_gravity(dyn, loaded.q, loaded.tau, None, estimate_offsets=opt.offsets,
                                       limits=opt.limits, model_uncertainty=unc)
    return PayloadResult(est, "static", ref, tuple(lines))


__all__ = [
    "CURRENT_WARNING",
    "MAX_MISMATCH",
    "MIN_OVERLAP",
    "Alignment",
    "AlignmentError",
    "PayloadOptions",
    "PayloadResult",
    "align_recordings",
    "apply_torque_gain",
    "effort_to_torque",
    "estimate_payload_recordings",
    "find_time_shift",
    "is_motion",
    "torque_gains",
]
