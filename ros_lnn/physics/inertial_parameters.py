"""A rigid body's ten inertial parameters ``π = (m, h = m c, I_o)`` (Pinocchio's order: ``m, m c_x,
m c_y, m c_z, I_xx, I_xy, I_yy, I_xz, I_yz, I_zz``, the inertia about the body frame's origin) and
when they describe a real mass distribution: iff the pseudo-inertia::

    J(π) = [[Σ, h], [hᵀ, m]],   Σ = ½ tr(I_o) 𝟙 − I_o   (the second moment ∫ r rᵀ dm)

is positive semidefinite (Wensing, Kim & Slotine 2017; it implies m ≥ 0 and principal moments about
the centre of mass that satisfy the triangle inequality)."""

from __future__ import annotations

import numpy as np

from ..errors import DataError

#: Names of the ten parameters, in that order.
PARAMETER_NAMES = ("m", "m*cx", "m*cy", "m*cz", "Ixx", "Ixy", "Iyy", "Ixz", "Iyz", "Izz")


def pseudo_inertia(p) -> np.ndarray:
    """``[[½ tr(I) 1 − I, h], [hᵀ, m]]`` of one body's ten parameters (about the frame origin)."""
    p = np.asarray(p, dtype=float)
    m, h = p[0], p[1:4]
    inertia = np.array([[p[4], p[5], p[7]], [p[5], p[6], p[8]], [p[7], p[8], p[9]]])
    pseudo = np.zeros((4, 4))
    pseudo[:3, :3] = 0.5 * np.trace(inertia) * np.eye(3) - inertia
    pseudo[:3, 3] = pseudo[3, :3] = h
    pseudo[3, 3] = m
    return pseudo


def from_pseudo_inertia(J: np.ndarray) -> np.ndarray:
    """The ten parameters of a pseudo-inertia (inverse of :func:`pseudo_inertia`: ``I = tr(Σ) 1 − Σ``)."""
    sigma = J[:3, :3]
    inertia = np.trace(sigma) * np.eye(3) - sigma
    return np.array(
        [
            J[3, 3],
            *J[:3, 3],
            inertia[0, 0],
            inertia[0, 1],
            inertia[1, 1],
            inertia[0, 2],
            inertia[1, 2],
            inertia[2, 2],
        ]
    )


def consistent(p, tol: float = 1e-9) -> bool:
    """Physical consistency of one body's ten parameters: mass > 0 and the pseudo-inertia positive
    semidefinite (to ``tol`` relative to its largest entry)."""
    J = pseudo_inertia(p)
    return bool(p[0] > 0 and np.linalg.eigvalsh(J).min() >= -tol * max(np.abs(J).max(), 1e-300))


def pseudo_inertia_inside(p, floor: float, least: float = 0.0) -> np.ndarray:
    """The pseudo-inertia of one body moved inside the consistent cone (the start of a consistent fit from
    a body on, or by rounding just outside, its boundary): its eigenvalues raised to ``floor`` × the
    largest, or ``floor`` × ``least`` where that is more; a DataError where both are not positive."""
    w, V = np.linalg.eigh(pseudo_inertia(p))
    scale = max(float(w[-1]), least)
    if scale <= 0:
        raise DataError("a body with no positive mass or inertia cannot be made consistent")
    return (V * np.maximum(w, floor * scale)) @ V.T
