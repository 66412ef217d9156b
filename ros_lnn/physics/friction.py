"""Joint friction (viscous + smooth Coulomb) and a Lagrangian system with friction at its joints.

Friction on a coordinate with rate ``q̇``:

    F(q̇) = −b q̇ − τ_c tanh(q̇ / ε)          (dissipated power −q̇ F ≥ 0)

``b`` viscous (N·m·s/rad or N·s/m), ``τ_c`` Coulomb level (N·m or N), ``ε`` the velocity scale of the
smooth sign. On a free coordinate ``F`` is the applied ``Q_f`` of EQUATIONS.md §1 (it changes the
motion); on a servo-driven coordinate the servo overcomes it, so it only changes what the servo
delivers (``Q_e``, unmeasured on a robot without force sensors).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .crane import Crane
from .systems import LagrangianSystem


@dataclass(frozen=True)
class JointFriction:
    """Viscous ``b`` plus smooth Coulomb ``τ_c tanh(q̇/ε)`` friction of one joint."""

    viscous: float = 0.0
    coulomb: float = 0.0
    smoothing: float = 0.05

    def __post_init__(self):
        if self.viscous < 0 or self.coulomb < 0 or self.smoothing <= 0:
            raise ValueError(f"friction needs viscous >= 0, coulomb >= 0, smoothing > 0; got {self}")

    def force(self, qd):
        """Friction force (or torque) on the joint, opposing ``q̇``."""
        qd = np.asarray(qd, dtype=float)
        return -(self.viscous * qd + self.coulomb * np.tanh(qd / self.smoothing))

    def dissipated_power(self, qd):
        """``−q̇ F(q̇) ≥ 0``."""
        return -np.asarray(qd, dtype=float) * self.force(qd)

    @property
    def is_frictionless(self) -> bool:
        return self.viscous == 0.0 and self.coulomb == 0.0


@dataclass(frozen=True)
class FrictionPlant:
    """A :class:`LagrangianSystem` with :class:`JointFriction` on each coordinate.

    ``friction`` maps coordinate names to their friction; coordinates not named are frictionless.
    """

    system: LagrangianSystem
    friction: dict = field(default_factory=dict)
    name: str = ""

    def __post_init__(self):
        unknown = sorted(set(self.friction) - set(self.system.coordinate_names))
        if unknown:
            raise ValueError(
                f"friction on unknown coordinate(s) {unknown}; the system has {self.system.coordinate_names}"
            )
        if not self.name:
            object.__setattr__(self, "name", getattr(self.system, "name", type(self.system).__name__.lower()))

    def joint_friction(self, coordinate: str) -> JointFriction:
        return self.friction.get(coordinate, JointFriction())

    def friction_forces(self, qd):
        """Friction on every coordinate, shape of ``qd`` (..., n)."""
        qd = np.asarray(qd, dtype=float)
        return np.stack(
            [self.joint_friction(c).force(qd[..., i]) for i, c in enumerate(self.system.coordinate_names)],
            axis=-1,
        )

    def free_force(self, t, q, qd):
        """Applied force on the free coordinates (``simulate``'s ``force=`` callback): their friction."""
        return self.friction_forces(qd)[..., list(self.system.partition.free)]

    def frictionless(self) -> FrictionPlant:
        return FrictionPlant(self.system, {}, self.name)


def friction_crane(
    m1: float = 0.45,
    m2: float = 0.13,
    L: float = 1.5,
    g: float = 9.8,
    *,
    pivot: JointFriction | None = None,
    cart: JointFriction | None = None,
) -> FrictionPlant:
    """The ServoLNN paper's crane with friction at the pendulum pivot and on the cart's rail.

    Defaults: pivot b = 0.02 N·m·s/rad (free swing decays with time constant 2 m2 L² / b ≈ 29 s),
    τ_c = 2·10⁻³ N·m (0.3 % of the gravity torque at 0.3 rad), ε = 0.01 rad/s; cart b = 2 N·s/m,
    1.5 N Coulomb (a carriage on a rail; it only changes the servo force Q_e).
    """
    pivot = JointFriction(0.02, 2e-3, 0.01) if pivot is None else pivot
    cart = JointFriction(2.0, 1.5, 0.01) if cart is None else cart
    return FrictionPlant(Crane(m1, m2, L, g), {"pendulum_joint": pivot, "cart_joint": cart}, "friction_crane")


__all__ = ["JointFriction", "FrictionPlant", "friction_crane"]
