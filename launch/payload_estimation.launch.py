"""Launch payload_estimator, payload_sampler and collision_monitor against a real (or Gazebo) arm.

    ros2 launch payload_estimation payload_estimation.launch.py namespace:=lbr \
        joint_trajectory:=/lbr/joint_trajectory_controller/joint_trajectory use_sim_time:=false

Thin and data-driven: what is started comes from payload_estimation.ros.bringup.launch_entries
(the same data the ``bringup`` console script and the tests use); parameters from
config/payload_estimation.yaml unless params_file is given; launch arguments outrank it. The model
comes from robot_description (in the namespace) unless ``robot`` names one. See docs/ros_interface.md
for remap examples.
"""

from launch.actions import DeclareLaunchArgument, OpaqueFunction
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node

from launch import LaunchDescription
from payload_estimation.ros.bringup import launch_entries

ARGS = {
    "robot": ("", "robot model: empty = the URDF on robot_description in the namespace (robot_state_publisher); or "
              "a shipped robot (lwr4, iiwa14) or a robot YAML/URDF file"),
    "base_link": ("", "first link of the chain in the URDF (empty: the root)"),
    "tip_link": ("", "last link of the chain = payload frame (empty: the unique tip)"),
    "namespace": ("", "namespace of all nodes, e.g. lbr"),
    "use_sim_time": ("false", "follow /clock (Gazebo, sim_node, bag replay)"),
    "params_file": ("", "ROS parameter file (default: the package's config/payload_estimation.yaml)"),
    "thresholds_file": ("", "collision_monitor's calibrated thresholds, a parameter file layered over params_file "
                        "(written by ~/finish_threshold_calibration with threshold_calibration_file set)"),
    "joint_states": ("", "remap target of joint_states (empty: unchanged)"),
    "joint_trajectory": ("", "remap target of joint_trajectory, e.g. joint_trajectory_controller/joint_trajectory"),
    "nodes": ("estimator,sampler,monitor", "comma-separated subset of sim,estimator,sampler,monitor"),
    "monitor_prefix": ("", "run collision_monitor under this command, e.g. 'chrt -f 80' (real-time priority)"),
}


def _nodes(context, *args, **kwargs):
    v = {k: LaunchConfiguration(k).perform(context) for k in ARGS}
    entries = launch_entries(
        robot=v["robot"], nodes=[s for s in v["nodes"].split(",") if s], namespace=v["namespace"],
        use_sim_time=v["use_sim_time"].lower() in ("true", "1", "yes"), params_file=v["params_file"] or None,
        joint_states=v["joint_states"], joint_trajectory=v["joint_trajectory"], monitor_prefix=v["monitor_prefix"],
        extra_params={k: v[k] for k in ("base_link", "tip_link") if v[k]}, thresholds=v["thresholds_file"] or None)
    return [Node(package="payload_estimation", output="screen", **e) for e in entries]


def generate_launch_description() -> LaunchDescription:
    return LaunchDescription([DeclareLaunchArgument(k, default_value=d, description=h) for k, (d, h) in ARGS.items()]
                             + [OpaqueFunction(function=_nodes)])
