"""MuJoCo simulated torque-sensing arm (ground truth from an engine we did not write), its recorders, and
the driver sim_node wraps. No ROS.

Naming: ``record_*`` runs the arm and returns :class:`~..signals.Samples`; link names for contacts and
reports come from :func:`link_names` (one naming for the simulator, the monitor and the demo).
"""

from importlib import import_module

# module -> the names it gives this folder's API (imported on first use: the arm pulls in MuJoCo and
# pinocchio, the link names and settings do not)
_API = {
    "arm": ("SimulatedArm", "default_gains"),
    "config": ("ArmState", "SensorConfig", "SimConfig", "SimInputError"),
    "driver": ("FAULTS", "START_POSES_DEG", "Contact", "DriverConfig", "SimDriver", "driver_config", "payload_body",
               "start_pose"),
    "links": ("UnknownLinkError", "link_index", "link_names"),
    "mjcf": ("build_mjcf",),
    "recorders": ("record_static_poses", "record_trajectory"),
    "truth": ("perturb_body", "true_description", "true_links"),
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
