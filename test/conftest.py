"""Test-wide setup: isolate the DDS traffic of this test run (own ROS_DOMAIN_ID, localhost only)."""

import atexit
import os
import shutil
import tempfile
from pathlib import Path

# numpy/scipy not imported yet: small dense solves run faster single-threaded on a shared 2-core machine
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

from payload_estimation.ros.domain import isolate

isolate()  # before anything imports rclpy; subprocesses inherit it
os.environ.setdefault("RMW_IMPLEMENTATION", "rmw_fastrtps_cpp")
os.environ.setdefault("MPLBACKEND", "Agg")
# the nodes find a calibration file under $ROS_HOME at start: one left by a real sweep must not change results
os.environ["ROS_HOME"] = tempfile.mkdtemp(prefix="pe-test-ros-home-")
atexit.register(shutil.rmtree, os.environ["ROS_HOME"], ignore_errors=True)

import pytest  # noqa: E402
from data_paths import on_ci  # noqa: E402


def pytest_configure(config):
    config.addinivalue_line("markers", "needs_data(*paths): external data the test reads (../shared/datasets, never "
                            "copied into the repository): skipped when absent, an error under CI")


def _missing_data(item) -> list[str]:
    return [str(p) for mark in item.iter_markers("needs_data") for p in mark.args if not Path(p).exists()]


def pytest_collection_modifyitems(config, items):
    """One rule for external data: absent, the test skips with a one-line reason (under CI: it fails, below)."""
    for item in items:
        if (missing := _missing_data(item)) and not on_ci():
            item.add_marker(pytest.mark.skip(reason=f"{', '.join(missing)} not present (external data, "
                                             "../shared/datasets)"))


def pytest_runtest_setup(item):
    """Under CI, absent external data fails the test that needs it: it must not silently stop running."""
    if (missing := _missing_data(item)) and on_ci():
        pytest.fail(f"CI is set but {', '.join(missing)} is absent: check out shared/ (datasets) beside the "
                    "repository", pytrace=False)


@pytest.fixture(scope="module")
def private_symbolic_cache(tmp_path_factory):
    """The symbolic-coefficient cache of one test module in a directory of its own (tests that build models
    must not read or race over the user's cache)."""
    mp = pytest.MonkeyPatch()
    mp.setenv("PAYLOAD_ESTIMATION_CACHE", str(tmp_path_factory.mktemp("symcache")))
    yield
    mp.undo()


@pytest.fixture(scope="module")
def ros(request):
    """rclpy initialised for one test module, every node under the module's ``NS`` namespace (other test
    runs on this machine may share the DDS domain and publish the same topics)."""
    import rclpy

    rclpy.init(args=["--ros-args", "-r", f"__ns:={request.module.NS}"])
    yield
    rclpy.shutdown()


@pytest.fixture
def rig(ros):
    """The in-process test rig of the node tests (test_nodes.Rig), closed after the test."""
    from test_nodes import Rig

    r = Rig()
    yield r
    r.close()


@pytest.fixture(scope="module")
def dyn():
    """LWR 4+ dynamics, for modules that do not choose another robot (they define their own ``dyn``)."""
    from payload_estimation.model.dynamics import RigidBodyDynamics
    from payload_estimation.model.robot_file import load_robot

    return RigidBodyDynamics(load_robot("lwr4"))
