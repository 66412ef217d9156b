"""The estimator publishes its per-sample outputs as serialized templates: the bytes must read back
(rclpy's deserializer) as the message built the ordinary way, for every layout and fresh values each
time (bytes themselves are not compared: the serializer leaves CDR alignment padding undefined)."""
import numpy as np
import pytest

from conftest import requires_rclpy

from ros_lnn.nodes.messages import ENERGY_LABELS, driving_force_msg, energy_msg, energy_values_msg, prediction_msg
from ros_lnn.nodes.serialized import SerializedTemplate

pytestmark = requires_rclpy


def layouts(frame):
    servo, joints = ["cart_joint", "slide"], ["pendulum_joint", "cart_joint", "slide"]
    return [
        (SerializedTemplate(lambda st, a, b, c: driving_force_msg(st, frame, servo, a, b, c), (2, 2, 2)),
         lambda st, a, b, c: driving_force_msg(st, frame, servo, a, b, c)),
        (SerializedTemplate(lambda st, a, b, c, d: prediction_msg(st, frame, joints, a, b, c, d), (3,) * 4),
         lambda st, a, b, c, d: prediction_msg(st, frame, joints, a, b, c, d)),
        (SerializedTemplate(energy_values_msg, (7,), stamp_format="<dd"), energy_values_msg),
    ]


@pytest.mark.parametrize("frame", ["", "world", "a_longer_frame_name"])
def test_template_bytes_read_back_as_the_ordinary_message(frame):
    from builtin_interfaces.msg import Time
    from rclpy.serialization import deserialize_message, serialize_message

    rng = np.random.default_rng(3)
    for template, build in layouts(frame):
        assert template.ok
        for _ in range(5):
            blocks = [rng.normal(size=n) * 10.0 ** rng.integers(-5, 5) for n in template.sizes]
            sec, nsec = int(rng.integers(0, 2**31 - 1)), int(rng.integers(0, 10**9))
            msg = build(Time(sec=sec, nanosec=nsec), *blocks)
            raw, ref = template.fill(sec, nsec, *blocks), serialize_message(msg)
            assert deserialize_message(raw, type(msg)) == msg
            assert len(raw) == len(ref)
            assert deserialize_message(raw, type(msg)) != build(Time(sec=sec, nanosec=nsec + 1), *blocks)


def test_energy_values_message_matches_the_mapping_builder():
    from builtin_interfaces.msg import Time

    out = {k: float(i) + 0.25 for i, k in enumerate(ENERGY_LABELS[:7])}
    stamp = Time(sec=12, nanosec=345)
    a, b = energy_msg(stamp, out), energy_values_msg(stamp, [out[k] for k in ENERGY_LABELS[:7]])
    assert list(a.data) == list(b.data) and a.layout == b.layout
