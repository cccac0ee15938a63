"""Momentum-observer collision detection: residual, thresholds, contact link/force/point, stop/resume
reaction, the provisional payload, the payload change after a grasp or release and a lost payload.
:class:`MonitorSupervisor` holds the collision monitor node's rules around them (the node translates).

:class:`CollisionMonitor` runs observer, detector and contact per sample; :func:`replay` runs it over
a recording; :func:`score_detections` compares its detections with known contacts.
"""

from importlib import import_module

# module -> the names it gives this folder's API (imported on first use: the observer pulls in pinocchio,
# the contact estimate scipy)
_API = {
    "contact": ("ContactConfig", "ContactEstimate", "ContactInputError", "ContactLocator", "ContactTracker"),
    "detector": ("CollisionDetector", "CollisionEvent", "DetectorInputError", "calibrate_envelope", "isolate_link"),
    "geometry": ("Capsule", "LinkGeometry", "capsule_geometry", "push_point"),
    "monitor": ("CollisionMonitor", "MonitorConfig", "MonitorStep", "replay"),
    "observer": ("JointFriction", "MomentumObserver", "ObserverInputError", "identified_friction", "make_friction"),
    "reaction": ("POLICIES", "Action", "ReactionPolicyError", "ReactionState", "ReactionStateMachine"),
    "provisional": ("ProvisionalFit", "ProvisionalPayload"),
    "payload_change": ("GRASP", "RELEASE", "PayloadWatch", "WatchConfig"),
    "scoring": ("score_detections", "time_above"),
    "supervisor": ("EstimateRefused", "MonitorSupervisor", "SupervisorConfig", "SupervisorStep"),
    "payload_loss": ("LossConfig", "LossVerdict", "PayloadLossClassifier", "PayloadLossError"),
}
_MODULE = {name: module for module, names in _API.items() for name in names}
__all__ = sorted(_MODULE)


def __getattr__(name: str) -> object:
    """Import an API name from its module on first use (PEP 562): importing one module of the folder
    loads only what that module needs."""
    if name not in _MODULE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(f"{__name__}.{_MODULE[name]}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
