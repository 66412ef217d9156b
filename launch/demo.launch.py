"""Simulator + ServoLNN estimator (+ RViz): the demo on a ROS 2 install.

    ros2 launch ros_lnn demo.launch.py [system:=crane|chain] [config:=<yaml>] [model:=<onnx>]
        [namespace:=<ns>] [use_sim_time:=false] [rviz:=true] [estimate_qdd:=false]

system        picks config/<system>.yaml and config/<system>.urdf (default crane)
use_sim_time  true: the simulator publishes /clock (simulated time) and every node follows it
estimate_qdd  true: the estimator estimates servo accelerations from joint_states instead of taking
              them from the simulator's plan (sim/servo_plan)
The chain needs a chain model (model:=...); the crane uses the shipped model.
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
    system = arg("system")
    config = arg("config") or os.path.join(share, "config", f"{system}.yaml")
    sim_time = arg("use_sim_time").lower() == "true"
    ns = arg("namespace")
    estimator = {"use_sim_time": sim_time}
    if arg("model"):
        estimator["model_path"] = arg("model")
    remap = [] if arg("estimate_qdd").lower() == "true" else [("servo_commands", "sim/servo_plan")]
    actions = [
        Node(package=PACKAGE, executable="sim", name="sim", namespace=ns,
             parameters=[config, {"publish_clock": sim_time}], output="screen"),
        Node(package=PACKAGE, executable="servo_lnn", name="servo_lnn", namespace=ns,
             parameters=[config, estimator], remappings=remap, output="screen"),
    ]
    if arg("rviz").lower() == "true":
        with open(os.path.join(share, "config", f"{system}.urdf")) as fh:
            description = fh.read()
        actions += [
            Node(package="robot_state_publisher", executable="robot_state_publisher", namespace=ns,
                 parameters=[{"robot_description": description, "use_sim_time": sim_time}]),
            Node(package="rviz2", executable="rviz2", namespace=ns,
                 arguments=["-d", os.path.join(share, "config", "ros_lnn.rviz")],
                 parameters=[{"use_sim_time": sim_time}]),
        ]
    return actions


def generate_launch_description():
    return LaunchDescription([
        DeclareLaunchArgument("system", default_value="crane", choices=["crane", "chain"],
                              description="reference system (config/<system>.yaml, config/<system>.urdf)"),
        DeclareLaunchArgument("config", default_value="", description="parameter YAML (default: by system)"),
        DeclareLaunchArgument("model", default_value="", description="ONNX model (overrides the config)"),
        DeclareLaunchArgument("namespace", default_value="", description="namespace of every node"),
        DeclareLaunchArgument("use_sim_time", default_value="false",
                              description="simulator publishes /clock; all nodes follow it"),
        DeclareLaunchArgument("rviz", default_value="true", description="start RViz + robot_state_publisher"),
        DeclareLaunchArgument("estimate_qdd", default_value="false",
                              description="estimate servo accelerations instead of using sim/servo_plan"),
        OpaqueFunction(function=_nodes),
    ])
