"""Simulator of a fixed-base arm in joint coordinates: RK4 on ``(q, q̇)`` with Pinocchio's ABA.

The joints hold by construction (the state is the joint coordinates), so nothing drifts and no
Baumgarte stabilisation is needed — unlike the maximal-coordinate simulator of
:mod:`ros_lnn.physics.multibody.sim`, which integrates every body's pose and keeps the joints together
only up to the integration error. Joint efforts ``u`` drive it; a port ``τ`` (6N body wrenches, e.g. a
disturbance or the controller's port command) enters as ``Gᵀ τ``; the description's joint springs and
dampers are added by :func:`ros_lnn.physics.multibody.pin.forward_dynamics`.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pinocchio as pin

from .pin import PinocchioModel, body_poses, forward_dynamics, wrenches_to_joint

#: ``efforts(t, q, q̇) -> u``: joint efforts (model order) at a stage of the step.
EffortFunction = Callable[[float, np.ndarray, np.ndarray], np.ndarray]


def port_efforts(pmodel: PinocchioModel, q, port) -> np.ndarray:
    """``Gᵀ τ`` at the configuration ``q``: the joint efforts equivalent to the port ``τ`` (6N)."""
    pin.computeJointJacobians(pmodel.pin, pmodel.data, np.asarray(q, float))
    return wrenches_to_joint(pmodel, body_poses(pmodel)[1], pmodel.data.J, port)


def rk4_step(
    pmodel: PinocchioModel,
    q,
    qd,
    dt: float,
    efforts: EffortFunction | None = None,
    t: float = 0.0,
    dynamics: Callable[[np.ndarray, np.ndarray, np.ndarray], np.ndarray] | None = None,
):
    """One classical RK4 step of ``q̈ = aba(q, q̇, u)``; ``efforts`` is evaluated at every stage (a
    continuous-time controller). ``dynamics(q, q̇, u) -> q̈`` replaces the description's forward dynamics
    (a :class:`ros_lnn.physics.multibody.pin_plant.Plant` that differs from it). Returns ``(q, q̇)`` at
    ``t + dt``."""
    zero = np.zeros(pmodel.nv)
    if dynamics is None:

        def dynamics(qk, qdk, u):
            return forward_dynamics(pmodel, qk, qdk, u)

    def accel(tk, qk, qdk):
        return dynamics(qk, qdk, zero if efforts is None else efforts(tk, qk, qdk))

    h = 0.5 * dt
    a1 = accel(t, q, qd)
    q2, qd2 = q + h * qd, qd + h * a1
    a2 = accel(t + h, q2, qd2)
    q3, qd3 = q + h * qd2, qd + h * a2
    a3 = accel(t + h, q3, qd3)
    q4, qd4 = q + dt * qd3, qd + dt * a3
    a4 = accel(t + dt, q4, qd4)
    w = dt / 6.0
    return q + w * (qd + 2.0 * qd2 + 2.0 * qd3 + qd4), qd + w * (a1 + 2.0 * a2 + 2.0 * a3 + a4)
