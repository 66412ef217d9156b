"""QoS of the nodes' topics: the sensor-data profile for high-rate streams, reliable for the rest."""
from __future__ import annotations

from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy, qos_profile_sensor_data

#: High-rate streams (joint states and per-sample outputs): best effort, shallow queue.
SENSOR_QOS = QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=10, reliability=ReliabilityPolicy.BEST_EFFORT,
                        durability=DurabilityPolicy.VOLATILE)
#: Commands and low-rate outputs: reliable.
COMMAND_QOS = QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=10, reliability=ReliabilityPolicy.RELIABLE)
assert SENSOR_QOS.reliability == qos_profile_sensor_data.reliability
