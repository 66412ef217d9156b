"""~/markers come from a timer at marker_rate_hz (off the per-sample path): markers of the newest
processed sample, none while no new sample arrived, none at rate 0, and the rate is live."""

from __future__ import annotations

import time

import numpy as np
import pytest

from conftest import HAVE_RCLPY, requires_rclpy

pytestmark = [requires_rclpy, pytest.mark.ros]

if HAVE_RCLPY:
    import rclpy
    from rclpy.parameter import Parameter
    from sensor_msgs.msg import JointState
    from visualization_msgs.msg import Marker, MarkerArray

    from _ros_harness import Harness
    from ros_lnn.nodes.qos import COMMAND_QOS, SENSOR_QOS
    from ros_lnn.nodes.servo_lnn.node import ServoLnnNode, start
    from ros_lnn.nodes.stamps import ns_to_stamp, stamp_ns


def test_marker_timer_follows_samples_and_live_rate():
    from ros_lnn.inference.runtime import default_model_path

    context = rclpy.Context()
    rclpy.init(args=[], context=context)
    node = ServoLnnNode(
        namespace="/markers_t",
        context=context,
        parameter_overrides=[
            Parameter("model_path", value=str(default_model_path())),
            Parameter("servo_command_type", value="none"),
            Parameter("marker_rate_hz", value=0.0),
            Parameter("force_scale", value=0.1),
            # inputs stamped base + k·2 ms: a loaded runner's waits must not make them stale
            Parameter("max_input_age_s", value=0.0),
        ],
    )
    assert start(node), node.last_error
    h = Harness(node, context=context)
    try:
        markers = h.collect(MarkerArray, "/markers_t/servo_lnn/markers", COMMAND_QOS)
        force = h.collect(JointState, "/markers_t/servo_lnn/driving_force", SENSOR_QOS)
        js = h.publisher(JointState, "/markers_t/joint_states", SENSOR_QOS)
        base = node.get_clock().now().nanoseconds

        def send(k0, n):
            for k in range(k0, k0 + n):
                t = k * 0.002
                msg = JointState(
                    name=["pendulum_joint", "cart_joint"],
                    position=[0.1 * np.sin(t), 0.2 * t],
                    velocity=[0.1 * np.cos(t), 0.2],
                )
                msg.header.stamp = ns_to_stamp(base + k * 2_000_000)
                js.publish(msg)
                time.sleep(0.003)

        send(0, 20)
        h.wait(lambda: len(force) >= 15, 10, "driving_force")
        time.sleep(0.3)
        assert markers == []  # rate 0: no markers
        assert node.set_parameters([Parameter("marker_rate_hz", value=200.0)])[0].successful
        send(20, 20)
        h.wait(lambda: len(markers) >= 1, 10, "markers after the rate was set")

        def caught_up():
            """Every state taken and processed, its markers published and received (a loaded runner
            is still working through the second batch a fixed 0.2 s after the first marker)."""
            counts = node.counts
            if (
                counts["processed"] + counts["warming_up"] != counts["received"]
                or node._marker_stamp is not None
            ):
                return False
            with h.lock:
                newest = max((stamp_ns(m.header.stamp) for m in force), default=None)
                last = markers[-1] if markers else None
            arrows = [m for m in last.markers if m.type == Marker.ARROW] if last else []
            return bool(arrows) and stamp_ns(arrows[0].header.stamp) == newest

        h.wait(caught_up, 60, "markers of the newest sample, nothing left to process")
        n = len(markers)
        time.sleep(0.3)
        assert len(markers) == n  # no new sample, no new markers
        last = markers[-1]
        arrow = next(m for m in last.markers if m.type == Marker.ARROW)
        newest = max(force, key=lambda m: stamp_ns(m.header.stamp))
        assert stamp_ns(arrow.header.stamp) == stamp_ns(newest.header.stamp)  # the newest sample's
        assert arrow.points[1].x == pytest.approx(0.1 * newest.effort[0], rel=1e-12)
    finally:
        h.close()
        rclpy.try_shutdown(context=context)
