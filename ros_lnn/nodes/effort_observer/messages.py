"""``effort_observer``'s outgoing messages, and which samples its display outputs carry."""

from __future__ import annotations

from geometry_msgs.msg import WrenchStamped
from sensor_msgs.msg import JointState
from visualization_msgs.msg import Marker


class OutputRate:
    """The samples a display output carries at ``rate_hz``, chosen by their stamps: the first sample
    at or after each point of a grid of period 1/``rate_hz`` (so a batch of queued samples gives what
    the samples one by one give). A stamp more than a period before the next point — a restarted
    stream — starts a new grid; 0 Hz: every sample."""

    def __init__(self) -> None:
        self.next_ns: int | None = None

    def reset(self) -> None:
        self.next_ns = None

    def due(self, ns: int, rate_hz: float) -> bool:
        if rate_hz <= 0:
            return True
        period = max(int(round(1e9 / rate_hz)), 1)
        due = self.next_ns
        if due is not None and due - period <= ns < due:
            return False
        # the first grid point after ns; a new grid from ns after a restart
        start = due if due is not None and ns >= due else ns
        self.next_ns = start + period * ((ns - start) // period + 1)
        return True


def output_builders(frame: str, names: list, wrench_frame: str | None) -> tuple:
    """Builders of the display outputs for one frame_id from a sample vector [q, q̇, τ̂, τ_ext,
    wrench] (:class:`ros_lnn.nodes.serialized.PackedMessages`): ``~/model_effort``,
    ``~/external_effort`` and, with a ``wrench_frame``, ``~/external_wrench``."""
    n = len(names)
    q, qd, model, ext = (slice(i * n, (i + 1) * n) for i in range(4))
    builders = (
        lambda st, s: joint_state(st, frame, names, s[q], s[qd], s[model]),
        lambda st, s: joint_state(st, frame, names, s[q], s[qd], s[ext]),
    )
    if wrench_frame is None:
        return builders
    return (*builders, lambda st, s: wrench_stamped(st, wrench_frame, s[4 * n : 4 * n + 6]))


def joint_state(stamp, frame: str, names: list, q, qd, effort) -> JointState:
    msg = JointState()
    msg.header.stamp, msg.header.frame_id = stamp, frame
    msg.name = names
    msg.position, msg.velocity, msg.effort = q.tolist(), qd.tolist(), [float(x) for x in effort]
    return msg


def wrench_stamped(stamp, frame: str, wrench) -> WrenchStamped:
    """(fx, fy, fz, tx, ty, tz) at ``frame``."""
    msg = WrenchStamped()
    msg.header.stamp, msg.header.frame_id = stamp, frame
    f, m = msg.wrench.force, msg.wrench.torque
    f.x, f.y, f.z, m.x, m.y, m.z = (float(v) for v in wrench)
    return msg


def collision_marker(stamp, link: str, hold_s: float) -> Marker:
    """A red sphere on ``link`` (RViz places it through /tf), shown for ``hold_s`` (0.5 s when 0)."""
    m = Marker(ns="collision", id=0, type=Marker.SPHERE, action=Marker.ADD)
    m.header.stamp, m.header.frame_id = stamp, link
    m.pose.orientation.w = 1.0
    m.scale.x = m.scale.y = m.scale.z = 0.15
    m.color.r, m.color.g, m.color.b, m.color.a = 1.0, 0.1, 0.1, 0.6
    hold = float(hold_s) or 0.5
    m.lifetime.sec, m.lifetime.nanosec = int(hold), int((hold % 1) * 1e9)
    return m
