"""The tensor-invariant DAC controller for an arm described by a URDF.

    ros2 launch ros_lnn dac_controller.launch.py [urdf:=<file>] [config:=<yaml>] [namespace:=<ns>]
        [effort_topic:=<topic>] [use_sim_time:=false] [autostart:=true] [respawn:=true]
        [respawn_delay:=1.0]

urdf          the arm (default: the shipped config/dac_chain.urdf); passed as robot_description
config        parameter YAML (default config/dac_controller.yaml)
effort_topic  where ~/joint_effort_command goes (empty: not remapped). For ros2_control, relay it through
              effort_watchdog as launch/dac_ros2_control.launch.py does: the effort controllers hold the
              last command forever, and their ~/commands subscription is reliable
autostart     true: the lifecycle node configures and activates itself (its autostart parameter), at
              every start, a respawn too; a failed configure leaves it unconfigured (one error line) and
              running; false: drive it with a lifecycle manager
respawn       start the node again when its process dies (killed, crashed), with the same parameters,
              respawn_delay seconds later (launch takes the delay as a number: read in nodes())
"""

from launch.actions import DeclareLaunchArgument, OpaqueFunction
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


def respawning(context) -> dict:
    """launch's respawn keywords from the respawn arguments (respawn_delay: a number, not a substitution)."""
    return {"respawn": ARG("respawn"), "respawn_delay": float(ARG("respawn_delay").perform(context))}


def nodes(context):
    effort_topic = IfElseSubstitution(
        EqualsSubstitution(ARG("effort_topic"), ""), "~/joint_effort_command", ARG("effort_topic")
    )
    return [
        LifecycleNode(
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
            output="screen",
            **respawning(context),
        )
    ]


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
            DeclareLaunchArgument(
                "respawn", default_value="true", description="start the node again when its process dies"
            ),
            DeclareLaunchArgument(
                "respawn_delay", default_value="1.0", description="seconds before a dead node starts again"
            ),
            OpaqueFunction(function=nodes),
        ]
    )
