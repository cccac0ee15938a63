"""Which start-up parameters a node reports as unknown (ros.parameters.ParameterTable.ignored_overrides), without DDS.

Issue 47: a demo printed three ~400-character warnings that sim_node's own parameters (given to every process with
-p, or in a shared /** section) were unknown to payload_estimator, payload_sampler and collision_monitor.
"""

from __future__ import annotations

from rclpy.parameter import Parameter


class TableNode:
    """What ignored_overrides asks of a node: whether it has declared a parameter (its table's, by now)."""

    def __init__(self, names):
        self.names = set(names)

    def has_parameter(self, name: str) -> bool:
        return name in self.names


def test_sim_node_parameters_in_a_shared_file_are_no_typo_to_the_other_nodes():
    from payload_estimation.ros.monitor_params import PARAMS as MONITOR
    from payload_estimation.ros.sampler_params import PARAMS as SAMPLER

    given = {k: Parameter(k, value=v) for k, v in (("noise_std", [0.1]), ("rate_hz", 250.0), ("seed", 7),
                                                    ("contact_duration", 0.2), ("payload_mass", 3.0),
                                                    ("amplitude_degs", 3.0), ("thresholds", [6.0]))}
    assert SAMPLER.ignored_overrides(TableNode(SAMPLER.by_name), given) == ["amplitude_degs"]
    assert MONITOR.ignored_overrides(TableNode(MONITOR.by_name), given) == ["amplitude_degs"]


def test_the_simulators_names_are_sim_nodes_table():
    """Kept here without importing sim_node (it imports MuJoCo, which a robot-side install may not have)."""
    from payload_estimation.ros.parameters import SIMULATOR_PARAMETERS
    from payload_estimation.ros.sim_node import PARAMS as SIM

    assert SIMULATOR_PARAMETERS == set(SIM.by_name)


def test_the_generated_name_list_is_the_nodes_tables():
    """ros/parameter_names.py (what package_parameter_names reads, so ros/parameters imports no node table) is what
    tools/gen_ros_docs.py makes of the tables now."""
    from pathlib import Path

    from payload_estimation.ros.interface import NAMES, node_tables, render_names
    from payload_estimation.ros.parameters import package_parameter_names

    tables = node_tables()
    root = Path(__file__).resolve().parents[2]
    assert (root / NAMES).read_text() == render_names(tables), f"{NAMES} is stale: run tools/gen_ros_docs.py"
    assert package_parameter_names() == set().union(*(t.by_name for t in tables.values()))
