"""JointStateReader reads q, q̇ and free-joint efforts straight from serialized JointState bytes: equal to
what rclpy's deserializer reads (independent code) for random layouts, names, orders and missing
fields; duplicated, missing, short and malformed messages are refused with a reason, never raised."""

import numpy as np
import pytest

from conftest import requires_rclpy

pytestmark = requires_rclpy

JOINTS = ["pendulum_joint", "cart_joint", "wrist"]


def random_state(rng, names, velocities=True, efforts=True, frame="base"):
    from sensor_msgs.msg import JointState

    msg = JointState(name=list(names), position=rng.normal(size=len(names)).tolist())
    if velocities:
        msg.velocity = rng.normal(size=len(names)).tolist()
    if efforts:
        msg.effort = rng.normal(size=len(names)).tolist()
    msg.header.stamp.sec, msg.header.stamp.nanosec = int(rng.integers(0, 2**31)), int(rng.integers(0, 10**9))
    msg.header.frame_id = frame
    return msg


def test_reader_equals_rclpy_deserialization():
    from rclpy.serialization import deserialize_message, serialize_message
    from sensor_msgs.msg import JointState

    from ros_lnn.nodes.joint_state_reader import JointStateReader

    rng = np.random.default_rng(11)
    reader = JointStateReader(JOINTS, n_free=2)
    extras = ["gripper", "ünïcode_joint", "a" * 40]
    for trial in range(200):
        names = JOINTS + list(rng.choice(extras, size=rng.integers(0, 3), replace=False))
        names = list(rng.permutation(names))
        frame = ["", "base", "a_long_frame_id"][trial % 3]
        msg = random_state(rng, names, velocities=trial % 4 != 1, efforts=trial % 5 != 2, frame=frame)
        raw = serialize_message(msg)
        for _ in range(2):  # the slow path (a new layout), then the cached one
            assert reader.read(raw) == ""
            ref = deserialize_message(raw, JointState)
            at = [list(ref.name).index(j) for j in JOINTS]
            assert reader.stamp_ns == ref.header.stamp.sec * 10**9 + ref.header.stamp.nanosec
            assert reader.frame_id == frame
            np.testing.assert_array_equal(reader.q, np.array(ref.position)[at])
            if ref.velocity:
                np.testing.assert_array_equal(reader.qd, np.array(ref.velocity)[at])
            else:
                assert reader.qd is None
            if ref.effort:
                np.testing.assert_array_equal(reader.effort_free, np.array(ref.effort)[at[:2]])
            else:
                assert reader.effort_free is None
            msg.position = rng.normal(size=len(names)).tolist()
            raw = serialize_message(msg)


@pytest.mark.parametrize(
    "names,reason",
    [
        (["pendulum_joint", "cart_joint", "cart_joint", "wrist"], "duplicate_joint"),
        (["pendulum_joint", "wrist"], "missing_joint"),
    ],
)
def test_duplicated_and_missing_joints_are_refused_every_time(names, reason):
    from rclpy.serialization import serialize_message

    from ros_lnn.nodes.joint_state_reader import JointStateReader

    rng = np.random.default_rng(2)
    reader = JointStateReader(JOINTS, n_free=2)
    raw = serialize_message(random_state(rng, names))
    assert reader.read(raw) == reason and reader.read(raw) == reason  # cached verdict, same answer
    assert "cart_joint" in reader.detail or "pendulum" in reader.detail


def test_short_arrays_oversized_and_garbage_are_refused_not_raised():
    from rclpy.serialization import serialize_message

    from ros_lnn.nodes.joint_state_reader import JointStateReader

    rng = np.random.default_rng(5)
    reader = JointStateReader(JOINTS, n_free=2, max_bytes=4096)
    msg = random_state(rng, JOINTS)
    msg.velocity = msg.velocity[:2]
    assert reader.read(serialize_message(msg)) == "bad_size"
    big = random_state(rng, JOINTS + [f"j{i}" for i in range(300)])
    assert reader.read(serialize_message(big)) == "bad_size" and "4096" in reader.detail
    good = serialize_message(random_state(rng, JOINTS))
    results = set()
    for cut in range(0, len(good) - 1, 3):  # every truncation
        results.add(reader.read(good[:cut]))
    for _ in range(300):  # random byte flips
        noisy = bytearray(good)
        for i in rng.integers(0, len(good), size=3):
            noisy[i] = int(rng.integers(0, 256))
        results.add(reader.read(bytes(noisy)))
    assert results <= {"", "malformed", "bad_size", "missing_joint", "duplicate_joint", "other_joints"}
    assert "malformed" in results
    assert reader.read(good) == ""  # and it reads a good message again


def test_trajectory_size_reads_points_without_touching_them():
    from rclpy.serialization import serialize_message
    from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

    from ros_lnn.nodes.joint_state_reader import trajectory_size

    msg = JointTrajectory(joint_names=["a", "bb", "ccc"])
    msg.header.frame_id = "world"
    msg.points = [JointTrajectoryPoint(positions=[1.0, 2.0, 3.0]) for _ in range(17)]
    raw = serialize_message(msg)
    assert trajectory_size(raw) == (3, 17)
    with pytest.raises(ValueError):
        trajectory_size(raw[:20])
