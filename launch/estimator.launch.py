"""The ServoLNN estimator alone, for a robot that publishes joint_states (and optionally servo_commands).

    ros2 launch ros_lnn estimator.launch.py [config:=<yaml>] [model:=<onnx>] [namespace:=<ns>]
        [use_sim_time:=false] [autostart:=true] [servo_commands:=servo_commands] [rviz:=false] [urdf:=<file>]
        [respawn:=true] [respawn_delay:=1.0]

config          parameter file (default: share/ros_lnn/config/crane.yaml)
model           ONNX model overriding the config's model_path (default: the config's)
autostart       true: the lifecycle node configures and activates itself (its autostart parameter), at
                every start, a respawn too (a failed configure leaves it unconfigured, with one error
                line); false: drive it with a lifecycle manager
servo_commands  the topic the estimator takes servo commands from
rviz            also start RViz with config/ros_lnn.rviz and robot_state_publisher with ``urdf``
respawn         start a node again when its process dies (killed, crashed), with the same parameters,
                respawn_delay seconds later (launch takes the delay as a number: read in nodes())
"""

from launch.actions import DeclareLaunchArgument, GroupAction, OpaqueFunction
from launch.conditions import IfCondition
from launch.substitutions import (
    EqualsSubstitution,
    FileContent,
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


def servo_lnn(model_given: bool, respawn: dict) -> LifecycleNode:
    """One of two variants, exactly one of which runs: ``model_path`` is overridden only when model:= is
    given (an empty override would replace the config's model with the shipped one). The node brings
    itself up (its autostart parameter), so a respawned process comes back active on its own."""
    overrides = {
        "use_sim_time": ParameterValue(ARG("use_sim_time"), value_type=bool),
        "autostart": ParameterValue(ARG("autostart"), value_type=bool),
    }
    if model_given:
        overrides["model_path"] = ARG("model")
    no_model = EqualsSubstitution(ARG("model"), "")
    return LifecycleNode(
        package="ros_lnn",
        executable="servo_lnn",
        name="servo_lnn",
        namespace=ARG("namespace"),
        parameters=[ARG("config"), overrides],
        remappings=[("servo_commands", ARG("servo_commands"))],
        condition=IfCondition(NotSubstitution(no_model) if model_given else no_model),
        output="screen",
        **respawn,
    )


def respawning(context) -> dict:
    """launch's respawn keywords from the respawn arguments (respawn_delay: a number, not a substitution)."""
    return {"respawn": ARG("respawn"), "respawn_delay": float(ARG("respawn_delay").perform(context))}


def nodes(context):
    respawn = respawning(context)
    sim_time = ParameterValue(ARG("use_sim_time"), value_type=bool)
    return [
        servo_lnn(True, respawn),
        servo_lnn(False, respawn),
        GroupAction(
            condition=IfCondition(ARG("rviz")),
            actions=[
                Node(
                    package="robot_state_publisher",
                    executable="robot_state_publisher",
                    namespace=ARG("namespace"),
                    parameters=[
                        {
                            "robot_description": ParameterValue(FileContent(ARG("urdf")), value_type=str),
                            "use_sim_time": sim_time,
                        }
                    ],
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
                "config",
                default_value=PathJoinSubstitution([SHARE, "config", "crane.yaml"]),
                description="parameter YAML for servo_lnn",
            ),
            DeclareLaunchArgument("model", default_value="", description="ONNX model (overrides the config)"),
            DeclareLaunchArgument("namespace", default_value="", description="namespace of the node(s)"),
            DeclareLaunchArgument("use_sim_time", default_value="false", description="follow /clock"),
            DeclareLaunchArgument(
                "autostart", default_value="true", description="the node configures and activates itself"
            ),
            DeclareLaunchArgument(
                "servo_commands", default_value="servo_commands", description="topic of the servo commands"
            ),
            DeclareLaunchArgument(
                "rviz", default_value="false", description="start RViz + robot_state_publisher"
            ),
            DeclareLaunchArgument(
                "urdf",
                default_value=PathJoinSubstitution([SHARE, "config", "crane.urdf"]),
                description="robot model for robot_state_publisher (with rviz:=true)",
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
