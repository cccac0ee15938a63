"""The robot model: descriptions (DH, MDH, URDF) and robot files, link parameters, numeric dynamics
(pinocchio), base parameters and their symbolic form (sympy).

Naming: ``load_*`` reads a robot; :class:`RigidBodyDynamics` is the numeric model every fit takes.
"""

from ..lazy_api import lazy_api

# module -> the names it gives this folder's API (imported on first use: a description and its file
# need neither pinocchio nor sympy)
_API = {
    "description": ("JointLimits", "JointSpec", "RobotDescription", "RobotDescriptionError", "has_masses",
                    "require_masses"),
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
__all__, __getattr__, __dir__ = lazy_api(__name__, globals(), _API)
