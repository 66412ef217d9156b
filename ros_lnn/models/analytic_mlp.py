"""An MLP of ``q`` that returns its outputs together with their Jacobian ``∂/∂q``, carried layer by
layer beside the values (EQUATIONS.md §2, as DeLaN does): no ``torch.autograd.grad`` in the forward
pass, so one graph serves training, batched evaluation and ONNX export.
"""
from __future__ import annotations

from typing import Sequence

import torch
from torch import nn

# activation name -> (g, g')
ACTIVATIONS = {
    "softplus": (nn.functional.softplus, torch.sigmoid),
    "tanh": (torch.tanh, lambda a: 1.0 - torch.tanh(a) ** 2),
    "sin": (torch.sin, torch.cos),
    "relu": (torch.relu, lambda a: (a > 0).to(a.dtype)),
    "sigmoid": (torch.sigmoid, lambda a: torch.sigmoid(a) * (1.0 - torch.sigmoid(a))),
    "elu": (nn.functional.elu, lambda a: torch.where(a > 0, torch.ones_like(a), torch.exp(torch.clamp(a, max=0.0)))),
}


def activation(name: str):
    try:
        return ACTIVATIONS[name]
    except KeyError:
        raise ValueError(f"unknown activation '{name}'; choose one of {sorted(ACTIVATIONS)}") from None


class InputMap(nn.Module):
    """``x = φ((q − offset) / scale)``: coordinates listed in ``angles`` enter as ``[sin q_i, cos q_i]``
    (unscaled), the others as ``(q_i − offset_i) / scale_i``. Returns ``x`` and ``∂x/∂q``."""

    def __init__(self, n: int, angles: Sequence[int] = ()):
        super().__init__()
        self.n = n
        self.angles = tuple(sorted(int(i) for i in angles))
        self.linear = tuple(i for i in range(n) if i not in self.angles)
        self.register_buffer("offset", torch.zeros(n))
        self.register_buffer("scale", torch.ones(n))
        self.register_buffer("eye", torch.eye(n))

    @property
    def out_features(self) -> int:
        return len(self.linear) + 2 * len(self.angles)

    def set_normalisation(self, offset, scale) -> None:
        self.offset.copy_(torch.as_tensor(offset, dtype=self.offset.dtype))
        self.scale.copy_(torch.as_tensor(scale, dtype=self.scale.dtype))

    def features(self, q):
        z = (q - self.offset) / self.scale
        if not self.angles:
            return z
        qa = q[..., list(self.angles)]
        return torch.cat([z[..., list(self.linear)], torch.sin(qa), torch.cos(qa)], dim=-1)

    def forward(self, q):
        """``x`` (..., d) and its Jacobian: a constant (d, n) without angles, else (..., d, n)."""
        z = (q - self.offset) / self.scale
        if not self.angles:
            return z, self.eye / self.scale
        lin, ang = list(self.linear), list(self.angles)
        qa = q[..., ang]
        s, c = torch.sin(qa), torch.cos(qa)
        x = torch.cat([z[..., lin], s, c], dim=-1)
        # Jacobian rows: linear coords (constant 1/scale), sin rows (cos q), cos rows (−sin q).
        eye = self.eye
        J_lin = (eye / self.scale)[lin].expand(q.shape[:-1] + (len(lin), self.n))
        E = eye[ang]  # (n_a, n)
        J_sin = c[..., :, None] * E
        J_cos = -s[..., :, None] * E
        return x, torch.cat([J_lin, J_sin, J_cos], dim=-2)


class AnalyticMLP(nn.Module):
    """``y = W_out h_L + b_out``, ``h_l = g(W_l h_{l−1} + b_l)``, ``h_0 = φ(q)``; forward returns
    ``(y, ∂y/∂q)`` with shapes (..., m) and (..., m, n)."""

    def __init__(self, n: int, out_features: int, hidden: Sequence[int] = (64,), act: str = "softplus",
                 angles: Sequence[int] = ()):
        super().__init__()
        self.n, self.act_name = n, act
        self.g, self.dg = activation(act)
        self.input_map = InputMap(n, angles)
        widths = [self.input_map.out_features, *hidden]
        self.hidden = nn.ModuleList(nn.Linear(a, b) for a, b in zip(widths[:-1], widths[1:]))
        self.out = nn.Linear(widths[-1], out_features)

    def forward(self, q):
        h, J = self.input_map(q)
        for layer in self.hidden:
            a = layer(h)
            # ∂a/∂q = W ∂h/∂q; the first layer's input Jacobian may be a constant matrix.
            dA = layer.weight @ J
            h = self.g(a)
            J = self.dg(a)[..., :, None] * dA
        return self.out(h), self.out.weight @ J

    def values(self, q):
        """Outputs only (no derivatives): the plain network, for the autograd reference."""
        h = self.input_map.features(q)
        for layer in self.hidden:
            h = self.g(layer(h))
        return self.out(h)
