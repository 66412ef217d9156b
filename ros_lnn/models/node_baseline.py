"""Black-box baseline of the TLNN study: a second-order neural ODE, ``q̈ = f_θ([sin q, cos q], q̇)``
(an MLP, no physics structure); with ``force_input`` the generalised forces are inputs too,
``q̈ = f_θ([sin q, cos q], q̇, Q)`` (the TLNN study's forced chains). Plain feed-forward graph: it
exports to ONNX with ``torch.onnx.export`` like any MLP (the ``q, qd → qdd`` graph: without
``force_input``), though the project ships no artefact for it."""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from .mlp import mlp, network_config

FAMILY = "node"


class NeuralODE(nn.Module):
    family = FAMILY

    def __init__(
        self,
        n: int,
        hidden: Sequence[int] = (64, 64),
        activation: str = "softplus",
        angle_coordinates: Sequence[int] | None = None,
        force_input: bool = False,
    ):
        super().__init__()
        self.n, self.hidden_widths, self.activation = n, list(hidden), activation
        self.force_input = bool(force_input)
        self.angle_coordinates = list(range(n)) if angle_coordinates is None else sorted(angle_coordinates)
        width = 2 * n + len(self.angle_coordinates) + (n if self.force_input else 0)
        self.net = mlp(width, hidden, activation, d_out=n)
        self.register_buffer("qd_scale", torch.ones(n))

    def config(self) -> dict:
        return network_config(self) | {"n": self.n} | ({"force_input": True} if self.force_input else {})

    def forward(self, q, qd, Q=None):
        a = self.angle_coordinates
        lin = [i for i in range(self.n) if i not in a]
        parts = [q[..., lin], torch.sin(q[..., a]), torch.cos(q[..., a]), qd / self.qd_scale]
        if self.force_input:
            parts.append(torch.zeros_like(qd) if Q is None else Q)
        return self.net(torch.cat(parts, -1))


__all__ = ["NeuralODE", "FAMILY"]
