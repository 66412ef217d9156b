"""The tensor-invariant DAC controller for an arm described by a URDF.

    ros2 launch ros_lnn dac_controller.launch.py [urdf:=<file>] [config:=<yaml>] [namespace:=<ns>]
        [effort_topic:=<topic>] [use_sim_time:=false] [autostart:=true]

urdf          the arm (default: the shipped config/dac_chain.urdf); passed as robot_description
config        parameter YAML (default config/dac_controller.yaml)
effort_topic  where ~/joint_effort_command goes (empty: not remapped). For ros2_control, relay it through
              effort_watchdog as launch/dac_ros2_control.launch.py does: the effort controllers hold the
              last command forever, and their ~/commands subscription is reliable
autostart     true: the lifecycle node configures and activates itself (its autostart parameter, not
              launch_ros's, whose race could leave it inactive: ros2/launch_ros#445); a failed configure
              leaves it unconfigured (one error line) and running
"""

from launch.actions import DeclareLaunchArgument
from launch.substitutions import (
    EqualsSubstitution,
    FileContent,
    IfElseSubstitution,
    LaunchConfiguration,
    PathJoinSubstitution,
)
from launch_ros.actions import LifecycleNode
from launch_ros.parameter_descriptions import ParameterValue
from launch_ros.substitutions import FindPackageShare

from launch import LaunchDescription

SHARE = FindPackageShare("ros_lnn")
ARG = LaunchConfiguration


def dac_controller() -> LifecycleNode:
    effort_topic = IfElseSubstitution(
        EqualsSubstitution(ARG("effort_topic"), ""), "~/joint_effort_command", ARG("effort_topic")
    )
    return LifecycleNode(
        package="ros_lnn",
        executable="dac_controller",
        name="dac_controller",
        namespace=ARG("namespace"),
        parameters=[
            ARG("config"),
            {
                "robot_description": ParameterValue(FileContent(ARG("urdf")), value_type=str),
                "use_sim_time": ParameterValue(ARG("use_sim_time"), value_type=bool),
                "autostart": ParameterValue(ARG("autostart"), value_type=bool),
            },
        ],
        remappings=[("~/joint_effort_command", effort_topic)],
        autostart=False,
        output="screen",
    )


def generate_launch_description():
    return LaunchDescription(
        [
            DeclareLaunchArgument(
                "urdf",
                default_value=PathJoinSubstitution([SHARE, "config", "dac_chain.urdf"]),
                description="URDF of the arm",
            ),
            DeclareLaunchArgument(
                "config",
                default_value=PathJoinSubstitution([SHARE, "config", "dac_controller.yaml"]),
                description="parameter YAML",
            ),
            DeclareLaunchArgument("namespace", default_value="", description="namespace"),
            DeclareLaunchArgument(
                "effort_topic", default_value="", description="remap ~/joint_effort_command here"
            ),
            DeclareLaunchArgument("use_sim_time", default_value="false", description="follow /clock"),
            DeclareLaunchArgument(
                "autostart", default_value="true", description="the node configures and activates itself"
            ),
            dac_controller(),
        ]
    )
