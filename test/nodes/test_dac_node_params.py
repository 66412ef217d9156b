"""dac_controller runs the law its parameters describe: commands equal to the library's DacPipeline built
by keyword from the same YAML (every gain, every law), gains set live (or a set refused with a reason),
parameter files with wildcard keys read under a namespace, prismatic joints."""

from __future__ import annotations

import itertools
import math
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import yaml

from conftest import HAVE_RCLPY, requires_rclpy
from ros_lnn.control.dac import Gains
from ros_lnn.control.pipeline import DacPipeline
from ros_lnn.physics.multibody.build import load_model
from ros_lnn.physics.multibody.urdf import model_from_urdf

pytestmark = [requires_rclpy, pytest.mark.ros]

if HAVE_RCLPY:
    from builtin_interfaces.msg import Duration
    from geometry_msgs.msg import PoseStamped
    from rcl_interfaces.msg import Parameter as ParameterMsg
    from rcl_interfaces.msg import ParameterType, ParameterValue
    from rcl_interfaces.srv import SetParameters
    from rclpy.parameter import Parameter
    from sensor_msgs.msg import JointState
    from std_msgs.msg import Float64MultiArray
    from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

    from _ros_harness import Harness
    from ros_lnn.nodes.dac_chain_sim.node import DacChainSim
    from ros_lnn.nodes.dac_controller.node import DacControllerNode, start
    from ros_lnn.nodes.params import param
    from ros_lnn.nodes.qos import COMMAND_QOS, SENSOR_QOS
    from ros_lnn.nodes.stamps import ns_to_stamp


ROOT = Path(__file__).resolve().parents[2]
URDF = ROOT / "config" / "dac_chain.urdf"
JOINTS = ["joint1", "joint2", "joint3", "joint4", "joint5"]
Q0 = np.array([0.1, -0.7, 1.3, 0.5, 0.3])
QD0 = np.array([0.2, -0.1, 0.3, 0.15, -0.2])
_ns = itertools.count()

#: Every gain a distinct value, none the default: a gain landing in another field changes the command.
GAINS_YAML = dict(
    kd_linear=13.0,
    kd_angular=7.0,
    lambda_position=3.0,
    lambda_attitude=11.0,
    obstacle_gain=2.5,
    task_damping=0.07,
    mass_weighted=True,
)
#: An obstacle next to link4's centre of mass at Q0, so that its field holds control points.
OBSTACLE = [0.45, 0.13, 0.32, 0.03]
LAW_CASES = {
    "velocity": dict(law="velocity"),
    "pose": dict(law="pose"),
    "pose_constant_gains": dict(law="pose", mass_weighted=False),
    "end_effector": dict(
        law="end_effector", ee_attitude=True, obstacles=OBSTACLE, obstacle_influence=0.15, obstacle_eta=4.0
    ),
}


def _write_params(tmp_path, key: str, values: dict) -> Path:
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump({key: {"ros__parameters": values}}))
    return path


def _reference(values: dict) -> DacPipeline:
    """The library's pipeline from the YAML's values, each gain passed by keyword (written out here,
    not through the node's wiring)."""
    model = load_model(URDF)
    gains = Gains(
        kd_linear=values["kd_linear"],
        kd_angular=values["kd_angular"],
        mass_weighted=values["mass_weighted"],
        lambda_position=values["lambda_position"],
        lambda_attitude=values["lambda_attitude"],
        obstacle_gain=values["obstacle_gain"],
        damping=values["task_damping"],
    )
    flat = values.get("obstacles", [])
    obstacles = [(flat[i : i + 3], flat[i + 3]) for i in range(0, len(flat), 4)]
    return DacPipeline(
        model,
        law=values["law"],
        gains=gains,
        ee_link="tool0",
        ee_attitude=values.get("ee_attitude", False),
        obstacles=obstacles,
        obstacle_influence=values.get("obstacle_influence", 0.1),
        obstacle_eta=values.get("obstacle_eta", 5.0),
        effort_limits=[j.effort_limit for j in model.joints if j.kind == "revolute"],
    )


def _joint_state(q, qd, names=JOINTS):
    msg = JointState()
    msg.name, msg.position, msg.velocity = list(names), [float(x) for x in q], [float(x) for x in qd]
    return msg


def _past_trajectory(node, q_goal):
    """A two-point trajectory wholly in the past: the node holds its last point (deterministic in time)."""
    msg = JointTrajectory()
    msg.joint_names = JOINTS
    msg.header.stamp = ns_to_stamp(node.get_clock().now().nanoseconds - 10_000_000_000)
    for k, t in enumerate((0.5, 1.0)):
        pt = JointTrajectoryPoint()
        pt.positions = [float(x) for x in (Q0 + 0.5 * (k + 1) * (q_goal - Q0))]
        pt.time_from_start = Duration(sec=0, nanosec=int(t * 1e9))
        msg.points.append(pt)
    return msg


def _target(position, quat=None):
    """A target; ``quat`` (w, x, y, z) is sent normalised: the node refuses one not of unit length."""
    msg = PoseStamped()
    msg.header.frame_id = "world"
    msg.pose.position.x, msg.pose.position.y, msg.pose.position.z = (float(v) for v in position)
    if quat is not None:
        o = msg.pose.orientation
        o.w, o.x, o.y, o.z = (float(v) for v in np.asarray(quat, float) / np.linalg.norm(quat))
    return msg


Q_GOAL = Q0 + np.array([0.2, -0.15, 0.1, 0.25, -0.3])
EE_GOAL = ([0.48, 0.12, 0.05], [0.9, 0.1, 0.3, -0.2])


def _give_target(h, node, ns, reference, law):
    if law == "end_effector":
        pub = h.publisher(PoseStamped, f"{ns}/dac_controller/ee_target", COMMAND_QOS)
        pub.publish(_target(*EE_GOAL))
        reference.set_ee_target(EE_GOAL[0], EE_GOAL[1])
    else:
        pub = h.publisher(JointTrajectory, f"{ns}/dac_controller/joint_trajectory", COMMAND_QOS)
        pub.publish(_past_trajectory(node, Q_GOAL))
        reference.set_joint_trajectory([0.0, 1.0], [Q0 + 0.5 * (Q_GOAL - Q0), Q_GOAL])
    h.wait(lambda: node.pipeline.has_target, what="target taken")


#: The commands compared here answer one published state; with the default 0.1 s state timeout a
#: loaded runner lets the state go stale (refused by its age) or the watchdog's zero commands arrive
#: around the answer, so these nodes take a minute (the watchdog has tests of its own).
SLOW_WATCHDOG_S = 60.0


def _one_command(h, ns, node, q=Q0, qd=QD0):
    efforts = h.collect(Float64MultiArray, f"{ns}/dac_controller/joint_effort_command", SENSOR_QOS)
    ports = h.collect(Float64MultiArray, f"{ns}/dac_controller/port_command", SENSOR_QOS)
    states = h.publisher(JointState, f"{ns}/joint_states", SENSOR_QOS)
    states.publish(_joint_state(q, qd))
    h.wait(lambda: efforts and ports, what="commands")
    return np.asarray(ports[-1].data), np.asarray(efforts[-1].data)


@pytest.mark.parametrize("case", list(LAW_CASES))
def test_commands_equal_the_library_built_by_keyword_from_the_same_yaml(case, ctx, tmp_path):
    values = {**GAINS_YAML, **LAW_CASES[case]}
    path = _write_params(tmp_path, "/**", values)
    ns = f"/keyword{next(_ns)}"
    node = DacControllerNode(
        namespace=ns,
        context=ctx,
        cli_args=["--ros-args", "--params-file", str(path)],
        parameter_overrides=[
            Parameter("robot_description", value=URDF.read_text()),
            Parameter("state_timeout_s", value=SLOW_WATCHDOG_S),
        ],
    )
    assert start(node), node.last_error
    h = Harness(node, context=ctx)
    try:
        reference = _reference(values)
        _give_target(h, node, ns, reference, values["law"])
        port, effort = _one_command(h, ns, node)
        expected = reference.step(Q0, QD0, t=1e9)
        assert np.allclose(port, expected.result.tau_c, rtol=1e-12, atol=1e-12)
        assert np.allclose(effort, expected.efforts.effort, rtol=1e-12, atol=1e-12)
        if values["law"] == "end_effector":
            assert expected.result.obstacle_potential > 0  # the obstacle term is part of the command
        # every gain this law reads moves the command: a gain wired into another field would fail above
        g = reference.gains
        read = {
            "velocity": ("kd_linear", "kd_angular"),
            "pose": ("kd_linear", "kd_angular", "lambda_position", "lambda_attitude"),
            "end_effector": (
                "kd_linear",
                "kd_angular",
                "lambda_position",
                "lambda_attitude",
                "obstacle_gain",
                "damping",
            ),
        }[values["law"]] + ("mass_weighted",)
        for field in read:
            other = _reference(values)
            value = getattr(g, field)
            other.set_gains(replace(g, **{field: (not value) if isinstance(value, bool) else 1.7 * value}))
            if values["law"] == "end_effector":
                other.set_ee_target(EE_GOAL[0], EE_GOAL[1])
            else:
                other.set_joint_trajectory([0.0, 1.0], [Q0 + 0.5 * (Q_GOAL - Q0), Q_GOAL])
            moved = other.step(Q0, QD0, t=1e9).efforts.requested
            assert np.abs(moved - expected.efforts.requested).max() > 1e-6, field
    finally:
        h.close()


def _set(h, ns, **values):
    """Set parameters through the node's set_parameters service, as `ros2 param set` does."""
    client = h.probe.create_client(SetParameters, f"{ns}/dac_controller/set_parameters")
    assert client.wait_for_service(timeout_sec=10.0)
    request = SetParameters.Request()
    for name, value in values.items():
        pv = ParameterValue()
        if isinstance(value, str):
            pv.type, pv.string_value = ParameterType.PARAMETER_STRING, value
        else:
            pv.type, pv.double_value = ParameterType.PARAMETER_DOUBLE, float(value)
        request.parameters.append(ParameterMsg(name=name, value=pv))
    future = client.call_async(request)
    h.wait(future.done, what="set_parameters answer")
    h.probe.destroy_client(client)
    return future.result().results


def test_a_live_gain_changes_the_command_and_bad_sets_are_refused_with_a_reason(ctx):
    ns = f"/live{next(_ns)}"
    node = DacControllerNode(
        namespace=ns,
        context=ctx,
        parameter_overrides=[
            Parameter("robot_description", value=URDF.read_text()),
            Parameter("state_timeout_s", value=SLOW_WATCHDOG_S),
        ],
    )
    assert start(node), node.last_error
    h = Harness(node, context=ctx)
    try:
        defaults = {
            "kd_linear": 20.0,
            "kd_angular": 20.0,
            "mass_weighted": True,
            "lambda_position": 5.0,
            "lambda_attitude": 5.0,
            "obstacle_gain": 1.0,
            "task_damping": 0.05,
        }
        reference = _reference({**defaults, "law": "end_effector"})
        pub = h.publisher(PoseStamped, f"{ns}/dac_controller/ee_target", COMMAND_QOS)
        pub.publish(_target(EE_GOAL[0]))
        h.wait(lambda: node.pipeline.has_target, what="target")
        reference.set_ee_target(EE_GOAL[0])
        _, before = _one_command(h, ns, node)
        assert np.allclose(before, reference.step(Q0, QD0).efforts.effort, atol=1e-12)

        (result,) = _set(h, ns, kd_linear=99.0)
        assert result.successful, result.reason
        _, after = _one_command(h, ns, node)
        reference.set_gains(replace(reference.gains, kd_linear=99.0))
        assert np.allclose(after, reference.step(Q0, QD0).efforts.effort, atol=1e-12)
        assert np.abs(after - before).max() > 1e-3
        assert node.get_parameter("kd_linear").value == 99.0

        refused = (
            ("kd_linear", -1.0, "must be >"),
            ("kd_linear", math.nan, "finite"),
            ("lambda_position", math.inf, "finite"),
            ("law", "pose", "read at configure"),
            ("obstacle_influence", 0.3, "read at configure"),
        )
        for name, value, words in refused:
            (result,) = _set(h, ns, **{name: value})
            assert not result.successful, (name, value)
            assert words in result.reason and name in result.reason, result.reason
        assert node.get_parameter("kd_linear").value == 99.0 and node.pipeline.gains.kd_linear == 99.0
        assert node.get_parameter("law").value == "end_effector"
        _, again = _one_command(h, ns, node)
        assert np.allclose(again, after, atol=1e-12)  # refused sets changed nothing
    finally:
        h.close()


def test_a_structural_parameter_is_taken_while_unconfigured(ctx):
    node = DacControllerNode(
        namespace=f"/unconf{next(_ns)}",
        context=ctx,
        parameter_overrides=[Parameter("robot_description", value=URDF.read_text())],
    )
    try:
        assert node.set_parameters([Parameter("law", value="pose")])[0].successful
        assert not node.set_parameters([Parameter("law", value="jedi")])[0].successful
        assert start(node) and node.pipeline.law == "pose"
    finally:
        node.destroy_node()


@pytest.mark.parametrize("config", ["dac_demo.yaml", "dac_controller.yaml"])
def test_a_namespaced_start_reads_the_shipped_parameter_files(config, ctx):
    """Wildcard keys: under namespace robot1 the nodes take the file's values, not their defaults."""
    path = ROOT / "config" / config
    doc = yaml.safe_load(path.read_text())
    (key,) = [k for k in doc if k.endswith("dac_controller") or k == "/**"]
    assert key.startswith("/**")
    values = doc[key]["ros__parameters"]
    args = ["--ros-args", "--params-file", str(path)]
    ns = f"/robot1_{next(_ns)}"
    node = DacControllerNode(
        namespace=ns,
        context=ctx,
        cli_args=args,
        parameter_overrides=[Parameter("robot_description", value=URDF.read_text())],
    )
    try:
        for name, value in values.items():
            assert param(node, name) == value, name  # an empty list reads back as [] through param()
        assert start(node), node.last_error
        expected = {
            "kd_linear": values.get("kd_linear", 20.0),
            "kd_angular": values.get("kd_angular", 20.0),
            "lambda_position": values["lambda_position"],
            "lambda_attitude": values.get("lambda_attitude", 5.0),
            "damping": values["task_damping"],
        }
        gains = node.pipeline.gains
        assert {k: getattr(gains, k) for k in expected} == expected
        field = node.pipeline.controller.obstacles
        flat = values.get("obstacles", [])
        assert (len(field.obstacles) if field else 0) == len(flat) // 4
        if config == "dac_demo.yaml":
            assert node.get_parameter("circle_radius").value == 0.12 and node.pipeline.needs_clock
            assert node.get_parameter("frame_id").value == "base_link"
            sim = DacChainSim(namespace=ns, context=ctx, cli_args=args)
            try:
                sim_values = doc["/**/dac_chain_sim"]["ros__parameters"]
                assert np.allclose(sim.q, sim_values["initial_positions"])
                assert sim.dt == pytest.approx(1.0 / sim_values["rate_hz"])
            finally:
                sim.destroy_node()
    finally:
        node.destroy_node()


PRISMATIC_URDF = """<?xml version="1.0"?>
<robot name="slider_arm">
  <link name="base_link"/>
  <link name="carriage"><inertial><origin xyz="0 0 0"/><mass value="2.0"/>
    <inertia ixx="0.01" ixy="0" ixz="0" iyy="0.01" iyz="0" izz="0.01"/></inertial></link>
  <link name="arm"><inertial><origin xyz="0.2 0 0"/><mass value="1.0"/>
    <inertia ixx="0.001" ixy="0" ixz="0" iyy="0.01" iyz="0" izz="0.01"/></inertial></link>
  <link name="tool0"/>
  <joint name="lift" type="prismatic"><parent link="base_link"/><child link="carriage"/>
    <origin xyz="0 0 0.1"/><axis xyz="0 0 1"/>
    <limit lower="0" upper="0.5" effort="80.0" velocity="1"/></joint>
  <joint name="shoulder" type="revolute"><parent link="carriage"/><child link="arm"/>
    <origin xyz="0 0 0.05"/><axis xyz="0 1 0"/>
    <limit lower="-3" upper="3" effort="15.0" velocity="3"/></joint>
  <joint name="tool_joint" type="fixed"><parent link="arm"/><child link="tool0"/>
    <origin xyz="0.4 0 0"/></joint>
</robot>
"""


def test_a_urdf_with_a_prismatic_joint_configures_with_its_effort_limits(ctx):
    ns = f"/slider{next(_ns)}"
    node = DacControllerNode(
        namespace=ns, context=ctx, parameter_overrides=[Parameter("robot_description", value=PRISMATIC_URDF)]
    )
    assert start(node), node.last_error
    h = Harness(node, context=ctx)
    try:
        assert node.pipeline.joint_names == ["lift", "shoulder"]
        assert list(node.pipeline.efforts.limits) == [80.0, 15.0]
        efforts = h.collect(Float64MultiArray, f"{ns}/dac_controller/joint_effort_command", SENSOR_QOS)
        states = h.publisher(JointState, f"{ns}/joint_states", SENSOR_QOS)
        states.publish(_joint_state([0.2, 0.4], [0.1, -0.3], ["lift", "shoulder"]))
        h.wait(lambda: efforts, what="effort")
        model = model_from_urdf(PRISMATIC_URDF, "test")
        reference = DacPipeline(
            model, law="end_effector", ee_link="tool0", effort_limits=[80.0, 15.0], gains=Gains(damping=0.05)
        )
        expected = reference.step(np.array([0.2, 0.4]), np.array([0.1, -0.3])).efforts.effort
        assert np.allclose(efforts[-1].data, expected, atol=1e-12)
        assert abs(efforts[-1].data[0]) > 10.0  # the lift holds the weight of both links
    finally:
        h.close()


def test_an_ee_target_in_a_listed_frame_is_carried_into_the_world_frame(ctx):
    """``target_frames``/``target_frame_poses``: a fixed frame's pose in frame_id (the tf2 fallback where
    tf2_ros is not installed); the reference transform is scipy's."""
    from scipy.spatial.transform import Rotation

    pose = [0.3, -0.2, 0.5, 0.1, 0.2, -0.3, 0.9]  # x, y, z, qx, qy, qz, qw
    node = DacControllerNode(
        namespace=f"/frames{next(_ns)}",
        context=ctx,
        parameter_overrides=[
            Parameter("robot_description", value=URDF.read_text()),
            Parameter("ee_attitude", value=True),
            Parameter("target_frames", value=["camera"]),
            Parameter("target_frame_poses", value=pose),
        ],
    )
    assert start(node), node.last_error
    h = Harness(node, context=ctx)
    try:
        pub = h.publisher(PoseStamped, f"{node.get_namespace()}/dac_controller/ee_target", COMMAND_QOS)
        msg = _target([0.1, 0.05, 0.2], [0.8, 0.2, -0.1, 0.3])
        msg.header.frame_id = "camera"
        pub.publish(msg)
        h.wait(lambda: node.pipeline.has_target, what="target")
        frame = Rotation.from_quat(pose[3:])
        want = frame.apply([0.1, 0.05, 0.2]) + pose[:3]
        got = node.pipeline._ee_target
        assert np.allclose(got.position, want, atol=1e-12)
        want_q = (frame * Rotation.from_quat([0.2, -0.1, 0.3, 0.8])).as_quat()  # x, y, z, w
        got_q = np.roll(got.quat, -1)
        assert np.allclose(got_q * np.sign(got_q[3]), want_q * np.sign(want_q[3]), atol=1e-12)
        before = node.counts["bad_target"]
        msg.header.frame_id = "gripper"
        pub.publish(msg)
        h.wait(lambda: node.counts["bad_target"] > before, what="unknown frame refused")
    finally:
        h.close()
    bad = DacControllerNode(
        namespace=f"/frames{next(_ns)}",
        context=ctx,
        parameter_overrides=[
            Parameter("robot_description", value=URDF.read_text()),
            Parameter("target_frames", value=["camera"]),
            Parameter("target_frame_poses", value=pose[:6]),
        ],
    )
    try:
        bad.trigger_configure()
        assert bad.pipeline is None and "target_frame_poses needs 7" in bad.last_error
    finally:
        bad.destroy_node()
