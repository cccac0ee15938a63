"""Test-wide setup: isolate the DDS traffic of this test run (own ROS_DOMAIN_ID, localhost only)."""

import os

from payload_estimation.ros.domain import isolate

isolate()  # before anything imports rclpy; subprocesses inherit it
os.environ.setdefault("RMW_IMPLEMENTATION", "rmw_fastrtps_cpp")
os.environ.setdefault("MPLBACKEND", "Agg")
