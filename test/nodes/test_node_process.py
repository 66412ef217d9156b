"""servo_lnn as its own process (`python -m`, default executor) managed through its lifecycle services
from this process over DDS: subscriptions created at activation, after the node was added to the
executor, deliver; deactivate/re-activate works; SIGINT exits 0."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import numpy as np
import pytest

from conftest import HAVE_RCLPY, requires_rclpy, stop_process

pytestmark = [requires_rclpy, pytest.mark.ros]

if HAVE_RCLPY:
    import rclpy
    from diagnostic_msgs.msg import DiagnosticArray
    from lifecycle_msgs.msg import Transition
    from lifecycle_msgs.srv import ChangeState
    from sensor_msgs.msg import JointState

    from _ros_harness import Harness
    from ros_lnn.nodes.qos import COMMAND_QOS, SENSOR_QOS
    from ros_lnn.nodes.stamps import ns_to_stamp, stamp_ns


def motion(k):
    t = k * 0.002
    q = np.array([0.3 * np.sin(1.3 * t) + 0.1, 0.2 * np.sin(4.4 * t)])
    qd = np.array([0.39 * np.cos(1.3 * t), 0.88 * np.cos(4.4 * t)])
    return q, qd


@pytest.mark.parametrize("executor", ["events", "single"])
def test_lifecycle_services_drive_a_node_process(ctx, executor):
    from ros_lnn.inference.runtime import default_model_path

    model = default_model_path()
    ns = f"/proc{os.getpid()}{executor}"
    env = dict(os.environ, ROS_LNN_EXECUTOR=executor)
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "ros_lnn.nodes.servo_lnn",
            "--ros-args",
            "-r",
            f"__ns:={ns}",
            "-p",
            f"model_path:={model}",
            "-p",
            "servo_command_type:=none",
        ],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    h = Harness(context=ctx)
    try:
        force = h.collect(JointState, f"{ns}/servo_lnn/driving_force", SENSOR_QOS)
        diagnostics = h.collect(DiagnosticArray, "/diagnostics", COMMAND_QOS)
        ours = lambda: [m for m in list(diagnostics) if m.status and m.status[0].name == f"{ns}/servo_lnn"]  # noqa: E731
        js = h.probe.create_publisher(JointState, f"{ns}/joint_states", SENSOR_QOS)
        change = h.probe.create_client(ChangeState, f"{ns}/servo_lnn/change_state")
        assert change.wait_for_service(timeout_sec=30), "the node process offers no change_state service"

        def transition(tid):
            future = change.call_async(ChangeState.Request(transition=Transition(id=tid)))
            h.wait(future.done, 20, "a lifecycle transition")
            return future.result().success

        clock = rclpy.clock.Clock()

        def stream(n):
            # stamped when sent, as a robot's driver does (stamps advanced by a fixed step fall behind
            # the clock on a loaded runner and the node skips them as stale)
            expected = {}
            for k in range(n):
                q, qd = motion(k)
                ns_stamp = clock.now().nanoseconds
                msg = JointState(
                    name=["cart_joint", "pendulum_joint"], position=[q[1], q[0]], velocity=[qd[1], qd[0]]
                )
                msg.header.stamp = ns_to_stamp(ns_stamp)
                expected[ns_stamp] = (q, qd)
                js.publish(msg)
                time.sleep(0.004)
            return expected

        for round_ in range(2):
            assert transition(Transition.TRANSITION_ACTIVATE if round_ else Transition.TRANSITION_CONFIGURE)
            if not round_:
                assert transition(Transition.TRANSITION_ACTIVATE)
            h.wait(lambda: js.get_subscription_count() == 1, 20, "the estimator's subscription")
            before = len(force)
            sent = stream(40)
            h.wait(lambda: len(force) - before >= 25, 60, f"driving_force from the process ({executor})")
            n_diag = len(ours())
            h.wait(
                lambda: len(ours()) > n_diag,
                20,
                f"/diagnostics from the timer made at activation ({executor})",
            )
            for m in force[before:]:
                q, qd = sent[stamp_ns(m.header.stamp)]
                assert m.name == ["cart_joint"] and np.isfinite(m.effort).all()
                assert list(m.position) == [q[1]] and list(m.velocity) == [qd[1]]
            assert transition(Transition.TRANSITION_DEACTIVATE)
            h.wait(lambda: js.get_subscription_count() == 0, 20, "the subscription to go")
        assert len({stamp_ns(m.header.stamp) for m in force}) == len(force)  # one output per input
    finally:
        h.close()
        output = stop_process(proc, timeout=20)
    assert proc.returncode == 0, output[-3000:]
