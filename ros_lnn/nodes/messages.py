"""Message layouts the nodes publish: the estimator's ``~/driving_force``, ``~/prediction`` and
``~/energy``, built here for both the estimator and the simulator's ``~/ground_truth``, so the two publish
the same layout by construction."""
from __future__ import annotations

import math
from array import array

import numpy as np
from builtin_interfaces.msg import Time
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray, MultiArrayDimension
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

#: Entries of ``~/energy`` (Float64MultiArray): J, J, J, W, W, W, W, then the input's stamp
#: (seconds and nanoseconds as exact integers, since Float64MultiArray has no header).
ENERGY_LABELS = ("T", "V", "E", "T_dot", "V_dot", "E_dot", "power", "stamp_sec", "stamp_nanosec")
ENERGY_LAYOUT_LABEL = ",".join(ENERGY_LABELS)


def _floats(x) -> array:
    """float64[] field value: an array('d') is taken by the message setters without a per-element check."""
    out = array("d")
    out.frombytes(np.ascontiguousarray(x, dtype=np.float64).tobytes())
    return out


def driving_force_msg(stamp: Time, frame_id: str, names, q_e, qd_e, Q_e) -> JointState:
    msg = JointState()
    msg.header.stamp, msg.header.frame_id = stamp, frame_id
    msg.name = list(names)
    msg.position, msg.velocity, msg.effort = _floats(q_e), _floats(qd_e), _floats(Q_e)
    return msg


def prediction_msg(stamp: Time, frame_id: str, names, q, qd, qdd, Q) -> JointTrajectory:
    """One point at the input's time: measured q, q̇; q̈ with the predicted q̈_f; effort = Q."""
    msg = JointTrajectory()
    msg.header.stamp, msg.header.frame_id = stamp, frame_id
    msg.joint_names = list(names)
    point = JointTrajectoryPoint()
    point.positions, point.velocities, point.accelerations, point.effort = (
        _floats(q), _floats(qd), _floats(qdd), _floats(Q))
    msg.points = [point]
    return msg


def energy_msg(stamp: Time, out: dict) -> Float64MultiArray:
    msg = Float64MultiArray()
    msg.layout.dim = [MultiArrayDimension(label=ENERGY_LAYOUT_LABEL, size=len(ENERGY_LABELS),
                                          stride=len(ENERGY_LABELS))]
    values = [float(out[k]) for k in ENERGY_LABELS[:7]] + [float(stamp.sec), float(stamp.nanosec)]
    msg.data = array("d", values)
    return msg


def energy_values_msg(stamp: Time, values) -> Float64MultiArray:
    """``~/energy`` from its first seven entries (T, V, E, Ṫ, V̇, Ė, q̇ᵀQ); the stamp is appended."""
    msg = Float64MultiArray()
    msg.layout.dim = [MultiArrayDimension(label=ENERGY_LAYOUT_LABEL, size=len(ENERGY_LABELS),
                                          stride=len(ENERGY_LABELS))]
    data = array("d", np.ascontiguousarray(values, dtype=np.float64).tobytes())
    data.extend((float(stamp.sec), float(stamp.nanosec)))
    msg.data = data
    return msg


def energy_dict(msg: Float64MultiArray) -> dict:
    """Read ``~/energy`` back by its labels."""
    labels = msg.layout.dim[0].label.split(",") if msg.layout.dim else list(ENERGY_LABELS)
    return dict(zip(labels, msg.data))


def outputs_finite(out: dict) -> bool:
    """Everything the estimator publishes is finite (one sum: NaN/inf anywhere makes it non-finite)."""
    total = float(out["Q"].sum()) + float(out["qdd"].sum()) + float(out["T"]) + float(out["V"]) + \
        float(out["T_dot"]) + float(out["V_dot"]) + float(out["power"])
    return math.isfinite(total)
