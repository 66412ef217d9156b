"""The inputs ``dac_controller`` takes: an ``~/ee_target`` brought into the world frame (the fixed
``target_frames`` table, then tf2) and checked against the arm's reach, a ``~/joint_trajectory``
checked and read into arrays in the pipeline's joint order, and the stamp check of a joint state."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from ..stamps import duration_ns

if TYPE_CHECKING:
    from ...control.frames import FrameTable

#: Longest ~/joint_trajectory taken: bounds the work one message can cause.
MAX_TRAJECTORY_POINTS = 10_000
#: A joint state stamped further ahead of the node's clock than this is refused (a clock error, not a state).
FUTURE_STAMP_TOLERANCE_S = 0.5


class TargetFrames:
    """Frames an ``~/ee_target`` may come in: the fixed ``target_frames`` table (built at configure)
    first, then tf2's buffer and listener (/tf, /tf_static) where tf2_ros is installed and ``use_tf``."""

    def __init__(self) -> None:
        self.table: FrameTable | None = None
        self.buffer = self.listener = None
        self.tf_available = False

    def start_tf(self, node, use_tf: bool) -> None:
        self.buffer = self.listener = None
        try:
            import tf2_ros  # type: ignore[import-not-found,import-untyped]  # optional, untyped where installed
        except ImportError:
            self.tf_available = False
            return
        self.tf_available = True
        if use_tf:
            self.buffer = tf2_ros.Buffer()
            self.listener = tf2_ros.TransformListener(self.buffer, node)

    def stop_tf(self) -> None:
        self.buffer = self.listener = None

    def to_world(self, frame: str, world: str, position, quat):
        """A target given in ``frame`` in the world frame ``world``; LookupError (with the way to
        fix it) when neither the table nor tf2 knows the frame."""
        assert self.table is not None  # built by configure with the pipeline
        if frame in self.table:
            return self.table.to_world(frame, position, quat)
        if self.buffer is None:
            raise LookupError(
                f"~/ee_target in frame '{frame}': no transform to '{world}'; add '{frame}' to "
                "target_frames/target_frame_poses"
                + ("" if self.tf_available else " (tf2_ros is not installed here)")
            )
        from rclpy.time import Time

        from ...control.frames import to_world

        try:
            tf = self.buffer.lookup_transform(world, frame, Time()).transform
        except Exception as exc:  # noqa: BLE001 - tf2's Lookup/Connectivity/Extrapolation exceptions
            raise LookupError(
                f"~/ee_target in frame '{frame}': tf2 has no transform to '{world}' ({type(exc).__name__})"
            ) from None
        t, r = tf.translation, tf.rotation
        return to_world([t.x, t.y, t.z], [r.w, r.x, r.y, r.z], position, quat)


def outside_workspace(position, workspace, margin: float) -> str:
    """Why a world-frame target position is refused ('' when it is taken); ``workspace``: the arm's
    (centre, reach) or None."""
    p = np.asarray(position, float)
    if not np.all(np.isfinite(p)):
        return "~/ee_target: position must be finite"
    if workspace is None:
        return ""
    centre, radius = workspace
    with np.errstate(over="ignore"):
        distance = float(np.linalg.norm(p - centre))
    if distance > radius + margin:
        return (
            f"~/ee_target {p.round(3).tolist()} is {distance:.3g} m from the arm's first joint, beyond "
            f"its reach {radius:.3g} m + workspace_margin"
        )
    return ""


#: How far a target quaternion's squared norm may be from 1 (tf2's tolerance for a transform).
QUATERNION_NORM_TOLERANCE = 0.01


def orientation_problem(quat) -> str:
    """Why a target orientation (w, x, y, z) is refused when the law tracks it ('' when taken): it must
    be a unit quaternion within tf2's tolerance; (0, 0, 0, 0), the default of a PoseStamped, is none."""
    q = np.asarray(quat, float)
    with np.errstate(over="ignore", invalid="ignore"):
        norm2 = float(q.dot(q))
    if not math.isfinite(norm2):
        return "~/ee_target: orientation must be finite"
    if abs(norm2 - 1.0) > QUATERNION_NORM_TOLERANCE:
        return (
            f"~/ee_target: orientation {np.round(q, 4).tolist()} is not a unit quaternion (norm "
            f"{math.sqrt(norm2):.4g}) and ee_attitude tracks it"
        )
    return ""


def trajectory_problem(msg, joint_names) -> str:
    """Why a ``~/joint_trajectory`` is refused before it is read ('' when it is read)."""
    names = list(msg.joint_names)
    missing = [j for j in joint_names if j not in names]
    if missing or not msg.points:
        return f"~/joint_trajectory lacks joints {missing} or points"
    if len(set(names)) != len(names):
        return f"~/joint_trajectory names a joint twice: {names}"
    if len(msg.points) > MAX_TRAJECTORY_POINTS:
        return (
            f"~/joint_trajectory has {len(msg.points)} points; at most "
            f"{MAX_TRAJECTORY_POINTS} are taken (send it in pieces)"
        )
    return ""


def trajectory_arrays(msg, joint_names, start_s: float):
    """``(times, positions, velocities or None, accelerations or None)`` of a checked trajectory in
    ``joint_names`` order, times from ``start_s`` (accelerations only with velocities at every point);
    IndexError, ValueError, OverflowError or TypeError for a malformed one."""
    names = list(msg.joint_names)
    idx = [names.index(j) for j in joint_names]
    times = np.array([start_s + duration_ns(pt.time_from_start) * 1e-9 for pt in msg.points])
    pos = np.array([[pt.positions[i] for i in idx] for pt in msg.points], float)
    vel = acc = None
    if all(len(pt.velocities) == len(names) for pt in msg.points):
        vel = np.array([[pt.velocities[i] for i in idx] for pt in msg.points], float)
        if all(len(pt.accelerations) == len(names) for pt in msg.points):
            acc = np.array([[pt.accelerations[i] for i in idx] for pt in msg.points], float)
    return times, pos, vel, acc


def stamp_problem(now_ns: int, stamp_ns: int, state_timeout_s: float) -> tuple[str, str]:
    """``(reason, text)`` when a joint state stamped ``stamp_ns`` is not taken at node time ``now_ns``
    (``("", "")`` when it is): the clock has not started (use_sim_time, no /clock: no age can be
    judged), the state is older than ``state_timeout_s`` (zero efforts, as docs/nodes.md promises) or
    stamped ahead of the clock by more than :data:`FUTURE_STAMP_TOLERANCE_S`. An unstamped message
    (0) is taken as now."""
    if now_ns == 0:
        return "clock_not_started", (
            "use_sim_time is set and no /clock arrived yet: zero efforts until the clock runs"
        )
    if stamp_ns:
        age = now_ns - stamp_ns
        if age > state_timeout_s * 1e9:
            return (
                "old_stamp",
                f"joint_states stamped {age * 1e-9:.3g} s ago (> state_timeout_s): zero efforts",
            )
        if -age > FUTURE_STAMP_TOLERANCE_S * 1e9:
            return "future_stamp", (
                f"joint_states stamped {-age * 1e-9:.3g} s ahead of this "
                "node's clock (check the clocks / use_sim_time)"
            )
    return "", ""


class JointOrder:
    """The controller's joints from a JointState: the name order indexed once per name list; a
    message with only some of them is a part, merged by joint name with the others within
    ``window_s`` (:class:`~ros_lnn.nodes.joint_state_reader.JointStateMerge`; 0: such a message is
    refused, as without merging). :meth:`read` returns ``(reason, text, stamp, q, qd)``: reason ``""``
    for a complete state, ``"partial"`` for a part held, ``"other_joints"`` for a message with none of
    the joints (a gripper's: ignored), else why it was rejected."""

    def __init__(self, joints, window_s: float):
        from ..joint_state_reader import JointStateMerge

        self.joints = list(joints)
        self._bad = ("bad_joint_state", f"joint_states must name {self.joints} with positions", 0, None, None)
        self._names: list | None = None
        self._rows = self._idx = np.zeros(0, dtype=np.intp)
        n = len(self.joints)
        self.merge = JointStateMerge(n, 0, round(window_s * 1e9)) if window_s > 0 else None

    def read(self, names, position, velocity, stamp_ns: int):
        if names != self._names:  # the usual case sends the same names every time: index them once
            listed = list(names)
            if len(set(listed)) != len(listed):
                self._names = None
                return "duplicate_names", f"joint_states names a joint twice: {listed}", 0, None, None
            where = {name: i for i, name in enumerate(listed)}
            rows = [r for r, j in enumerate(self.joints) if j in where]
            self._rows = np.array(rows, dtype=np.intp)
            self._idx = np.array([where[self.joints[r]] for r in rows], dtype=np.intp)
            self._names = listed
        if not len(self._rows):
            if not len(names):
                return (
                    "bad_joint_state",
                    f"joint_states must name {self.joints} with positions",
                    0,
                    None,
                    None,
                )
            return "other_joints", "", 0, None, None
        try:
            q = np.asarray(position, dtype=float).take(self._idx)
            qd = np.asarray(velocity, dtype=float).take(self._idx) if len(velocity) == len(names) else None
        except (ValueError, IndexError):
            return "bad_joint_state", f"joint_states must name {self.joints} with positions", 0, None, None
        if len(self._rows) == len(self.joints):
            return "", "", stamp_ns, q, qd
        if self.merge is None:
            missing = [j for j in self.joints if j not in set(self._names or ())]
            return (
                "bad_joint_state",
                f"joint_states lacks {missing} (joint_state_merge_window_s 0: no merging of parts)",
                0,
                None,
                None,
            )
        if not self.merge.add(stamp_ns, self._rows, q, qd):
            return "partial", "", 0, None, None
        m = self.merge
        return "", "", m.stamp_ns, m.q.copy(), None if m.qd is None else m.qd.copy()
