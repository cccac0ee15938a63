"""Test-wide setup: isolate the DDS traffic of this test run (own ROS_DOMAIN_ID, localhost only)."""

import os

# numpy/scipy not imported yet: small dense solves run faster single-threaded on a shared 2-core machine
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

from payload_estimation.ros.domain import isolate

isolate()  # before anything imports rclpy; subprocesses inherit it
os.environ.setdefault("RMW_IMPLEMENTATION", "rmw_fastrtps_cpp")
os.environ.setdefault("MPLBACKEND", "Agg")

import pytest  # noqa: E402


@pytest.fixture(scope="module")
def ros(request):
    """rclpy initialised for one test module, every node under the module's ``NS`` namespace (other test
    runs on this machine may share the DDS domain and publish the same topics)."""
    import rclpy

    rclpy.init(args=["--ros-args", "-r", f"__ns:={request.module.NS}"])
    yield
    rclpy.shutdown()
