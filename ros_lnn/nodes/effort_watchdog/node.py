"""``effort_watchdog``: relays effort commands to a ros2_control effort controller and sends zeros when
they stop — the last line between an effort producer and the arm.

ros2_control's ``effort_controllers/JointGroupEffortController`` (and ``ForwardCommandController``) have
no command timeout: they hold the last effort until a new one arrives or the controller is deactivated.
If the node producing efforts dies or hangs, the arm would be driven by its last effort forever. This
relay sits between the two (launch/dac_ros2_control.launch.py):

  subscribes  ``commands_in``   std_msgs/Float64MultiArray, best effort (matches reliable and best-effort
                                publishers, e.g. dac_controller's ``~/joint_effort_command``)
  publishes   ``commands_out``  std_msgs/Float64MultiArray, reliable (the controller's ``~/commands``
                                subscription uses the system-default QoS, which is reliable)
              ``/diagnostics``  counts; ERROR while zeros are sent

The command size is the number of ``joints`` (the controller's joint list, required): it comes from
configuration, never from a message. Every valid command is forwarded unchanged as it arrives. A
command of the wrong size or with a non-finite entry is counted (``dropped``) and answered at once by
zeros of the right size. When no valid command arrived for ``timeout_s`` (a steady clock, whatever
``use_sim_time`` says: the watchdog watches processes, not simulated time), zeros are published every
``period_s`` until commands come back; zeros are also sent from start-up until the first command.
Every start-up value is checked against its rule: a value that breaks one gives one error line and
exit code 2 (no watchdog is worse than none that says so).
"""

from __future__ import annotations

import math
import sys
import time

from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus
from rclpy.node import Node
from rclpy.qos import HistoryPolicy, QoSProfile, ReliabilityPolicy
from std_msgs.msg import Float64MultiArray

from ...errors import ConfigError
from ..clocks import steady_timer
from ..diagnostics import diagnostic_status, status_name, warn_throttled
from ..process import node_main
from ..qos import COMMAND_QOS
from .parameters import PARAMETERS

RELAY_IN_QOS = QoSProfile(
    history=HistoryPolicy.KEEP_LAST, depth=10, reliability=ReliabilityPolicy.BEST_EFFORT
)
RELAY_OUT_QOS = QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=10, reliability=ReliabilityPolicy.RELIABLE)


class EffortWatchdogNode(Node):
    """Raises ConfigError (one line) when a parameter breaks its rule or ``joints`` is empty."""

    def __init__(self, node_name: str = "effort_watchdog", **kwargs):
        super().__init__(node_name, **kwargs)
        self.values = PARAMETERS.attach(self)
        PARAMETERS.check(self)
        if not self.values["joints"]:
            raise ConfigError(
                "parameter joints is empty: give the controller's joint names (its `joints` parameter), "
                "the size of every effort command"
            )
        self.joints = list(self.values["joints"])
        self.size = len(self.joints)
        self.timeout_s = float(self.values["timeout_s"])
        self.zeros = Float64MultiArray(data=[0.0] * self.size)
        self.last_command = -math.inf  # time.monotonic() of the last valid command
        self.zeroing = False
        self.counts = {"forwarded": 0, "dropped": 0, "zeros": 0, "parameter_refused": 0}
        self._dropped_reported = 0
        self.pub = self.create_publisher(Float64MultiArray, "commands_out", RELAY_OUT_QOS)
        self.diagnostics_pub = self.create_publisher(DiagnosticArray, "/diagnostics", COMMAND_QOS)
        self.create_subscription(Float64MultiArray, "commands_in", self._on_command, RELAY_IN_QOS)
        # the steady clock: a stopped /clock must not stop the zeros
        steady_timer(self, self.values["period_s"], self._check)
        steady_timer(self, self.values["diagnostics_period_s"], self._publish_diagnostics)

    def _on_command(self, msg: Float64MultiArray) -> None:
        values = msg.data
        if len(values) != self.size or not all(map(math.isfinite, values)):
            self.counts["dropped"] += 1
            warn_throttled(
                self,
                "bad",
                f"effort command of {len(values)} values dropped (expected {self.size} finite values for "
                f"{self.joints}): zero efforts sent",
            )
            self._send_zeros()
            return
        self.pub.publish(msg)
        self.counts["forwarded"] += 1
        self.last_command = time.monotonic()
        if self.zeroing:
            self.zeroing = False
            self.get_logger().info("effort commands resumed: forwarding them again")

    def _send_zeros(self) -> None:
        self.pub.publish(self.zeros)
        self.counts["zeros"] += 1

    def _check(self) -> None:
        if time.monotonic() - self.last_command <= self.timeout_s:
            return
        if not self.zeroing:
            self.zeroing = True
            self.get_logger().warning(f"no valid effort command for {self.timeout_s} s: sending zero efforts")
        self._send_zeros()

    def _publish_diagnostics(self) -> None:
        dropped = self.counts["dropped"] - self._dropped_reported
        self._dropped_reported = self.counts["dropped"]
        if self.last_command == -math.inf:
            level, message = DiagnosticStatus.WARN, "no effort command yet: sending zero efforts"
        elif self.zeroing:
            level, message = DiagnosticStatus.ERROR, "effort commands stopped: sending zero efforts"
        elif dropped:
            level, message = DiagnosticStatus.WARN, f"{dropped} invalid commands dropped (zeros sent)"
        else:
            level, message = DiagnosticStatus.OK, "forwarding"
        msg = DiagnosticArray()
        msg.header.stamp = self.get_clock().now().to_msg()
        values = dict(self.counts, joints=",".join(self.joints), timeout_s=self.timeout_s)
        msg.status = [diagnostic_status(status_name(self), "effort_watchdog", level, message, values)]
        self.diagnostics_pub.publish(msg)


def main(argv=None) -> int:
    return node_main("effort_watchdog", EffortWatchdogNode, argv)


if __name__ == "__main__":
    sys.exit(main())
