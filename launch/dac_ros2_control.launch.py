"""ros2_control bring-up of the DAC arm with mock hardware: controller_manager, joint_state_broadcaster,
an effort controller and dac_controller commanding it, with a watchdog between the two.

    ros2 launch ros_lnn dac_ros2_control.launch.py [urdf:=<file>] [controllers:=<yaml>] [config:=<yaml>]
        [watchdog_timeout_s:=0.1] [rviz:=false] [respawn:=true] [respawn_delay:=1.0]

urdf                 the arm with its <ros2_control> description (default config/dac_chain_ros2_control.urdf,
                     mock_components/GenericSystem: replace the plugin by the robot's hardware interface)
controllers          controller_manager parameters (default config/controllers.yaml: joint_state_broadcaster,
                     effort_controller = effort_controllers/JointGroupEffortController)
config               dac_controller parameters (default config/dac_controller.yaml)
watchdog_timeout_s   effort_watchdog sends zeros to effort_controller/commands when dac_controller's
                     efforts stop for this long (the effort controller would hold the last one forever)
respawn              start a node again when its process dies, respawn_delay seconds later, with the
                     same parameters: dac_controller comes back active by itself (its autostart
                     parameter) while the watchdog holds zero efforts; not the spawner (it runs once)
                     nor RViz

Topics: /joint_states (joint_state_broadcaster) -> dac_controller -> /dac_controller/joint_effort_command
-> effort_watchdog -> /effort_controller/commands. Needs ROS_LNN_BRINGUP=1 rosdep keys (package.xml).
"""

from launch.actions import DeclareLaunchArgument, OpaqueFunction
from launch.conditions import IfCondition
from launch.substitutions import FileContent, LaunchConfiguration, PathJoinSubstitution
from launch_ros.actions import LifecycleNode, Node
from launch_ros.parameter_descriptions import ParameterValue
from launch_ros.substitutions import FindPackageShare

from launch import LaunchDescription

SHARE = FindPackageShare("ros_lnn")
ARG = LaunchConfiguration
#: The effort controller's joints, in its order (config/controllers.yaml).
JOINTS = ["joint1", "joint2", "joint3", "joint4", "joint5"]


def respawning(context) -> dict:
    """launch's respawn keywords from the respawn arguments (respawn_delay: a number, not a substitution)."""
    return {"respawn": ARG("respawn"), "respawn_delay": float(ARG("respawn_delay").perform(context))}


def nodes(context):
    respawn = respawning(context)
    description = ParameterValue(FileContent(ARG("urdf")), value_type=str)
    return [
        Node(
            package="robot_state_publisher",
            executable="robot_state_publisher",
            parameters=[{"robot_description": description}],
            **respawn,
        ),
        # controller_manager reads the description from robot_state_publisher's /robot_description
        Node(
            package="controller_manager",
            executable="ros2_control_node",
            parameters=[ARG("controllers")],
            remappings=[("~/robot_description", "/robot_description")],
            output="screen",
            **respawn,
        ),
        Node(
            package="controller_manager",
            executable="spawner",
            arguments=[
                "joint_state_broadcaster",
                "effort_controller",
                "--controller-manager",
                "/controller_manager",
            ],
        ),
        LifecycleNode(
            package="ros_lnn",
            executable="dac_controller",
            name="dac_controller",
            namespace="",
            output="screen",
            parameters=[
                ARG("config"),
                {"robot_description": description, "joint_names": JOINTS, "autostart": True},
            ],
            **respawn,
        ),
        Node(
            package="ros_lnn",
            executable="effort_watchdog",
            name="effort_watchdog",
            output="screen",
            parameters=[
                {
                    "timeout_s": ParameterValue(ARG("watchdog_timeout_s"), value_type=float),
                    "joints": JOINTS,
                }
            ],
            remappings=[
                ("commands_in", "/dac_controller/joint_effort_command"),
                ("commands_out", "/effort_controller/commands"),
            ],
            **respawn,
        ),
        Node(
            package="rviz2",
            executable="rviz2",
            condition=IfCondition(ARG("rviz")),
            arguments=["-d", PathJoinSubstitution([SHARE, "config", "dac_demo.rviz"])],
        ),
    ]


def generate_launch_description():
    return LaunchDescription(
        [
            DeclareLaunchArgument(
                "urdf",
                default_value=PathJoinSubstitution([SHARE, "config", "dac_chain_ros2_control.urdf"]),
                description="URDF with the <ros2_control> description",
            ),
            DeclareLaunchArgument(
                "controllers",
                default_value=PathJoinSubstitution([SHARE, "config", "controllers.yaml"]),
                description="controller_manager parameters",
            ),
            DeclareLaunchArgument(
                "config",
                default_value=PathJoinSubstitution([SHARE, "config", "dac_controller.yaml"]),
                description="dac_controller parameters",
            ),
            DeclareLaunchArgument(
                "watchdog_timeout_s",
                default_value="0.1",
                description="zero efforts after this long without a command",
            ),
            DeclareLaunchArgument("rviz", default_value="false", description="start RViz"),
            DeclareLaunchArgument(
                "respawn", default_value="true", description="start a node again when its process dies"
            ),
            DeclareLaunchArgument(
                "respawn_delay", default_value="1.0", description="seconds before a dead node starts again"
            ),
            OpaqueFunction(function=nodes),
        ]
    )
