"""The nodes publish per-sample outputs from pre-serialized bytes: the bytes must read back (rclpy's
deserializer) as the message built the ordinary way, for every layout and fresh values each time
(bytes themselves are not compared: the serializer leaves CDR alignment padding undefined)."""

import numpy as np
import pytest

from conftest import requires_rclpy

pytestmark = requires_rclpy

from ros_lnn.nodes.messages import (  # noqa: E402
    ENERGY_FIELDS,
    ENERGY_TYPE,
    HAVE_INTERFACES,
    driving_force_msg,
    energy_dict,
    energy_msg,
    energy_values_msg,
    prediction_arrays,
    prediction_msg,
)
from ros_lnn.nodes.serialized import PackedMessages, PackersByFrame, SerializedTemplate  # noqa: E402

SERVO, JOINTS = ["cart_joint", "slide"], ["pendulum_joint", "cart_joint", "slide"]


def estimator_builders(frame):
    """The three per-sample outputs of a 3-joint model with 2 servo joints, from one sample vector
    q (3) | qd (3) | qdd (3) | Q (3) | energy (7), as servo_lnn lays it out."""
    return [
        lambda st, s: driving_force_msg(st, frame, SERVO, s[1:3], s[4:6], s[10:12]),
        lambda st, s: prediction_msg(st, frame, JOINTS, s[0:3], s[3:6], s[6:9], s[9:12], 1),
        lambda st, s: energy_values_msg(st, s[12:19], frame),
    ]


@pytest.mark.parametrize("frame", ["", "world", "a_longer_frame_name"])
def test_packed_messages_read_back_as_the_ordinary_messages(frame):
    from builtin_interfaces.msg import Time
    from rclpy.serialization import deserialize_message, serialize_message

    builders = estimator_builders(frame)
    packer = PackedMessages(builders, 19)
    assert packer.ok
    rng = np.random.default_rng(3)
    for _ in range(5):
        sample = rng.normal(size=19) * 10.0 ** rng.integers(-5, 5, size=19)
        sec, nsec = int(rng.integers(0, 2**31 - 1)), int(rng.integers(0, 10**9))
        raws = packer.fill(sec, nsec, sample)
        for raw, build in zip(raws, builders):
            msg = build(Time(sec=sec, nanosec=nsec), sample)
            assert deserialize_message(raw, type(msg)) == msg
            assert len(raw) == len(serialize_message(msg))
            assert deserialize_message(raw, type(msg)) != build(Time(sec=sec, nanosec=nsec + 1), sample)
    # the values land where the reader expects them, whichever interface is built
    got = deserialize_message(packer.fill(5, 6, np.arange(19.0))[1], type(builders[1](Time(), np.zeros(19))))
    arrays = prediction_arrays(got)
    assert arrays["names"] == JOINTS and list(arrays["Q"]) == [9.0, 10.0, 11.0]
    energy = energy_dict(deserialize_message(packer.fill(5, 6, np.arange(19.0))[2], ENERGY_TYPE))
    assert [energy[k] for k in ENERGY_FIELDS] == list(np.arange(12.0, 19.0))
    assert (energy["stamp_sec"], energy["stamp_nanosec"]) == (5, 6)


def test_stamp_less_template_reads_back():
    from builtin_interfaces.msg import Time
    from rclpy.serialization import deserialize_message
    from std_msgs.msg import Float64MultiArray, MultiArrayDimension, MultiArrayLayout

    layout = MultiArrayLayout(dim=[MultiArrayDimension(label="a,b,c", size=3, stride=3)])

    def build(_, v):
        return Float64MultiArray(layout=layout, data=[float(x) for x in v])

    template = SerializedTemplate(build, (3,), stamp_format=None)
    assert template.ok
    raw = template.fill(0, 0, np.array([1.5, -2.0, 3.25]))
    assert list(deserialize_message(raw, Float64MultiArray).data) == [1.5, -2.0, 3.25]
    assert build(Time(), [0.0]).layout.dim[0].label == "a,b,c"


def test_energy_message_matches_the_mapping_builder():
    from builtin_interfaces.msg import Time

    out = {k: float(i) + 0.25 for i, k in enumerate(ENERGY_FIELDS)}
    stamp = Time(sec=12, nanosec=345)
    a, b = energy_msg(stamp, out, "base"), energy_values_msg(stamp, [out[k] for k in ENERGY_FIELDS], "base")
    assert a == b and isinstance(a, ENERGY_TYPE)
    values = energy_dict(a)
    assert all(values[k] == out[k] for k in ENERGY_FIELDS) and values["stamp_nanosec"] == 345
    if HAVE_INTERFACES:
        assert a.header.frame_id == "base" and a.total_energy == out["E"]


def test_messages_fall_back_to_the_ordinary_ones_and_each_frame_is_laid_out_once():
    from builtin_interfaces.msg import Time
    from rclpy.serialization import deserialize_message
    from sensor_msgs.msg import JointState

    # the stamp's seconds alone as a float64 is not a place fill() writes: the check fails, no layout
    def build(stamp, s):
        return JointState(name=["j"], position=[float(stamp.sec)], velocity=[float(s[0])])

    packer = PackedMessages([build], 1)
    assert not packer.ok
    (msg,) = packer.messages(7, 0, np.array([2.5]))
    assert msg == JointState(name=["j"], position=[7.0], velocity=[2.5])
    fast = PackedMessages(estimator_builders("w"), 19)
    raws = fast.messages(3, 4, np.arange(19.0))
    assert deserialize_message(raws[0], JointState) == estimator_builders("w")[0](
        Time(sec=3, nanosec=4), np.arange(19.0)
    )

    made = []

    def make(frame):
        made.append(frame)
        return PackedMessages(estimator_builders(frame), 19)

    cache = PackersByFrame(make, limit=2)
    assert cache["a"] is cache["a"] and made == ["a"]
    cache["b"]
    cache["c"]  # a third frame: the cache was full and starts again
    assert cache["b"] is not None and made == ["a", "b", "c", "b"]
