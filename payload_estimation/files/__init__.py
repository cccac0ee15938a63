"""Files in and out: joint-sample CSV, recordings in any format (CSV, rosbag2), payload exports for robot
controllers (URDF, YAML, KUKA, franka), the identified robot's YAML/URDF, excitation trajectory files.

Naming: ``load_*`` reads a file into a record, ``read_*`` parses text or a file into parts, ``write_*``
writes files and returns their paths (``write_samples_csv`` a :class:`~..signals.Samples` record,
``write_trajectory_csv`` a trajectory's samples), ``export_text`` returns one export format as text.
"""

from ..lazy_api import lazy_api

# module -> the names it gives this folder's API (imported on first use: exports pull in PyYAML,
# trajectory files the excitation design)
_API = {
    "csv_samples": ("load_csv", "write_samples_csv", "write_table"),
    "recording": ("Recording", "RecordingReport", "load_recording"),
    "rosbag": ("is_rosbag", "load_rosbag"),
    "exports": ("FORMATS", "ExportError", "read_estimate", "export_text", "urdf_flange", "write_exports"),
    "robot_writer": ("write_identified_robot",),
    "trajectory_file": ("read_trajectory_file", "write_trajectory_csv", "write_trajectory_file"),
    "output_path": ("output_problem",),
}
__all__, __getattr__, __dir__ = lazy_api(__name__, globals(), _API)
