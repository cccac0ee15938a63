"""Files in and out: joint-sample CSV, recordings in any format (CSV, rosbag2), payload exports for robot
controllers (URDF, YAML, KUKA, franka), the identified robot's YAML/URDF, excitation trajectory files.

Naming: ``load_*`` reads a file into a record, ``read_*`` parses text or a file into parts, ``write_*``
writes files and returns their paths (``save_csv`` writes a :class:`~..signals.Samples` record, ``write_csv``
a trajectory's samples; ``render`` returns one export format as text).
"""

from importlib import import_module

# module -> the names it gives this folder's API (imported on first use: exports pull in PyYAML,
# trajectory files the excitation design)
_API = {
    "csv_samples": ("load_csv", "save_csv", "write_table"),
    "recording": ("Recording", "RecordingReport", "load_recording"),
    "rosbag": ("is_rosbag", "load_rosbag"),
    "exports": ("FORMATS", "ExportError", "read_estimate", "render", "urdf_flange", "write_exports"),
    "robot_writer": ("write_identified_robot",),
    "trajectory_file": ("read_trajectory_file", "write_csv", "write_trajectory_file"),
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
