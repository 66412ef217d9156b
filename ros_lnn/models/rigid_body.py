"""A rigid-body model of a robot's kinematic tree in torch: the prior of a gray-box ServoLNN.

The structure (parents, joint placements and axes) comes from the robot's URDF, read by Pinocchio at
training time (:mod:`ros_lnn.training.urdf_prior`); the inertial parameters are the ten of each body
in Pinocchio's convention ``[m, m c_x, m c_y, m c_z, I_xx, I_xy, I_yy, I_xz, I_yz, I_zz]`` (first
moment and rotational inertia about the body frame's origin, in the body frame), identified from the
recording. Everything is stored in the model's config, so a checkpoint or an ONNX export needs no
Pinocchio and no URDF.

``terms(q, q̇)`` gives, in model order, ``M(q)`` (composite rigid body: recursive Newton–Euler with unit
accelerations), ``V(q)``, ``∂V/∂q`` (the gravity torques) and the Coriolis/centrifugal force
``C(q, q̇) q̇`` (recursive Newton–Euler at zero acceleration without gravity). Only sin, cos, products
and sums: one graph serves training and ONNX export. The recursion runs in the world frame::

    ω_i = ω_p + a_i q̇_i,  α_i = α_p + ω_p × a_i q̇_i + a_i q̈_i                 (revolute)
    v̇_i = v̇_p + α_p × r + ω_p × (ω_p × r) [+ 2 ω_p × a_i q̇_i + a_i q̈_i]     (prismatic)
    f_i = m (v̇_i − g) + α_i × h + ω_i × (ω_i × h),   n_i = I α_i + ω_i × I ω_i + h × (v̇_i − g)

with ``r`` from the parent's origin to the joint's, ``h = R m c`` and ``I = R I_o Rᵀ``; forces are
summed from the leaves (``N_p += N_i + r × F_i``) and projected on the joint axes.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

JOINT_TYPES = ("revolute", "prismatic")


def _cross(a, b):
    """``a × b`` over the last axis (written out: ONNX has no cross product)."""
    a1, a2, a3 = a[..., 0], a[..., 1], a[..., 2]
    b1, b2, b3 = b[..., 0], b[..., 1], b[..., 2]
    return torch.stack([a2 * b3 - a3 * b2, a3 * b1 - a1 * b3, a1 * b2 - a2 * b1], dim=-1)


def _skew(axis: torch.Tensor) -> torch.Tensor:
    x, y, z = (float(v) for v in axis)
    return torch.tensor([[0.0, -z, y], [z, 0.0, -x], [-y, x, 0.0]], dtype=axis.dtype)


def _inertia_matrix(p):
    """Rotational inertia about the origin (..., 3, 3) from ``p[..., 4:10]`` (xx, xy, yy, xz, yz, zz)."""
    xx, xy, yy, xz, yz, zz = (p[..., k] for k in range(4, 10))
    return torch.stack(
        [torch.stack([xx, xy, xz], -1), torch.stack([xy, yy, yz], -1), torch.stack([xz, yz, zz], -1)], -2
    )


class RigidBodyPrior(nn.Module):
    """Bodies of a kinematic tree with one joint each (``revolute`` or ``prismatic``), parents listed
    before their children; ``index[b]`` is the model-order coordinate of body ``b``'s joint."""

    axes: torch.Tensor
    origin_R: torch.Tensor
    origin_p: torch.Tensor
    params: torch.Tensor
    gravity: torch.Tensor

    def __init__(
        self,
        joints: Sequence[str],
        types: Sequence[str],
        parents: Sequence[int],
        axes,
        origin_R,
        origin_p,
        params,
        index: Sequence[int],
        gravity=(0.0, 0.0, -9.81),
        source: str = "",
    ):
        super().__init__()
        self.joint_names, self.types = list(joints), list(types)
        self.parents, self.index = [int(p) for p in parents], [int(i) for i in index]
        unknown = sorted(set(self.types) - set(JOINT_TYPES))
        if unknown:
            raise ValueError(f"joint types {unknown}: the rigid-body prior has revolute and prismatic joints")
        if any(p >= b for b, p in enumerate(self.parents)):
            raise ValueError("bodies must be listed after their parents")
        self.source = source
        f64 = torch.float64
        axes = torch.as_tensor(axes, dtype=f64).reshape(-1, 3)
        self.register_buffer("axes", axes)
        self.register_buffer("origin_R", torch.as_tensor(origin_R, dtype=f64).reshape(-1, 3, 3))
        self.register_buffer("origin_p", torch.as_tensor(origin_p, dtype=f64).reshape(-1, 3))
        self.register_buffer("params", torch.as_tensor(params, dtype=f64).reshape(-1, 10))
        self.register_buffer("gravity", torch.as_tensor(gravity, dtype=f64).reshape(3))
        # Rodrigues: Rot(a, θ) = I + sin θ K + (1 − cos θ) K², K = [a]×
        K = torch.stack([_skew(a) for a in axes]) if len(axes) else torch.zeros(0, 3, 3, dtype=f64)
        self.register_buffer("K", K)
        self.register_buffer("K2", K @ K)
        self.register_buffer("eye3", torch.eye(3, dtype=f64))
        n = len(self.index)
        self.register_buffer("eye_n", torch.eye(n, dtype=f64))
        self.order = [self.index.index(i) for i in range(n)]  # model coordinate → body

    # -- description -------------------------------------------------------------------------------
    def config(self) -> dict:
        return {
            "joints": self.joint_names,
            "types": self.types,
            "parents": self.parents,
            "axes": self.axes.tolist(),
            "origin_R": self.origin_R.tolist(),
            "origin_p": self.origin_p.tolist(),
            "params": self.params.tolist(),
            "gravity": self.gravity.tolist(),
            "source": self.source,
        }

    @classmethod
    def from_config(cls, cfg: dict, model_joints: Sequence[str]) -> RigidBodyPrior:
        joints = list(cfg["joints"])
        missing = [j for j in joints if j not in model_joints]
        if missing or len(joints) != len(model_joints):
            raise ValueError(
                f"rigid-body prior joints {joints} do not match the model's {list(model_joints)}"
            )
        index = [list(model_joints).index(j) for j in joints]
        return cls(
            joints,
            cfg["types"],
            cfg["parents"],
            cfg["axes"],
            cfg["origin_R"],
            cfg["origin_p"],
            cfg["params"],
            index,
            cfg.get("gravity", (0.0, 0.0, -9.81)),
            cfg.get("source", ""),
        )

    # -- kinematics and recursive Newton–Euler ------------------------------------------------------
    def kinematics(self, q):
        """World rotation, joint origin and joint axis of every body: lists of (..., 3, 3), (..., 3),
        (..., 3)."""
        R, p, a = [], [], []
        batch = q.shape[:-1]
        for b, parent in enumerate(self.parents):
            if parent < 0:
                R_base = self.origin_R[b].to(q.dtype).expand(batch + (3, 3))
                p_b = self.origin_p[b].to(q.dtype).expand(batch + (3,))
            else:
                R_base = R[parent] @ self.origin_R[b].to(q.dtype)
                p_b = p[parent] + (R[parent] @ self.origin_p[b].to(q.dtype).unsqueeze(-1)).squeeze(-1)
            axis = (R_base @ self.axes[b].to(q.dtype).unsqueeze(-1)).squeeze(-1)
            qb = q[..., self.index[b]]
            if self.types[b] == "revolute":
                s, c = torch.sin(qb)[..., None, None], torch.cos(qb)[..., None, None]
                rot = self.eye3.to(q.dtype) + s * self.K[b].to(q.dtype) + (1 - c) * self.K2[b].to(q.dtype)
                R_b = R_base @ rot
            else:
                R_b = R_base
                p_b = p_b + axis * qb.unsqueeze(-1)
            R.append(R_b)
            p.append(p_b)
            a.append(axis)
        return R, p, a

    def rnea(self, kin, qd, qdd, gravity: bool):
        """Joint forces (..., n) in model order of ``M q̈ + C q̇ [+ g]`` at the given ``q̇``, ``q̈``
        (either may be None: zero); ``kin`` from :meth:`kinematics` (broadcast against ``q̈``'s batch)."""
        R, p, a = kin
        ref = qdd if qdd is not None else qd
        zero = torch.zeros_like(ref[..., :1]).expand(ref.shape[:-1] + (3,))
        g = -self.gravity.to(ref.dtype) if gravity else None
        w: list = []
        alpha: list = []
        acc: list = []
        F: list = []
        N: list = []
        for b, parent in enumerate(self.parents):
            i = self.index[b]
            a_b = a[b]
            w_p = w[parent] if parent >= 0 else zero
            al_p = alpha[parent] if parent >= 0 else zero
            acc_p = acc[parent] if parent >= 0 else (zero + g if g is not None else zero)
            r = p[b] - p[parent] if parent >= 0 else p[b] * 0.0
            qd_i = qd[..., i : i + 1] if qd is not None else None
            qdd_i = qdd[..., i : i + 1] if qdd is not None else None
            acc_b = acc_p + _cross(al_p, r) + _cross(w_p, _cross(w_p, r))
            if self.types[b] == "revolute":
                w_b = w_p + a_b * qd_i if qd_i is not None else w_p
                al_b = al_p + (_cross(w_p, a_b) * qd_i if qd_i is not None else 0.0)
                al_b = al_b + (a_b * qdd_i if qdd_i is not None else 0.0)
            else:
                w_b, al_b = w_p, al_p
                if qd_i is not None:
                    acc_b = acc_b + 2.0 * _cross(w_p, a_b) * qd_i
                if qdd_i is not None:
                    acc_b = acc_b + a_b * qdd_i
            w.append(w_b)
            alpha.append(al_b)
            acc.append(acc_b)
            par = self.params[b].to(ref.dtype)
            h = (R[b] @ par[1:4].unsqueeze(-1)).squeeze(-1)
            inertia = R[b] @ _inertia_matrix(par) @ R[b].transpose(-1, -2)
            F.append(par[0] * acc_b + _cross(al_b, h) + _cross(w_b, _cross(w_b, h)))
            N.append(
                (inertia @ al_b.unsqueeze(-1)).squeeze(-1)
                + _cross(w_b, (inertia @ w_b.unsqueeze(-1)).squeeze(-1))
                + _cross(h, acc_b)
            )
        tau: list = [None] * len(self.parents)
        for b in reversed(range(len(self.parents))):
            parent = self.parents[b]
            axis = a[b]
            tau[self.index[b]] = ((N[b] if self.types[b] == "revolute" else F[b]) * axis).sum(-1)
            if parent >= 0:
                F[parent] = F[parent] + F[b]
                N[parent] = N[parent] + N[b] + _cross(p[b] - p[parent], F[b])
        return torch.stack(tau, dim=-1)

    def terms(self, q, qd):
        """``M`` (..., n, n), ``V`` (...), ``∂V/∂q`` (..., n), ``C(q, q̇) q̇`` (..., n), model order."""
        kin = self.kinematics(q)
        # M column by column: unit accelerations on an extra axis (..., n_columns, n)
        kin_cols = tuple(
            [x.unsqueeze(-3) if x.dim() == q.dim() + 1 else x.unsqueeze(-2) for x in part] for part in kin
        )
        qdd_cols = self.eye_n.to(q.dtype).expand(q.shape[:-1] + self.eye_n.shape)
        M = self.rnea(kin_cols, None, qdd_cols, gravity=False).transpose(-1, -2)
        M = 0.5 * (M + M.transpose(-1, -2))
        dV = self.rnea(kin, None, torch.zeros_like(q), gravity=True)
        Q_c = self.rnea(kin, qd, None, gravity=False)
        R, p, _ = kin
        g = self.gravity.to(q.dtype)
        V = q.new_zeros(q.shape[:-1])
        for b in range(len(self.parents)):
            par = self.params[b].to(q.dtype)
            com_moment = par[0] * p[b] + (R[b] @ par[1:4].unsqueeze(-1)).squeeze(-1)  # m × (COM position)
            V = V - (com_moment * g).sum(-1)
        return M, V, dV, Q_c


__all__ = ["RigidBodyPrior", "JOINT_TYPES"]
