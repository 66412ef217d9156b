"""ServoLNN (EQUATIONS.md §1, eqs 30–32): one multi-head MLP of ``q`` gives ``V``, ``l_diag ≥ 0`` and
``l_lower``; ``M = L Lᵀ + ε I``. Derivatives w.r.t. ``q`` are carried analytically through the layers,
and every output comes from the shared machinery :func:`ros_lnn.physics.lagrangian.dynamics`.

Coordinates are in *model order*: the free joints, then the servo joints. Without servo joints the
model is DeLaN.
"""
from __future__ import annotations

from typing import Sequence

import torch
from torch import nn

from ..physics.lagrangian import Partition, dynamics
from .analytic_mlp import AnalyticMLP, activation
from .torch_ops import TORCH

FAMILY = "servo_lnn"


def placement_matrix(n: int) -> torch.Tensor:
    """(n + n(n−1)/2, n·n) 0/1 matrix mapping ``[l_diag; l_lower]`` into row-major ``L``."""
    slots = [i * n + i for i in range(n)] + [i * n + j for i in range(n) for j in range(i)]
    P = torch.zeros(len(slots), n * n)
    for row, slot in enumerate(slots):
        P[row, slot] = 1.0
    return P


class ServoLNN(nn.Module):
    family = FAMILY

    def __init__(self, free_joints: Sequence[str], servo_joints: Sequence[str] = (), *,
                 hidden: Sequence[int] = (64,), activation: str = "softplus", diag_activation: str = "softplus",
                 epsilon: float = 0.01, angle_joints: Sequence[str] = (), coordinate_units: Sequence[str] = ()):
        super().__init__()
        self.free_joints, self.servo_joints = list(free_joints), list(servo_joints)
        self.joints = self.free_joints + self.servo_joints
        if len(set(self.joints)) != len(self.joints):
            raise ValueError(f"joint names must be unique: {self.joints}")
        n = self.n = len(self.joints)
        self.n_f, self.n_e = len(self.free_joints), len(self.servo_joints)
        self.partition = Partition(tuple(range(self.n_f)), tuple(range(self.n_f, n)))
        unknown = [j for j in angle_joints if j not in self.joints]
        if unknown:
            raise ValueError(f"angle joints {unknown} are not among the model's joints {self.joints}")
        self.angle_joints = [j for j in self.joints if j in angle_joints]
        self.coordinate_units = list(coordinate_units) or ["rad"] * n
        self.hidden_widths, self.activation, self.diag_activation = list(hidden), activation, diag_activation
        self.epsilon = float(epsilon)
        self.gd, self.dgd = _diag_activation(diag_activation)
        self.net = AnalyticMLP(n, 1 + n + n * (n - 1) // 2, hidden, activation,
                               angles=[self.joints.index(j) for j in self.angle_joints])
        self.register_buffer("P", placement_matrix(n))
        self.register_buffer("eye", torch.eye(n))
        # ε I as a buffer in the model's dtype: a Python scalar would enter an exported graph as float32.
        self.register_buffer("eps_eye", self.epsilon * torch.eye(n), persistent=False)
        diag = torch.eye(n, dtype=torch.bool).flatten()
        self.register_buffer("diag_mask", diag, persistent=False)
        self.register_buffer("diag_floor", torch.where(diag, 0.0, float("-inf")), persistent=False)

    # -- description ------------------------------------------------------------------------------
    def config(self) -> dict:
        return {"free_joints": self.free_joints, "servo_joints": self.servo_joints,
                "hidden": self.hidden_widths, "activation": self.activation,
                "diag_activation": self.diag_activation, "epsilon": self.epsilon,
                "angle_joints": self.angle_joints, "coordinate_units": self.coordinate_units}

    @classmethod
    def from_config(cls, cfg: dict) -> "ServoLNN":
        cfg = dict(cfg)
        return cls(cfg.pop("free_joints"), cfg.pop("servo_joints"), **cfg)

    def set_normalisation(self, q_offset, q_scale) -> None:
        """Input normalisation ``(q − offset)/scale`` (inside the module, so inside the exported graph)."""
        self.net.input_map.set_normalisation(q_offset, q_scale)

    # -- the network ------------------------------------------------------------------------------
    def heads(self, y):
        """Raw network outputs ``[V, l_diag_pre, l_lower]`` → ``V`` (...), lower-triangular ``L`` (..., n, n)."""
        n = self.n
        l = torch.cat([self.gd(y[..., 1:1 + n]), y[..., 1 + n:]], dim=-1)
        return y[..., 0], (l @ self.P).unflatten(-1, (n, n))

    def terms(self, q):
        """``M`` (..., n, n), ``∂M/∂q`` (..., n, n, n) [k, i, j], ``V`` (...), ``∂V/∂q`` (..., n).

        The placement of ``[l_diag; l_lower]`` into ``L`` is folded into the head weights and ``V`` shares
        the head, so ``[V, L]`` and their ``∂/∂q_k`` come out of one matmul each (weight-only products fold
        to constants on export)."""
        n = self.n
        W, b = self.net.out.weight, self.net.out.bias
        W = torch.cat([W[:1], self.P.transpose(0, 1) @ W[1:]])                   # heads [V; L row-major]
        y, dy = self.net.head(self.net.trunk(q), W, torch.cat([b[:1], b[1:] @ self.P]))   # (.., 1+n²), (.., n, 1+n²)
        V, dV, Lp, dLp = y[..., 0], dy[..., 0], y[..., 1:], dy[..., 1:]
        L, dL = self._diag_activation(Lp, dLp)
        L, dL = L.unflatten(-1, (n, n)), dL.unflatten(-1, (n, n))               # dL (..., k, i, j)
        Lt = L.transpose(-1, -2)
        M = L @ Lt + self.eps_eye
        A = dL @ Lt.unsqueeze(-3)                                                # (∂L/∂q_k) Lᵀ
        return M, A + A.transpose(-1, -2), V, dV

    def _diag_activation(self, Lp, dLp):
        """``l_diag ≥ 0`` on the diagonal slots of the flattened ``L``; other slots pass through."""
        diag = self.diag_mask
        if self.diag_activation == "relu":
            floor = self.diag_floor                       # 0 on the diagonal, −inf elsewhere
            return torch.maximum(Lp, floor), dLp * (Lp > floor).to(Lp.dtype).unsqueeze(-2)
        L = torch.where(diag, self.gd(Lp), Lp)
        return L, dLp * torch.where(diag, self.dgd(Lp), 1.0).unsqueeze(-2)

    def forward(self, q, qd, qdd_e=None, Q_f=None) -> dict:
        """Forward mode: ``q̈_f`` from ``q, q̇, q̈_e, Q_f``, and every other output at that acceleration."""
        if qdd_e is None:
            qdd_e = q.new_zeros(q.shape[:-1] + (self.n_e,))
        if Q_f is None:
            Q_f = q.new_zeros(q.shape[:-1] + (self.n_f,))
        M, dM, V, dV = self.terms(q)
        return dynamics(TORCH, M, dM, V, dV, qd, self.partition, qdd_e=qdd_e, Q_f=Q_f)

    def inverse(self, q, qd, qdd) -> dict:
        """Inverse mode: ``Q`` (hence ``Q_e``) from ``q, q̇, q̈``."""
        M, dM, V, dV = self.terms(q)
        return dynamics(TORCH, M, dM, V, dV, qd, self.partition, qdd=qdd)


def _diag_activation(name: str):
    if name == "softplus":
        return activation("softplus")
    if name in ("relu", "abs", "square"):
        if name == "abs":
            return torch.abs, torch.sign
        if name == "square":
            return torch.square, lambda a: 2.0 * a
        return activation("relu")
    raise ValueError(f"unknown diagonal activation '{name}'; choose relu (paper), softplus, abs or square")
