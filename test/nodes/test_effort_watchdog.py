"""effort_watchdog between an effort producer and a ros2_control effort controller, over real DDS: a
subscriber with the controller's QoS (system default, reliable) gets every command unchanged, zeros
before the first one, and zeros, repeated, once commands stop for timeout_s; never the last effort held."""

from __future__ import annotations

import math
import time

import pytest

from conftest import HAVE_RCLPY, requires_rclpy

pytestmark = [requires_rclpy, pytest.mark.ros]

if HAVE_RCLPY:
    from rclpy.parameter import Parameter
    from rclpy.qos import QoSProfile, ReliabilityPolicy, qos_profile_system_default
    from std_msgs.msg import Float64MultiArray

    from _ros_harness import Harness
    from ros_lnn.nodes.effort_watchdog.node import EffortWatchdogNode

JOINTS = ["joint1", "joint2", "joint3"]
TIMEOUT = 0.3


# long enough that a loaded runner's stall between two commands of the stream never reaches it: the
# test asserts that no zeros come while commands are fresh
STREAM_TIMEOUT = 2.0


def test_relay_forwards_commands_and_zeroes_when_they_stop(ctx):
    node = EffortWatchdogNode(
        namespace="/wd",
        context=ctx,
        parameter_overrides=[
            Parameter("timeout_s", value=STREAM_TIMEOUT),
            Parameter("period_s", value=0.02),
            Parameter("joints", value=JOINTS),
        ],
    )
    h = Harness(node, context=ctx)
    received = []  # (monotonic receive time, values)
    try:
        h.probe.create_subscription(
            Float64MultiArray,
            "/wd/commands_out",
            lambda m: received.append((time.monotonic(), list(m.data))),
            qos_profile_system_default,
        )
        h.wait(lambda: len(received) >= 3, 10, "zeros before the first command")
        assert all(values == [0.0] * 3 for _, values in received)

        # a producer publishing best effort, as dac_controller's ~/joint_effort_command does
        producer = h.publisher(
            Float64MultiArray,
            "/wd/commands_in",
            QoSProfile(depth=10, reliability=ReliabilityPolicy.BEST_EFFORT),
        )
        # a best-effort sample reaches only a reader that has matched the writer too (discovery runs
        # both ways; the publisher's own count says only that it matched the reader)
        relay_in = next(sub for sub in node.subscriptions if sub.topic_name == "/wd/commands_in")
        h.wait(lambda: relay_in.get_publisher_count() >= 1, 60, "the relay's input matched the producer")
        start = len(received)
        sent = [[0.5 + k, -1.0 - k, 0.01 * k] for k in range(30)]
        for k, values in enumerate(sent):  # one in flight: a best-effort input behind a stall drops none
            producer.publish(Float64MultiArray(data=values))
            last_sent = time.monotonic()
            h.wait(lambda k=k: node.counts["forwarded"] == k + 1, 60, f"command {k} forwarded")
        h.wait(
            lambda: [v for _, v in received[start:] if v != [0.0] * 3] == sent, 60, "the forwarded commands"
        )
        first_forwarded = next(i for i in range(start, len(received)) if received[i][1] == sent[0])
        during = [v for _, v in received[first_forwarded:] if v not in sent]
        assert not during, f"the watchdog interleaved {during} while commands were fresh"

        # the producer stops: zeros, not the last effort, from timeout_s after the last command on
        stop = len(received)
        h.wait(
            lambda: sum(v == [0.0] * 3 for _, v in received[stop:]) >= 5,
            60,
            "zeros after the commands stopped",
        )
        zeros = [(t, v) for t, v in received[stop:] if v == [0.0] * 3]
        assert zeros[0][0] - last_sent >= STREAM_TIMEOUT
        assert all(v == [0.0] * 3 for _, v in received[stop:])

        # wrong size and non-finite commands are dropped (the zeros go on); valid ones are forwarded again
        for bad in ([1.0, 2.0], [1.0, math.nan, 0.0]):
            producer.publish(Float64MultiArray(data=bad))
        h.wait(lambda: node.counts["dropped"] == 2, 10, "two dropped commands")
        resume = len(received)
        producer.publish(Float64MultiArray(data=[3.0, 2.0, 1.0]))
        h.wait(lambda: [3.0, 2.0, 1.0] in [v for _, v in received[resume:]], 10, "the resumed command")
        assert all(v in ([0.0] * 3, [3.0, 2.0, 1.0]) for _, v in received[stop:])
        assert node.counts["forwarded"] == len(sent) + 1
    finally:
        h.close()
        node.destroy_node()


ARM = ["joint1", "joint2", "joint3", "joint4", "joint5"]


def _watchdog(ctx, namespace, **params):
    overrides = [Parameter(k, value=v) for k, v in {"joints": ARM, "timeout_s": TIMEOUT, **params}.items()]
    return EffortWatchdogNode(namespace=namespace, context=ctx, parameter_overrides=overrides)


def test_a_wrong_sized_first_command_never_sets_the_size(ctx):
    """The size comes from `joints`: a first [] or 3-value command is dropped and answered by zeros of
    the real size; every real 5-value command after it is forwarded."""
    node = _watchdog(ctx, "/wd_size")
    h = Harness(node, context=ctx)
    try:
        received = h.collect(
            Float64MultiArray,
            "/wd_size/commands_out",
            QoSProfile(depth=100, reliability=ReliabilityPolicy.RELIABLE),
        )
        producer = h.publisher(
            Float64MultiArray,
            "/wd_size/commands_in",
            QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE),
        )
        h.wait(lambda: len(received) >= 2, 10, "zeros before the first command")
        producer.publish(Float64MultiArray(data=[]))
        producer.publish(Float64MultiArray(data=[1.0, 2.0, 3.0]))
        h.wait(lambda: node.counts["dropped"] == 2, 10, "the two wrong-sized commands counted")
        real = [[0.1 * k, 0.2, -0.3, 0.4, 0.5 * k] for k in range(1, 11)]
        for values in real:
            producer.publish(Float64MultiArray(data=values))
            time.sleep(0.005)
        h.wait(lambda: node.counts["forwarded"] == len(real), 10, "the real commands forwarded")
        h.wait(lambda: all(v in [list(m.data) for m in received] for v in real), 10, "the real commands")
        sizes = {len(m.data) for m in received}
        assert sizes == {5}, f"the watchdog published commands of sizes {sizes}"
        assert node.counts["forwarded"] == len(real)
    finally:
        h.close()


def test_zeros_on_the_steady_clock_when_clock_and_commands_stop_together(ctx):
    """use_sim_time: /clock runs while commands flow, then /clock and the commands stop together (a
    crashed simulator): zeros come within the timeout, measured on the steady clock."""
    from rosgraph_msgs.msg import Clock as ClockMsg

    node = _watchdog(ctx, "/wd_clock", use_sim_time=True, period_s=0.02)
    h = Harness(node, context=ctx)
    try:
        received = []
        h.probe.create_subscription(
            Float64MultiArray,
            "/wd_clock/commands_out",
            lambda m: received.append((time.monotonic(), list(m.data))),
            qos_profile_system_default,
        )
        clock = h.publisher(ClockMsg, "/clock", 10)
        producer = h.publisher(
            Float64MultiArray,
            "/wd_clock/commands_in",
            QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE),
        )
        # when the node itself published each message: the window below is the node's, not the probe's
        published = []
        forward = node.pub.publish
        node.pub.publish = lambda m: (published.append((time.monotonic(), list(m.data))), forward(m))
        sim_ns = 1_000_000_000
        command = [1.0, -1.0, 0.5, 0.2, 0.1]
        for _ in range(50):  # 0.5 s of a running simulator
            sim_ns += 10_000_000
            clock.publish(ClockMsg(clock=rclpy_time(sim_ns)))
            producer.publish(Float64MultiArray(data=command))
            time.sleep(0.01)
        stopped = time.monotonic()
        h.wait(lambda: node.get_clock().now().nanoseconds == sim_ns, 5, "the node's clock at the last /clock")
        h.wait(lambda: any(t > stopped and v == [0.0] * 5 for t, v in received), 5, "zeros after the stop")
        first_zero = next(t for t, v in received if t > stopped and v == [0.0] * 5)
        # from the node's receipt of the last command to its first zeros (a loaded runner's delivery of
        # that command, or of the zeros to the probe, is no part of the watchdog's timeout)
        last = node.last_command
        sent_zero = next(t for t, v in list(published) if t > last and v == [0.0] * 5)
        assert sent_zero - last < TIMEOUT + 0.25, f"zeros {sent_zero - last:.3f} s after the last command"
        assert node.get_clock().now().nanoseconds == sim_ns  # the ROS clock did stop
        h.wait(lambda: sum(t > first_zero for t, _ in received) >= 5, 60, "zeros repeated while stopped")
        after = [v for t, v in received if t > first_zero]
        assert len(after) >= 5 and all(v == [0.0] * 5 for v in after), "zeros repeated while stopped"
    finally:
        h.close()


def rclpy_time(ns: int):
    from builtin_interfaces.msg import Time

    return Time(sec=ns // 1_000_000_000, nanosec=ns % 1_000_000_000)


@pytest.mark.parametrize(
    ("params", "words"),
    [
        ({"timeout_s": math.nan}, "finite"),
        ({"timeout_s": -1.0}, ">= 0.001"),
        ({"timeout_s": 1e308}, "<= 10"),
        ({"timeout_s": "abc"}, "number"),
        ({"period_s": 0.0}, ">= 0.001"),
        ({"period_s": -1.0}, ">= 0.001"),
        ({"period_s": 0.5, "timeout_s": 0.1}, "period_s must not exceed timeout_s"),
        ({"joints": []}, "joints is empty"),
        ({"joints": ["a", "a"]}, "more than once"),
    ],
)
def test_start_up_values_are_checked(ctx, params, words):
    from ros_lnn.errors import ConfigError

    with pytest.raises(ConfigError, match=words.replace("(", r"\(")) as info:
        _watchdog(ctx, "/wd_bad", **params)
    assert "\n" not in str(info.value)


def test_a_bad_start_up_value_is_one_line_and_exit_2():
    import subprocess
    import sys

    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "ros_lnn.nodes.effort_watchdog",
            "--ros-args",
            "-p",
            "timeout_s:=abc",
            "-p",
            "joints:=[a,b]",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode == 2, out
    assert "Traceback" not in out
    errors = [line for line in out.splitlines() if "ERROR" in line]
    assert len(errors) == 1 and "timeout_s" in errors[0], out


def test_a_declared_parameter_cannot_be_deleted_nor_set(ctx):
    node = _watchdog(ctx, "/wd_delete")
    try:
        for name in ("joints", "timeout_s"):
            result = node.set_parameters([Parameter(name)])[0]  # NOT_SET: a delete
            assert not result.successful and "cannot be deleted" in result.reason
            assert node.has_parameter(name)
        result = node.set_parameters([Parameter("timeout_s", value=5.0)])[0]
        assert not result.successful and "read when the node starts" in result.reason
        assert node.get_parameter("joints").value == ARM
    finally:
        node.destroy_node()
