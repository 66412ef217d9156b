"""A servo trajectory command of ``sim`` read into the plan its servo joints follow."""

from __future__ import annotations

from ...estimation.trajectory import ServoPlan
from ..stamps import duration_ns
from ..trajectory_command import trajectory_arrays


def servo_plan(msg, servo_names, to_sim_s) -> ServoPlan:
    """The plan of a JointTrajectory for ``servo_names``, its points' times (ns from the stamp) in
    simulated seconds through ``to_sim_s``; ValueError with the reason for a refused command."""
    arrays = trajectory_arrays(msg, servo_names)
    if arrays is None:
        raise ValueError("no points")
    return ServoPlan([to_sim_s(duration_ns(pt.time_from_start)) for pt in msg.points], *arrays)


def plan_state(plan: ServoPlan, t: float):
    """``(q, q̇, q̈)`` of ``plan`` at simulated time ``t``."""
    s = plan.sample(t)
    return s.q, s.qd, s.qdd
