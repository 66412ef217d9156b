"""Joint coordinates ↔ body poses and twists: forward kinematics, ``G(q)`` with ``ν = G q̇``, ``Ġ q̇``,
and the map from joint efforts to the port.

Joint coordinates: a floating root contributes 6 rates (its CoM velocity and angular velocity, inertial
coordinates) and no positions handled here (its pose is given); a revolute joint one angle about its
axis; a spherical joint 3 rates — the relative angular velocity ``ω_c − ω_p`` in inertial coordinates
(quasi-velocities) — with the XYZ Euler angles of eq 20 as positions; a fixed joint none.
"""
from __future__ import annotations

import numpy as np

from ..errors import ConfigError
from .multibody import MultibodyData, MultibodyModel
from .multibody_quaternion import cross, matrix_to_quat, rot_axis

_FREE_BASE_COLUMNS = 6


def coordinate_layout(model: MultibodyModel):
    """List of (joint index or -1 for the floating root, kind, number of rate columns)."""
    out = []
    if model.floating_root is not None:
        out.append((-1, "floating", _FREE_BASE_COLUMNS))
    for i, j in enumerate(model.joints):
        width = {"revolute": 1, "spherical": 3, "fixed": 0}[j.kind]
        if width:
            out.append((i, j.kind, width))
    return out


def n_rates(model) -> int:
    return sum(w for _, _, w in coordinate_layout(model))


def actuated_joints(model) -> list[int]:
    """Indices of revolute joints, in model order (the joints a joint-effort interface drives)."""
    return [i for i, j in enumerate(model.joints) if j.kind == "revolute"]


def forward_kinematics(model: MultibodyModel, q, base_position=(0.0, 0.0, 0.0), base_attitude=None):
    """Body CoM positions (N, 3) and attitudes (N, 4) from joint positions.

    ``q`` holds one angle per revolute joint and three XYZ Euler angles per spherical joint, in joint
    order. A floating root is placed at ``base_position`` with attitude ``base_attitude`` (3×3).
    """
    q = np.asarray(q, dtype=float).ravel()
    n = model.n_bodies
    R = np.zeros((n, 3, 3))
    r = np.zeros((n, 3))
    if model.floating_root is not None:
        R[model.floating_root] = np.eye(3) if base_attitude is None else np.asarray(base_attitude, float)
        r[model.floating_root] = base_position
    pos = 0
    for i, j in enumerate(model.joints):
        if j.parent >= 0:
            R_p, r_p = R[j.parent], r[j.parent]
        else:
            R_p, r_p = np.eye(3), np.zeros(3)
        local = model.rest[i]
        if j.kind == "revolute":
            local = local @ rot_axis(model.axis[i], q[pos])
            pos += 1
        elif j.kind == "spherical":
            phi, th, psi = q[pos:pos + 3]
            local = local @ rot_axis([1, 0, 0], phi) @ rot_axis([0, 1, 0], th) @ rot_axis([0, 0, 1], psi)
            pos += 3
        R[j.child] = R_p @ local
        r[j.child] = r_p + R_p @ model.anchor_parent[i] - R[j.child] @ model.anchor_child[i]
    if pos != q.size:
        raise ConfigError(f"multibody '{model.name}': {q.size} joint positions given, the joints need {pos}")
    return r, np.stack([matrix_to_quat(Ri) for Ri in R])


def _columns(model, data):
    """Per rate column: axis u (3,), point p (3,), descendants mask (N,), linear-only flag,
    axis rate u̇ and point velocity ṗ."""
    n = model.n_bodies
    U, P, D, lin, Ud, Pd = [], [], [], [], [], []
    if model.floating_root is not None:
        root = model.floating_root
        for e in np.eye(3):  # translation of the whole tree
            U.append(e), P.append(data.r[root]), D.append(np.ones(n, bool)), lin.append(True)
            Ud.append(np.zeros(3)), Pd.append(data.v[root])
        for e in np.eye(3):  # rotation of the whole tree about the root's CoM
            U.append(e), P.append(data.r[root]), D.append(np.ones(n, bool)), lin.append(False)
            Ud.append(np.zeros(3)), Pd.append(data.v[root])
    for i, j in enumerate(model.joints):
        c = j.child
        pc = data.point_child[i]
        pc_dot = data.v[c] + cross(data.omega[c], pc - data.r[c])
        if j.kind == "revolute":
            a = data.R[c] @ model.axis[i]
            w_p = data.omega[j.parent] if j.parent >= 0 else np.zeros(3)
            axes, rates = [a], [cross(w_p, a)]
        elif j.kind == "spherical":
            axes, rates = list(np.eye(3)), [np.zeros(3)] * 3
        else:
            continue
        for a, ad in zip(axes, rates):
            U.append(a), P.append(pc), D.append(model.descendants[i]), lin.append(False)
            Ud.append(ad), Pd.append(pc_dot)
    return (np.array(U).reshape(-1, 3), np.array(P).reshape(-1, 3), np.array(D).reshape(-1, n),
            np.array(lin, bool), np.array(Ud).reshape(-1, 3), np.array(Pd).reshape(-1, 3))


def twist_map(model: MultibodyModel, data: MultibodyData) -> np.ndarray:
    """``G`` (6N × n_rates) with ``ν = G q̇``; ``J G = 0`` on the constraint manifold."""
    n = model.n_bodies
    U, P, D, lin, _, _ = _columns(model, data)
    c = U.shape[0]
    G = np.zeros((6 * n, c))
    arm = data.r[None, :, :] - P[:, None, :]  # (C, N, 3)
    vel = np.where(lin[:, None, None], U[:, None, :], cross(U[:, None, :], arm))
    vel *= D[:, :, None]
    G[:3 * n] = vel.transpose(1, 2, 0).reshape(3 * n, c)
    ang = np.where(lin[:, None, None], 0.0, U[:, None, :]) * D[:, :, None]
    G[3 * n:] = ang.transpose(1, 2, 0).reshape(3 * n, c)
    return G


def twist_map_rate_times(model: MultibodyModel, data: MultibodyData, qd) -> np.ndarray:
    """``Ġ q̇`` at a state whose twist is ``ν = G q̇`` (so that ``ν̇ = G q̈ + Ġ q̇``)."""
    n = model.n_bodies
    qd = np.asarray(qd, dtype=float).ravel()
    U, P, D, lin, Ud, Pd = _columns(model, data)
    arm = data.r[None, :, :] - P[:, None, :]
    dv = cross(Ud[:, None, :], arm) + cross(U[:, None, :], data.v[None, :, :] - Pd[:, None, :])
    dv = np.where(lin[:, None, None], 0.0, dv) * D[:, :, None]
    dw = np.where(lin[:, None, None], 0.0, Ud[:, None, :]) * D[:, :, None]
    return np.concatenate([np.einsum("cni,c->ni", dv, qd).ravel(), np.einsum("cni,c->ni", dw, qd).ravel()])


def effort_map(model: MultibodyModel, data: MultibodyData) -> np.ndarray:
    """``E`` (6N × n_rates): the port of unit joint efforts — a moment pair ``+u a`` on the child and
    ``−u a`` on the parent about each joint axis. ``Gᵀ E = I`` on the joint columns, so ``u = Gᵀ τ``
    and ``τ = E u`` carry the same power."""
    n = model.n_bodies
    cols = []
    for jidx, kind, width in coordinate_layout(model):
        if kind == "floating":
            e = np.zeros((6 * n, 6))
            root = model.floating_root
            e[3 * root:3 * root + 3, :3] = np.eye(3)
            e[3 * n + 3 * root:3 * n + 3 * root + 3, 3:] = np.eye(3)
            cols.append(e)
            continue
        j = model.joints[jidx]
        axes = [data.R[j.child] @ model.axis[jidx]] if kind == "revolute" else list(np.eye(3))
        e = np.zeros((6 * n, width))
        for k, a in enumerate(axes):
            e[3 * n + 3 * j.child:3 * n + 3 * j.child + 3, k] = a
            if j.parent >= 0:
                e[3 * n + 3 * j.parent:3 * n + 3 * j.parent + 3, k] = -a
        cols.append(e)
    return np.concatenate(cols, axis=1) if cols else np.zeros((6 * n, 0))
