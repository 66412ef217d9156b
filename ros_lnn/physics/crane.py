"""The position-driven pendulum cart ("crane") of the ServoLNN paper, Sec. 5 (EQUATIONS.md §1).

Coordinates ``q = [θ, x]``: θ the bob angle from the downward vertical (rad), x the cart position (m).
The pendulum is free, the cart servo-driven (``with_servo([])`` gives the force-driven crane).

    T = ½(m1+m2) ẋ² + m2 L ẋ θ̇ cos θ + ½ m2 L² θ̇²,   V = −m2 g L cos θ
"""

from __future__ import annotations

import numpy as np

from .lagrangian import Partition
from .systems import HangingPendulumSystem


class Crane(HangingPendulumSystem):
    """Cart of mass ``m1`` on a horizontal rail, bob ``m2`` on a massless string of length ``L``."""

    name = "crane"
    coordinate_names = ("pendulum_joint", "cart_joint")
    coordinate_units = ("rad", "m")

    def __init__(self, m1: float = 0.45, m2: float = 0.13, L: float = 1.5, g: float = 9.8):
        self.m1, self.m2, self.L, self.g = float(m1), float(m2), float(L), float(g)
        self.partition = Partition(free=(0,), servo=(1,))

    def mass_matrix(self, q):
        q = np.asarray(q, dtype=float)
        c = np.cos(q[..., 0])
        M = np.empty(q.shape[:-1] + (2, 2))
        M[..., 0, 0] = self.m2 * self.L**2
        M[..., 0, 1] = M[..., 1, 0] = self.m2 * self.L * c
        M[..., 1, 1] = self.m1 + self.m2
        return M

    def mass_matrix_partials(self, q):
        q = np.asarray(q, dtype=float)
        dM = np.zeros(q.shape[:-1] + (2, 2, 2))
        dM[..., 0, 0, 1] = dM[..., 0, 1, 0] = -self.m2 * self.L * np.sin(q[..., 0])
        return dM

    def pendulum_weight_moment(self) -> float:
        return self.m2 * self.g * self.L

    def closed_form_acceleration(self, theta, theta_d, x_dd, torque=0.0):
        """Textbook pendulum-cart equations, written independently of the Lagrangian machinery.

        Returns ``(θ̈, F)``: the bob's angular acceleration for a cart acceleration ``ẍ`` (and an
        optional torque on the pendulum joint), and the horizontal force the cart must receive.
        """
        m1, m2, L, g = self.m1, self.m2, self.L, self.g
        theta_dd = (torque / (m2 * L) - x_dd * np.cos(theta) - g * np.sin(theta)) / L
        force = (m1 + m2) * x_dd + m2 * L * (theta_dd * np.cos(theta) - theta_d**2 * np.sin(theta))
        return theta_dd, force

    def bob_position(self, q):
        """Cartesian position (x, y) of the bob, y up, for plots and markers."""
        q = np.asarray(q, dtype=float)
        return np.stack([q[..., 1] + self.L * np.sin(q[..., 0]), -self.L * np.cos(q[..., 0])], axis=-1)
