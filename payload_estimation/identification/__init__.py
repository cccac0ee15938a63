"""Identification of the unloaded robot: excitation design, preprocessing to regression rows, least
squares with friction, physically consistent link sets, the identified model and its validation.

Naming: ``identify_*`` returns an identified robot model (:class:`IdentifiedModel`, or the consistent
fit that holds one); ``load_*`` reads a model a monitor or estimator predicts torques with.
"""

from importlib import import_module

# module -> the names it gives this folder's API (imported on first use: pinocchio and scipy)
_API = {
    "identified_model": ("IdentificationError", "IdentifiedModel"),
    "robot_identification": ("IdentificationOptions", "Validation", "describe_offsets", "fit_coefficients",
                             "friction_terms", "full_model_options", "identify_gravity", "identify_robot",
                             "preprocess", "validate_model"),
    "consistent_identification": ("ConsistentFit", "identify_consistent"),
    "physical": ("PRIOR_WEIGHT", "CoefficientTarget", "PhysicalRetrieval", "consistent_prior",
                 "retrieve_physical_parameters"),
    "excitation": ("ExcitationConfig", "ExcitationDesigner", "FourierTrajectory", "check_limits",
                   "design_excitation", "trajectory_points"),
    "torque_models": ("DescriptionModel", "JointFriction", "load_torque_model", "read_friction"),
    "dynamic_model": ("DynamicModel", "load_dynamic_model"),
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
