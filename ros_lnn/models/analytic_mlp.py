"""An MLP of ``q`` that returns its outputs together with their derivatives ``∂/∂q``, carried layer by
layer beside the values (EQUATIONS.md §2, as DeLaN does): no ``torch.autograd.grad`` in the forward
pass, so one graph serves training, batched evaluation and ONNX export.

Jacobians are kept with the coordinate axis first: ``J[..., k, o] = ∂y_o/∂q_k``, the layout of
``∂M/∂q`` ([k, i, j]) in the Lagrangian machinery, so no transposes are needed downstream.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Sequence
from typing import cast

import torch
from torch import nn


def softplus(a):
    """``log(1 + eᵃ)``; in float64 written out, because ONNX Runtime has no double Softplus kernel."""
    if a.dtype == torch.float64:
        return torch.relu(a) + torch.log1p(torch.exp(-torch.abs(a)))
    return nn.functional.softplus(a)


# activation name -> (g, g')
ACTIVATIONS = {
    "softplus": (softplus, torch.sigmoid),
    "tanh": (torch.tanh, lambda a: 1.0 - torch.tanh(a) ** 2),
    "sin": (torch.sin, torch.cos),
    "relu": (torch.relu, lambda a: (a > 0).to(a.dtype)),
    "sigmoid": (torch.sigmoid, lambda a: torch.sigmoid(a) * (1.0 - torch.sigmoid(a))),
    "elu": (
        nn.functional.elu,
        lambda a: torch.where(a > 0, torch.ones_like(a), torch.exp(torch.clamp(a, max=0.0))),
    ),
}


def activation(name: str):
    try:
        return ACTIVATIONS[name]
    except KeyError:
        raise ValueError(f"unknown activation '{name}'; choose one of {sorted(ACTIVATIONS)}") from None


class InputMap(nn.Module):
    """``x = φ(q)``: coordinates listed in ``angles`` enter as ``[sin q_i, cos q_i]``, those in
    ``cyclic`` not at all (the Lagrangian does not depend on them), the others as
    ``(q_i − offset_i) / scale_i`` (normalisation set from the training data)."""

    offset: torch.Tensor  # buffers
    scale: torch.Tensor
    eye: torch.Tensor

    def __init__(self, n: int, angles: Sequence[int] = (), cyclic: Sequence[int] = ()):
        super().__init__()
        self.n = n
        self.angles = tuple(sorted(int(i) for i in angles))
        self.cyclic = tuple(sorted(int(i) for i in cyclic))
        if set(self.angles) & set(self.cyclic):
            both = sorted(set(self.angles) & set(self.cyclic))
            raise ValueError(f"coordinates {both} are both angles and cyclic")
        self.linear = tuple(i for i in range(n) if i not in self.angles and i not in self.cyclic)
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
            return z[..., list(self.linear)] if self.cyclic else z
        qa = q[..., list(self.angles)]
        return torch.cat([z[..., list(self.linear)], torch.sin(qa), torch.cos(qa)], dim=-1)

    def jacobian(self, q):
        """``J[..., k, d] = ∂x_d/∂q_k``: shape (..., n, d); ``None`` when φ is affine (no angles)."""
        if not self.angles:
            return None
        lin, ang = list(self.linear), list(self.angles)
        qa = q[..., ang]
        E = self.eye[:, ang]  # (n, n_a)
        J_lin = (self.eye / self.scale[:, None])[:, lin].expand(q.shape[:-1] + (self.n, len(lin)))
        return torch.cat([J_lin, torch.cos(qa)[..., None, :] * E, -torch.sin(qa)[..., None, :] * E], dim=-1)


class TrunkState:
    """Last hidden layer ``h = g(a)`` with what its Jacobian needs: ``s = g'(a)`` and ``dA = ∂a/∂q``,
    left unmultiplied so a head can contract them in one step. ``dA`` is (n, H) when it does not depend
    on ``q`` (one hidden layer on an affine input map), else (..., n, H)."""

    __slots__ = ("h", "s", "dA")

    def __init__(self, h, s, dA):
        self.h, self.s, self.dA = h, s, dA


class AnalyticMLP(nn.Module):
    """``y = W_out h_L + b_out``, ``h_l = g(W_l h_{l−1} + b_l)``, ``h_0 = φ(q)``. ``forward`` returns
    ``(y, ∂y/∂q)`` with shapes (..., m) and (..., n, m)."""

    def __init__(
        self,
        n: int,
        out_features: int,
        hidden: Sequence[int] = (64,),
        act: str = "softplus",
        angles: Sequence[int] = (),
        cyclic: Sequence[int] = (),
    ):
        super().__init__()
        if not hidden:
            raise ValueError("AnalyticMLP needs at least one hidden layer")
        self.n, self.act_name = n, act
        self.g, self.dg = activation(act)
        self.input_map = InputMap(n, angles, cyclic)
        widths = [self.input_map.out_features, *hidden]
        self.hidden = nn.ModuleList(nn.Linear(a, b) for a, b in itertools.pairwise(widths))
        self.out = nn.Linear(widths[-1], out_features)

    def _first_layer(self):
        """First layer with the affine part of the input map folded in: weight (H, d), bias (H,)."""
        layer, im = self.hidden[0], self.input_map
        if im.angles:
            W = layer.weight
            return W, layer.bias, None
        if im.cyclic:  # cyclic coordinates: zero columns (no input, no derivative)
            lin = list(im.linear)
            W = (layer.weight / im.scale[lin]) @ im.eye[lin]
            return W, layer.bias - W @ im.offset, W.transpose(0, 1)
        W = layer.weight / im.scale
        return W, layer.bias - W @ im.offset, W.transpose(0, 1)

    def trunk(self, q) -> TrunkState:
        W, b, dA = self._first_layer()
        if dA is None:
            x, J = self.input_map.features(q), self.input_map.jacobian(q)
            a = x @ W.transpose(0, 1) + b
            dA = J @ W.transpose(0, 1)
        else:
            a = q @ W.transpose(0, 1) + b
        for layer in cast("Iterable[nn.Linear]", self.hidden[1:]):
            h, J = self.g(a), self.dg(a).unsqueeze(-2) * dA
            a, dA = layer(h), J @ layer.weight.transpose(0, 1)
        return TrunkState(self.g(a), self.dg(a), dA)

    @staticmethod
    def head(state: TrunkState, W, b):
        """A linear head on the trunk: ``y = h Wᵀ + b`` and ``∂y/∂q``. ``W`` (m, H) gives (..., m) and
        (..., n, m); a vector ``W`` (H,) gives (...) and (..., n)."""
        vector = W.dim() == 1
        Wt = W[:, None] if vector else W.transpose(0, 1)  # (H, m)
        y = state.h @ Wt + b
        if state.dA.dim() == 2:
            # ∂y_o/∂q_k = Σ_h s_h dA_kh W_oh: one matmul against a weight-only (H, n·m) matrix.
            n, m = state.dA.shape[0], Wt.shape[1]
            G = (state.dA.transpose(0, 1)[:, :, None] * Wt[:, None, :]).reshape(Wt.shape[0], n * m)
            dy = (state.s @ G).unflatten(-1, (n, m))
        else:
            dy = (state.s.unsqueeze(-2) * state.dA) @ Wt
        return (y[..., 0], dy[..., 0]) if vector else (y, dy)

    def forward(self, q):
        return self.head(self.trunk(q), self.out.weight, self.out.bias)

    def values(self, q):
        """Outputs only (no derivatives): the plain network, for the autograd reference."""
        h = self.input_map.features(q)
        for layer in self.hidden:
            h = self.g(layer(h))
        return self.out(h)
