"""The robot model: descriptions (DH, MDH, URDF) and robot files, link parameters, numeric dynamics
(pinocchio), base parameters and their symbolic form (sympy).

Naming: ``load_*`` reads a robot; :class:`RigidBodyDynamics` is the numeric model every fit takes.
"""

from importlib import import_module

# module -> the names it gives this folder's API (imported on first use: a description and its file
# need neither pinocchio nor sympy)
_API = {
    "description": ("JointLimits", "JointSpec", "RobotDescription", "RobotDescriptionError"),
    "robot_file": ("FINGERPRINT_KEY", "SHIPPED_ROBOTS", "kinematics_fingerprint", "load_robot",
                   "robot_from_description", "share_dir"),
    "parameters": ("PARAMETER_NAMES", "BodyInertia", "sym_from_vec6", "vec6_from_sym"),
    "joint_vectors": ("per_joint",),
    "dynamics": ("RigidBodyDynamics", "gravity_params", "link_params"),
    "parameter_dynamics": ("dynamics_of",),
    "base_parameters": ("BaseParameters", "compute_base_parameters"),
    "symbolic": ("SymbolicCoefficients", "derive", "group_terms"),
    "urdf": ("load_urdf", "to_urdf"),
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
