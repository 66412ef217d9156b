"""The learned part of data-assisted control: the joint efforts an arm needs beyond its certain model.

Targets come from a robot's logs, ``τ_res = u − [H(q) q̈ + C(q, q̇) q̇ + g(q)]`` with the certain model's
terms (Pinocchio on the training machine, :mod:`ros_lnn.training.effort_residuals`). What an arm's
description misses has a known shape, and the network keeps it:

    τ̂_res(q, q̇, q̈) = s ∘ [ g_θ(q) + A_θ(q) q̃̈ + Γ_θ(q)[q̃̇ ⊗ q̃̇] ] + d ∘ q̇ + c ∘ tanh(q̇ / v_s)

* ``g_θ(q)``: configuration-dependent efforts (a payload's weight, a wrong centre of mass);
* ``A_θ(q) q̈``: inertia the model lacks (a payload's inertia, reflected rotor inertia) — linear in q̈,
  as every inertia is;
* ``Γ_θ(q)[q̇ ⊗ q̇]``: the Coriolis/centrifugal part of that inertia — quadratic in q̇ (upper triangle of
  ``q̇ q̇ᵀ``, one coefficient row per joint);
* viscous ``d`` and regularised Coulomb friction ``c``, ``v_s`` per joint (``v_s`` through exp(·) > 0).

One MLP of ``[sin q, cos q]`` (revolute joints; prismatic ones as ``q`` scaled) gives ``g, A, Γ``;
``q̃̇ = q̇ / σ_q̇``, ``q̃̈ = q̈ / σ_q̈`` and ``s = σ_τ`` are the training data's scales (buffers set before
training). Structure is what lets it extrapolate in velocity and acceleration, where data are sparse,
and keeps the friction step sharp (an MLP smooths a ±c step over its whole velocity range).

At run time ``q̈`` is the joint acceleration the control law asks for (``q̈_r``,
:mod:`ros_lnn.control.effort`), so the port supplies the efforts for the motion the law commands.

With a regressor fit (``regressor_fit``, the default of ``ros-lnn train --model dac_residual``) the
network learns only what the least-squares fit of the physical parameters leaves; the fit travels in the
model's config and the ONNX metadata, and :class:`ros_lnn.inference.residual.ResidualRuntime` adds it.

ONNX graph (:func:`export_dac_residual_onnx`): inputs ``q, qd, qdd`` (batch, n), output ``tau_res``
(batch, n) — the network's part — joints in the metadata's ``free_joints`` order.
"""

from __future__ import annotations

import math
from pathlib import Path

import torch
from torch import nn

from .mlp import mlp

FAMILY = "dac_residual"
GRAPH_INPUTS, GRAPH_OUTPUTS = ("q", "qd", "qdd"), ("tau_res",)
LOSSES = ("tau_res",)
OPSET = 18
DTYPES = {"float32": torch.float32, "float64": torch.float64}
ACTIVATIONS = {"softplus": nn.Softplus, "tanh": nn.Tanh, "silu": nn.SiLU}


class DacResidual(nn.Module):
    family = FAMILY
    rev_mask: torch.Tensor  # buffers
    q_offset: torch.Tensor
    q_scale: torch.Tensor
    qd_scale: torch.Tensor
    qdd_scale: torch.Tensor
    tau_scale: torch.Tensor
    tau_max: torch.Tensor

    def __init__(
        self,
        n: int,
        hidden=(64, 64),
        activation: str = "softplus",
        revolute=None,
        coulomb_velocity: float = 0.05,
        regressor_fit: dict | None = None,
        network_enabled: bool = True,
    ):
        super().__init__()
        #: False: the network added nothing to the regressor fit on validation; the port is the fit alone
        #: (the graph still holds the network; the runtime and the family's evaluation leave it out)
        self.network_enabled = bool(network_enabled)
        #: the linear-in-parameters part fitted before the network (ros_lnn.physics.multibody.regressor):
        #: the network learns what it leaves; the port adds both at run time (None: the network alone)
        self.regressor_fit = dict(regressor_fit) if regressor_fit else None
        if activation not in ACTIVATIONS:
            raise ValueError(f"activation must be one of {sorted(ACTIVATIONS)}, got {activation!r}")
        self.n, self.hidden, self.activation = int(n), tuple(int(h) for h in hidden), activation
        self.revolute = [bool(r) for r in (revolute if revolute is not None else [True] * self.n)]
        self.coulomb_velocity = float(coulomb_velocity)
        n_pairs = self.n * (self.n + 1) // 2
        d_in = 2 * sum(self.revolute) + (self.n - sum(self.revolute))
        self.net = mlp(d_in, self.hidden, activation, self.n * (1 + self.n + n_pairs), ACTIVATIONS)
        rows, cols = torch.triu_indices(self.n, self.n)
        self.register_buffer("pair_rows", rows, persistent=False)
        self.register_buffer("pair_cols", cols, persistent=False)
        self.register_buffer("rev_mask", torch.tensor(self.revolute))
        for name in ("q_scale", "qd_scale", "qdd_scale", "tau_scale"):
            self.register_buffer(name, torch.ones(self.n))
        self.register_buffer("q_offset", torch.zeros(self.n))
        self.register_buffer("tau_max", torch.zeros(self.n))  # largest |τ_res| of the training data
        self.viscous = nn.Parameter(torch.zeros(self.n))
        self.coulomb = nn.Parameter(torch.zeros(self.n))
        self.log_coulomb_velocity = nn.Parameter(torch.full((self.n,), math.log(self.coulomb_velocity)))

    def config(self) -> dict:
        return {
            "n": self.n,
            "hidden": list(self.hidden),
            "activation": self.activation,
            "revolute": list(self.revolute),
            "coulomb_velocity": self.coulomb_velocity,
        } | (
            {"regressor_fit": self.regressor_fit, "network_enabled": self.network_enabled}
            if self.regressor_fit
            else {}
        )

    def set_scales(self, q, qd, qdd, tau) -> None:
        """Input and output scales from the training samples (tensors or arrays, (N, n))."""

        def std(x):
            s = torch.as_tensor(x, dtype=torch.float64).std(0)
            return torch.where(s > 1e-9, s, torch.ones_like(s)).to(self.q_scale.dtype)

        q_t = torch.as_tensor(q, dtype=torch.float64)
        with torch.no_grad():
            self.q_offset.copy_(torch.where(self.rev_mask, 0.0, q_t.mean(0)).to(self.q_offset.dtype))
            self.q_scale.copy_(
                torch.where(self.rev_mask, torch.ones(self.n, dtype=torch.float64), std(q).double()).to(
                    self.q_scale.dtype
                )
            )
            self.qd_scale.copy_(std(qd))
            self.qdd_scale.copy_(std(qdd))
            self.tau_scale.copy_(std(tau))
            self.tau_max.copy_(torch.as_tensor(tau, dtype=torch.float64).abs().amax(0).to(self.tau_max.dtype))

    def features(self, q):
        x = (q - self.q_offset) / self.q_scale
        rev = [i for i, r in enumerate(self.revolute) if r]
        lin = [i for i, r in enumerate(self.revolute) if not r]
        parts = []
        if rev:
            parts += [torch.sin(x[..., rev]), torch.cos(x[..., rev])]
        if lin:
            parts.append(x[..., lin])
        return torch.cat(parts, -1)

    def forward(self, q, qd, qdd):
        n = self.n
        out = self.net(self.features(q))
        g = out[..., :n]
        A = out[..., n : n + n * n].unflatten(-1, (n, n))
        Gm = out[..., n + n * n :].unflatten(-1, (n, -1))
        v = qd / self.qd_scale
        pairs = v[..., self.pair_rows] * v[..., self.pair_cols]
        shaped = (
            g
            + (A @ (qdd / self.qdd_scale).unsqueeze(-1)).squeeze(-1)
            + (Gm @ pairs.unsqueeze(-1)).squeeze(-1)
        )
        friction = self.viscous * qd + self.coulomb * torch.tanh(qd * torch.exp(-self.log_coulomb_velocity))
        return shaped * self.tau_scale + friction

    def loss_terms(self, batch: dict, names=LOSSES) -> dict:
        """``tau_res``: mean squared error of τ̂_res in units of each joint's residual scale (batch ``Q``
        holds the target τ_res)."""
        err = (self(batch["q"], batch["qd"], batch["qdd"]) - batch["Q"]) / self.tau_scale
        return {"tau_res": (err * err).sum(-1).mean()}

    def friction_parameters(self) -> dict:
        return {
            "viscous": self.viscous.detach().cpu().tolist(),
            "coulomb": self.coulomb.detach().cpu().tolist(),
            "coulomb_velocity": torch.exp(self.log_coulomb_velocity).detach().cpu().tolist(),
        }


def from_config(config: dict) -> DacResidual:
    cfg = dict(config)
    return DacResidual(cfg.pop("n"), **cfg)


def export_dac_residual_onnx(model: DacResidual, path, metadata, dtype: str = "float32") -> Path:
    """Write the residual as ONNX (q, qd, qdd → tau_res) to ``path`` atomically, metadata stamped."""
    from .export import export_graph, frozen_copy, stamped

    net = frozen_copy(model, dtype)
    metadata = stamped(metadata, dtype)
    if len(metadata.free_joints) != net.n:
        raise ValueError(f"metadata names {len(metadata.free_joints)} joints, the model has {net.n}")
    return export_graph(net, net.n, dtype, GRAPH_INPUTS, GRAPH_OUTPUTS, OPSET, metadata, path)


__all__ = [
    "DacResidual",
    "FAMILY",
    "GRAPH_INPUTS",
    "GRAPH_OUTPUTS",
    "LOSSES",
    "from_config",
    "export_dac_residual_onnx",
]
