"""Constraint-consistent mobility of the multibody model and its time derivative.

``𝓐 = 𝓜⁻¹ − 𝓜⁻¹Jᵀ S⁻¹ J 𝓜⁻¹`` (``S = J𝓜⁻¹Jᵀ``) is the top-left block of the KKT inverse (eq 35): it
maps a generalised force to the velocity the constrained system can take, and ``P = 𝓐 𝓜`` is the
mass-weighted projector onto ``null(J)``. Reference velocities built through ``P`` or ``𝓐`` satisfy
``J ν_r = 0`` identically, which the Lyapunov argument of eqs 40–41 needs (``sᵀ Jᵀ F_J = 0``).

Derivatives are analytic along the current twist: ``Ṁ = blockdiag(0, Ω I − I Ω)`` (eq 76), the same
for ``𝓜⁻¹``, and ``J̇`` from :func:`ros_lnn.physics.multibody.constraint_jacobian_rate`, so that
``ν̇_r`` is the exact time derivative of ``ν_r(x, t)`` the feed-forward needs.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..physics.multibody import constraint_jacobian_rate
from ..physics.multibody_quaternion import skew


def block_diag_blocks(model, blocks_lin: np.ndarray, blocks_ang: np.ndarray) -> np.ndarray:
    """Dense 6N×6N from per-body 3×3 blocks (linear part, angular part)."""
    n = model.n_bodies
    out = np.zeros((2 * n, 3, 2 * n, 3))
    idx = np.arange(n)
    out[idx, :, idx, :] = blocks_lin
    out[n + idx, :, n + idx, :] = blocks_ang
    return out.reshape(6 * n, 6 * n)


@dataclass
class Mobility:
    A0: np.ndarray  # 𝓜⁻¹
    A0_dot: np.ndarray
    A: np.ndarray  # constrained mobility 𝓐
    A_dot: np.ndarray
    P: np.ndarray  # 𝓐 𝓜, projector onto null(J)
    P_dot: np.ndarray


def mobility(model, data, with_rate: bool = True, want: str = "both") -> Mobility:
    """``want``: "A" (law III needs only 𝓐, 𝓐̇), "P" (laws I/II need only P, Ṗ) or "both"."""
    n = model.n_bodies
    lin = np.eye(3)[None] / model.masses[:, None, None]
    A0 = block_diag_blocks(model, lin, data.inertia_inv)
    Om = skew(data.omega)
    Iinv = data.inertia_inv
    A0_dot = block_diag_blocks(model, np.zeros((n, 3, 3)), Om @ Iinv - Iinv @ Om) if with_rate else None
    J = data.J
    if J.shape[0] == 0:
        I6 = np.eye(6 * n)
        return Mobility(A0, A0_dot, A0, A0_dot, I6, np.zeros_like(I6) if with_rate else None)
    B = A0 @ J.T
    S = J @ B
    X = np.linalg.solve(S, np.concatenate([J, B.T], axis=1))  # [S⁻¹J, S⁻¹Bᵀ]
    SiJ, SiBt = X[:, :6 * n], X[:, 6 * n:]
    P = A = P_dot = A_dot = None
    if want in ("P", "both"):
        P = np.eye(6 * n) - B @ SiJ
    if want in ("A", "both"):
        A = A0 - B @ SiBt
        A = 0.5 * (A + A.T)
    if not with_rate:
        return Mobility(A0, None, A, None, P, None)
    Jd = constraint_jacobian_rate(model, data)
    Bd = A0_dot @ J.T + A0 @ Jd.T
    Sd = Jd @ B + J @ Bd
    if want in ("P", "both"):
        SiJ_dot = np.linalg.solve(S, Jd - Sd @ SiJ)
        P_dot = -(Bd @ SiJ + B @ SiJ_dot)
    if want in ("A", "both"):
        BdX = Bd @ SiBt
        A_dot = A0_dot - BdX - BdX.T + SiBt.T @ Sd @ SiBt
    return Mobility(A0, A0_dot, A, A_dot, P, P_dot)
