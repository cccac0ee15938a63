"""Identification of the unloaded robot: excitation design, preprocessing to regression rows, least
squares with friction, physically consistent link sets, the identified model and its validation.

Naming: ``identify_*`` returns an identified robot model (:class:`IdentifiedModel`, or the consistent
fit that holds one); ``load_*`` reads a model a monitor or estimator predicts torques with.
"""

from ..lazy_api import lazy_api

# module -> the names it gives this folder's API (imported on first use: pinocchio and scipy)
_API = {
    "identified_model": ("IdentificationError", "IdentifiedModel"),
    "robot_identification": ("IdentificationOptions", "Validation", "describe_offsets", "fit_coefficients",
                             "friction_terms", "full_model_options", "identify_gravity", "identify_robot",
                             "preprocess", "validate_model"),
    "consistent_identification": ("POOR_FIT_RMS", "ConsistentFit", "identify_consistent"),
    "physical": ("PRIOR_WEIGHT", "CoefficientTarget", "PhysicalRetrieval", "consistent_prior",
                 "retrieve_physical_parameters"),
    "excitation": ("ExcitationConfig", "ExcitationDesigner", "FourierTrajectory", "check_limits",
                   "design_excitation", "trajectory_points"),
    "torque_models": ("DescriptionModel", "JointFriction", "load_torque_model", "read_friction"),
    "dynamic_model": ("DynamicModel", "load_dynamic_model"),
}
__all__, __getattr__, __dir__ = lazy_api(__name__, globals(), _API)
