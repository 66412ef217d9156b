"""dac_controller keeps the joints within their URDF limits over real DDS: a violation zeros the
efforts, latched until re-activation, with /diagnostics ERROR naming the joint; the parameters that
override the limits; and the closed loop with dac_chain_sim (lockstep, its own process) on a target
beyond joint1's limit."""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import pytest

from conftest import HAVE_RCLPY, requires_rclpy

pytestmark = [requires_rclpy, pytest.mark.ros]

if HAVE_RCLPY:
    from builtin_interfaces.msg import Duration
    from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus
    from rclpy.parameter import Parameter
    from rclpy.serialization import deserialize_message
    from sensor_msgs.msg import JointState
    from std_msgs.msg import Float64MultiArray
    from test_dac_node_residual import _sim_process
    from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

    from _ros_harness import Harness
    from ros_lnn.nodes.dac_controller.node import DacControllerNode, start
    from ros_lnn.nodes.qos import COMMAND_QOS, SENSOR_QOS
    from ros_lnn.nodes.stamps import ns_to_stamp, stamp_ns

URDF = Path(__file__).resolve().parents[2] / "config" / "dac_chain.urdf"
JOINTS = ["joint1", "joint2", "joint3", "joint4", "joint5"]
Q0 = np.array([0.1, -0.7, 1.3, 0.5, 0.3])
_ns = itertools.count()


def _node(ctx, **params):
    ns = f"/limits{next(_ns)}"
    overrides = [Parameter("robot_description", value=URDF.read_text())]
    overrides += [Parameter(k, value=v) for k, v in params.items()]
    return DacControllerNode(namespace=ns, context=ctx, parameter_overrides=overrides), ns


def _state(q, qd=(0.0,) * 5):
    msg = JointState()
    msg.name, msg.position, msg.velocity = JOINTS, [float(x) for x in q], [float(x) for x in qd]
    return msg


def _errors(diags, words):
    return [
        s.message
        for d in list(diags)
        for s in d.status
        if s.name.endswith("dac_controller") and s.level == DiagnosticStatus.ERROR and words in s.message
    ]


def _inverse_dynamics(q, qdd, qd=(0.0,) * 5):
    """H(q) q̈ + C(q, q̇) q̇ + g(q) of the URDF, by Pinocchio directly (the test's own reference)."""
    import pinocchio as pin

    model = pin.buildModelFromXML(URDF.read_text())
    args = (np.asarray(x, float) for x in (q, qd, qdd))
    return pin.rnea(model, model.createData(), *args)


def _violation_rig(ctx, **params):
    node, ns = _node(ctx, diagnostics_period_s=0.05, state_timeout_s=60.0, **params)
    assert start(node), node.last_error
    h = Harness(node, context=ctx)
    diags = h.collect(DiagnosticArray, "/diagnostics", COMMAND_QOS)
    efforts = h.collect(Float64MultiArray, f"{ns}/dac_controller/joint_effort_command", SENSOR_QOS)
    ports = h.collect(Float64MultiArray, f"{ns}/dac_controller/port_command", SENSOR_QOS)
    states = h.publisher(JointState, f"{ns}/joint_states", SENSOR_QOS)

    def answer(q, qd=(0.0,) * 5):
        before, sent = node.counts["processed"], len(efforts)
        states.publish(_state(q, qd))
        h.wait(lambda: node.counts["processed"] > before and len(efforts) > sent, what="an answer")
        h.wait(lambda: len(ports) >= len(efforts), what="the port command")
        return np.asarray(efforts[-1].data)  # the only publisher: the stale watchdog waits 60 s

    return node, h, diags, ports, states, answer


def test_a_violation_is_a_protective_stop_latched_until_reactivation(ctx):
    """limit_reaction brake (the default): a joint state beyond a limit gets a zero port and efforts
    that hold every joint where it came to rest against gravity and bring joint3 back inside its soft
    limit (3.0) at 0.25 rad/s (the stop's q̈ = 50 (0.25 − 0) on it), latched: a state back inside still
    gets the stop; deactivate + activate resets it. Efforts from Pinocchio's RNEA on the URDF."""
    node, h, diags, ports, states, answer = _violation_rig(ctx)
    try:
        normal = answer(Q0)
        assert np.any(normal != 0)  # gravity held
        beyond = Q0.copy()
        beyond[2] = 3.2  # joint3's URDF limit is 3.1, its soft limit 3.0
        back = np.array([0.0, 0.0, -50 * 0.25, 0.0, 0.0])
        np.testing.assert_allclose(answer(beyond), _inverse_dynamics(beyond, back), rtol=1e-9, atol=1e-9)
        assert not any(ports[-1].data)
        h.wait(lambda: _errors(diags, "joint3 position 3.2 beyond its upper limit 3.1"), what="ERROR")
        assert "protective stop" in _errors(diags, "joint3")[-1] and "latched" in _errors(diags, "joint3")[-1]
        # latched: back inside, the stop holds every joint where it stopped (joint3 at its soft limit)
        toward = np.array([0.0, 0.0, 50 * 0.25, 0.0, 0.0])
        np.testing.assert_allclose(answer(Q0), _inverse_dynamics(Q0, toward), rtol=1e-9, atol=1e-9)
        assert node.counts["limit_violation"] == 1
        h.call(node.trigger_deactivate)
        h.call(node.trigger_activate)  # the documented reset
        h.wait(lambda: states.get_subscription_count() >= 1, what="resubscribed")
        np.testing.assert_allclose(answer(Q0), normal, rtol=1e-9, atol=1e-9)
        qd = (0.0, 7.5, 0.0, 0.0, 0.0)  # 7.5 > 1.2 × 6 rad/s: braked as hard as the effort limits allow
        limits = node.pipeline.efforts.limits
        braking = _inverse_dynamics(Q0, -50 * np.asarray(qd), qd)
        np.testing.assert_allclose(answer(Q0, qd), np.clip(braking, -limits, limits), atol=1e-9)
        h.wait(lambda: _errors(diags, "joint2 velocity 7.5 beyond 1.2 × its limit 6"), what="velocity ERROR")
        assert node.counts["limit_violation"] == 2
    finally:
        h.close()


def test_with_limit_reaction_zero_a_violation_zeros_the_efforts_latched_until_reactivation(ctx):
    node, h, diags, ports, states, answer = _violation_rig(ctx, limit_reaction="zero")
    try:
        assert np.any(answer(Q0) != 0)  # gravity held
        beyond = Q0.copy()
        beyond[2] = 3.2  # joint3's URDF limit is 3.1
        assert not answer(beyond).any() and not any(ports[-1].data)
        h.wait(lambda: _errors(diags, "joint3 position 3.2 beyond its upper limit 3.1"), what="ERROR")
        assert "zero efforts, latched" in _errors(diags, "joint3")[-1]
        assert not answer(Q0).any()  # latched: back inside, still zero
        assert node.counts["limit_violation"] == 1
        h.call(node.trigger_deactivate)
        h.call(node.trigger_activate)  # the documented reset
        h.wait(lambda: states.get_subscription_count() >= 1, what="resubscribed")
        assert np.any(answer(Q0) != 0)
        assert not answer(Q0, (0.0, 7.5, 0.0, 0.0, 0.0)).any()  # 7.5 > 1.2 × 6 rad/s
        h.wait(lambda: _errors(diags, "joint2 velocity 7.5 beyond 1.2 × its limit 6"), what="velocity ERROR")
        assert node.counts["limit_violation"] == 2
    finally:
        h.close()


def test_limit_parameters_override_the_urdf_and_are_checked(ctx):
    pairs = [-3.0, 3.0, -2.0, 0.5, -3.0, 3.0, -3.0, 3.0, -3.0, 3.0]
    node, _ = _node(ctx, position_limits=pairs, velocity_limits=[2.0], limit_margin=0.05)
    assert start(node), node.last_error
    guard = node.pipeline.joint_limits
    assert guard.limits.upper[1] == pytest.approx(0.5) and guard.limits.velocity == pytest.approx([2.0] * 5)
    assert guard.soft_upper[1] == pytest.approx(0.45)
    node.destroy_node()
    off, _ = _node(ctx, enforce_joint_limits=False)
    assert start(off), off.last_error
    assert off.pipeline.joint_limits is None
    off.destroy_node()
    for params, words in (
        ({"position_limits": [1.0, 0.0] * 5}, "lower < upper"),
        ({"position_limits": [-1.0, 1.0, 0.0]}, "lower, upper per joint"),
        ({"position_limits": [-1.0, 1.0]}, "lower, upper for each joint"),
        ({"velocity_limits": [1.0, 2.0]}, "velocity_limits has 2"),
    ):
        bad, _ = _node(ctx, **params)
        assert not start(bad)
        assert words in bad.last_error, bad.last_error
        bad.destroy_node()


def test_the_loop_with_the_simulator_keeps_a_joint_driven_past_its_limit_inside_it(ctx):
    """dac_chain_sim in lockstep (its own process, simulated time on /clock) and dac_controller (law
    II, use_sim_time) on a joint trajectory that ends 0.5 rad beyond joint1's URDF limit of 3.1: the
    soft limits stop joint1 inside it; nothing trips."""
    ns = f"/limloop{next(_ns)}"
    q0 = np.array([2.8, -0.7, 1.3, 0.5, 0.3])
    q1 = q0.copy()
    q1[0] = 3.6
    sim_params = {"lockstep": True, "hold_until_command": True, "initial_positions": q0}
    with _sim_process(ns, sim_params):
        ctl = DacControllerNode(
            namespace=ns,
            context=ctx,
            parameter_overrides=[
                Parameter("robot_description", value=URDF.read_text()),
                Parameter("law", value="pose"),
                Parameter("use_sim_time", value=True),
            ],
        )
        assert start(ctl), ctl.last_error
        h = Harness(ctl, context=ctx)
        try:
            raw: list[bytes] = []
            h.probe.create_subscription(JointState, f"{ns}/joint_states", raw.append, SENSOR_QOS, raw=True)
            pub = h.publisher(JointTrajectory, f"{ns}/dac_controller/joint_trajectory", COMMAND_QOS)
            h.wait(lambda: ctl.counts["processed"] > 20, timeout=30.0, what="the loop closed")
            start_ns = ctl.get_clock().now().nanoseconds + 100_000_000
            msg = JointTrajectory(joint_names=JOINTS)
            msg.header.stamp = ns_to_stamp(start_ns)
            for t, q in ((0.0, q0), (1.0, q1)):
                msg.points.append(
                    JointTrajectoryPoint(
                        positions=[float(x) for x in q], time_from_start=Duration(sec=int(t), nanosec=0)
                    )
                )
            pub.publish(msg)
            h.wait(lambda: ctl.pipeline.has_target, what="trajectory")

            def sim_time_s():
                return (stamp_ns(deserialize_message(raw[-1], JointState).header.stamp) - start_ns) * 1e-9

            # and the > 1000 states asserted below: the best-effort probe can miss some behind a stall
            h.wait(
                lambda: raw and sim_time_s() > 2.5 and len(raw) > 1000,
                timeout=120.0,
                what="2.5 s of simulated time and more than 1000 states",
            )
            taken = [deserialize_message(b, JointState) for b in list(raw)]
            q_joint1 = np.array([m.position[0] for m in taken])
            assert len(taken) > 1000
            assert q_joint1.max() < 3.1 - 0.05, q_joint1.max()
            assert q_joint1[-1] > 2.9  # it went to the soft limit, and stopped there
            assert ctl.counts["limit_soft"] > 0 and ctl.counts["limit_violation"] == 0
            assert ctl.limit_violation == ""
        finally:
            h.close()


def test_gains_of_1e6_set_live_on_the_loop_trip_a_stop_that_brings_the_arm_to_rest_inside_its_limits(ctx):
    """The demo's closed loop over topics (dac_chain_sim in lockstep, its own process; dac_controller on
    config/dac_demo.yaml, use_sim_time): gains of 1e6 set live trip the latched joint-limit stop; the
    protective stop (the default) brakes every joint to rest inside its hard limits and holds it there
    against gravity (zero efforts let the arm coast past them: ros-lnn bench stop)."""
    import yaml

    demo = yaml.safe_load((URDF.parent / "dac_demo.yaml").read_text())
    ns = f"/stoploop{next(_ns)}"
    sim = demo["/**/dac_chain_sim"]["ros__parameters"]
    sim_params = {"lockstep": True, "hold_until_command": True, "initial_positions": sim["initial_positions"]}
    params = demo["/**/dac_controller"]["ros__parameters"]
    with _sim_process(ns, sim_params):
        ctl = DacControllerNode(
            namespace=ns,
            context=ctx,
            parameter_overrides=[
                Parameter("robot_description", value=URDF.read_text()),
                Parameter("use_sim_time", value=True),
                *(Parameter(k, value=v) for k, v in params.items()),
            ],
        )
        assert start(ctl), ctl.last_error
        h = Harness(ctl, context=ctx)
        try:
            raw: list[bytes] = []
            h.probe.create_subscription(JointState, f"{ns}/joint_states", raw.append, SENSOR_QOS, raw=True)
            h.wait(lambda: ctl.counts["processed"] > 200, timeout=60.0, what="the loop closed")
            gains = [Parameter(k, value=1e6) for k in ("kd_linear", "kd_angular", "lambda_position")]
            assert all(r.successful for r in h.call(lambda: ctl.set_parameters(gains)))
            h.wait(lambda: ctl.limit_violation, timeout=60.0, what="the latched joint-limit stop")
            stopped_at = ctl.get_clock().now().nanoseconds

            def sim_time(b: bytes) -> int:
                return stamp_ns(deserialize_message(b, JointState).header.stamp)

            h.wait(
                lambda: raw and sim_time(raw[-1]) > stopped_at + 2_000_000_000,
                timeout=120.0,
                what="2 s of simulated time after the stop",
            )
            after = [deserialize_message(b, JointState) for b in list(raw) if sim_time(b) > stopped_at]
            q = np.array([m.position for m in after])
            qd = np.array([m.velocity for m in after])
            assert len(after) > 500
            assert np.abs(q).max() < 3.1, np.abs(q).max(axis=0)  # the URDF's limits: ±3.1 rad
            assert np.abs(qd[-100:]).max() < 0.05, np.abs(qd[-100:]).max(axis=0)  # at rest, held
            assert np.ptp(q[-100:], axis=0).max() < 1e-3  # not sinking under gravity
        finally:
            h.close()
