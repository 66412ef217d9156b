"""ros2_control bring-up of the DAC arm (config/dac_chain_ros2_control.urdf, config/controllers.yaml,
launch/dac_ros2_control.launch.py), checked as far as the pieces install here: the URDF is the DAC arm
plus a valid <ros2_control> block whose joints and interfaces are what the effort controller and the
DAC node use, the controllers.yaml joints match, the DAC node configures from that URDF, and the launch
wires dac_controller -> effort_watchdog -> effort_controller/commands."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest
import yaml
from test_launch_files import (  # noqa: F401 (fixtures)
    ROOT,
    evaluate_launch_file,
    install_prefix,
    setup_kwargs,
)

from conftest import HAVE_RCLPY, requires_rclpy

PLAIN = ROOT / "config" / "dac_chain.urdf"
CONTROL = ROOT / "config" / "dac_chain_ros2_control.urdf"
CONTROLLERS = ROOT / "config" / "controllers.yaml"


def canonical(element) -> tuple:
    """An element without formatting whitespace: tag, attributes, text, children."""
    return (
        element.tag,
        sorted(element.attrib.items()),
        (element.text or "").strip(),
        [canonical(child) for child in element],
    )


def movable_joints(robot) -> list[str]:
    return [j.get("name") for j in robot.findall("joint") if j.get("type") != "fixed"]


def test_the_ros2_control_urdf_is_the_dac_arm_plus_its_ros2_control_block():
    plain, control = ET.parse(PLAIN).getroot(), ET.parse(CONTROL).getroot()
    blocks = control.findall("ros2_control")
    assert len(blocks) == 1
    control.remove(blocks[0])
    assert canonical(control) == canonical(plain), "dac_chain_ros2_control.urdf drifted from dac_chain.urdf"


def test_ros2_control_block_commands_effort_and_reports_state_for_every_joint():
    robot = ET.parse(CONTROL).getroot()
    block = robot.find("ros2_control")
    assert block.get("type") == "system"
    assert block.find("hardware/plugin").text.strip() == "mock_components/GenericSystem"
    joints = block.findall("joint")
    assert [j.get("name") for j in joints] == movable_joints(robot)
    for joint in joints:
        assert [c.get("name") for c in joint.findall("command_interface")] == ["effort"]
        assert [s.get("name") for s in joint.findall("state_interface")] == ["position", "velocity", "effort"]
    # the mock arm starts at the DAC demo's pose, away from the stretched-out singular configuration
    initial = [
        float(j.find("state_interface[@name='position']/param[@name='initial_value']").text) for j in joints
    ]
    demo = yaml.safe_load((ROOT / "config" / "dac_demo.yaml").read_text())
    assert initial == demo["/**/dac_chain_sim"]["ros__parameters"]["initial_positions"]


def test_controllers_yaml_matches_the_ros2_control_joints():
    config = yaml.safe_load(CONTROLLERS.read_text())
    manager = config["controller_manager"]["ros__parameters"]
    assert manager["joint_state_broadcaster"]["type"] == "joint_state_broadcaster/JointStateBroadcaster"
    assert manager["effort_controller"]["type"] == "effort_controllers/JointGroupEffortController"
    assert manager["update_rate"] > 0
    control_joints = [j.get("name") for j in ET.parse(CONTROL).getroot().findall("ros2_control/joint")]
    assert config["effort_controller"]["ros__parameters"]["joints"] == control_joints


@requires_rclpy
def test_dac_controller_configures_from_the_ros2_control_urdf_with_the_controllers_joint_order(ctx):
    from rclpy.parameter import Parameter

    from ros_lnn.nodes.dac_controller.node import DacControllerNode, start

    joints = yaml.safe_load(CONTROLLERS.read_text())["effort_controller"]["ros__parameters"]["joints"]
    node = DacControllerNode(
        namespace="/ros2_control_urdf",
        context=ctx,
        parameter_overrides=[
            Parameter("robot_description", value=CONTROL.read_text()),
            Parameter("joint_names", value=joints),
        ],
    )
    try:
        assert start(node)
        assert node.pipeline is not None and len(node.pipeline.joint_names) == len(joints)
        assert list(node.pipeline.joint_names) == joints
    finally:
        node.destroy_node()


@pytest.mark.skipif(not HAVE_RCLPY, reason="the node modules import rclpy")
@pytest.mark.parametrize("overrides", [{}, {"watchdog_timeout_s": "0.25", "rviz": "true"}])
def test_launch_wires_the_controller_through_the_watchdog(overrides, install_prefix, monkeypatch):  # noqa: F811
    nodes = evaluate_launch_file(
        ROOT / "launch" / "dac_ros2_control.launch.py", install_prefix, overrides, monkeypatch
    )
    by_exe = {n["executable"]: n for n in nodes}
    share = install_prefix / "share" / "ros_lnn"
    description = CONTROL.read_text()
    config = yaml.safe_load(CONTROLLERS.read_text())
    joints = config["effort_controller"]["ros__parameters"]["joints"]

    assert by_exe["robot_state_publisher"]["parameters"] == [{"robot_description": description}]
    manager = by_exe["ros2_control_node"]
    assert manager["package"] == "controller_manager" and manager["parameters"] == [
        str(share / "config" / "controllers.yaml")
    ]
    assert ("~/robot_description", "/robot_description") in manager["remappings"]
    spawner = by_exe["spawner"]
    spawned = [a for a in spawner["arguments"] if not a.startswith("-") and a != "/controller_manager"]
    assert sorted(spawned) == sorted(
        k
        for k, v in config["controller_manager"]["ros__parameters"].items()
        if isinstance(v, dict) and "type" in v
    )

    dac = by_exe["dac_controller"]
    assert dac["lifecycle"] and not dac["autostart"]  # launch_ros does nothing: the node brings itself up
    assert dac["name"] == "dac_controller" and dac["namespace"] == ""
    dac_params = {k: v for p in dac["parameters"] if isinstance(p, dict) for k, v in p.items()}
    assert dac_params["robot_description"] == description and dac_params["joint_names"] == joints
    assert dac_params["autostart"] is True  # it brings itself up, after a respawn too
    watchdog = by_exe["effort_watchdog"]
    assert watchdog["parameters"] == [
        {"timeout_s": float(overrides.get("watchdog_timeout_s", "0.1")), "joints": joints}
    ]
    remap = dict(watchdog["remappings"])
    assert remap["commands_in"] == f"/{dac['name']}/joint_effort_command"  # the node's ~/joint_effort_command
    assert remap["commands_out"] == "/effort_controller/commands"  # the controller's ~/commands
    assert ("rviz2" in by_exe) == (overrides.get("rviz") == "true")
