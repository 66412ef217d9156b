"""The tracking programs (ros_lnn.arm.tracking) as trajectory points: interpolated as dac_controller does
(quintic between points with accelerations), the point-to-point program is the minimum-jerk moves of
ros_lnn.arm.programs.PointToPoint exactly, the exciting program the Fourier series at its points, both
within the share of the limits they were given and at rest at both ends."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ros_lnn.arm.excitation import arm_limits
from ros_lnn.arm.programs import PointToPoint
from ros_lnn.arm.rigid_body import ArmRigidBody
from ros_lnn.arm.tracking import exciting_program, point_to_point_program
from ros_lnn.control.pipeline import JointTrajectorySampler

URDF = Path(__file__).resolve().parents[2] / "config" / "robots" / "panda" / "panda.urdf"
ARM = ArmRigidBody.from_urdf(URDF, tuple(f"panda_joint{i}" for i in range(1, 8)))


def test_point_to_point_points_give_the_minimum_jerk_moves_with_their_stops():
    start = np.mean(ARM.position_limits(), axis=0)
    program = point_to_point_program(ARM, start, moves=4, seed=3, stop_s=0.5)
    poses = program.q[::2]
    moves = np.diff(program.times)[0::2]
    reference = PointToPoint(poses, moves, np.full(4, 0.5))
    sampler = JointTrajectorySampler(program.times, program.q, program.qd, program.qdd)
    for t in np.random.default_rng(0).uniform(0, program.duration, 200):
        q, qd, qdd = reference.evaluate(t)
        got = sampler(t)
        np.testing.assert_allclose(got[0], q[0], atol=1e-12)
        np.testing.assert_allclose(got[1], qd[0], atol=1e-10)
        np.testing.assert_allclose(got[2], qdd[0], atol=1e-8)
    limits, _ = arm_limits(ARM, "velocity_scale=0.5,acceleration_scale=0.5")
    q, qd, qdd = reference.evaluate(np.linspace(0, program.duration, 5000))
    assert (np.abs(qd) <= limits.velocity * (1 + 1e-9)).all() and (
        np.abs(qdd) <= limits.acceleration * (1 + 1e-6)
    ).all()
    np.testing.assert_allclose(np.diff(program.times)[1::2], 0.5)  # the stops


def test_exciting_program_is_within_its_share_of_the_limits_and_rests_at_both_ends():
    program = exciting_program(ARM, 6.0, speed=0.5)
    limits, _ = arm_limits(ARM, "velocity_scale=0.5,acceleration_scale=0.5")
    assert np.allclose(program.qd[[0, -1]], 0.0, atol=1e-9) and np.allclose(
        program.qdd[[0, -1]], 0.0, atol=1e-9
    )
    assert (np.abs(program.qd) <= limits.velocity).all() and (
        np.abs(program.qdd) <= limits.acceleration
    ).all()
    lo, hi = ARM.position_limits()
    assert (program.q >= lo).all() and (program.q <= hi).all()
    assert program.duration == 6.0 and np.ptp(program.q, axis=0).min() > 0.05  # every joint moves
