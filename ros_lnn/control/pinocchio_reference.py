"""The reference of ``ros-lnn bench control``'s last line: law III written plainly on Pinocchio.

What a Pinocchio user would write for the same controller, independent of the package's model code:
the arm straight from the URDF (``pin.buildModelFromXML``), the end effector and the obstacle control
points as Pinocchio frames, and the law in joint coordinates with the operational-space quantities —
``Λ⁻¹ = J M⁻¹ Jᵀ`` (+ μ²), the dynamically consistent inverse ``M⁻¹ Jᵀ Λ``, the obstacle push
``−k_o M⁻¹ ∇_q U`` in its null space, ``Ṁ = C + Cᵀ`` for the exact rate of the reference velocity, and

    u = M (q̈_r − k (q̇ − q̇_r)) + C q̇_r + g(q) + D q̇        (law III with K_d = k𝓜, in joint space)

clamped to the effort limits. ``C q̇_r`` uses Pinocchio's Coriolis matrix; the package's law uses the
factorisation ``Gᵀ(𝓜Ġ + 𝓒(ν)G)`` of eq 37, which equals Pinocchio's on the demo arm (a yaw joint and
parallel pitch joints) but not on every arm (both give ``Ḣ = C + Cᵀ`` and the same ``C q̇``). On the demo
arm ``test/control/test_control_joint_space.py`` and the benchmark itself check that it gives the package's
efforts.
"""

from __future__ import annotations

import numpy as np
import pinocchio as pin


class ReferenceLawIII:
    """``u(q, q̇)`` of law III (position task to a fixed point, spherical obstacles, uniform mass-weighted
    gains), on Pinocchio alone."""

    def __init__(
        self,
        urdf_text: str,
        ee_frame: str,
        target_position,
        gains,
        obstacles,
        influence: float,
        eta: float,
        effort_limits,
        gravity=(0.0, 0.0, -9.81),
    ):
        model = pin.buildModelFromXML(urdf_text)
        model.gravity.linear = np.asarray(gravity, float)
        # control points: every link's centre of mass and every joint's origin (on its child link)
        self.points = []
        for j in range(1, model.njoints):
            self.points.append(
                model.addFrame(
                    pin.Frame(
                        f"com_{model.names[j]}",
                        j,
                        pin.SE3(np.eye(3), model.inertias[j].lever),
                        pin.FrameType.OP_FRAME,
                    )
                )
            )
            self.points.append(model.getFrameId(model.names[j], pin.FrameType.JOINT))
        self.model, self.data = model, model.createData()
        self.ee = model.getFrameId(ee_frame)
        self.x_d = np.asarray(target_position, float)
        self.kd, self.lam, self.mu, self.k_o = (
            gains.kd_linear,
            gains.lambda_position,
            gains.damping,
            gains.obstacle_gain,
        )
        self.centers = np.array([c for c, _ in obstacles], float).reshape(-1, 3)
        self.radii = np.array([r for _, r in obstacles], float)
        self.d0, self.eta = influence, eta
        self.limits = np.asarray(effort_limits, float)

    def __call__(self, q, v):
        """``(u clamped, u requested)``."""
        model, data = self.model, self.data
        M = pin.crba(model, data, q)
        C = pin.computeCoriolisMatrix(model, data, q, v)
        g = pin.computeGeneralizedGravity(model, data, q)
        pin.computeJointJacobiansTimeVariation(model, data, q, v)
        pin.updateFramePlacements(model, data)
        J = pin.getFrameJacobian(model, data, self.ee, pin.LOCAL_WORLD_ALIGNED)[:3]
        dJ = pin.getFrameJacobianTimeVariation(model, data, self.ee, pin.LOCAL_WORLD_ALIGNED)[:3]
        e = data.oMf[self.ee].translation - self.x_d
        v_task = -self.lam * e  # ẋ_r = ẋ_d − Λ e with a fixed target
        a_task = -self.lam * (J @ v)
        # obstacle potential U = η d₀ a³/3, a = (d₀ − d)/d₀ inside the field, on the control points
        grad_q, grad_q_dot = np.zeros(model.nv), np.zeros(model.nv)
        active = False
        P = np.array([data.oMf[f].translation for f in self.points])
        for k, i in np.argwhere(np.linalg.norm(P[:, None] - self.centers, axis=2) - self.radii < self.d0):
            delta = P[k] - self.centers[i]
            rho = np.linalg.norm(delta)
            n_hat = delta / rho
            a = (self.d0 - (rho - self.radii[i])) / self.d0
            f1, f2 = -self.eta * a * a, 2.0 * self.eta * a / self.d0
            hessian = f2 * np.outer(n_hat, n_hat) + f1 / rho * (np.eye(3) - np.outer(n_hat, n_hat))
            Jp = pin.getFrameJacobian(model, data, self.points[k], pin.LOCAL_WORLD_ALIGNED)[:3]
            dJp = pin.getFrameJacobianTimeVariation(model, data, self.points[k], pin.LOCAL_WORLD_ALIGNED)[:3]
            grad_q += Jp.T @ (f1 * n_hat)
            grad_q_dot += dJp.T @ (f1 * n_hat) + Jp.T @ (hessian @ (Jp @ v))
            active = True
        # q̇_r = M⁻¹Jᵀ y − k_o M⁻¹∇U with (J M⁻¹ Jᵀ + μ²) y = ẋ_r + k_o J M⁻¹ ∇U, and its exact rate
        M_inv = pin.computeMinverse(model, data, q)
        M_dot = C + C.T
        W = M_inv @ J.T
        W_dot = M_inv @ (dJ.T - M_dot @ W)
        Lam_inv = J @ W + self.mu**2 * np.eye(3)
        Lam_inv_dot = dJ @ W + J @ W_dot
        rhs, rhs_dot = v_task, a_task
        if active:
            Wu = M_inv @ grad_q
            Wu_dot = M_inv @ (grad_q_dot - M_dot @ Wu)
            rhs = rhs + self.k_o * (J @ Wu)
            rhs_dot = rhs_dot + self.k_o * (dJ @ Wu + J @ Wu_dot)
        y = np.linalg.solve(Lam_inv, rhs)
        y_dot = np.linalg.solve(Lam_inv, rhs_dot - Lam_inv_dot @ y)
        v_r = W @ y
        a_r = W_dot @ y + W @ y_dot
        if active:
            v_r = v_r - self.k_o * Wu
            a_r = a_r - self.k_o * Wu_dot
        u = M @ (a_r - self.kd * (v - v_r)) + C @ v_r + g + model.damping * v
        return np.clip(u, -self.limits, self.limits), u
