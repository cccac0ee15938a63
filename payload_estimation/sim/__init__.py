"""MuJoCo simulated torque-sensing arm (ground truth from an engine we did not write), and the driver
sim_node wraps. No ROS."""

from .arm import SimulatedArm, default_gains
from .config import ArmState, SensorConfig, SimConfig, SimInputError
from .driver import DriverConfig, SimDriver, driver_config, payload_body, start_pose
from .links import UnknownLinkError, link_index, link_names
from .mjcf import build_mjcf
from .truth import perturb_body, true_links

__all__ = [
    "ArmState",
    "DriverConfig",
    "SensorConfig",
    "SimConfig",
    "SimDriver",
    "SimInputError",
    "SimulatedArm",
    "UnknownLinkError",
    "build_mjcf",
    "default_gains",
    "driver_config",
    "link_index",
    "link_names",
    "payload_body",
    "perturb_body",
    "start_pose",
    "true_links",
]
