"""Closed-loop DAC demo over real topics: the multibody arm simulator + dac_controller (+ RViz).

    ros2 launch ros_lnn dac_demo.launch.py [rviz:=true] [namespace:=<ns>]

dac_chain_sim integrates config/dac_chain.urdf with the tensor multibody model, driven by the
controller's ~/joint_effort_command; the controller (law III) makes the tool trace a circle while the
null-space potential keeps the wrist off an obstacle (config/dac_demo.yaml). RViz shows the robot
(robot_state_publisher), the commanded body forces, the target and the obstacle (~/markers).
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
    ns = arg("namespace")
    config = os.path.join(share, "config", "dac_demo.yaml")
    with open(os.path.join(share, "config", "dac_chain.urdf")) as fh:
        description = fh.read()
    controller_ns = f"/{ns.strip('/')}" if ns else ""
    actions = [
        Node(package=PACKAGE, executable="dac_chain_sim", name="dac_chain_sim", namespace=ns,
             parameters=[config, {"robot_description": description}],
             remappings=[("effort_commands", f"{controller_ns}/dac_controller/joint_effort_command")],
             output="screen"),
        Node(package=PACKAGE, executable="dac_controller", name="dac_controller", namespace=ns,
             parameters=[config, {"robot_description": description}], output="screen"),
    ]
    if arg("rviz").lower() == "true":
        actions += [
            Node(package="robot_state_publisher", executable="robot_state_publisher", namespace=ns,
                 parameters=[{"robot_description": description}]),
            Node(package="rviz2", executable="rviz2", namespace=ns,
                 arguments=["-d", os.path.join(share, "config", "dac_demo.rviz")]),
        ]
    return actions


def generate_launch_description():
    return LaunchDescription([
        DeclareLaunchArgument("namespace", default_value="", description="namespace of every node"),
        DeclareLaunchArgument("rviz", default_value="false", description="start RViz + robot_state_publisher"),
        OpaqueFunction(function=_nodes),
    ])
