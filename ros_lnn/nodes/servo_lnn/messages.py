"""What ``servo_lnn`` reads and writes besides the joint states: a servo trajectory command read into
plan arrays, the builders of its three per-sample outputs, its markers and its predicted trajectory."""

from __future__ import annotations

import math

import numpy as np
from geometry_msgs.msg import Point
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint
from visualization_msgs.msg import Marker, MarkerArray

from ..messages import driving_force_msg, energy_values_msg, prediction_msg
from ..stamps import duration_ns, seconds_to_duration
from ..trajectory_command import trajectory_arrays
from .parameters import AXES


def plan_arrays(msg: JointTrajectory, servo_joints, now_ns):
    """``(times [ns], positions, velocities or None, accelerations or None)`` of a servo trajectory in
    ``servo_joints`` order, None for an empty one (it cancels the plan); ValueError with the reason
    for a trajectory that is refused. An unstamped one starts at ``now_ns()``."""
    arrays = trajectory_arrays(msg, servo_joints, "servo joints ")
    if arrays is None:
        return None
    base_ns = msg.header.stamp.sec * 1_000_000_000 + msg.header.stamp.nanosec or now_ns()
    return ([base_ns + duration_ns(pt.time_from_start) for pt in msg.points], *arrays)


def output_builders(est, frame: str) -> tuple:
    """Builders of the three per-sample outputs for one frame_id from the estimator's sample vector:
    ``~/driving_force``, ``~/prediction``, ``~/energy``."""
    L = est.layout
    servo, joints, n_f = list(est.servo_joints), list(est.joints), est.n_f
    q_e, qd_e = slice(L["q"].start + n_f, L["q"].stop), slice(L["qd"].start + n_f, L["qd"].stop)
    return (
        lambda st, s: driving_force_msg(st, frame, servo, s[q_e], s[qd_e], s[L["Q_e"]]),
        lambda st, s: prediction_msg(st, frame, joints, s[L["q"]], s[L["qd"]], s[L["qdd"]], s[L["Q"]], n_f),
        lambda st, s: energy_values_msg(st, s[L["energy"]], frame),
    )


def servo_markers(stamp, est, values: dict) -> MarkerArray | None:
    """Force arrows and the energy text of the newest sample; None if an arrow would not be finite."""
    sample, L = est.last_sample, est.layout
    frames, axes = values["marker_frames"], values["marker_axes"]
    base, scale = values["marker_frame"], values["force_scale"]
    markers = []
    Q_e = sample[L["Q_e"]]
    for i, joint in enumerate(est.servo_joints):
        m = Marker()
        m.header.stamp, m.header.frame_id = stamp, (frames[i] if i < len(frames) and frames[i] else base)
        m.ns, m.id, m.type, m.action = "driving_force", i, Marker.ARROW, Marker.ADD
        axis = AXES.get(axes[i] if i < len(axes) else "x", AXES["x"])
        length = scale * float(Q_e[i])
        if not math.isfinite(length):
            return None
        m.points = [Point(), Point(x=axis[0] * length, y=axis[1] * length, z=axis[2] * length)]
        m.scale.x, m.scale.y, m.scale.z = 0.02, 0.04, 0.06
        m.color.r, m.color.g, m.color.b, m.color.a = 0.9, 0.2, 0.1, 1.0
        m.text = joint
        markers.append(m)
    text = Marker()
    text.header.stamp, text.header.frame_id = stamp, base
    text.ns, text.id, text.type, text.action = "energy", 0, Marker.TEXT_VIEW_FACING, Marker.ADD
    text.pose.position.z = 0.5
    text.scale.z = 0.08
    text.color.r = text.color.g = text.color.b = text.color.a = 1.0
    e = {name: float(sample[L[name]]) for name in ("T", "V", "E", "E_dot", "power")}
    text.text = (
        f"T {e['T']:.3f} J  V {e['V']:.3f} J  E {e['E']:.3f} J\n"
        f"dE/dt {e['E_dot']:.3f} W  qd.Q {e['power']:.3f} W\n"
        + "  ".join(f"Q_e[{j}] {float(v):.3f}" for j, v in zip(est.servo_joints, Q_e))
    )
    markers.append(text)
    return MarkerArray(markers=markers)


def rollout_msg(stamp, frame: str, joints, rollout) -> JointTrajectory | None:
    """``~/predicted_trajectory`` of a free-motion rollout; None if it is not finite."""
    taus, positions, velocities, accelerations = rollout
    if not (
        np.isfinite(positions).all() and np.isfinite(velocities).all() and np.isfinite(accelerations).all()
    ):
        return None
    msg = JointTrajectory()
    msg.header.stamp, msg.header.frame_id = stamp, frame
    msg.joint_names = list(joints)
    for tau, x, v, a in zip(taus, positions, velocities, accelerations):
        pt = JointTrajectoryPoint(positions=x.tolist(), velocities=v.tolist(), accelerations=a.tolist())
        pt.time_from_start = seconds_to_duration(tau)
        msg.points.append(pt)
    return msg
