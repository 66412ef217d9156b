"""ros_lnn_msgs (interfaces/ros_lnn_msgs, built into each test environment by `make msgs` with
ament_cmake + rosidl from PyPI): the generated types carry what the estimator computes, and go over
real DDS between two nodes unchanged."""

from __future__ import annotations

import numpy as np
import pytest

from conftest import HAVE_RCLPY, requires_rclpy

pytestmark = [requires_rclpy, pytest.mark.ros]

try:
    from ros_lnn_msgs.msg import DynamicsPrediction, Energy
except ImportError:
    pytest.skip(
        "ros_lnn_msgs is not built into this environment (make msgs; on a ROS install: colcon build)",
        allow_module_level=True,
    )

if HAVE_RCLPY:
    import rclpy
    from rclpy.qos import QoSProfile, ReliabilityPolicy

    from _ros_harness import Harness
    from ros_lnn.nodes.messages import ENERGY_LABELS
    from ros_lnn.nodes.stamps import ns_to_stamp, stamp_ns

#: The estimator's energy outputs (ServoLnnRuntime.evaluate keys) and the Energy field holding each.
ENERGY_FIELDS = {
    "T": "kinetic_energy",
    "V": "potential_energy",
    "E": "total_energy",
    "T_dot": "kinetic_energy_rate",
    "V_dot": "potential_energy_rate",
    "E_dot": "total_energy_rate",
    "power": "power",
}


def test_energy_has_a_header_and_one_named_float64_per_published_energy_entry():
    fields = Energy.get_fields_and_field_types()
    assert fields.pop("header") == "std_msgs/Header"
    assert fields == dict.fromkeys(ENERGY_FIELDS.values(), "double")
    assert tuple(ENERGY_FIELDS) == ENERGY_LABELS[:7]  # every entry ~/energy publishes has its field


def test_dynamics_prediction_fields():
    assert DynamicsPrediction.get_fields_and_field_types() == {
        "header": "std_msgs/Header",
        "joint_names": "sequence<string>",
        "free_joint_count": "uint32",
        "position": "sequence<double>",
        "velocity": "sequence<double>",
        "acceleration": "sequence<double>",
        "effort": "sequence<double>",
    }


def test_estimator_outputs_travel_in_the_messages_over_dds(ctx):
    from ros_lnn.inference.runtime import ServoLnnRuntime, default_model_path

    rt = ServoLnnRuntime(default_model_path())
    q, qd, qdd_e = np.array([0.3, -0.1]), np.array([0.5, 0.2]), np.array([0.7])
    out = rt.evaluate(q, qd, qdd_e)
    stamp = ns_to_stamp(1_700_000_000_123_456_789)

    energy = Energy(**{field: float(out[key]) for key, field in ENERGY_FIELDS.items()})
    energy.header.stamp, energy.header.frame_id = stamp, "world"
    prediction = DynamicsPrediction(
        joint_names=rt.joints,
        free_joint_count=rt.n_f,
        position=q.tolist(),
        velocity=qd.tolist(),
        acceleration=np.ravel(out["qdd"]).tolist(),
        effort=np.ravel(out["Q"]).tolist(),
    )
    prediction.header.stamp = stamp

    reliable = QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE)
    sender = rclpy.create_node("msgs_sender", namespace="/msgs_test", context=ctx)
    h = Harness(sender, context=ctx)
    try:
        energies = h.collect(Energy, "/msgs_test/energy", reliable)
        predictions = h.collect(DynamicsPrediction, "/msgs_test/prediction", reliable)
        pubs = [
            sender.create_publisher(Energy, "energy", reliable),
            sender.create_publisher(DynamicsPrediction, "prediction", reliable),
        ]
        h.wait(lambda: all(p.get_subscription_count() == 1 for p in pubs), 10, "the probe's subscriptions")
        pubs[0].publish(energy)
        pubs[1].publish(prediction)
        h.wait(lambda: energies and predictions, 10, "Energy and DynamicsPrediction")
    finally:
        h.close()
        sender.destroy_node()
    got_e, got_p = energies[0], predictions[0]
    assert stamp_ns(got_e.header.stamp) == 1_700_000_000_123_456_789 == stamp_ns(got_p.header.stamp)
    assert got_e.header.frame_id == "world"
    for key, field in ENERGY_FIELDS.items():
        assert getattr(got_e, field) == float(out[key])
    # the energy balance the model carries: E = T + V, and dE/dt equals the power of the forces it predicts
    assert got_e.total_energy == pytest.approx(got_e.kinetic_energy + got_e.potential_energy, rel=1e-6)
    assert got_e.total_energy_rate == pytest.approx(got_e.power, rel=1e-4, abs=1e-9)
    assert list(got_p.joint_names) == rt.joints and got_p.free_joint_count == 1
    np.testing.assert_array_equal(got_p.acceleration, np.ravel(out["qdd"]))
    np.testing.assert_array_equal(got_p.effort, np.ravel(out["Q"]))
    np.testing.assert_array_equal(got_p.position, q)
