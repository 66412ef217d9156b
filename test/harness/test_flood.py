"""The flood harness (ros_lnn_lab/harness/flood.py) on effort_observer, short: the node in its own
process on the default executor (the joint_states intake), a 5 kHz flood for 2 s; its services answer
and it names the executor it ran. The full figures are ``ros-lnn bench flood``."""

from __future__ import annotations

import os
import random

import pytest

from conftest import requires_rclpy

pytestmark = [requires_rclpy, pytest.mark.ros]


def test_executor_of_reads_the_line_the_node_process_logs():
    from ros_lnn_lab.harness.flood import executor_of

    log = [
        "[INFO] [1.0] [flood1.servo_lnn]: activated",
        "[INFO] [1.1] [flood1.servo_lnn]: executor: intake (joint_states on a thread of their own, the "
        "rest on the SingleThreadedExecutor)",
    ]
    assert executor_of(log).startswith("intake (joint_states on a thread of their own")
    assert executor_of(["[INFO] [1.0] [x]: executor: SingleThreadedExecutor"]) == "SingleThreadedExecutor"
    assert executor_of(["no such line"]) == "unknown"


def test_effort_observer_under_a_short_flood_answers_and_names_its_executor():
    from ros_lnn_lab.harness.flood import effort_observer_target, measure_flood

    env = dict(os.environ)
    env.pop("ROS_LNN_EXECUTOR", None)  # the default
    env["ROS_DOMAIN_ID"] = str(random.SystemRandom().randint(101, 200))
    env["ROS_AUTOMATIC_DISCOVERY_RANGE"] = "LOCALHOST"
    os.environ["ROS_DOMAIN_ID"] = env["ROS_DOMAIN_ID"]
    r = measure_flood(
        effort_observer_target(),
        "panda",
        rate_hz=5000.0,
        duration_s=2.0,
        settle_s=1.0,
        env=env,
        log=lambda *_: None,
    )
    assert r["alive"] and r["processed"] > 0 and r["received"] <= r["sent"] + 1
    assert r["executor"].startswith("intake"), r["executor"]
    assert not r["flood"]["missed"] and r["flood"]["calls"] > 0
