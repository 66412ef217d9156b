"""The tensor-invariant DAC controller for an arm described by a URDF.

    ros2 launch ros_lnn dac_controller.launch.py [urdf:=<file>] [config:=<yaml>] [namespace:=<ns>]
        [effort_topic:=/forward_effort_controller/commands] [use_sim_time:=false]

urdf          the arm (default: the shipped config/dac_chain.urdf); passed as robot_description
config        parameter YAML (default config/dac_controller.yaml)
effort_topic  where ~/joint_effort_command goes: the ros2_control effort forward-command controller's
              commands topic (Float64MultiArray, joint order = joint_names)
"""
import os

from ament_index_python.packages import get_package_share_directory
from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument, OpaqueFunction
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node

PACKAGE = "ros_lnn"


def _nodes(context):
    share = get_package_share_directory(PACKAGE)
    arg = lambda name: LaunchConfiguration(name).perform(context)  # noqa: E731
    urdf = arg("urdf") or os.path.join(share, "config", "dac_chain.urdf")
    config = arg("config") or os.path.join(share, "config", "dac_controller.yaml")
    with open(urdf) as fh:
        description = fh.read()
    remap = [("~/joint_effort_command", arg("effort_topic"))] if arg("effort_topic") else []
    return [Node(package=PACKAGE, executable="dac_controller", name="dac_controller", namespace=arg("namespace"),
                 parameters=[config, {"robot_description": description,
                                      "use_sim_time": arg("use_sim_time").lower() == "true"}],
                 remappings=remap, output="screen")]


def generate_launch_description():
    return LaunchDescription([
        DeclareLaunchArgument("urdf", default_value="", description="URDF of the arm"),
        DeclareLaunchArgument("config", default_value="", description="parameter YAML"),
        DeclareLaunchArgument("namespace", default_value="", description="namespace"),
        DeclareLaunchArgument("effort_topic", default_value="", description="remap ~/joint_effort_command here"),
        DeclareLaunchArgument("use_sim_time", default_value="false", description="follow /clock"),
        OpaqueFunction(function=_nodes),
    ])
