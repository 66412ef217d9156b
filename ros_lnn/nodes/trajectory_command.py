"""A servo trajectory command (JointTrajectory) read into arrays: what ``servo_lnn`` and ``sim`` both
check before they follow one."""

from __future__ import annotations

import numpy as np


def trajectory_arrays(msg, joints, lack: str = ""):
    """``(positions, velocities or None, accelerations or None)`` of the points of ``msg`` in ``joints``
    order, None when it has no points; ValueError with the reason for a trajectory that is refused
    (a repeated name, one of ``joints`` missing (the message says ``lack`` before them), a point of
    another size)."""
    names = list(msg.joint_names)
    if len(set(names)) != len(names):
        raise ValueError(f"joint_names {names} repeat a name")
    missing = [j for j in joints if j not in names]
    if missing:
        raise ValueError(f"joint_names {names} lack {lack}{missing}")
    if not msg.points:
        return None
    cols = [names.index(j) for j in joints]
    k = len(names)
    pts = msg.points
    if any(
        len(pt.positions) != k or len(pt.velocities) not in (0, k) or len(pt.accelerations) not in (0, k)
        for pt in pts
    ):
        raise ValueError("every point needs one position (and velocity/acceleration, if any) per joint")
    has_v = all(len(pt.velocities) for pt in pts)
    has_a = has_v and all(len(pt.accelerations) for pt in pts)
    return (
        np.array([pt.positions for pt in pts])[:, cols],
        np.array([pt.velocities for pt in pts])[:, cols] if has_v else None,
        np.array([pt.accelerations for pt in pts])[:, cols] if has_a else None,
    )
