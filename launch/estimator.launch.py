"""The ServoLNN estimator alone, for a robot that publishes joint_states (and optionally servo_commands).

    ros2 launch ros_lnn estimator.launch.py [config:=<yaml>] [model:=<onnx>] [namespace:=<ns>]
        [use_sim_time:=false] [rviz:=false] [urdf:=<file>]

config   parameter file (default: share/ros_lnn/config/crane.yaml)
model    ONNX model overriding the config's model_path (default: the config's, i.e. the shipped model)
rviz     also start RViz with config/ros_lnn.rviz and robot_state_publisher with ``urdf``
The node configures and activates itself (parameter autostart in the config); set autostart:=false in
the config to drive it with a lifecycle manager instead.
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
    sim_time = arg("use_sim_time").lower() == "true"
    overrides = {"use_sim_time": sim_time}
    if arg("model"):
        overrides["model_path"] = arg("model")
    actions = [Node(package=PACKAGE, executable="servo_lnn", name="servo_lnn", namespace=arg("namespace"),
                    parameters=[arg("config"), overrides], output="screen")]
    if arg("rviz").lower() == "true":
        with open(arg("urdf")) as fh:
            description = fh.read()
        actions += [
            Node(package="robot_state_publisher", executable="robot_state_publisher", namespace=arg("namespace"),
                 parameters=[{"robot_description": description, "use_sim_time": sim_time}]),
            Node(package="rviz2", executable="rviz2", namespace=arg("namespace"),
                 arguments=["-d", os.path.join(share, "config", "ros_lnn.rviz")],
                 parameters=[{"use_sim_time": sim_time}]),
        ]
    return actions


def generate_launch_description():
    share = get_package_share_directory(PACKAGE)
    return LaunchDescription([
        DeclareLaunchArgument("config", default_value=os.path.join(share, "config", "crane.yaml"),
                              description="parameter YAML for servo_lnn"),
        DeclareLaunchArgument("model", default_value="", description="ONNX model (overrides the config)"),
        DeclareLaunchArgument("namespace", default_value="", description="namespace of the node(s)"),
        DeclareLaunchArgument("use_sim_time", default_value="false", description="follow /clock"),
        DeclareLaunchArgument("rviz", default_value="false", description="start RViz + robot_state_publisher"),
        DeclareLaunchArgument("urdf", default_value=os.path.join(share, "config", "crane.urdf"),
                              description="robot model for robot_state_publisher (with rviz:=true)"),
        OpaqueFunction(function=_nodes),
    ])
