"""The arm flow on a robot: an arm model (``ros-lnn train --urdf``) watching for collisions, optionally
holding or moving the arm, in one line.

    ros2 launch ros_lnn arm.launch.py model:=<arm.onnx> [thresholds:=<yaml>] [observer_gains:=[50.0]]
        [wrench_frame:=<link>] [urdf:=<urdf or xacro>] [controller:=false] [law:=gravity_compensation]
        [controller_config:=<yaml>] [joints:=[...]] [effort_topic:=/effort_controller/commands]
        [watchdog_timeout_s:=0.1] [namespace:=<ns>] [use_sim_time:=false] [autostart:=true] [rviz:=true|false]
        [respawn:=true] [respawn_delay:=1.0]

model           the arm model (.onnx from ros-lnn train with an arm config)
thresholds      effort_observer's collision thresholds (ros-lnn calibrate-observer; empty: no detection)
observer_gains  the observer's K per joint [1/s], as calibrated
wrench_frame    the link of ~/external_wrench (panda_hand_tcp on a Panda; empty: none)
urdf            a URDF or xacro file for robot_state_publisher (run through xacro), which publishes
                robot_description; empty: none here — the robot's own robot_state_publisher publishes it,
                or the nodes take the URDF in the model. The nodes check it against the model's.
controller      also dac_controller with the model (law: gravity_compensation, hand guiding; or
                feedforward_pd, following dac_controller/joint_trajectory; parameters controller_config,
                default config/panda_arm_controller.yaml) and effort_watchdog relaying its efforts to
                effort_topic (joints: the effort controller's, in its order)
autostart       true: every lifecycle node configures and activates itself (its autostart parameter,
                not launch_ros's, whose race could leave it inactive: ros2/launch_ros#445)
rviz            RViz with config/arm.rviz (robot, external wrench, collision marker); default: where a
                display is set (DISPLAY or WAYLAND_DISPLAY), off on a headless robot computer
respawn         start a node again when its process dies (killed, crashed), with the same parameters,
                respawn_delay seconds later (not RViz); the lifecycle nodes come back active by themselves
"""

from launch.actions import DeclareLaunchArgument, GroupAction, OpaqueFunction
from launch.conditions import IfCondition
from launch.substitutions import (
    Command,
    EnvironmentVariable,
    EqualsSubstitution,
    IfElseSubstitution,
    LaunchConfiguration,
    NotSubstitution,
    PathJoinSubstitution,
)
from launch_ros.actions import LifecycleNode, Node
from launch_ros.parameter_descriptions import ParameterValue
from launch_ros.substitutions import FindPackageShare

from launch import LaunchDescription

SHARE = FindPackageShare("ros_lnn")
ARG = LaunchConfiguration
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
PANDA_JOINTS = "[" + ", ".join(f"panda_joint{i}" for i in range(1, 8)) + "]"


def respawning(context) -> dict:
    """launch's respawn keywords from the respawn arguments (respawn_delay: a number, not a substitution)."""
    return {"respawn": ARG("respawn"), "respawn_delay": float(ARG("respawn_delay").perform(context))}


def nodes(context):
    """The nodes; every one but RViz respawns."""
    respawn = respawning(context)
    sim_time = ParameterValue(ARG("use_sim_time"), value_type=bool)
    autostart = ParameterValue(ARG("autostart"), value_type=bool)
    return [
        Node(
            package="robot_state_publisher",
            executable="robot_state_publisher",
            **respawn,
            namespace=ARG("namespace"),
            condition=IfCondition(NotSubstitution(EqualsSubstitution(ARG("urdf"), ""))),
            parameters=[
                {
                    "robot_description": ParameterValue(Command(["xacro ", ARG("urdf")]), value_type=str),
                    "use_sim_time": sim_time,
                }
            ],
        ),
        LifecycleNode(
            package="ros_lnn",
            executable="effort_observer",
            **respawn,
            name="effort_observer",
            namespace=ARG("namespace"),
            autostart=False,
            output="screen",
            parameters=[
                {
                    "model_path": ARG("model"),
                    "thresholds": ARG("thresholds"),
                    "gains": ParameterValue(ARG("observer_gains")),
                    "wrench_frame": ARG("wrench_frame"),
                    "use_sim_time": sim_time,
                    "autostart": autostart,
                }
            ],
        ),
        GroupAction(
            condition=IfCondition(ARG("controller")),
            actions=[
                LifecycleNode(
                    package="ros_lnn",
                    executable="dac_controller",
                    **respawn,
                    name="dac_controller",
                    namespace=ARG("namespace"),
                    autostart=False,
                    output="screen",
                    parameters=[
                        ARG("controller_config"),
                        {
                            "model_path": ARG("model"),
                            "law": ARG("law"),
                            "use_sim_time": sim_time,
                            "autostart": autostart,
                        },
                    ],
                ),
                Node(
                    package="ros_lnn",
                    executable="effort_watchdog",
                    **respawn,
                    name="effort_watchdog",
                    namespace=ARG("namespace"),
                    output="screen",
                    parameters=[
                        {
                            "timeout_s": ParameterValue(ARG("watchdog_timeout_s"), value_type=float),
                            "joints": ParameterValue(ARG("joints")),
                        }
                    ],
                    remappings=[
                        ("commands_in", "dac_controller/joint_effort_command"),
                        ("commands_out", ARG("effort_topic")),
                    ],
                ),
            ],
        ),
        Node(
            package="rviz2",
            executable="rviz2",
            namespace=ARG("namespace"),
            condition=IfCondition(ARG("rviz")),
            arguments=["-d", PathJoinSubstitution([SHARE, "config", "arm.rviz"])],
            parameters=[{"use_sim_time": sim_time}],
        ),
    ]


def generate_launch_description():
    return LaunchDescription(
        [
            DeclareLaunchArgument("model", default_value="", description="the arm model (.onnx)"),
            DeclareLaunchArgument("thresholds", default_value="", description="collision thresholds YAML"),
            DeclareLaunchArgument("observer_gains", default_value="[50.0]", description="observer K [1/s]"),
            DeclareLaunchArgument("wrench_frame", default_value="", description="link of ~/external_wrench"),
            DeclareLaunchArgument(
                "urdf", default_value="", description="URDF/xacro for robot_state_publisher (empty: none)"
            ),
            DeclareLaunchArgument("controller", default_value="false", description="also dac_controller"),
            DeclareLaunchArgument(
                "law", default_value="gravity_compensation", description="dac_controller's law"
            ),
            DeclareLaunchArgument(
                "controller_config",
                default_value=PathJoinSubstitution([SHARE, "config", "panda_arm_controller.yaml"]),
                description="dac_controller parameters (gains)",
            ),
            DeclareLaunchArgument(
                "joints", default_value=PANDA_JOINTS, description="the effort controller's joints"
            ),
            DeclareLaunchArgument(
                "effort_topic", default_value="/effort_controller/commands", description="efforts go here"
            ),
            DeclareLaunchArgument(
                "watchdog_timeout_s", default_value="0.1", description="zero efforts after this long"
            ),
            DeclareLaunchArgument("namespace", default_value="", description="namespace of every node"),
            DeclareLaunchArgument("use_sim_time", default_value="false", description="follow /clock"),
            DeclareLaunchArgument(
                "autostart", default_value="true", description="the nodes configure and activate themselves"
            ),
            DeclareLaunchArgument(
                "rviz", default_value=DISPLAY_SET, description="start RViz (default: where a display is set)"
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
