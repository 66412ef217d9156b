"""Physically consistent identification: every body's pseudo-inertia positive definite
(:mod:`ros_lnn.physics.inertial_parameters`) — positive mass, and principal moments about the centre
of mass that satisfy the triangle inequality. Plain least squares does not know this: a short or
noisy recording can give a body a negative mass or an impossible inertia, and then M(q) can lose its
positive definiteness in states the recording never visited.

The log-Cholesky parametrisation (Rucker & Wensing 2022) writes ``J = U Uᵀ`` with::

    U = e^α [[e^d1, s12, s13, t1], [0, e^d2, s23, t2], [0, 0, e^d3, t3], [0, 0, 0, 1]]

so every θ = (α, d1, d2, d3, s12, s23, s13, t1, t2, t3) ∈ R¹⁰ is a consistent body and the fit
becomes unconstrained nonlinear least squares in θ (with friction still linear), started at the URDF.
"""

from __future__ import annotations

import numpy as np

from ..physics.inertial_parameters import from_pseudo_inertia, pseudo_inertia_inside


def parameters_from_theta(theta) -> np.ndarray:
    a, d1, d2, d3, s12, s23, s13, t1, t2, t3 = np.asarray(theta, dtype=float)
    U = np.exp(a) * np.array(
        [[np.exp(d1), s12, s13, t1], [0.0, np.exp(d2), s23, t2], [0.0, 0.0, np.exp(d3), t3], [0, 0, 0, 1.0]]
    )
    return from_pseudo_inertia(U @ U.T)


def theta_from_parameters(pi, floor: float = 1e-9) -> np.ndarray:
    """θ of a consistent body; a body on or over the boundary is first moved inside (its pseudo-inertia's
    eigenvalues raised to ``floor`` × the largest)."""
    J = pseudo_inertia_inside(pi, floor)
    flip = np.eye(4)[::-1]
    U = flip @ np.linalg.cholesky(flip @ J @ flip) @ flip  # upper triangular, J = U Uᵀ
    e_a = U[3, 3]
    U = U / e_a
    return np.array(
        [np.log(e_a), np.log(U[0, 0]), np.log(U[1, 1]), np.log(U[2, 2]), U[0, 1], U[1, 2], U[0, 2], *U[:3, 3]]
    )


def _parameters_and_jacobian(theta_all: np.ndarray, bodies: int, step: float = 1e-6):
    """π of every body and dπ/dθ (block diagonal, by central differences)."""
    pi = np.zeros(10 * bodies)
    P = np.zeros((10 * bodies, 10 * bodies))
    for b in range(bodies):
        th = theta_all[10 * b : 10 * b + 10]
        pi[10 * b : 10 * b + 10] = parameters_from_theta(th)
        for k in range(10):
            e = np.zeros(10)
            e[k] = step
            P[10 * b : 10 * b + 10, 10 * b + k] = (
                parameters_from_theta(th + e) - parameters_from_theta(th - e)
            ) / (2 * step)
    return pi, P


def consistent_fit(G, c, bodies: int, prior, phi0, penalty, lam: float, max_iterations: int = 300):
    """Rigid-body parameters π (consistent by construction) and friction φ minimising
    ``‖A_w [π; φ] − b_w‖² + λ Σ penalty (π − prior)²``, given the normal equations ``G = A_wᵀA_w``,
    ``c = A_wᵀb_w`` (so the fit costs the same for any number of samples), started at the (consistent)
    ``prior`` and ``phi0``. Returns ``(pi, phi, info)``."""
    from scipy.optimize import least_squares

    n_pi = 10 * bodies
    w, V = np.linalg.eigh(G)
    live = w > 1e-12 * w.max()
    R = np.sqrt(w[live])[:, None] * V[:, live].T  # RᵀR = G on the directions the data reach
    rhs = (V[:, live].T @ c) / np.sqrt(w[live])
    root = np.sqrt(lam * penalty)

    def residual(x):
        pi = np.concatenate([parameters_from_theta(x[10 * b : 10 * b + 10]) for b in range(bodies)])
        return np.concatenate([R @ np.concatenate([pi, x[n_pi:]]) - rhs, root * (pi - prior)])

    def jacobian(x):
        _, P = _parameters_and_jacobian(x[:n_pi], bodies)
        top = np.concatenate([R[:, :n_pi] @ P, R[:, n_pi:]], axis=1)
        bottom = np.concatenate([root[:, None] * P, np.zeros((n_pi, len(x) - n_pi))], axis=1)
        return np.concatenate([top, bottom])

    x0 = np.concatenate(
        [np.concatenate([theta_from_parameters(prior[10 * b : 10 * b + 10]) for b in range(bodies)]), phi0]
    )
    sol = least_squares(residual, x0, jac=jacobian, method="trf", max_nfev=max_iterations)
    pi = np.concatenate([parameters_from_theta(sol.x[10 * b : 10 * b + 10]) for b in range(bodies)])
    return pi, sol.x[n_pi:], {"iterations": int(sol.nfev), "converged": bool(sol.status > 0)}
