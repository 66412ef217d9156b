"""Message layouts the nodes publish: the estimator's ``~/driving_force``, ``~/prediction`` and
``~/energy``, built here for both the estimator and the simulator's ``~/ground_truth``, so the two publish
the same layout by construction.

``~/energy`` and ``~/prediction`` use ``ros_lnn_msgs/Energy`` and ``ros_lnn_msgs/DynamicsPrediction``
(stamped, one named field per quantity) where the interface package is built (a ROS install after
``colcon build``, the test environments after ``make msgs``). Where it is not, the nodes log one warning
and publish the standard types instead: ``~/energy`` a Float64MultiArray labelled
``T,V,E,T_dot,V_dot,E_dot,power,stamp_sec,stamp_nanosec`` and ``~/prediction`` a one-point
JointTrajectory. :func:`energy_dict` and :func:`prediction_arrays` read either.
"""

from __future__ import annotations

import math
from array import array

import numpy as np
from builtin_interfaces.msg import Time
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray, MultiArrayDimension
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

try:
    # generated interface package: no py.typed marker, and not built everywhere
    from ros_lnn_msgs.msg import DynamicsPrediction, Energy  # type: ignore[import-untyped,import-not-found]
except ImportError:  # the interface package is not built here: the standard types below stand in
    DynamicsPrediction = Energy = None

#: True where ros_lnn_msgs is importable (then ~/energy and ~/prediction use it).
HAVE_INTERFACES = Energy is not None
#: Message types of ~/energy and ~/prediction (and of the simulator's ground truth).
ENERGY_TYPE = Energy if HAVE_INTERFACES else Float64MultiArray
PREDICTION_TYPE = DynamicsPrediction if HAVE_INTERFACES else JointTrajectory

#: Entries of the fallback ``~/energy`` (Float64MultiArray): J, J, J, W, W, W, W, then the input's stamp
#: (seconds and nanoseconds as exact integers, since Float64MultiArray has no header).
ENERGY_LABELS = ("T", "V", "E", "T_dot", "V_dot", "E_dot", "power", "stamp_sec", "stamp_nanosec")
ENERGY_LAYOUT_LABEL = ",".join(ENERGY_LABELS)
#: The Energy field of each energy output (runtime output names), in ENERGY_LABELS order.
ENERGY_FIELDS = {
    "T": "kinetic_energy",
    "V": "potential_energy",
    "E": "total_energy",
    "T_dot": "kinetic_energy_rate",
    "V_dot": "potential_energy_rate",
    "E_dot": "total_energy_rate",
    "power": "power",
}


def report_interfaces(logger) -> None:
    """One warning per process where ros_lnn_msgs is missing and the standard types stand in."""
    if not HAVE_INTERFACES:
        from .compat import log_fallback

        log_fallback(
            "ros_lnn_msgs",
            "ros_lnn_msgs is not built here: ~/energy is published as a labelled "
            "Float64MultiArray and ~/prediction as a one-point JointTrajectory (build the interface "
            "package: colcon build, or make msgs)",
            logger,
        )


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


def prediction_msg(stamp: Time, frame_id: str, names, q, qd, qdd, Q, n_free: int = 0):
    """One joint state's prediction: measured q, q̇; q̈ with the predicted q̈_f; Q (``n_free`` free joints
    first). A DynamicsPrediction, or the fallback one-point JointTrajectory (effort = Q)."""
    if HAVE_INTERFACES:
        msg = DynamicsPrediction(joint_names=list(names), free_joint_count=int(n_free))
        msg.header.stamp, msg.header.frame_id = stamp, frame_id
        msg.position, msg.velocity, msg.acceleration, msg.effort = (
            _floats(q),
            _floats(qd),
            _floats(qdd),
            _floats(Q),
        )
        return msg
    msg = JointTrajectory()
    msg.header.stamp, msg.header.frame_id = stamp, frame_id
    msg.joint_names = list(names)
    point = JointTrajectoryPoint()
    point.positions, point.velocities, point.accelerations, point.effort = (
        _floats(q),
        _floats(qd),
        _floats(qdd),
        _floats(Q),
    )
    msg.points = [point]
    return msg


def energy_values_msg(stamp: Time, values, frame_id: str = ""):
    """``~/energy`` from its seven values (T, V, E, Ṫ, V̇, Ė, q̇ᵀQ): an Energy, or the fallback
    Float64MultiArray with the stamp appended."""
    if HAVE_INTERFACES:
        msg = Energy(**{field: float(v) for field, v in zip(ENERGY_FIELDS.values(), values)})
        msg.header.stamp, msg.header.frame_id = stamp, frame_id
        return msg
    msg = Float64MultiArray()
    msg.layout.dim = [
        MultiArrayDimension(label=ENERGY_LAYOUT_LABEL, size=len(ENERGY_LABELS), stride=len(ENERGY_LABELS))
    ]
    data = array("d", np.ascontiguousarray(values, dtype=np.float64).tobytes())
    data.extend((float(stamp.sec), float(stamp.nanosec)))
    msg.data = data
    return msg


def energy_msg(stamp: Time, out: dict, frame_id: str = ""):
    """``~/energy`` from a mapping of runtime outputs (T, V, E, T_dot, V_dot, E_dot, power)."""
    return energy_values_msg(stamp, [float(out[k]) for k in ENERGY_FIELDS], frame_id)


def energy_dict(msg) -> dict:
    """Read ``~/energy`` back: T, V, E, T_dot, V_dot, E_dot, power and stamp_sec, stamp_nanosec."""
    if isinstance(msg, Float64MultiArray):
        labels = msg.layout.dim[0].label.split(",") if msg.layout.dim else list(ENERGY_LABELS)
        return dict(zip(labels, msg.data))
    values = {key: getattr(msg, field) for key, field in ENERGY_FIELDS.items()}
    values.update(stamp_sec=msg.header.stamp.sec, stamp_nanosec=msg.header.stamp.nanosec)
    return values


def prediction_arrays(msg) -> dict:
    """Read ``~/prediction`` back: joint names, q, qd, qdd, Q (model order) as arrays."""
    if isinstance(msg, JointTrajectory):
        point = msg.points[0]
        return {
            "names": list(msg.joint_names),
            "q": np.array(point.positions),
            "qd": np.array(point.velocities),
            "qdd": np.array(point.accelerations),
            "Q": np.array(point.effort),
        }
    return {
        "names": list(msg.joint_names),
        "q": np.array(msg.position),
        "qd": np.array(msg.velocity),
        "qdd": np.array(msg.acceleration),
        "Q": np.array(msg.effort),
        "n_free": msg.free_joint_count,
    }


def outputs_finite(out: dict) -> bool:
    """Everything the estimator publishes is finite (one sum: NaN/inf anywhere makes it non-finite)."""
    total = (
        float(out["Q"].sum())
        + float(out["qdd"].sum())
        + float(out["T"])
        + float(out["V"])
        + float(out["T_dot"])
        + float(out["V_dot"])
        + float(out["power"])
    )
    return math.isfinite(total)
