"""The package's one error base class.

Every error the package raises on purpose (bad input, a refused estimate, a malformed file, an unsafe
motion) derives from :class:`PayloadEstimationError`; its message says what happened in the user's
terms and what to do. Nodes and commands catch this class, so a programming error (a numpy shape bug,
a ``TypeError``) is not mistaken for bad input.
"""

from __future__ import annotations


class PayloadEstimationError(ValueError):
    """A refused input or result; the message names what was wrong and what is allowed."""


__all__ = ["PayloadEstimationError"]
