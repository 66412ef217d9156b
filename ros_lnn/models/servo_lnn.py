"""ServoLNN (EQUATIONS.md §1, eqs 30–32): one multi-head MLP of ``q`` gives ``V``, ``l_diag ≥ 0`` and
``l_lower``; ``M = L Lᵀ + ε I``. Derivatives w.r.t. ``q`` are carried analytically through the layers,
and every output comes from the shared machinery :func:`ros_lnn.physics.lagrangian.dynamics`.

Coordinates are in *model order*: the free joints, then the servo joints. Without servo joints the
model is DeLaN.

What real robots need (EQUATIONS.md §7), each off by default so the conservative crane model keeps
its graph: ``dissipation`` — a learned Rayleigh damping ``Q_d = −D(q) q̇`` with ``D = L_d L_dᵀ``
positive semidefinite by construction (``L_d`` lower triangular: a constant plus a head on the same
trunk, initialised at zero), and with ``rayleigh_coulomb`` a smooth Coulomb term
``−c ⊙ tanh(q̇ / v)``, ``c ≥ 0`` per joint; ``cyclic_joints`` — coordinates the Lagrangian does not
depend on (not network inputs; the arm angle of a rotary arm); ``angle_joints`` — wrapping revolute
joints as ``[sin q, cos q]``; ``prior`` — a rigid-body model from the robot's URDF
(:class:`~ros_lnn.models.rigid_body.RigidBodyPrior`) added to the network's ``M``, ``V`` and forces,
so the network learns only what the URDF misses.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from ..physics.lagrangian import Partition, coriolis_force, dynamics
from .analytic_mlp import AnalyticMLP, activation, softplus
from .torch_ops import TORCH

FAMILY = "servo_lnn"
DISSIPATION = ("", "rayleigh", "rayleigh_coulomb")


def placement_matrix(n: int) -> torch.Tensor:
    """(n + n(n−1)/2, n·n) 0/1 matrix mapping ``[l_diag; l_lower]`` into row-major ``L``."""
    slots = [i * n + i for i in range(n)] + [i * n + j for i in range(n) for j in range(i)]
    P = torch.zeros(len(slots), n * n)
    for row, slot in enumerate(slots):
        P[row, slot] = 1.0
    return P


class ServoLNN(nn.Module):
    family = FAMILY

    def __init__(
        self,
        free_joints: Sequence[str],
        servo_joints: Sequence[str] = (),
        *,
        hidden: Sequence[int] = (64,),
        activation: str = "softplus",
        diag_activation: str = "softplus",
        epsilon: float = 0.01,
        angle_joints: Sequence[str] = (),
        coordinate_units: Sequence[str] = (),
        cyclic_joints: Sequence[str] = (),
        dissipation: str = "",
        coulomb_velocity: float = 0.05,
        damping_init: float = 0.1,
        prior: dict | None = None,
    ):
        super().__init__()
        self.free_joints, self.servo_joints = list(free_joints), list(servo_joints)
        self.joints = self.free_joints + self.servo_joints
        if len(set(self.joints)) != len(self.joints):
            raise ValueError(f"joint names must be unique: {self.joints}")
        n = self.n = len(self.joints)
        self.n_f, self.n_e = len(self.free_joints), len(self.servo_joints)
        self.partition = Partition(tuple(range(self.n_f)), tuple(range(self.n_f, n)))
        unknown = [j for j in list(angle_joints) + list(cyclic_joints) if j not in self.joints]
        if unknown:
            raise ValueError(f"angle/cyclic joints {unknown} are not among the model's joints {self.joints}")
        if dissipation not in DISSIPATION:
            raise ValueError(f"dissipation '{dissipation}': choose one of {DISSIPATION}")
        self.angle_joints = [j for j in self.joints if j in angle_joints]
        self.cyclic_joints = [j for j in self.joints if j in cyclic_joints]
        self.dissipation, self.coulomb_velocity = dissipation, float(coulomb_velocity)
        self.damping_init = float(damping_init)
        self.coordinate_units = list(coordinate_units) or ["rad"] * n
        self.hidden_widths, self.activation, self.diag_activation = list(hidden), activation, diag_activation
        self.epsilon = float(epsilon)
        self.gd, self.dgd = _diag_activation(diag_activation)
        self.net = AnalyticMLP(
            n,
            1 + n + n * (n - 1) // 2,
            hidden,
            activation,
            angles=[self.joints.index(j) for j in self.angle_joints],
            cyclic=[self.joints.index(j) for j in self.cyclic_joints],
        )
        self.register_buffer("P", placement_matrix(n))
        self.register_buffer("eye", torch.eye(n))
        # ε I as a buffer in the model's dtype: a Python scalar would enter an exported graph as float32.
        self.register_buffer("eps_eye", self.epsilon * torch.eye(n), persistent=False)
        diag = torch.eye(n, dtype=torch.bool).flatten()
        self.register_buffer("diag_mask", diag, persistent=False)
        self.register_buffer("diag_floor", torch.where(diag, 0.0, float("-inf")), persistent=False)
        if dissipation:
            # L_d(q) = head(trunk(q)): weights zero at the start, bias the constant part (diagonal
            # damping_init), so D starts as a small constant diagonal damping and learns its q-dependence.
            self.damping = nn.Linear(self.net.out.in_features, n * (n + 1) // 2)
            nn.init.zeros_(self.damping.weight)
            with torch.no_grad():
                self.damping.bias.zero_()
                self.damping.bias[:n] = self.damping_init
            if dissipation == "rayleigh_coulomb":
                self.coulomb_raw = nn.Parameter(torch.full((n,), -4.0))  # c = softplus(raw) ≈ 0.018
        self.prior = None
        if prior:
            from .rigid_body import RigidBodyPrior

            self.prior = RigidBodyPrior.from_config(prior, self.joints)
            self.register_buffer("residual_scale", torch.ones(2))
            self._start_as_residual(prior)

    def _start_as_residual(self, prior: dict) -> None:
        """With a rigid-body prior the network starts as (almost) nothing: ``V`` zero, ``L`` tiny (its
        diagonal at softplus(−8)), so the model starts as the identified rigid body; the dissipation
        starts at the friction the identification found (``prior["damping"]``, ``prior["coulomb"]``)."""
        n = self.n
        with torch.no_grad():
            self.net.out.weight.zero_()
            self.net.out.bias.zero_()
            self.net.out.bias[1 : 1 + n] = -8.0
            if self.dissipation and prior.get("damping") is not None:
                damping = torch.as_tensor(prior["damping"], dtype=self.damping.bias.dtype).clamp_min(1e-8)
                self.damping.bias[:n] = damping.sqrt()
            if self.dissipation == "rayleigh_coulomb" and prior.get("coulomb") is not None:
                c = torch.as_tensor(prior["coulomb"], dtype=self.coulomb_raw.dtype).clamp_min(1e-6)
                self.coulomb_raw.copy_(c + torch.log(-torch.expm1(-c)))  # softplus⁻¹

    # -- description ------------------------------------------------------------------------------
    def config(self) -> dict:
        cfg = {
            "free_joints": self.free_joints,
            "servo_joints": self.servo_joints,
            "hidden": self.hidden_widths,
            "activation": self.activation,
            "diag_activation": self.diag_activation,
            "epsilon": self.epsilon,
            "angle_joints": self.angle_joints,
            "coordinate_units": self.coordinate_units,
        }
        # what real-robot models add, only when used (a conservative model's config is unchanged)
        if self.cyclic_joints:
            cfg["cyclic_joints"] = self.cyclic_joints
        if self.dissipation:
            cfg |= {
                "dissipation": self.dissipation,
                "coulomb_velocity": self.coulomb_velocity,
                "damping_init": self.damping_init,
            }
        if self.prior is not None:
            cfg["prior"] = self.prior.config()
        return cfg

    @property
    def extra_forces(self) -> bool:
        """Whether the model has forces beyond the network's conservative Lagrangian."""
        return bool(self.dissipation) or self.prior is not None

    @classmethod
    def from_config(cls, cfg: dict) -> ServoLNN:
        cfg = dict(cfg)
        return cls(cfg.pop("free_joints"), cfg.pop("servo_joints"), **cfg)

    def set_normalisation(self, q_offset, q_scale) -> None:
        """Input normalisation ``(q − offset)/scale`` (inside the module, so inside the exported graph)."""
        self.net.input_map.set_normalisation(q_offset, q_scale)

    def set_residual_scale(self, q) -> None:
        """With a prior: the residual network's ``V`` output in units of 10 % of the prior's potential
        spread over ``q`` and its ``L`` entries in units of 10 % of the square root of the prior's mass
        matrix diagonal, so an optimiser step changes the residual relative to the physics it corrects
        (Adam's steps are about ``lr`` per weight, whatever the scale of the output)."""
        if self.prior is None:
            return
        q = torch.as_tensor(q, dtype=self.prior.params.dtype)
        with torch.no_grad():
            M, V, _, _ = self.prior.terms(q, torch.zeros_like(q))
            v_scale = float(V.std()) if len(V) > 1 else 0.0
            m_scale = float(torch.diagonal(M, dim1=-2, dim2=-1).abs().mean().sqrt())
            v_scale = v_scale if v_scale > 0 else m_scale**2
            self.get_buffer("residual_scale").copy_(torch.tensor([0.1 * v_scale, 0.1 * m_scale]))

    # -- the network ------------------------------------------------------------------------------
    def heads(self, y):
        """Raw network outputs ``[V, l_diag_pre, l_lower]`` → ``V`` (...), lower-triangular ``L``
        (..., n, n)."""
        n = self.n
        l = torch.cat([self.gd(y[..., 1 : 1 + n]), y[..., 1 + n :]], dim=-1)
        return y[..., 0], (l @ self.P).unflatten(-1, (n, n))

    def terms(self, q):
        """``M`` (..., n, n), ``∂M/∂q`` (..., n, n, n) [k, i, j], ``V`` (...), ``∂V/∂q`` (..., n) of the
        network (without a rigid-body prior)."""
        return self._network_terms(self.net.trunk(q))

    def _network_terms(self, state):
        """The heads on a trunk state. The placement of ``[l_diag; l_lower]`` into ``L`` is folded into the
        head weights and ``V`` shares the head, so ``[V, L]`` and their ``∂/∂q_k`` come out of one matmul
        each (weight-only products fold to constants on export)."""
        n = self.n
        W, b = self.net.out.weight, self.net.out.bias
        W = torch.cat([W[:1], self.P.transpose(0, 1) @ W[1:]])  # heads [V; L row-major]
        y, dy = self.net.head(state, W, torch.cat([b[:1], b[1:] @ self.P]))  # (.., 1+n²), (.., n, 1+n²)
        V, dV, Lp, dLp = y[..., 0], dy[..., 0], y[..., 1:], dy[..., 1:]
        L, dL = self._diag_activation(Lp, dLp)
        if self.prior is not None:  # the residual's V and L in units of the prior's (set_residual_scale)
            V, dV = V * self.residual_scale[0], dV * self.residual_scale[0]
            L, dL = L * self.residual_scale[1], dL * self.residual_scale[1]
        L, dL = L.unflatten(-1, (n, n)), dL.unflatten(-1, (n, n))  # dL (..., k, i, j)
        Lt = L.transpose(-1, -2)
        M = L @ Lt + self.eps_eye
        # (∂L/∂q_k) Lᵀ for every k as one (n², n) × (n, n) product per sample: a batch of B matrices,
        # not of B·n tiny ones (several times faster on a CPU's batched matmul for n = 7)
        A = (dL.flatten(-3, -2) @ Lt).unflatten(-2, (n, n))
        return M, A + A.transpose(-1, -2), V, dV

    def _diag_activation(self, Lp, dLp):
        """``l_diag ≥ 0`` on the diagonal slots of the flattened ``L``; other slots pass through."""
        diag = self.diag_mask
        if self.diag_activation == "relu":
            floor = self.diag_floor  # 0 on the diagonal, −inf elsewhere
            return torch.maximum(Lp, floor), dLp * (Lp > floor).to(Lp.dtype).unsqueeze(-2)
        L = torch.where(diag, self.gd(Lp), Lp)
        return L, dLp * torch.where(diag, self.dgd(Lp), 1.0).unsqueeze(-2)

    def dissipative_force(self, state, qd):
        """``Q_d = −D(q) q̇ − c ⊙ tanh(q̇ / v)``, ``D = L_d L_dᵀ`` (PSD by construction), ``c ≥ 0``."""
        n = self.n
        L_d = (self.damping(state.h) @ self.P).unflatten(-1, (n, n))
        v = (L_d.transpose(-1, -2) @ qd.unsqueeze(-1)).squeeze(-1)  # L_dᵀ q̇
        Q_d = -(L_d @ v.unsqueeze(-1)).squeeze(-1)  # −L_d L_dᵀ q̇
        if self.dissipation == "rayleigh_coulomb":
            Q_d = Q_d - softplus(self.coulomb_raw) * torch.tanh(qd / self.coulomb_velocity)
        return Q_d

    def damping_matrix(self, q):
        """``D(q)`` (..., n, n) of the Rayleigh term (zeros without dissipation)."""
        if not self.dissipation:
            return q.new_zeros(q.shape[:-1] + (self.n, self.n))
        L_d = (self.damping(self.net.trunk(q).h) @ self.P).unflatten(-1, (self.n, self.n))
        return L_d @ L_d.transpose(-1, -2)

    def all_terms(self, q, qd):
        """``M, ∂M/∂q, V, ∂V/∂q`` and the extra forces ``{"Q_c", "Q_d"}`` (empty for a plain ServoLNN;
        with a prior ``Q_c`` is the network's Coriolis force plus the rigid body's, ``M``, ``V``,
        ``∂V/∂q`` are sums and ``∂M/∂q`` is the network's)."""
        state = self.net.trunk(q)
        M, dM, V, dV = self._network_terms(state)
        extra = {}
        if self.prior is not None:
            M_r, V_r, dV_r, Q_c_r = self.prior.terms(q, qd)
            extra["Q_c"] = coriolis_force(TORCH, dM, qd) + Q_c_r
            M, V, dV = M + M_r, V + V_r, dV + dV_r
        if self.dissipation:
            extra["Q_d"] = self.dissipative_force(state, qd)
        return M, dM, V, dV, extra

    def forward(self, q, qd, qdd_e=None, Q_f=None) -> dict:
        """Forward mode: ``q̈_f`` from ``q, q̇, q̈_e, Q_f``, and every other output at that acceleration."""
        if qdd_e is None:
            qdd_e = q.new_zeros(q.shape[:-1] + (self.n_e,))
        if Q_f is None:
            Q_f = q.new_zeros(q.shape[:-1] + (self.n_f,))
        if getattr(self, "extra_forces", False):  # (the autograd reference borrows these methods)
            M, dM, V, dV, extra = self.all_terms(q, qd)
            return dynamics(TORCH, M, dM, V, dV, qd, self.partition, qdd_e=qdd_e, Q_f=Q_f, **extra)
        M, dM, V, dV = self.terms(q)
        return dynamics(TORCH, M, dM, V, dV, qd, self.partition, qdd_e=qdd_e, Q_f=Q_f)

    def inverse(self, q, qd, qdd) -> dict:
        """Inverse mode: ``Q`` (hence ``Q_e``) from ``q, q̇, q̈``."""
        if getattr(self, "extra_forces", False):  # (the autograd reference borrows these methods)
            M, dM, V, dV, extra = self.all_terms(q, qd)
            return dynamics(TORCH, M, dM, V, dV, qd, self.partition, qdd=qdd, **extra)
        M, dM, V, dV = self.terms(q)
        return dynamics(TORCH, M, dM, V, dV, qd, self.partition, qdd=qdd)

    def inverse_residual(self, q, qd, qdd, Q):
        """``r = Q̂(q, q̇, q̈) − Q`` (the losses' residual) and ``M``."""
        if getattr(self, "extra_forces", False):  # (the autograd reference borrows these methods)
            M, dM, _, dV, extra = self.all_terms(q, qd)
            Q_c = extra.get("Q_c")
            if Q_c is None:
                Q_c = coriolis_force(TORCH, dM, qd)
            bias = Q_c + dV - extra["Q_d"] if "Q_d" in extra else Q_c + dV
        else:
            M, dM, _, dV = self.terms(q)
            bias = coriolis_force(TORCH, dM, qd) + dV
        return TORCH.einsum("...ij,...j->...i", M, qdd) + bias - Q, M


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
