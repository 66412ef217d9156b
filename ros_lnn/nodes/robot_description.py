"""``robot_description`` as ROS 2 robots share it: the URDF's text on the ``robot_description`` topic
(``std_msgs/String``, reliable, transient local: ``robot_state_publisher`` publishes it once and a
subscriber that comes later still gets it; ros2_control's controller_manager reads it there), or a
node's own ``robot_description`` parameter.

:class:`RobotDescription` subscribes from the node's construction on and keeps the newest description;
at configure :meth:`RobotDescription.take` gives the parameter when it is set, else the topic's — waiting
up to ``robot_description_timeout_s`` for one when none came yet (a publisher that starts after the node,
or discovery still under way), with its own wait set, so it works inside a lifecycle service callback
as well as at autostart, before the executor spins. The topic is relative: remapped, or namespaced
with the node (``/robot1/robot_description`` beside a ``robot_state_publisher`` in ``/robot1``).
"""

from __future__ import annotations

from .params import CONFIGURE, MAX_DESCRIPTION, Param

TOPIC = "robot_description"
DEFAULT_TIMEOUT_S = 5.0


def description_qos():
    """robot_state_publisher's QoS for the description: a late subscriber gets the last one published."""
    from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy

    return QoSProfile(
        history=HistoryPolicy.KEEP_LAST,
        depth=1,
        reliability=ReliabilityPolicy.RELIABLE,
        durability=DurabilityPolicy.TRANSIENT_LOCAL,
    )


def description_parameters(use: str) -> tuple[Param, Param]:
    """``robot_description`` (``use``: what the node does with it and where it looks when it is empty)
    and ``robot_description_timeout_s``."""
    return (
        Param(
            "robot_description",
            "",
            f"URDF of the robot (its text, as robot_state_publisher takes it): {use}",
            CONFIGURE,
            max_length=MAX_DESCRIPTION,
        ),
        Param(
            "robot_description_timeout_s",
            DEFAULT_TIMEOUT_S,
            f"where robot_description comes from the {TOPIC} topic: how long configure waits for one when "
            "none came yet (0: only one already received) [s]",
            CONFIGURE,
            ge=0.0,
            le=3600.0,
        ),
    )


class RobotDescription:
    """The newest ``robot_description`` of ``node``'s topic, and the one configure takes."""

    def __init__(self, node, topic: str = TOPIC):
        from std_msgs.msg import String

        self.node, self.topic, self._type = node, topic, String
        self.latest: str | None = None
        self.refused = 0  # descriptions larger than the parameter's bound
        node.create_subscription(String, topic, self._received, description_qos())

    @property
    def resolved(self) -> str:
        return self.node.resolve_topic_name(self.topic)

    def _received(self, msg) -> None:
        if len(msg.data) > MAX_DESCRIPTION:
            self.refused += 1
            self.node.get_logger().warning(
                f"{self.resolved}: a description of {len(msg.data)} characters ignored (at most "
                f"{MAX_DESCRIPTION} are taken)"
            )
            return
        if self.latest is not None and msg.data != self.latest:
            self.node.get_logger().info(
                f"{self.resolved}: a new description arrived; it is taken at the next configure"
            )
        self.latest = msg.data

    def take(self, parameter: str, timeout_s: float) -> tuple[str, str]:
        """``(URDF text, where it came from)``: the parameter when set, else the topic's (waiting up to
        ``timeout_s`` for one); ``("", "")`` when neither has one."""
        if parameter:
            return parameter, "parameter robot_description"
        if self.latest is None and timeout_s > 0:
            from rclpy.wait_for_message import wait_for_message

            where = self.resolved
            self.node.get_logger().info(f"waiting up to {timeout_s:g} s for robot_description on {where}")
            ok, msg = wait_for_message(
                self._type, self.node, self.topic, qos_profile=description_qos(), time_to_wait=timeout_s
            )
            if ok and msg is not None and len(msg.data) <= MAX_DESCRIPTION:
                self.latest = msg.data
        if self.latest:
            return self.latest, f"topic {self.resolved}"
        return "", ""
