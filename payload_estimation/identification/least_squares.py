"""Weighted linear least squares with the statistics used throughout identification.

For stacked equations  tau = Y p + e  (N rows, r parameters) with weights W = diag(w):

    p_hat   = (Y^T W Y)^-1 Y^T W tau
    sigma^2 = ||sqrt(W) (tau - Y p_hat)||^2 / (N - r)          (unbiased; N = rows with w > 0)
    cov     = sigma^2 (Y^T W Y)^-1                              (paper 001, eq. 8 of paper 003)
    RSD_i   = 100 std_i / |p_i|   (%)                           (paper 003, eq. 7)

Rows are stacked sample by sample, joint by joint inside a sample (paper 001):
row ``k n + j`` is joint ``j`` of sample ``k`` (:func:`stack_rows`).
With weights, sigma^2 is the variance of the *weighted* residual; when w_j = 1/s_j^2 with the
true per-row noise variance s_j^2, sigma^2 ~ 1 and cov ~ (Y^T W Y)^-1 (Gauss-Markov).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import scipy.linalg

from ..errors import PayloadEstimationError


class LeastSquaresError(PayloadEstimationError):
    """Bad least-squares input: shape mismatch, non-finite values, rank deficiency."""


class RankDeficientError(LeastSquaresError):
    """The regressor does not determine every parameter; ``columns`` names the culprits."""

    def __init__(self, message: str, columns: tuple[str, ...]):
        super().__init__(message)
        self.columns = columns


@dataclass(frozen=True)
class LSResult:
    """Result of :func:`solve_least_squares`.

    params (r,), std (r,) and covariance (r x r) in the parameters' units; rsd (r,) in % (inf for a
    zero parameter); residual_rms: RMS of the unweighted residual tau - Y p (torque units);
    condition_number: 2-norm condition number of the (weighted) regressor; sigma2: estimated
    variance of the (weighted) residual; n_rows: number of equations N.
    """

    params: np.ndarray
    std: np.ndarray
    rsd: np.ndarray
    covariance: np.ndarray
    residual_rms: float
    condition_number: float
    names: tuple[str, ...]
    n_rows: int
    sigma2: float

    def as_dict(self) -> dict[str, float]:
        """Parameter values by name."""
        return {n: float(v) for n, v in zip(self.names, self.params)}


def _names(names: Sequence[str] | None, r: int) -> tuple[str, ...]:
    if names is None:
        return tuple(f"p{i}" for i in range(r))
    names = tuple(str(n) for n in names)
    if len(names) != r:
        raise LeastSquaresError(f"{len(names)} parameter names given for {r} regressor columns")
    return names


def _check_finite(a: np.ndarray, what: str) -> None:
    bad = ~np.isfinite(a)
    if bad.any():
        idx = np.argwhere(bad)[0]
        where = f"row {idx[0]}" + (f", column {idx[1]}" if a.ndim == 2 else "")
        raise LeastSquaresError(f"{what} contains NaN/inf ({int(bad.sum())} entries, first at {where})")


def _validate(y, tau, weights):
    y = np.asarray(y, dtype=float)
    tau = np.asarray(tau, dtype=float)
    if y.ndim != 2:
        raise LeastSquaresError(f"regressor Y must be 2-D (rows x parameters), got shape {y.shape}")
    if tau.ndim == 2 and tau.shape[1] == 1:
        tau = tau[:, 0]
    if tau.ndim != 1:
        raise LeastSquaresError(f"tau must be 1-D (stacked rows), got shape {tau.shape}")
    if tau.shape[0] != y.shape[0]:
        raise LeastSquaresError(f"Y has {y.shape[0]} rows but tau has {tau.shape[0]}")
    _check_finite(y, "regressor Y")
    _check_finite(tau, "tau")
    w = None
    if weights is not None:
        w = np.asarray(weights, dtype=float).reshape(-1)
        if w.shape[0] != y.shape[0]:
            raise LeastSquaresError(f"{w.shape[0]} weights given for {y.shape[0]} rows")
        _check_finite(w, "weights")
        if (w < 0).any():
            raise LeastSquaresError(f"weights must be >= 0 (row {int(np.argmax(w < 0))} is negative)")
    return y, tau, w


def full_rank_columns(Y: np.ndarray, rtol: float = 1e-8) -> np.ndarray:
    """Sorted indices of a maximal linearly independent set of columns of ``Y``.

    Columns are scaled to unit norm, then a column-pivoted QR picks them greedily (the pruning of
    paper 000 Sec. II: unidentifiable columns and those spanned by others are dropped). Zero columns
    are never selected. ``rtol`` is relative to the largest pivot.
    """
    y = np.asarray(Y, dtype=float)
    if y.ndim != 2:
        raise LeastSquaresError(f"Y must be 2-D, got shape {y.shape}")
    _check_finite(y, "regressor Y")
    if y.shape[1] == 0:
        return np.zeros(0, dtype=int)
    norms = np.linalg.norm(y, axis=0)
    scale = max(norms.max(), np.finfo(float).tiny)
    nonzero = norms > rtol * scale
    if not nonzero.any():
        return np.zeros(0, dtype=int)
    ys = np.where(nonzero, y / np.where(nonzero, norms, 1.0), 0.0)
    _, r, piv = scipy.linalg.qr(ys, mode="economic", pivoting=True)
    diag = np.abs(np.diag(r))
    rank = int(np.sum(diag > rtol * diag[0])) if diag.size else 0
    return np.sort(piv[:rank]).astype(int)


def solve_least_squares(Y: np.ndarray, tau: np.ndarray, weights: np.ndarray | None = None,
                        names: Sequence[str] | None = None, rtol: float = 1e-8) -> LSResult:
    """(Weighted) least-squares fit of ``tau ~ Y p`` with covariance and RSD (module docstring).

    Raises :class:`LeastSquaresError` on shape mismatch, NaN/inf or N <= r, and
    :class:`RankDeficientError` naming the columns that are not determined by the data.
    """
    y, tau, w = _validate(Y, tau, weights)
    n_rows, r = y.shape
    nm = _names(names, r)
    if r == 0:
        raise LeastSquaresError("regressor Y has no columns")
    n_eff = int(np.count_nonzero(w)) if w is not None else n_rows  # zero-weight rows carry no information
    if n_eff <= r:
        raise LeastSquaresError(
            f"need more equations than parameters: {n_eff} rows (with non-zero weight) for {r} parameters"
        )
    sw = np.sqrt(w) if w is not None else None
    yw = y * sw[:, None] if sw is not None else y
    tw = tau * sw if sw is not None else tau
    keep = full_rank_columns(yw, rtol)
    if keep.size < r:
        missing = tuple(nm[i] for i in np.setdiff1d(np.arange(r), keep))
        raise RankDeficientError(
            f"regressor is rank deficient (rank {keep.size} < {r} parameters): the data do not "
            f"determine {', '.join(missing)} (zero or linearly dependent columns); add more varied "
            "poses/motions or remove these parameters",
            missing,
        )
    # Column scaling for numerical robustness, QR solve via SVD.
    norms = np.linalg.norm(yw, axis=0)
    ys = yw / norms
    u, s, vt = np.linalg.svd(ys, full_matrices=False)
    cond = float(s[0] / s[-1]) if s[-1] > 0 else float("inf")
    if not np.isfinite(cond) or s[-1] <= rtol * s[0]:
        raise RankDeficientError(f"regressor is numerically rank deficient (condition number {cond:.3g})", nm)
    ps = vt.T @ ((u.T @ tw) / s)
    params = ps / norms
    resid_w = tw - yw @ params
    sigma2 = float(resid_w @ resid_w) / (n_eff - r)
    inv_s = (vt.T / s) / norms[:, None]  # (Y^T W Y)^-1 = inv_s @ inv_s.T
    cov = sigma2 * (inv_s @ inv_s.T)
    cov = 0.5 * (cov + cov.T)
    std = np.sqrt(np.clip(np.diag(cov), 0.0, None))
    with np.errstate(divide="ignore", invalid="ignore"):
        rsd = np.where(np.abs(params) > 0, 100.0 * std / np.abs(params), np.inf)
    resid = tau - y @ params
    cond_unscaled = float(np.linalg.cond(yw))
    return LSResult(
        params=params,
        std=std,
        rsd=rsd,
        covariance=cov,
        residual_rms=float(np.sqrt(np.mean(resid**2))),
        condition_number=cond_unscaled,
        names=nm,
        n_rows=int(n_rows),
        sigma2=sigma2,
    )


def essential_parameters(Y: np.ndarray, tau: np.ndarray, names: Sequence[str], min_abs: float | None = 0.01,
                         max_rsd: float = 40.0, weights: np.ndarray | None = None,
                         rtol: float = 1e-8) -> tuple[np.ndarray, LSResult]:
    """Essential parameters by iterative elimination (paper 003, eq. 7 and the text after it).

    Exact rule (the paper's): start from a full-rank column set (:func:`full_rank_columns`); fit;
    a parameter is *poorly identified* when its RSD exceeds ``max_rsd`` (%) **and** its magnitude
    is below ``min_abs`` (pass ``min_abs=None`` to use the RSD test alone); remove the poorly
    identified parameter with the largest RSD, refit, and repeat until none is poorly identified
    or one parameter is left. Returns the kept column indices (sorted, into the original ``Y``)
    and the final fit (its ``names`` are the kept ones).
    """
    y, tau_, w = _validate(Y, tau, weights)
    nm = _names(names, y.shape[1])
    yw = y * np.sqrt(w)[:, None] if w is not None else y
    kept = list(full_rank_columns(yw, rtol))
    if not kept:
        raise RankDeficientError("every regressor column is zero: no parameter can be identified", nm)
    while True:
        res = solve_least_squares(y[:, kept], tau_, w, [nm[i] for i in kept], rtol)
        bad = res.rsd > max_rsd
        if min_abs is not None:
            bad &= np.abs(res.params) < min_abs
        if not bad.any() or len(kept) == 1:
            return np.asarray(kept, dtype=int), res
        rsd = np.where(bad, res.rsd, -np.inf)
        del kept[int(np.argmax(rsd))]


def stack_rows(blocks: Sequence[np.ndarray]) -> np.ndarray:
    """Stack per-sample regressors (each n x p) row by row into (N n x p) (paper 001).

    Row ``k n + j`` is joint ``j`` of sample ``k``; stack the torques the same way with
    ``tau.reshape(-1)`` of an (N, n) array.
    """
    blocks = [np.asarray(b, dtype=float) for b in blocks]
    if not blocks:
        raise LeastSquaresError("no regressor blocks to stack")
    shape = blocks[0].shape
    for k, b in enumerate(blocks):
        if b.ndim != 2 or b.shape != shape:
            raise LeastSquaresError(f"regressor block {k} has shape {b.shape}, expected {shape}")
    return np.vstack(blocks)


FRICTION_TERMS = ("viscous", "coulomb", "offset")
"""Per-joint friction terms, in column order: viscous Fv dq, Coulomb Fc sign(dq), constant offset Fo."""


def friction_regressor(dq: np.ndarray, viscous: bool = True, coulomb: bool = True, offset: bool = False) -> np.ndarray:
    """Friction regressor (N n x k) stacked as :func:`stack_rows`:
    tau_f,j = Fv_j dq_j + Fc_j sign(dq_j) + Fo_j.

    Columns: (Fv_1..Fv_n) if viscous, then (Fc_1..Fc_n) if coulomb, then (Fo_1..Fo_n) if offset
    (a constant torque per joint: sensor offset or the asymmetry of Coulomb friction).
    """
    dq = np.asarray(dq, dtype=float)
    if dq.ndim != 2:
        raise LeastSquaresError(f"dq must be (N samples, n joints), got shape {dq.shape}")
    _check_finite(dq, "dq")
    n_s, n = dq.shape
    parts = []
    eye = np.eye(n)
    for on, f in ((viscous, dq), (coulomb, np.sign(dq)), (offset, np.ones_like(dq))):
        if on:
            parts.append((f[:, :, None] * eye[None]).reshape(n_s * n, n))
    if not parts:
        return np.zeros((n_s * n, 0))
    return np.hstack(parts)


def friction_names(n: int, viscous: bool = True, coulomb: bool = True, offset: bool = False) -> tuple[str, ...]:
    """Column names matching :func:`friction_regressor`."""
    out: list[str] = []
    for on, prefix in ((viscous, "Fv"), (coulomb, "Fc"), (offset, "Fo")):
        if on:
            out += [f"{prefix}{j + 1}" for j in range(n)]
    return tuple(out)


@dataclass(frozen=True)
class TorqueError:
    """Torque prediction error: per-joint RMS (N m), total RMS (N m), per-joint RMS relative to the
    RMS of the measured torque (dimensionless; inf for a joint with zero measured torque),
    per-joint maximum absolute error (N m)."""

    per_joint_rms: np.ndarray
    total_rms: float
    per_joint_relative: np.ndarray
    max_abs: np.ndarray


def torque_error(tau_measured: np.ndarray, tau_predicted: np.ndarray) -> TorqueError:
    """Compare measured and predicted torques, both (N samples, n joints)."""
    m = np.asarray(tau_measured, dtype=float)
    p = np.asarray(tau_predicted, dtype=float)
    if m.ndim != 2 or m.shape != p.shape:
        raise LeastSquaresError(f"measured {m.shape} and predicted {p.shape} torques must both be (N, n)")
    _check_finite(m, "measured torque")
    _check_finite(p, "predicted torque")
    e = m - p
    rms = np.sqrt(np.mean(e**2, axis=0))
    ref = np.sqrt(np.mean(m**2, axis=0))
    with np.errstate(divide="ignore", invalid="ignore"):
        rel = np.where(ref > 0, rms / ref, np.where(rms > 0, np.inf, 0.0))
    return TorqueError(rms, float(np.sqrt(np.mean(e**2))), rel, np.max(np.abs(e), axis=0))


__all__ = [
    "FRICTION_TERMS",
    "LSResult",
    "LeastSquaresError",
    "RankDeficientError",
    "TorqueError",
    "essential_parameters",
    "friction_names",
    "friction_regressor",
    "full_rank_columns",
    "solve_least_squares",
    "stack_rows",
    "torque_error",
]
