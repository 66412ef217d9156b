"""Joint-space laws on the certain model, beside the DAC laws: what a robot team runs first on an arm.

* ``feedforward_pd``: computed-torque feed-forward of the model along the desired trajectory and a
  joint PD on top, ``u = τ_m(q_d, q̇_d, q̈_d) + K_p (q_d − q) + K_d (q̇_d − q̇)`` with
  ``τ_m = H q̈ + C q̇ + g − u_passive`` (Pinocchio's RNEA on the certain model; ``u_passive`` the
  description's joint springs and dampers). The feed-forward needs no measurement, so it is what an
  ``effort_controllers/JointGroupEffortController`` set-up adds to its PD; the model's compensated term
  (an identified arm's friction and residual) is evaluated at the desired state too.
* ``gravity_compensation``: ``u = g(q) − u_passive − K_d q̇``, the compensated term at the measured
  state: the arm floats where it is left (hand guiding, a zero-gravity mode); ``K_d`` (often small or
  zero) brakes it. No target is followed.

Both return their effort as the port ``E u`` too (``Gᵀ E u = u``, :func:`effort_port`), so a node
publishes the same two commands for every law. The law's Lyapunov function (the ``lyapunov`` of its
:class:`DacResult`): ``½ ėᵀ H ė + ½ eᵀ K_p e`` with ``e = q − q_d`` (feed-forward + PD), the kinetic
energy ``½ q̇ᵀ H q̇`` (gravity compensation); ``task_error`` is ``e`` and ``s`` is ``ė``, model order.
"""

from __future__ import annotations

import numpy as np
import pinocchio as pin

from ..errors import ConfigError
from ..physics.multibody.pin import JointSpaceData, PinocchioModel, effort_port, kinematics
from .dac import DacResult

JOINT_LAWS = ("feedforward_pd", "gravity_compensation")


def per_joint(values, n: int, name: str) -> np.ndarray:
    """``values`` as n non-negative finite gains: one number for every joint, or one per joint."""
    v = np.asarray(values, dtype=float).ravel()
    if v.size == 1:
        v = np.full(n, float(v[0]))
    if v.size != n or not np.all(np.isfinite(v)) or np.any(v < 0):
        raise ConfigError(f"{name} needs one finite gain >= 0, or one per joint ({n}), got {list(v)}")
    return v


class JointLaw:
    """One of :data:`JOINT_LAWS` on ``pmodel`` (``frame_id``: the end-effector frame, for its position)."""

    def __init__(self, pmodel: PinocchioModel, law: str, frame_id: int):
        if law not in JOINT_LAWS:
            raise ConfigError(f"joint law '{law}' is not one of {', '.join(JOINT_LAWS)}")
        self.pmodel, self.law, self.frame_id = pmodel, law, frame_id
        self.feedforward = law == "feedforward_pd"
        self._workspace = pmodel.pin.createData()  # RNEA along the trajectory, H at the state
        n = pmodel.nv
        self.kp, self.kd = np.zeros(n), np.zeros(n)
        self._zero = np.zeros(n)

    def set_gains(self, kp, kd) -> None:
        """``K_p`` [N m/rad or N/m] and ``K_d`` [N m s/rad or N s/m] per coordinate (model order)."""
        n = self.pmodel.nv
        self.kp, self.kd = per_joint(kp, n, "joint_kp"), per_joint(kd, n, "joint_kd")

    def step(
        self, q, qd, q_d, qd_d, qdd_d
    ) -> tuple[DacResult, np.ndarray, np.ndarray, JointSpaceData, np.ndarray]:
        """``(result, model part, feedback, data, end-effector position)`` at the state ``(q, q̇)`` for the
        desired sample ``(q_d, q̇_d, q̈_d)`` (all model order; gravity compensation ignores the sample):
        the model part is the feed-forward (or gravity) torque, the feedback the PD (or damping) term."""
        pm, ws = self.pmodel, self._workspace
        model = pm.pin
        if self.feedforward:
            part = pin.rnea(model, ws, q_d, qd_d, qdd_d).copy()
            if pm.has_passive:
                part -= pm.passive_efforts(q_d, qd_d)
            e, e_dot = q - q_d, qd - qd_d
            feedback = -(self.kp * e + self.kd * e_dot)
        else:
            part = pin.computeGeneralizedGravity(model, ws, q).copy()
            if pm.has_passive:
                part -= pm.passive_efforts(q, qd)
            e, e_dot = self._zero, qd  # with K_p = 0 in V: the kinetic energy
            feedback = -self.kd * qd
        H = pin.crba(model, ws, q)
        H = np.triu(H) + np.triu(H, 1).T
        lyapunov = 0.5 * float(e_dot.dot(H.dot(e_dot)) + e.dot(self.kp * e))
        data = kinematics(pm, q, qd, dynamics=False)
        ee = pin.updateFramePlacement(model, pm.data, self.frame_id).translation.copy()
        zeros = np.zeros(6 * data.n_bodies)
        port = effort_port(data, part + feedback)
        result = DacResult(port, e_dot.copy(), lyapunov, zeros, zeros.copy(), e.copy())
        return result, part, feedback, data, ee
