"""MuJoCo simulated torque-sensing arm (ground truth from an engine we did not write). No ROS."""

from .arm import SimulatedArm, default_gains
from .config import ArmState, SensorConfig, SimConfig
from .mjcf import build_mjcf
from .truth import perturb_body, true_links

__all__ = [
    "ArmState",
    "SensorConfig",
    "SimConfig",
    "SimulatedArm",
    "build_mjcf",
    "default_gains",
    "perturb_body",
    "true_links",
]
