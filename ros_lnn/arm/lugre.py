"""Dynamic joint friction for the simulated arms: the LuGre model (Canudas de Wit et al. 1995) with a
Stribeck curve — presliding (the bristles' spring), breakaway (static friction above Coulomb),
hysteresis at reversals and a torque held at rest that remembers the direction of the last motion.
It is the *truth* of the generator and of the closed-loop simulation, deliberately not the model's
own law (:mod:`ros_lnn.arm.presliding`: clipped stop operators on a fixed grid), so the tests do not
grade the model on its own assumption. Per joint::

    g(v) = f_c + (f_s − f_c) exp(−(v / v_s)²)           Stribeck curve, g(0) = f_s
    ż = v − σ0 |v| z / g(v)                              bristle deflection
    τ_f = σ0 z + σ1 ż + f_v v                            friction torque

Over a step on which ``v`` is constant, ``ż = v − a z`` with ``a = σ0 |v| / g(v)`` is solved exactly —
``z(h) = z_ss + (z − z_ss) e^{−a h}``, ``z_ss = v / a`` — so a stiff bristle (σ0 of thousands of N·m/rad)
costs no stability at any step. At ``v = 0`` the deflection holds: that is the torque at rest.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass
class LuGre:
    """Per joint arrays (n,)."""

    stiffness: np.ndarray  # σ0, N·m/rad
    damping: np.ndarray  # σ1, N·m·s/rad (bristle damping)
    coulomb: np.ndarray  # f_c
    static: np.ndarray  # f_s ≥ f_c
    stribeck_velocity: np.ndarray  # v_s, rad/s
    viscous: np.ndarray  # f_v

    def __post_init__(self):
        for name in ("stiffness", "damping", "coulomb", "static", "stribeck_velocity", "viscous"):
            setattr(self, name, np.asarray(getattr(self, name), dtype=float).reshape(-1))

    @property
    def n(self) -> int:
        return len(self.coulomb)

    @classmethod
    def like_a_real_arm(cls, effort_limits, rng, scale: float = 1.0) -> LuGre:
        """Friction sized by each joint's effort limit: Coulomb 1–3 %, static 1.2–1.6 × Coulomb, a
        presliding displacement ``f_c / σ0`` of 0.2–1 mrad, Stribeck velocity 0.02–0.1 rad/s."""
        e = np.asarray(effort_limits, dtype=float)
        n = e.size
        coulomb = scale * e * rng.uniform(0.01, 0.03, n)
        return cls(
            stiffness=coulomb / rng.uniform(2e-4, 1e-3, n),
            damping=np.zeros(n),
            coulomb=coulomb,
            static=coulomb * rng.uniform(1.2, 1.6, n),
            stribeck_velocity=rng.uniform(0.02, 0.1, n),
            viscous=scale * e * rng.uniform(0.005, 0.02, n),
        )

    def stribeck(self, v) -> np.ndarray:
        return self.coulomb + (self.static - self.coulomb) * np.exp(-((v / self.stribeck_velocity) ** 2))

    def rate(self, v) -> np.ndarray:
        """``a(v) = σ0 |v| / g(v)`` (1/s)."""
        return self.stiffness * np.abs(v) / self.stribeck(v)

    def advance(self, z, v, h: float) -> np.ndarray:
        """The deflection after ``h`` s at the constant velocity ``v``."""
        v = np.asarray(v, dtype=float)
        a = self.rate(v)
        moving = a > 0
        z_ss = np.divide(v, a, out=np.zeros_like(v), where=moving)
        return np.where(moving, z_ss + (z - z_ss) * np.exp(-a * h), z)

    def torque(self, z, v) -> np.ndarray:
        v = np.asarray(v, dtype=float)
        zdot = v - self.rate(v) * z
        return self.stiffness * z + self.damping * zdot + self.viscous * v

    def held_torque_bound(self) -> np.ndarray:
        """The largest torque the bristles hold at rest (``σ0 |z|`` ≤ ``f_s``)."""
        return self.static.copy()

    def along(self, t, velocity, z0, step: float = 2.5e-4) -> tuple[np.ndarray, np.ndarray]:
        """The deflection and the friction torque at the stamps ``t`` (N,) of a motion whose velocity
        is ``velocity(t) → (N, n)``: integrated on a grid of ``step`` s (velocity constant at each
        interval's midpoint) and read at the stamps."""
        t = np.asarray(t, dtype=float)
        grid = np.arange(t[0], t[-1] + step, step)
        v_mid = velocity(grid[:-1] + 0.5 * step)
        z = np.empty((len(grid), self.n))
        z[0] = z0
        for k in range(len(grid) - 1):
            z[k + 1] = self.advance(z[k], v_mid[k], step)
        # between grid points the deflection moves at most σ-fast; linear reading is enough here
        at = np.column_stack([np.interp(t, grid, z[:, j]) for j in range(self.n)])
        return at, self.torque(at, velocity(t))

    def as_dict(self) -> dict:
        return {k: v.tolist() for k, v in self.__dict__.items()}
