"""Plain LNN (Cranmer et al.) and LNN-nh (nonholonomic-LNN paper, docs/papers.md; EQUATIONS.md §4).

A black-box network ``𝓛(q, q̇)`` (no mass-matrix structure). Accelerations come from its exact second
derivatives (double backward through the batch):

    W = ∂²𝓛/∂q̇²,   F = ∂𝓛/∂q − (∂²𝓛/∂q̇∂q) q̇ + Q
    LNN:     q̈ = W⁻¹ F
    LNN-nh:  q̈ = W⁻¹ (F + Aᵀλ),  λ = −(A W⁻¹ Aᵀ)⁻¹ (A W⁻¹ F + b)   (known A(q) q̇ = 0, b = Ȧ q̇)

Training differentiates with autograd inside the forward pass; the ONNX export
(:mod:`ros_lnn.models.family_export`) carries the same exact derivatives as second-order jets through
the layers instead. Training: :func:`ros_lnn.training.trainer.train_acceleration`; checkpoints:
:mod:`ros_lnn.training.checkpoint` (one format for every family).
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from .mlp import ScalarFieldNet

FAMILY_LNN, FAMILY_LNN_NH = "lnn", "lnn_nh"


def euler_lagrange_terms(lagrangian: Callable, q, qd):
    """``(W, F₀)`` with ``W = ∂²𝓛/∂q̇²`` (B, n, n) and ``F₀ = ∂𝓛/∂q − (∂²𝓛/∂q̇∂q) q̇`` (B, n) for a
    batched ``lagrangian(q, q̇) -> (B,)`` whose samples are independent (so the gradient of the batch
    sum is the per-sample gradient). Exact second derivatives by double backward: 2 + n passes, far
    cheaper on a CPU than ``torch.func`` transforms for these small n. The graph is kept (for a loss
    to backpropagate through) whenever grad mode is on."""
    keep = torch.is_grad_enabled()
    with torch.enable_grad():
        q_ = q if q.requires_grad else q.detach().requires_grad_(True)
        qd_ = qd if qd.requires_grad else qd.detach().requires_grad_(True)
        L = lagrangian(q_, qd_).sum()
        dL_dq, p = torch.autograd.grad(L, (q_, qd_), create_graph=True, allow_unused=True)
        dL_dq = torch.zeros_like(q_) if dL_dq is None else dL_dq
        W_rows, mixed_rows = [], []
        for i in range(q.shape[-1]):
            d_q, d_qd = torch.autograd.grad(
                p[..., i].sum(), (q_, qd_), create_graph=keep, retain_graph=True, allow_unused=True
            )
            mixed_rows.append(torch.zeros_like(q_) if d_q is None else d_q)
            W_rows.append(torch.zeros_like(qd_) if d_qd is None else d_qd)
        W = torch.stack(W_rows, -2)
        mixed = torch.stack(mixed_rows, -2)  # [i, j] = ∂²𝓛/∂q̇_i ∂q_j
        F = dL_dq - (mixed @ qd_.unsqueeze(-1)).squeeze(-1)
    if not keep:
        W, F = W.detach(), F.detach()
    return W, F


def solve(A, b):
    """``A⁻¹ b`` without raising on a singular sample (a learned ``W`` can be singular somewhere along a
    rollout): that sample comes out non-finite and the others are unaffected."""
    return torch.linalg.solve_ex(A, b)[0]


def constrained_acceleration(W, F, A, b, solve=solve):
    """The Lagrange–d'Alembert formula (torch): ``(q̈, λ)``. ``solve(A, B)`` takes matrix right-hand
    sides (the ONNX export passes its own elimination)."""
    WinvF = solve(W, F.unsqueeze(-1))
    WinvAt = solve(W, A.transpose(-1, -2))
    S = A @ WinvAt
    lam = -solve(S, A @ WinvF + b.unsqueeze(-1))
    return (WinvF + WinvAt @ lam).squeeze(-1), lam.squeeze(-1)


class LNN(ScalarFieldNet):
    """``𝓛_θ(q, q̇)``: MLP of ``[φ(q), q̇]`` (``φ``: sin/cos for ``angle_coordinates``) to one scalar."""

    family = FAMILY_LNN

    def lagrangian(self, q, qd):
        """``𝓛`` (...) at any batch shape."""
        return self.scalar(q, qd)

    def energy(self, q, qd):
        """``E = q̇ · ∂𝓛/∂q̇ − 𝓛`` (B,)."""
        with torch.enable_grad():
            qd_ = qd.detach().requires_grad_(True)
            L = self.lagrangian(q, qd_)
            p = torch.autograd.grad(L.sum(), qd_)[0]
        return (p * qd).sum(-1) - L.detach()

    def terms(self, q, qd):
        return euler_lagrange_terms(self.lagrangian, q, qd)

    def forward(self, q, qd, Q=None):
        """``q̈`` (B, n) under generalised forces ``Q`` (zero when omitted)."""
        W, F = self.terms(q, qd)
        if Q is not None:
            F = F + Q
        return solve(W, F)


class LNNnh(LNN):
    """LNN with known linear constraints ``A(q) q̇ = 0``: ``constraint_matrix(q, xp)`` (B, m, n) and
    ``constraint_drift(q, q̇, xp)`` (B, m), called with ``xp=torch`` (the functions of
    :mod:`ros_lnn.physics.nonholonomic` have this signature)."""

    family = FAMILY_LNN_NH

    def __init__(
        self, n: int, constraint_matrix: Callable, constraint_drift: Callable, system: str = "", **kw
    ):
        super().__init__(n, **kw)
        self.constraint_matrix, self.constraint_drift, self.system = (
            constraint_matrix,
            constraint_drift,
            system,
        )

    def config(self) -> dict:
        return super().config() | {"system": self.system}

    def forward(self, q, qd, Q=None):
        W, F = self.terms(q, qd)
        if Q is not None:
            F = F + Q
        qdd, _ = constrained_acceleration(
            W, F, self.constraint_matrix(q, xp=torch), self.constraint_drift(q, qd, xp=torch)
        )
        return qdd


def for_system(system, constrained: bool, **kw) -> LNN:
    """An LNN (or LNN-nh with the system's constraints) for a :class:`NonholonomicSystem`."""
    names = list(system.coordinate_names)
    kw.setdefault("angle_coordinates", tuple(getattr(system, "angle_coordinates", ())))
    if constrained:
        return LNNnh(
            system.n,
            system.constraint_matrix,
            system.constraint_drift,
            system=system.name,
            coordinate_names=names,
            **kw,
        )
    return LNN(system.n, coordinate_names=names, **kw)


__all__ = [
    "LNN",
    "LNNnh",
    "euler_lagrange_terms",
    "constrained_acceleration",
    "for_system",
    "FAMILY_LNN",
    "FAMILY_LNN_NH",
]
