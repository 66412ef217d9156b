"""Closed-loop DAC demo over real topics: the multibody arm simulator + dac_controller (+ RViz).

    ros2 launch ros_lnn dac_demo.launch.py [rviz:=true] [namespace:=<ns>] [respawn:=true] [respawn_delay:=1.0]

dac_chain_sim integrates config/dac_chain.urdf with the tensor multibody model, driven by the
controller's ~/joint_effort_command; the controller (law III, configuring and activating itself
through its autostart parameter) makes the tool trace a circle while the null-space potential keeps the
wrist off an obstacle (config/dac_demo.yaml). RViz shows the robot (robot_state_publisher), the
commanded body forces, the target and the obstacle (~/markers). With respawn (default) a node whose
process dies starts again respawn_delay seconds later, with the same parameters (not RViz).
"""

from launch.actions import DeclareLaunchArgument, GroupAction, OpaqueFunction
from launch.conditions import IfCondition
from launch.substitutions import FileContent, LaunchConfiguration, PathJoinSubstitution
from launch_ros.actions import LifecycleNode, Node
from launch_ros.parameter_descriptions import ParameterValue
from launch_ros.substitutions import FindPackageShare

from launch import LaunchDescription

SHARE = FindPackageShare("ros_lnn")
ARG = LaunchConfiguration


def respawning(context) -> dict:
    """launch's respawn keywords from the respawn arguments (respawn_delay: a number, not a substitution)."""
    return {"respawn": ARG("respawn"), "respawn_delay": float(ARG("respawn_delay").perform(context))}


def nodes(context):
    respawn = respawning(context)
    config = PathJoinSubstitution([SHARE, "config", "dac_demo.yaml"])
    description = ParameterValue(
        FileContent(PathJoinSubstitution([SHARE, "config", "dac_chain.urdf"])), value_type=str
    )
    return [
        # relative names: the simulator reads the controller's efforts in the same namespace
        Node(
            package="ros_lnn",
            executable="dac_chain_sim",
            name="dac_chain_sim",
            namespace=ARG("namespace"),
            parameters=[config, {"robot_description": description}],
            remappings=[("effort_commands", "dac_controller/joint_effort_command")],
            output="screen",
            **respawn,
        ),
        LifecycleNode(
            package="ros_lnn",
            executable="dac_controller",
            name="dac_controller",
            namespace=ARG("namespace"),
            output="screen",
            parameters=[config, {"robot_description": description, "autostart": True}],
            **respawn,
        ),
        GroupAction(
            condition=IfCondition(ARG("rviz")),
            actions=[
                Node(
                    package="robot_state_publisher",
                    executable="robot_state_publisher",
                    namespace=ARG("namespace"),
                    parameters=[{"robot_description": description}],
                    **respawn,
                ),
                Node(
                    package="rviz2",
                    executable="rviz2",
                    namespace=ARG("namespace"),
                    arguments=["-d", PathJoinSubstitution([SHARE, "config", "dac_demo.rviz"])],
                ),
            ],
        ),
    ]


def generate_launch_description():
    return LaunchDescription(
        [
            DeclareLaunchArgument("namespace", default_value="", description="namespace of every node"),
            DeclareLaunchArgument(
                "rviz", default_value="false", description="start RViz + robot_state_publisher"
            ),
            DeclareLaunchArgument(
                "respawn", default_value="true", description="start a node again when its process dies"
            ),
            DeclareLaunchArgument(
                "respawn_delay", default_value="1.0", description="seconds before a dead node starts again"
            ),
            OpaqueFunction(function=nodes),
        ]
    )
