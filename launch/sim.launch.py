"""Simulated arm (MuJoCo sim_node) plus the three payload nodes, all on sim time.

    ros2 launch payload_estimation sim.launch.py robot:=lwr4

The same set as ``bringup --robot lwr4 --use-sim-time --model-from-topic`` (sim_node itself defines sim
time, publishes /clock and the URDF it simulates on robot_description, from which the other nodes take
their model as on a real robot). Data from payload_estimation.ros.bringup.launch_entries.
"""

from launch.actions import DeclareLaunchArgument, OpaqueFunction
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node

from launch import LaunchDescription
from payload_estimation.ros.bringup import launch_entries

ARGS = {
    "robot": ("lwr4", "robot name or robot file path"),
    "namespace": ("", "namespace of all nodes"),
    "params_file": ("", "ROS parameter file (default: the package's config/payload_estimation.yaml)"),
    "thresholds_file": ("", "collision_monitor's calibrated thresholds, layered over params_file"),
}


def _nodes(context, *args, **kwargs):
    v = {k: LaunchConfiguration(k).perform(context) for k in ARGS}
    entries = launch_entries(robot=v["robot"], nodes=["sim", "estimator", "sampler", "monitor"],
                             namespace=v["namespace"], use_sim_time=True, params_file=v["params_file"] or None,
                             model_from_topic=True, thresholds=v["thresholds_file"] or None)
    return [Node(package="payload_estimation", output="screen", **e) for e in entries]


def generate_launch_description() -> LaunchDescription:
    return LaunchDescription([DeclareLaunchArgument(k, default_value=d, description=h) for k, (d, h) in ARGS.items()]
                             + [OpaqueFunction(function=_nodes)])
