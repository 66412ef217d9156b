"""Fixed-step integration of a Lagrangian system for a real-time simulator: classical RK4 on the free
coordinates while the servo coordinates follow a prescribed ``t -> (q_e, q̇_e, q̈_e)`` and the applied
forces on the free coordinates are held over the step (zero-order hold, as a sampled controller)."""

from __future__ import annotations

import numpy as np

from .lagrangian import NUMPY, coriolis_force, forward_acceleration
from .systems import LagrangianSystem


def lagrangian_terms(system: LagrangianSystem, q):
    """``(M, ∂M/∂q, V, ∂V/∂q)`` in one pass where the system is a sum of per-link terms."""
    if hasattr(system, "link_terms") and hasattr(system, "links"):
        parts = [system.link_terms(q, i) for i in range(len(system.links))]
        return tuple(sum(p[k] for p in parts) for k in range(4))
    return (
        system.mass_matrix(q),
        system.mass_matrix_partials(q),
        system.potential(q),
        system.potential_gradient(q),
    )


class FixedStepSimulator:
    def __init__(self, system: LagrangianSystem, servo, q0_f, qd0_f, t0: float = 0.0):
        self.system = system
        part = system.partition
        self.free, self.servo_idx = list(part.free), list(part.servo)
        self.n, self.n_f, self.n_e = system.n, len(self.free), len(self.servo_idx)
        if self.n_e and servo is None:
            raise ValueError(f"servo joints {system.servo_names} need a servo trajectory")
        self.servo = servo
        self.t = float(t0)
        self.q_f = np.asarray(q0_f, dtype=float).reshape(self.n_f).copy()
        self.qd_f = np.asarray(qd0_f, dtype=float).reshape(self.n_f).copy()
        self.Q_f = np.zeros(self.n_f)

    def _servo(self, t):
        if not self.n_e:
            return np.zeros(0), np.zeros(0), np.zeros(0)
        return tuple(np.asarray(v, dtype=float).reshape(self.n_e) for v in self.servo(t))

    def full_state(self, t, q_f, qd_f):
        """(q, q̇, q̈_e) in system order at time t for free-coordinate values q_f, q̇_f."""
        q, qd = np.empty(self.n), np.empty(self.n)
        q[self.free], qd[self.free] = q_f, qd_f
        q_e, qd_e, qdd_e = self._servo(t)
        q[self.servo_idx], qd[self.servo_idx] = q_e, qd_e
        return q, qd, qdd_e

    def _accel(self, t, q_f, qd_f):
        q, qd, qdd_e = self.full_state(t, q_f, qd_f)
        M, dM, _, dV = lagrangian_terms(self.system, q)
        Q_c = coriolis_force(NUMPY, dM, qd)
        return forward_acceleration(NUMPY, M, Q_c, dV, qdd_e, self.Q_f, self.system.partition)

    def step(self, dt: float) -> None:
        t, x, v = self.t, self.q_f, self.qd_f
        a1 = self._accel(t, x, v)
        a2 = self._accel(t + dt / 2, x + dt / 2 * v, v + dt / 2 * a1)
        v2 = v + dt / 2 * a1
        a3 = self._accel(t + dt / 2, x + dt / 2 * v2, v + dt / 2 * a2)
        v3 = v + dt / 2 * a2
        a4 = self._accel(t + dt, x + dt * v3, v + dt * a3)
        v4 = v + dt * a3
        self.q_f = x + dt / 6 * (v + 2 * v2 + 2 * v3 + v4)
        self.qd_f = v + dt / 6 * (a1 + 2 * a2 + 2 * a3 + a4)
        self.t = t + dt

    def outputs(self) -> tuple[np.ndarray, np.ndarray, dict]:
        """Current (q, q̇) in system order and the exact forward-mode outputs at that state."""
        q, qd, qdd_e = self.full_state(self.t, self.q_f, self.qd_f)
        return q, qd, self.system.dynamics(q, qd, qdd_e=qdd_e, Q_f=self.Q_f)
