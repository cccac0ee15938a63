"""docs/ros_interface.md lists every service and topic each node creates, and nothing it does not.

Each node is started in-process (real rclpy, its own context; with ``robot`` set and with ``robot: ''``,
whose entities differ) and the ROS graph says what it created. The service and topic tables are
generated from that by ``tools/gen_ros_docs.py``: the file must be what the generator makes of it.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from payload_estimation.ros.interface import DOCS
from payload_estimation.ros.interface_docs import NODES, documented, introspect, render_interface_docs

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def created():
    return introspect()


def test_every_service_and_topic_each_node_creates_is_in_the_docs_and_nothing_else(created):
    docs = documented((ROOT / DOCS).read_text())
    assert set(docs) == set(NODES), "every node has an <!-- interface: NODE --> table"
    for node, entities in created.items():
        listed = set(docs[node])
        missing = sorted(f"{e.kind} {e.name} ({e.type})" for e in entities - listed)
        stale = sorted(f"{e.kind} {e.name} ({e.type})" for e in listed - entities)
        assert not missing and not stale, (f"{node}: not in {DOCS}: {missing}; in {DOCS} but not created: {stale}; "
                                           "run `python tools/gen_ros_docs.py`")


def test_the_issue_30_services_are_found_and_apply_wrench_is_a_topic(created):
    names = {node: {(e.kind, e.name) for e in ents} for node, ents in created.items()}
    assert {("srv", "~/record_reference"), ("srv", "~/forget_pick")} <= names["payload_sampler"]
    assert {("srv", "~/start_recording"), ("srv", "~/store_reference"),
            ("srv", "~/estimate_motion")} <= names["payload_estimator"]
    assert ("sub", "~/apply_wrench") in names["sim_node"] and ("srv", "~/apply_wrench") not in names["sim_node"]
    assert ("sub", "robot_description") in names["payload_estimator"]  # only with robot: '' (both configurations)


def test_the_tables_are_what_the_generator_makes(created):
    text = (ROOT / DOCS).read_text()
    assert render_interface_docs(text, created) == text, f"{DOCS} is stale: run `python tools/gen_ros_docs.py`"
