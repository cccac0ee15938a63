"""The nodes' parameter tables in one place: what the docs, the package's parameter file and the list of every
node's parameter names (``ros/parameter_names.py``) show."""

from __future__ import annotations

import textwrap

from .parameters import ParameterTable, render_docs, render_params_file

DOCS = "docs/ros_interface.md"
PARAMS_FILE = "config/payload_estimation.yaml"
NAMES = "payload_estimation/ros/parameter_names.py"

NAMES_HEADER = '''"""Every parameter name of the package's nodes, by node. Generated from the nodes' parameter tables by
tools/gen_ros_docs.py: edit the tables, then run it (test_parameter_names fails when this file is stale).

:func:`.parameters.package_parameter_names` reads it, so the parameter mechanics import neither the nodes' tables
(which import the mechanics: an import circle) nor sim_node's (which imports MuJoCo).
"""

'''


def node_tables(simulator: bool = True) -> dict[str, ParameterTable]:
    """Node name -> its parameter table (imports the node modules, hence rclpy); ``simulator``: with sim_node."""
    from .estimator_node import PARAMS as ESTIMATOR
    from .monitor_node import PARAMS as MONITOR
    from .sampler_node import PARAMS as SAMPLER
    from .sim_node import PARAMS as SIM

    tables = {"payload_estimator": ESTIMATOR, "payload_sampler": SAMPLER, "collision_monitor": MONITOR}
    return {**tables, "sim_node": SIM} if simulator else tables


def render_names(tables: dict[str, ParameterTable]) -> str:
    """``ros/parameter_names.py``: each node's parameter names (node name -> table)."""
    lines = [NAMES_HEADER.rstrip("\n"), "", "NODE_PARAMETERS: dict[str, frozenset[str]] = {"]
    for node, table in tables.items():
        names = ", ".join(f'"{p.name}"' for p in sorted(table.params, key=lambda p: p.name))
        lines += [f'    "{node}": frozenset({{', *textwrap.wrap(names, 112, initial_indent=" " * 8,
                                                                   subsequent_indent=" " * 8), "    }),"]
    return "\n".join([*lines, "}", "", '__all__ = ["NODE_PARAMETERS"]', ""])


def render_all(docs_text: str) -> tuple[str, str]:
    """(docs/ros_interface.md with fresh tables, config/payload_estimation.yaml: the package's three nodes)."""
    return render_docs(docs_text, node_tables()), render_params_file(node_tables(simulator=False))
