"""TLNN (TLNN paper, docs/papers.md; EQUATIONS.md §3): ``𝓛 = Σ_i (T_i − V_i)``, one kinetic and one
potential head per rigid body. Body i's heads see only the coordinates its topology vector ``B_i ∈ {0,1}ⁿ``
selects (``B_i ⊙ q``, ``B_i ⊙ q̇``); angles enter through a sin/cos layer. General form: ``T_i`` is an MLP
of ``[sin, cos](B_i ⊙ q)`` and ``B_i ⊙ q̇`` (no quadratic structure imposed), so accelerations use the exact
second derivatives (double backward):

    q̈ = (Σ_i ∂²T_i/∂q̇²)⁻¹ [Q + Σ_i ∂(T_i − V_i)/∂q − Σ_i (∂²T_i/∂q̇∂q) q̇]

which is :func:`ros_lnn.models.lnn.euler_lagrange_terms` applied to the summed Lagrangian (``V_i`` has
no q̇, so its Hessian terms vanish).

Initialisation (the model class and training are unchanged, only the start):

* the kinetic heads start *input-convex* (:func:`convex_initialisation`: the weights after the first
  layer made non-negative, so each softplus ``T_i`` is convex in its inputs and ``Σ ∂²T_i/∂q̇²``
  starts positive definite). From PyTorch's default start that sum is indefinite on every sample,
  and stays so after training (q̈ = W⁻¹F then has poles wherever an eigenvalue of W crosses zero);
* their output layer is scaled by ``KINETIC_INIT_SCALE`` (10): the default start gives kinetic
  curvatures ~10⁻² against potential gradients ~10⁻¹, while physically (``T ≈ ½ M q̇²`` in velocities
  scaled by their spread) the curvature is the larger. With the small start, Adam's steps (≈ lr per
  weight, whatever the gradient scale) flip eigenvalues of W and training ends with an indefinite W
  on every test sample (2-link rod chain, 2 000 steps: test q̈ MSE 98 with the convex start alone,
  25 with the scale; the LNN, one network for T − V, cannot separate the two scales).

Evaluation is one small MLP per head in a loop. Evaluating all 2·bodies heads as one batched matmul
per layer was measured slower on this 2-core CPU at the sizes used (0.7× at batch 256, width 64,
3 bodies; 0.9–1.2× at width 32): the elementwise work of the double backward dominates, not kernel
launches.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import cast

import torch
from torch import nn

from .lnn import euler_lagrange_terms, solve
from .mlp import mlp, network_config

FAMILY = "tlnn"
KINETIC_INIT_SCALE = 10.0


def serial_chain_topology(n_bodies: int) -> list[list[int]]:
    """Body i of a serial chain depends on coordinates 1..i (absolute or relative angles alike)."""
    return [[1] * (i + 1) + [0] * (n_bodies - i - 1) for i in range(n_bodies)]


def convex_initialisation(net: nn.Sequential) -> nn.Sequential:
    """Make a softplus ``net`` input-convex at initialisation: |weights| of every Linear layer after
    the first (an affine map, then softplus — convex, non-decreasing — then non-negative combinations
    stay convex). Only a starting point: training may leave the convex set."""
    with torch.no_grad():
        for layer in [m for m in net if isinstance(m, nn.Linear)][1:]:
            layer.weight.abs_()
    return net


class TLNN(nn.Module):
    family = FAMILY

    def __init__(
        self,
        topology: Sequence[Sequence[int]],
        hidden: Sequence[int] = (64, 64),
        activation: str = "softplus",
        angle_coordinates: Sequence[int] | None = None,
    ):
        super().__init__()
        B = torch.as_tensor(topology, dtype=torch.float64)
        if B.dim() != 2 or not torch.all((B == 0) | (B == 1)):
            raise ValueError("topology must be a (bodies, n) 0/1 matrix")
        self.n_bodies, self.n = B.shape
        self.topology = [[int(v) for v in row] for row in topology]
        self.hidden_widths, self.activation = list(hidden), activation
        self.angle_coordinates = (
            list(range(self.n)) if angle_coordinates is None else sorted(angle_coordinates)
        )
        self.body_coords = [[j for j in range(self.n) if self.topology[i][j]] for i in range(self.n_bodies)]
        d_q = [sum(2 if j in self.angle_coordinates else 1 for j in c) for c in self.body_coords]
        heads = [mlp(d + len(c), hidden, activation) for d, c in zip(d_q, self.body_coords)]
        self.kinetic = nn.ModuleList(heads)
        with torch.no_grad():
            for head in heads:
                if activation == "softplus":
                    convex_initialisation(head)
                cast(nn.Linear, head[-1]).weight.mul_(KINETIC_INIT_SCALE)
        self.potential = nn.ModuleList(mlp(d, hidden, activation) for d in d_q)
        self.register_buffer("qd_scale", torch.ones(self.n))

    def config(self) -> dict:
        return network_config(self) | {"topology": self.topology}

    def _q_features(self, q, coords):
        parts = []
        for j in coords:
            if j in self.angle_coordinates:
                parts += [torch.sin(q[..., j : j + 1]), torch.cos(q[..., j : j + 1])]
            else:
                parts.append(q[..., j : j + 1])
        return torch.cat(parts, -1)

    def body_energies(self, q, qd):
        """``(T_i, V_i)`` each (..., bodies)."""
        T, V = [], []
        for coords, kin, pot in zip(self.body_coords, self.kinetic, self.potential):
            x = self._q_features(q, coords)
            v = (qd / self.qd_scale)[..., coords]
            T.append(kin(torch.cat([x, v], -1))[..., 0])
            V.append(pot(x)[..., 0])
        return torch.stack(T, -1), torch.stack(V, -1)

    def lagrangian(self, q, qd):
        T, V = self.body_energies(q, qd)
        return (T - V).sum(-1)

    def forward(self, q, qd, Q=None):
        W, F = euler_lagrange_terms(self.lagrangian, q, qd)
        if Q is not None:
            F = F + Q
        return solve(W, F)


__all__ = ["TLNN", "serial_chain_topology", "convex_initialisation", "FAMILY"]
