"""Unit quaternions and small rotation helpers for the tensor multibody model (seed 004, App. A).

Convention: ``q = [w, x, y, z]`` (scalar first) maps body coordinates to inertial coordinates,
``a^I = R(q) a^B``; the paper's ``[T]^{B I}`` (eq 58) is ``R(q)ᵀ``. Every function accepts a
leading batch dimension.
"""

from __future__ import annotations

import numpy as np

# skew(v).reshape(9) = v @ _SKEW: the 3×3 cross-product matrix as one product with a constant
_SKEW = np.zeros((3, 9))
_SKEW[2, 1], _SKEW[1, 2], _SKEW[2, 3], _SKEW[0, 5], _SKEW[1, 6], _SKEW[0, 7] = -1.0, 1.0, 1.0, -1.0, -1.0, 1.0


def skew(v: np.ndarray) -> np.ndarray:
    """``[v]×`` with ``[v]× u = v × u``; shape (..., 3) → (..., 3, 3)."""
    v = np.asarray(v, dtype=float)
    return v.dot(_SKEW).reshape(v.shape[:-1] + (3, 3))  # ndarray.dot: cheaper dispatch than @


def cross(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``a × b`` over the last axis (broadcasting) as ``[a]× b``: two small matrix products, several
    times faster than ``np.cross`` on the (N, 3) arrays of the model."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    return (skew(a) @ b[..., None])[..., 0]


# (a ⊗ b)_k = Σ_ij _HAMILTON[4 i + j, k] a_i b_j, and the same with b conjugated
_HAMILTON = np.zeros((16, 4))
for _i, _j, _k, _c in (
    (0, 0, 0, 1),
    (1, 1, 0, -1),
    (2, 2, 0, -1),
    (3, 3, 0, -1),
    (0, 1, 1, 1),
    (1, 0, 1, 1),
    (2, 3, 1, 1),
    (3, 2, 1, -1),
    (0, 2, 2, 1),
    (2, 0, 2, 1),
    (3, 1, 2, 1),
    (1, 3, 2, -1),
    (0, 3, 3, 1),
    (3, 0, 3, 1),
    (1, 2, 3, 1),
    (2, 1, 3, -1),
):
    _HAMILTON[4 * _i + _j, _k] = _c
_HAMILTON_CONJ = _HAMILTON * np.tile([1.0, -1.0, -1.0, -1.0], 4)[:, None]


def _bilinear(a, b, table):
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    ab = a[..., :, None] * b[..., None, :]
    return ab.reshape(ab.shape[:-2] + (16,)).dot(table)


def quat_mul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Hamilton product ``a ⊗ b`` (one outer product and one product with a constant table)."""
    return _bilinear(a, b, _HAMILTON)


def quat_mul_conj(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``a ⊗ b⁻¹`` for unit quaternions (``b`` conjugated)."""
    return _bilinear(a, b, _HAMILTON_CONJ)


def quat_mul_tuple(a, b) -> tuple:
    """Hamilton product of two single quaternions given as sequences of floats, a 4-tuple (cheaper
    than numpy for single quaternions)."""
    aw, ax, ay, az = a
    bw, bx, by, bz = b
    return (
        aw * bw - ax * bx - ay * by - az * bz,
        aw * bx + ax * bw + ay * bz - az * by,
        aw * by - ax * bz + ay * bw + az * bx,
        aw * bz + ax * by - ay * bx + az * bw,
    )


def quat_conj(q: np.ndarray) -> np.ndarray:
    return q * np.array([1.0, -1.0, -1.0, -1.0])


def quat_normalize(q: np.ndarray) -> np.ndarray:
    return q / np.linalg.norm(q, axis=-1, keepdims=True)


# R.reshape(9) = vec(q qᵀ) @ _QUAT_TO_R: every entry of R is a fixed combination of the products q_i q_j
_QUAT_TO_R = np.zeros((16, 9))
for _entry, _terms in enumerate(
    (
        ((0, 0, 1), (1, 1, 1), (2, 2, -1), (3, 3, -1)),
        ((1, 2, 2), (0, 3, -2)),
        ((1, 3, 2), (0, 2, 2)),
        ((1, 2, 2), (0, 3, 2)),
        ((0, 0, 1), (1, 1, -1), (2, 2, 1), (3, 3, -1)),
        ((2, 3, 2), (0, 1, -2)),
        ((1, 3, 2), (0, 2, -2)),
        ((2, 3, 2), (0, 1, 2)),
        ((0, 0, 1), (1, 1, -1), (2, 2, -1), (3, 3, 1)),
    )
):
    for _i, _j, _c in _terms:
        _QUAT_TO_R[4 * _i + _j, _entry] = _c


def quat_to_matrix(q: np.ndarray) -> np.ndarray:
    """Rotation matrix ``R`` (body → inertial) of unit quaternions, shape (..., 4) → (..., 3, 3)."""
    q = np.asarray(q, dtype=float)
    qq = q[..., :, None] * q[..., None, :]
    return qq.reshape(q.shape[:-1] + (16,)).dot(_QUAT_TO_R).reshape(q.shape[:-1] + (3, 3))


def matrix_to_quat(R: np.ndarray) -> np.ndarray:
    """Unit quaternion (w ≥ 0) of a rotation matrix, shape (3, 3) → (4,) (Shepperd's method)."""
    R = np.asarray(R, dtype=float)
    tr = np.trace(R)
    if tr > 0:
        s = 2.0 * np.sqrt(1.0 + tr)
        q = np.array([0.25 * s, (R[2, 1] - R[1, 2]) / s, (R[0, 2] - R[2, 0]) / s, (R[1, 0] - R[0, 1]) / s])
    else:
        i = int(np.argmax(np.diag(R)))
        j, k = (i + 1) % 3, (i + 2) % 3
        s = 2.0 * np.sqrt(1.0 + R[i, i] - R[j, j] - R[k, k])
        q = np.empty(4)
        q[0] = (R[k, j] - R[j, k]) / s
        q[1 + i] = 0.25 * s
        q[1 + j] = (R[j, i] + R[i, j]) / s
        q[1 + k] = (R[k, i] + R[i, k]) / s
    q = q / np.linalg.norm(q)
    return q if q[0] >= 0 else -q


def quat_from_axis_angle(axis, angle) -> np.ndarray:
    axis = np.asarray(axis, dtype=float)
    angle = np.asarray(angle, dtype=float)[..., None]
    n = axis / np.linalg.norm(axis, axis=-1, keepdims=True)
    return np.concatenate([np.cos(angle / 2), np.sin(angle / 2) * n], axis=-1)


def quat_exp(rotvec: np.ndarray) -> np.ndarray:
    """Quaternion of the rotation vector ``θ n`` (exact exponential map, safe at 0)."""
    rotvec = np.asarray(rotvec, dtype=float)
    th = np.linalg.norm(rotvec, axis=-1, keepdims=True)
    half = 0.5 * th
    # sin(θ/2)/θ with its Taylor series near zero
    k = np.where(th > 1e-8, np.sin(half) / np.where(th > 0, th, 1.0), 0.5 - th * th / 48.0)
    return np.concatenate([np.cos(half), k * rotvec], axis=-1)


def quat_rate(q: np.ndarray, omega_world: np.ndarray) -> np.ndarray:
    """``q̇ = ½ [0, ω^I] ⊗ q`` — eq 55 written with the angular velocity in inertial coordinates."""
    zero = np.zeros(omega_world.shape[:-1] + (1,))
    return 0.5 * quat_mul(np.concatenate([zero, omega_world], axis=-1), q)


def euler_zyx_to_quat(roll, pitch, yaw) -> np.ndarray:
    """Eq 56: Z-Y-X (yaw, pitch, roll) Euler angles to the body → inertial quaternion."""
    cr, sr = np.cos(np.asarray(roll) / 2), np.sin(np.asarray(roll) / 2)
    cp, sp = np.cos(np.asarray(pitch) / 2), np.sin(np.asarray(pitch) / 2)
    cy, sy = np.cos(np.asarray(yaw) / 2), np.sin(np.asarray(yaw) / 2)
    return np.stack(
        [
            cy * cp * cr + sy * sp * sr,
            cy * cp * sr - sy * sp * cr,
            cy * sp * cr + sy * cp * sr,
            sy * cp * cr - cy * sp * sr,
        ],
        axis=-1,
    )


def rpy_to_matrix(rpy) -> np.ndarray:
    """URDF ``rpy``: ``R = Rz(yaw) Ry(pitch) Rx(roll)`` (fixed axes X, Y, Z)."""
    return quat_to_matrix(euler_zyx_to_quat(*np.asarray(rpy, dtype=float)))


def rot_x(a):
    c, s = np.cos(a), np.sin(a)
    return np.array([[1, 0, 0], [0, c, -s], [0, s, c]])


def rot_axis(axis, angle) -> np.ndarray:
    return quat_to_matrix(quat_from_axis_angle(axis, angle))


def euler_xyz_intrinsic(R: np.ndarray):
    """Relative Euler angles of eq 20, ``R = Rx(φ) Ry(θ) Rz(ψ)``; shape (..., 3, 3) → three (...)."""
    phi = np.arctan2(-R[..., 1, 2], R[..., 2, 2])
    theta = np.arcsin(np.minimum(np.maximum(R[..., 0, 2], -1.0), 1.0))
    psi = np.arctan2(-R[..., 0, 1], R[..., 0, 0])
    return phi, theta, psi


def attitude_error(q: np.ndarray, q_d: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Attitude error as an inertial tensor: vector part of ``q ⊗ q_d⁻¹`` (sign chosen with w ≥ 0).

    This is ``R_d · vec(q_d⁻¹ ⊗ q)`` — the paper's error of eq 44 carried to the inertial frame, so that
    rotating the whole problem rotates it like every other tensor (the body-frame form does not rotate).
    Returns (error (..., 3), scalar part (...)).
    """
    qe = quat_mul_conj(q, q_d)
    qe = qe * np.where(qe[..., :1] < 0, -1.0, 1.0)
    return qe[..., 1:], qe[..., 0]
