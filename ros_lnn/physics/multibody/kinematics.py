"""Joint coordinates ↔ body poses and twists: forward kinematics, ``G(q)`` with ``ν = G q̇``, ``Ġ q̇``,
and the map from joint efforts to the port.

Joint coordinates: a floating root contributes 6 rates (its CoM velocity and angular velocity, inertial
coordinates) and no positions handled here (its pose is given); a revolute joint one angle about its
axis; a spherical joint 3 rates — the relative angular velocity ``ω_c − ω_p`` in inertial coordinates
(quasi-velocities) — with the XYZ Euler angles of eq 20 as positions; a fixed joint none.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ...errors import ConfigError
from .model import MultibodyData, MultibodyModel, require_maximal_coordinates
from .quaternion import cross, matrix_to_quat, quat_mul_tuple, quat_to_matrix, skew

_FREE_BASE_COLUMNS = 6


def coordinate_layout(model: MultibodyModel):
    """List of (joint index or -1 for the floating root, kind, number of rate columns)."""
    out = []
    if model.floating_root is not None:
        out.append((-1, "floating", _FREE_BASE_COLUMNS))
    for i, j in enumerate(model.joints):
        width = {"revolute": 1, "prismatic": 1, "spherical": 3, "fixed": 0}[j.kind]
        if width:
            out.append((i, j.kind, width))
    return out


def n_rates(model) -> int:
    return sum(w for _, _, w in coordinate_layout(model))


def actuated_joints(model) -> list[int]:
    """Indices of revolute and prismatic joints, in model order (the joints a joint-effort interface
    drives)."""
    return [i for i, j in enumerate(model.joints) if j.kind in ("revolute", "prismatic")]


def _axis_quat(axis, angle):
    c, s_ = math.cos(0.5 * angle), math.sin(0.5 * angle)
    return (c, s_ * axis[0], s_ * axis[1], s_ * axis[2])


def forward_kinematics(
    model: MultibodyModel, q, base_position=(0.0, 0.0, 0.0), base_attitude=None, parts: dict | None = None
):
    """Body CoM positions (N, 3) and attitudes (N, 4) from joint positions.

    ``q`` holds one angle per revolute joint and three XYZ Euler angles per spherical joint, in joint
    order. A floating root is placed at ``base_position`` with attitude ``base_attitude`` (3×3).
    ``parts``: a dictionary that receives the (N+1)-stacked attitude matrices ``R_ext`` (world last)
    and the joint arms ``arm_pc`` computed on the way, for :func:`ros_lnn.physics.multibody.pose_only`.
    """
    require_maximal_coordinates(model)
    q = np.asarray(q, dtype=float).ravel()
    qs = q.tolist()
    n = model.n_bodies
    quats: list[Any] = [None] * n  # a tuple per body once its joint is reached
    if model.floating_root is not None:
        quats[model.floating_root] = (
            (1.0, 0.0, 0.0, 0.0)
            if base_attitude is None
            else tuple(matrix_to_quat(np.asarray(base_attitude, float)))
        )
    pos = 0
    for kind, parent, child, local, axis in _fk_table(model):
        if kind == "revolute":
            local = quat_mul_tuple(local, _axis_quat(axis, qs[pos]))
            pos += 1
        elif kind == "spherical":
            for e, angle in zip(_BASIS, qs[pos : pos + 3]):
                local = quat_mul_tuple(local, _axis_quat(e, angle))
            pos += 3
        quats[child] = local if parent < 0 else quat_mul_tuple(quats[parent], local)
    if pos != q.size:
        raise ConfigError(f"multibody '{model.name}': {q.size} joint positions given, the joints need {pos}")
    quat = np.array([x if x[0] >= 0 else (-x[0], -x[1], -x[2], -x[3]) for x in quats])  # scalar part ≥ 0
    k = model.n_joints
    R_ext = np.empty((n + 1, 3, 3))  # the world (index n) has R = I
    R_ext[:n] = quat_to_matrix(quat)
    R_ext[n] = _I3
    arms = (R_ext.take(model._pc_index, axis=0) @ model._anchors)[
        :, :, 0
    ]  # [R_p a_p (a_p itself for the world); R_c a_c]
    step = (arms[:k] - arms[k:]).tolist()  # r_c − r_p along every joint
    rows: list[Any] = [None] * n  # a list per body once its joint is reached
    if model.floating_root is not None:
        rows[model.floating_root] = [float(x) for x in base_position]
    origin = [0.0, 0.0, 0.0]
    for i, (p, c) in enumerate(zip(model.parent.tolist(), model.child.tolist())):
        base, d = (rows[p] if p >= 0 else origin), step[i]
        rows[c] = [base[0] + d[0], base[1] + d[1], base[2] + d[2]]
    r = np.array(rows, dtype=float).reshape(n, 3)
    if parts is not None:
        parts["R_ext"], parts["arm_pc"] = R_ext, arms
    return r, quat


_BASIS = ((1.0, 0.0, 0.0), (0.0, 1.0, 0.0), (0.0, 0.0, 1.0))
_I3 = np.eye(3)


def _fk_table(model):
    """Per joint (cached on the model): kind, parent, child, rest quaternion, axis as plain Python values."""
    table = model.__dict__.get("_fk_table")
    if table is None:
        axes = model.axis.tolist()
        table = model._fk_table = [
            (j.kind, int(j.parent), int(j.child), tuple(matrix_to_quat(model.rest[i])), tuple(axes[i]))
            for i, j in enumerate(model.joints)
        ]
    return table


def _column_table(model):
    """Per rate column (cached on the model): kind (0 root translation, 1 root rotation, 2 revolute,
    3 spherical), joint index, local vector (basis vector or revolute axis), descendants mask."""
    table = getattr(model, "_column_table", None)
    if table is None:
        kind, joint, local, desc = [], [], [], []
        if model.floating_root is not None:
            for k in (0, 1):
                for e in np.eye(3):
                    (
                        kind.append(k),
                        joint.append(0),
                        local.append(e),
                        desc.append(np.ones(model.n_bodies, bool)),
                    )
        for i, j in enumerate(model.joints):
            if j.kind == "revolute":
                (
                    kind.append(2),
                    joint.append(i),
                    local.append(model.axis[i]),
                    desc.append(model.descendants[i]),
                )
            elif j.kind == "spherical":
                for e in np.eye(3):
                    kind.append(3), joint.append(i), local.append(e), desc.append(model.descendants[i])
        table = model._column_table = (
            np.array(kind, int),
            np.array(joint, int),
            np.array(local, float).reshape(-1, 3),
            np.array(desc, bool).reshape(-1, model.n_bodies),
        )
    return table


def _column_geometry(model, data):
    """Per rate column: axis u (3,), point p (3,), descendants mask (N,), linear-only flag."""
    kind, joint, local, D = _column_table(model)
    is_joint = kind >= 2
    child = model.child[joint]
    root = model.floating_root if model.floating_root is not None else 0
    U = np.where((kind == 2)[:, None], np.einsum("cij,cj->ci", data.R[child], local), local)
    P = np.where(is_joint[:, None], data.point_child[joint], data.r[root])
    return U, P, D, kind == 0


def _columns(model, data):
    """:func:`_column_geometry` plus the axis rate u̇ and the point velocity ṗ of every column."""
    kind, joint, _local, D = _column_table(model)
    U, P, D, lin = _column_geometry(model, data)
    is_joint = kind >= 2
    child = model.child[joint]
    root = model.floating_root if model.floating_root is not None else 0
    revolute = (kind == 2)[:, None]
    par = model.parent[joint]
    w_p = np.where((par >= 0)[:, None], data.omega[np.maximum(par, 0)], 0.0)
    Ud = np.where(revolute, cross(w_p, U), 0.0)
    Pd = np.where(
        is_joint[:, None], data.v[child] + cross(data.omega[child], P - data.r[child]), data.v[root]
    )
    return U, P, D, lin, Ud, Pd


def twist_map(model: MultibodyModel, data: MultibodyData) -> np.ndarray:
    """``G`` (6N × n_rates) with ``ν = G q̇``; ``J G = 0`` on the constraint manifold."""
    n = model.n_bodies
    kind, joint, local, D = _column_table(model)
    c = kind.shape[0]
    revolute = _all_revolute(model)
    if revolute is not None:
        # every column a revolute joint (a fixed-base arm): at a descendant b column c is
        # [u × r_b + m; u] with the axis u and its moment m = p × u, i.e. one product with the stacked [r_b]×
        child, Dm = revolute
        U = (data.R.take(child, axis=0) @ local[:, :, None])[:, :, 0]
        m = cross(data.point_child.take(joint, axis=0), U)
        out = np.empty((2, n, 3, c))
        np.subtract(m.T, skew(data.r).reshape(3 * n, 3).dot(U.T).reshape(n, 3, c), out=out[0])
        out[1] = U.T
        out *= Dm.transpose(1, 2, 0)[None]  # descendants only
        return out.reshape(6 * n, c)
    else:
        U, P, D, lin = _column_geometry(model, data)  # configuration only: a pose-only workspace will do
        arm = data.r[None, :, :] - P[:, None, :]
        vel = np.where(lin[:, None, None], U[:, None, :], cross(U[:, None, :], arm))
        vel *= D[:, :, None]
        ang = np.where(lin[:, None, None], 0.0, U[:, None, :]) * D[:, :, None]
    G = np.empty((6 * n, c))
    G[: 3 * n] = vel.transpose(1, 2, 0).reshape(3 * n, c)
    G[3 * n :] = ang.transpose(1, 2, 0).reshape(3 * n, c)
    return G


def twist_map_rate_times(model: MultibodyModel, data: MultibodyData, qd) -> np.ndarray:
    """``Ġ q̇`` at a state whose twist is ``ν = G q̇`` (so that ``ν̇ = G q̈ + Ġ q̇``)."""
    n = model.n_bodies
    qd = np.asarray(qd, dtype=float).ravel()
    dv, dw = _rate_column_parts(model, data)
    c = qd.shape[0]
    out = np.empty(6 * n)
    out[: 3 * n] = qd @ dv.reshape(c, 3 * n)  # Σ_c q̇_c (column c of Ġ)
    out[3 * n :] = qd @ dw.reshape(c, 3 * n)
    return out


def twist_map_rate(model: MultibodyModel, data: MultibodyData) -> np.ndarray:
    """``Ġ`` (6N × n_rates) along the current twist:
    ``twist_map_rate(…) @ q̇ = twist_map_rate_times(…, q̇)``."""
    n = model.n_bodies
    revolute = _all_revolute(model)
    if revolute is not None:
        # a fixed-base revolute arm: column c at a descendant b is u × r_b + m with the joint axis u and
        # its moment m = p × u, so Ġ_v = −[r_b]× u̇ − [v_b]× u + ṁ: one product with the stacked [r_b]×, [v_b]×
        _, joint, local, _ = _column_table(model)
        child, Dm = revolute
        c = child.shape[0]
        U = (data.R.take(child, axis=0) @ local[:, :, None])[:, :, 0]
        w_ext = np.empty((n + 1, 3))  # the world (last row) does not turn
        w_ext[:n], w_ext[n] = data.omega, 0.0
        P = data.point_child.take(joint, axis=0)
        pair = np.empty((2, 2, c, 3))  # [[ω_p, ω_c], [u, p − r_c]] → u̇ = ω_p × u, ω_c × (p − r_c)
        pair[0, 0] = w_ext.take(model._parent_ext.take(joint), axis=0)
        pair[0, 1], pair[1, 0] = data.omega.take(child, axis=0), U
        np.subtract(P, data.r.take(child, axis=0), out=pair[1, 1])
        first = cross(pair[0], pair[1])
        Ud = first[0]
        pair[0, 0] = data.v.take(child, axis=0) + first[1]  # ṗ
        pair[0, 1], pair[1, 1] = P, Ud
        both = cross(pair[0], pair[1])
        m_dot = both[0] + both[1]  # ṁ = ṗ × u + p × u̇
        rv = np.empty((n, 2, 3))
        rv[:, 0], rv[:, 1] = data.r, data.v
        K = skew(rv).transpose(0, 2, 1, 3).reshape(3 * n, 6)  # rows [ [r_b]× | [v_b]× ]
        UU = np.empty((6, c))
        UU[:3], UU[3:] = Ud.T, U.T
        out = np.empty((2, n, 3, c))
        np.subtract(m_dot.T, K.dot(UU).reshape(n, 3, c), out=out[0])
        out[1] = Ud.T
        out *= Dm.transpose(1, 2, 0)[None]  # descendants only
        return out.reshape(6 * n, c)
    else:
        dv, dw = _rate_column_parts(model, data)
    c = dv.shape[0]
    out = np.empty((6 * n, c))
    out[: 3 * n] = dv.transpose(1, 2, 0).reshape(3 * n, c)
    out[3 * n :] = dw.transpose(1, 2, 0).reshape(3 * n, c)
    return out


def _rate_column_parts(model: MultibodyModel, data: MultibodyData):
    """The columns of ``Ġ`` along the current twist as linear and angular parts, (C, N, 3) each."""
    U, P, D, lin, Ud, Pd = _columns(model, data)
    arm = data.r[None, :, :] - P[:, None, :]
    dv = cross(Ud[:, None, :], arm) + cross(U[:, None, :], data.v[None, :, :] - Pd[:, None, :])
    dv = np.where(lin[:, None, None], 0.0, dv) * D[:, :, None]
    dw = np.where(lin[:, None, None], 0.0, Ud[:, None, :]) * D[:, :, None]
    return dv, dw


def _all_revolute(model):
    """``(child body per column, descendants mask (C, N, 1) as floats)`` when every rate column is a
    revolute joint (a fixed-base arm), else None; cached on the model."""
    cached = model.__dict__.get("_all_revolute_columns")
    if cached is None:
        kind, joint, _, D = _column_table(model)
        cached = model._all_revolute_columns = (
            (model.child[joint], D[:, :, None].astype(float))
            if kind.size and bool(np.all(kind == 2))
            else False
        )
    return cached or None


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
            e[3 * root : 3 * root + 3, :3] = np.eye(3)
            e[3 * n + 3 * root : 3 * n + 3 * root + 3, 3:] = np.eye(3)
            cols.append(e)
            continue
        j = model.joints[jidx]
        axes = [data.R[j.child] @ model.axis[jidx]] if kind == "revolute" else list(np.eye(3))
        e = np.zeros((6 * n, width))
        for k, a in enumerate(axes):
            e[3 * n + 3 * j.child : 3 * n + 3 * j.child + 3, k] = a
            if j.parent >= 0:
                e[3 * n + 3 * j.parent : 3 * n + 3 * j.parent + 3, k] = -a
        cols.append(e)
    return np.concatenate(cols, axis=1) if cols else np.zeros((6 * n, 0))


def revolute_joint_state(model: MultibodyModel, data: MultibodyData):
    """Angles and rates of the revolute joints (model order) read off the body attitudes and twists."""
    from .model import revolute_angles

    rev = np.array([i for i, j in enumerate(model.joints) if j.kind == "revolute"], dtype=int)
    q = revolute_angles(model, data.R_parent, data.R[model.child])[rev]
    axis = np.einsum("kij,kj->ki", data.R[model.child[rev]], model.axis[rev])
    par = model.parent[rev]
    w_p = np.where((par >= 0)[:, None], data.omega[np.maximum(par, 0)], 0.0)
    qd = np.sum(axis * (data.omega[model.child[rev]] - w_p), axis=1)
    return q, qd
