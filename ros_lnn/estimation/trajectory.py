"""Interpolation of a servo plan (the points of a JointTrajectory) at a given time.

Between two points the interpolant follows ros2_control's joint_trajectory_controller: quintic when
both points carry positions, velocities and accelerations (q̈ continuous, so the plan *commands*
accelerations), cubic Hermite with positions and velocities, linear with positions only. Before the
first point the first point is held; after the last point the plan is finished (``finished`` is True
and the last position is held at rest).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass
class PlanSample:
    q: np.ndarray
    qd: np.ndarray
    qdd: np.ndarray  # second derivative of the interpolant (0 for linear segments)
    finished: bool  # the time lies after the last point
    commanded_acceleration: bool  # the plan carries accelerations (quintic segments)


class ServoPlan:
    """Points ``times`` (s, absolute, increasing) with positions (k, n) and optional velocities and
    accelerations of the same shape."""

    def __init__(self, times, positions, velocities=None, accelerations=None):
        self.times = np.asarray(times, dtype=float).ravel()
        self.q = np.atleast_2d(np.asarray(positions, dtype=float))
        k = self.times.size
        if k == 0 or self.q.shape[0] != k:
            raise ValueError(f"a plan needs one position row per point: {k} times, {self.q.shape[0]} rows")
        if np.any(np.diff(self.times) <= 0):
            raise ValueError("plan point times must increase strictly")
        self.qd = None if velocities is None else np.asarray(velocities, dtype=float).reshape(self.q.shape)
        self.qdd = (
            None if accelerations is None else np.asarray(accelerations, dtype=float).reshape(self.q.shape)
        )
        if self.qdd is not None and self.qd is None:
            raise ValueError("a plan with accelerations needs velocities too")
        for name, arr in (("positions", self.q), ("velocities", self.qd), ("accelerations", self.qdd)):
            if arr is not None and not np.all(np.isfinite(arr)):
                raise ValueError(f"plan {name} contain NaN or inf")

    @property
    def commands_acceleration(self) -> bool:
        return self.qdd is not None

    @property
    def end_time(self) -> float:
        return float(self.times[-1])

    def sample(self, t: float) -> PlanSample:
        times, n = self.times, self.q.shape[1]
        zeros = np.zeros(n)
        acc = self.qdd is not None
        if t > times[-1]:
            return PlanSample(self.q[-1].copy(), zeros, zeros.copy(), True, acc)
        if t < times[0] or len(times) == 1:
            k = 0 if t < times[0] else -1
            qd = zeros if self.qd is None else self.qd[k].copy()
            qdd = zeros.copy() if self.qdd is None else self.qdd[k].copy()
            return PlanSample(self.q[k].copy(), qd, qdd, False, acc)
        i = min(int(np.searchsorted(times, t, side="right") - 1), len(times) - 2)
        h = times[i + 1] - times[i]
        s = (t - times[i]) / h
        p0, p1 = self.q[i], self.q[i + 1]
        if self.qd is None:
            return PlanSample(p0 + s * (p1 - p0), (p1 - p0) / h, zeros, False, False)
        v0, v1 = self.qd[i] * h, self.qd[i + 1] * h  # derivatives in the unit parameter s
        if self.qdd is None:
            c = _cubic(p0, v0, p1, v1)
            q, dq, ddq = _poly(c, s)
            return PlanSample(q, dq / h, ddq / (h * h), False, False)
        a0, a1 = self.qdd[i] * h * h, self.qdd[i + 1] * h * h
        c = quintic_coefficients(p0, v0, a0, p1, v1, a1)
        q, dq, ddq = _poly(c, s)
        return PlanSample(q, dq / h, ddq / (h * h), False, True)


def _cubic(p0, v0, p1, v1):
    return [p0, v0, 3 * (p1 - p0) - 2 * v0 - v1, 2 * (p0 - p1) + v0 + v1]


def quintic_coefficients(p0, v0, a0, p1, v1, a1):
    """Power-basis coefficients in s ∈ [0, 1] of the quintic from (position, h·velocity, h²·acceleration)
    at s = 0 to those at s = 1 (numbers, or arrays: elementwise)."""
    return [
        p0,
        v0,
        0.5 * a0,
        10 * (p1 - p0) - 6 * v0 - 4 * v1 - 1.5 * a0 + 0.5 * a1,
        -15 * (p1 - p0) + 8 * v0 + 7 * v1 + 1.5 * a0 - a1,
        6 * (p1 - p0) - 3 * (v0 + v1) - 0.5 * (a0 - a1),
    ]


def _poly(c, s):
    """Value, first and second derivative of Σ c_j s^j (coefficients are arrays)."""
    q = np.zeros_like(c[0], dtype=float)
    dq = np.zeros_like(q)
    ddq = np.zeros_like(q)
    for j, cj in enumerate(c):
        q = q + cj * s**j
        if j >= 1:
            dq = dq + j * cj * s ** (j - 1)
        if j >= 2:
            ddq = ddq + j * (j - 1) * cj * s ** (j - 2)
    return q, dq, ddq


class CriticallyDampedServo:
    """A position servo tracking step commands: ``q̈ = ω²(c − q) − 2ω q̇`` (critically damped), solved
    in closed form from the state at the moment each command arrives, so ``(q, q̇, q̈)`` are exact
    functions of time. Used by the simulator for position-only commands (Float64MultiArray)."""

    def __init__(self, q0, qd0, t0: float, bandwidth: float = 20.0):
        self.omega = float(bandwidth)
        self._set(
            np.asarray(q0, dtype=float), np.asarray(qd0, dtype=float), float(t0), np.asarray(q0, dtype=float)
        )

    def _set(self, q0, qd0, t0, target):
        self.t0, self.c = t0, target.copy()
        self.A = q0 - target
        self.B = qd0 + self.omega * self.A

    def command(self, t: float, target) -> None:
        q, qd, _ = self(t)
        self._set(q, qd, float(t), np.asarray(target, dtype=float))

    def __call__(self, t: float):
        tau = max(float(t) - self.t0, 0.0)
        w, A, B = self.omega, self.A, self.B
        e = np.exp(-w * tau)
        q = self.c + (A + B * tau) * e
        qd = (B - w * (A + B * tau)) * e
        qdd = (-2 * w * B + w * w * (A + B * tau)) * e
        return q, qd, qdd


class SplicedPlan:
    """A new plan that takes over at its first point; before that the previous plan still applies
    (as joint_trajectory_controller splices a new goal into the running one). Samples that lag the
    newest command (queued joint states) thus see the plan that was in force at their time."""

    #: The plans kept for lagging samples: those that started within HISTORY_S s of the newest (a
    #: loaded estimator can reach a joint state this late; at 20 Hz plans, 20 of them), at most
    #: MAX_DEPTH (bounds the memory and the walk back for a very fast command stream).
    HISTORY_S = 1.0
    MAX_DEPTH = 64

    def __init__(self, previous, plan: ServoPlan):
        self.plan = plan
        self.previous = previous
        oldest = self.start_time - self.HISTORY_S
        depth, node = 1, self
        while isinstance(node, SplicedPlan) and node.previous is not None:
            depth += 1
            if depth > self.MAX_DEPTH or node.start_time < oldest:
                node.previous = (
                    node.previous.plan if isinstance(node.previous, SplicedPlan) else node.previous
                )
                break
            node = node.previous

    @property
    def start_time(self) -> float:
        return float(self.plan.times[0])

    @property
    def end_time(self) -> float:
        return self.plan.end_time

    def sample(self, t: float) -> PlanSample:
        if t < self.plan.times[0] and self.previous is not None:
            prev = self.previous
            s = prev.sample(t)
            if not s.finished:
                return s
        return self.plan.sample(t)
