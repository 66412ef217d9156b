"""Rotary (Furuta) pendulum: a motor-driven arm spinning about a vertical axis carries a free pendulum.

Coordinates ``q = [θ, φ]``: θ the pendulum angle from the downward vertical (free, ``pendulum_joint``),
φ the arm angle (servo-driven, position-controlled, unbounded: the arm spins; ``arm_joint``). The arm
angle is cyclic: nothing depends on φ, only on φ̇ and φ̈.

Pendulum: a slender rod of mass ``m_p`` and length ``L_p`` hinged at its end, centre of mass at
``l = L_p/2``, inertia ``J_p = m_p L_p²/3`` about the hinge; hinge at distance ``r`` from the motor
axis, its axis along the arm. Arm (with motor rotor and hub): inertia ``J_arm`` about the motor axis.

    T = ½ (J_arm + m_p r² + J_p sin²θ) φ̇² + m_p r l cos θ φ̇ θ̇ + ½ J_p θ̇²,     V = −m_p g l cos θ

Default parameters are those of a Quanser QUBE-Servo 2 rotary pendulum module.
"""

from __future__ import annotations

import numpy as np

from .friction import FrictionPlant, JointFriction
from .lagrangian import Partition
from .systems import HangingPendulumSystem


class RotaryPendulum(HangingPendulumSystem):
    """Furuta pendulum with a servo-driven arm; see the module docstring for the model."""

    name = "rotary_pendulum"
    coordinate_names = ("pendulum_joint", "arm_joint")
    coordinate_units = ("rad", "rad")

    def __init__(
        self,
        m_p: float = 0.024,
        L_p: float = 0.129,
        r: float = 0.085,
        J_arm: float = 0.095 * 0.085**2 / 3 + 4.0e-6 + 0.6e-6,
        g: float = 9.81,
    ):
        self.m_p, self.L_p, self.r, self.J_arm, self.g = (
            float(m_p),
            float(L_p),
            float(r),
            float(J_arm),
            float(g),
        )
        self.l = 0.5 * self.L_p
        self.J_p = self.m_p * self.L_p**2 / 3.0
        self.partition = Partition(free=(0,), servo=(1,))

    def mass_matrix(self, q):
        q = np.asarray(q, dtype=float)
        s, c = np.sin(q[..., 0]), np.cos(q[..., 0])
        M = np.empty(q.shape[:-1] + (2, 2))
        M[..., 0, 0] = self.J_p
        M[..., 0, 1] = M[..., 1, 0] = self.m_p * self.r * self.l * c
        M[..., 1, 1] = self.J_arm + self.m_p * self.r**2 + self.J_p * s**2
        return M

    def mass_matrix_partials(self, q):
        q = np.asarray(q, dtype=float)
        s, c = np.sin(q[..., 0]), np.cos(q[..., 0])
        dM = np.zeros(q.shape[:-1] + (2, 2, 2))
        dM[..., 0, 0, 1] = dM[..., 0, 1, 0] = -self.m_p * self.r * self.l * s
        dM[..., 0, 1, 1] = 2.0 * self.J_p * s * c
        return dM

    def pendulum_weight_moment(self) -> float:
        return self.m_p * self.g * self.l

    def closed_form_acceleration(self, theta, theta_d, phi_d, phi_dd, torque=0.0):
        """Textbook Furuta equations, written independently of the Lagrangian machinery.

        Returns ``(θ̈, τ_arm)``: the pendulum's angular acceleration for the arm's rate and acceleration
        (and an optional torque on the pendulum hinge, e.g. friction), and the torque the motor must
        deliver to the arm.
        """
        Jp, mrl = self.J_p, self.m_p * self.r * self.l
        s, c = np.sin(theta), np.cos(theta)
        theta_dd = (torque - mrl * c * phi_dd + Jp * s * c * phi_d**2 - self.m_p * self.g * self.l * s) / Jp
        tau = (
            (self.J_arm + self.m_p * self.r**2 + Jp * s**2) * phi_dd
            + mrl * c * theta_dd
            - mrl * s * theta_d**2
            + 2.0 * Jp * s * c * theta_d * phi_d
        )
        return theta_dd, tau

    def small_angle_frequency(self, arm_speed: float = 0.0) -> float:
        """Angular frequency (rad/s) of small swings about the stable equilibrium for a constant arm
        speed Ω: ``√(m_p g l / J_p)`` hanging; ``Ω sin θ*`` with ``cos θ* = m_p g l / (J_p Ω²)`` once the
        arm spins fast enough to lift the pendulum."""
        w0_sq = self.m_p * self.g * self.l / self.J_p
        if arm_speed**2 <= w0_sq:
            return float(np.sqrt(w0_sq - arm_speed**2))
        cos_eq = w0_sq / arm_speed**2
        return float(abs(arm_speed) * np.sqrt(1.0 - cos_eq**2))


def quanser_rotary_pendulum(
    *, pendulum: JointFriction | None = None, arm: JointFriction | None = None, **parameters
) -> FrictionPlant:
    """The rotary pendulum with hinge and motor friction.

    Defaults: hinge b = 2.5·10⁻⁵ N·m·s/rad (free swings decay with time constant 2 J_p / b ≈ 11 s),
    τ_c = 2.5·10⁻⁵ N·m (about 7 mrad of amplitude lost per swing), ε = 0.02 rad/s; motor b = 5·10⁻⁴
    N·m·s/rad and 2·10⁻³ N·m Coulomb (it only changes the motor torque Q_e).
    """
    pendulum = JointFriction(2.5e-5, 2.5e-5, 0.02) if pendulum is None else pendulum
    arm = JointFriction(5e-4, 2e-3, 0.02) if arm is None else arm
    return FrictionPlant(
        RotaryPendulum(**parameters), {"pendulum_joint": pendulum, "arm_joint": arm}, "rotary_pendulum"
    )


__all__ = ["RotaryPendulum", "quanser_rotary_pendulum"]
