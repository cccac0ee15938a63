"""Momentum-observer collision detection: residual, thresholds and isolation, stop/resume reaction."""

from .detector import CollisionDetector, CollisionEvent, DetectorInputError, isolate_link
from .observer import JointFriction, MomentumObserver, ObserverInputError, make_friction
from .reaction import POLICIES, Action, ReactionPolicyError, ReactionState, ReactionStateMachine

__all__ = [
    "Action",
    "CollisionDetector",
    "CollisionEvent",
    "DetectorInputError",
    "JointFriction",
    "MomentumObserver",
    "ObserverInputError",
    "POLICIES",
    "ReactionPolicyError",
    "ReactionState",
    "ReactionStateMachine",
    "isolate_link",
    "make_friction",
]
