"""The bare run (``sampling.bare_run``) runs the estimator node's rules with the node's defaults.

The bare run is the benches' ground truth for the nodes' logic: its estimator is
:class:`payload.estimator.PayloadEstimator` configured as the ``payload_estimator`` node is with its
parameter table's defaults (one copy: the table reads them from :class:`payload.estimator.EstimatorConfig`),
its answers are the node's, and no calibration file of the machine running it counts.
"""

from __future__ import annotations

import numpy as np
import pytest

from payload_estimation.model.dynamics import RigidBodyDynamics
from payload_estimation.model.parameters import BodyInertia
from payload_estimation.model.robot_file import load_robot
from payload_estimation.payload.estimator import EstimatorConfig, PayloadEstimator
from payload_estimation.payload.result import PayloadLimits
from payload_estimation.ros.estimator_params import PARAMS, estimator_config
from payload_estimation.sampling.bare_run import BareRunConfig, bare_run

DEG = np.pi / 180
PICK = np.array([5, 35, -5, -70, 10, 55, 5]) * DEG
BODY = BodyInertia(2.5, np.array([0.01, -0.015, 0.09]), np.diag([0.012, 0.01, 0.007]))


def test_the_estimators_defaults_are_the_node_parameter_tables():
    """EstimatorConfig() is what the node builds from its table's defaults, shared rows (static test, limits)
    included, and what a bare run uses unless told otherwise."""
    node = estimator_config({p.name: p.default for p in PARAMS.params})
    assert EstimatorConfig() == node
    assert BareRunConfig().estimator == node
    assert node.fit.limits == PayloadLimits(max_payload=15.0, max_com_radius=0.5)  # not the fit's wider default
    assert node.with_fit(method="differential") == estimator_config(
        {**{p.name: p.default for p in PARAMS.params}, "method": "differential"})


@pytest.mark.slow
def test_a_bare_run_answers_an_implausible_estimate_as_the_node_does():
    """max_payload below the grasped mass: the estimator rejects the fit with the node's answer, the run ends
    estimate_rejected, nothing reaches the monitor."""
    desc = load_robot("lwr4")
    limits = PayloadLimits(max_payload=2.0, max_com_radius=0.5)
    r = bare_run(desc, PICK, BODY, BareRunConfig(estimator=EstimatorConfig().with_fit(limits=limits), seed=1))
    assert r.finished.code == "estimate_rejected", r.finished.text
    assert "exceeds the limit of 2.0 kg" in r.finished.text and "previous payload kept (0.000 kg)" in r.finished.text
    assert r.estimate is None and r.monitor_refusal == "" and r.collisions == 0


def test_a_bare_run_estimator_does_not_look_for_this_machines_calibration(tmp_path, monkeypatch):
    """A calibration file under $ROS_HOME is the node's business: the node's estimator finds (here: refuses)
    it, the bare run's uses the nominal model without looking."""
    monkeypatch.setenv("ROS_HOME", str(tmp_path))
    desc = load_robot("lwr4")
    cal = tmp_path / "payload_estimation" / f"gravity_{desc.name}.yaml"
    cal.parent.mkdir(parents=True)
    cal.write_text("not: a gravity model\n")
    node = PayloadEstimator(EstimatorConfig())
    assert node.set_robot(RigidBodyDynamics(desc), desc.joint_names).refused and node.calibration_refused
    bare = PayloadEstimator(EstimatorConfig(), look_for_calibration=False)
    choice = bare.set_robot(RigidBodyDynamics(desc), desc.joint_names)
    assert not choice.refused and not bare.calibration_refused and bare.gravity_model is None
    assert "nominal" in bare.calibration_note
