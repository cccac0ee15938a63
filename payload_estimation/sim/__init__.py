"""MuJoCo simulated torque-sensing arm (ground truth from an engine we did not write), its recorders, and
the driver sim_node wraps. No ROS.

Naming: ``record_*`` runs the arm and returns :class:`~..signals.Samples`; link names for contacts and
reports come from :func:`link_names` (one naming for the simulator, the monitor and the demo).
"""

from ..lazy_api import lazy_api

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
__all__, __getattr__, __dir__ = lazy_api(__name__, globals(), _API)
