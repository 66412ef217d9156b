"""The servo_lnn lifecycle node over real DDS: outputs equal the runtime evaluated directly, lifecycle
transitions through the standard services, remapping, parameters, and every bad-input case."""

from __future__ import annotations

import itertools
import math
import time

import numpy as np
import pytest

from conftest import HAVE_RCLPY, HAVE_TORCH, requires_rclpy, stop_process
from ros_lnn.estimation.derivative import CausalPolyDerivative
from ros_lnn.estimation.rollout import rollout_free
from ros_lnn.estimation.trajectory import ServoPlan

pytestmark = [requires_rclpy, pytest.mark.ros]

if HAVE_RCLPY:
    from diagnostic_msgs.msg import DiagnosticArray
    from lifecycle_msgs.msg import Transition
    from lifecycle_msgs.srv import ChangeState, GetState
    from rclpy.parameter import Parameter
    from sensor_msgs.msg import JointState
    from std_msgs.msg import Float64MultiArray
    from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint
    from visualization_msgs.msg import Marker, MarkerArray

    from _ros_harness import Harness
    from ros_lnn.nodes.messages import ENERGY_TYPE, PREDICTION_TYPE, energy_dict, prediction_arrays
    from ros_lnn.nodes.params import param
    from ros_lnn.nodes.qos import COMMAND_QOS, SENSOR_QOS
    from ros_lnn.nodes.servo_lnn.node import ServoLnnNode, start
    from ros_lnn.nodes.stamps import duration_ns, ns_to_stamp, seconds_to_duration, stamp_ns


DT_NS = 2_000_000  # 500 Hz stamps
_ns_counter = itertools.count()


@pytest.fixture(scope="module")
def model_path(tmp_path_factory):
    """The shipped model when there is one; otherwise the analytic crane exported through torch."""
    from ros_lnn.errors import ModelError
    from ros_lnn.inference.runtime import default_model_path

    try:
        return default_model_path()
    except ModelError:
        if not HAVE_TORCH:
            pytest.skip("no shipped model and no torch to export a test model")
    from _node_model import export_crane_model

    return export_crane_model(tmp_path_factory.mktemp("model") / "crane_test.onnx")


@pytest.fixture
def make(ctx, model_path):
    """Factory: an estimator node (configured + activated unless autostart=False) and its harness.
    The tests stamp their inputs ``base + k·DT_NS`` (the references see the same stamps), so the node
    has no input age check unless a test sets ``max_input_age_s``: a loaded runner's waits let such
    stamps fall over the default 1 s behind the clock, and the node skips them as stale."""
    made = []

    def _make(params=None, remap=None, autostart=True, name="servo_lnn", namespace=None):
        ns = namespace or f"/t{next(_ns_counter)}"
        overrides = [Parameter("model_path", value=str(model_path))]
        params = {"max_input_age_s": 0.0, **(params or {})}
        overrides += [Parameter(k, value=v) for k, v in params.items()]
        cli = ["--ros-args"] + [a for r in (remap or []) for a in ("-r", r)] if remap else None
        node = ServoLnnNode(name, namespace=ns, context=ctx, parameter_overrides=overrides, cli_args=cli)
        if autostart:
            assert start(node), node.last_error
        h = Harness(node, context=ctx)
        made.append(h)
        return node, h, ns

    yield _make
    for h in made:
        h.close()


def joint_state(ns_stamp, q, qd=None, effort=None, names=("pendulum_joint", "cart_joint")):
    """A JointState in a shuffled order with an extra joint the model does not know."""
    order = [1, 0]
    msg = JointState()
    msg.header.stamp = ns_to_stamp(ns_stamp)
    msg.header.frame_id = "base"
    msg.name = [names[i] for i in order] + ["gripper_joint"]
    msg.position = [float(q[i]) for i in order] + [0.5]
    if qd is not None:
        msg.velocity = [float(qd[i]) for i in order] + [0.0]
    if effort is not None:
        msg.effort = [float(effort[i]) for i in order] + [1.0]
    return msg


def crane_motion(t):
    """A smooth state stream: pendulum swinging, cart on a sine."""
    w = 2 * np.pi * 0.7
    q = np.array([0.3 * np.sin(1.3 * t) + 0.1, 0.2 * np.sin(w * t)])
    qd = np.array([0.39 * np.cos(1.3 * t), 0.2 * w * np.cos(w * t)])
    return q, qd


def wait_count(h, box, n, what, timeout=60.0):
    h.wait(lambda: len(box) >= n, timeout, f"{n} messages on {what} (got {len(box)})")


def outputs(h, ns, name="servo_lnn"):
    return {
        "force": h.collect(JointState, f"{ns}/{name}/driving_force", SENSOR_QOS),
        "pred": h.collect(PREDICTION_TYPE, f"{ns}/{name}/prediction", SENSOR_QOS),
        "energy": h.collect(ENERGY_TYPE, f"{ns}/{name}/energy", SENSOR_QOS),
    }


def reference_runtime(node):
    """The node's model in a runtime of the test's own: the references are computed while the node
    still runs, and a runtime evaluates one sample at a time (its bound buffers are shared between
    calls), so the test must not call the node's."""
    from ros_lnn.inference.runtime import ServoLnnRuntime

    rt = node.runtime
    return ServoLnnRuntime(rt.path, free_joints=rt.free_joints, servo_joints=rt.servo_joints)


def send(h, pub, msgs, pace_s=0.004):
    import time

    for m in msgs:
        pub.publish(m)
        time.sleep(pace_s)


def plan_msg(base_ns, times, q, qd=None, qdd=None, joints=("cart_joint",)):
    msg = JointTrajectory()
    msg.header.stamp = ns_to_stamp(base_ns)
    msg.joint_names = list(joints)
    for i, t in enumerate(times):
        pt = JointTrajectoryPoint(positions=[float(q[i])])
        if qd is not None:
            pt.velocities = [float(qd[i])]
        if qdd is not None:
            pt.accelerations = [float(qdd[i])]
        pt.time_from_start = seconds_to_duration(t)
        msg.points.append(pt)
    return msg


def test_outputs_equal_runtime_with_commanded_acceleration(make):
    node, h, ns = make({"marker_rate_hz": 1000.0, "force_scale": 0.1})
    rt = reference_runtime(node)
    out = outputs(h, ns)
    markers = h.collect(MarkerArray, f"{ns}/servo_lnn/markers", COMMAND_QOS)
    cmd = h.publisher(JointTrajectory, f"{ns}/servo_commands", COMMAND_QOS)
    base = node.get_clock().now().nanoseconds
    tp = np.linspace(0.0, 1.0, 11)
    w = 2 * np.pi * 0.7
    plan_q, plan_qd, plan_qdd = 0.2 * np.sin(w * tp), 0.2 * w * np.cos(w * tp), -0.2 * w * w * np.sin(w * tp)
    cmd.publish(plan_msg(base, tp, plan_q, plan_qd, plan_qdd))
    h.wait(lambda: node.counts["commands"] == 1, what="the servo command")
    js = h.publisher(JointState, f"{ns}/joint_states", SENSOR_QOS)
    stamps = [base + (k + 1) * DT_NS for k in range(20)]
    inputs = {}
    msgs = []
    for s in stamps:
        q, qd = crane_motion((s - base) * 1e-9)
        inputs[s] = (q, qd)
        msgs.append(joint_state(s, q, qd, effort=[0.05, 3.0]))
    send(h, js, msgs)
    wait_count(h, out["force"], 20, "driving_force")
    wait_count(h, out["energy"], 20, "energy")
    wait_count(h, out["pred"], 20, "prediction")
    plan = ServoPlan(tp, plan_q[:, None], plan_qd[:, None], plan_qdd[:, None])
    preds = {stamp_ns(m.header.stamp): prediction_arrays(m) for m in out["pred"]}
    energies = {}
    for m in out["energy"]:
        e = energy_dict(m)
        energies[int(e["stamp_sec"]) * 1_000_000_000 + int(e["stamp_nanosec"])] = e
    for m in out["force"]:
        s = stamp_ns(m.header.stamp)
        q, qd = inputs[s]
        qdd_e = plan.sample((s - base) * 1e-9).qdd
        want = rt.evaluate(q, qd, qdd_e, np.array([0.05]))
        assert m.name == ["cart_joint"] and m.header.frame_id == "base"
        np.testing.assert_array_equal(m.effort, want["Q_e"])
        np.testing.assert_array_equal(m.position, q[1:])
        p = preds[s]
        assert p["names"] == ["pendulum_joint", "cart_joint"] and p.get("n_free", 1) == 1
        np.testing.assert_array_equal(p["q"], q)
        np.testing.assert_array_equal(p["qd"], qd)
        np.testing.assert_array_equal(p["qdd"], want["qdd"])
        np.testing.assert_array_equal(p["qdd"][1:], qdd_e.astype(rt.dtype))  # graph precision
        np.testing.assert_array_equal(p["Q"], want["Q"])
        e = energies[s]
        for key in ("T", "V", "E", "T_dot", "V_dot", "E_dot", "power"):
            assert e[key] == float(want[key]), key
    assert all(m.header.frame_id == "base" for m in out["pred"])
    wait_count(h, markers, 1, "markers")
    arrows = [mk for mk in markers[-1].markers if mk.type == Marker.ARROW]
    texts = [mk for mk in markers[-1].markers if mk.type == Marker.TEXT_VIEW_FACING]
    assert len(arrows) == 1 and len(texts) == 1
    s = stamp_ns(arrows[0].header.stamp)
    q, qd = inputs[s]
    q_e = rt.evaluate(q, qd, plan.sample((s - base) * 1e-9).qdd, np.array([0.05]))["Q_e"][0]
    assert arrows[0].points[1].x == pytest.approx(0.1 * q_e, rel=1e-12)
    assert "E " in texts[0].text
    assert node.counts["processed"] == 20 and node.counts["warming_up"] == 0


def test_estimated_acceleration_from_velocity_stream(make):
    node, h, ns = make({"qdd_filter_window": 7})
    rt = reference_runtime(node)
    out = outputs(h, ns)
    js = h.publisher(JointState, f"{ns}/joint_states", SENSOR_QOS)
    base = node.get_clock().now().nanoseconds
    # irregular sampling: the filter fits real stamps, not an assumed rate
    stamps = [base + k * DT_NS + (k % 3) * 300_000 for k in range(15)]
    filt = CausalPolyDerivative(window=7, degree=2, order=1)
    expected = {}
    msgs = []
    for s in stamps:
        q, qd = crane_motion((s - base) * 1e-9)
        d = filt.update((s - base) * 1e-9, qd[1:])
        if d is not None:
            expected[s] = rt.evaluate(q, qd, d[0], np.zeros(1))
        msgs.append(joint_state(s, q, qd))  # no efforts: Q_f from the parameter (zero)
    send(h, js, msgs)
    wait_count(h, out["force"], len(expected), "driving_force")
    assert len(expected) == 13 and node.counts["warming_up"] == 2
    for m in out["force"]:
        np.testing.assert_array_equal(m.effort, expected[stamp_ns(m.header.stamp)]["Q_e"])


def test_velocity_free_stream_is_differentiated(make):
    node, h, ns = make()
    rt = reference_runtime(node)
    out = outputs(h, ns)
    js = h.publisher(JointState, f"{ns}/joint_states", SENSOR_QOS)
    base = node.get_clock().now().nanoseconds
    filt = CausalPolyDerivative(window=9, degree=3, order=2)
    expected, msgs = {}, []
    for k in range(14):
        s = base + k * DT_NS
        q, _ = crane_motion(k * DT_NS * 1e-9)
        d = filt.update(k * DT_NS * 1e-9, q)
        if d is not None:
            expected[s] = (d[0], rt.evaluate(q, d[0], d[1][1:], np.zeros(1)))
        msgs.append(joint_state(s, q))
    send(h, js, msgs)
    wait_count(h, out["force"], len(expected), "driving_force")
    assert node.counts["velocity_estimated"] == 14
    for m in out["force"]:
        qd_est, want = expected[stamp_ns(m.header.stamp)]
        np.testing.assert_array_equal(m.effort, want["Q_e"])
        np.testing.assert_array_equal(m.velocity, qd_est[1:])


def test_joint_states_split_over_two_publishers_equal_the_estimator_fed_whole_states(make, model_path):
    """The free joint (with its effort and a gripper joint) from one publisher, the servo joint from
    another, stamped 0.1 ms apart: every output equals ServoEstimator (built by keyword from the same
    configuration) fed the whole states at the newer stamp; the parts are never rejections."""
    from diagnostic_msgs.msg import DiagnosticStatus

    from ros_lnn.estimation.servo_estimator import ServoEstimator
    from ros_lnn.inference.runtime import ServoLnnRuntime
    from ros_lnn.nodes.servo_lnn.report import servo_diagnostics

    config = {"qdd_filter_window": 7, "command_timeout_s": 0.5, "free_joint_forces": [0.2]}
    node, h, ns = make({**config, "joint_state_merge_window_s": 0.001})
    out = outputs(h, ns)
    arm = h.publisher(JointState, f"{ns}/joint_states", SENSOR_QOS)
    rest = h.publisher(JointState, f"{ns}/joint_states", SENSOR_QOS)
    reference = ServoEstimator(ServoLnnRuntime(model_path), **config)
    base = node.get_clock().now().nanoseconds
    expected = {}
    n = 40
    for k in range(n):
        s = base + (k + 1) * DT_NS
        q, qd = crane_motion(k * DT_NS * 1e-9)
        first = JointState(name=["gripper_joint", "pendulum_joint"], position=[0.5, float(q[0])])
        first.velocity, first.effort = [0.0, float(qd[0])], [1.0, 0.05 * k]
        first.header.stamp, first.header.frame_id = ns_to_stamp(s), "base"
        second = JointState(name=["cart_joint"], position=[float(q[1])], velocity=[float(qd[1])])
        second.header.stamp, second.header.frame_id = ns_to_stamp(s + 100_000), "base"
        sample = reference.step(s + 100_000, q, qd, np.array([0.05 * k]))
        if sample is not None:
            expected[s + 100_000] = sample.copy()
        (arm if k % 2 else rest).publish(first)  # either publisher first
        (rest if k % 2 else arm).publish(second)
        h.wait(lambda: node.counts["received"] >= 2 * (k + 1), what=f"both parts of state {k}")
    wait_count(h, out["force"], len(expected), "driving_force")
    wait_count(h, out["pred"], len(expected), "prediction")
    wait_count(h, out["energy"], len(expected), "energy")
    L = reference.layout
    assert len(expected) == n - node.counts["warming_up"] and len(expected) >= n - 3
    assert {stamp_ns(m.header.stamp) for m in out["force"]} == set(expected)
    for m in out["force"]:
        np.testing.assert_array_equal(m.effort, expected[stamp_ns(m.header.stamp)][L["Q_e"]])
    for m in out["pred"]:
        p, want = prediction_arrays(m), expected[stamp_ns(m.header.stamp)]
        for key in ("q", "qd", "qdd", "Q"):
            np.testing.assert_array_equal(p[key], want[L[key]])
    for m in out["energy"]:
        e = energy_dict(m)
        want = expected[int(e["stamp_sec"]) * 1_000_000_000 + int(e["stamp_nanosec"])]
        assert [e[k] for k in ("T", "V", "E")] == want[L["energy"]][:3].tolist()
    assert node.counts["partial"] == n and node.counts["missing_joint"] == 0
    status = servo_diagnostics(node).status[0]
    assert status.level == DiagnosticStatus.OK, status.message


def _call(h, client, request, timeout=10.0):
    assert client.wait_for_service(timeout_sec=timeout), f"service {client.srv_name} not available"
    future = client.call_async(request)
    h.wait(future.done, timeout, f"reply from {client.srv_name}")
    return future.result()


def test_lifecycle_through_services(make, model_path, tmp_path):
    node, h, ns = make(autostart=False)
    out = outputs(h, ns)
    get = h.probe.create_client(GetState, f"{ns}/servo_lnn/get_state")
    change = h.probe.create_client(ChangeState, f"{ns}/servo_lnn/change_state")

    def state():
        return _call(h, get, GetState.Request()).current_state.label

    def transition(tid):
        return _call(h, change, ChangeState.Request(transition=Transition(id=tid))).success

    assert state() == "unconfigured"
    # A missing model leaves the node unconfigured with one error naming the file.
    missing = tmp_path / "no_such_model.onnx"
    node.set_parameters([Parameter("model_path", value=str(missing))])
    assert not transition(Transition.TRANSITION_CONFIGURE)
    assert state() == "unconfigured" and str(missing) in node.last_error and "\n" not in node.last_error
    # A corrupt model, likewise.
    corrupt = tmp_path / "corrupt.onnx"
    corrupt.write_bytes(b"not an onnx file")
    node.set_parameters([Parameter("model_path", value=str(corrupt))])
    assert not transition(Transition.TRANSITION_CONFIGURE)
    assert state() == "unconfigured" and str(corrupt) in node.last_error
    # Joints that do not fit the model: the message names the joint.
    from ros_lnn.inference.runtime import read_metadata

    model = model_path
    node.set_parameters(
        [Parameter("model_path", value=str(model)), Parameter("servo_joints", value=["trolley_joint"])]
    )
    assert not transition(Transition.TRANSITION_CONFIGURE)
    assert state() == "unconfigured" and "trolley_joint" in node.last_error
    meta = read_metadata(model)
    node.set_parameters([Parameter("servo_joints", value=list(meta.servo_joints))])
    assert transition(Transition.TRANSITION_CONFIGURE) and state() == "inactive"
    # Inactive: no subscriptions, nothing published.
    js = h.probe.create_publisher(JointState, f"{ns}/joint_states", SENSOR_QOS)
    base = node.get_clock().now().nanoseconds
    assert js.get_subscription_count() == 0
    assert transition(Transition.TRANSITION_ACTIVATE) and state() == "active"
    h.wait(lambda: js.get_subscription_count() == 1, what="the estimator's subscription")
    msgs = [joint_state(base + k * DT_NS, *crane_motion(k * 0.002)) for k in range(8)]
    send(h, js, msgs)
    wait_count(h, out["force"], 6, "driving_force")
    assert transition(Transition.TRANSITION_DEACTIVATE) and state() == "inactive"
    h.wait(lambda: js.get_subscription_count() == 0, what="the subscription to go")
    assert transition(Transition.TRANSITION_CLEANUP) and state() == "unconfigured" and node.runtime is None
    assert transition(Transition.TRANSITION_CONFIGURE) and transition(Transition.TRANSITION_ACTIVATE)
    assert state() == "active"
    assert transition(Transition.TRANSITION_ACTIVE_SHUTDOWN) and state() == "finalized"


def test_bad_inputs_are_skipped_counted_and_never_crash(make):
    # the age check on (the stale case is 5 s old), with room for a loaded runner's waits: the good
    # states' stamps advance 2 ms each, and the last ones go out seconds after the first
    node, h, ns = make({"max_input_age_s": 3.0, "command_timeout_s": 0.1})
    rt = reference_runtime(node)
    out = outputs(h, ns)
    js = h.publisher(JointState, f"{ns}/joint_states", SENSOR_QOS)
    cmd = h.publisher(JointTrajectory, f"{ns}/servo_commands", COMMAND_QOS)
    base = node.get_clock().now().nanoseconds
    k = itertools.count(1)

    def good():
        s = base + next(k) * DT_NS
        return s, joint_state(s, *crane_motion((s - base) * 1e-9))

    def good_batch(n):
        batch = [good() for _ in range(n)]
        send(h, js, [m for _, m in batch])
        return [s for s, _ in batch]

    last = good_batch(4)
    wait_count(h, out["force"], 2, "driving_force")
    cases = {}

    s = base + next(k) * DT_NS
    m = joint_state(s, [math.nan, 0.1], [0.0, 0.0])
    cases["non_finite"] = (s, m)
    s = base + next(k) * DT_NS
    m = joint_state(s, [0.1, 0.1], [0.0, math.inf])
    cases["non_finite_velocity"] = (s, m)
    s = base + next(k) * DT_NS
    m = JointState(name=["cart_joint"], position=[0.1], velocity=[0.0])
    m.header.stamp = ns_to_stamp(s)
    cases["missing_joint"] = (s, m)
    s = base + next(k) * DT_NS
    m = joint_state(s, [0.1, 0.1], [0.0, 0.0])
    m.position = m.position[:2]
    cases["bad_size"] = (s, m)
    s = base + next(k) * DT_NS
    m = joint_state(s, [0.1, 0.1], [0.0, 0.0])
    m.effort = [1.0]
    cases["bad_effort_size"] = (s, m)
    s = last[0]  # a stamp already processed
    cases["out_of_order"] = (s, joint_state(s, [0.1, 0.1], [0.0, 0.0]))
    s = base - 5_000_000_000  # 5 s old
    cases["stale"] = (s, joint_state(s, [0.1, 0.1], [0.0, 0.0]))
    expected_counts = {"non_finite": 2, "missing_joint": 1, "bad_size": 2, "out_of_order": 1, "stale": 1}
    before = len(out["force"])
    send(h, js, [m for _, m in cases.values()])
    h.wait(
        lambda: all(node.counts[r] == c for r, c in expected_counts.items()),
        what=f"counts {expected_counts}, have {node.counts}",
    )
    after = good_batch(3)
    wait_count(h, out["force"], before + 3, "driving_force after bad inputs")
    bad_stamps = {s for s, _ in cases.values()}
    got = {stamp_ns(m.header.stamp) for m in out["force"]}
    assert not (bad_stamps - {last[0]}) & got
    assert set(after) <= got

    # Servo commands: unknown joints and NaN are rejected; a stale plan falls back to estimation.
    cmd.publish(plan_msg(base, [0.0, 0.1], [0.0, 0.1], [0.0, 0.0], [0.0, 0.0], joints=("trolley",)))
    cmd.publish(plan_msg(base, [0.0, 0.1], [0.0, math.nan], [0.0, 0.0], [0.0, 0.0]))
    h.wait(lambda: node.counts["invalid_command"] == 2, what="two rejected commands")
    cmd.publish(plan_msg(base, [0.0, 0.01], [0.0, 0.0], [0.0, 0.0], [5.0, 5.0]))  # ends at base + 10 ms
    h.wait(lambda: node.counts["commands"] == 1, what="the command")
    n = len(out["force"])
    later = base + 400_000_000  # 0.4 s later: the plan ended 0.39 s ago (timeout 0.1 s)
    msgs = [joint_state(later + i * DT_NS, *crane_motion(0.4 + i * 0.002)) for i in range(3)]
    send(h, js, msgs)
    wait_count(h, out["force"], n + 3, "driving_force with a stale plan")
    assert node.counts["stale_command"] >= 3
    for m in out["pred"]:
        assert prediction_arrays(m)["qdd"][1] != 5.0
    for m in out["force"]:
        assert np.all(np.isfinite(m.effort))
    for m in out["pred"]:
        assert all(
            np.all(np.isfinite(v)) for k, v in prediction_arrays(m).items() if k not in ("names", "n_free")
        )
    for m in out["energy"]:
        assert all(math.isfinite(v) for v in energy_dict(m).values())
    del rt


def test_namespace_and_remapping(make):
    node, h, _ns = make(
        name="servo_lnn", namespace="/robot_a", remap=["joint_states:=/elsewhere/states", "__node:=estimator"]
    )
    out = outputs(h, "/robot_a", name="estimator")
    assert node.get_fully_qualified_name() == "/robot_a/estimator"
    js = h.publisher(JointState, "/elsewhere/states", SENSOR_QOS)
    base = node.get_clock().now().nanoseconds
    send(h, js, [joint_state(base + k * DT_NS, *crane_motion(k * 0.002)) for k in range(6)])
    wait_count(h, out["force"], 4, "/robot_a/estimator/driving_force")


def test_parameter_changes(make):
    from rcl_interfaces.srv import SetParameters

    node, h, ns = make()
    rt = reference_runtime(node)
    out = outputs(h, ns)
    js = h.publisher(JointState, f"{ns}/joint_states", SENSOR_QOS)
    client = h.probe.create_client(SetParameters, f"{ns}/servo_lnn/set_parameters")
    reply = _call(
        h,
        client,
        SetParameters.Request(parameters=[Parameter("free_joint_forces", value=[0.7]).to_parameter_msg()]),
    )
    assert reply.results[0].successful
    bad = _call(
        h,
        client,
        SetParameters.Request(
            parameters=[Parameter("free_joint_forces", value=[0.7, 1.0]).to_parameter_msg()]
        ),
    )
    assert not bad.results[0].successful and "pendulum_joint" in bad.results[0].reason
    assert not node.set_parameters([Parameter("command_timeout_s", value=-1.0)])[0].successful
    base = node.get_clock().now().nanoseconds
    filt = CausalPolyDerivative(window=9, degree=2, order=1)
    expected, msgs = {}, []
    for k in range(6):
        s = base + k * DT_NS
        q, qd = crane_motion(k * 0.002)
        d = filt.update(k * 0.002, qd[1:])
        if d is not None:
            expected[s] = rt.evaluate(q, qd, d[0], np.array([0.7]))["Q_e"]
        msgs.append(joint_state(s, q, qd))
    send(h, js, msgs)
    wait_count(h, out["force"], len(expected), "driving_force")
    for m in out["force"]:
        np.testing.assert_array_equal(m.effort, expected[stamp_ns(m.header.stamp)])


def test_absurd_free_joint_forces_are_refused_at_the_set_counted_and_logged(make):
    """free_joint_forces [1e300] is finite but makes every output non-finite: it is refused at the set
    (the reason names the rule), counted once, logged in one line; the outputs go on with the old Q_f."""
    from rcl_interfaces.srv import SetParameters

    node, h, ns = make({"free_joint_forces": [0.4], "diagnostics_period_s": 0.1})
    rt = reference_runtime(node)
    logged: list[str] = []
    real_warning = node.get_logger().warning
    node.get_logger().warning = lambda text, **kw: (logged.append(text), real_warning(text, **kw))
    diags = h.collect(DiagnosticArray, "/diagnostics", COMMAND_QOS)
    out = outputs(h, ns)
    js = h.publisher(JointState, f"{ns}/joint_states", SENSOR_QOS)
    client = h.probe.create_client(SetParameters, f"{ns}/servo_lnn/set_parameters")
    reply = _call(
        h,
        client,
        SetParameters.Request(parameters=[Parameter("free_joint_forces", value=[1e300]).to_parameter_msg()]),
    )
    result = reply.results[0]
    assert not result.successful and "free_joint_forces" in result.reason and "<= 1e+06" in result.reason
    assert node.counts["parameter_refused"] == 1
    refusals = [text for text in logged if "parameter set refused" in text]
    assert len(refusals) == 1 and "free_joint_forces" in refusals[0], logged
    assert param(node, "free_joint_forces") == [0.4]

    def refused_in_diagnostics():
        mine = [st for arr in list(diags) for st in arr.status if st.name == f"{ns}/servo_lnn"]
        return any(kv.key == "parameter_refused" and kv.value == "1" for st in mine for kv in st.values)

    h.wait(refused_in_diagnostics, what="parameter_refused 1 in /diagnostics")
    base = node.get_clock().now().nanoseconds
    filt = CausalPolyDerivative(window=9, degree=2, order=1)
    expected, msgs = {}, []
    for k in range(12):
        s = base + k * DT_NS
        q, qd = crane_motion(k * 0.002)
        d = filt.update(k * 0.002, qd[1:])
        if d is not None:
            expected[s] = rt.evaluate(q, qd, d[0], np.array([0.4]))["Q_e"]
        msgs.append(joint_state(s, q, qd))
    send(h, js, msgs)
    wait_count(h, out["force"], len(expected), "driving_force")
    for m in out["force"]:
        np.testing.assert_array_equal(m.effort, expected[stamp_ns(m.header.stamp)])
    assert node.counts["non_finite_output"] == 0


def test_diagnostics_report_rate_latency_counts_and_model(make):
    node, h, ns = make({"diagnostics_period_s": 0.2})
    diags = h.collect(DiagnosticArray, "/diagnostics", COMMAND_QOS)
    js = h.publisher(JointState, f"{ns}/joint_states", SENSOR_QOS)
    base = node.get_clock().now().nanoseconds
    msgs = [joint_state(base + k * DT_NS, *crane_motion(k * 0.002)) for k in range(10)]
    msgs.append(joint_state(base + 11 * DT_NS, [math.nan, 0.0], [0.0, 0.0]))
    send(h, js, msgs)
    mine = f"{ns.strip('/')}"

    def status():
        for arr in reversed(list(diags)):
            for st in arr.status:
                if (
                    st.name == f"{ns}/servo_lnn"
                    and st.hardware_id == node.runtime.model_id
                    and any(kv.key == "processed" and kv.value == "8" for kv in st.values)
                    and any(kv.key == "non_finite" and kv.value == "1" for kv in st.values)
                ):
                    return st
        return None

    h.wait(lambda: status() is not None, what=f"a /diagnostics status from {mine}")
    st = status()
    values = {kv.key: kv.value for kv in st.values}
    assert values["model_id"] == node.runtime.model_id
    assert float(values["latency_median_us"]) > 0 and float(values["input_rate_hz"]) > 0
    assert st.level == b"\x01"  # WARN: an input was skipped


def test_array_commands_with_accelerations(make):
    node, h, ns = make({"servo_command_type": "array"})
    rt = reference_runtime(node)
    out = outputs(h, ns)
    cmd = h.publisher(Float64MultiArray, f"{ns}/servo_commands", COMMAND_QOS)
    cmd.publish(Float64MultiArray(data=[0.1, 0.2, -1.5]))  # q, q̇, q̈ of cart_joint
    cmd.publish(Float64MultiArray(data=[0.1, 0.2, -1.5, 7.0]))  # wrong size: rejected
    h.wait(lambda: node.counts["commands"] == 1 and node.counts["invalid_command"] == 1, what="commands")
    js = h.publisher(JointState, f"{ns}/joint_states", SENSOR_QOS)
    base = node.get_clock().now().nanoseconds
    msgs, inputs = [], {}
    for k in range(5):
        q, qd = crane_motion(k * 0.002)
        inputs[base + k * DT_NS] = (q, qd)
        msgs.append(joint_state(base + k * DT_NS, q, qd))
    send(h, js, msgs)
    wait_count(h, out["force"], 3, "driving_force")
    for m in out["force"]:
        q, qd = inputs[stamp_ns(m.header.stamp)]
        np.testing.assert_array_equal(m.effort, rt.evaluate(q, qd, np.array([-1.5]), np.zeros(1))["Q_e"])


def test_predicted_trajectory_over_the_servo_plan(make):
    node, h, ns = make({"rollout_horizon_s": 0.2, "rollout_dt_s": 0.02, "rollout_rate_hz": 100.0})
    rt = reference_runtime(node)
    rollouts = h.collect(JointTrajectory, f"{ns}/servo_lnn/predicted_trajectory", COMMAND_QOS)
    cmd = h.publisher(JointTrajectory, f"{ns}/servo_commands", COMMAND_QOS)
    base = node.get_clock().now().nanoseconds
    tp = np.linspace(0, 1.0, 11)
    w = 2 * np.pi * 0.5
    pq, pqd, pqdd = 0.1 * np.sin(w * tp), 0.1 * w * np.cos(w * tp), -0.1 * w * w * np.sin(w * tp)
    cmd.publish(plan_msg(base, tp, pq, pqd, pqdd))
    h.wait(lambda: node.counts["commands"] == 1, what="the plan")
    js = h.publisher(JointState, f"{ns}/joint_states", SENSOR_QOS)
    q, qd = np.array([0.2, 0.0]), np.array([0.1, 0.1])
    js.publish(joint_state(base + DT_NS, q, qd))
    wait_count(h, rollouts, 1, "predicted_trajectory")
    msg = rollouts[0]
    plan = ServoPlan(tp, pq[:, None], pqd[:, None], pqdd[:, None])

    def accel(x, v, q_e, qd_e, qdd_e):
        return rt.evaluate(np.concatenate([x, q_e]), np.concatenate([v, qd_e]), qdd_e, np.zeros(1))["qdd_f"]

    def servo(t):
        s = plan.sample(t)
        return s.q, s.qd, s.qdd

    taus, xs, vs, _ = rollout_free(accel, servo, 0.002, q[:1], qd[:1], 0.2, 0.02)
    assert stamp_ns(msg.header.stamp) == base + DT_NS and len(msg.points) == len(taus) == 11
    for pt, tau, x, v in zip(msg.points, taus, xs, vs):
        assert duration_ns(pt.time_from_start) == round(tau * 1e9)
        np.testing.assert_array_equal(pt.positions[:1], x)
        np.testing.assert_array_equal(pt.velocities[:1], v)
        np.testing.assert_array_equal(pt.positions[1:], plan.sample(0.002 + tau).q)


def test_process_whose_autostart_fails_stays_unconfigured_and_can_be_configured_later(ctx, tmp_path):
    """autostart with an unreadable model: one error line naming the file, the process keeps running with
    the node unconfigured; once model_path is fixed through the parameter service, a configure through
    the lifecycle service succeeds; SIGTERM then exits 0."""
    import os
    import signal
    import subprocess
    import sys

    from lifecycle_msgs.msg import State, Transition
    from lifecycle_msgs.srv import ChangeState, GetState
    from rcl_interfaces.msg import Parameter as ParameterMsg
    from rcl_interfaces.msg import ParameterType, ParameterValue
    from rcl_interfaces.srv import SetParameters

    from ros_lnn.inference.runtime import default_model_path

    missing = tmp_path / "missing.onnx"
    ns = f"/failing{os.getpid()}"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "ros_lnn.nodes.servo_lnn",
            "--ros-args",
            "-r",
            f"__ns:={ns}",
            "-p",
            f"model_path:={missing}",
            "-p",
            "autostart:=true",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    h = Harness(context=ctx)
    try:

        def call(srv_type, name, request):
            client = h.probe.create_client(srv_type, f"{ns}/servo_lnn/{name}")
            assert client.wait_for_service(timeout_sec=30), f"the node process offers no {name} service"
            # a request sent while the reply path is still being matched can be lost (DDS discovery);
            # a client retries it, as ros2 CLI tools do
            for _ in range(3):
                future = client.call_async(request)
                end = time.monotonic() + 10
                while time.monotonic() < end and not future.done():
                    time.sleep(0.01)
                if future.done():
                    return future.result()
            raise AssertionError(f"no answer from {name} in 3 tries of 10 s")

        assert (
            call(GetState, "get_state", GetState.Request()).current_state.id
            == State.PRIMARY_STATE_UNCONFIGURED
        )
        assert proc.poll() is None, "the process exited after a failed autostart"
        value = ParameterValue(type=ParameterType.PARAMETER_STRING, string_value=str(default_model_path()))
        result = call(
            SetParameters,
            "set_parameters",
            SetParameters.Request(parameters=[ParameterMsg(name="model_path", value=value)]),
        )
        assert result.results[0].successful
        configure = ChangeState.Request(transition=Transition(id=Transition.TRANSITION_CONFIGURE))
        assert call(ChangeState, "change_state", configure).success
        assert (
            call(GetState, "get_state", GetState.Request()).current_state.id == State.PRIMARY_STATE_INACTIVE
        )
    finally:
        h.close()
        output = stop_process(proc, signal.SIGTERM, timeout=20)
    errors = [line for line in output.splitlines() if "ERROR" in line]
    assert proc.returncode == 0, output[-3000:]
    assert len(errors) == 1 and "configure failed" in errors[0] and str(missing) in errors[0], output[-3000:]
    assert any("stays unconfigured" in line and "ros2 lifecycle set" in line for line in output.splitlines())


def test_every_parameter_is_declared_with_a_description(ctx):
    from ros_lnn.nodes.servo_lnn.node import PARAMETERS as EST
    from ros_lnn.nodes.sim.node import PARAMETERS as SIM
    from ros_lnn.nodes.sim.node import SimNode

    est = ServoLnnNode(namespace="/describe", context=ctx)
    sim = SimNode(namespace="/describe", context=ctx)
    try:
        for node, table in ((est, EST), (sim, SIM)):
            for p in table:
                descriptor = node.describe_parameter(p.name)
                assert len(descriptor.description) > 15, f"{node.get_name()}.{p.name} lacks a description"
                assert param(node, p.name) == p.default
                assert p.constraints() in descriptor.description
    finally:
        est.destroy_node()
        sim.destroy_node()
