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
    from ros_lnn.nodes.effort_watchdog import EffortWatchdogNode

JOINTS = ["joint1", "joint2", "joint3"]
TIMEOUT = 0.3


def test_relay_forwards_commands_and_zeroes_when_they_stop(ctx):
    node = EffortWatchdogNode(
        namespace="/wd",
        context=ctx,
        parameter_overrides=[
            Parameter("timeout_s", value=TIMEOUT),
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
        start = len(received)
        sent = [[0.5 + k, -1.0 - k, 0.01 * k] for k in range(30)]
        for values in sent:
            producer.publish(Float64MultiArray(data=values))
            last_sent = time.monotonic()
            time.sleep(0.01)
        h.wait(
            lambda: [v for _, v in received[start:] if v != [0.0] * 3] == sent, 10, "the forwarded commands"
        )
        first_forwarded = next(i for i in range(start, len(received)) if received[i][1] == sent[0])
        during = [v for _, v in received[first_forwarded:] if v not in sent]
        assert not during, f"the watchdog interleaved {during} while commands were fresh"

        # the producer stops: zeros, not the last effort, from timeout_s after the last command on
        stop = len(received)
        h.wait(
            lambda: sum(v == [0.0] * 3 for _, v in received[stop:]) >= 5,
            10,
            "zeros after the commands stopped",
        )
        zeros = [(t, v) for t, v in received[stop:] if v == [0.0] * 3]
        assert zeros[0][0] - last_sent >= TIMEOUT
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
