"""Simulator + ServoLNN estimator (+ RViz): the demo on a ROS 2 install.

    ros2 launch ros_lnn demo.launch.py [system:=crane|chain] [config:=<yaml>] [model:=<onnx>]
        [namespace:=<ns>] [use_sim_time:=false] [rviz:=true|false] [estimate_qdd:=false] [autostart:=true]
        [respawn:=true] [respawn_delay:=1.0]

system        picks config/<system>.yaml and config/<system>.urdf (default crane)
rviz          RViz + robot_state_publisher; default: on where a display is set (DISPLAY or WAYLAND_DISPLAY),
              off on a headless robot computer
use_sim_time  true: the simulator publishes /clock (simulated time) and every node follows it
estimate_qdd  true: the estimator estimates servo accelerations from joint_states instead of taking
              them from the simulator's plan (sim/servo_plan)
respawn       start a node again when its process dies, respawn_delay seconds later (not RViz)
The chain needs a chain model (model:=...); the crane uses the shipped model. The estimator comes from
estimator.launch.py (it brings itself up through its autostart parameter, after a respawn too).
"""

from launch.actions import DeclareLaunchArgument, GroupAction, IncludeLaunchDescription, OpaqueFunction
from launch.conditions import IfCondition
from launch.launch_description_sources import PythonLaunchDescriptionSource
from launch.substitutions import (
    EnvironmentVariable,
    EqualsSubstitution,
    FileContent,
    IfElseSubstitution,
    LaunchConfiguration,
    PathJoinSubstitution,
)
from launch_ros.actions import Node
from launch_ros.parameter_descriptions import ParameterValue
from launch_ros.substitutions import FindPackageShare

from launch import LaunchDescription

SHARE = FindPackageShare("ros_lnn")
ARG = LaunchConfiguration
#: "true" where a display is set, "false" on a headless machine (RViz would exit 1 there)
DISPLAY_SET = IfElseSubstitution(
    EqualsSubstitution(
        [
            EnvironmentVariable("DISPLAY", default_value=""),
            EnvironmentVariable("WAYLAND_DISPLAY", default_value=""),
        ],
        "",
    ),
    "false",
    "true",
)


def respawning(context) -> dict:
    """launch's respawn keywords from the respawn arguments (respawn_delay: a number, not a substitution)."""
    return {"respawn": ARG("respawn"), "respawn_delay": float(ARG("respawn_delay").perform(context))}


def nodes(context):
    """The simulator and RViz (with robot_state_publisher); respawning all but RViz."""
    respawn = respawning(context)
    sim_time = ParameterValue(ARG("use_sim_time"), value_type=bool)
    description = ParameterValue(
        FileContent([PathJoinSubstitution([SHARE, "config", ARG("system")]), ".urdf"]), value_type=str
    )
    return [
        Node(
            package="ros_lnn",
            executable="sim",
            name="sim",
            namespace=ARG("namespace"),
            parameters=[ARG("config"), {"publish_clock": sim_time}],
            output="screen",
            **respawn,
        ),
        GroupAction(
            condition=IfCondition(ARG("rviz")),
            actions=[
                Node(
                    package="robot_state_publisher",
                    executable="robot_state_publisher",
                    namespace=ARG("namespace"),
                    parameters=[{"robot_description": description, "use_sim_time": sim_time}],
                    **respawn,
                ),
                Node(
                    package="rviz2",
                    executable="rviz2",
                    namespace=ARG("namespace"),
                    arguments=["-d", PathJoinSubstitution([SHARE, "config", "ros_lnn.rviz"])],
                    parameters=[{"use_sim_time": sim_time}],
                ),
            ],
        ),
    ]


def generate_launch_description():
    return LaunchDescription(
        [
            DeclareLaunchArgument(
                "system",
                default_value="crane",
                choices=["crane", "chain"],
                description="reference system (config/<system>.yaml, config/<system>.urdf)",
            ),
            DeclareLaunchArgument(
                "config",
                default_value=[PathJoinSubstitution([SHARE, "config", ARG("system")]), ".yaml"],
                description="parameter YAML (default: by system)",
            ),
            DeclareLaunchArgument("model", default_value="", description="ONNX model (overrides the config)"),
            DeclareLaunchArgument("namespace", default_value="", description="namespace of every node"),
            DeclareLaunchArgument(
                "use_sim_time",
                default_value="false",
                description="simulator publishes /clock; all nodes follow it",
            ),
            DeclareLaunchArgument(
                "rviz",
                default_value=DISPLAY_SET,
                description="start RViz + robot_state_publisher (default: where a display is set)",
            ),
            DeclareLaunchArgument(
                "estimate_qdd",
                default_value="false",
                description="estimate servo accelerations instead of using sim/servo_plan",
            ),
            DeclareLaunchArgument(
                "autostart", default_value="true", description="configure and activate the estimator"
            ),
            DeclareLaunchArgument(
                "respawn", default_value="true", description="start a node again when its process dies"
            ),
            DeclareLaunchArgument(
                "respawn_delay", default_value="1.0", description="seconds before a dead node starts again"
            ),
            OpaqueFunction(function=nodes),
            GroupAction(
                actions=[
                    IncludeLaunchDescription(  # scoped: the include's arguments stay inside
                        PythonLaunchDescriptionSource(
                            PathJoinSubstitution([SHARE, "launch", "estimator.launch.py"])
                        ),
                        launch_arguments={
                            "config": ARG("config"),
                            "model": ARG("model"),
                            "namespace": ARG("namespace"),
                            "use_sim_time": ARG("use_sim_time"),
                            "autostart": ARG("autostart"),
                            "respawn": ARG("respawn"),
                            "respawn_delay": ARG("respawn_delay"),
                            "rviz": "false",
                            "servo_commands": IfElseSubstitution(
                                ARG("estimate_qdd"), "servo_commands", "sim/servo_plan"
                            ),
                        }.items(),
                    )
                ]
            ),
        ]
    )
