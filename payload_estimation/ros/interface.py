"""The nodes' parameter tables in one place: what the docs and the package's parameter file show."""

from __future__ import annotations

from .parameters import ParameterTable, render_docs, render_params_file

DOCS = "docs/ros_interface.md"
PARAMS_FILE = "config/payload_estimation.yaml"


def node_tables(simulator: bool = True) -> dict[str, ParameterTable]:
    """Node name -> its parameter table (imports the node modules, hence rclpy); ``simulator``: with sim_node."""
    from .estimator_node import PARAMS as ESTIMATOR
    from .monitor_node import PARAMS as MONITOR
    from .sampler_node import PARAMS as SAMPLER
    from .sim_node import PARAMS as SIM

    tables = {"payload_estimator": ESTIMATOR, "payload_sampler": SAMPLER, "collision_monitor": MONITOR}
    return {**tables, "sim_node": SIM} if simulator else tables


def render_all(docs_text: str) -> tuple[str, str]:
    """(docs/ros_interface.md with fresh tables, config/payload_estimation.yaml: the package's three nodes)."""
    return render_docs(docs_text, node_tables()), render_params_file(node_tables(simulator=False))
