"""Joint friction, linear in its parameters: per joint ``τ_f = f_v q̇ + f_c tanh(q̇ / v_s) + f_o``
(viscous, smooth Coulomb, offset — the offset also takes a torque sensor's or a current sensor's
bias). ``v_s`` (rad/s or m/s) sets how sharply the Coulomb term changes sign; it is fixed, not fitted,
so the model stays linear in ``(f_v, f_c, f_o)``."""

from __future__ import annotations

import numpy as np

NAMES = ("viscous", "coulomb", "offset")
COULOMB_VELOCITY = 0.02


def regressor(qd, coulomb_velocity: float = COULOMB_VELOCITY) -> np.ndarray:
    """(N, n, 3 n): joint ``j``'s row holds ``(q̇_j, tanh(q̇_j / v_s), 1)`` at columns ``3 j … 3 j + 2``."""
    qd = np.atleast_2d(np.asarray(qd, dtype=float))
    N, n = qd.shape
    out = np.zeros((N, n, 3 * n))
    for j in range(n):
        out[:, j, 3 * j] = qd[:, j]
        out[:, j, 3 * j + 1] = np.tanh(qd[:, j] / coulomb_velocity)
        out[:, j, 3 * j + 2] = 1.0
    return out


def torque(params, qd, coulomb_velocity: float = COULOMB_VELOCITY) -> np.ndarray:
    """τ_f (N, n) of ``params`` (3 n, per joint viscous, Coulomb, offset)."""
    p = np.asarray(params, dtype=float).reshape(-1, 3)
    qd = np.atleast_2d(np.asarray(qd, dtype=float))
    return qd * p[:, 0] + np.tanh(qd / coulomb_velocity) * p[:, 1] + p[:, 2]
