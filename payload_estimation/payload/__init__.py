"""Payload estimation: the :class:`PayloadEstimate` record and every fit that returns one.

Naming: ``estimate_payload_*`` returns a :class:`PayloadEstimate` — ``static`` (the estimator's static
fit: method choice, noise, model uncertainty), ``gravity`` / ``anchored`` / ``two_stage`` (poses at
rest, paper 000), ``motion`` / ``full`` / ``filtered`` (a motion), ``dynamic`` (one short excitation
as a stream), ``recordings`` (recorded runs as they are; it returns a :class:`PayloadResult`).
:class:`PayloadEstimator` is the estimator node's core (the node translates messages to its calls);
:class:`OnlinePayloadEstimator` estimates from whatever motion follows an announced grasp (optionally with the
gripper's :class:`ComPrior` on the CoM and the part's :class:`InertiaPrior`).
"""

from ..lazy_api import lazy_api

# module -> the names it gives this folder's API (imported on first use: the fits pull in pinocchio and
# scipy, the record does not)
_API = {
    "estimate": ("NO_PAYLOAD", "PayloadEstimate"),
    "result": ("ICOM_NAMES", "PAYLOAD_NAMES", "InertiaNotExcited", "PayloadDataError", "PayloadLimits",
               "PayloadRejected", "is_no_payload"),
    "static": ("STATIC_METHODS", "StaticFitConfig", "UnloadedModel", "estimate_payload_static",
               "load_unloaded_model", "precision_problem", "unloaded_model"),
    "gravity": ("estimate_payload_anchored", "estimate_payload_gravity", "estimate_payload_two_stage"),
    "motion": ("estimate_payload_full", "estimate_payload_motion"),
    "filtered": ("estimate_payload_filtered",),
    "dynamic": ("DynamicFitConfig", "MotionRecording", "check_recording", "estimate_payload_dynamic"),
    "recordings": ("CURRENT_WARNING", "PayloadOptions", "PayloadResult", "estimate_payload_recordings"),
    "model_uncertainty": ("ModelUncertainty", "declared_source", "declared_uncertainty", "identified_uncertainty"),
    "limits": ("check_payload",),
    "estimator": ("Answer", "EstimatorConfig", "PayloadEstimator"),
    "online": ("ComPrior", "InertiaPrior", "OnlineConfig", "OnlinePayloadEstimator", "OnlineStatus"),
}
__all__, __getattr__, __dir__ = lazy_api(__name__, globals(), _API)
