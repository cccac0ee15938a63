"""The on-disk cache of derived symbolic coefficients.

Entries live in ``$PAYLOAD_ESTIMATION_CACHE`` or ``~/.cache/payload_estimation`` as pickles of sympy
matrices (a cache is code-trusting like ``__pycache__``: keep it in a directory only you can write),
keyed by a hash of the kinematics, gravity, payload frame, kind, sympy version and
:data:`SYMBOLIC_VERSION`; an unreadable entry is ignored (and re-derived by the caller), an
unwritable directory only logged. Inertias are not part of the key: the coefficients are symbolic in them.
"""

from __future__ import annotations

import hashlib
import logging
import os
import pickle
import tempfile
from pathlib import Path

import numpy as np
import sympy as sp

from .description import RobotDescription

log = logging.getLogger(__name__)

SYMBOLIC_VERSION = 2  # 2: base columns from model.base_parameters


def cache_dir() -> Path:
    """``$PAYLOAD_ESTIMATION_CACHE`` or ``$XDG_CACHE_HOME/payload_estimation`` (~/.cache/...)."""
    env = os.environ.get("PAYLOAD_ESTIMATION_CACHE")
    if env:
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "payload_estimation"


def cache_key(desc: RobotDescription, kind: str) -> str:
    """Hash of everything the derivation depends on (kinematics, gravity, payload frame, versions)."""
    h = hashlib.sha256()
    h.update(f"v{SYMBOLIC_VERSION};sympy{sp.__version__};{kind};n{desc.n};".encode())
    for j in desc.joints:
        for a in (j.pre, j.axis, j.post):
            h.update(np.ascontiguousarray(np.asarray(a, dtype=np.float64)).tobytes())
    for a in (desc.gravity, desc.payload_frame):
        h.update(np.ascontiguousarray(np.asarray(a, dtype=np.float64)).tobytes())
    # the base columns are decided on samples within the joint limits
    h.update(np.ascontiguousarray(desc.limits.position, dtype=np.float64).tobytes())
    return h.hexdigest()[:32]


def read_entry(path: Path) -> dict | None:
    """The cached dict at ``path``, or None when there is none or it cannot be read (logged)."""
    if not path.is_file():
        return None
    try:
        with path.open("rb") as fh:
            d = pickle.load(fh)
    except (OSError, ValueError, EOFError, AttributeError, pickle.UnpicklingError) as exc:
        log.warning("ignoring unreadable symbolic cache %s (re-deriving): %s", path, exc)
        return None
    if not isinstance(d, dict) or d.get("version") != SYMBOLIC_VERSION or d.get("sympy") != sp.__version__:
        log.warning("ignoring symbolic cache %s of another version (re-deriving)", path)
        return None
    return d


def write_entry(path: Path, data: dict) -> None:
    """Store ``data`` (with this version's tags) at ``path`` atomically; failures are logged only."""
    data = {**data, "version": SYMBOLIC_VERSION, "sympy": sp.__version__}
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=".pickle")
        with os.fdopen(fd, "wb") as fh:
            pickle.dump(data, fh, protocol=pickle.HIGHEST_PROTOCOL)
        os.replace(tmp, path)
    except OSError as exc:  # a read-only home must not break the derivation
        log.warning("cannot write the symbolic cache %s: %s", path, exc)


__all__ = ["SYMBOLIC_VERSION", "cache_dir", "cache_key", "read_entry", "write_entry"]
