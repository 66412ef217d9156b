"""The ServoLNN estimator alone, for a robot that publishes joint_states (and optionally servo_commands).

    ros2 launch ros_lnn estimator.launch.py [config:=<yaml>] [model:=<onnx>] [namespace:=<ns>]
        [use_sim_time:=false] [autostart:=true] [servo_commands:=servo_commands] [rviz:=false] [urdf:=<file>]

config          parameter file (default: share/ros_lnn/config/crane.yaml)
model           ONNX model overriding the config's model_path (default: the config's)
autostart       true: the lifecycle node configures and activates itself (its autostart parameter; a failed
                configure leaves it unconfigured, with one error line); false: drive it with a lifecycle
                manager
servo_commands  the topic the estimator takes servo commands from
rviz            also start RViz with config/ros_lnn.rviz and robot_state_publisher with ``urdf``
"""

from launch.actions import DeclareLaunchArgument, GroupAction
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


def servo_lnn(model_given: bool) -> LifecycleNode:
    """One of two variants, exactly one of which runs: ``model_path`` is overridden only when model:= is
    given (an empty override would replace the config's model with the shipped one). The node configures
    and activates itself (its ``autostart`` parameter), so launch_ros's lifecycle autostart, which could
    leave a node inactive (ros2/launch_ros#445), is not used."""
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
        autostart=False,
        remappings=[("servo_commands", ARG("servo_commands"))],
        condition=IfCondition(NotSubstitution(no_model) if model_given else no_model),
        output="screen",
    )


def generate_launch_description():
    sim_time = ParameterValue(ARG("use_sim_time"), value_type=bool)
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
            servo_lnn(model_given=True),
            servo_lnn(model_given=False),
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
    )
