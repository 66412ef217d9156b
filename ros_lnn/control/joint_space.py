"""Law III (end effector, null-space obstacle term) for a fixed-base arm, evaluated in joint coordinates.

The numbers are those of :class:`ros_lnn.control.dac.DacController` with the joint-space mobility
``𝓐 = G H⁻¹ Gᵀ`` (:class:`ros_lnn.control.mobility.JointSpaceOperators`); only the order of evaluation
changes, so that every product is n-dimensional and the heavy terms come from Pinocchio. With the
twist map ``G`` (``ν = G q̇``), the task Jacobian ``J_t`` (6 × 6N) and the obstacle covector ∇U (6N):

* ``Gᵀ [J_tᵀ | ∇U] = [J_eeᵀ | Gᵀ∇U] =: B``: ``J_ee = J_t G`` is the end-effector point's Jacobian
  (Pinocchio's LOCAL_WORLD_ALIGNED frame Jacobian) and ``d/dt (J_t G) = J̇_ee`` its time variation;
* ``𝓐 X = G w`` with ``w = H⁻¹ B``; differentiating ``H w = B`` with ``Ḣ = C + Cᵀ`` (Pinocchio's
  Coriolis matrix, skew-consistent like every admissible factorisation) gives ``ẇ = H⁻¹ (Ḃ − Ḣ w)``
  and ``d/dt (𝓐X) = Ġ w + G ẇ``;
* ``T = J_t 𝓐 J_tᵀ = J_ee w_t`` (+ μ²I), ``Ṫ`` and the obstacle column's rates likewise, so
  ``ν_r = G q̇_r`` and ``ν̇_r = G q̈_r + Ġ q̇_r`` with ``q̇_r = w [y; −k_o]``,
  ``q̈_r = ẇ [y; −k_o] + w_t ẏ`` — the law's reference velocity as joint rates;
* the 6N outputs follow from Pinocchio's WORLD Jacobian 𝒥 and 𝒥̇ without forming G: body b's twist at
  the world origin under joint rates x is ``𝒥_b x``, its CoM twist ``[𝒥_v,b x + (𝒥_ω,b x) × r_b; 𝒥_ω,b x]``;
  ``ν̇_r`` adds ``ω_r × ṙ_b`` to the linear part of ``𝒥_b q̈_r + 𝒥̇_b q̇_r`` moved to the CoM;
* ``τ_c`` is the law's port command (eqs 37/46, :meth:`DacController.port_command`), ``u = Gᵀ τ_c =
  Σ_b 𝒥_bᵀ [f_b; m_b + r_b × f_b]`` and ``V = ½ sᵀ𝓜s = ½ s_qᵀ H s_q`` with ``s = G s_q``. (``u`` is not
  ``H(q̈_r − k s_q) + C q̇_r + g`` with Pinocchio's C: the law's ``Gᵀ(𝓜Ġ + 𝓒(ν)G)`` is another
  factorisation of the same ``C(q, q̇) q̇``; the two agree on q̇ but not on q̇_r ≠ q̇ for a general arm.)

``test/control/test_control_joint_space.py`` holds every output against the coordinate-free law on the numpy
model (to round-off, 1e-10 relative and better).
"""

from __future__ import annotations

import math

import numpy as np
import pinocchio as pin

from ..physics.multibody.pin import JointSpaceData, PinocchioModel, symmetric
from ..physics.multibody.quaternion import _SKEW, quat_mul_tuple
from .dac import DacController, DacResult, EndEffectorTarget
from .mobility import guarded_task_inverse, small_inverse, task_reference
from .obstacles import joint_space_gradient

_LWA = pin.ReferenceFrame.LOCAL_WORLD_ALIGNED
_NEG_SKEW = -_SKEW  # r.dot(_NEG_SKEW) = −[r]× row by row


def _matrix_quat(R) -> tuple:
    """Unit quaternion (w ≥ 0) of a rotation matrix in plain floats (Shepperd), as
    :func:`ros_lnn.physics.multibody.quaternion.matrix_to_quat`."""
    (r00, r01, r02), (r10, r11, r12), (r20, r21, r22) = R.tolist()
    tr = r00 + r11 + r22
    if tr > 0:
        s = 2.0 * math.sqrt(1.0 + tr)
        q = (0.25 * s, (r21 - r12) / s, (r02 - r20) / s, (r10 - r01) / s)
    elif r00 >= r11 and r00 >= r22:
        s = 2.0 * math.sqrt(1.0 + r00 - r11 - r22)
        q = ((r21 - r12) / s, 0.25 * s, (r01 + r10) / s, (r02 + r20) / s)
    elif r11 >= r22:
        s = 2.0 * math.sqrt(1.0 + r11 - r22 - r00)
        q = ((r02 - r20) / s, (r01 + r10) / s, 0.25 * s, (r12 + r21) / s)
    else:
        s = 2.0 * math.sqrt(1.0 + r22 - r00 - r11)
        q = ((r10 - r01) / s, (r02 + r20) / s, (r12 + r21) / s, 0.25 * s)
    norm = math.sqrt(q[0] * q[0] + q[1] * q[1] + q[2] * q[2] + q[3] * q[3])
    sign = 1.0 / norm if q[0] >= 0 else -1.0 / norm
    return (q[0] * sign, q[1] * sign, q[2] * sign, q[3] * sign)


def _inverse3(a: np.ndarray) -> np.ndarray:
    """Inverse of the leading 3×3 block of ``a`` by its adjugate, in plain floats (cheaper than a LAPACK
    call at this size); :func:`small_inverse` (LinAlgError) when it is singular or not finite."""
    (a0, a1, a2), (b0, b1, b2), (c0, c1, c2) = a[:3, :3].tolist()
    m00, m01, m02 = b1 * c2 - b2 * c1, a2 * c1 - a1 * c2, a1 * b2 - a2 * b1
    det = a0 * m00 + b0 * m01 + c0 * m02
    if not (det != 0.0 and math.isfinite(det)):
        return small_inverse(np.ascontiguousarray(a[:3, :3]))
    return (
        np.array(
            [
                [m00, m01, m02],
                [b2 * c0 - b0 * c2, a0 * c2 - a2 * c0, a2 * b0 - a0 * b2],
                [b0 * c1 - b1 * c0, a1 * c0 - a0 * c1, a0 * b1 - a1 * b0],
            ]
        )
        / det
    )


class EndEffectorLawJointSpace:
    """Law III of ``controller`` on ``pmodel`` at joint states; ``frame_id``: the end effector's
    Pinocchio frame (the controller's :class:`EndEffector` point and tool attitude). One step at a time:
    the Pinocchio workspace and a few buffers are reused from step to step."""

    def __init__(self, controller: DacController, pmodel: PinocchioModel, frame_id: int):
        model = controller.model
        self.controller, self.pmodel, self.frame_id = controller, pmodel, frame_id
        self.guarded = False  # the last step's task inverse was singular and got damped
        self.pin, self.data = pmodel.pin, pmodel.data
        n, nv = model.n_bodies, pmodel.nv
        self.n_bodies, self.nv = n, nv
        g = controller.gains
        self._kd_rate = controller._kd_rate.reshape(2, n, 3)
        self._kd = controller._kd.reshape(2, n, 3)
        self._mass_weighted = bool(g.mass_weighted)
        self._masses = pmodel.masses[:, None]
        self._weight = -pmodel.masses[:, None] * np.asarray(model.gravity, float)  # −M_v g per body
        self._placements = pmodel.body_joint.tolist()
        self._support, self._support_t = pmodel.support, pmodel.support.T.copy()
        self._rates = np.zeros((2 * nv, 3 * n))  # [[q̇ S, q̇_r S, q̈_r S], [0, 0, q̇_r S]] with S the support
        self._rates_top = self._rates[:nv].reshape(nv, 3, n)
        self._joint_rates = np.empty((nv, 3))
        self._spatial = np.empty((6, 3 * n))  # 𝒥 q̇, 𝒥 q̇_r, 𝒥 q̈_r + 𝒥̇ q̇_r per body (world origin)
        self._pair = np.empty((2, n, 3, 1))
        self._com_shift = np.zeros((n, 6, 6))  # [[I, −[r_b]×], [0, I]]: world-origin twist → CoM twist
        self._com_shift[:, [0, 1, 2, 3, 4, 5], [0, 1, 2, 3, 4, 5]] = 1.0
        self._eye = {m: (g.damping**2) * np.eye(m) for m in (3, 6)}
        # the CoMs and the obstacle field's control points as one linear map of the stacked joint placements
        field = controller.obstacles
        self._field = field if field is not None and field.obstacles and g.obstacle_gain > 0 else None
        body = np.arange(n)
        local = pmodel.body_lever.copy()
        if self._field is not None:
            pb = np.asarray(self._field.points_body, dtype=int)
            offsets = np.asarray(self._field.points_offset, float).reshape(-1, 3)
            body = np.concatenate([body, pb])
            local = np.concatenate(
                [local, pmodel.body_lever[pb] + (pmodel.body_rotation[pb] @ offsets[:, :, None])[:, :, 0]]
            )
            self._point_support = pmodel.support[:, pb].T.copy()
        self._point_map = _point_map(body, local, n)  # x_k = T_b[:3] [local_k; 1]

    def step(
        self, q: np.ndarray, qd: np.ndarray, target: EndEffectorTarget | None, hold_attitude: bool = False
    ):
        """``(DacResult, u = Gᵀ τ_c (model order), JointSpaceData, end-effector position, target)`` at the
        joint state ``(q, q̇)``; ``target=None`` holds the current end-effector position (and attitude with
        ``hold_attitude``) at rest."""
        ctl, pmodel = self.controller, self.pmodel
        pm, pd, fid = self.pin, self.data, self.frame_id
        nv, n = self.nv, self.n_bodies
        gains = ctl.gains
        H_inv, C, H, jj, J, dJ = self._joint_terms(q, qd)
        ee = pin.updateFramePlacement(pm, pd, fid)
        Je = pin.getFrameJacobian(pm, pd, fid, _LWA)
        dJe = pin.getFrameJacobianTimeVariation(pm, pd, fid, _LWA)
        # body poses (CoMs and control points in one product) and twists at the world origin
        placements = pd.oMi.tolist()
        T = np.array([placements[j].homogeneous for j in self._placements])
        points = self._point_map.dot(T.reshape(-1)).reshape(-1, 3)
        r = points[:n]
        R = T[:, :3, :3] if pmodel.body_rotation_identity else T[:, :3, :3] @ pmodel.body_rotation
        # task error and its rate
        pos = ee.translation
        nu_e = Je.dot(qd)
        if target is None:
            target = EndEffectorTarget(
                pos.copy(), np.array(_matrix_quat(ee.rotation)) if hold_attitude else None
            )
        twist_d, twist_d_dot = target.twist, target.twist_dot
        if target.quat is None:
            m = 3
            e = pos - target.position
            e_dot = nu_e[:3] - twist_d[:3]
            lam = ctl._lam_task[:3]
        else:
            m = 6
            qd_t = target.quat
            qe = quat_mul_tuple(
                _matrix_quat(ee.rotation), (float(qd_t[0]), -float(qd_t[1]), -float(qd_t[2]), -float(qd_t[3]))
            )
            sign = -2.0 if qe[0] < 0 else 2.0
            e = np.empty(6)
            e[:3] = pos - target.position
            e[3:] = (sign * qe[1], sign * qe[2], sign * qe[3])
            e_dot = nu_e - twist_d
            (sx, sy, sz), (ex, ey, ez) = (0.5 * (nu_e[3:] + twist_d[3:])).tolist(), e[3:].tolist()
            e_dot[3:] *= 0.5 * sign * qe[0]
            e_dot[3:] += (sy * ez - sz * ey, sz * ex - sx * ez, sx * ey - sy * ex)
            lam = ctl._lam_task
        nu_er = twist_d[:m] - lam * e
        nu_er_dot = twist_d_dot[:m] - lam * e_dot
        # obstacle covector in joint coordinates
        U, grad, grad_dot = 0.0, None, None
        if self._field is not None:
            U, grad, grad_dot = joint_space_gradient(self._field, points[n:], qd, J, dJ, self._point_support)
        # w = H⁻¹ B, ẇ = H⁻¹ (Ḃ − Ḣ w) for the columns B = [J_eeᵀ | Gᵀ∇U]
        c = m + (grad is not None)
        Je, dJe = Je[:m], dJe[:m]
        B = np.empty((nv, 2 * c))
        B[:, :m], B[:, c : c + m] = Je.T, dJe.T
        if grad is not None:
            B[:, m], B[:, c + m] = grad, grad_dot
        w = H_inv.dot(B[:, :c])
        B[:, c:] -= (C + C.T).dot(w)
        w_dot = H_inv.dot(B[:, c:])
        JeW = Je.dot(w)
        Q = dJe.dot(w)
        Q += Je.dot(w_dot)
        if gains.damping:
            JeW[:, :m] += self._eye[m]
        T_inv, self.guarded = guarded_task_inverse(
            np.ascontiguousarray(JeW[:, :m]), _inverse3 if m == 3 else None
        )
        qd_r, qdd_r = task_reference(T_inv, JeW, Q, w, w_dot, nu_er, nu_er_dot, gains.obstacle_gain)
        result, u, data = self._port_command(q, qd, qd_r, qdd_r, jj, J, dJ, r, R, H, C, e, U)
        return result, u, data, pos, target

    def _joint_terms(self, q, qd):
        """``(H⁻¹, C, H, [𝒥 | 𝒥̇], 𝒥, 𝒥̇)`` at ``(q, q̇)``: the joint Jacobians of every body and their
        rates, one array and its two halves."""
        pmodel, pm, pd, nv = self.pmodel, self.pin, self.data, self.nv
        H_inv = symmetric(pmodel, pin.computeMinverse(pm, pd, q))
        C = pin.computeCoriolisMatrix(pm, pd, q, qd).copy()
        H = symmetric(pmodel, pin.crba(pm, pd, q))
        pin.computeJointJacobiansTimeVariation(pm, pd, q, qd)
        jj = np.empty((6, 2 * nv))  # [𝒥 | 𝒥̇]
        jj[:, :nv], jj[:, nv:] = pd.J, pd.dJ
        return H_inv, C, H, jj, jj[:, :nv], jj[:, nv:]

    def _port_command(self, q, qd, qd_r, qdd_r, jj, J, dJ, r, R, H, C, task_error, U, inertia=None):
        """``(DacResult, u = Gᵀ τ_c, JointSpaceData)`` from the reference as joint rates ``q̇_r, q̈_r``
        (``ν_r = G q̇_r``, ``ν̇_r = G q̈_r + Ġ q̇_r``): the law's port command (eqs 37/46) at the state whose
        Pinocchio terms are given (``jj = [𝒥 | 𝒥̇]``, CoMs ``r``, rotations ``R``, ``H``, ``C``; the world
        inertias ``R I_b Rᵀ`` when already formed)."""
        ctl, pmodel = self.controller, self.pmodel
        nv, n = self.nv, self.n_bodies
        # 6N: world-origin twists of q̇, q̇_r and the rate 𝒥 q̈_r + 𝒥̇ q̇_r, moved to the CoMs in one product
        v3 = self._joint_rates  # (n, 3): q̇, q̇_r, q̈_r
        v3[:, 0], v3[:, 1], v3[:, 2] = qd, qd_r, qdd_r
        np.multiply(v3[:, :, None], self._support[:, None, :], out=self._rates_top)
        X = self._rates
        X[nv:, 2 * n :] = X[:nv, n : 2 * n]
        np.dot(jj, X, out=self._spatial)
        shift = self._com_shift
        shift[:, :3, 3:] = r.dot(_NEG_SKEW).reshape(n, 3, 3)
        com = shift @ self._spatial.reshape(6, 3, n).transpose(
            2, 0, 1
        )  # (N, 6, 3): ν_b, ν_r,b, ν̇_r,b − ω_r × ṙ_b
        out = com.reshape(n, 2, 3, 3).transpose(3, 1, 0, 2).copy()  # (3, 2, N, 3): ν, ν_r, ν̇_r in 6N layout
        nu, nu_r, nu_r_dot = out[0], out[1], out[2]
        s = nu - nu_r
        # τ_c = 𝓜 (ν̇_r − k s) + 𝓒(ν) ν_r − 𝓕_{g,J}: the law's port command
        if inertia is None:
            inertia = R @ pmodel.inertia_body @ R.transpose(0, 2, 1)
        acc = nu_r_dot - self._kd_rate * s if self._mass_weighted else nu_r_dot.copy()
        cols = np.empty((n, 3, 2))
        cols[:, :, 0], cols[:, :, 1] = acc[1], nu_r[1]
        I_cols = inertia @ cols  # I (ω̇_r − k s_ω), I ω_r
        pair = self._pair  # ω_r × ṙ (the rest of ν̇_r) and ω × I ω_r (𝓒(ν) ν_r) in one product
        pair[0, :, :, 0], pair[1, :, :, 0] = nu[0], I_cols[:, :, 1]
        both = np.concatenate([nu_r[1], nu[1]]).dot(_SKEW).reshape(2 * n, 3, 3) @ pair.reshape(2 * n, 3, 1)
        nu_r_dot[0] += both[:n, :, 0]
        acc[0] += both[:n, :, 0]
        tau = np.empty((2, n, 3))
        np.multiply(self._masses, acc[0], out=tau[0])
        tau[0] += self._weight
        np.add(I_cols[:, :, 0], both[n:, :, 0], out=tau[1])
        data = JointSpaceData.__new__(JointSpaceData)
        data.pmodel, data.model, data.q, data.qd, data.R, data.r = pmodel, ctl.model, q, qd, R, r
        data.jacobian, data.jacobian_rate, data.H, data.C = J, dJ, H, C
        data.v, data.omega, data.nu, data.inertia, data.n_bodies = nu[0], nu[1], nu.reshape(-1), inertia, n
        s_q = qd - qd_r
        if pmodel.has_passive:
            tau -= data.joint_moment_port.reshape(2, n, 3)
        if not self._mass_weighted:
            tau -= self._kd * s
        # u = Gᵀ τ_c: every body's wrench moved to the world origin ([f; m + r × f], the transposed CoM
        # shift), paired with the Jacobian columns of the joints that carry the body
        wrench = shift.transpose(0, 2, 1) @ tau.transpose(1, 0, 2).reshape(n, 6, 1)
        u = (J.T.dot(wrench[:, :, 0].T) * self._support).sum(axis=1)
        self.joint_reference = (qd_r, qdd_r)  # q̇_r, q̈_r (model order): the learned port's acceleration input
        lyap = 0.5 * float(H.dot(s_q).dot(s_q))
        return (
            DacResult(
                tau.reshape(-1), s.reshape(-1), lyap, nu_r.reshape(-1), nu_r_dot.reshape(-1), task_error, U
            ),
            u,
            data,
        )


_VEE_TRACE = np.zeros((9, 4))  # flat 3×3 → (vee(A − Aᵀ), tr A)
_VEE_TRACE[[7, 5, 2, 6, 3, 1], [0, 0, 1, 1, 2, 2]] = (1.0, -1.0, 1.0, -1.0, 1.0, -1.0)
_VEE_TRACE[[0, 4, 8], 3] = 1.0


def _attitude_errors(R: np.ndarray, R_d: np.ndarray):
    """``(e, w)`` per body: ``e = 2 vec(q ⊗ q_d⁻¹)`` with the scalar part ``w ≥ 0`` of the error
    quaternion, from the error rotation ``R_e = R R_dᵀ`` without forming quaternions: ``w = ½√(1 + tr R_e)``
    and ``e = vee(R_e − R_eᵀ) / (2w)`` (Shepperd's first branch). Bodies whose error exceeds 120°
    (``tr R_e < 0``, where that branch loses accuracy) take the full Shepperd conversion."""
    Re = R @ R_d.transpose(0, 2, 1)
    vt = Re.reshape(-1, 9).dot(_VEE_TRACE)  # vee(R_e − R_eᵀ) and tr R_e in one product
    e, tr = vt[:, :3], vt[:, 3]
    if float(tr.min()) > 0.0:
        root = np.sqrt(1.0 + tr)
        e /= root[:, None]
        return e, 0.5 * root
    w = np.empty(len(Re))
    for b in range(len(Re)):
        qe = _matrix_quat(Re[b])  # w ≥ 0
        w[b] = qe[0]
        e[b] = (2.0 * qe[1], 2.0 * qe[2], 2.0 * qe[3])
    return e, w


class JointTargetKinematics:
    """The desired state of laws I/II from a joint-space sample ``(q_d, q̇_d, q̈_d)``: body rotations
    ``R_d``, CoMs ``r_d``, twists ``ν_d = G(q_d) q̇_d`` and their rates ``ν̇_d = G q̈_d + Ġ q̇_d`` — from
    one Pinocchio pass (second-order forward kinematics) on a copy of the model with an operational frame
    at every body's CoM (the body's axes): per body its placement, its velocity and its classical
    acceleration in world-aligned axes (``v``, ``ω``, ``a = v̇``, ``ω̇``), without forming ``G`` or ``Ġ``.
    ``__call__`` keeps the last sample's result and returns it again while the same sample is asked for
    (a held target, a repeated time)."""

    def __init__(self, pmodel: PinocchioModel):
        self.pmodel = pmodel
        model = self.pin = pin.Model(pmodel.pin)
        self._frames = [
            model.addFrame(
                pin.Frame(
                    f"ros_lnn_com_{b}",
                    int(pmodel.body_joint[b]),
                    pin.SE3(pmodel.body_rotation[b], pmodel.body_lever[b]),
                    pin.FrameType.OP_FRAME,
                )
            )
            for b in range(pmodel.model.n_bodies)
        ]
        self.data = model.createData()
        self._key: tuple | None = None
        self._value: tuple | None = None
        self.evaluations = 0  # Pinocchio passes made (the cache's misses)

    def __call__(self, q, qd, qdd):
        """``(R_d (N, 3, 3), r_d (N, 3), [v_d; ω_d] (2, N, 3), [a_d; ω̇_d] (2, N, 3))`` (model order)."""
        key = (q.tobytes(), qd.tobytes(), qdd.tobytes())
        if key == self._key:
            return self._value
        pm, pd = self.pin, self.data
        pin.forwardKinematics(pm, pd, q, qd, qdd)
        self.evaluations += 1
        placements, motion = [], []
        for f in self._frames:
            placements.append(pin.updateFramePlacement(pm, pd, f).homogeneous)
            v = pin.getFrameVelocity(pm, pd, f, _LWA)
            a = pin.getFrameClassicalAcceleration(pm, pd, f, _LWA)
            motion.append((v.linear, v.angular, a.linear, a.angular))
        T = np.array(placements)
        kin = np.array(motion).transpose(1, 0, 2)  # (4, N, 3): v, ω, a, ω̇
        self._key, self._value = key, (T[:, :3, :3], T[:, :3, 3], kin[:2], kin[2:])
        return self._value


def _point_map(body, local, n):
    """The linear map from the stacked joint placements (N × 4 × 4, flattened) to the points ``local``
    (body-joint coordinates) of ``body``: ``x_k = T_b[:3] [local_k; 1]``."""
    point_map = np.zeros((len(body), 3, n, 4, 4))
    for k, (b, x) in enumerate(zip(body, local)):
        for i in range(3):
            point_map[k, i, b, i, :3], point_map[k, i, b, i, 3] = x, 1.0
    return point_map.reshape(3 * len(body), 16 * n)


class JointTargetLawJointSpace(EndEffectorLawJointSpace):
    """Laws I (``velocity``) and II (``pose``) of ``controller`` on a joint-space target, evaluated in joint
    coordinates: the numbers of :meth:`DacController.compute` with ``𝓐 = G H⁻¹ Gᵀ``
    (:class:`ros_lnn.control.mobility.JointSpaceOperators`) on the body-twist target of the joint sample,
    in another order of evaluation. With ``x = ν_d − Λ e_p`` (law II; ``ν_d`` for law I) and ``ẋ``:

    * ``ν_r = P x = G q̇_r`` with ``q̇_r = H⁻¹ b``, ``b = Gᵀ𝓜 x = Σ_b 𝒥_bᵀ [m x_v; I x_ω + r × m x_v]``;
    * ``ν̇_r = G q̈_r + Ġ q̇_r`` with ``q̈_r = H⁻¹ (ḃ − Ḣ q̇_r)``, ``Ḣ = C + Cᵀ`` and
      ``ḃ = Ġᵀ𝓜x + Gᵀ(𝓜̇x + 𝓜ẋ)``, where ``Ġ_bᵀ [f; m] = 𝒥̇_bᵀ [f; m + r × f] + 𝒥_bᵀ [0; ṙ × f]``;
    * the attitude error from ``R R_dᵀ`` (:func:`_attitude_errors`), the desired state from
      :class:`JointTargetKinematics` (one Pinocchio pass per trajectory sample, none while it repeats);
    * ``τ_c``, ``u = Gᵀ τ_c`` and ``V`` as law III (:meth:`EndEffectorLawJointSpace._port_command`).

    ``test/control/test_control_joint_space.py`` holds every output against the coordinate-free law."""

    def __init__(self, controller: DacController, pmodel: PinocchioModel, frame_id: int):
        super().__init__(controller, pmodel, frame_id)
        if controller.law not in ("velocity", "pose"):
            raise ValueError(f"JointTargetLawJointSpace takes laws I/II, not '{controller.law}'")
        n = self.n_bodies
        self._field = None  # laws I/II have no obstacle term
        self._point_map = self._point_map[: 3 * n]
        self._pose = controller.law == "pose"
        gains = controller.gains
        self._lam = np.repeat([gains.lambda_position, gains.lambda_attitude], 3 * n).reshape(2, n, 3)
        self.target = JointTargetKinematics(pmodel)

    def step(self, q, qd, q_d, qd_d, qdd_d):
        """``(DacResult, u = Gᵀ τ_c (model order), JointSpaceData, end-effector position)`` at the joint
        state ``(q, q̇)`` for the joint-space target sample ``(q_d, q̇_d, q̈_d)`` (all model order)."""
        pmodel, pm, pd = self.pmodel, self.pin, self.data
        n = self.n_bodies
        R_d, r_d, vel_d, acc_d = self.target(q_d, qd_d, qdd_d)
        H_inv, C, H, jj, J, dJ = self._joint_terms(q, qd)
        ee = pin.updateFramePlacement(pm, pd, self.frame_id).translation.copy()
        placements = pd.oMi.tolist()
        T = np.array([placements[j].homogeneous for j in self._placements])
        r = self._point_map.dot(T.reshape(-1)).reshape(n, 3)
        R = T[:, :3, :3] if pmodel.body_rotation_identity else T[:, :3, :3] @ pmodel.body_rotation
        # the current twists: world-origin twists 𝒥_b q̇ moved to the CoMs
        sp = J.dot(qd[:, None] * self._support)
        omega = sp[3:].T
        omega_skew = omega.dot(_SKEW).reshape(n, 3, 3)
        # x = ν_d − Λ e_p and its rate (law II), x = ν_d (law I); (2, N, 3): linear, angular. Cross
        # products in batches: [(ω + ω_d) × e, ω × x_ω, ω × r], then [r × y_f, r × ẏ_f, ṙ × y_f, ω × I x_ω]
        pair = np.empty((3, n, 3, 3))
        vec = np.empty((3, n, 3, 1))
        if self._pose:
            e = np.empty((2, n, 3))
            e[0] = r - r_d
            e[1], w = _attitude_errors(R, R_d)
            x = vel_d - self._lam * e
            pair[0] = (omega + vel_d[1]).dot(_SKEW).reshape(n, 3, 3)
            vec[0, :, :, 0] = e[1]
        else:
            x = vel_d
            pair[0], vec[0] = 0.0, 0.0
        pair[1] = pair[2] = omega_skew
        vec[1, :, :, 0], vec[2, :, :, 0] = x[1], r
        crossed = (pair @ vec)[:, :, :, 0]
        v = sp[:3].T + crossed[2]  # CoM velocities v_O + ω × r
        if self._pose:
            e_dot = np.empty((2, n, 3))
            e_dot[0] = v - vel_d[0]
            e_dot[1] = w[:, None] * (omega - vel_d[1]) + 0.5 * crossed[0]  # w (ω − ω_d) + ½ (ω + ω_d) × e
            x_dot = acc_d - self._lam * e_dot
            task_error = e.reshape(-1)
        else:
            x_dot = acc_d
            task_error = np.concatenate([v.ravel(), omega.ravel()]) - vel_d.reshape(-1)
        # y = 𝓜 x, ẏ = 𝓜̇ x + 𝓜 ẋ with 𝓜̇ = blockdiag(0, Ω I − I Ω)
        inertia = R @ pmodel.inertia_body @ R.transpose(0, 2, 1)
        cols = np.empty((n, 3, 3))
        cols[:, :, 0], cols[:, :, 1], cols[:, :, 2] = x[1], x_dot[1], crossed[1]
        I_cols = inertia @ cols  # I x_ω, I ẋ_ω, I (ω × x_ω)
        y_f = self._masses * x[0]
        yd_f = self._masses * x_dot[0]
        quad = np.empty((4, n, 3, 3))
        quad[0] = quad[1] = r.dot(_SKEW).reshape(n, 3, 3)
        quad[2] = v.dot(_SKEW).reshape(n, 3, 3)
        quad[3] = omega_skew
        vec4 = np.empty((4, n, 3, 1))
        vec4[0, :, :, 0], vec4[1, :, :, 0], vec4[2, :, :, 0] = y_f, yd_f, y_f
        vec4[3] = I_cols[:, :, 0:1]
        c4 = (quad @ vec4)[:, :, :, 0]
        W = np.empty((6, 2 * n))  # [wrench of y | wrench of ẏ plus the Ġᵀ part 𝒥ᵀ[0; ṙ × f]]
        W[:3, :n], W[:3, n:] = y_f.T, yd_f.T
        W[3:, :n] = (I_cols[:, :, 0] + c4[0]).T
        W[3:, n:] = (c4[3] - I_cols[:, :, 2] + I_cols[:, :, 1] + c4[1] + c4[2]).T
        S = self._support
        b = (J.T.dot(W[:, :n]) * S).sum(axis=1)
        b_dot = ((J.T.dot(W[:, n:]) + dJ.T.dot(W[:, :n])) * S).sum(axis=1)
        qd_r = H_inv.dot(b)
        qdd_r = H_inv.dot(b_dot - (C + C.T).dot(qd_r))
        result, u, data = self._port_command(
            q, qd, qd_r, qdd_r, jj, J, dJ, r, R, H, C, task_error, 0.0, inertia
        )
        return result, u, data, ee
