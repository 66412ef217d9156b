"""``ros-lnn record``: real rclpy publish/subscribe into a bag, read back by the dataset reader."""

import os
import signal
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

from bag_helpers import crane_trials, mapping
from conftest import requires_rclpy, sigint_as_in_a_terminal
from ros_lnn.bags.dataset import load_bag_dataset

pytestmark = requires_rclpy
pytest.importorskip("rosbags")


def _wait(pred, timeout=10.0):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if pred():
            return True
        time.sleep(0.02)
    return False


def _messages(trial):
    from builtin_interfaces.msg import Duration, Time
    from sensor_msgs.msg import JointState
    from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

    base = 1_700_000_000 * 10**9
    for k in range(len(trial)):
        ns = base + int(round(trial.t[k] * 1e9))
        stamp = Time(sec=ns // 10**9, nanosec=ns % 10**9)
        js = JointState(
            name=list(trial.coordinate_names),
            position=trial.q[k].tolist(),
            velocity=trial.qd[k].tolist(),
            effort=trial.Q[k].tolist(),
        )
        js.header.stamp = stamp
        cmd = JointTrajectory(
            joint_names=list(trial.servo_joints),
            points=[
                JointTrajectoryPoint(
                    positions=trial.q[k, 1:].tolist(),
                    velocities=trial.qd[k, 1:].tolist(),
                    accelerations=trial.qdd[k, 1:].tolist(),
                    time_from_start=Duration(),
                )
            ],
        )
        cmd.header.stamp = stamp
        yield js, cmd


@pytest.fixture
def publisher():
    import rclpy
    from sensor_msgs.msg import JointState
    from trajectory_msgs.msg import JointTrajectory

    context = rclpy.Context()
    rclpy.init(context=context)
    node = rclpy.create_node("bag_test_publisher", context=context)
    pubs = (
        node.create_publisher(JointState, "/joint_states", 1000),
        node.create_publisher(JointTrajectory, "/servo_commands", 1000),
    )
    yield pubs
    node.destroy_node()
    context.try_shutdown()


@pytest.mark.parametrize("storage", ["sqlite3", "mcap"])
def test_record_publish_subscribe_roundtrip(tmp_path, publisher, storage):
    from ros_lnn.commands.record import record

    trial = crane_trials()[0]
    out, stop, counts, result = tmp_path / "rec", threading.Event(), {}, {}
    thread = threading.Thread(
        target=lambda: result.update(
            record(
                out,
                ["/joint_states", "servo_commands", "/not_published"],
                storage=storage,
                stop=stop,
                counts=counts,
                log=lambda m: None,
            )
        )
    )
    thread.start()
    try:
        assert _wait(lambda: all(p.get_subscription_count() > 0 for p in publisher)), (
            "recorder never subscribed"
        )
        for js, cmd in _messages(trial):
            publisher[0].publish(js)
            publisher[1].publish(cmd)
        assert _wait(
            lambda: counts.get("/joint_states") == len(trial) and counts.get("/servo_commands") == len(trial)
        )
    finally:
        stop.set()
        thread.join(10)
    assert result == {"/joint_states": len(trial), "/servo_commands": len(trial)}
    from rosbags.interfaces import QosReliability
    from rosbags.rosbag2 import Reader

    with Reader(out) as reader:  # the publishers' QoS is kept for 'ros2 bag play'
        qos = {c.topic: c.ext.offered_qos_profiles for c in reader.connections}
    assert [q.reliability for q in qos["/joint_states"]] == [QosReliability.RELIABLE]
    assert [q.reliability for q in qos["/servo_commands"]] == [QosReliability.RELIABLE]
    ds = load_bag_dataset(out, mapping(val_fraction=0))
    got = ds.trials[0]
    assert np.array_equal(got.q, trial.q) and np.array_equal(got.Q_e, trial.Q_e)
    assert np.array_equal(got.qdd[:, 1], trial.qdd[:, 1])
    assert np.max(np.abs(got.t - trial.t)) < 1e-9
    assert ds.summary["streams"]["/joint_states"]["stamps"] == "header"


def test_record_cli_ends_cleanly_on_ctrl_c(tmp_path, publisher):
    trial = crane_trials()[0]
    out = tmp_path / "ctrlc"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "ros_lnn.cli",
            "record",
            "--out",
            str(out),
            "--storage",
            "mcap",
            "--topics",
            "/joint_states",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=dict(os.environ),
        preexec_fn=sigint_as_in_a_terminal,
    )
    try:
        assert _wait(lambda: publisher[0].get_subscription_count() > 0, 30), "ros-lnn record never subscribed"
        n = 100
        for (js, _), _k in zip(_messages(trial), range(n)):
            publisher[0].publish(js)
        time.sleep(1.0)
        proc.send_signal(signal.SIGINT)
        stdout, stderr = proc.communicate(timeout=60)  # liveness bound, generous for a loaded CI machine
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, stderr
    assert f"/joint_states {n}" in stdout
    assert (out / "metadata.yaml").is_file()
    ds = load_bag_dataset(out, mapping(servo_topic="", val_fraction=0, min_samples=20))
    assert np.array_equal(ds.trials[0].q, trial.q[:n])
