"""``effort_watchdog``: relays effort commands to a ros2_control effort controller and sends zeros when
they stop.

ros2_control's ``effort_controllers/JointGroupEffortController`` (and ``ForwardCommandController``) have
no command timeout: they hold the last effort until a new one arrives or the controller is deactivated.
If the node producing efforts dies or hangs, the arm would be driven by its last effort forever. This
relay sits between the two (launch/dac_ros2_control.launch.py):

  subscribes  ``commands_in``   std_msgs/Float64MultiArray, best effort (matches reliable and best-effort
                                publishers, e.g. dac_controller's ``~/joint_effort_command``)
  publishes   ``commands_out``  std_msgs/Float64MultiArray, reliable (the controller's ``~/commands``
                                subscription uses the system-default QoS, which is reliable)

Every valid command is forwarded unchanged as it arrives. When none arrived for ``timeout_s`` (wall
clock: the watchdog watches processes, not simulated time), zeros are published every ``period_s``
until commands come back; zeros are also sent from start-up until the first command. Commands of the
wrong size or with non-finite entries are dropped (and so count as missing).
"""

from __future__ import annotations

import math
import sys
import time

from rclpy.node import Node
from rclpy.qos import HistoryPolicy, QoSProfile, ReliabilityPolicy
from std_msgs.msg import Float64MultiArray

from .diagnostics import warn_throttled
from .params import declare, param
from .process import init_ros, spin

PARAMETERS: tuple[tuple[str, object, str], ...] = (  # name, default, description
    ("timeout_s", 0.1, "zeros are sent when no valid command arrived for this long [s]"),
    ("period_s", 0.02, "how often the watchdog checks, and repeats zeros while commands are missing [s]"),
    (
        "joints",
        [],
        "joint names of the controller, in its order: the size of a command; empty = the size "
        "of the first command (no zeros before it)",
    ),
)
RELAY_IN_QOS = QoSProfile(
    history=HistoryPolicy.KEEP_LAST, depth=10, reliability=ReliabilityPolicy.BEST_EFFORT
)
RELAY_OUT_QOS = QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=10, reliability=ReliabilityPolicy.RELIABLE)


class EffortWatchdogNode(Node):
    def __init__(self, node_name: str = "effort_watchdog", **kwargs):
        super().__init__(node_name, **kwargs)
        for name, default, description in PARAMETERS:
            declare(self, name, default, description, read_only=True)
        self.timeout_s = float(param(self, "timeout_s"))
        self.size = len(param(self, "joints")) or None
        self.last_command = -math.inf  # time.monotonic() of the last valid command
        self.zeroing = False
        self.counts = {"forwarded": 0, "dropped": 0, "zeros": 0}
        self.pub = self.create_publisher(Float64MultiArray, "commands_out", RELAY_OUT_QOS)
        self.create_subscription(Float64MultiArray, "commands_in", self._on_command, RELAY_IN_QOS)
        self.create_timer(float(param(self, "period_s")), self._check)

    def _on_command(self, msg: Float64MultiArray) -> None:
        values = msg.data
        if (self.size is not None and len(values) != self.size) or not all(map(math.isfinite, values)):
            self.counts["dropped"] += 1
            warn_throttled(
                self,
                "bad",
                f"dropped an effort command of {len(values)} values (expected {self.size}, all finite)",
            )
            return
        self.size = len(values)
        self.pub.publish(msg)
        self.counts["forwarded"] += 1
        self.last_command = time.monotonic()
        if self.zeroing:
            self.zeroing = False
            self.get_logger().info("effort commands resumed: forwarding them again")

    def _check(self) -> None:
        if self.size is None or time.monotonic() - self.last_command <= self.timeout_s:
            return
        if not self.zeroing:
            self.zeroing = True
            self.get_logger().warning(f"no valid effort command for {self.timeout_s} s: sending zero efforts")
        self.pub.publish(Float64MultiArray(data=[0.0] * self.size))
        self.counts["zeros"] += 1


def main(argv=None) -> int:
    import rclpy

    init_ros(argv if argv is not None else sys.argv)
    node = EffortWatchdogNode()
    try:
        spin(node)
    finally:
        node.destroy_node()
        rclpy.try_shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
