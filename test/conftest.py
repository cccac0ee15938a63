"""Test-wide setup: isolate DDS traffic of this test run (unique ROS_DOMAIN_ID, localhost only)."""

import os

# Set before anything imports rclpy. A domain per pytest process keeps parallel runs (and other
# users of this machine) from seeing each other's topics.
os.environ["ROS_DOMAIN_ID"] = str(1 + os.getpid() % 100)
os.environ["ROS_AUTOMATIC_DISCOVERY_RANGE"] = "LOCALHOST"
os.environ.setdefault("RMW_IMPLEMENTATION", "rmw_fastrtps_cpp")
os.environ.setdefault("MPLBACKEND", "Agg")
