"""Tensor-invariant data-assisted control laws I–III (seed 004 §3, EQUATIONS.md §6).

All three share ``τ_c = 𝓜 ν̇_r + 𝓒(ν) ν_r − 𝓕_{g,J} − K_d s`` with ``s = ν − ν_r`` and differ in the
reference velocity ``ν_r(x, t)``:

* (I)   ``ν_r = P ν_d``                                  (eq 37; ``P ν_d = ν_d`` for a feasible ν_d)
* (II)  ``ν_r = P (ν_d − Λ e_p)``                         (eqs 42–47)
* (III) ``ν_r = J_t^# ν_{e,r} − k_o N_t 𝓐 ∇U_o``          (eqs 51–54),
  ``J_t^# = 𝓐 J_tᵀ (J_t 𝓐 J_tᵀ + μ²I)⁻¹``, ``N_t = I − J_t^# J_t``

where ``P = 𝓐𝓜`` and ``𝓐`` is the constrained mobility (:mod:`ros_lnn.control.mobility`). Built this
way ``J ν_r = 0`` holds identically (EQUATIONS.md: ``J_t† ν_{e,r}`` of eq 54 with the plain 𝓜⁻¹ does not
satisfy it, and then ``sᵀJᵀF_J ≠ 0`` spoils ``V̇ = −sᵀK_d s``); for a 6-DoF-feasible task ``μ = 0`` gives
``J_t ν_r = ν_{e,r}`` exactly. The attitude error is twice the vector part of ``q ⊗ q_d⁻¹`` — the paper's
``q_d⁻¹ ⊗ q`` (eq 44) carried to the inertial frame and scaled to the small-angle rotation vector,
so that every quantity is a tensor of the inertial frame
and a rotation of the whole problem rotates ``τ_c`` (tested). ``ν̇_r`` is the exact derivative of
``ν_r`` along the current twist (analytic, no finite differences).

Per step neither 𝓐 nor P is formed: they are applied to the few columns the law needs (``P ν``, or
``𝓐 [J_tᵀ | ∇U]``) with their exact rates, through the Schur complement of the constraints or, at a
configuration from forward kinematics, through the joint-space inertia (:mod:`ros_lnn.control.mobility`;
both checked against the dense KKT inverse to round-off).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, cast

import numpy as np

from ..errors import ConfigError
from ..physics.multibody import MultibodyData, MultibodyModel, gravity_port
from ..physics.multibody.quaternion import (
    attitude_error,
    cross,
    matrix_to_quat,
    quat_mul_conj,
    quat_mul_tuple,
    skew,
)
from .mobility import ConstraintOperators, JointSpaceOperators, guarded_task_inverse, task_reference
from .obstacles import ObstacleField, potential_gradient

if TYPE_CHECKING:
    from ..physics.multibody.pin import JointSpaceData

LAWS = ("velocity", "pose", "end_effector")


@dataclass
class Gains:
    """Scalar gains, so that every gain tensor is isotropic or built from 𝓜 (frame-invariant).

    ``mass_weighted`` (default): ``K_d = blockdiag(kd_linear m_i I₃, kd_angular I_i)`` — the gains are
    rates [1/s], every body's error decays alike and ``V̇ = −2k V`` exactly when both rates are k (a
    constant K_d would make bodies with a small inertia about one axis stiff for the integrator).
    Otherwise ``K_d = diag(kd_linear I, kd_angular I)`` [N s/m, N m s]. Λ = diag(lambda_position I,
    lambda_attitude I) for law II, Λ_e likewise for the end effector of law III."""

    kd_linear: float = 20.0
    kd_angular: float = 20.0
    mass_weighted: bool = True
    lambda_position: float = 5.0
    lambda_attitude: float = 5.0
    obstacle_gain: float = 1.0  # k_o
    damping: float = 0.0  # μ of the damped task inverse (0: exact when the task is feasible)

    def validate(self):
        for name in (
            "kd_linear",
            "kd_angular",
            "lambda_position",
            "lambda_attitude",
            "obstacle_gain",
            "damping",
        ):
            value = getattr(self, name)
            if not isinstance(value, (int, float)) or not math.isfinite(value):
                raise ConfigError(f"DAC gain {name} = {value!r} must be a finite number")
        for name in ("kd_linear", "kd_angular", "lambda_position", "lambda_attitude"):
            if not getattr(self, name) > 0:
                raise ConfigError(f"DAC gain {name} = {getattr(self, name)} must be > 0 (positive definite)")
        if self.obstacle_gain < 0 or self.damping < 0:
            raise ConfigError("DAC gains obstacle_gain and damping must be >= 0")
        return self


@dataclass
class VelocityTarget:
    """Law I: desired twist of every body and its derivative (6N each)."""

    nu_d: np.ndarray
    nu_d_dot: np.ndarray


@dataclass
class BodyPoseTarget:
    """Law II: desired CoM positions (N, 3), attitudes (N, 4), twist and its derivative (6N)."""

    r_d: np.ndarray
    quat_d: np.ndarray
    nu_d: np.ndarray
    nu_d_dot: np.ndarray


@dataclass
class EndEffectorTarget:
    """Law III: desired end-effector point, attitude (None: position-only task), twist (6) and its
    derivative (6): linear then angular, inertial coordinates."""

    position: np.ndarray
    quat: np.ndarray | None = None
    twist: np.ndarray = field(default_factory=lambda: np.zeros(6))
    twist_dot: np.ndarray = field(default_factory=lambda: np.zeros(6))


@dataclass
class EndEffector:
    """A point on a body (offset from its CoM, body coordinates) and the tool attitude in that body."""

    body: int
    offset: np.ndarray = field(default_factory=lambda: np.zeros(3))
    rotation: np.ndarray = field(default_factory=lambda: np.eye(3))


@dataclass
class DacResult:
    tau_c: np.ndarray  # commanded port (6N)
    s: np.ndarray  # sliding variable ν − ν_r
    lyapunov: float  # ½ sᵀ𝓜 s
    nu_r: np.ndarray
    nu_r_dot: np.ndarray
    task_error: np.ndarray  # e_p (law II, 6N) / e_e (law III, 3 or 6) / ν − ν_d (law I)
    obstacle_potential: float = 0.0


def _att_error(quat, quat_d):
    """Attitude error ``e = 2 vec(q ⊗ q_d⁻¹)`` (≈ the rotation vector for small errors, so Λ sets the
    decay rate as for positions) and the scalar part ``w`` of the error quaternion."""
    e, w = attitude_error(quat, quat_d)
    return 2.0 * e, w


def _att_error_rate(e, w, omega, omega_d):
    """d/dt of ``e = 2 vec(q ⊗ q_d⁻¹)``: ``w (ω − ω_d) + ½ (ω + ω_d) × e``."""
    return w[..., None] * (omega - omega_d) + 0.5 * cross(omega + omega_d, e)


def _ee_tables(model, ee: EndEffector):
    """Cached per end effector: tool quaternion, J_t template (identity blocks) and its column slices."""
    n, b = model.n_bodies, ee.body
    cache = ee.__dict__.get("_tables")
    if cache is None or cache[0] != n:
        Jt0 = np.zeros((6, 6 * n))
        Jt0[:3, 3 * b : 3 * b + 3] = np.eye(3)
        Jt0[3:, 3 * n + 3 * b : 3 * n + 3 * b + 3] = np.eye(3)
        cache = (n, tuple(matrix_to_quat(ee.rotation)), Jt0, slice(3 * n + 3 * b, 3 * n + 3 * b + 3))
        ee.__dict__["_tables"] = cache
    return cache[1:]


def end_effector_state(model, data, ee: EndEffector):
    """Point position, attitude quaternion, task Jacobian J_t (6 × 6N) and J̇_t (kept on ``data`` for
    the step: the pipeline and the law both ask for it)."""
    cached = data.__dict__.get("_ee_state")
    if cached is not None and cached[0] is ee:
        return cached[1]
    b = ee.body
    tool, Jt0, ang = _ee_tables(model, ee)
    arm = data.R[b] @ ee.offset
    pos = data.r[b] + arm
    quat = np.array(quat_mul_tuple(data.quat[b].tolist(), tool))
    arms = np.empty((2, 3))  # −a and −ω × a: J_t holds −[a]× and J̇_t −[ω × a]×
    arms[0] = -arm
    (ax, ay, az), (wx, wy, wz) = arm.tolist(), data.omega[b].tolist()
    arms[1] = (ay * wz - az * wy, az * wx - ax * wz, ax * wy - ay * wx)
    blocks = skew(arms)
    Jt = Jt0.copy()
    Jt[:3, ang] = blocks[0]
    Jt_dot = np.zeros(Jt.shape)
    Jt_dot[:3, ang] = blocks[1]
    data.__dict__["_ee_state"] = (ee, (pos, quat, Jt, Jt_dot))
    return pos, quat, Jt, Jt_dot


class DacController:
    """Evaluates one of the three laws on a :class:`MultibodyData` (the model's "certain" LHS)."""

    def __init__(
        self,
        model: MultibodyModel,
        law: str = "end_effector",
        gains: Gains | None = None,
        end_effector: EndEffector | None = None,
        obstacles: ObstacleField | None = None,
    ):
        if law not in LAWS:
            raise ConfigError(f"DAC law '{law}' is not one of {LAWS}")
        self.model, self.law = model, law
        self.gains = (gains or Gains()).validate()
        self.end_effector = end_effector or EndEffector(model.n_bodies - 1)
        self.obstacles = obstacles
        self.guarded = False  # the last law III step's task inverse was singular and got damped
        n = model.n_bodies
        self._kd = np.concatenate(
            [np.full(3 * n, float(self.gains.kd_linear)), np.full(3 * n, float(self.gains.kd_angular))]
        )
        if self.gains.mass_weighted:
            self._kd[: 3 * n] *= model.masses.repeat(3)
        self._m3 = model.masses.repeat(3)
        self._kd_rate = np.repeat([float(self.gains.kd_linear), float(self.gains.kd_angular)], 3 * n)
        self._eyes: dict[tuple[int, float], np.ndarray] = {}
        self._lam_task = np.repeat([self.gains.lambda_position, self.gains.lambda_attitude], 3)
        self._lam = np.concatenate(
            [np.full(3 * n, self.gains.lambda_position), np.full(3 * n, self.gains.lambda_attitude)]
        )

    def _damping_eye(self, m: int, mu: float) -> np.ndarray:
        """μ² I_m of the damped task inverse (kept per size and μ)."""
        key = (m, mu)
        eye = self._eyes.get(key)
        if eye is None:
            eye = self._eyes[key] = mu * mu * np.eye(m)
        return eye

    # ---------------------------------------------------------------- reference velocities
    def _reference_pose(self, data, ops, target: BodyPoseTarget):
        n = self.model.n_bodies
        h = 3 * n
        nu_d = np.asarray(target.nu_d, float)
        qe = quat_mul_conj(data.quat, np.asarray(target.quat_d, float).reshape(n, 4))
        sign = np.where(qe[:, :1] < 0, -2.0, 2.0)  # e = 2 vec(q ⊗ q_d⁻¹) with the scalar part ≥ 0
        e_att = sign * qe[:, 1:]
        e_p = np.empty(6 * n)
        e_p[:h] = (data.r - np.asarray(target.r_d, float).reshape(n, 3)).ravel()
        e_p[h:] = e_att.ravel()
        e_dot = data.nu - nu_d  # angular part: w (ω − ω_d) + ½ (ω + ω_d) × e, w = |scalar part|
        e_dot[h:] = (
            0.5 * sign * qe[:, :1] * e_dot[h:].reshape(n, 3)
            + 0.5 * cross(data.omega + nu_d[h:].reshape(n, 3), e_att)
        ).ravel()
        raw = nu_d - self._lam * e_p
        raw_dot = np.asarray(target.nu_d_dot, float) - self._lam * e_dot
        nu_r, nu_r_dot = ops.project(raw, raw_dot)
        return nu_r, nu_r_dot, e_p

    def _reference_end_effector(self, model, data, ops, target: EndEffectorTarget):
        g = self.gains
        pos, quat, Jt, Jt_dot = end_effector_state(model, data, self.end_effector)
        nu_e = Jt.dot(data.nu)
        twist_d, twist_d_dot = np.asarray(target.twist, float), np.asarray(target.twist_dot, float)
        if target.quat is None:  # position-only task: 3 rows
            rows = slice(0, 3)
            e = pos - np.asarray(target.position, float)
            e_dot = nu_e[:3] - twist_d[:3]
            lam = self._lam_task[:3]
        else:
            rows = slice(0, 6)
            # e = 2 vec(q ⊗ q_d⁻¹) of the single tool attitude, in plain floats
            qd = target.quat
            qe = quat_mul_tuple(quat.tolist(), (float(qd[0]), -float(qd[1]), -float(qd[2]), -float(qd[3])))
            sign = -2.0 if qe[0] < 0 else 2.0
            e = np.empty(6)
            e[:3] = pos - np.asarray(target.position, float)
            e[3:] = (sign * qe[1], sign * qe[2], sign * qe[3])
            e_dot = nu_e - twist_d
            (sx, sy, sz), (ex, ey, ez) = (0.5 * (nu_e[3:] + twist_d[3:])).tolist(), e[3:].tolist()
            half_w = 0.5 * sign * qe[0]
            e_dot[3:] *= half_w  # w (ω_e − ω_d) + ½ (ω_e + ω_d) × e
            e_dot[3:] += (sy * ez - sz * ey, sz * ex - sx * ez, sx * ey - sy * ex)
            lam = self._lam_task
        m = rows.stop
        nu_er = twist_d[rows] - lam * e
        nu_er_dot = twist_d_dot[rows] - lam * e_dot
        U, grad, grad_dot = 0.0, None, None
        if self.obstacles is not None and self.obstacles.obstacles and g.obstacle_gain > 0:
            U, grad, grad_dot = potential_gradient(self.obstacles, model, data)
            if not U > 0.0:  # no point in the field: ∇U = 0, no null-space column
                grad = None
        # columns X = [J_tᵀ | ∇U] and their rate; Z = 𝓐 X and Ż from one pass of the operators
        c = m + (grad is not None)
        if grad is None:
            X, X_dot = Jt[:m].T, Jt_dot[:m].T
        else:
            XX = np.empty((2, 6 * model.n_bodies, c))
            XX[0, :, :m], XX[1, :, :m] = Jt[:m].T, Jt_dot[:m].T
            XX[0, :, m], XX[1, :, m] = grad, grad_dot
            X, X_dot = XX
        Z, Z_dot = ops.apply(X, X_dot)
        Jt, Jt_dot = Jt[:m], Jt_dot[:m]
        JZ = Jt.dot(Z)  # [T | J_t 𝓐∇U] with T = J_t 𝓐 J_tᵀ (2-D products through ndarray.dot: cheaper than @)
        Q = Jt_dot.dot(Z) + Jt.dot(Z_dot)  # its rate
        T = JZ[:, :m] + self._damping_eye(m, g.damping) if g.damping else JZ[:, :m]
        T_inv, self.guarded = guarded_task_inverse(T)
        # ν_r = J_t^# ν_{e,r} − k_o N_t 𝓐∇U = 𝓐J_tᵀ y − k_o 𝓐∇U with y = T⁻¹ (ν_{e,r} + k_o J_t 𝓐∇U)
        nu_r, nu_r_dot = task_reference(T_inv, JZ, Q, Z, Z_dot, nu_er, nu_er_dot, g.obstacle_gain)
        return nu_r, nu_r_dot, e, U

    # ---------------------------------------------------------------- the law
    def compute(self, data: MultibodyData | JointSpaceData, target, ops=None) -> DacResult:
        """``ops``: how 𝓐 and P are applied (:mod:`ros_lnn.control.mobility`); default the Schur
        complement, valid at any state, or for a joint-state workspace (Pinocchio,
        :class:`ros_lnn.physics.multibody.pin.JointSpaceData`) ``𝓐 = G H⁻¹ Gᵀ``."""
        model = self.model
        if ops is None:
            if getattr(data, "joint_space", False):
                js = cast("JointSpaceData", data)  # Pinocchio's workspace, not imported here
                ops = JointSpaceOperators(model, js, js.G, js.G_dot)
            else:
                ops = ConstraintOperators(model, data)
        U = 0.0
        if self.law == "velocity":
            if not isinstance(target, VelocityTarget):
                raise ConfigError("law I (velocity) needs a VelocityTarget")
            nu_d = np.asarray(target.nu_d, float)
            nu_r, nu_r_dot = ops.project(nu_d, np.asarray(target.nu_d_dot, float))
            task_error = data.nu - nu_d
        elif self.law == "pose":
            if not isinstance(target, BodyPoseTarget):
                raise ConfigError("law II (pose) needs a BodyPoseTarget")
            nu_r, nu_r_dot, task_error = self._reference_pose(data, ops, target)
        else:
            if not isinstance(target, EndEffectorTarget):
                raise ConfigError("law III (end_effector) needs an EndEffectorTarget")
            nu_r, nu_r_dot, task_error, U = self._reference_end_effector(model, data, ops, target)
        return self.port_command(data, nu_r, nu_r_dot, task_error, U)

    def port_command(self, data, nu_r, nu_r_dot, task_error=None, U=0.0) -> DacResult:
        """τ_c = 𝓜 ν̇_r + 𝓒(ν) ν_r − 𝓕_{g,J} − K_d s (eqs 37/46).

        Mass-weighted gains (``K_d = k 𝓜`` per block) make it ``𝓜 (ν̇_r − k s) + 𝓒(ν) ν_r − 𝓕_{g,J}``:
        one product of the block-diagonal 𝓜 with the three vectors [ν̇_r − k s, ν_r, s] gives every
        term and the Lyapunov function ``½ sᵀ𝓜s``."""
        model, n = self.model, self.model.n_bodies
        h = 3 * n
        s = data.nu - nu_r
        W = np.empty((3, 6 * n))
        if self.gains.mass_weighted:
            np.subtract(nu_r_dot, self._kd_rate * s, out=W[0])
        else:
            W[0] = nu_r_dot
        W[1], W[2] = nu_r, s
        lin = self._m3 * W[:, :h]  # m_i w_v
        ang = data.inertia @ W[:, h:].reshape(3, n, 3).transpose(1, 2, 0)  # [:, :, j]: I_i w_j,ω
        tau_c = np.empty(6 * n)
        tau_c[:h] = lin[0]
        tau_c[h:] = (ang[:, :, 0] + cross(data.omega, ang[:, :, 1])).ravel()  # 𝓜 y + 𝓒(ν) ν_r
        tau_c -= gravity_port(model)
        tau_c -= data.joint_moment_port
        if not self.gains.mass_weighted:
            tau_c -= self._kd * s
        lyap = 0.5 * (float(lin[2].dot(s[:h])) + float(ang[:, :, 2].ravel().dot(s[h:])))
        return DacResult(tau_c, s, lyap, nu_r, nu_r_dot, np.zeros(0) if task_error is None else task_error, U)


def lyapunov(model, data, nu_r) -> float:
    """½ (ν − ν_r)ᵀ 𝓜 (ν − ν_r)."""
    n = model.n_bodies
    s = data.nu - nu_r
    return 0.5 * float(
        np.sum(model.masses.repeat(3) * s[: 3 * n] ** 2)
        + np.einsum("ni,nij,nj->", s[3 * n :].reshape(n, 3), data.inertia, s[3 * n :].reshape(n, 3))
    )
