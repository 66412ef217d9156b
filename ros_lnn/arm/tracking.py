"""Joint trajectories an arm is asked to track, as trajectory points with positions, velocities and
accelerations (quintic between points, as joint_trajectory_controller and ``dac_controller``
interpolate them: a ``~/joint_trajectory``, or ``ros_lnn.control.pipeline.JointTrajectorySampler``):

* :func:`exciting_program`: a rest-to-rest Fourier series (:func:`ros_lnn.arm.fourier.random_multisine`)
  within a share of the joint limits, sampled every ``spacing`` s — every joint moving at once;
* :func:`point_to_point_program`: minimum-jerk moves (:class:`ros_lnn.arm.programs.PointToPoint`) between
  random waypoints, each as fast as a share of the velocity and acceleration limits allows, with a stop
  at each waypoint — where static friction and the holding torque show; its points are the moves' ends,
  so the quintic between them is each move exactly.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np

from .excitation import arm_limits
from .fourier import random_multisine, shrink
from .programs import PointToPoint, move_time
from .rigid_body import ArmRigidBody


@dataclass
class Program:
    """Trajectory points: times (K,) from 0 [s] and positions, velocities, accelerations (K, n)."""

    times: np.ndarray
    q: np.ndarray
    qd: np.ndarray
    qdd: np.ndarray

    @property
    def duration(self) -> float:
        return float(self.times[-1])

    def then(self, other: Program, pause_s: float = 0.0) -> Program:
        """This program, ``pause_s`` at rest, then ``other`` (which must start where this one ends)."""
        shift = self.duration + pause_s
        return Program(
            np.concatenate([self.times, other.times[1:] + shift]),
            np.vstack([self.q, other.q[1:]]),
            np.vstack([self.qd, other.qd[1:]]),
            np.vstack([self.qdd, other.qdd[1:]]),
        )


def exciting_program(
    arm: ArmRigidBody, period_s: float = 12.0, seed: int = 5, speed: float = 0.5, spacing: float = 0.02
) -> Program:
    """One period of a 5-harmonic Fourier series within 70 % of each joint's range and ``speed`` × its
    velocity and acceleration limits (URDFs carry no acceleration limits: 3/s × the velocity limit)."""
    limits, _ = arm_limits(arm, f"velocity_scale={speed},acceleration_scale={speed}")
    traj = random_multisine(limits, period_s, 5, seed=seed, margin=0.15)
    times = np.arange(0.0, period_s + 0.5 * spacing, spacing)
    times[-1] = period_s
    q, qd, qdd = traj.evaluate(times)
    return Program(times, q, qd, qdd)


def point_to_point_program(
    arm: ArmRigidBody, start, moves: int = 6, seed: int = 7, speed: float = 0.5, stop_s: float = 0.5
) -> Program:
    """``moves`` minimum-jerk moves from ``start`` between random waypoints in the middle 60 % of each
    joint's range, each as fast as ``speed`` × the limits allow, each followed by a ``stop_s`` stop."""
    limits, _ = arm_limits(arm, f"velocity_scale={speed},acceleration_scale={speed}")
    inner = shrink(limits, 0.2)
    rng = np.random.default_rng(seed)
    poses = [np.asarray(start, dtype=float)] + [rng.uniform(inner.lower, inner.upper) for _ in range(moves)]
    durations = [move_time(b - a, limits) for a, b in itertools.pairwise(poses)]
    program = PointToPoint(np.array(poses), np.array(durations), np.full(moves, float(stop_s)))
    ends = program.starts + program.moves
    times = np.concatenate([[0.0], np.ravel(np.column_stack([ends, ends + program.dwells]))])
    points = np.array([poses[0]] + [p for p in poses[1:] for _ in range(2)])
    zero = np.zeros_like(points)
    return Program(times, points, zero, zero.copy())
