"""Joint trajectories an arm is asked to track, as trajectory points with positions, velocities and
accelerations (quintic between points, as joint_trajectory_controller and ``dac_controller``
interpolate them):

* :func:`exciting_program`: a rest-to-rest Fourier series (:func:`ros_lnn.arm.fourier.random_multisine`)
  within a share of the joint limits, sampled every ``spacing`` s — every joint moving at once;
* :func:`point_to_point_program`: moves between random waypoints, each a minimum-jerk (quintic,
  rest-to-rest) move as fast as a share of the velocity and acceleration limits allows, with a stop at
  each waypoint — where static friction and the holding torque show.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .excitation import arm_limits
from .fourier import random_multisine, shrink
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
    n = arm.n
    times, points = [0.0], [np.asarray(start, dtype=float)]
    for _ in range(moves):
        target = rng.uniform(inner.lower, inner.upper)
        step = np.abs(target - points[-1])
        # minimum jerk: peak speed 15/8 Δq/T, peak acceleration 10/√3 Δq/T²
        duration = float(
            max(
                np.max(1.875 * step / limits.velocity),
                np.max(np.sqrt(5.7735 * step / limits.acceleration)),
                0.2,
            )
        )
        times += [times[-1] + duration, times[-1] + duration + stop_s]
        points += [target, target]
    zero = np.zeros((len(points), n))
    return Program(np.array(times), np.array(points), zero, zero.copy())
