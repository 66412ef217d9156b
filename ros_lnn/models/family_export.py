"""ONNX export of the acceleration families: LNN, LNN-nh, TLNN and the neural ODE.

Graph: inputs ``q``, ``qd`` (batch, n), output ``qdd`` (batch, n), float32 (or float64), dynamic
batch; the coordinates in the order of the metadata's ``free_joints`` (all coordinates are free:
``servo_joints`` is empty, no generalised force input). Metadata: :class:`ModelMetadata` JSON under
``metadata_props['ros_lnn']`` with ``family`` lnn / lnn_nh / tlnn / node. These graphs are not
ServoLNN graphs: run them with ONNX Runtime directly (``ros_lnn.inference.runtime`` serves ServoLNN).

Why not ``torch.func`` under ``torch.onnx.export(dynamo=True)``: in this torch, ``torch.export``
fails on every form of ``jacrev``/``jacfwd``/``hessian`` (with or without ``vmap``; strict: "Cannot
access data pointer of Tensor that doesn't have storage", non-strict: "'Tensor' object has no
attribute 'constant'") and on ``torch.autograd.grad`` inside the forward. So the Lagrangian families
export through second-order *jets*: each MLP layer carries its value, its gradient with respect to
``z = [q, q̇]`` and the rows ``∂²/∂q̇ ∂z`` of its Hessian (plain tensor algebra, like DeLaN's
first-order propagation), which give ``W = ∂²𝓛/∂q̇²``, ``∂²𝓛/∂q̇∂q`` and ``∂𝓛/∂q`` exactly. ONNX
has no linear solve; ``W⁻¹`` is Gauss–Jordan elimination with partial pivoting unrolled over n.
"""

from __future__ import annotations

from pathlib import Path
from typing import cast

import torch
from torch import nn

from .lnn import constrained_acceleration

OPSET = 18
DTYPES = {"float32": torch.float32, "float64": torch.float64}
EXPORTABLE = ("servo_lnn", "lnn", "lnn_nh", "tlnn", "node")
GRAPH_INPUTS, GRAPH_OUTPUTS = ("q", "qd"), ("qdd",)


# -- exact derivatives as tensor algebra ---------------------------------------------------------
def feature_jet(z, coords, kinds, scale):
    """Input features ``x_f = scale_f · g_f(z_{coords_f})``, ``g`` ∈ {identity (0), sin (1), cos (2)},
    with ``∂x/∂z`` (..., d, 2n) and the rows ``∂²x/∂q̇∂z`` (..., d, n, 2n) (zero: a feature depends on
    one coordinate, and the second derivatives of sin/cos only enter through angles q, never q̇)."""
    m = z.shape[-1]
    zs = z[..., coords]
    is_sin = torch.tensor([k == 1 for k in kinds], device=z.device)
    is_cos = torch.tensor([k == 2 for k in kinds], device=z.device)
    s, c = torch.sin(zs), torch.cos(zs)
    x = torch.where(is_sin, s, torch.where(is_cos, c, zs)) * scale
    d1 = torch.where(is_sin, c, torch.where(is_cos, -s, torch.ones_like(zs))) * scale
    select = z.new_zeros(len(coords), m)
    select[torch.arange(len(coords)), torch.as_tensor(coords)] = 1.0
    J = d1.unsqueeze(-1) * select
    H = z.new_zeros(z.shape[:-1] + (len(coords), m // 2, m))
    return x, J, H


def _activation_derivatives(layer: nn.Module, a):
    if isinstance(layer, nn.Softplus):
        s = torch.sigmoid(a)
        return nn.functional.softplus(a), s, s * (1 - s)
    if isinstance(layer, nn.Tanh):
        t = torch.tanh(a)
        d = 1 - t * t
        return t, d, -2 * t * d
    raise NotImplementedError(f"no second-order jet for activation {type(layer).__name__}")


def mlp_jet(net: nn.Sequential, x, J, H):
    """Push ``(x, ∂x/∂z, ∂²x/∂q̇∂z)`` through a Sequential of Linear layers and smooth activations."""
    n = H.shape[-2]
    for layer in net:
        if isinstance(layer, nn.Linear):
            x = layer(x)
            J = layer.weight @ J
            H = (layer.weight @ H.flatten(-2)).unflatten(-1, H.shape[-2:])
        else:
            x, d1, d2 = _activation_derivatives(layer, x)
            Jqd = J[..., -n:]  # ∂/∂q̇ columns (z = [q, q̇])
            H = d1[..., None, None] * H + d2[..., None, None] * Jqd.unsqueeze(-1) * J.unsqueeze(-2)
            J = d1.unsqueeze(-1) * J
    return x, J, H


def lagrangian_jet(model, q, qd):
    """``(∂𝓛/∂z, ∂²𝓛/∂q̇∂z)`` of an LNN/LNN-nh or a TLNN, z = [q, q̇]: (..., 2n), (..., n, 2n)."""
    z = torch.cat([q, qd], -1)
    n = model.n
    inv_scale = 1.0 / model.qd_scale
    if getattr(model, "family", "") == "tlnn":
        grad, hess = 0.0, 0.0
        for coords, kin, pot in zip(model.body_coords, model.kinetic, model.potential):
            qc, qk = [], []
            for j in coords:
                if j in model.angle_coordinates:
                    qc += [j, j]
                    qk += [1, 2]
                else:
                    qc.append(j)
                    qk.append(0)
            one = z.new_ones(len(qc))
            _, Jv, Hv = mlp_jet(pot, *feature_jet(z, qc, qk, one))
            _, Jt, Ht = mlp_jet(
                kin,
                *feature_jet(
                    z,
                    qc + [n + j for j in coords],
                    qk + [0] * len(coords),
                    torch.cat([one, inv_scale[coords]]),
                ),
            )
            grad = grad + Jt[..., 0, :] - Jv[..., 0, :]
            hess = hess + Ht[..., 0, :, :] - Hv[..., 0, :, :]
        return grad, hess
    a = model.angle_coordinates
    lin = [i for i in range(n) if i not in a]
    coords = lin + a + a + [n + i for i in range(n)]
    kinds = [0] * len(lin) + [1] * len(a) + [2] * len(a) + [0] * n
    scale = torch.cat([z.new_ones(len(lin) + 2 * len(a)), inv_scale])
    _, J, H = mlp_jet(model.net, *feature_jet(z, coords, kinds, scale))
    return J[..., 0, :], H[..., 0, :, :]


def pivoted_solve(A, B):
    """``A⁻¹ B`` for (..., n, n) and (..., n, k): Gauss–Jordan with partial pivoting, unrolled over n
    (gather/where only, so it exports to ONNX)."""
    n = A.shape[-1]
    aug = torch.cat([A, B], -1)
    rows = torch.arange(n, device=A.device)
    for k in range(n):
        col = torch.where(rows < k, -torch.ones_like(aug[..., :, k]), aug[..., :, k].abs())
        p = col.argmax(-1, keepdim=True)  # pivot row (..., 1)
        order = torch.where(rows == k, p, torch.where(rows == p, torch.full_like(p, k), rows))
        aug = torch.gather(aug, -2, order.unsqueeze(-1).expand(aug.shape))
        pivot_row = aug[..., k : k + 1, :] / aug[..., k : k + 1, k : k + 1]
        aug = torch.where((rows == k).unsqueeze(-1), pivot_row, aug - aug[..., :, k : k + 1] * pivot_row)
    return aug[..., n:]


class AccelerationGraph(nn.Module):
    """``q̈(q, q̇)`` of an acceleration family, written so that ``torch.onnx.export`` can trace it."""

    def __init__(self, model: nn.Module):
        super().__init__()
        self.model = model
        self.family = model.family

    def forward(self, q, qd):
        if self.family == "node":
            return self.model(q, qd)
        n = q.shape[-1]
        grad, hess = lagrangian_jet(self.model, q, qd)
        W, mixed = hess[..., n:], hess[..., :n]  # ∂²𝓛/∂q̇², ∂²𝓛/∂q̇∂q
        F = grad[..., :n] - (mixed @ qd.unsqueeze(-1)).squeeze(-1)
        if self.family == "lnn_nh":
            A = self.model.constraint_matrix(q, xp=torch)
            b = self.model.constraint_drift(q, qd, xp=torch)
            return constrained_acceleration(W, F, A, b, solve=pivoted_solve)[0]
        return pivoted_solve(W, F.unsqueeze(-1)).squeeze(-1)


def family_metadata(model, coordinate_names, coordinate_units, **fields):
    """:class:`ModelMetadata` of an acceleration-family graph (all coordinates free)."""
    from ..inference.metadata import ModelMetadata

    network = dict(model.config()) | {
        "graph_inputs": list(GRAPH_INPUTS),
        "graph_outputs": list(GRAPH_OUTPUTS),
    }
    return ModelMetadata(
        family=model.family,
        free_joints=list(coordinate_names),
        servo_joints=[],
        coordinate_units=list(coordinate_units),
        network=network,
        **fields,
    )


def export_family_onnx(model: nn.Module, path, metadata=None, dtype: str = "float32") -> Path:
    """Write an LNN / LNN-nh / TLNN / neural ODE as ONNX (q, qd → qdd) to ``path`` atomically."""
    from .export import export_graph, frozen_copy, stamped

    net = frozen_copy(model, dtype)
    n = cast(int, net.n)  # every family keeps its coordinate count and angle list as plain Python values
    if metadata is None:
        names = getattr(net, "coordinate_names", None) or [f"q{i + 1}" for i in range(n)]
        angles = cast("list[int]", net.angle_coordinates)
        metadata = family_metadata(net, names, ["rad" if i in angles else "m" for i in range(n)])
    metadata = stamped(metadata, dtype)
    if len(metadata.free_joints) != n:
        raise ValueError(f"metadata names {len(metadata.free_joints)} coordinates, the model has {n}")
    return export_graph(AccelerationGraph(net), n, dtype, GRAPH_INPUTS, GRAPH_OUTPUTS, OPSET, metadata, path)


__all__ = [
    "EXPORTABLE",
    "GRAPH_INPUTS",
    "GRAPH_OUTPUTS",
    "AccelerationGraph",
    "export_family_onnx",
    "family_metadata",
    "feature_jet",
    "lagrangian_jet",
    "mlp_jet",
    "pivoted_solve",
]
