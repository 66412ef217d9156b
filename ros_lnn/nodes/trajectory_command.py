"""A servo trajectory command (JointTrajectory) read into arrays: what ``servo_lnn`` and ``sim`` both
check before they follow one."""

from __future__ import annotations

import numpy as np

#: Largest servo command magnitudes taken — position [rad or m], velocity [/s], acceleration [/s²]: a
#: finite but absurd command (1e300) is refused at receipt, as a non-finite one is, instead of being
#: followed (its plan held at its last point, the simulator's and the estimator's outputs with it).
COMMAND_BOUNDS = (1e3, 1e4, 1e6)


def command_bound_problem(positions, velocities=None, accelerations=None) -> str:
    """Why a servo command's values are refused ('' when taken): beyond :data:`COMMAND_BOUNDS`."""
    for label, values, bound in zip(
        ("position", "velocity", "acceleration"), (positions, velocities, accelerations), COMMAND_BOUNDS
    ):
        if values is not None and np.size(values) and float(np.max(np.abs(values))) > bound:
            return f"a {label} beyond ±{bound:g} ({float(np.max(np.abs(values))):.3g})"
    return ""


def trajectory_arrays(msg, joints, lack: str = ""):
    """``(positions, velocities or None, accelerations or None)`` of the points of ``msg`` in ``joints``
    order, None when it has no points; ValueError with the reason for a trajectory that is refused
    (a repeated name, one of ``joints`` missing (the message says ``lack`` before them), a point of
    another size, a value beyond :data:`COMMAND_BOUNDS`)."""
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
    arrays = (
        np.array([pt.positions for pt in pts])[:, cols],
        np.array([pt.velocities for pt in pts])[:, cols] if has_v else None,
        np.array([pt.accelerations for pt in pts])[:, cols] if has_a else None,
    )
    with np.errstate(invalid="ignore"):
        problem = command_bound_problem(*arrays)
    if problem:
        raise ValueError(problem)
    return arrays
