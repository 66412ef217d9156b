"""Nonholonomic reference systems and the Lagrange–d'Alembert equations (nonholonomic-LNN paper,
docs/papers.md; EQUATIONS.md §4).

Constraints linear in the velocities, ``Φ(q, q̇) = A(q) q̇ = 0`` (m rows). With ``W = ∂²𝓛/∂q̇²``,
``F = ∂𝓛/∂q − (∂²𝓛/∂q̇∂q) q̇ + Q`` and ``b = (∂Φ/∂q) q̇ = Ȧ q̇``:

    q̈ = W⁻¹ (F + Aᵀ λ),   λ = −(A W⁻¹ Aᵀ)⁻¹ (A W⁻¹ F + b)

so that ``Φ̇ = A q̈ + b = 0``: the constraint is kept exactly by the flow; numerically it drifts only
by the integration error (measured by :func:`simulate`). The three examples of the paper have
``𝓛 = ½ q̇ᵀ M q̇`` with constant M and no potential, so ``F = Q`` and the energy ``T`` is conserved
(ideal constraint forces do no work: ``q̇ᵀ Aᵀ λ = 0``).
Parameters the paper leaves out are ours: unit masses; disk m = 1, I = 0.5, J = 0.25, R = 1.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from scipy.integrate import solve_ivp


def lagrange_dalembert(W, F, A, b):
    """``(q̈, λ)`` from the formula above; W (..., n, n), F (..., n), A (..., m, n), b (..., m)."""
    WinvF = np.linalg.solve(W, F[..., None])[..., 0]
    WinvAt = np.linalg.solve(W, np.swapaxes(A, -1, -2))  # (..., n, m)
    S = A @ WinvAt  # (..., m, m)
    lam = -np.linalg.solve(S, (np.einsum("...ij,...j->...i", A, WinvF) + b)[..., None])[..., 0]
    return WinvF + np.einsum("...ij,...j->...i", WinvAt, lam), lam


@dataclass(frozen=True)
class NonholonomicSystem:
    """``𝓛 = ½ q̇ᵀ M q̇ − V(q)`` (constant M) with linear constraints ``A(q) q̇ = 0``.

    ``constraint_matrix(q)`` → (..., m, n); ``constraint_drift(q, q̇)`` → (..., m) = ``(∂Φ/∂q) q̇``;
    ``sample_state(rng)`` → a random (q, q̇) on the constraint."""

    name: str
    coordinate_names: tuple[str, ...]
    mass: np.ndarray
    constraint_matrix: Callable
    constraint_drift: Callable
    sample_position: Callable
    potential_gradient: Callable | None = None
    angle_coordinates: tuple[int, ...] = ()  # periodic coordinates (a network sees them as sin/cos)

    @property
    def n(self) -> int:
        return len(self.coordinate_names)

    def constraint(self, q, qd):
        """``Φ(q, q̇) = A(q) q̇`` (..., m)."""
        q, qd = np.asarray(q, float), np.asarray(qd, float)
        return np.einsum("...ij,...j->...i", self.constraint_matrix(q), qd)

    def energy(self, q, qd):
        return 0.5 * np.einsum("...i,ij,...j->...", qd, self.mass, qd)

    def acceleration(self, q, qd, Q=None):
        """Lagrange–d'Alembert ``q̈`` and multipliers ``λ``."""
        q, qd = np.asarray(q, float), np.asarray(qd, float)
        F = np.zeros_like(q) if Q is None else np.asarray(Q, float) * np.ones_like(q)
        if self.potential_gradient is not None:
            F = F - self.potential_gradient(q)
        W = np.broadcast_to(self.mass, q.shape[:-1] + self.mass.shape)
        return lagrange_dalembert(W, F, self.constraint_matrix(q), self.constraint_drift(q, qd))

    def unconstrained_acceleration(self, q, qd):
        F = np.zeros_like(q) if self.potential_gradient is None else -self.potential_gradient(q)
        return np.linalg.solve(self.mass, F[..., None])[..., 0]

    def project_velocity(self, q, v):
        """The velocity on the constraint nearest to ``v`` in the kinetic-energy metric."""
        A = self.constraint_matrix(np.asarray(q, float))
        Minv_At = np.linalg.solve(self.mass, A.T)
        return v - Minv_At @ np.linalg.solve(A @ Minv_At, A @ v)

    def sample_state(self, rng, speed: float = 1.0):
        q = self.sample_position(rng)
        qd = self.project_velocity(q, speed * rng.normal(size=self.n))
        return q, qd


# Constraint functions take ``xp`` (numpy by default, torch for the LNN-nh model): the same code
# serves the reference systems and the network's known constraints.
def particle() -> NonholonomicSystem:
    """Nonholonomic particle, q = (x, y, z), unit mass, ``ż − y ẋ = 0``."""

    def A(q, xp=np):
        one, zero = xp.ones_like(q[..., 0]), xp.zeros_like(q[..., 0])
        return xp.stack([-q[..., 1], zero, one], -1)[..., None, :]

    def b(q, qd, xp=np):  # ∂Φ/∂y = −ẋ
        return (-qd[..., 0] * qd[..., 1])[..., None]

    return NonholonomicSystem(
        "particle", ("x", "y", "z"), np.eye(3), A, b, lambda rng: rng.uniform(-0.5, 0.5, 3)
    )


def drone(m_target: float = 1.0, m_drone: float = 1.0) -> NonholonomicSystem:
    """Target on the x-axis at ``x_t``, drone at (x, y) flying towards it: ``y ẋ + (x_t − x) ẏ = 0``."""

    def A(q, xp=np):
        zero = xp.zeros_like(q[..., 0])
        return xp.stack([zero, q[..., 2], q[..., 0] - q[..., 1]], -1)[..., None, :]

    def b(q, qd, xp=np):  # ∂Φ/∂x_t = ẏ, ∂Φ/∂x = −ẏ, ∂Φ/∂y = ẋ
        return (qd[..., 2] * qd[..., 0])[..., None]

    def position(rng):
        q = rng.uniform(-0.5, 0.5, 3)
        q[2] = np.sign(q[2] or 1.0) * (0.2 + abs(q[2]))  # keep the drone off the target's line
        return q

    return NonholonomicSystem(
        "drone", ("x_t", "x", "y"), np.diag([m_target, m_drone, m_drone]), A, b, position
    )


def rolling_disk(m: float = 1.0, inertia: float = 0.5, turning: float = 0.25, radius: float = 1.0):
    """Vertical rolling disk, q = (x, y, θ, φ): ``ẋ = R θ̇ cos φ``, ``ẏ = R θ̇ sin φ``."""
    R = radius

    def A(q, xp=np):
        one, zero = xp.ones_like(q[..., 0]), xp.zeros_like(q[..., 0])
        c, s = xp.cos(q[..., 3]), xp.sin(q[..., 3])
        return xp.stack(
            [xp.stack([one, zero, -R * c, zero], -1), xp.stack([zero, one, -R * s, zero], -1)], -2
        )

    def b(q, qd, xp=np):
        c, s = xp.cos(q[..., 3]), xp.sin(q[..., 3])
        w = R * qd[..., 2] * qd[..., 3]
        return xp.stack([w * s, -w * c], -1)

    def position(rng):
        return np.concatenate([rng.uniform(-0.5, 0.5, 2), rng.uniform(-np.pi, np.pi, 2)])

    return NonholonomicSystem(
        "rolling_disk",
        ("x", "y", "theta", "phi"),
        np.diag([m, m, inertia, turning]),
        A,
        b,
        position,
        angle_coordinates=(2, 3),
    )


SYSTEMS = {"particle": particle, "drone": drone, "rolling_disk": rolling_disk}


def simulate(
    system: NonholonomicSystem,
    q0,
    qd0,
    duration: float,
    n_samples: int = 151,
    *,
    acceleration=None,
    rtol=1e-10,
    atol=1e-10,
):
    """Integrate (Dormand–Prince, as the paper) with the exact law or a learned ``acceleration(q, q̇)``.

    Returns t, q, qd, qdd (exact Lagrange–d'Alembert at the sampled states), energy and constraint."""
    n = system.n
    acc = acceleration or (lambda q, qd: system.acceleration(q, qd)[0])

    def rhs(t, y):
        return np.concatenate([y[n:], acc(y[:n], y[n:])])

    t_eval = np.linspace(0.0, duration, n_samples)
    sol = solve_ivp(
        rhs, (0.0, duration), np.concatenate([q0, qd0]), method="RK45", t_eval=t_eval, rtol=rtol, atol=atol
    )
    Y = sol.y.T
    q, qd = Y[:, :n], Y[:, n:]
    return {
        "t": sol.t,
        "q": q,
        "qd": qd,
        "qdd": system.acceleration(q, qd)[0],
        "energy": system.energy(q, qd),
        "constraint": system.constraint(q, qd),
        "success": bool(sol.success),
    }


def make_dataset(
    system: NonholonomicSystem, n_trajectories: int, duration: float, n_samples: int, seed: int = 0
):
    """Trajectories from random constraint-compliant initial states; stacked samples plus the
    trajectory index of each (q, q̇, q̈ exact)."""
    rng = np.random.default_rng(seed)
    parts = []
    for k in range(n_trajectories):
        q0, qd0 = system.sample_state(rng)
        sim = simulate(system, q0, qd0, duration, n_samples, rtol=1e-9, atol=1e-9)
        parts.append((sim["q"], sim["qd"], sim["qdd"], np.full(len(sim["t"]), k)))
    q, qd, qdd, traj = (np.concatenate([p[i] for p in parts]) for i in range(4))
    return {"q": q, "qd": qd, "qdd": qdd, "trajectory": traj}


__all__ = [
    "lagrange_dalembert",
    "NonholonomicSystem",
    "particle",
    "drone",
    "rolling_disk",
    "SYSTEMS",
    "simulate",
    "make_dataset",
]
