"""Safety stops of the nodes over real DDS (issue 23): with ``use_sim_time``, ``/clock`` and the inputs
stop together (a crashed simulator) and the stops still fire on the steady clock — dac_controller sends
zero efforts within ``state_timeout_s``, servo_lnn's /diagnostics go on and say stale (ERROR); a ROS
clock that has not started holds outputs (counted) instead of skipping the age check; a declared
parameter cannot be deleted; strings have a length bound; ``latency_log`` writes exactly the name
given, and refuses a FIFO, a device and a missing directory."""

from __future__ import annotations

import itertools
import os
import time
from pathlib import Path

import pytest

from conftest import HAVE_RCLPY, requires_rclpy

pytestmark = [requires_rclpy, pytest.mark.ros]

if HAVE_RCLPY:
    from builtin_interfaces.msg import Time
    from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus
    from rclpy.parameter import Parameter
    from rclpy.serialization import deserialize_message
    from rosgraph_msgs.msg import Clock as ClockMsg
    from sensor_msgs.msg import JointState
    from std_msgs.msg import Float64MultiArray

    from _ros_harness import Harness
    from ros_lnn.nodes.dac_controller.node import DacControllerNode
    from ros_lnn.nodes.dac_controller.node import start as start_dac
    from ros_lnn.nodes.qos import SENSOR_QOS
    from ros_lnn.nodes.servo_lnn.node import ServoLnnNode
    from ros_lnn.nodes.servo_lnn.node import start as start_servo

ROOT = Path(__file__).resolve().parents[2]
URDF = ROOT / "config" / "dac_chain.urdf"
ARM = ["joint1", "joint2", "joint3", "joint4", "joint5"]
Q0 = [0.1, -0.7, 1.3, 0.5, 0.3]
CRANE = ["pendulum_joint", "cart_joint"]
STATE_TIMEOUT = 0.3
_ns = itertools.count()


def _time(ns: int) -> Time:
    return Time(sec=ns // 1_000_000_000, nanosec=ns % 1_000_000_000)


def _dac(ctx, **params) -> DacControllerNode:
    overrides = [
        Parameter("robot_description", value=URDF.read_text()),
        Parameter("state_timeout_s", value=STATE_TIMEOUT),
        Parameter("watchdog_period_s", value=0.02),
        Parameter("diagnostics_period_s", value=0.1),
    ] + [Parameter(k, value=v) for k, v in params.items()]
    node = DacControllerNode(namespace=f"/safe{next(_ns)}", context=ctx, parameter_overrides=overrides)
    assert start_dac(node), node.last_error
    return node


def _arm_state(stamp_ns: int) -> JointState:
    msg = JointState(name=list(ARM), position=list(Q0), velocity=[0.0] * 5)
    msg.header.stamp = _time(stamp_ns)
    return msg


def test_dac_controller_zeroes_on_the_steady_clock_when_clock_and_states_stop(ctx):
    node = _dac(ctx, use_sim_time=True)
    ns = node.get_namespace()
    h = Harness(node, context=ctx)
    try:
        efforts = []
        h.probe.create_subscription(
            Float64MultiArray,
            f"{ns}/dac_controller/joint_effort_command",
            lambda m: efforts.append((time.monotonic(), list(m.data))),
            SENSOR_QOS,
        )
        clock = h.publisher(ClockMsg, "/clock", 10)
        states = h.publisher(JointState, f"{ns}/joint_states", SENSOR_QOS)
        # when the node itself published each command: the window below is the node's, not the probe's
        published = []
        forward = node._pubs["effort"].publish

        def publish(m):  # the controller's outputs go out serialized
            data = deserialize_message(m, Float64MultiArray).data if isinstance(m, bytes) else m.data
            published.append((time.monotonic(), list(data)))
            forward(m)

        node._pubs["effort"].publish = publish
        sim_ns = 5_000_000_000
        for _ in range(60):  # 0.6 s of a running simulator: /clock and stamped states
            sim_ns += 10_000_000
            clock.publish(ClockMsg(clock=_time(sim_ns)))
            time.sleep(0.002)
            states.publish(_arm_state(sim_ns))
            time.sleep(0.008)
        stopped = time.monotonic()
        h.wait(lambda: node.counts["processed"] > 10, 60, "more than ten states processed")
        assert any(any(v) for _, v in efforts), "the controller never sent a non-zero effort"
        h.wait(lambda: any(t > stopped and not any(v) for t, v in efforts), 5, "zero efforts after the stop")
        first = next(t for t, v in efforts if t > stopped and not any(v))
        # from the node's receipt of the last state to its first zeros (a loaded runner's delivery of that
        # state, or of the zeros to the probe, is no part of the controller's state timeout)
        last = node.last_state_time
        sent_zero = next(t for t, v in list(published) if t > last and not any(v))
        # not before the timeout (how soon after it is ros-lnn bench fault's missed-stop figure)
        assert sent_zero - last >= STATE_TIMEOUT, f"zeros {sent_zero - last:.3f} s after the last state"
        assert node.get_clock().now().nanoseconds == sim_ns, "the ROS clock should have stopped"
        h.wait(lambda: node.counts["stale_state"] >= 5, 5, "zeros repeated while stopped")
        assert all(not any(v) for t, v in efforts if t > first)
    finally:
        h.close()


def test_dac_controller_holds_while_the_ros_clock_has_not_started(ctx):
    """use_sim_time and no /clock: no age can be judged; every state is answered by zero efforts."""
    node = _dac(ctx, use_sim_time=True)
    ns = node.get_namespace()
    h = Harness(node, context=ctx)
    try:
        efforts = h.collect(Float64MultiArray, f"{ns}/dac_controller/joint_effort_command", SENSOR_QOS)
        states = h.publisher(JointState, f"{ns}/joint_states", SENSOR_QOS)
        wall = time.time_ns()
        for _ in range(10):
            states.publish(_arm_state(wall - 3600 * 10**9))  # an hour-old stamp
            time.sleep(0.01)
        h.wait(lambda: node.counts["clock_not_started"] >= 5, 5, "states held while the clock is at zero")
        assert node.counts["processed"] == 0
        with h.lock:
            assert efforts and all(not any(m.data) for m in efforts)
    finally:
        h.close()


def _servo(ctx, **params) -> ServoLnnNode:
    overrides = [
        Parameter("diagnostics_period_s", value=0.1),
        Parameter("input_timeout_s", value=STATE_TIMEOUT),
    ] + [Parameter(k, value=v) for k, v in params.items()]
    node = ServoLnnNode(namespace=f"/safe{next(_ns)}", context=ctx, parameter_overrides=overrides)
    assert start_servo(node), node.last_error
    return node


def _crane_state(stamp_ns: int, k: int) -> JointState:
    import math

    t = 0.005 * k
    msg = JointState(
        name=list(CRANE),
        position=[0.3 * math.sin(1.3 * t) + 0.1, 0.2 * math.sin(4.4 * t)],
        velocity=[0.39 * math.cos(1.3 * t), 0.88 * math.cos(4.4 * t)],
        effort=[0.0, 0.0],
    )
    msg.header.stamp = _time(stamp_ns)
    return msg


def test_servo_lnn_diagnostics_go_on_and_say_stale_while_clock_is_stopped(ctx):
    node = _servo(ctx, use_sim_time=True)
    ns = node.get_namespace()
    h = Harness(node, context=ctx)
    try:
        statuses = []
        name = node.get_fully_qualified_name()
        h.probe.create_subscription(
            DiagnosticArray,
            "/diagnostics",
            lambda m: statuses.extend(
                (time.monotonic(), s.level, s.message) for s in m.status if s.name == name
            ),
            10,
        )
        clock = h.publisher(ClockMsg, "/clock", 10)
        states = h.publisher(JointState, f"{ns}/joint_states", SENSOR_QOS)
        sim_ns = 7_000_000_000
        for k in range(80):
            sim_ns += 5_000_000
            clock.publish(ClockMsg(clock=_time(sim_ns)))
            time.sleep(0.002)
            states.publish(_crane_state(sim_ns, k))
            time.sleep(0.003)
        stopped = time.monotonic()
        h.wait(lambda: node.counts["processed"] > 10, 60, "more than ten states processed")
        stale = DiagnosticStatus.ERROR
        h.wait(
            lambda: any(
                t > stopped + STATE_TIMEOUT and lv == stale and "stale" in m for t, lv, m in statuses
            ),
            5,
            "a stale ERROR in /diagnostics while /clock is stopped",
        )
        n = len(statuses)
        h.wait(lambda: len(statuses) >= n + 3, 5, "diagnostics repeated while /clock is stopped")
        assert node.get_clock().now().nanoseconds == sim_ns
    finally:
        h.close()


def test_servo_lnn_holds_hour_old_states_when_sim_time_is_switched_on_live(ctx):
    node = _servo(ctx)
    ns = node.get_namespace()
    h = Harness(node, context=ctx)
    try:
        outputs = h.collect(JointState, f"{ns}/servo_lnn/driving_force", SENSOR_QOS)
        states = h.publisher(JointState, f"{ns}/joint_states", SENSOR_QOS)
        assert node.set_parameters([Parameter("use_sim_time", value=True)])[0].successful
        old = time.time_ns() - 3600 * 10**9
        for k in range(20):
            states.publish(_crane_state(old + k * 5_000_000, k))
            time.sleep(0.005)
        h.wait(lambda: node.counts["clock_not_started"] >= 5, 5, "states held while the clock is at zero")
        assert node.counts["processed"] == 0
        with h.lock:
            assert not outputs
    finally:
        h.close()


@pytest.mark.parametrize("name", ["marker_frames", "free_joint_forces", "frame_id", "model_path"])
def test_servo_lnn_refuses_a_delete_and_stays_configurable(ctx, name):
    node = _servo(ctx)
    try:
        result = node.set_parameters([Parameter(name)])[0]  # type NOT_SET: ros2 param delete
        assert not result.successful and "cannot be deleted" in result.reason
        assert node.has_parameter(name)
        node.trigger_deactivate()
        node.trigger_cleanup()
        assert start_servo(node), node.last_error
    finally:
        node.destroy_node()


@pytest.mark.parametrize("name", ["gravity", "residual_limit", "frame_id", "kd_linear"])
def test_dac_controller_refuses_a_delete(ctx, name):
    node = _dac(ctx)
    try:
        result = node.set_parameters([Parameter(name)])[0]
        assert not result.successful and "cannot be deleted" in result.reason
        assert node.has_parameter(name)
        assert node.set_parameters([Parameter("kd_linear", value=25.0)])[0].successful
    finally:
        node.destroy_node()


def test_strings_have_a_length_bound(ctx):
    node = _servo(ctx)
    try:
        result = node.set_parameters([Parameter("frame_id", value="f" * (1 << 20))])[0]
        assert not result.successful and "at most 1024" in result.reason
        assert len(result.reason) < 200
        assert node.set_parameters([Parameter("frame_id", value="f" * 1024)])[0].successful
    finally:
        node.destroy_node()


def _configure_with_log(ctx, path) -> tuple:
    node = ServoLnnNode(
        namespace=f"/safe{next(_ns)}", context=ctx, parameter_overrides=[Parameter("latency_log", value=path)]
    )
    ok = start_servo(node)
    return node, ok


def test_latency_log_is_written_under_exactly_its_name(ctx, tmp_path):
    import numpy as np

    from ros_lnn.nodes.servo_lnn.node import write_latency_log

    path = tmp_path / "lat.log"
    node, ok = _configure_with_log(ctx, str(path))
    try:
        assert ok, node.last_error
        write_latency_log(node)
        assert path.is_file() and not (tmp_path / "lat.log.npz").exists()
        assert "processed" in np.load(path).files
    finally:
        node.destroy_node()


@pytest.mark.parametrize("kind", ["fifo", "device", "missing_directory", "directory"])
def test_latency_log_refuses_what_is_not_a_regular_file(ctx, tmp_path, kind):
    path = {
        "fifo": tmp_path / "log.npz",
        "device": Path("/dev/null"),
        "missing_directory": tmp_path / "nowhere" / "log.npz",
        "directory": tmp_path,
    }[kind]
    if kind == "fifo":
        os.mkfifo(path)
    node, ok = _configure_with_log(ctx, str(path))
    try:
        assert not ok
        assert "latency_log" in node.last_error
    finally:
        node.destroy_node()
    assert not Path("/dev/null.npz").exists()


def _target(x, y, z):
    from geometry_msgs.msg import PoseStamped

    msg = PoseStamped()
    msg.header.frame_id = "world"
    msg.pose.position.x, msg.pose.position.y, msg.pose.position.z = float(x), float(y), float(z)
    return msg


def _dac_rig(ctx, **params):
    from geometry_msgs.msg import PoseStamped
    from trajectory_msgs.msg import JointTrajectory

    from ros_lnn.nodes.qos import COMMAND_QOS

    node = _dac(ctx, **params)
    ns = node.get_namespace()
    h = Harness(node, context=ctx)
    base = f"{ns}/dac_controller"
    io = {
        "efforts": h.collect(Float64MultiArray, f"{base}/joint_effort_command", SENSOR_QOS),
        "states": h.publisher(JointState, f"{ns}/joint_states", SENSOR_QOS),
        "target": h.publisher(PoseStamped, f"{base}/ee_target", COMMAND_QOS),
        "trajectory": h.publisher(JointTrajectory, f"{base}/joint_trajectory", COMMAND_QOS),
    }
    return node, h, io


@pytest.mark.parametrize("xyz", [(1e300, 0, 0), (5.0, 0.0, 0.0), (0.0, 0.0, -1.3)])
def test_dac_controller_refuses_targets_beyond_the_arms_reach(ctx, xyz):
    """The chain's reach is 1.05 m from its first joint (0, 0, 0.05) (sampled FK reaches 1.035 m)."""
    node, h, io = _dac_rig(ctx)
    try:
        io["target"].publish(_target(*xyz))
        h.wait(lambda: node.counts["bad_target"] == 1, 5, "the target refused")
        assert not node.pipeline.has_target
        io["target"].publish(_target(0.3, 0.1, 0.5))  # within reach: taken
        h.wait(lambda: node.pipeline.has_target, 5, "a target within reach")
        assert node.counts["bad_target"] == 1
    finally:
        h.close()


@pytest.mark.parametrize(
    "quat", [(0.0, 0.0, 0.0, 0.0), (1e-12, 0.0, 0.0, 0.0), (0.5, 0.0, 0.0, 0.0), (1.0, 1.0, 0.0, 0.0)]
)
def test_dac_controller_with_ee_attitude_refuses_a_target_that_is_no_unit_quaternion(ctx, quat):
    """ee_attitude tracks the orientation: (0, 0, 0, 0) (a PoseStamped's default) and norms away from 1
    are refused at receipt (bad_target, one log line); a unit quaternion is taken and normalised."""
    node, h, io = _dac_rig(ctx, ee_attitude=True)
    try:
        logged = []
        real_warning = node.get_logger().warning
        node.get_logger().warning = lambda text, **kw: (logged.append(text), real_warning(text, **kw))
        msg = _target(0.3, 0.1, 0.5)
        o = msg.pose.orientation
        o.w, o.x, o.y, o.z = quat
        io["target"].publish(msg)
        h.wait(lambda: node.counts["bad_target"] == 1, 5, "the target refused")
        assert not node.pipeline.has_target
        refused = [text for text in logged if "bad_target" in text]
        assert len(refused) == 1 and "unit quaternion" in refused[0], logged
        o.w, o.x, o.y, o.z = (0.0, 0.0, 0.7071068, 0.7071068)  # within tf2's tolerance of unit length
        io["target"].publish(msg)
        h.wait(lambda: node.pipeline.has_target, 5, "a unit quaternion taken")
        assert node.counts["bad_target"] == 1
        target = node.pipeline._ee_target
        assert target.quat is not None and abs(float((target.quat**2).sum()) - 1.0) < 1e-12
    finally:
        h.close()


def test_dac_controller_without_ee_attitude_takes_a_position_target_with_no_orientation(ctx):
    node, h, io = _dac_rig(ctx)
    try:
        io["target"].publish(_target(0.3, 0.1, 0.5))  # orientation (0, 0, 0, 0): position only
        h.wait(lambda: node.pipeline.has_target, 5, "the target")
        assert node.counts["bad_target"] == 0 and node.pipeline._ee_target.quat is None
    finally:
        h.close()


def test_dac_controller_counts_inputs_its_law_does_not_use_and_logs_once(ctx):
    from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

    node, h, io = _dac_rig(ctx)  # law end_effector: trajectories are not its input
    try:
        logged = []
        real_warning = node.get_logger().warning
        node.get_logger().warning = lambda text, **kw: (logged.append(text), real_warning(text, **kw))
        point = JointTrajectoryPoint(positions=list(Q0))
        for _ in range(3):
            io["trajectory"].publish(JointTrajectory(joint_names=list(ARM), points=[point]))
        h.wait(lambda: node.counts["unused_input"] == 3, 5, "three unused trajectories counted")
        assert sum("~/joint_trajectory ignored" in text for text in logged) == 1
    finally:
        h.close()


@pytest.mark.parametrize("reaction", ["brake", "zero"])
def test_sustained_saturation_is_an_error_and_stops_the_arm(ctx, reaction):
    """Effort limits far below what a distant (reachable) target needs: after saturation_timeout_s the
    controller trips: /diagnostics ERROR naming the cause, latched until re-activation: the protective
    stop holds the arm at rest against gravity within the effort limits (brake, the default: the
    gravity torque of the URDF at the state, by Pinocchio, clipped to ±0.01), or zero efforts."""
    import numpy as np
    import pinocchio as pin

    node, h, io = _dac_rig(ctx, effort_limits=[0.01] * 5, saturation_timeout_s=0.3, fault_reaction=reaction)
    model = pin.buildModelFromXML(URDF.read_text())
    held = np.clip(pin.computeGeneralizedGravity(model, model.createData(), np.array(Q0)), -0.01, 0.01)
    expected = held if reaction == "brake" else np.zeros(5)
    try:
        statuses = []
        name = node.get_fully_qualified_name()
        h.probe.create_subscription(
            DiagnosticArray,
            "/diagnostics",
            lambda m: statuses.extend((s.level, s.message) for s in m.status if s.name == name),
            10,
        )
        io["target"].publish(_target(0.5, 0.3, 0.2))
        h.wait(lambda: node.pipeline.has_target, 5, "the target")
        deadline = time.monotonic() + 60  # the saturation is timed on the node's clock: only its start waits
        while not node.counts["fault"] and time.monotonic() < deadline:
            io["states"].publish(_arm_state(time.time_ns()))
            time.sleep(0.01)
        assert node.counts["fault"] == 1, node.counts
        n = len(io["efforts"])
        for _ in range(20):
            io["states"].publish(_arm_state(time.time_ns()))
            time.sleep(0.01)
        h.wait(lambda: len(io["efforts"]) >= n + 15, 5, "efforts after the fault")
        with h.lock:  # the last ones: a command computed before the trip can still be on its way at n
            after = [np.asarray(m.data) for m in io["efforts"][-10:]]
        for effort in after:
            np.testing.assert_allclose(effort, expected, rtol=1e-9, atol=1e-12)
        latched = "protective stop" if reaction == "brake" else "zero efforts"
        error = DiagnosticStatus.ERROR
        h.wait(
            lambda: any(lv == error and "limits" in m and latched in m for lv, m in statuses),
            5,
            "ERROR",
        )
        h.call(node.trigger_deactivate)
        h.call(node.trigger_activate)
        assert node.fault == ""
    finally:
        h.close()


def _nan_model(path: Path) -> Path:
    """The shipped model with every floating-point weight NaN: every output is NaN."""
    import numpy as np
    import onnx
    from onnx import numpy_helper

    from ros_lnn.inference.runtime import default_model_path

    model = onnx.load(str(default_model_path()))
    for init in model.graph.initializer:
        array = numpy_helper.to_array(init)
        if np.issubdtype(array.dtype, np.floating):
            init.CopyFrom(numpy_helper.from_array(np.full_like(array, np.nan), init.name))
    onnx.save(model, str(path))
    return path


def test_a_model_that_is_not_finite_at_rest_is_refused_at_configure(ctx, tmp_path):
    pytest.importorskip("onnx")
    path = _nan_model(tmp_path / "nan.onnx")
    node = ServoLnnNode(
        namespace=f"/safe{next(_ns)}",
        context=ctx,
        parameter_overrides=[Parameter("model_path", value=str(path))],
    )
    try:
        assert not start_servo(node)
        assert node.runtime is None
        assert "non-finite" in node.last_error and "nan.onnx" in node.last_error
        assert "\n" not in node.last_error
    finally:
        node.destroy_node()


def test_a_second_publisher_of_other_joints_never_degrades_diagnostics(ctx):
    """A gripper's own joint_states publisher beside the crane's: its messages are counted
    (other_joints), not rejected; /diagnostics stay OK and every crane state is processed."""
    node = _servo(ctx, input_timeout_s=1.0)
    ns = node.get_namespace()
    h = Harness(node, context=ctx)
    try:
        statuses = []
        name = node.get_fully_qualified_name()
        h.probe.create_subscription(
            DiagnosticArray,
            "/diagnostics",
            lambda m: statuses.extend(
                (time.monotonic(), s.level, s.message) for s in m.status if s.name == name
            ),
            10,
        )
        states = h.publisher(JointState, f"{ns}/joint_states", SENSOR_QOS)

        def send_pair(k):
            now = time.time_ns()
            states.publish(_crane_state(now, k))
            gripper = JointState(name=["gripper_finger"], position=[0.01], velocity=[0.0])
            gripper.header.stamp = _time(now)
            states.publish(gripper)
            time.sleep(0.005)

        for k in range(150):
            send_pair(k)
            # a loaded runner is waited for, not flooded past the best-effort input's depth
            h.wait(
                lambda k=k: node.counts["other_joints"] >= k - 2 and node.counts["processed"] >= k - 2,
                60,
                f"the node to keep up with pair {k}",
            )
        h.wait(lambda: node.counts["other_joints"] >= 100, 60, "the gripper's states counted")
        last = time.monotonic()
        k = 150
        while not any(t > last for t, _, _ in statuses):  # inputs go on until it comes: fresh, not stale
            assert time.monotonic() < last + 60, "no fresh status"
            send_pair(k)
            k += 1
        _, level, message = statuses[-1]
        assert level == DiagnosticStatus.OK, message
        assert node.counts["missing_joint"] == 0
        assert node.counts["processed"] >= 100
    finally:
        h.close()
