"""Common interface of the analytic Lagrangian reference systems.

A system supplies ``M(q)``, ``∂M/∂q``, ``V(q)``, ``∂V/∂q`` and which coordinates are free or
servo-driven; everything else (``Q``, ``Q_e``, ``q̈_f``, decomposition, energies, power) comes from
the shared machinery in :mod:`ros_lnn.physics.lagrangian`, exactly as for the network.
"""

from __future__ import annotations

from abc import ABC, abstractmethod

import numpy as np

from .lagrangian import NUMPY, Partition, dynamics


class LagrangianSystem(ABC):
    """A holonomic system with ``𝓛 = ½ q̇ᵀ M(q) q̇ − V(q)``; all arrays float64, batch dims allowed."""

    #: names of the generalised coordinates, in the order of ``q``
    coordinate_names: tuple[str, ...]
    #: unit of each coordinate ("m" or "rad")
    coordinate_units: tuple[str, ...]
    partition: Partition

    @property
    def n(self) -> int:
        return len(self.coordinate_names)

    @property
    def free_names(self) -> tuple[str, ...]:
        return tuple(self.coordinate_names[i] for i in self.partition.free)

    @property
    def servo_names(self) -> tuple[str, ...]:
        return tuple(self.coordinate_names[i] for i in self.partition.servo)

    @abstractmethod
    def mass_matrix(self, q: np.ndarray) -> np.ndarray:
        """``M(q)``, shape (..., n, n)."""

    @abstractmethod
    def mass_matrix_partials(self, q: np.ndarray) -> np.ndarray:
        """``∂M/∂q``, shape (..., n, n, n) with [..., k, i, j] = ∂M_ij/∂q_k."""

    @abstractmethod
    def potential(self, q: np.ndarray) -> np.ndarray:
        """``V(q)``, shape (...)."""

    @abstractmethod
    def potential_gradient(self, q: np.ndarray) -> np.ndarray:
        """``∂V/∂q``, shape (..., n)."""

    def dynamics(self, q, qd, *, qdd=None, qdd_e=None, Q_f=None) -> dict:
        """Exact outputs of EQUATIONS.md §1 (see :func:`ros_lnn.physics.lagrangian.dynamics`)."""
        q = np.asarray(q, dtype=float)
        qd = np.asarray(qd, dtype=float)
        return dynamics(
            NUMPY,
            self.mass_matrix(q),
            self.mass_matrix_partials(q),
            self.potential(q),
            self.potential_gradient(q),
            qd,
            self.partition,
            qdd=qdd,
            qdd_e=qdd_e,
            Q_f=Q_f,
        )

    def with_servo(self, servo_names) -> LagrangianSystem:
        """A copy of this system with another choice of servo-driven coordinates."""
        import copy

        other = copy.copy(self)
        idx = [self.coordinate_names.index(name) for name in servo_names]
        other.partition = Partition.from_servo(self.n, idx)
        return other


class HangingPendulumSystem(LagrangianSystem):
    """A system whose only potential is a pendulum's on the first coordinate, ``V = −k cos θ`` with
    ``θ = q[..., 0]`` from the downward vertical and ``k = m g l`` (:meth:`pendulum_weight_moment`)."""

    @abstractmethod
    def pendulum_weight_moment(self) -> float:
        """``m g l``: the pendulum's weight times the distance from the pivot to its centre of mass."""

    def potential(self, q):
        q = np.asarray(q, dtype=float)
        return -self.pendulum_weight_moment() * np.cos(q[..., 0])

    def potential_gradient(self, q):
        q = np.asarray(q, dtype=float)
        dV = np.zeros(q.shape)
        dV[..., 0] = self.pendulum_weight_moment() * np.sin(q[..., 0])
        return dV
