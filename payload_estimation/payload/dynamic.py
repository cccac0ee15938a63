"""The payload from one short excitation as the estimator receives it: a stream, not a clean recording.

:func:`estimate_payload_dynamic` takes the joint states recorded over the sampler's excitation (from rest
at the pick configuration back to rest there) and, when there is one, the same excitation recorded
before the grasp (the *reference* run), and returns all ten payload parameters where the motion
determines them (:func:`.payload_filtered.estimate_payload_filtered`: no accelerations, torque and
regressor filtered alike).

- The stream is taken as a driver sends it: uneven stamps and dropped samples are resampled onto a
  uniform grid of ``fit_rate`` Hz, each value the mean over its interval (a gap longer than
  ``max_gap`` is refused).
- The reference run is aligned to the loaded one on the measured positions (the two commands reach
  the controller at different instants); the torque of the small tracking difference between the
  runs is moved over with the model. Sensor offsets and the model's error cancel between the runs, but for
  the model's error in that torque: declared (``model_uncertainty`` of it) and fitted with the payload within
  that σ, so the data narrow it where they show it (the inertia's std, docs/bench/dynamic.md).
- Without a reference the fit is one-shot against the model, its error and the offsets in σ: honest
  but coarse (it is flagged by the estimator's precision check).
- Inertia components the motion did not determine are reported (``undetermined``) and the previous
  estimate's inertia is kept for them when it had one; none is guessed.
- A fit that does not fit says so (issue 46, :mod:`..signals.misfit`): the fit's residual is checked against what
  the noise model expects of it -- the sensor's per-sample noise ``torque_noise`` through the resampling's box mean
  and the filter (twice that for a differential fit: both runs' noise; plus the declared error of the model's torque
  of the tracking difference, fitted only after the residual is taken), plus, for a fit without reference, the
  declared model error's torque at rest along the motion (its error is propagated into σ, not fitted, so it stays in
  the residual). χ²/ν = rss / (ν σ_row²) with ν = rows - 10; above ``misfit_chi2`` (4, the online estimate's: the
  rows number thousands and the filtered noise model is approximate) the unexplained torque is taken as systematic
  and σ widened by what it can explain (the shared rule; the fit's σ already uses the residual's scatter, so v is
  that), and the estimate says it in words (:attr:`PayloadEstimate.misfit`).

Units: s, rad, rad/s, N m; payload frame as :mod:`.payload_result`.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from ..model.dynamics import RigidBodyDynamics
from ..signals.causal import causal_lowpass
from ..signals.misfit import MISFIT_CHI2, Misfit, check_misfit, misfit_sentence
from .estimate import PayloadEstimate
from .filtered import DEFAULT_CUTOFF, DEFAULT_ORDER, MomentumTerms, estimate_payload_filtered
from .model_uncertainty import declared_uncertainty
from .motion import INERTIA_RSD
from .result import (
    ICOM_NAMES,
    PayloadDataError,
    PayloadLimits,
    as_no_payload,
    effective_limits,
    is_no_payload,
    uncertainty_words,
)
from .run_terms import LoadedTerms, box_means, interp_rows, reference_terms

DYNAMIC_INERTIA_ADVICE = ("for the inertia, a longer excitation (payload_sampler excitation_duration, then "
                          "~/record_reference again) or a pick configuration where the excitation need not be "
                          "scaled down (its answer says when it was)")
"""The undetermined-inertia note's suggestion after a sampler excitation."""

ONSET = float(np.radians(0.05))
"""rad: a joint this far from where the recording started marks the start of the motion."""


@dataclass(frozen=True)
class MotionRecording:
    """Joint states over one excitation: stamps ``t`` (N,) s, ``q`` rad, ``dq`` rad/s, ``tau`` N m (N, n)."""

    t: np.ndarray
    q: np.ndarray
    dq: np.ndarray
    tau: np.ndarray

    @classmethod
    def from_rows(cls, rows: list[tuple[float, np.ndarray, np.ndarray, np.ndarray]]) -> MotionRecording:
        """From [(t, q, dq, tau)] as a node buffers them."""
        if not rows:
            raise PayloadDataError("nothing was recorded (no joint_states while recording)")
        return cls(np.array([r[0] for r in rows], float), np.array([r[1] for r in rows], float),
                   np.array([r[2] for r in rows], float), np.array([r[3] for r in rows], float))

    @property
    def duration(self) -> float:
        return float(self.t[-1] - self.t[0]) if self.t.size else 0.0

    def motion_span(self, threshold: float = ONSET) -> tuple[float, float]:
        """(start, end) s of the motion: the first sample farther than ``threshold`` rad from the first
        sample's position, and the last one farther than that from the last sample's (a loaded arm may
        come to rest a little off where it started)."""
        away = np.flatnonzero(np.max(np.abs(self.q - self.q[0]), axis=1) > threshold)
        if away.size == 0:
            raise PayloadDataError(f"the arm did not move during the {self.duration:.2f} s recording (no joint "
                                   f"left its start by {np.degrees(threshold):.2f} deg)")
        moving = np.flatnonzero(np.max(np.abs(self.q - self.q[-1]), axis=1) > threshold)
        return float(self.t[away[0]]), float(self.t[moving[-1]] if moving.size else self.t[-1])


@dataclass(frozen=True)
class DynamicFitConfig:
    """``fit_rate`` Hz of the resampled grid; ``cutoff`` Hz of the filtered form; ``max_gap`` s of
    stream allowed missing; ``inertia_rsd``: an
    inertia component counts as determined when its std is at most this fraction of the largest
    moment; ``model_uncertainty`` (relative) and ``torque_offset_std`` (N m): the model's error in σ
    of a fit without reference (and, relative, of the torque of the tracking difference a differential
    fit moves over with the model); ``limits``: plausibility checks; ``estimate_skew``: estimate and compensate
    a time skew between torques and joint states (:func:`.filtered.estimate_torque_skew`); ``torque_noise`` N m:
    the stream's per-sample torque noise (the online estimate's); ``misfit_chi2``: the fit's χ²/ν above which σ is
    widened and the estimate says the motion has torque the model does not explain (module docstring; inf: never)."""

    fit_rate: float = 250.0
    cutoff: float = DEFAULT_CUTOFF
    max_gap: float = 0.05
    inertia_rsd: float = INERTIA_RSD
    model_uncertainty: float = 0.05
    torque_offset_std: float = 0.5
    limits: PayloadLimits | None = None
    estimate_skew: bool = True
    torque_noise: float = 0.1
    misfit_chi2: float = MISFIT_CHI2


def check_recording(rec: MotionRecording, n: int, what: str, max_gap: float) -> MotionRecording:
    """``rec`` with repeated stamps dropped; PayloadDataError naming what is wrong (shape, NaN, stamps
    going back, a gap longer than ``max_gap`` s, fewer than 50 samples)."""
    for name in ("q", "dq", "tau"):
        a = getattr(rec, name)
        if a.ndim != 2 or a.shape != (rec.t.size, n):
            raise PayloadDataError(f"{what}: {name} has shape {a.shape}, expected ({rec.t.size}, {n})")
        if not np.all(np.isfinite(a)):
            raise PayloadDataError(f"{what}: {name} contains NaN or inf")
    dt = np.diff(rec.t)
    if np.any(dt < 0):
        k = int(np.argmax(dt < 0))
        raise PayloadDataError(f"{what}: stamps go back at sample {k + 1} ({rec.t[k + 1]:.4f} s after "
                               f"{rec.t[k]:.4f} s)")
    keep = np.concatenate([[True], dt > 0])
    rec = MotionRecording(rec.t[keep], rec.q[keep], rec.dq[keep], rec.tau[keep])
    if rec.t.size < 50:
        raise PayloadDataError(f"{what}: only {rec.t.size} samples recorded")
    gap = float(np.max(np.diff(rec.t)))
    if gap > max_gap:
        k = int(np.argmax(np.diff(rec.t)))
        raise PayloadDataError(f"{what}: the stream has a {1e3 * gap:.0f} ms gap at {rec.t[k] - rec.t[0]:.3f} s "
                               f"(more than {1e3 * max_gap:.0f} ms: the motion cannot be filtered across it)")
    return rec


def align_reference(loaded: MotionRecording, reference: MotionRecording, search: float = 0.025) -> float:
    """Shift s such that ``reference`` at t + shift moves like ``loaded`` at t (each relative to where it
    started): the motion onsets, then the least-squares match of the positions within ±``search`` s of
    that, to a fraction of a sample."""
    on_l, end_l = loaded.motion_span()
    on_r, _ = reference.motion_span()
    coarse = on_r - on_l
    t = loaded.t[(loaded.t >= on_l) & (loaded.t <= end_l)]
    dl = interp_rows(t, loaded.t, loaded.q) - loaded.q[0]

    def costs(shifts: np.ndarray) -> np.ndarray:
        """Summed squared position difference for each of ``shifts`` (interpolated together, ~10⁵ points at a
        time: one call per shift was a fifth of the fit the ``sample`` call waits for)."""
        out = []
        for part in np.array_split(shifts, max(1, shifts.size * t.size // 100_000)):
            tr = np.clip(t[None, :] + part[:, None], reference.t[0], reference.t[-1])
            d = interp_rows(tr.reshape(-1), reference.t, reference.q).reshape(part.size, t.size, -1)
            out.append(np.sum((d - reference.q[0] - dl) ** 2, axis=(1, 2)))
        return np.concatenate(out)

    sample = max(float(np.median(np.diff(loaded.t))), 4e-4)
    # one sample apart over the search window, then a quarter sample around the best, then a parabola
    shifts = coarse + np.arange(-search, search + sample / 2, sample)
    mid = shifts[int(np.argmin(costs(shifts)))]
    step = sample / 4
    shifts = mid + step * np.arange(-4, 5)
    c = costs(shifts)
    k = int(np.clip(np.argmin(c), 1, len(shifts) - 2))
    c0, c1, c2 = c[k - 1:k + 2]
    curv = c0 - 2 * c1 + c2
    best = shifts[k] + (0.5 * step * (c0 - c2) / curv if curv > 0 else 0.0)
    rms = np.sqrt(float(costs(np.array([best]))[0]) / dl.size)
    if rms > ONSET * 20:
        raise PayloadDataError(f"the reference run does not follow the same motion (positions differ by "
                               f"{np.degrees(rms):.2f} deg RMS after alignment): record the reference again at "
                               "this pick configuration")
    return float(best)


def estimate_payload_dynamic(dyn: RigidBodyDynamics, loaded: MotionRecording, reference: MotionRecording | None = None,
                             config: DynamicFitConfig | None = None, previous: PayloadEstimate | None = None, *,
                             loaded_terms: LoadedTerms | None = None,
                             reference_model: MomentumTerms | None = None) -> PayloadEstimate:
    """Payload (all ten parameters where determined) from the ``loaded`` excitation, differential
    against ``reference`` when given (module docstring); ``previous``: the estimate in use, whose
    inertia is kept when this motion does not determine it. ``loaded_terms``: the loaded run's model terms as
    far as they were computed while it was recorded; ``reference_model``: the reference's
    (:func:`.run_terms.reference_terms`, from its checked recording); both are computed here when not given or
    computed for another model. Raises PayloadDataError / PayloadRejected."""
    cfg = config or DynamicFitConfig()
    n = dyn.n
    loaded = check_recording(loaded, n, "loaded run", cfg.max_gap)
    step = 1.0 / cfg.fit_rate
    if reference is not None:
        reference = check_recording(reference, n, "reference run", cfg.max_gap)
        shift = align_reference(loaded, reference)
        t0 = max(loaded.t[0], reference.t[0] - shift)
        t1 = min(loaded.t[-1], reference.t[-1] - shift)
    else:
        shift, t0, t1 = 0.0, loaded.t[0], loaded.t[-1]
    start, end = loaded.motion_span()
    if t0 > start - 0.02 or t1 < end:
        raise PayloadDataError(f"the {'runs overlap' if reference is not None else 'recording covers'} "
                               f"{t0 - loaded.t[0]:.3f}..{t1 - loaded.t[0]:.3f} s but the motion spans "
                               f"{start - loaded.t[0]:.3f}..{end - loaded.t[0]:.3f} s: the recording must start at "
                               "rest before the motion and last until it ends")
    if loaded_terms is None or not loaded_terms.fits(dyn, step):
        loaded_terms = LoadedTerms(dyn, step)
    run = loaded_terms.finish(loaded)
    run = run.select((run.t >= t0 - 1e-9) & (run.t < t1))
    common = dict(cutoff=cfg.cutoff, limits=cfg.limits, inertia_rsd=cfg.inertia_rsd, own_scale=False, project=True,
                  inertia_advice=DYNAMIC_INERTIA_ADVICE, estimate_skew=cfg.estimate_skew, terms=run.terms)
    tr = run.t - run.t[0]
    if reference is not None:
        if reference_model is None or reference_model.h1.shape != reference.q.shape:
            reference_model = reference_terms(dyn, reference)
        ts = np.clip(run.t + shift, reference.t[0], reference.t[-1])
        tau_u, h1, h2 = (box_means(ts, step, reference.t, x) for x in (reference.tau, reference_model.h1,
                                                                        reference_model.h2))
        est = estimate_payload_filtered(dyn, tr, run.q, run.dq, run.tau, tau_u, reference_terms=MomentumTerms(h1, h2),
                                        tracking_uncertainty=cfg.model_uncertainty, **common)
        method = f"dynamic differential ({t1 - t0:.2f} s; {reference_phrase(shift)})"
    else:
        unc = declared_uncertainty(dyn, cfg.model_uncertainty, cfg.torque_offset_std)
        est = estimate_payload_filtered(dyn, tr, run.q, run.dq, run.tau, model_uncertainty=unc, **common)
        method = f"dynamic one-shot ({t1 - t0:.2f} s, no reference run)"
    if is_no_payload(est):  # nothing held: the fit's notes on the inertia of nothing do not apply
        return as_no_payload(est, method, effective_limits(cfg.limits, True).no_payload_below)
    row_var = filtered_noise_variance(cfg.torque_noise, float(np.median(np.diff(loaded.t))), step, cfg.cutoff)
    if reference is not None:  # the reference run's noise, and the tracking term's declared error (fitted within its
        # σ after the residual was taken: its expectation is part of what the residual may hold)
        tracking = (run.terms.filtered_torque(tr, cfg.cutoff, DEFAULT_ORDER)
                    - MomentumTerms(h1, h2).filtered_torque(tr, cfg.cutoff, DEFAULT_ORDER))
        row_var = 2.0 * row_var + cfg.model_uncertainty ** 2 * float(np.mean(tracking ** 2))
    else:  # the declared model error's torque stays in the residual (propagated into σ, not fitted)
        every = max(1, run.q.shape[0] // 50)
        row_var += float(np.mean([np.mean(unc.torque_std(qk) ** 2) for qk in run.q[::every]]))
    a = float(np.exp(-2 * np.pi * cfg.cutoff * step))
    est = with_misfit_check(est, run.q.shape[0] * n, row_var, cfg.misfit_chi2, (1 + a) / (1 - a))
    return keep_previous_inertia(replace(est, method=method), previous)


def filtered_noise_variance(torque_noise: float, sample_period: float, step: float, cutoff: float,
                            order: int = DEFAULT_ORDER) -> float:
    """Variance (N² m²) of one filtered row's noise: the stream's white torque noise ``torque_noise`` (N m per sample
    every ``sample_period`` s) averaged into boxes of ``step`` s (:func:`.run_terms.box_means`), then through the
    causal filter at ``cutoff`` Hz (the sum of its impulse response's squares on the ``step`` grid)."""
    per_box = torque_noise ** 2 * min(1.0, max(sample_period, 1e-9) / step)
    t = step * np.arange(int(20.0 / (cutoff * step)) + 2)
    impulse = np.zeros((t.size, 1))
    impulse[1] = 1.0  # after the first sample: the filter starts in steady state on its first input
    return per_box * float(np.sum(causal_lowpass(t, impulse, cutoff, order) ** 2))


def with_misfit_check(est: PayloadEstimate, rows: int, row_var: float, threshold: float,
                      correlation: float = 1.0) -> PayloadEstimate:
    """``est`` checked against its noise model (module docstring): as it is when the residual (``est.residual_rms``
    over ``rows`` rows) is what a noise of ``row_var`` N² m² per row explains; else every σ widened by what the
    misfit can explain (the covariance scaled, so the derived CoM's and inertia's σ scale alike) and the words in
    :attr:`PayloadEstimate.misfit` and the notes. ``correlation``: the filtered rows' serial correlation factor
    ((1 + a) / (1 - a) of the first-order filter, as the online estimate's); the fit's σ already scales its residual's
    variance by at least that (:func:`.motion.residual_correlation`), so v is the scatter times it."""
    rss = est.residual_rms ** 2 * rows
    fit_var = max(est.residual_rms ** 2, row_var) * correlation
    misfit = check_misfit(rss, rows, rows - 10, row_var, fit_var, threshold)
    if not misfit.flagged:
        return est
    widened = replace(est, std={k: v * misfit.widening for k, v in est.std.items()})
    words = dynamic_misfit_words(widened, misfit)
    return replace(widened, notes=widened.notes + (words,), misfit=words)


def dynamic_misfit_words(est: PayloadEstimate, misfit: Misfit) -> str:
    """What a user reads when the excitation's fit does not fit."""
    return misfit_sentence("the excitation has torque", misfit, uncertainty_words(est),
                           "Look for a torque or velocity signal filtered or delayed against the positions, friction "
                           "or elastic joints the model lacks, a payload that moved in the gripper, or a reference "
                           "run recorded under other conditions (~/record_reference again)")


def reference_phrase(shift: float) -> str:
    """How the reference run lies in time, for the method text: ``shift`` s (:func:`align_reference`) is
    where the reference run's motion starts relative to this one's -- the time between the two runs
    (negative: recorded before), not a misalignment."""
    when = f"{abs(shift):.1f} s {'before' if shift <= 0 else 'after'} this one"
    return f"reference run recorded {when} (in stamps), aligned on the joint positions"


def keep_previous_inertia(est: PayloadEstimate, previous: PayloadEstimate | None) -> PayloadEstimate:
    """``est`` with ``previous``'s inertia about the CoM when ``est`` left it undetermined (noted); as it
    is otherwise. The undetermined components stay listed."""
    if not any(nm in est.undetermined for nm in ICOM_NAMES):
        return est
    if previous is None or previous.inertia is None or previous.mass <= 0:
        return replace(est, notes=est.notes + ("no earlier inertia to keep: inertia left out (a point mass at the "
                                               "CoM for the collision monitor)",))
    return replace(est, inertia=np.array(previous.inertia, float),
                   notes=est.notes + (f"inertia kept from the previous estimate ({previous.method})",))


__all__ = ["DynamicFitConfig", "MotionRecording", "align_reference", "check_recording", "dynamic_misfit_words",
           "estimate_payload_dynamic", "filtered_noise_variance", "keep_previous_inertia", "reference_phrase",
           "with_misfit_check"]
