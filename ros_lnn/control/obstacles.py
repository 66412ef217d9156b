"""Obstacle potential ``U_o`` of law III (seed 004 §3.3) and its gradient as a 6N covector.

Spherical obstacles (centre, radius); a repulsive potential ``U = η (d₀ − d)³ / (3 d₀²)`` for a
clearance ``d < d₀`` (zero beyond) acts on control points fixed to the bodies. The cube makes U twice
continuously differentiable at d₀ (the exact ``ν̇_r`` has no jump when a point enters the field) and
keeps the push bounded, ``|∇U| ≤ η`` [N]: the classic ``(1/d − 1/d₀)²`` field grows without bound and,
fed through the mobility 𝓐 of light links, asks for velocities no controller can follow. A control point
``p = r_b + R_b a`` contributes ``∂U/∂r_b = ∇_p U`` and ``∂U/∂θ_b = (R_b a) × ∇_p U`` (rotation
covector), so the 6N gradient is coordinate-free and rotates with the world. Its time derivative along
the twist (needed for the exact ``ν̇_r``) uses the Hessian of ``U``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import ConfigError
from ..physics.multibody.quaternion import _SKEW, cross, skew


@dataclass(frozen=True)
class SphereObstacle:
    center: np.ndarray
    radius: float


@dataclass(frozen=True)
class ObstacleField:
    obstacles: tuple  # SphereObstacle …
    points_body: np.ndarray  # (P,) body index of each control point
    points_offset: np.ndarray  # (P, 3) offset from the CoM, body coordinates
    influence: float = 0.15  # d₀ [m]
    gain: float = 1.0  # η [N], the largest push

    def __post_init__(self):
        if self.influence <= 0 or self.gain < 0:
            raise ConfigError(
                f"obstacle field: influence {self.influence} must be > 0 and gain {self.gain} >= 0"
            )


def default_control_points(model, exclude_bodies=()) -> tuple[np.ndarray, np.ndarray]:
    """The CoM of every body and every joint point on it (the paper uses the CoMs of bodies 1…N−1)."""
    bodies, offsets = [], []
    for b in range(model.n_bodies):
        if b in exclude_bodies:
            continue
        bodies.append(b)
        offsets.append(np.zeros(3))
    for i, j in enumerate(model.joints):
        if j.child not in exclude_bodies:
            bodies.append(j.child)
            offsets.append(model.anchor_child[i])
    return np.array(bodies, dtype=int), np.array(offsets, dtype=float).reshape(-1, 3)


def _profile(d, d0, eta):
    """f(d), f'(d), f''(d) of the repulsive potential for clearance d (zero outside d < d0)."""
    a = np.maximum(d0 - d, 0.0) / d0  # 0 outside, 1 at contact
    a2 = a * a
    f = (eta * d0 / 3.0) * (a2 * a)
    f1 = -eta * a2
    f2 = (2.0 * eta / d0) * a
    return f, f1, f2


def control_points(field: ObstacleField, data):
    arm = np.einsum("pij,pj->pi", data.R[field.points_body], field.points_offset)
    pos = data.r[field.points_body] + arm
    vel = data.v[field.points_body] + cross(data.omega[field.points_body], arm)
    return arm, pos, vel


def clearances(field: ObstacleField, data) -> np.ndarray:
    """(P, n_obstacles) distance from every control point to every obstacle surface."""
    _, pos, _ = control_points(field, data)
    if not field.obstacles:
        return np.zeros((pos.shape[0], 0))
    c = np.array([o.center for o in field.obstacles])
    rad = np.array([o.radius for o in field.obstacles])
    return np.linalg.norm(pos[:, None, :] - c[None], axis=2) - rad[None]


def potential_gradient(field: ObstacleField, model, data, with_rate: bool = True):
    """``(U, ∇U (6N), d/dt ∇U (6N))`` along the current twist (every point against every obstacle at once).

    With ``δ = p − c``, ``ρ = |δ|`` and the depth ``a = d₀ − d`` (zero outside the field):
    ``∇_p U = k₁ δ`` and ``d/dt ∇_p U = k₂ (δ·ṗ) δ + k₁ ṗ`` summed over the obstacles, where
    ``k₁ = f'/ρ`` and ``k₂ = (f'' − k₁)/ρ²`` (the Hessian ``f'' n̂n̂ᵀ + f'/ρ (I − n̂n̂ᵀ)`` applied to ṗ)."""
    n = model.n_bodies
    centers, reach, body, arm_map, sel = _tables(field, n)
    eta, d0 = field.gain, field.influence
    p = len(body)
    gather = sel.T  # (P, N): picks each point's body (2-D products cost less than fancy indexing here)
    arm = arm_map.dot(data.R.reshape(-1)).reshape(p, 3)  # R_b a for every point
    diff = (gather.dot(data.r) + arm)[:, None, :] - centers  # δ (P, O, 3)
    rho = np.sqrt((diff * diff).dot(_ONES3))  # (sums as products with ones: cheaper than .sum(axis=) here)
    np.maximum(rho, 1e-9, out=rho)  # a point at the very centre: any direction
    depth = reach - rho  # d₀ − d, with reach = d₀ + radius
    np.maximum(depth, 0.0, out=depth)
    if not depth.any():  # no point in the field: U and its derivatives vanish
        return 0.0, np.zeros(6 * n), (np.zeros(6 * n) if with_rate else None)
    a2 = depth * depth
    U = (eta / (3.0 * d0 * d0)) * float(a2.reshape(-1).dot(depth.reshape(-1)))  # f = η d₀ a³/3, a = depth/d₀
    k1 = (-eta / (d0 * d0)) * a2 / rho  # f'/ρ, f' = −η a²
    cols = np.empty((p, 4, 3))  # per point [∇_p U, a × ∇_p U, d/dt ∇_p U, d/dt (a × ∇_p U)]
    g_p = cols[:, 0]
    g_p[...] = (k1[:, None, :] @ diff)[:, 0]
    if not with_rate:
        cols[:, 1] = cross(arm, g_p)
        out = sel.dot(cols[:, :2].reshape(p, 6)).reshape(n, 2, 3).transpose(1, 0, 2)
        return U, out.reshape(6 * n), None
    k2 = ((2.0 * eta / (d0 * d0)) * depth - k1) / (rho * rho)  # (f'' − f'/ρ)/ρ², f'' = 2η a/d₀
    vw = gather.dot(data.nu.reshape(2, n, 3))  # (P, 2, 3): v_b, ω_b of every point's body
    Sk = skew(arm)
    arm_dot = (Sk @ vw[:, 1, :, None])[:, :, 0]  # a × ω = −(ω × a)
    vel = vw[:, 0] - arm_dot
    k2 *= (diff @ vel[:, :, None])[:, :, 0]  # k₂ (δ·ṗ)
    cols[:, 2] = (k2[:, None, :] @ diff)[:, 0] + k1.dot(np.ones(k1.shape[1]))[:, None] * vel
    a_x = Sk @ cols[:, 0::2].transpose(0, 2, 1)  # a × ∇_p U, a × d/dt ∇_p U
    cols[:, 1] = a_x[:, :, 0]
    cols[:, 3] = a_x[:, :, 1] + (skew(g_p) @ arm_dot[:, :, None])[:, :, 0]  # (ω × a) × g = g × (a × ω)
    out = sel.dot(cols.reshape(p, 12)).reshape(n, 2, 2, 3).transpose(1, 2, 0, 3).reshape(2, 6 * n)
    return U, out[0], out[1]


_ONES3 = np.ones(3)


def joint_space_gradient(
    field: ObstacleField,
    points: np.ndarray,
    qd: np.ndarray,
    jacobian: np.ndarray,
    jacobian_rate: np.ndarray,
    point_support: np.ndarray,
):
    """``(U, Gᵀ∇U, d/dt (Gᵀ∇U))``: the obstacle covector in joint coordinates, without the 6N one.

    ``points`` (P, 3): the field's control points in the world; ``qd``: the joint rates;
    ``jacobian``/``jacobian_rate``: Pinocchio's WORLD joint Jacobian 𝒥 and 𝒥̇ (6 × n); ``point_support``
    (P, n): which coordinates move each point, so that ``(point_support ∘ q̇) 𝒥ᵀ`` is the twist
    ``[v_O; ω]`` at the world origin of every point's body.
    Moved to the world origin, the point force ``g_p = ∇_p U`` is the wrench ``[g_p; p × g_p]`` and
    ``Gᵀ∇U = Σ_p 𝒥_pᵀ [g_p; p × g_p]`` (the 6N covector ``[Σ g_p; Σ a_p × g_p]`` of :func:`potential_gradient`
    with its moments about the CoMs, mapped by ``Gᵀ``); along the motion the wrench changes by
    ``[ġ_p; ṗ × g_p + p × ġ_p]`` with ``ṗ = v_O + ω × p``, so ``d/dt (Gᵀ∇U) = Σ_p (𝒥̇_pᵀ [g_p; p × g_p] +
    𝒥_pᵀ [ġ_p; ṗ × g_p + p × ġ_p])`` — the same numbers as ``Ġᵀ∇U + Gᵀ d/dt ∇U`` (tested).
    ``(0, None, None)`` when no point is in the field."""
    centers, reach2 = _joint_space_tables(field)
    for c, limit in zip(centers, reach2.tolist()):  # is any point within d₀ of a surface?
        d = points - c
        if min((d * d).dot(_ONES3).tolist()) < limit:
            break
    else:
        return 0.0, None, None
    diff = points[:, None, :] - centers  # δ (P, O, 3)
    rho2 = (diff * diff).dot(_ONES3)
    eta, d0 = field.gain, field.influence
    rho = np.sqrt(rho2)
    np.maximum(rho, 1e-9, out=rho)
    depth = np.sqrt(reach2) - rho  # d₀ − d
    np.maximum(depth, 0.0, out=depth)
    a2 = depth * depth
    U = (eta / (3.0 * d0 * d0)) * float(a2.reshape(-1).dot(depth.reshape(-1)))
    k1 = (-eta / (d0 * d0)) * a2 / rho
    k2 = ((2.0 * eta / (d0 * d0)) * depth - k1) / (rho * rho)
    point_twists = (point_support * qd).dot(jacobian.T)
    Sk_p = points.dot(_SKEW).reshape(-1, 3, 3)
    p_dot = point_twists[:, :3] - (Sk_p @ point_twists[:, 3:, None])[:, :, 0]  # v_O + ω × p = v_O − p × ω
    k2 *= (diff @ p_dot[:, :, None])[:, :, 0]  # k₂ (δ·ṗ)
    cols = np.empty((points.shape[0], 4, 3))  # per point [g, p × g, ġ, ṗ × g + p × ġ]
    g = cols[:, 0]
    g[...] = (k1[:, None, :] @ diff)[:, 0]
    cols[:, 2] = (k2[:, None, :] @ diff)[:, 0] + k1.sum(axis=1)[:, None] * p_dot
    px = Sk_p @ cols[:, 0::2].transpose(0, 2, 1)  # p × g, p × ġ
    cols[:, 1] = px[:, :, 0]
    cols[:, 3] = px[:, :, 1] + (p_dot.dot(_SKEW).reshape(-1, 3, 3) @ g[:, :, None])[:, :, 0]
    w = cols.reshape(-1, 12).T.dot(point_support)  # (12, n): the wrenches and their rates on every joint
    grad = (jacobian * w[:6]).sum(axis=0)
    rate = (jacobian_rate * w[:6] + jacobian * w[6:]).sum(axis=0)
    return U, grad, rate


def _joint_space_tables(field):
    tables = field.__dict__.get("_joint_space_tables")
    if tables is None:
        centers, radii = _obstacle_arrays(field)
        tables = field.__dict__["_joint_space_tables"] = (centers, (field.influence + radii) ** 2)
    return tables


def _tables(field, n):
    """Cached per field: obstacle centres, d₀ + radius, control-point bodies, the (3P, 9N) map from
    the stacked attitudes to the points' arms ``R_b a`` and the (N, P) selector that sums the points of
    each body."""
    tables = field.__dict__.get("_tables")
    if tables is None or tables[-1].shape[0] != n:
        centers, radii = _obstacle_arrays(field)
        body = np.asarray(field.points_body, dtype=int)
        offsets = np.asarray(field.points_offset, dtype=float).reshape(-1, 3)
        p = len(body)
        sel = np.zeros((n, p))
        sel[body, np.arange(p)] = 1.0
        arm_map = np.zeros((3 * p, 9 * n))  # (R_b a)_i = Σ_j R_b[i, j] a_j
        for k in range(p):
            for i in range(3):
                arm_map[3 * k + i, 9 * body[k] + 3 * i : 9 * body[k] + 3 * i + 3] = offsets[k]
        tables = (centers, field.influence + radii, body, arm_map, sel)
        field.__dict__["_tables"] = tables
    return tables


def _obstacle_arrays(field):
    arrays = field.__dict__.get("_arrays")
    if arrays is None:
        arrays = (
            np.array([o.center for o in field.obstacles], dtype=float).reshape(-1, 3),
            np.array([o.radius for o in field.obstacles], dtype=float),
        )
        field.__dict__["_arrays"] = arrays
    return arrays


def _selector(field, n):
    sel = field.__dict__.get("_selector")
    if sel is None or sel.shape[0] != n:
        sel = np.zeros((n, len(field.points_body)))
        sel[field.points_body, np.arange(len(field.points_body))] = 1.0
        field.__dict__["_selector"] = sel
    return sel
