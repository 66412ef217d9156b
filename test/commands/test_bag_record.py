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


def _record_process(out, storage, topic, *extra, preexec_fn=sigint_as_in_a_terminal):
    return subprocess.Popen(
        [sys.executable, "-m", "ros_lnn.cli", "record", "--out", str(out), "--storage", storage]
        + ["--topics", topic, "--flush-interval", "0.2", *extra],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=dict(os.environ),
        preexec_fn=preexec_fn,
    )


def _positions(bag) -> list:
    """Every /…/joint_states message's first position, in the bag's order (rosbags reading it)."""
    from rosbags.rosbag2 import Reader
    from rosbags.typesys import Stores, get_typestore

    store = get_typestore(Stores.ROS2_KILTED)
    with Reader(bag) as reader:
        return [store.deserialize_cdr(raw, c.msgtype).position[0] for c, _, raw in reader.messages()]


def _flushed(out, scratch) -> int:
    """Messages the recorder has on disk now: its storage file (and journal) copied, the copy
    recovered and counted (the live bag is left alone)."""
    import shutil

    from ros_lnn.bags.recovery import reindex

    shutil.rmtree(scratch, ignore_errors=True)
    scratch.mkdir()
    for f in out.iterdir() if out.exists() else ():
        if f.suffix in (".db3", ".mcap") or f.name.endswith("-journal"):
            shutil.copy(f, scratch / f.name)
    try:
        return sum(reindex(scratch).values())
    except Exception:  # noqa: BLE001 - not created yet, or caught mid-write: not flushed yet
        return 0


def _joint_state(k: int):
    from sensor_msgs.msg import JointState

    return JointState(
        name=["joint_a", "joint_b"], position=[float(k), 0.0], velocity=[0.0] * 2, effort=[0.0] * 2
    )


@pytest.fixture
def probe():
    import rclpy

    context = rclpy.Context()
    rclpy.init(context=context)
    node = rclpy.create_node("bag_crash_probe", context=context)
    yield node
    node.destroy_node()
    context.try_shutdown()


@pytest.mark.parametrize("storage", ["sqlite3", "mcap"])
def test_a_recorder_killed_by_sigkill_leaves_a_bag_that_reads_up_to_its_last_flush(tmp_path, probe, storage):
    """`ros-lnn record` (its own process, flushing every 0.2 s) gets K messages, shows them on disk,
    gets M more and is killed by SIGKILL: `ros-lnn reindex` makes the bag readable, and it holds the
    first messages in order, at least the K flushed (at most K + M)."""
    from sensor_msgs.msg import JointState

    topic, out = f"/crash_{storage}/joint_states", tmp_path / "killed"
    pub = probe.create_publisher(JointState, topic, 1000)
    proc = _record_process(out, storage, topic)
    try:
        assert _wait(lambda: pub.get_subscription_count() > 0, 60), "ros-lnn record never subscribed"
        flushed_k, more_m = 300, 200
        for k in range(flushed_k):
            pub.publish(_joint_state(k))
            time.sleep(0.001)
        assert _wait(lambda: _flushed(out, tmp_path / "copy") >= flushed_k, 60), "the K messages on disk"
        for k in range(flushed_k, flushed_k + more_m):
            pub.publish(_joint_state(k))
        proc.send_signal(signal.SIGKILL)
        proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == -signal.SIGKILL
    assert not (out / "metadata.yaml").exists()  # never closed
    done = subprocess.run(
        [sys.executable, "-m", "ros_lnn.cli", "reindex", str(out)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    got = _positions(out)
    print(
        f"{storage}: {flushed_k + more_m} published, {flushed_k} on disk before SIGKILL, {len(got)} readable"
    )
    assert flushed_k <= len(got) <= flushed_k + more_m
    assert got == [float(k) for k in range(len(got))]
    assert f"reindexed {out}: {len(got)} messages ({topic} {len(got)})" in done.stdout


def _file_size_limit(limit: int):
    """preexec_fn: the recorder may write files of at most ``limit`` bytes (RLIMIT_FSIZE): a write
    beyond fails with EFBIG (Python ignores SIGXFSZ), as a full disk fails one with ENOSPC."""

    def apply():
        import resource

        sigint_as_in_a_terminal()
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    return apply


@pytest.mark.parametrize("storage", ["sqlite3", "mcap"])
def test_a_full_disk_stops_the_recording_with_one_line_and_leaves_a_readable_bag(tmp_path, probe, storage):
    """The recorder's files may not grow past 200 kB (RLIMIT_FSIZE: a real limit the kernel enforces,
    EFBIG, standing in for a full disk's ENOSPC, which needs a filesystem this test cannot mount):
    it stops with one error line (exit 2) naming the bag and what it keeps, and the bag reads as it
    is, in order, with its metadata.yaml."""
    from sensor_msgs.msg import JointState

    topic, out = f"/full_{storage}/joint_states", tmp_path / "full"
    pub = probe.create_publisher(JointState, topic, 1000)
    proc = _record_process(out, storage, topic, "--min-free", "0", preexec_fn=_file_size_limit(200_000))
    try:
        assert _wait(lambda: pub.get_subscription_count() > 0, 60), "ros-lnn record never subscribed"
        k = 0
        while proc.poll() is None and k < 50_000:  # ~80 bytes a message: the limit comes long before
            pub.publish(_joint_state(k))
            k += 1
            time.sleep(0.0005)
        _, stderr = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 2, stderr
    errors = [line for line in stderr.splitlines() if line.startswith("ros-lnn record: error:")]
    assert len(errors) == 1 and str(out) in errors[0] and "the disk refused a write" in errors[0], stderr
    kept = int(errors[0].rsplit("the bag keeps ", 1)[1].split()[0])
    assert (out / "metadata.yaml").is_file()
    got = _positions(out)
    print(f"{storage}: {k} published, {len(got)} readable after the disk refused a write")
    assert len(got) == kept > 100 and got == [float(i) for i in range(kept)]


def test_a_recording_stops_with_a_complete_bag_when_the_disk_runs_low(tmp_path, publisher):
    """Below --min-free (here: more than any disk has) the recording stops at its first flush with
    one line and a closed, complete bag."""
    from ros_lnn.commands.record import record
    from ros_lnn.errors import DataError

    out = tmp_path / "low"
    with pytest.raises(DataError, match=r"below --min-free 1e\+12: recording stopped .* closed and complete"):
        record(out, ["/joint_states"], flush_interval=0.1, min_free_mb=1e12, log=lambda m: None)
    assert (out / "metadata.yaml").is_file()
    assert _positions(out) == []
