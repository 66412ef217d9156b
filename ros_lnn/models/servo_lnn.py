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
    def __init__(self, free_joints: Sequence[str], servo_joints: Sequence[str] = (), *,
                 hidden: Sequence[int] = (64,), activation: str = "softplus", diag_activation: str = "relu",
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
        """Network outputs → ``V`` (...), lower-triangular ``L`` (..., n, n)."""
        n = self.n
        l = torch.cat([self.gd(y[..., 1:1 + n]), y[..., 1 + n:]], dim=-1)
        return y[..., 0], (l @ self.P).unflatten(-1, (n, n))

    def terms(self, q):
        """``M`` (..., n, n), ``∂M/∂q`` (..., n, n, n) [k, i, j], ``V`` (...), ``∂V/∂q`` (..., n)."""
        n = self.n
        y, dy = self.net(q)
        V, L = self.heads(y)
        dl = torch.cat([self.dgd(y[..., 1:1 + n, None]) * dy[..., 1:1 + n, :], dy[..., 1 + n:, :]], dim=-2)
        dL = (dl.transpose(-1, -2) @ self.P).unflatten(-1, (n, n))        # (..., k, i, j)
        M = L @ L.transpose(-1, -2) + self.epsilon * self.eye
        A = dL @ L.transpose(-1, -2).unsqueeze(-3)                          # (∂L/∂q_k) Lᵀ
        return M, A + A.transpose(-1, -2), V, dy[..., 0, :]

    def forward(self, q, qd, qdd_e=None, Q_f=None) -> dict:
        """Forward mode: ``q̈_f`` from ``q, q̇, q̈_e, Q_f``, and every other output at that acceleration."""
        if qdd_e is None:
            qdd_e = q.new_zeros(q.shape[:-1] + (self.n_e,))
        if Q_f is None:
            Q_f = q.new_zeros(q.shape[:-1] + (self.n_f,))
        M, dM, V, dV = self.terms(q)
        out = dynamics(TORCH, M, dM, V, dV, qd, self.partition, qdd_e=qdd_e, Q_f=Q_f)
        out["qdd_f"] = out["qdd"][..., :self.n_f]
        return out

    def inverse(self, q, qd, qdd) -> dict:
        """Inverse mode: ``Q`` (hence ``Q_e``) from ``q, q̇, q̈``."""
        M, dM, V, dV = self.terms(q)
        return dynamics(TORCH, M, dM, V, dV, qd, self.partition, qdd=qdd)


def _diag_activation(name: str):
    if name == "softplus":
        return nn.functional.softplus, torch.sigmoid
    if name in ("relu", "abs", "square"):
        if name == "abs":
            return torch.abs, torch.sign
        if name == "square":
            return torch.square, lambda a: 2.0 * a
        return activation("relu")
    raise ValueError(f"unknown diagonal activation '{name}'; choose relu (paper), softplus, abs or square")
