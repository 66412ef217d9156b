"""Pinocchio backend of the multibody model for fixed-base trees of revolute, prismatic and fixed joints.

The coordinate-free model (:mod:`ros_lnn.physics.multibody`) keeps every body in maximal coordinates and
the joints as constraints. A fixed-base arm driven through its joints always sits on the constraint
manifold, so everything the DAC laws read follows from joint coordinates, and Pinocchio computes it in a
few C++ passes. With Pinocchio's WORLD joint Jacobian ``𝒥 = [𝒥_v; 𝒥_ω]`` (the spatial velocity at the
world origin; ``𝒥_b`` its columns of the joints that support body b) and the body's CoM ``r_b``:

* pose: ``R_b = R_j R_b^j``, ``r_b = p_j + R_j c_b`` from the placement ``(R_j, p_j)`` of the body's joint;
* twist map (eq 27 solved): ``ν_b = G_b q̇``, ``G_b = [𝒥_v,b − [r_b]× 𝒥_ω,b; 𝒥_ω,b]``; its rate
  ``Ġ_b = [𝒥̇_v,b − [ṙ_b]× 𝒥_ω,b − [r_b]× 𝒥̇_ω,b; 𝒥̇_ω,b]`` from ``𝒥̇`` (computeJointJacobiansTimeVariation);
* the dual map of a port ``τ = [f_b; m_b]``: ``Gᵀ τ = Σ_b 𝒥_bᵀ [f_b; m_b + r_b × f_b]`` (each wrench moved
  to the world origin) — no 6N × n matrix is formed;
* joint-space inertia ``H = Gᵀ𝓜G`` (crba), Pinocchio's Coriolis matrix C with ``Ḣ = C + Cᵀ`` and
  ``C q̇ = Gᵀ(𝓜Ġ + 𝓒(ν)G) q̇`` (the package's own factorisation ``Gᵀ(𝓜Ġ + 𝓒(ν)G)`` is another one: the two
  differ on vectors other than q̇), and ``Gᵀ[M_v g; 0] = −g(q)``;
* forward dynamics ``q̈ = aba(q, q̇, u)`` in joint coordinates: no constraint drift to stabilise.

Joint springs and dampers of the description are joint-space efforts ``u_p = −K q − D q̇``; their port is
``E u_p`` (a moment pair about a revolute axis, a force pair along a prismatic axis), the ``C_F M_J`` of
eq 33. The spherical joints and the floating root of the paper's chain stay on the maximal-coordinate
model (its spring law acts on relative Euler angles and its joint forces come from the KKT system).
"""

from __future__ import annotations

from functools import cached_property

import numpy as np
import pinocchio as pin

from ...errors import ConfigError
from .model import MultibodyModel
from .quaternion import _SKEW

_MOVING = ("revolute", "prismatic")


def _joint_model(kind: str, axis: np.ndarray):
    """Pinocchio's joint about/along ``axis`` (child coordinates): the aligned RX…PZ when it is one."""
    for i, name in enumerate("XYZ"):
        if np.array_equal(axis, np.eye(3)[i]):
            return getattr(pin, f"JointModel{'R' if kind == 'revolute' else 'P'}{name}")()
    return (
        pin.JointModelRevoluteUnaligned(axis)
        if kind == "revolute"
        else pin.JointModelPrismaticUnaligned(axis)
    )


class PinocchioModel:
    """Pinocchio's model (and one data workspace) of a fixed-base :class:`MultibodyModel`.

    Every revolute/prismatic joint becomes a Pinocchio joint whose frame is the child body's frame moved
    to the joint point, so that its coordinate is the package's joint angle/offset; bodies hung by
    ``fixed`` joints are appended to their parent's joint. Pinocchio's algorithms need every subtree's
    joints to be consecutive, so the joints are added depth first: the coordinates follow
    ``joint_names`` (the description's order for a chain or a URDF; ``coordinate_order`` maps them to
    the description's order otherwise). ``frames``: extra points ``(name, body, offset from the CoM,
    rotation)`` in body coordinates (end effectors), added as Pinocchio operational frames; their ids
    are in ``frame_ids``.
    """

    def __init__(self, model: MultibodyModel, frames=()):
        if model.floating_root is not None:
            raise ConfigError(
                f"model '{model.name}': the Pinocchio backend needs a fixed base (a joint to 'world')"
            )
        pm = pin.Model()
        pm.name = model.name
        pm.gravity = pin.Motion(np.asarray(model.gravity, float), np.zeros(3))
        n_bodies = model.n_bodies
        body_joint = np.zeros(n_bodies, dtype=int)  # Pinocchio joint carrying each body (0: the world)
        body_rotation = np.tile(np.eye(3), (n_bodies, 1, 1))  # body frame in that joint's frame
        body_lever = np.zeros((n_bodies, 3))  # CoM in that joint's frame
        kinds, moving = [], []
        below: dict[int, list[int]] = {}  # joints hanging from each body (-1: the world), description order
        for k, j in enumerate(model.joints):
            below.setdefault(j.parent, []).append(k)
        depth_first, stack = [], list(reversed(below.get(-1, [])))
        while stack:
            k = stack.pop()
            depth_first.append(k)
            stack.extend(reversed(below.get(model.joints[k].child, [])))
        for k in depth_first:
            j = model.joints[k]
            if j.kind not in _MOVING + ("fixed",):
                raise ConfigError(
                    f"joint '{j.name}' is {j.kind}: the Pinocchio backend covers revolute, prismatic "
                    "and fixed joints (the spherical chain stays on the maximal-coordinate model)"
                )
            if j.parent < 0:
                parent, R_p, c_p = 0, np.eye(3), np.zeros(3)
            else:
                parent, R_p, c_p = int(body_joint[j.parent]), body_rotation[j.parent], body_lever[j.parent]
            point, rest = c_p + R_p @ model.anchor_parent[k], R_p @ model.rest[k]
            c = j.child
            if j.kind == "fixed":
                body_joint[c], body_rotation[c] = parent, rest
                body_lever[c] = point - rest @ model.anchor_child[k]
                R_c = body_rotation[c]
                pm.appendBodyToJoint(
                    parent,
                    pin.Inertia(float(model.masses[c]), body_lever[c], R_c @ model.inertia_body[c] @ R_c.T),
                    pin.SE3.Identity(),
                )
                continue
            jid = pm.addJoint(parent, _joint_model(j.kind, model.axis[k]), pin.SE3(rest, point), j.name)
            body_joint[c], body_lever[c] = jid, -model.anchor_child[k]
            pm.appendBodyToJoint(
                jid,
                pin.Inertia(float(model.masses[c]), body_lever[c], model.inertia_body[c]),
                pin.SE3.Identity(),
            )
            kinds.append(j.kind)
            moving.append(k)
        self.frame_ids = {}
        for name, body, offset, rotation in frames:
            R_b, c_b = body_rotation[body], body_lever[body]
            placement = pin.SE3(R_b @ np.asarray(rotation, float), c_b + R_b @ np.asarray(offset, float))
            self.frame_ids[name] = pm.addFrame(
                pin.Frame(name, int(body_joint[body]), placement, pin.FrameType.OP_FRAME)
            )
        self.model, self.pin = model, pm
        self.data = pm.createData()
        self.nv = pm.nv
        self.joints = tuple(moving)  # description joint index of every coordinate
        self.joint_names = tuple(model.joints[k].name for k in moving)
        described = [k for k in range(len(model.joints)) if model.joints[k].kind in _MOVING]
        self.coordinate_order = np.array([described.index(k) for k in moving], dtype=int)
        self.kinds = tuple(kinds)
        self.revolute = np.array([kd == "revolute" for kd in kinds], dtype=bool)
        self.body_joint, self.body_rotation, self.body_lever = body_joint, body_rotation, body_lever
        self.body_rotation_identity = bool(
            np.array_equal(body_rotation, np.broadcast_to(np.eye(3), body_rotation.shape))
        )
        # support[i, b] = 1 when coordinate i moves body b (its joint is b's joint or an ancestor of it)
        support = np.zeros((self.nv, n_bodies))
        for b in range(n_bodies):
            jid = int(body_joint[b])
            while jid > 0:
                support[pm.joints[jid].idx_v, b] = 1.0
                jid = pm.parents[jid]
        self.support = support
        self.moving_bodies = np.flatnonzero(body_joint > 0)
        self.pair_incidence = np.zeros((n_bodies, self.nv))
        for i, k in enumerate(moving):
            j = model.joints[k]
            self.pair_incidence[j.child, i] = 1.0
            if j.parent >= 0:
                self.pair_incidence[j.parent, i] = -1.0
        prismatic = [k for k, kd in zip(moving, kinds) if kd == "prismatic"]
        self.prismatic_anchor = (
            np.array([model.joints[k].child for k in prismatic], dtype=int),
            model.anchor_child[prismatic].reshape(-1, 3),
        )
        self.stiffness = np.array(
            [
                float(np.ravel(model.joints[k].stiffness)[0]) if model.joints[k].kind == "revolute" else 0.0
                for k in moving
            ]
        )
        self.damping = np.array([float(model.joints[k].damping) for k in moving])
        self.has_passive = bool(np.any(self.stiffness) or np.any(self.damping))
        self.masses = model.masses.copy()
        self.inertia_body = model.inertia_body.copy()
        # Pinocchio 4 returns crba's H and computeMinverse's H⁻¹ whole; older releases fill the upper triangle
        probe = pm.createData()
        q = np.linspace(0.1, 0.9, pm.nq)
        self.upper_only = not (
            np.array_equal(pin.crba(pm, probe, q), pin.crba(pm, probe, q).T)
            and np.array_equal(pin.computeMinverse(pm, probe, q), pin.computeMinverse(pm, probe, q).T)
        )

    def passive_efforts(self, q, qd) -> np.ndarray:
        """Joint springs and dampers of the description as joint efforts ``u_p = −K q − D q̇``."""
        return -(self.stiffness * q + self.damping * qd)


class JointSpaceData:
    """Body poses, world-aligned CoM twists, world inertias and the joint-space terms at one joint state.

    Attribute names follow :class:`ros_lnn.physics.multibody.MultibodyData` where the meaning is the same
    (``r, R, quat, v, omega, nu, inertia, joint_moment_port``), so the coordinate-free laws run on it
    unchanged; ``jacobian``/``jacobian_rate`` are Pinocchio's WORLD joint Jacobian and its rate (6 × n),
    ``H``, ``C``, ``g`` the joint-space inertia, Coriolis matrix and gravity torque (``H q̈ + C q̇ + g = u``).
    ``g``, ``G``, ``G_dot``, ``quat``, ``inertia_inv`` and ``joint_moment_port`` are formed on first use."""

    joint_space = True  # the laws take 𝓐 = G H⁻¹ Gᵀ on it (no constraint Jacobian: the joints hold exactly)

    def __init__(self, pmodel: PinocchioModel, q, qd, R, r, jacobian, jacobian_rate, H=None, C=None):
        self.pmodel, self.model = pmodel, pmodel.model
        self.q, self.qd, self.R, self.r = q, qd, R, r
        self.jacobian, self.jacobian_rate, self.H, self.C = jacobian, jacobian_rate, H, C
        n = r.shape[0]
        spatial = jacobian.dot(qd[:, None] * pmodel.support)  # (6, N): [v at the world origin; ω] per body
        self.omega = spatial[3:].T.copy()
        self.v = spatial[:3].T + _cross(self.omega, r)  # CoM velocity v_O + ω × r
        self.nu = np.concatenate([self.v.ravel(), self.omega.ravel()])
        self.inertia = R @ pmodel.inertia_body @ R.transpose(0, 2, 1)
        self.n_bodies = n

    @cached_property
    def g(self) -> np.ndarray:
        """Pinocchio's gravity torque ``g(q)`` (``= −Gᵀ [M_v g; 0]``)."""
        pm = self.pmodel
        return pin.computeGeneralizedGravity(pm.pin, pm.pin.createData(), self.q).copy()

    @cached_property
    def quat(self) -> np.ndarray:
        return _quaternions(self.R)

    @cached_property
    def inertia_inv(self) -> np.ndarray:
        return np.linalg.inv(self.inertia)

    @cached_property
    def G(self) -> np.ndarray:
        return twist_map(self)

    @cached_property
    def G_dot(self) -> np.ndarray:
        return twist_map_rate(self)

    @cached_property
    def joint_moment_port(self) -> np.ndarray:
        """``C_F M_J`` of eq 33: the port of the joint springs and dampers, ``E u_p``."""
        pm = self.pmodel
        if pm.has_passive:
            return effort_port(self, pm.passive_efforts(self.q, self.qd))
        return np.zeros(6 * self.n_bodies)


def symmetric(pmodel: PinocchioModel, M: np.ndarray) -> np.ndarray:
    """A copy of Pinocchio's symmetric ``M`` (``H`` or ``H⁻¹``), completed from its upper triangle where
    the installed Pinocchio fills only that."""
    if not pmodel.upper_only:
        return M.copy()
    upper = np.triu(M)
    return upper + np.triu(M, 1).T


def _quaternions(R: np.ndarray) -> np.ndarray:
    """Unit quaternions (w, x, y, z), w ≥ 0, of rotation matrices (N, 3, 3): Pinocchio's conversion,
    ≈ 6× the numpy :func:`~ros_lnn.physics.multibody.quaternion.matrix_to_quat` per matrix."""
    xyzw = np.array([pin.Quaternion(Ri).coeffs() for Ri in R]).reshape(-1, 4)
    quat = xyzw[:, [3, 0, 1, 2]]
    quat[quat[:, 0] < 0] *= -1.0
    return quat


def _cross(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Row-wise ``a × b`` for (k, 3) arrays as ``[a]× b`` (cheaper than np.cross on small arrays)."""
    return (a.dot(_SKEW).reshape(-1, 3, 3) @ b[:, :, None])[:, :, 0]


def body_poses(pmodel: PinocchioModel, workspace=None):
    """``(R (N, 3, 3), r (N, 3))`` from the joint placements of the last forward kinematics."""
    placements = (pmodel.data if workspace is None else workspace).oMi.tolist()
    T = np.array([placements[j].homogeneous for j in pmodel.body_joint])
    R_j, p_j = T[:, :3, :3], T[:, :3, 3]
    R = R_j if pmodel.body_rotation_identity else R_j @ pmodel.body_rotation
    r = p_j + (R_j @ pmodel.body_lever[:, :, None])[:, :, 0]
    return R, r


def kinematics(pmodel: PinocchioModel, q, qd, dynamics: bool = True, workspace=None) -> JointSpaceData:
    """Forward kinematics, the WORLD Jacobian and its rate at ``(q, q̇)`` (model joint order), and with
    ``dynamics`` the joint-space ``H``, ``C`` and ``g``. ``workspace``: a Pinocchio data to use instead of
    the model's own."""
    pm, pd = pmodel.pin, (pmodel.data if workspace is None else workspace)
    q = np.asarray(q, dtype=float)
    qd = np.asarray(qd, dtype=float)
    if q.shape != (pmodel.nv,) or qd.shape != q.shape:
        raise ConfigError(
            f"model '{pmodel.model.name}': joint state needs {pmodel.nv} positions and velocities "
            f"({pmodel.joint_names})"
        )
    H = C = None
    if dynamics:
        C = pin.computeCoriolisMatrix(pm, pd, q, qd).copy()
        H = symmetric(pmodel, pin.crba(pm, pd, q))
    pin.computeJointJacobiansTimeVariation(pm, pd, q, qd)
    R, r = body_poses(pmodel, pd)
    return JointSpaceData(pmodel, q, qd, R, r, pd.J.copy(), pd.dJ.copy(), H, C)


def twist_map(data: JointSpaceData) -> np.ndarray:
    """``G`` (6N × n) with ``ν = G q̇``: ``G_b = [𝒥_v − [r_b]× 𝒥_ω; 𝒥_ω]`` over the joints supporting b."""
    S = data.pmodel.support
    Jv, Jw = data.jacobian[:3], data.jacobian[3:]
    n, c = data.n_bodies, S.shape[0]
    lin = Jv[None] - data.r.dot(_SKEW).reshape(n, 3, 3) @ Jw[None]
    out = np.empty((2, n, 3, c))
    out[0] = lin * S.T[:, None, :]
    out[1] = Jw[None] * S.T[:, None, :]
    return out.reshape(6 * n, c)


def twist_map_rate(data: JointSpaceData) -> np.ndarray:
    """``Ġ`` (6N × n) along the current motion: ``Ġ_b = [𝒥̇_v − [ṙ_b]× 𝒥_ω − [r_b]× 𝒥̇_ω; 𝒥̇_ω]``."""
    S = data.pmodel.support
    Jw, dJv, dJw = data.jacobian[3:], data.jacobian_rate[:3], data.jacobian_rate[3:]
    n, c = data.n_bodies, S.shape[0]
    lin = (
        dJv[None]
        - data.v.dot(_SKEW).reshape(n, 3, 3) @ Jw[None]
        - data.r.dot(_SKEW).reshape(n, 3, 3) @ dJw[None]
    )
    out = np.empty((2, n, 3, c))
    out[0] = lin * S.T[:, None, :]
    out[1] = dJw[None] * S.T[:, None, :]
    return out.reshape(6 * n, c)


def port_to_joint(data: JointSpaceData, port) -> np.ndarray:
    """``Gᵀ τ`` for a port ``τ = [f_1 … f_N, m_1 … m_N]`` at the workspace's state."""
    return wrenches_to_joint(data.pmodel, data.r, data.jacobian, port)


def wrenches_to_joint(pmodel: PinocchioModel, r, jacobian, port) -> np.ndarray:
    """``Gᵀ τ = Σ_b 𝒥_bᵀ [f_b; m_b + r_b × f_b]`` from the CoMs ``r`` and the WORLD Jacobian 𝒥."""
    n = r.shape[0]
    tau = np.asarray(port, dtype=float).reshape(2, n, 3)
    wrench = np.empty((6, n))
    wrench[:3] = tau[0].T
    wrench[3:] = (tau[1] + _cross(r, tau[0])).T
    return (jacobian * wrench.dot(pmodel.support.T)).sum(axis=0)


def effort_port(data: JointSpaceData, u) -> np.ndarray:
    """``E u``: the port of joint efforts — per revolute joint the moment pair ``±u a`` about its world
    axis ``a`` (+ on the child), per prismatic joint the force pair ``±u a`` at the joint point
    ``p`` (moments ``±(p − r) × u a`` about the CoMs); ``Gᵀ E u = u``. The axes are the joints' columns of
    the WORLD Jacobian (``[0; a]`` for a revolute, ``[a; 0]`` for a prismatic joint)."""
    pm = data.pmodel
    n = data.n_bodies
    u = np.asarray(u, dtype=float)
    port = np.zeros((2, n, 3))
    inc = pm.pair_incidence  # (N, n): +1 on the child, −1 on the parent body of every coordinate
    rev = pm.revolute
    if rev.any():
        port[1] = inc[:, rev].dot(u[rev, None] * data.jacobian[3:, rev].T)
    if not rev.all():
        pri = ~rev
        f = u[pri, None] * data.jacobian[:3, pri].T
        child, anchor = pm.prismatic_anchor
        points = data.r[child] + (data.R[child] @ anchor[:, :, None])[:, :, 0]
        port[0] = inc[:, pri].dot(f)
        port[1] += inc[:, pri].dot(_cross(points, f)) - _cross(data.r, port[0])
    return port.reshape(6 * n)


def forward_dynamics(pmodel: PinocchioModel, q, qd, u) -> np.ndarray:
    """``q̈`` under the joint efforts ``u`` plus the joint springs and dampers (Pinocchio's ABA)."""
    tau = np.asarray(u, dtype=float)
    if pmodel.has_passive:
        tau = tau + pmodel.passive_efforts(q, qd)
    return pin.aba(pmodel.pin, pmodel.data, q, qd, tau).copy()
