"""One value per joint: scalars broadcast, vectors checked (gains, friction, noise, ...)."""

from __future__ import annotations

import numpy as np


def per_joint(value, n: int, what: str, *, positive: bool = False, nonnegative: bool = False,
              error: type[Exception] = ValueError) -> np.ndarray:
    """``value`` as an (n,) float array: a scalar (or one-element list) broadcast, else exactly n values.

    Raises ``error`` naming ``what`` on a wrong length, a non-finite value, or a sign violation.
    """
    arr = np.atleast_1d(np.asarray(value, dtype=float))
    if arr.size == 1:
        arr = np.full(n, arr.item())
    if arr.shape != (n,):
        raise error(f"{what} must be a scalar or {n} values (one per joint), got {arr.size}")
    if not np.all(np.isfinite(arr)):
        raise error(f"{what} must be finite, got {arr.tolist()}")
    if positive and np.any(arr <= 0):
        raise error(f"{what} must be > 0 for every joint, got {arr.tolist()}")
    if nonnegative and np.any(arr < 0):
        raise error(f"{what} must be >= 0 for every joint, got {arr.tolist()}")
    return arr
