"""Momentum-observer collision detection: residual, thresholds, contact link/force/point, stop/resume reaction."""

from .contact import ContactConfig, ContactEstimate, ContactInputError, ContactLocator, ContactTracker
from .detector import CollisionDetector, CollisionEvent, DetectorInputError, calibrate_envelope, isolate_link
from .geometry import Capsule, LinkGeometry, capsule_geometry
from .monitor import CollisionMonitor, MonitorConfig, MonitorStep, replay
from .observer import JointFriction, MomentumObserver, ObserverInputError, make_friction
from .reaction import POLICIES, Action, ReactionPolicyError, ReactionState, ReactionStateMachine

__all__ = [
    "Action",
    "Capsule",
    "CollisionDetector",
    "CollisionEvent",
    "CollisionMonitor",
    "ContactConfig",
    "ContactEstimate",
    "ContactInputError",
    "ContactLocator",
    "ContactTracker",
    "DetectorInputError",
    "JointFriction",
    "LinkGeometry",
    "MomentumObserver",
    "MonitorConfig",
    "MonitorStep",
    "ObserverInputError",
    "POLICIES",
    "ReactionPolicyError",
    "ReactionState",
    "ReactionStateMachine",
    "calibrate_envelope",
    "capsule_geometry",
    "isolate_link",
    "make_friction",
    "replay",
]
