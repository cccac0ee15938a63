"""Momentum-observer collision detection: residual, thresholds, contact link/force/point, stop/resume
reaction, the provisional payload, the payload change after a grasp or release and a lost payload.
:class:`MonitorSupervisor` composes the collision monitor node's rules around them, one small class per job
(estimate gate, estimate σ, observer payload, loss gate, stop and resume, live calibration; the node translates).

:class:`CollisionMonitor` runs observer, detector and contact per sample; :func:`replay` runs it over
a recording; :func:`score_detections` compares its detections with known contacts.
"""

from ..lazy_api import lazy_api

# module -> the names it gives this folder's API (imported on first use: the observer pulls in pinocchio,
# the contact estimate scipy)
_API = {
    "contact": ("ContactConfig", "ContactEstimate", "ContactInputError", "ContactLocator", "ContactTracker"),
    "detector": ("CollisionDetector", "CollisionEvent", "DetectorInputError", "isolate_link"),
    "thresholds": ("CALIBRATION_GAP_FRACTION", "CONTACT_CHECK", "THRESHOLD_MINIMUM", "THRESHOLD_SAFETY",
                   "ObserverCoverage", "ThresholdCalibration", "ThresholdRecorder", "calibrate_envelope",
                   "calibrate_thresholds", "observer_coverage", "replay_too_short"),
    "geometry": ("Capsule", "LinkGeometry", "capsule_geometry", "push_point"),
    "monitor": ("CollisionMonitor", "MonitorConfig", "MonitorStep", "replay"),
    "observer": ("DEFAULT_GAIN", "MAX_GAIN_STEP", "gain_for_rate",
                 "JointFriction", "MomentumObserver", "ObserverInputError", "identified_friction", "make_friction"),
    "reaction": ("POLICIES", "Action", "ReactionConfig", "ReactionPolicyError", "ReactionState",
                 "ReactionStateMachine"),
    "stop_resume": ("Command", "Planner", "StopResume", "StopResumeConfig"),
    "estimate_gate": ("EstimateGate", "EstimateGateConfig", "EstimateRefused"),
    "estimate_sigma": ("EstimateSigma", "SigmaConfig"),
    "loss_gate": ("LossGate", "LossGateConfig"),
    "live_calibration": ("CalibrationConfig", "CalibrationRefused", "LiveCalibration"),
    "monitor_inputs": ("MonitorInputs",),
    "observer_payload": ("ObserverPayload", "ObserverPayloadConfig"),
    "provisional": ("ProvisionalFit", "ProvisionalPayload"),
    "payload_change": ("GRASP", "RELEASE", "PayloadWatch", "WatchConfig"),
    "scoring": ("score_detections", "time_above"),
    "supervisor": ("MonitorSupervisor", "SupervisorConfig", "SupervisorStep"),
    "payload_loss": ("LossConfig", "LossVerdict", "PayloadLossClassifier", "PayloadLossError"),
}
__all__, __getattr__, __dir__ = lazy_api(__name__, globals(), _API)
