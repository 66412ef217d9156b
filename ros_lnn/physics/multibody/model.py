"""Coordinate-free Newton–Euler model of a multibody system (seed 004 §2, EQUATIONS.md §6).

Every tensor is expressed in the inertial frame I. A :class:`MultibodyModel` is the immutable
description (bodies, joints, gravity and precomputed index tables); :func:`update` evaluates a
:class:`MultibodyData` workspace at one state (Pinocchio's model/data split). Algorithms are plain
functions named after what they compute: :func:`mass_matrix`, :func:`constraint_jacobian`,
:func:`generalized_force`, :func:`forward_dynamics` (the KKT system of eq 32), :func:`momentum`,
:func:`energy`, :func:`joint_mismatch`.

State: body centre-of-mass positions ``r`` (N, 3), attitudes ``quat`` (N, 4; body → inertial,
scalar first) and the twist ``ν = [v_1 … v_N, ω_1 … ω_N]`` (6N). The port ``τ = [f_1 … f_N,
m_1 … m_N]`` has the same layout.

Joints (joint k joins parent body p — or the world, p = -1 — to child body c):

* every joint makes its two anchor points coincide: three rows ``v_c + S_c ω_c − v_p − S_p ω_p = 0``
  with ``s_c = r_c − r_J`` (eq 27 for the chain, where p = j and c = j+1);
* ``revolute`` adds two rows blocking rotation about the directions normal to its axis,
  ``n_iᵀ(ω_c − ω_p) = 0``, ``fixed`` adds three; their multipliers are constraint moments;
* ``spherical`` joints carry torsional springs on the relative XYZ Euler angles (eqs 19–24);
  revolute joints may carry a spring/damper about the axis. Spring moments enter 𝓕 as ``C_F M_J``;
* ``prismatic`` joints are described (URDF arms) but have no constraint rows here: models with one are
  evaluated in joint coordinates on Pinocchio (:mod:`ros_lnn.physics.multibody.pin`).

Sign of the joint forces. Eqs 6–7 and 17 give body p the force ``+f_J`` and body c ``−f_J``
(``C_F = −J_vᵀ``), i.e. ``𝓜 ν̇ = 𝓕 − Jᵀ F_J``; eq 32 as printed (unknown ``−F_J``) has the opposite
sign. We follow eqs 6–7 and solve ``[𝓜 Jᵀ; J 0] [ν̇; F_J] = [𝓕; γ]``: ``F_J`` is the force the child
exerts on the parent at the joint (a constraint moment, likewise, for the rotation rows).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ...errors import ConfigError
from .quaternion import _SKEW, cross, quat_to_matrix

_I3 = np.eye(3)
JOINT_KINDS = ("spherical", "revolute", "fixed", "prismatic")
SPRING_LAWS = ("paper", "potential")


@dataclass(frozen=True)
class Body:
    name: str
    mass: float
    inertia: np.ndarray  # (3, 3) about the centre of mass, body coordinates


@dataclass(frozen=True)
class Joint:
    name: str
    kind: str
    parent: int  # body index, -1 for the world
    child: int
    anchor_parent: np.ndarray  # joint point from the parent's CoM, parent coordinates (world if parent = -1)
    anchor_child: np.ndarray  # joint point from the child's CoM, child coordinates
    rest: np.ndarray = field(default_factory=lambda: np.eye(3))  # child attitude in parent frame at q = 0
    axis: np.ndarray = field(default_factory=lambda: np.array([0.0, 0.0, 1.0]))  # revolute, child coordinates
    stiffness: np.ndarray = field(default_factory=lambda: np.zeros(3))  # spherical (3,) / revolute (1,)
    damping: float = 0.0
    effort_limit: float = np.inf
    velocity_limit: float = np.inf


def _normals(axis: np.ndarray) -> np.ndarray:
    """Two unit vectors completing ``axis`` to a right-handed orthonormal triad."""
    a = axis / np.linalg.norm(axis)
    t = np.eye(3)[int(np.argmin(np.abs(a)))]
    n1 = cross(a, t)
    n1 /= np.linalg.norm(n1)
    return np.stack([n1, cross(a, n1)])


class MultibodyModel:
    """Immutable description of a tree of rigid bodies (a chain in the paper) plus index tables."""

    # URDF models only (physics.multibody.urdf): link -> (body, R_link_in_body, p_link_from_CoM)
    frames: dict[str, tuple[int, np.ndarray, np.ndarray]]
    joint_position_limits: dict[str, tuple[float, float]]  # joint name -> (lower, upper), URDF models only

    def __init__(
        self, bodies, joints, gravity=(0.0, 0.0, -9.81), spring_law: str = "paper", name: str = "multibody"
    ):
        self.name = name
        self.bodies = tuple(bodies)
        self.joints = tuple(joints)
        self.gravity = np.asarray(gravity, dtype=float).reshape(3)
        if spring_law not in SPRING_LAWS:
            raise ConfigError(f"multibody '{name}': spring_law '{spring_law}' is not one of {SPRING_LAWS}")
        self.spring_law = spring_law
        n = self.n_bodies = len(self.bodies)
        if n == 0:
            raise ConfigError(f"multibody '{name}': no bodies; give at least one body with mass and inertia")
        for b in self.bodies:
            ev = np.linalg.eigvalsh(0.5 * (b.inertia + b.inertia.T))
            if not (b.mass > 0 and np.all(ev > 0)):
                raise ConfigError(
                    f"body '{b.name}': mass and inertia must be positive definite "
                    f"(mass {b.mass}, inertia eigenvalues {ev}); fix its parameters"
                )
        self._check_topology()
        self.masses = np.array([b.mass for b in self.bodies])
        self.inertia_body = np.stack([b.inertia for b in self.bodies])
        self.inertia_body_inv = np.linalg.inv(self.inertia_body)
        js = self.joints
        k = self.n_joints = len(js)
        self.parent = np.array([j.parent for j in js], dtype=int)
        self.child = np.array([j.child for j in js], dtype=int)
        self.has_parent = self.parent >= 0
        self.anchor_parent = np.array([j.anchor_parent for j in js], dtype=float).reshape(k, 3)
        self.anchor_child = np.array([j.anchor_child for j in js], dtype=float).reshape(k, 3)
        self.rest = np.array([j.rest for j in js], dtype=float).reshape(k, 3, 3)
        self.axis = np.array([np.asarray(j.axis, float) / np.linalg.norm(j.axis) for j in js]).reshape(k, 3)
        kinds = [j.kind for j in js]
        self.spherical = np.array([i for i, kd in enumerate(kinds) if kd == "spherical"], dtype=int)
        self.revolute = np.array([i for i, kd in enumerate(kinds) if kd == "revolute"], dtype=int)
        self.sph_stiffness = np.array(
            [np.broadcast_to(js[i].stiffness, 3) for i in self.spherical], dtype=float
        ).reshape(-1, 3)
        self.rev_stiffness = np.array([float(np.ravel(js[i].stiffness)[0]) for i in self.revolute])
        self.damping = np.array([j.damping for j in js], dtype=float)
        # rotation rows: (joint, direction in the joint's rest frame R_p R0)
        rot_joint, rot_dir = [], []
        for i, j in enumerate(js):
            if j.kind == "revolute":
                a_rest = self.rest[i] @ self.axis[i]  # axis in the parent frame
                for nvec in _normals(a_rest):
                    rot_joint.append(i)
                    rot_dir.append(self.rest[i].T @ nvec)
            elif j.kind == "fixed":
                rot_joint += [i, i, i]
                rot_dir += list(np.eye(3))
        self.rot_joint = np.array(rot_joint, dtype=int)
        self.rot_dir = np.array(rot_dir, dtype=float).reshape(-1, 3)
        self.n_constraints = 3 * k + len(rot_joint)
        self.prismatic = tuple(j.name for j in js if j.kind == "prismatic")
        self._index_tables()

    # ----------------------------------------------------------------- set-up helpers
    def _check_topology(self):
        children = {j.child for j in self.joints}
        roots = [i for i in range(len(self.bodies)) if i not in children]
        if len(roots) > 1 and not any(j.parent == -1 for j in self.joints):
            raise ConfigError(
                f"multibody '{self.name}': bodies {[self.bodies[i].name for i in roots]} are "
                "not connected; join every body to the chain or to the world"
            )
        if len(roots) > 1 or (roots and any(j.parent == -1 for j in self.joints)):
            raise ConfigError(
                f"multibody '{self.name}': body '{self.bodies[roots[0]].name}' has no parent "
                "joint while others hang from the world; join it to the chain"
            )
        placed = set(roots)
        for j in self.joints:
            if j.kind not in JOINT_KINDS:
                raise ConfigError(f"joint '{j.name}': kind '{j.kind}' is not one of {JOINT_KINDS}")
            if not (0 <= j.child < len(self.bodies)) or not (-1 <= j.parent < len(self.bodies)):
                raise ConfigError(f"joint '{j.name}': parent/child index out of range")
            if j.child in placed:
                raise ConfigError(
                    f"joint '{j.name}': body '{self.bodies[j.child].name}' already has a parent "
                    "(closed loops are not supported)"
                )
            if j.parent != -1 and j.parent not in placed:
                raise ConfigError(
                    f"joint '{j.name}': list joints parent-first (parent "
                    f"'{self.bodies[j.parent].name}' is not attached yet)"
                )
            placed.add(j.child)
        self.floating_root = roots[0] if roots else None

    def _index_tables(self):
        """Flat index tables so that the per-step tensors are filled with a few array operations."""
        n, k = self.n_bodies, self.n_joints
        cols = 6 * n
        ar3 = np.arange(3)
        hp = self.has_parent
        # the world is the extra index n of the (N+1)-stacked attitudes/positions/rates (R = I, r = ω = 0)
        self._parent_ext = np.where(hp, self.parent, n)
        self._pc_index = np.concatenate([self._parent_ext, self.child])  # parent side, then child side
        self._anchors = np.concatenate([self.anchor_parent, self.anchor_child])[..., None]
        self._arm_sign = np.concatenate([-hp.astype(float), -np.ones(k)])[:, None]  # → [s_p; s_c]
        jv = np.zeros((3 * k, cols))
        for i in range(k):
            jv[3 * i : 3 * i + 3, 3 * self.child[i] : 3 * self.child[i] + 3] = np.eye(3)
            if self.parent[i] >= 0:
                jv[3 * i : 3 * i + 3, 3 * self.parent[i] : 3 * self.parent[i] + 3] = -np.eye(3)
        self._J0 = np.zeros((self.n_constraints, cols))
        self._J0[: 3 * k] = jv
        # point rows: the child block of J is skew(s_c), the parent block −skew(s_p); flat positions of
        # the 9 entries of each block, children first, then the joints with a parent body
        rows = (3 * np.arange(k)[:, None, None] + ar3[None, :, None]) * cols
        flat_c = rows + 3 * n + 3 * self.child[:, None, None] + ar3[None, None, :]
        flat_p = rows + 3 * n + 3 * np.maximum(self.parent, 0)[:, None, None] + ar3[None, None, :]
        self._pt_flat = np.concatenate([flat_c.ravel(), flat_p[hp].ravel()])
        self._pt_side = np.concatenate([k + np.arange(k), np.flatnonzero(hp)])  # rows of [s_p; s_c]
        self._pt_sign = np.concatenate([np.ones(k), -np.ones(int(hp.sum()))])[:, None]
        nr = len(self.rot_joint)
        rp = hp[self.rot_joint] if nr else np.zeros(0, bool)
        rrows = ((3 * k + np.arange(nr)) * cols)[:, None]
        rot_c = rrows + 3 * n + 3 * self.child[self.rot_joint][:, None] + ar3[None, :]
        rot_p = rrows + 3 * n + 3 * np.maximum(self.parent[self.rot_joint], 0)[:, None] + ar3[None, :]
        self._rot_flat = np.concatenate([rot_c.ravel(), rot_p[rp].ravel()])
        self._rot_side = np.concatenate([np.arange(nr), np.flatnonzero(rp)])
        self._rot_sign = np.concatenate([np.ones(nr), -np.ones(int(rp.sum()))])[:, None]
        self._rot_parent_ext = self._parent_ext[self.rot_joint]
        self._rot_child = self.child[self.rot_joint]
        # blocked directions in the parent frame: n = R_p (R0 d)
        self._rot_dir_parent = (
            (self.rest[self.rot_joint] @ self.rot_dir[:, :, None]) if nr else np.zeros((0, 3, 1))
        )
        self._rest_sph = self.rest[self.spherical]
        self._rest_sph_identity = bool(
            np.array_equal(self._rest_sph, np.broadcast_to(np.eye(3), self._rest_sph.shape))
        )
        self._all_spherical = bool(np.array_equal(self.spherical, np.arange(k)))
        self._rest_rev_axis = self.rest[self.revolute] @ self.axis[self.revolute][:, :, None]
        self._has_sph_spring = bool(len(self.spherical) and np.any(self.sph_stiffness))
        self._has_rev_spring = bool(len(self.revolute) and np.any(self.rev_stiffness))
        self._inertia_stack = np.stack([self.inertia_body, self.inertia_body_inv])  # (2, N, 3, 3)
        self._inv_mass3 = (1.0 / self.masses)[:, None]
        # descendants (child and below) of every joint, for G(q)
        desc = np.zeros((k, n), dtype=bool)
        for i in reversed(range(k)):
            desc[i, self.child[i]] = True
            for m in range(k):
                if self.parent[m] == self.child[i]:
                    desc[i] |= desc[m]
        self.descendants = desc
        inc = np.zeros((n, k))
        inc[self.child, np.arange(k)] = -1.0
        inc[self.parent[self.has_parent], np.flatnonzero(self.has_parent)] = 1.0
        self._moment_incidence = inc

    # ----------------------------------------------------------------- names
    @property
    def body_names(self):
        return tuple(b.name for b in self.bodies)

    @property
    def joint_names(self):
        return tuple(j.name for j in self.joints)

    def port_labels(self):
        """Labels of the 6N port/twist entries: ``f_<body>_x`` … then ``m_<body>_x`` …"""
        ax = "xyz"
        return [f"f_{b}_{a}" for b in self.body_names for a in ax] + [
            f"m_{b}_{a}" for b in self.body_names for a in ax
        ]

    def body_index(self, name: str) -> int:
        try:
            return self.body_names.index(name)
        except ValueError:
            raise ConfigError(
                f"multibody '{self.name}': no body named '{name}' (bodies: {self.body_names})"
            ) from None


@dataclass
class MultibodyData:
    """Workspace: everything the algorithms need at one state, in inertial coordinates."""

    r: np.ndarray
    quat: np.ndarray
    nu: np.ndarray
    R: np.ndarray  # (N, 3, 3) body → inertial
    inertia: np.ndarray  # (N, 3, 3) I_i = R_i I_i^B R_iᵀ
    inertia_inv: np.ndarray
    omega: np.ndarray  # (N, 3)
    v: np.ndarray  # (N, 3)
    R_parent: np.ndarray  # (K, 3, 3), identity for the world
    s_child: np.ndarray  # (K, 3)  s_{B_c J} = r_c − r_J
    s_parent: np.ndarray  # (K, 3)
    point_child: np.ndarray  # (K, 3) joint point seen from the child
    point_parent: np.ndarray
    rot_normals: np.ndarray  # (R, 3) blocked rotation directions in inertial coordinates
    J: np.ndarray
    joint_moments: np.ndarray  # (K, 3)  M_J per joint (spring + damper)
    joint_moment_port: np.ndarray  # (6N,)  [0; C_F M_J]
    spring_energy: float
    model: MultibodyModel | None = field(default=None, repr=False, compare=False)

    # γ and 𝓒(ν)ν are evaluated on first use: the control laws never read them, the dynamics always do
    @property
    def gamma(self) -> np.ndarray:
        """Right-hand side of ``J ν̇ = γ`` (the velocity-product terms of the differentiated constraints)."""
        g = self.__dict__.get("_gamma")
        if g is None:
            g = self.__dict__["_gamma"] = _gamma(self.model, self)
        return g

    @property
    def gyroscopic(self) -> np.ndarray:
        """``𝓒(ν)ν = [0; ω_i × I_i ω_i]`` (6N,)."""
        g = self.__dict__.get("_gyroscopic")
        if g is None:
            assert self.model is not None, "MultibodyData.gyroscopic needs the workspace's model"
            n = self.model.n_bodies
            g = np.zeros(6 * n)
            g[3 * n :] = cross(self.omega, (self.inertia @ self.omega[:, :, None])[:, :, 0]).ravel()
            self.__dict__["_gyroscopic"] = g
        return g


def update(model: MultibodyModel, r, quat, nu, pose: MultibodyData | None = None) -> MultibodyData:
    """Evaluate the inertial-frame tensors of eqs 7–33 at one state.

    ``pose``: a workspace already evaluated at the same ``r, quat`` (any twist); its configuration-only
    tensors (attitudes, inertias, joint arms, J) are reused and only the twist-dependent ones computed.
    """
    n, k = model.n_bodies, model.n_joints
    nu = np.asarray(nu, dtype=float).reshape(6 * n)
    fields: dict[str, Any]
    if pose is None:
        fields = _pose(
            model, np.asarray(r, dtype=float).reshape(n, 3), np.asarray(quat, dtype=float).reshape(n, 4)
        )
        s_pc = fields.pop("_s_pc")
    else:
        s_pc = getattr(pose, "_s_pc", None)
        fields = {name: getattr(pose, name) for name in _POSE_FIELDS}
        if s_pc is None:
            s_pc = np.concatenate([fields["s_parent"], fields["s_child"]])
    v, omega = nu[: 3 * n].reshape(n, 3), nu[3 * n :].reshape(n, 3)
    w_ext = np.empty((n + 1, 3))  # the world (last row) does not turn
    w_ext[:n], w_ext[n] = omega, 0.0
    w_pc = w_ext.take(model._pc_index, axis=0)  # [ω_p; ω_c] per joint (take: cheaper than fancy indexing)
    w_p, w_c = w_pc[:k], w_pc[k:]
    moments, spring_energy = _joint_moments(
        model, fields["R_parent"], fields["R"].take(model.child, axis=0), w_p, w_c
    )
    mj_port = np.zeros(6 * n)
    mj_port[3 * n :] = model._moment_incidence.dot(
        moments
    ).ravel()  # C_F M_J: +m on the parent, −m on the child
    fields.update(
        nu=nu,
        omega=omega,
        v=v,
        joint_moments=moments,
        joint_moment_port=mj_port,
        spring_energy=spring_energy,
        model=model,
    )
    data = MultibodyData(**fields)
    data.__dict__.update(_s_pc=s_pc, _w_pc=w_pc)  # [s_p; s_c] and [ω_p; ω_c] per joint, for γ and J̇
    return data


def _joint_rates_and_arms(model, data):
    """``[ω_p; ω_c]`` and ``[s_p; s_c]`` per joint (kept by :func:`update`; rebuilt for other workspaces)."""
    w_pc, s_pc = getattr(data, "_w_pc", None), getattr(data, "_s_pc", None)
    if w_pc is None or s_pc is None:
        w_pc = np.concatenate([data.omega, np.zeros((1, 3))])[model._pc_index]
        s_pc = np.concatenate([data.s_parent, data.s_child])
    return w_pc, s_pc


def _gamma(model, data) -> np.ndarray:
    k = model.n_joints
    w_ext = np.concatenate([data.omega, np.zeros((1, 3))])
    w_pc, s_pc = _joint_rates_and_arms(model, data)
    g2 = cross(w_pc, cross(w_pc, s_pc))
    gamma = np.empty(model.n_constraints)
    gamma[: 3 * k] = (g2[k:] - g2[:k]).ravel()
    if len(model.rot_joint):
        wr_p, wr_c = w_ext.take(model._rot_parent_ext, axis=0), data.omega.take(model._rot_child, axis=0)
        gamma[3 * k :] = -np.sum(cross(wr_p, data.rot_normals) * (wr_c - wr_p), axis=1)
    return gamma


def pose_only(model, r, quat, fk_parts=None):
    """A workspace holding only the configuration tensors (for ``G``, ``J``; no twist quantities).
    ``fk_parts``: what :func:`forward_kinematics` already computed at this configuration (its
    ``parts`` dictionary: the (N+1)-stacked attitudes and the joint arms), reused instead of recomputed."""
    from types import SimpleNamespace

    n = model.n_bodies
    return SimpleNamespace(
        **_pose(model, np.asarray(r, float).reshape(n, 3), np.asarray(quat, float).reshape(n, 4), fk_parts)
    )


def _pose(model, r, quat, fk_parts=None) -> dict:
    """Configuration-only tensors: attitudes, inertias, joint arms and points, normals, J."""
    require_maximal_coordinates(model)
    n, k = model.n_bodies, model.n_joints
    if fk_parts:
        R_ext, arm_pc = fk_parts["R_ext"], fk_parts["arm_pc"]
    else:
        R_ext = np.empty((n + 1, 3, 3))
        R_ext[:n] = quat_to_matrix(quat)
        R_ext[n] = _I3
        arm_pc = None
    R = R_ext[:n]
    inert = R @ model._inertia_stack @ R.transpose(0, 2, 1)  # R I^B Rᵀ and R (I^B)⁻¹ Rᵀ
    R_pc = R_ext.take(model._pc_index, axis=0)
    if arm_pc is None:
        arm_pc = (R_pc @ model._anchors)[:, :, 0]  # [r_J − r_p; r_J − r_c]
    s_pc = arm_pc * model._arm_sign  # [s_p (0 for the world); s_c]
    r_ext = np.empty((n + 1, 3))
    r_ext[:n], r_ext[n] = r, 0.0
    points = r_ext.take(model._pc_index, axis=0) + arm_pc
    J = model._J0.copy()
    Jf = J.reshape(-1)
    Jf[model._pt_flat] = (s_pc.take(model._pt_side, axis=0) * model._pt_sign).dot(_SKEW).ravel()
    if len(model.rot_joint):
        normals = (R_ext.take(model._rot_parent_ext, axis=0) @ model._rot_dir_parent)[:, :, 0]
        Jf[model._rot_flat] = (normals.take(model._rot_side, axis=0) * model._rot_sign).ravel()
    else:
        normals = np.zeros((0, 3))
    return dict(
        r=r,
        quat=quat,
        R=R,
        inertia=inert[0],
        inertia_inv=inert[1],
        R_parent=R_pc[:k],
        s_child=s_pc[k:],
        s_parent=s_pc[:k],
        point_child=points[k:],
        point_parent=points[:k],
        rot_normals=normals,
        J=J,
        _s_pc=s_pc,
    )


_POSE_FIELDS = (
    "r",
    "quat",
    "R",
    "inertia",
    "inertia_inv",
    "R_parent",
    "s_child",
    "s_parent",
    "point_child",
    "point_parent",
    "rot_normals",
    "J",
)


def require_maximal_coordinates(model) -> None:
    """ConfigError naming the prismatic joints, which the maximal-coordinate algorithms do not cover."""
    if model.prismatic:
        raise ConfigError(
            f"multibody '{model.name}': prismatic joints {list(model.prismatic)} have no constraint "
            "rows in the maximal-coordinate model; use the joint-space (Pinocchio) backend"
        )


_EULER_GATHER = np.array([5, 2, 1, 8, 8, 0])  # flat entries of R: R₁₂, R₀₂, R₀₁, R₂₂, (cos θ), R₀₀
_EULER_SIGN = np.array([-1.0, 1.0, -1.0, 1.0, 1.0, 1.0])
_PAPER_GEN = np.array([0, 1, 1])
_PAPER_PHASE = np.array([[0.0, 1.0, 1.0], [0.0, 0.0, -0.5 * np.pi]])


def _joint_moments(model, R_p, R_c, w_p, w_c):
    """Internal joint moments ``M_J`` (eq 19 and a revolute spring/damper); body p gets +m, body c −m."""
    m = model.damping[:, None] * (w_c - w_p)
    energy = 0.0
    if model._has_sph_spring:
        sph = model.spherical
        every = model._all_spherical
        R_ps = R_p if every else R_p[sph]
        frame = R_ps if model._rest_sph_identity else R_ps @ model._rest_sph  # parent-side rest frame
        Rc = R_c if every else R_c[sph]
        rel = (frame.transpose(0, 2, 1) @ Rc).reshape(-1, 9)
        # relative XYZ Euler angles (eq 20): φ = atan2(−R₁₂, R₂₂), θ = asin R₀₂, ψ = atan2(−R₀₁, R₀₀)
        # as one arctan2 over [−R₁₂, R₀₂, −R₀₁] / [R₂₂, cos θ, R₀₀] with cos θ = hypot(R₁₂, R₂₂) ≥ 0
        # (θ = atan2(sin θ, cos θ) is asin R₀₂ on |θ| ≤ π/2, without a clip)
        g = rel.take(_EULER_GATHER, axis=1) * _EULER_SIGN
        np.hypot(g[:, 0], g[:, 3], out=g[:, 4])
        angles = np.arctan2(g[:, :3], g[:, 3:])
        phi = angles[:, 0]
        gen = model.sph_stiffness * angles  # K θ per Euler angle
        if model.spring_law == "paper":
            # K₁φ e₁ + K₂θ e₂ with e₂ = frame [0, cos φ, sin φ]ᵀ is one product with the frame:
            # c = [K₁φ, K₂θ cos φ, K₂θ sin φ] = gen[0, 1, 1] · cos([0, φ, φ − π/2])
            c = gen.take(_PAPER_GEN, axis=1) * np.cos(phi[:, None] * _PAPER_PHASE[0] + _PAPER_PHASE[1])
            m_s = (frame @ c[:, :, None])[:, :, 0] + gen[:, 2:] * Rc[:, :, 2]
        else:  # conservative: m · e_l = K_l θ_l, the gradient of ½ Σ K θ²
            e2 = frame[:, :, 1] * np.cos(phi)[:, None] + frame[:, :, 2] * np.sin(phi)[:, None]
            E = np.stack([frame[:, :, 0], e2, Rc[:, :, 2]], axis=2)
            m_s = np.linalg.solve(E.transpose(0, 2, 1), gen[..., None])[..., 0]
        if every:
            m += m_s
        else:
            m[sph] += m_s
        energy += 0.5 * float(gen.reshape(-1).dot(angles.reshape(-1)))
    if model._has_rev_spring:
        rev = model.revolute
        q = revolute_angles(model, R_p, R_c)[rev]
        a = (R_p[rev] @ model._rest_rev_axis)[:, :, 0]
        m[rev] += model.rev_stiffness[:, None] * q[:, None] * a
        energy += 0.5 * float(np.sum(model.rev_stiffness * q**2))
    return m, energy


def revolute_angles(model, R_p, R_c) -> np.ndarray:
    """Rotation angle of every joint about its axis (0 for non-revolute joints), from the attitudes."""
    rel = model.rest.transpose(0, 2, 1) @ R_p.transpose(0, 2, 1) @ R_c
    vee = 0.5 * np.stack(
        [rel[:, 2, 1] - rel[:, 1, 2], rel[:, 0, 2] - rel[:, 2, 0], rel[:, 1, 0] - rel[:, 0, 1]], 1
    )
    q = np.arctan2(np.sum(vee * model.axis, axis=1), 0.5 * (np.trace(rel, axis1=1, axis2=2) - 1.0))
    q[np.array([j.kind != "revolute" for j in model.joints], dtype=bool)] = 0.0
    return q


# ----------------------------------------------------------------------------- algorithms
def mass_matrix(model: MultibodyModel, data: MultibodyData) -> np.ndarray:
    """𝓜 = blockdiag(m_i I₃ …, I_i …), 6N × 6N (eq 61)."""
    n = model.n_bodies
    M = np.zeros((6 * n, 6 * n))
    M[: 3 * n, : 3 * n] = np.kron(np.diag(model.masses), np.eye(3))
    for i in range(n):
        M[3 * n + 3 * i : 3 * n + 3 * i + 3, 3 * n + 3 * i : 3 * n + 3 * i + 3] = data.inertia[i]
    return M


def apply_mass(model, data, x: np.ndarray) -> np.ndarray:
    """𝓜 x for x of shape (6N,) or (6N, k) without forming 𝓜."""
    n = model.n_bodies
    x = np.asarray(x, dtype=float)
    xs = x.reshape((2, n, 3) + x.shape[1:])
    lin = model.masses.reshape((n, 1) + (1,) * (x.ndim - 1)) * xs[0]
    ang = np.einsum("nij,nj...->ni...", data.inertia, xs[1])
    return np.concatenate([lin, ang]).reshape(x.shape)


def apply_mass_inverse(model, data, x: np.ndarray) -> np.ndarray:
    """𝓜⁻¹ x (block-diagonal inverse)."""
    n = model.n_bodies
    x = np.asarray(x, dtype=float)
    xs = x.reshape((2, n, 3) + x.shape[1:])
    lin = xs[0] / model.masses.reshape((n, 1) + (1,) * (x.ndim - 1))
    ang = np.einsum("nij,nj...->ni...", data.inertia_inv, xs[1])
    return np.concatenate([lin, ang]).reshape(x.shape)


def gravity_port(model) -> np.ndarray:
    """[M_v g_3N; 0] (read-only; kept on the model until its gravity changes)."""
    key = model.gravity.tobytes()
    cached = model.__dict__.get("_gravity_port")
    if cached is None or cached[0] != key:
        n = model.n_bodies
        port = np.concatenate([(model.masses[:, None] * model.gravity).ravel(), np.zeros(3 * n)])
        port.setflags(write=False)
        cached = model._gravity_port = (key, port)
    return cached[1]


def generalized_force(model, data, port) -> np.ndarray:
    """𝓕 = [F_B + M_v g; M_B + C_F M_J − 𝓒(ν)ν] (eq 33) with the port τ = [F_B; M_B]."""
    return np.asarray(port, dtype=float) + gravity_port(model) + data.joint_moment_port - data.gyroscopic


def constraint_violation(model, data) -> np.ndarray:
    """Position-level constraint residual φ, one entry per row of J (joint point gap, axis misalignment)."""
    gap = (data.point_child - data.point_parent).ravel()
    nr = len(model.rot_joint)
    if not nr:
        return gap
    out = np.zeros(nr)
    R_c = data.R[model.child]
    for i in np.unique(model.rot_joint):
        rows = np.flatnonzero(model.rot_joint == i)
        frame = data.R_parent[i] @ model.rest[i]
        if model.joints[i].kind == "revolute":
            eps = cross(frame @ model.axis[i], R_c[i] @ model.axis[i])
        else:
            E = R_c[i] @ frame.T
            eps = 0.5 * np.array([E[2, 1] - E[1, 2], E[0, 2] - E[2, 0], E[1, 0] - E[0, 1]])
        out[rows] = data.rot_normals[rows] @ eps
    return np.concatenate([gap, out])


def forward_dynamics(model, data, port, baumgarte: tuple[float, float] | None = None):
    """Solve the augmented system (eq 32) for ``(ν̇, F_J)``.

    ``baumgarte=(α, β)`` replaces ``J ν̇ = γ`` by ``J ν̇ = γ − 2α Jν − β² φ`` (constraint
    stabilisation for simulation; ``None`` gives the exact model). Solved through the Schur complement
    ``S = J 𝓜⁻¹ Jᵀ`` with the block-diagonal 𝓜⁻¹ (eq 35).
    """
    F = generalized_force(model, data, port)
    rhs = data.gamma
    if baumgarte is not None:
        a, b = baumgarte
        rhs = rhs - 2.0 * a * (data.J @ data.nu) - b * b * constraint_violation(model, data)
    MiF = apply_mass_inverse(model, data, F)
    if model.n_constraints == 0:
        return MiF, np.zeros(0)
    MiJt = apply_mass_inverse(model, data, data.J.T)
    S = data.J @ MiJt
    f_j = np.linalg.solve(S, data.J @ MiF - rhs)
    return MiF - MiJt @ f_j, f_j


def kkt_matrix(model, data) -> np.ndarray:
    """K = [𝓜 Jᵀ; J 0] (eq 34), dense, for checks."""
    M = mass_matrix(model, data)
    J = data.J
    m = J.shape[0]
    return np.block([[M, J.T], [J, np.zeros((m, m))]])


def momentum(model, data):
    """Total linear momentum and angular momentum about the inertial origin."""
    mv = model.masses[:, None] * data.v
    p = mv.sum(axis=0)
    L = np.sum(cross(data.r, mv) + np.einsum("nij,nj->ni", data.inertia, data.omega), axis=0)
    return p, L


def energy(model, data) -> dict:
    """Kinetic, gravitational and spring energies (the spring energy is a potential only for
    ``spring_law='potential'``; the paper's law of eq 19 is not conservative away from small angles)."""
    T = 0.5 * float(np.sum(model.masses * np.sum(data.v**2, axis=1))) + 0.5 * float(
        np.einsum("ni,nij,nj->", data.omega, data.inertia, data.omega)
    )
    Vg = -float(np.sum(model.masses * (data.r @ model.gravity)))
    return {"kinetic": T, "gravity": Vg, "spring": data.spring_energy, "total": T + Vg + data.spring_energy}


def joint_mismatch(model, data) -> np.ndarray:
    """Distance between the two sides of every joint point (the integral of the velocity constraint)."""
    return np.linalg.norm(data.point_child - data.point_parent, axis=1)


def constraint_jacobian_rate(model, data) -> np.ndarray:
    """``J̇`` along the current twist: ``ṡ = ω × s`` for the joint arms, ``ṅ = ω_p × n`` for the normals."""
    Jd = np.zeros(data.J.shape)
    Jf = Jd.reshape(-1)
    w_pc, s_pc = _joint_rates_and_arms(model, data)
    s_dot = cross(w_pc, s_pc)
    Jf[model._pt_flat] = (s_dot.take(model._pt_side, axis=0) * model._pt_sign).dot(_SKEW).ravel()
    if len(model.rot_joint):
        w_ext = np.concatenate([data.omega, np.zeros((1, 3))])
        nd = cross(w_ext.take(model._rot_parent_ext, axis=0), data.rot_normals)
        Jf[model._rot_flat] = (nd.take(model._rot_side, axis=0) * model._rot_sign).ravel()
    return Jd
