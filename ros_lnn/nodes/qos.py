"""QoS of the nodes' topics.

Outputs are reliable, so a plain ``create_subscription(T, topic, cb, 10)`` receives them; a best-effort
subscriber (the sensor-data profile) receives them too. Per-sample streams keep the last
``STREAM_DEPTH`` samples (0.1 s at 1 kHz) for retransmission; keep-last never blocks the publisher.
Every output's history, depth and reliability can be overridden at start-up with rclpy's QoS
overrides, e.g. ``-p qos_overrides./servo_lnn/driving_force.publisher.reliability:=best_effort``
(:data:`OVERRIDES`). Inputs are subscribed best effort, which matches reliable and best-effort
publishers alike.
"""

from __future__ import annotations

from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy, qos_profile_sensor_data
from rclpy.qos_overriding_options import QoSOverridingOptions

#: Depth of the per-sample output streams.
STREAM_DEPTH = 100
#: Per-sample outputs (estimator outputs, joint states of the simulator, controller commands).
STREAM_QOS = QoSProfile(
    history=HistoryPolicy.KEEP_LAST,
    depth=STREAM_DEPTH,
    reliability=ReliabilityPolicy.RELIABLE,
    durability=DurabilityPolicy.VOLATILE,
)
#: High-rate inputs: best effort, so any publisher matches and nothing queues for retransmission.
SENSOR_QOS = QoSProfile(
    history=HistoryPolicy.KEEP_LAST,
    depth=10,
    reliability=ReliabilityPolicy.BEST_EFFORT,
    durability=DurabilityPolicy.VOLATILE,
)
#: Commands and low-rate outputs: reliable.
COMMAND_QOS = QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=10, reliability=ReliabilityPolicy.RELIABLE)
#: Passed as ``qos_overriding_options`` to every output publisher.
OVERRIDES = QoSOverridingOptions.with_default_policies()
assert SENSOR_QOS.reliability == qos_profile_sensor_data.reliability


def output_qos(profile: QoSProfile = STREAM_QOS) -> QoSProfile:
    """A copy of ``profile`` for one publisher with :data:`OVERRIDES`: rclpy writes the overrides into
    the profile it is given, so a shared constant would carry one topic's override to every other."""
    return QoSProfile(
        history=profile.history,
        depth=profile.depth,
        reliability=profile.reliability,
        durability=profile.durability,
    )


def output_publisher(create, msg_type, topic: str, profile: QoSProfile = STREAM_QOS):
    """``create`` (a node's ``create_publisher`` or ``create_lifecycle_publisher``) for ``topic`` with a
    copy of ``profile`` (:func:`output_qos`) and :data:`OVERRIDES`."""
    return create(msg_type, topic, output_qos(profile), qos_overriding_options=OVERRIDES)


def input_qos(depth: int) -> QoSProfile:
    """A best-effort, keep-last subscription of ``depth`` samples (inputs held while the node is busy)."""
    return QoSProfile(
        history=HistoryPolicy.KEEP_LAST,
        depth=max(1, int(depth)),
        reliability=ReliabilityPolicy.BEST_EFFORT,
        durability=DurabilityPolicy.VOLATILE,
    )
