"""The nodes as a ROS 2 user meets them, over real DDS: every output reaches a default (reliable)
subscriber and its QoS can be overridden at start-up; servo_lnn configured from config/crane.yaml
publishes what a ServoEstimator built from the same YAML by keyword computes; /diagnostics levels come
from a sliding window and a stale-input check; parameter tables refuse what they must, with reasons."""

from __future__ import annotations

import itertools
import math
import time
from pathlib import Path

import numpy as np
import pytest
import yaml

from conftest import HAVE_RCLPY, requires_rclpy

pytestmark = [requires_rclpy, pytest.mark.ros]
ROOT = Path(__file__).resolve().parents[2]

if HAVE_RCLPY:
    from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus
    from rclpy.parameter import Parameter
    from rclpy.qos import ReliabilityPolicy
    from sensor_msgs.msg import JointState
    from trajectory_msgs.msg import JointTrajectory
    from visualization_msgs.msg import MarkerArray

    from _ros_harness import Harness
    from ros_lnn.nodes.messages import ENERGY_TYPE, PREDICTION_TYPE, energy_dict, prediction_arrays
    from ros_lnn.nodes.qos import COMMAND_QOS, SENSOR_QOS
    from ros_lnn.nodes.servo_lnn.node import ServoLnnNode, start
    from ros_lnn.nodes.stamps import ns_to_stamp, seconds_to_duration, stamp_ns

_names = itertools.count()
DT_NS = 2_000_000


def motion(k):
    t = k * 0.002
    return (
        np.array([0.3 * np.sin(1.3 * t) + 0.1, 0.2 * np.sin(4.4 * t)]),
        np.array([0.39 * np.cos(1.3 * t), 0.88 * np.cos(4.4 * t)]),
    )


def joint_state(stamp, q, qd, names=("pendulum_joint", "cart_joint")):
    msg = JointState(name=list(names), position=[float(v) for v in q], velocity=[float(v) for v in qd])
    msg.header.stamp = ns_to_stamp(stamp)
    msg.header.frame_id = "base"
    return msg


@pytest.fixture
def harness(ctx):
    made = []

    def _make(*nodes):
        h = Harness(*nodes, context=ctx)
        made.append(h)
        return h

    yield _make
    for h in made:
        h.close()


if HAVE_RCLPY:
    #: For tests that stamp their inputs ``base + k·dt`` (the estimator's reference sees the same
    #: stamps): a loaded runner's waits let those fall more than max_input_age_s behind the node's
    #: clock and the node skips them as stale (the age check has tests of its own).
    NO_AGE_CHECK = Parameter("max_input_age_s", value=0.0)


def estimator_node(ctx, params=None, cli=None, autostart=True):
    ns = f"/if{next(_names)}"
    node = ServoLnnNode(
        namespace=ns,
        context=ctx,
        cli_args=cli,
        parameter_overrides=[Parameter(k, value=v) for k, v in (params or {}).items()],
    )
    if autostart:
        assert start(node), node.last_error
    return node, ns


def test_a_default_subscriber_receives_every_output_of_the_nodes(ctx, harness):
    """create_subscription(T, topic, cb, 10): reliable, the QoS a user gets without asking."""
    from rosgraph_msgs.msg import Clock
    from std_msgs.msg import Float64MultiArray

    from ros_lnn.nodes.dac_chain_sim.node import DacChainSim
    from ros_lnn.nodes.dac_controller.node import DacControllerNode
    from ros_lnn.nodes.dac_controller.node import start as start_dac
    from ros_lnn.nodes.sim.node import SimNode

    ns = f"/rel{next(_names)}"
    sim = SimNode(namespace=ns, context=ctx, parameter_overrides=[Parameter("rate_hz", value=200.0)])
    clock_sim = SimNode(
        "clock_sim",
        namespace=ns,
        context=ctx,
        parameter_overrides=[
            Parameter("rate_hz", value=50.0),
            Parameter("publish_clock", value=True),
            Parameter("publish_ground_truth", value=False),
        ],
    )
    est = ServoLnnNode(
        namespace=ns,
        context=ctx,
        cli_args=["--ros-args", "-r", "servo_commands:=sim/servo_plan"],
        parameter_overrides=[
            Parameter("rollout_horizon_s", value=0.1),
            Parameter("diagnostics_period_s", value=0.2),
            Parameter("marker_rate_hz", value=20.0),
        ],
    )
    assert start(est), est.last_error
    dac = DacControllerNode(
        namespace=f"{ns}_arm",
        context=ctx,
        parameter_overrides=[
            Parameter("diagnostics_period_s", value=0.2),
            Parameter("robot_description_timeout_s", value=0.0),  # the shipped arm
        ],
    )
    assert start_dac(dac), dac.last_error
    chain = DacChainSim(
        namespace=f"{ns}_chain", context=ctx, parameter_overrides=[Parameter("rate_hz", value=100.0)]
    )
    h = harness(sim, clock_sim, est, dac, chain)
    topics = {
        f"{ns}/joint_states": JointState,
        f"{ns}/sim/ground_truth/driving_force": JointState,
        f"{ns}/sim/ground_truth/prediction": PREDICTION_TYPE,
        f"{ns}/sim/ground_truth/energy": ENERGY_TYPE,
        f"{ns}/sim/servo_plan": JointTrajectory,
        "/clock": Clock,
        f"{ns}/servo_lnn/driving_force": JointState,
        f"{ns}/servo_lnn/prediction": PREDICTION_TYPE,
        f"{ns}/servo_lnn/energy": ENERGY_TYPE,
        f"{ns}/servo_lnn/markers": MarkerArray,
        f"{ns}/servo_lnn/predicted_trajectory": JointTrajectory,
        "/diagnostics": DiagnosticArray,
        f"{ns}_arm/dac_controller/port_command": Float64MultiArray,
        f"{ns}_arm/dac_controller/joint_effort_command": Float64MultiArray,
        f"{ns}_arm/dac_controller/markers": MarkerArray,
        f"{ns}_chain/joint_states": JointState,
    }
    boxes = {}
    for topic, msg_type in topics.items():
        box = boxes[topic] = []
        h.probe.create_subscription(msg_type, topic, box.append, 10)
    arm = h.probe.create_publisher(JointState, f"{ns}_arm/joint_states", 10)
    joints = dac.pipeline.joint_names
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and not all(boxes.values()):
        arm.publish(
            JointState(
                name=joints,
                position=[0.1] * len(joints),
                velocity=[0.0] * len(joints),
                header=JointState().header.__class__(stamp=dac.get_clock().now().to_msg()),
            )
        )
        time.sleep(0.02)
        h.check()
    silent = [t for t, box in boxes.items() if not box]
    assert not silent, f"a default (reliable) subscriber got nothing on {silent}"
    for topic in topics:
        if topic in ("/clock", "/diagnostics"):
            continue
        info = h.probe.get_publishers_info_by_topic(topic)
        assert info and all(i.qos_profile.reliability == ReliabilityPolicy.RELIABLE for i in info), topic


def test_qos_overrides_at_start_up(ctx, harness):
    """The README's override: driving_force best effort; a reliable subscriber then does not match and
    a best-effort one receives; the override parameter is read-only afterwards."""
    ns = f"/ovr{next(_names)}"
    override = f"qos_overrides.{ns}/servo_lnn/driving_force.publisher.reliability"
    node = ServoLnnNode(
        namespace=ns,
        context=ctx,
        parameter_overrides=[Parameter(override, value="best_effort"), NO_AGE_CHECK],
    )
    assert start(node), node.last_error
    h = harness(node)
    reliable, best_effort = [], []
    h.probe.create_subscription(JointState, f"{ns}/servo_lnn/driving_force", reliable.append, 10)
    h.probe.create_subscription(JointState, f"{ns}/servo_lnn/driving_force", best_effort.append, SENSOR_QOS)
    info = h.probe.get_publishers_info_by_topic(f"{ns}/servo_lnn/driving_force")
    assert info[0].qos_profile.reliability == ReliabilityPolicy.BEST_EFFORT
    js = h.publisher(JointState, f"{ns}/joint_states", SENSOR_QOS)
    base = node.get_clock().now().nanoseconds
    for k in range(20):
        js.publish(joint_state(base + k * DT_NS, *motion(k)))
        time.sleep(0.004)
    h.wait(lambda: len(best_effort) >= 10, what="best-effort outputs")
    assert not reliable
    assert not node.set_parameters([Parameter(override, value="reliable")])[0].successful
    # the override stays with its topic: the node's other outputs, and the next node's, are reliable
    for topic in (f"{ns}/servo_lnn/energy", f"{ns}/servo_lnn/prediction"):
        assert (
            h.probe.get_publishers_info_by_topic(topic)[0].qos_profile.reliability
            == ReliabilityPolicy.RELIABLE
        )
    other, other_ns = estimator_node(ctx)
    try:
        info = h.probe.get_publishers_info_by_topic(f"{other_ns}/servo_lnn/driving_force")
        assert info and info[0].qos_profile.reliability == ReliabilityPolicy.RELIABLE
    finally:
        other.destroy_node()


def test_outputs_equal_a_servo_estimator_built_from_the_same_yaml(ctx, harness):
    """servo_lnn with --params-file config/crane.yaml against ServoEstimator(ServoLnnRuntime(...), **keywords
    read from the YAML): same stamps, same numbers, bit for bit, with a servo plan and without."""
    from ros_lnn.estimation.servo_estimator import ServoEstimator
    from ros_lnn.inference.runtime import ServoLnnRuntime, default_model_path

    path = ROOT / "config" / "crane.yaml"
    cfg = yaml.safe_load(path.read_text())["/**/servo_lnn"]["ros__parameters"]
    node, ns = estimator_node(
        ctx, {NO_AGE_CHECK.name: NO_AGE_CHECK.value}, cli=["--ros-args", "--params-file", str(path)]
    )
    assert node.values["max_input_age_s"] == 0.0
    h = harness(node)
    runtime = ServoLnnRuntime(
        cfg["model_path"] or default_model_path(), cfg["free_joints"], cfg["servo_joints"]
    )
    est = ServoEstimator(
        runtime,
        qdd_filter_window=cfg["qdd_filter_window"],
        command_timeout_s=cfg["command_timeout_s"],
        free_joint_forces=cfg.get("free_joint_forces", []),
    )
    force = h.collect(JointState, f"{ns}/servo_lnn/driving_force", COMMAND_QOS)
    pred = h.collect(PREDICTION_TYPE, f"{ns}/servo_lnn/prediction", COMMAND_QOS)
    energy = h.collect(ENERGY_TYPE, f"{ns}/servo_lnn/energy", COMMAND_QOS)
    js = h.publisher(JointState, f"{ns}/joint_states", SENSOR_QOS)
    cmd = h.publisher(JointTrajectory, f"{ns}/servo_commands", COMMAND_QOS)
    h.wait(
        lambda: all(
            node._pubs[k].get_subscription_count() for k in ("driving_force", "prediction", "energy")
        ),
        what="the probe's subscriptions to match",
    )
    base = node.get_clock().now().nanoseconds
    expected = {}
    for k in range(12):  # estimated q̈_e
        q, qd = motion(k)
        s = base + k * DT_NS
        out = est.step(s, q, qd)
        if out is not None:
            expected[s] = out.copy()
        js.publish(joint_state(s, q, qd))
        time.sleep(0.004)
    h.wait(lambda: len(force) >= 10, what=f"outputs before the plan ({node.counts})")
    from trajectory_msgs.msg import JointTrajectoryPoint

    plan = JointTrajectory(joint_names=["cart_joint"])
    plan.header.stamp = ns_to_stamp(base + 12 * DT_NS)
    for i in range(5):
        point = JointTrajectoryPoint(positions=[0.1 * i], velocities=[0.2], accelerations=[0.5 - 0.2 * i])
        point.time_from_start = seconds_to_duration(0.01 * i)
        plan.points.append(point)
    cmd.publish(plan)
    h.wait(lambda: node.counts["commands"] == 1, what="the plan")
    est.set_plan(
        [base + 12 * DT_NS + int(0.01e9 * i) for i in range(5)],
        [[0.1 * i] for i in range(5)],
        [[0.2]] * 5,
        [[0.5 - 0.2 * i] for i in range(5)],
    )
    for k in range(12, 30):  # commanded q̈_e
        q, qd = motion(k)
        s = base + k * DT_NS
        expected[s] = est.step(s, q, qd).copy()
        js.publish(joint_state(s, q, qd))
        time.sleep(0.004)
    h.wait(
        lambda: len(force) >= len(expected) and len(energy) >= len(expected) and len(pred) >= len(expected),
        what="every output",
    )
    L = est.layout
    for m in force:
        want = expected[stamp_ns(m.header.stamp)]
        np.testing.assert_array_equal(m.effort, want[L["Q_e"]])
        np.testing.assert_array_equal(m.position, want[L["q"]][1:])
    for m in pred:
        want, got = expected[stamp_ns(m.header.stamp)], prediction_arrays(m)
        for key in ("q", "qd", "qdd", "Q"):
            np.testing.assert_array_equal(got[key], want[L[key]])
    for m in energy:
        e = energy_dict(m)
        want = expected[int(e["stamp_sec"]) * 1_000_000_000 + int(e["stamp_nanosec"])]
        assert [e[k] for k in ("T", "V", "E", "T_dot", "V_dot", "E_dot", "power")] == list(want[L["energy"]])
    assert est.command_state == "commanded"


def _statuses(box, name):
    return [s for arr in list(box) for s in arr.status if s.name == name]


def test_diagnostics_window_and_stale_level(ctx, harness):
    """WARN before the first input; one bad sample WARNs for the window (5 periods) and then the status
    is OK again by itself; inputs that stop turn it ERROR (stale), never OK at 0 Hz."""
    node, ns = estimator_node(ctx, {"diagnostics_period_s": 0.1, "input_timeout_s": 0.5})
    h = harness(node)
    diags = h.collect(DiagnosticArray, "/diagnostics", COMMAND_QOS)
    name = f"{ns}/servo_lnn"
    h.wait(lambda: _statuses(diags, name), what="a first status")
    first = _statuses(diags, name)[0]
    assert first.level == DiagnosticStatus.WARN and "no joint_states" in first.message
    js = h.publisher(JointState, f"{ns}/joint_states", SENSOR_QOS)
    base = node.get_clock().now().nanoseconds
    k = 0
    phases = {}

    def feed(seconds, bad_sample=None):
        """Samples every 2 ms of stamps, never ahead of the clock nor behind it by more than a few: on a
        loaded machine fewer are sent, none goes stale (which would WARN for its own reason)."""
        nonlocal k
        end = time.monotonic() + seconds
        sent = 0
        while time.monotonic() < end or (bad_sample is not None and sent <= bad_sample):
            k = max(k, (node.get_clock().now().nanoseconds - base) // DT_NS - 2)
            q, qd = motion(k)
            if sent == bad_sample:
                q = np.array([math.nan, 0.0])
            js.publish(joint_state(base + k * DT_NS, q, qd))
            k, sent = k + 1, sent + 1
            time.sleep(0.004)

    feed(0.6)
    phases["ok"] = len(diags)
    feed(0.05, bad_sample=2)
    phases["bad"] = len(diags)
    feed(1.0)

    def recovered():
        """An OK status that counts the bad sample in its lifetime: the window has let it go."""
        statuses = [s for arr in list(diags)[phases["bad"] :] for s in arr.status if s.name == name]
        return any(
            s.level == DiagnosticStatus.OK and {kv.key: kv.value for kv in s.values}.get("non_finite") == "1"
            for s in statuses
        )

    deadline = time.monotonic() + 60
    while not recovered():  # a loaded runner's diagnostics timer is late, not wrong: feed on until it says
        assert time.monotonic() < deadline, "no OK status after the bad sample left the window"
        feed(0.1)
    phases["recovered"] = len(diags)

    def stale_statuses():
        after = [s for arr in list(diags)[phases["recovered"] :] for s in arr.status if s.name == name]
        first = next((i for i, s in enumerate(after) if "stale" in s.message), None)
        return [] if first is None else after[first:]

    h.wait(lambda: len(stale_statuses()) >= 3, 60, "three statuses once the inputs went stale")
    after = [s for arr in list(diags)[phases["recovered"] :] for s in arr.status if s.name == name]
    during = [
        s for arr in list(diags)[phases["bad"] : phases["recovered"]] for s in arr.status if s.name == name
    ]
    assert any(s.level == DiagnosticStatus.WARN and "non_finite 1" in s.message for s in during)
    values = {kv.key: kv.value for kv in during[-1].values}
    assert values["non_finite"] == "1" and values["window_non_finite"] == "0"  # lifetime 1, left the window
    assert during[-1].level == DiagnosticStatus.OK
    assert after[-1].level == DiagnosticStatus.ERROR and "stale" in after[-1].message
    assert all(s.level != DiagnosticStatus.OK for s in after[-3:])


def test_parameter_table_refuses_with_reasons(ctx, tmp_path):
    from rcl_interfaces.msg import SetParametersResult  # noqa: F401 - the type set_parameters returns

    node, _ = estimator_node(ctx, {"latency_log": str(tmp_path / "a.npz")})
    try:

        def refused(name, value):
            result = node.set_parameters([Parameter(name, value=value)])[0]
            assert not result.successful, f"{name}={value!r} was taken"
            return result.reason

        assert "finite" in refused("marker_rate_hz", math.nan)
        assert ">= 0.1" in refused("marker_rate_hz", 1e-15) and "(or 0 for off)" in refused(
            "marker_rate_hz", 1e-15
        )
        assert "<= 1000" in refused("marker_rate_hz", math.inf) or "finite" in refused(
            "marker_rate_hz", math.inf
        )
        assert ">= 0.0001" in refused("rollout_dt_s", 0.0) and ">= 0.0001" in refused("rollout_dt_s", 1e-7)
        assert "<= 100" in refused("force_scale", 1e308)
        assert "number" in refused("command_timeout_s", "soon")
        assert "500 steps" in refused("rollout_horizon_s", 10.0)  # with rollout_dt_s 0.01
        assert "read at configure" in refused("model_path", "other.onnx")
        assert "read at configure" in refused("latency_log", "/elsewhere.npz")
        assert "read at configure" in refused("qdd_filter_window", 2)
        assert "read when the node starts" in refused("autostart", True)
        assert "pendulum_joint" in refused("free_joint_forces", [1.0, 2.0])
        assert "one of x, y, z" in refused("marker_axes", ["w"])
        assert node.set_parameters([Parameter("marker_rate_hz", value=5)])[0].successful  # an int is taken
        assert node.values["marker_rate_hz"] == 5.0 and isinstance(node.values["marker_rate_hz"], float)
        assert node.set_parameters([Parameter("marker_rate_hz", value=0.0)])[0].successful  # off
        assert node._latency_path == str(tmp_path / "a.npz")
    finally:
        node.destroy_node()


@pytest.mark.parametrize(
    "name,value,words",
    [
        ("qdd_filter_window", 0, "parameter qdd_filter_window: must be >= 3"),
        ("qdd_filter_window", 2, "parameter qdd_filter_window: must be >= 3"),
        ("diagnostics_period_s", -1.0, "parameter diagnostics_period_s: must be >= 0.01"),
        ("servo_joints", ["cart_joint", "cart_joint"], "names ['cart_joint'] more than once"),
        ("marker_rate_hz", "fast", "parameter marker_rate_hz: must be a number"),
        ("model_threads", 1.5, "parameter model_threads: must be an integer"),
    ],
)
def test_a_bad_value_from_a_launch_file_fails_configure_with_one_line(ctx, name, value, words):
    node, _ = estimator_node(ctx, {name: value}, autostart=False)
    try:
        assert not start(node)
        assert words in node.last_error and "\n" not in node.last_error
    finally:
        node.destroy_node()
