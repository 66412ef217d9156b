"""Joint states split over several publishers, merged by joint name within a window: the reader gives
the same values as for the whole message, once per cycle, stamped with the newest part's stamp; parts
out of the window or without a partner are dropped and counted, never turned into a sample."""

from __future__ import annotations

import numpy as np
import pytest

from conftest import requires_rclpy
from ros_lnn.nodes.joint_state_reader import JointStateMerge

JOINTS = ["a", "b", "c", "d", "e", "f"]  # the first two are the free joints
WINDOW_NS = 2_000_000
T0 = 1_700_000_000_000_000_000


def state(stamp, names, q, qd=True, effort=True, frame="base"):
    from sensor_msgs.msg import JointState

    from ros_lnn.nodes.stamps import ns_to_stamp

    msg = JointState(name=list(names), position=[float(x) for x in q])
    if qd:
        msg.velocity = [10.0 * x for x in msg.position]
    if effort:
        msg.effort = [100.0 * x for x in msg.position]
    msg.header.stamp, msg.header.frame_id = ns_to_stamp(stamp), frame
    return msg


def part(stamp, names, values, **kw):
    """A part carrying ``names`` (values from the full vector ``values``) and a joint no model knows."""
    from rclpy.serialization import serialize_message

    q = [values[JOINTS.index(j)] for j in names] + [0.5]
    return serialize_message(state(stamp, list(names) + ["gripper"], q, **kw))


def reader(window_ns=WINDOW_NS):
    from ros_lnn.nodes.joint_state_reader import JointStateReader

    return JointStateReader(JOINTS, n_free=2, merge_window_ns=window_ns)


def snapshot(r):
    return (
        r.stamp_ns,
        r.frame_id,
        r.q.copy(),
        None if r.qd is None else r.qd.copy(),
        None if r.effort_free is None else r.effort_free.copy(),
    )


def assert_same(got, want):
    assert got[0] == want[0] and got[1] == want[1]
    for g, w in zip(got[2:], want[2:]):
        if w is None:
            assert g is None
        else:
            np.testing.assert_array_equal(g, w)


SPLITS = {
    "two ways": [["a", "b", "c"], ["d", "e", "f"]],
    "two ways, interleaved names": [["f", "a", "d"], ["c", "e", "b"]],
    "per joint": [[j] for j in JOINTS],
}


@requires_rclpy
@pytest.mark.parametrize("split", list(SPLITS))
def test_split_states_read_as_the_whole_message(split):
    """Each cycle's parts (stamps a little apart, arrival order varying) give one sample equal to the
    whole message's, stamped with the newest part's stamp, and only once the last part arrived."""
    from rclpy.serialization import serialize_message

    rng = np.random.default_rng(3)
    merged, whole = reader(), reader(window_ns=0)
    groups = SPLITS[split]
    for cycle in range(30):
        values = rng.normal(size=len(JOINTS))
        base = T0 + cycle * 1_000_000
        offsets = rng.integers(0, 300_000, size=len(groups))  # each publisher stamps at its own time
        order = rng.permutation(len(groups))
        for i, g in enumerate(order):
            reason = merged.read(part(base + int(offsets[g]), groups[g], values))
            if i < len(groups) - 1:
                assert reason == "partial", (cycle, i)
            else:
                assert reason == ""
        assert whole.read(serialize_message(state(base + int(offsets.max()), JOINTS, values))) == ""
        assert_same(snapshot(merged), snapshot(whole))
    assert merged.merge.dropped == 0


@requires_rclpy
def test_two_publishers_both_stay_on_the_fast_path():
    """Alternating layouts (an arm's and a gripper's publisher) are each parsed once. (Names and frame
    of 3 characters: the serializer leaves padding after a string undefined, which would look like a
    new layout.)"""
    from rclpy.serialization import serialize_message

    from ros_lnn.nodes.joint_state_reader import JointStateReader

    joints = [f"j{k:02d}" for k in range(6)]
    r = JointStateReader(joints, n_free=2, merge_window_ns=WINDOW_NS)
    parsed = []
    new_layout = r._new_layout
    r._new_layout = lambda raw: parsed.append(1) or new_layout(raw)
    for k in range(50):
        for names in (joints[:4], joints[4:] + ["grp"]):
            msg = state(T0 + k * 1_000_000, names, np.arange(len(names)), frame="map")
            assert r.read(serialize_message(msg)) == ("" if names[0] == "j04" else "partial")
    assert len(parsed) == 2 and r.merge.dropped == 0


@requires_rclpy
def test_out_of_window_parts_are_dropped_and_counted():
    values = np.arange(6.0)
    r = reader()
    assert r.read(part(T0, "abc", values)) == "partial"
    # the partner comes 3 ms later (window 2 ms): the first part is dropped, the partner is held
    assert r.read(part(T0 + 3_000_000, "def", values)) == "partial"
    assert r.take_dropped() == 1 and "merge window" in r.merge.detail
    assert r.read(part(T0 + 3_500_000, "abc", values + 1)) == ""
    assert r.stamp_ns == T0 + 3_500_000
    np.testing.assert_array_equal(r.q, np.r_[values[:3] + 1, values[3:]])
    # a part older than the window on arrival is dropped at once
    assert r.read(part(T0 + 10_000_000, "abc", values)) == "partial"
    assert r.read(part(T0 + 7_000_000, "def", values)) == "partial"
    assert r.take_dropped() == 1
    assert r.read(part(T0 + 10_500_000, "def", values)) == ""
    assert r.take_dropped() == 0


@requires_rclpy
def test_a_part_repeating_with_no_partner_never_makes_a_sample():
    values = np.arange(6.0)
    r = reader()
    results = {r.read(part(T0 + k * 100_000, "abc", values)) for k in range(200)}
    assert results == {"partial"}
    assert r.take_dropped() == 199  # each replaced by the next; the last is still held
    # per joint, one joint missing: never a sample either
    r = reader()
    results = {r.read(part(T0 + k * 10_000, [j], values)) for k in range(50) for j in JOINTS[:-1]}
    assert results == {"partial"}
    # a part is used once: after a sample, the same arm part again waits for a new partner
    r = reader()
    assert r.read(part(T0, "abc", values)) == "partial"
    assert r.read(part(T0, "def", values)) == ""
    assert r.read(part(T0 + 100_000, "abc", values)) == "partial"


@requires_rclpy
def test_stamps_frames_velocities_efforts_and_whole_messages_between_parts():
    from rclpy.serialization import serialize_message

    values = np.linspace(0.1, 0.6, 6)
    r = reader()
    assert r.read(part(T0 + 700, "bdf", values)) == "partial"
    raw = serialize_message(state(T0 + 200, ["e", "c", "a"], values[[4, 2, 0]], frame="other"))
    assert r.read(raw) == ""
    assert r.stamp_ns == T0 + 700  # the newest part's stamp, not the last arrival's
    assert r.frame_id == "other"  # the frame of the message that completed the sample
    np.testing.assert_array_equal(r.q, values)
    np.testing.assert_array_equal(r.qd, 10 * values)
    np.testing.assert_array_equal(r.effort_free, 100 * values[:2])
    # one part without velocities: the sample has none; a free joint without effort: no efforts
    assert r.read(part(T0 + 1000, "abc", values, qd=False)) == "partial"
    assert r.read(part(T0 + 1000, "def", values)) == ""
    assert r.qd is None and r.effort_free is not None
    assert r.read(part(T0 + 2000, "ab", values, effort=False)) == "partial"
    assert r.read(part(T0 + 2000, "cdef", values)) == ""
    assert r.qd is not None and r.effort_free is None
    # a whole message while a part is held: read at once, the held part dropped (counted)
    assert r.read(part(T0 + 3000, "abc", values)) == "partial"
    assert r.read(serialize_message(state(T0 + 3100, JOINTS, values + 1))) == ""
    np.testing.assert_array_equal(r.q, values + 1)
    assert r.stamp_ns == T0 + 3100 and r.take_dropped() == 1
    # merging off: a part is refused as before
    assert reader(window_ns=0).read(part(T0, "abc", values)) == "missing_joint"
    # a message of none of the joints is no part: still other_joints; an empty one missing_joint
    assert r.read(serialize_message(state(T0, ["gripper"], [0.0]))) == "other_joints"
    assert r.read(serialize_message(state(T0, [], []))) == "missing_joint"


def test_merge_without_ros():
    """The merge itself: numpy in, numpy out (no message types)."""
    m = JointStateMerge(3, 1, window_ns=10)
    assert not m.add(100, [2], [3.0], [30.0], [0.3])
    assert not m.add(105, [0], [1.0], [10.0], [0.1])
    assert m.add(103, [1], [2.0], [20.0], None)  # efforts only matter for the free joint 0
    assert m.stamp_ns == 105 and m.effort is not None
    np.testing.assert_array_equal(m.q, [1.0, 2.0, 3.0])
    np.testing.assert_array_equal(m.qd, [10.0, 20.0, 30.0])
    np.testing.assert_array_equal(m.effort, [0.1])
    assert not m.add(200, [0, 1], [1.0, 2.0])
    assert not m.add(215, [2], [3.0])  # 15 ns after the first part: that one is dropped
    assert m.dropped == 1
    assert m.add(212, [0, 1], [1.0, 2.0]) and m.stamp_ns == 215 and m.qd is None
    assert not m.add(300, [2], [3.0]) and not m.add(301, [2], [3.0])  # the first replaced: dropped
    assert m.dropped == 2
    m.reset()
    assert not m.held and not m.add(400, [0, 1], [1.0, 2.0]) and m.dropped == 2


def test_the_controllers_joint_order_merges_parts_and_refuses_what_it_must():
    """dac_controller's JointOrder: a full message in the controller's order whatever the message's; parts
    merged within the window (stamp of the newest); another device's joints ignored; without a window a
    part is refused with the missing joints named."""
    import numpy as np

    from ros_lnn.nodes.dac_controller.inputs import JointOrder

    joints = ["a", "b", "c"]
    order = JointOrder(joints, 0.002)
    reason, _, stamp, q, qd = order.read(["c", "a", "b"], [3.0, 1.0, 2.0], [30.0, 10.0, 20.0], 5)
    assert reason == "" and stamp == 5 and list(q) == [1.0, 2.0, 3.0] and list(qd) == [10.0, 20.0, 30.0]
    assert order.read(["b", "gripper"], [2.5, 9.0], [], 1_000_000)[0] == "partial"
    reason, _, stamp, q, qd = order.read(["c", "a"], [3.5, 1.5], [], 2_000_000)
    assert reason == "" and stamp == 2_000_000 and np.allclose(q, [1.5, 2.5, 3.5]) and qd is None
    assert order.read(["gripper"], [0.1], [0.0], 3_000_000)[0] == "other_joints"
    assert order.read([], [], [], 3_000_000)[0] == "bad_joint_state"
    assert order.read(["a", "a"], [1.0, 1.0], [], 3_000_000)[0] == "duplicate_names"
    # a part whose partner comes after the window: never a sample; the late one waits for its own
    assert order.read(["a"], [1.0], [], 10_000_000)[0] == "partial"
    assert order.read(["b", "c"], [2.0, 3.0], [], 13_000_000)[0] == "partial"
    assert order.merge.dropped == 1
    reason, text, *_ = JointOrder(joints, 0.0).read(["a", "b"], [1.0, 2.0], [], 1)
    assert reason == "bad_joint_state" and "['c']" in text
