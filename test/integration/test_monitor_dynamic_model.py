"""collision_monitor's ``dynamic_model`` parameter (issue 29.4): the node's observer runs on an identified
model (coefficients or link set, with friction and offsets), and a file of another robot model stops the
node from starting, with the reason. In-process node, no traffic."""

from __future__ import annotations

import os

import numpy as np
import pytest
from rclpy.parameter import Parameter

from payload_estimation.identification.robot_identification import identify_gravity, random_configurations
from payload_estimation.model.dynamics import RigidBodyDynamics
from payload_estimation.model.robot_file import load_robot
from payload_estimation.ros.monitor_node import CollisionMonitorNode
from payload_estimation.ros.parameters import ParameterError
from payload_estimation.signals.samples import Samples

NS = f"/dynmodel{os.getpid()}"
OFFSET = np.array([0.5, -0.8, 0.4, 0.3, 0.2, -0.2, 0.1])


@pytest.fixture(scope="module")
def gravity_file(tmp_path_factory):
    """A gravity model with offsets of the lwr4 (5 % heavier links, a sensor bias)."""
    desc = load_robot("lwr4")
    dyn = RigidBodyDynamics(desc)
    q = random_configurations(desc, 60, seed=3)
    model = identify_gravity(desc, Samples(q, np.array([1.05 * dyn.gravity(x) + OFFSET for x in q])), offset=True)
    return model.save(tmp_path_factory.mktemp("dyn") / "gravity.yaml"), dyn


def test_monitor_runs_on_the_dynamic_model(ros, gravity_file):
    path, dyn = gravity_file
    node = CollisionMonitorNode(parameter_overrides=[Parameter("robot", value="lwr4"),
                                                     Parameter("dynamic_model", value=str(path))])
    try:
        np.testing.assert_allclose(node.mon.observer.friction.offset, OFFSET, atol=1e-9)
        q = np.radians([0, 30, 0, -60, 0, 45, 0])
        np.testing.assert_allclose(node.dyn.gravity(q), 1.05 * dyn.gravity(q), atol=1e-9)
        # at rest with the sensor's bias and the heavier links: no residual on the identified model
        tau = 1.05 * dyn.gravity(q) + OFFSET
        for k in range(100):
            r = node.mon.update(k * 1e-3, q, np.zeros(7), tau).residual
        np.testing.assert_allclose(r, 0.0, atol=1e-6)
    finally:
        node.destroy_node()


def test_a_dynamic_model_of_another_robot_is_refused(ros, gravity_file, tmp_path):
    import yaml

    path, _ = gravity_file
    doc = yaml.safe_load(path.read_text())
    doc["joint_names"] = [f"A{k + 1}" for k in range(7)]
    other = tmp_path / "other.yaml"
    other.write_text(yaml.safe_dump(doc))
    with pytest.raises(ParameterError, match="dynamic_model .*belongs to another robot model"):
        CollisionMonitorNode(parameter_overrides=[Parameter("robot", value="lwr4"),
                                                  Parameter("dynamic_model", value=str(other))])
