"""A servo trajectory command of ``sim`` read into the plan its servo joints follow."""

from __future__ import annotations

import numpy as np

from ..estimation.trajectory import ServoPlan
from .stamps import duration_ns


def servo_plan(msg, servo_names, to_sim_s) -> ServoPlan:
    """The plan of a JointTrajectory for ``servo_names``, its points' times (ns from the stamp) in
    simulated seconds through ``to_sim_s``; ValueError with the reason for a refused command."""
    names = list(msg.joint_names)
    if len(set(names)) != len(names):
        raise ValueError(f"joint_names {names} repeat a name")
    missing = [j for j in servo_names if j not in names]
    if missing:
        raise ValueError(f"joint_names {names} lack {missing}")
    if not msg.points:
        raise ValueError("no points")
    cols = [names.index(j) for j in servo_names]
    k = len(names)
    pts = msg.points
    if any(
        len(pt.positions) != k or len(pt.velocities) not in (0, k) or len(pt.accelerations) not in (0, k)
        for pt in pts
    ):
        raise ValueError("every point needs one position (and velocity/acceleration, if any) per joint")
    times = [to_sim_s(duration_ns(pt.time_from_start)) for pt in pts]
    has_v = all(len(pt.velocities) for pt in pts)
    has_a = has_v and all(len(pt.accelerations) for pt in pts)
    return ServoPlan(
        times,
        np.array([pt.positions for pt in pts])[:, cols],
        np.array([pt.velocities for pt in pts])[:, cols] if has_v else None,
        np.array([pt.accelerations for pt in pts])[:, cols] if has_a else None,
    )


def plan_state(plan: ServoPlan, t: float):
    """``(q, q̇, q̈)`` of ``plan`` at simulated time ``t``."""
    s = plan.sample(t)
    return s.q, s.qd, s.qdd
