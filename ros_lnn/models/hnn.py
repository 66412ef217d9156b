"""Hamiltonian neural network (Greydanus, Dzamba, Yosinski, NeurIPS 2019), the HNN of the TLNN paper's
comparison set (docs/papers.md): one MLP ``H_θ(q, p)`` and Hamilton's equations

    q̇ = ∂H/∂p,    ṗ = −∂H/∂q + Q.

The data of this package are ``(q, q̇, q̈)``; their canonical momenta ``p = ∂𝓛/∂q̇`` are unknown to a
learner. As in the HNN baseline of the LNN paper (Cranmer et al.) and, as far as it says, of the
TLNN paper, the observed pair ``(q, q̇)`` is taken as the network's canonical pair, ``p ≡ q̇``: the model
fits both halves of the vector field, ``∂H/∂p`` to ``q̇`` and ``−∂H/∂q + Q`` to ``q̈``
(:data:`~ros_lnn.models.losses.HAMILTONIAN_LOSSES`). Its flow conserves ``H`` exactly (``Q = 0``) but
is area-preserving in ``(q, q̇)``, which the true flow of a system with a configuration-dependent mass
matrix is not; that is the baseline's known limit, and what the study measures.

Angles enter as ``[sin q, cos q]``; ``p`` is scaled by ``qd_scale`` (the spread of the training ``q̇``),
like the other acceleration families' ``q̇``. ``forward(q, q̇, Q) = ṗ`` is the acceleration-family
interface (evaluation, metrics, ONNX ``qdd``); rollouts integrate :meth:`HNN.vector_field`.

ONNX: the gradient of ``H`` is carried through the layers as a first-order jet (the second-order jets of
the Lagrangian families are not needed); outputs ``qdd = −∂H/∂q`` and ``qd_h = ∂H/∂p``.
"""

from __future__ import annotations

import torch
from torch import nn

from .mlp import ScalarFieldNet

FAMILY = "hnn"
GRAPH_OUTPUTS = ("qdd", "qd_h")


class HNN(ScalarFieldNet):
    """``H_θ(q, p)``: MLP of ``[φ(q), p]`` to one scalar."""

    family = FAMILY

    def hamiltonian(self, q, p):
        """``H`` (...) at any batch shape."""
        return self.scalar(q, p)

    def gradients(self, q, p):
        """``(∂H/∂q, ∂H/∂p)`` each (B, n); the graph is kept when grad mode is on (training)."""
        keep = torch.is_grad_enabled()
        with torch.enable_grad():
            q_ = q if q.requires_grad else q.detach().requires_grad_(True)
            p_ = p if p.requires_grad else p.detach().requires_grad_(True)
            dq, dp = torch.autograd.grad(self.hamiltonian(q_, p_).sum(), (q_, p_), create_graph=keep)
        return (dq, dp) if keep else (dq.detach(), dp.detach())

    def vector_field(self, q, p, Q=None):
        """Hamilton's equations: ``(q̇, ṗ) = (∂H/∂p, −∂H/∂q + Q)``."""
        dq, dp = self.gradients(q, p)
        return dp, (-dq if Q is None else Q - dq)

    def forward(self, q, qd, Q=None):
        """``ṗ`` at ``p = q̇``: the model's ``q̈`` (the acceleration families' interface)."""
        return self.vector_field(q, qd, Q)[1]


def gradient_jet(net: nn.Sequential, x, J):
    """``(y, ∂y/∂z)`` through a Sequential of Linear layers and smooth activations (first order only)."""
    for layer in net:
        if isinstance(layer, nn.Linear):
            x, J = layer(x), layer.weight @ J
        elif isinstance(layer, nn.Softplus):
            J = torch.sigmoid(x).unsqueeze(-1) * J
            x = nn.functional.softplus(x)
        elif isinstance(layer, nn.Tanh):
            x = torch.tanh(x)
            J = (1 - x * x).unsqueeze(-1) * J
        else:
            raise NotImplementedError(f"no jet for {type(layer).__name__}")
    return x, J


class HamiltonianGraph(nn.Module):
    """``(q, q̇) → (ṗ, ∂H/∂p)`` of an :class:`HNN` without autograd in the forward (exportable)."""

    def __init__(self, model: HNN):
        super().__init__()
        self.model = model

    def forward(self, q, qd):
        from .family_export import feature_jet

        m, n = self.model, self.model.n
        z = torch.cat([q, qd], -1)
        a = m.angle_coordinates
        lin = [i for i in range(n) if i not in a]
        coords = lin + a + a + [n + i for i in range(n)]
        kinds = [0] * len(lin) + [1] * len(a) + [2] * len(a) + [0] * n
        scale = torch.cat([z.new_ones(len(lin) + 2 * len(a)), 1.0 / m.qd_scale])
        x, J, _ = feature_jet(z, coords, kinds, scale)
        _, J = gradient_jet(m.net, x, J)
        grad = J[..., 0, :]
        return -grad[..., :n], grad[..., n:]


def export_hnn_onnx(model: HNN, path, metadata, dtype: str = "float32"):
    """Write an HNN as ONNX (inputs ``q, qd``; outputs ``qdd``, ``qd_h``) with its metadata, atomically."""
    from .export import export_graph, frozen_copy, stamped
    from .family_export import OPSET

    net = frozen_copy(model, dtype)
    metadata = stamped(metadata, dtype)
    return export_graph(
        HamiltonianGraph(net), net.n, dtype, ("q", "qd"), GRAPH_OUTPUTS, OPSET, metadata, path
    )


__all__ = ["HNN", "FAMILY", "GRAPH_OUTPUTS", "HamiltonianGraph", "gradient_jet", "export_hnn_onnx"]
