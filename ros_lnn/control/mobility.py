"""Constraint-consistent mobility of the multibody model and its time derivative.

``𝓐 = 𝓜⁻¹ − 𝓜⁻¹Jᵀ S⁻¹ J 𝓜⁻¹`` (``S = J𝓜⁻¹Jᵀ``) is the top-left block of the KKT inverse (eq 35): it
maps a generalised force to the velocity the constrained system can take, and ``P = 𝓐 𝓜`` is the
mass-weighted projector onto ``null(J)``. Reference velocities built through ``P`` or ``𝓐`` satisfy
``J ν_r = 0`` identically, which the Lyapunov argument of eqs 40–41 needs (``sᵀ Jᵀ F_J = 0``).

Derivatives are analytic along the current twist: ``Ṁ = blockdiag(0, Ω I − I Ω)`` (eq 76), the same
for ``𝓜⁻¹``, and ``J̇`` from :func:`ros_lnn.physics.multibody.constraint_jacobian_rate`, so that
``ν̇_r`` is the exact time derivative of ``ν_r(x, t)`` the feed-forward needs.
"""

from __future__ import annotations

import math

import numpy as np

from ..physics.multibody import constraint_jacobian_rate
from ..physics.multibody.quaternion import skew


def block_diag_blocks(model, blocks_lin: np.ndarray, blocks_ang: np.ndarray) -> np.ndarray:
    """Dense 6N×6N from per-body 3×3 blocks (linear part, angular part)."""
    n = model.n_bodies
    out = np.zeros((36 * n * n,))
    lin_idx, ang_idx = _block_index(model)
    out[lin_idx] = np.broadcast_to(blocks_lin, (n, 3, 3)).ravel()
    out[ang_idx] = np.broadcast_to(blocks_ang, (n, 3, 3)).ravel()
    return out.reshape(6 * n, 6 * n)


def _block_index(model):
    """Flat positions (in a 6N×6N matrix) of the 3×3 diagonal blocks of the linear and angular parts."""
    idx = model.__dict__.get("_mobility_block_index")
    if idx is None:
        n = model.n_bodies
        ar = np.arange(3)
        rows = 3 * np.arange(n)[:, None, None] + ar[None, :, None]
        cols = 3 * np.arange(n)[:, None, None] + ar[None, None, :]
        lin = (rows * 6 * n + cols).ravel()
        ang = ((rows + 3 * n) * 6 * n + cols + 3 * n).ravel()
        diag = (rows * 6 * n + rows.transpose(0, 2, 1))[:, ar, ar].ravel()  # the 3N linear diagonal entries
        idx = model._mobility_block_index = (lin, ang, diag, np.repeat(1.0 / model.masses, 3))
    return idx[0], idx[1]


class Mobility:
    """``A`` (constrained mobility 𝓐), ``P = 𝓐𝓜`` and their rates; ``A0 = 𝓜⁻¹`` and its rate are
    formed only when read."""

    def __init__(self, model, data, A, A_dot, P, P_dot, A0=None, A0_dot=None):
        self._model, self._data = model, data
        self.A, self.A_dot, self.P, self.P_dot = A, A_dot, P, P_dot
        self._A0, self._A0_dot = A0, A0_dot

    @property
    def A0(self) -> np.ndarray:
        if self._A0 is None:
            self._A0 = _mass_inverse(self._model, self._data)
        return self._A0

    @property
    def A0_dot(self) -> np.ndarray:
        if self._A0_dot is None:
            self._A0_dot = _mass_inverse_rate(self._model, self._data)
        return self._A0_dot


def _pair_index(model):
    """Flat positions in the (6N, 12N) buffer [𝓜̇⁻¹ | 𝓜⁻¹]: the 3N linear diagonal and N angular blocks
    of 𝓜⁻¹, then the N angular blocks of its rate."""
    idx = model.__dict__.get("_mobility_pair_index")
    if idx is None:
        _lin, ang, diag, _ = model._mobility_block_index
        m = 6 * model.n_bodies

        def widen(flat, offset):
            return (flat // m) * 2 * m + flat % m + offset

        idx = model._mobility_pair_index = np.concatenate([widen(diag, m), widen(ang, m), widen(ang, 0)])
    return idx


def _mass_inverse(model, data) -> np.ndarray:
    n = model.n_bodies
    _block_index(model)
    _lin, ang, diag, inv_mass = model._mobility_block_index
    out = np.zeros(36 * n * n)
    out[diag] = inv_mass
    out[ang] = data.inertia_inv.ravel()
    return out.reshape(6 * n, 6 * n)


def _mass_inverse_rate(model, data) -> np.ndarray:
    """d/dt 𝓜⁻¹ = blockdiag(0, Ω I⁻¹ − I⁻¹ Ω)."""
    n = model.n_bodies
    _, ang = _block_index(model)
    Om = skew(data.omega)
    Iinv = data.inertia_inv
    out = np.zeros(36 * n * n)
    out[ang] = (Om @ Iinv - Iinv @ Om).ravel()
    return out.reshape(6 * n, 6 * n)


def _schur_solver(S: np.ndarray):
    """``X ↦ S⁻¹ X`` for the Schur complement, every solve of the step through one inverse. (SciPy's
    LAPACK triangular solves were tried: its BLAS threads made them milliseconds on a loaded 2-core
    machine at N = 10.)"""
    S_inv = np.linalg.inv(S)
    return lambda X: S_inv @ X


def mobility(model, data, with_rate: bool = True, want: str = "both") -> Mobility:
    """``want``: "A" (law III needs only 𝓐, 𝓐̇), "P" (laws I/II need only P, Ṗ) or "both"."""
    n = model.n_bodies
    if with_rate:  # [𝓜̇⁻¹ | 𝓜⁻¹] side by side in one buffer, filled with one indexed assignment
        _block_index(model)
        inv_mass = model._mobility_block_index[3]
        Iinv = data.inertia_inv
        D = skew(data.omega) @ Iinv  # Ω I⁻¹; the rate block Ω I⁻¹ − I⁻¹ Ω = D + Dᵀ (I⁻¹ symmetric)
        both = np.zeros((6 * n, 12 * n))
        both.reshape(-1)[_pair_index(model)] = np.concatenate(
            [inv_mass, Iinv.ravel(), (D + D.transpose(0, 2, 1)).ravel()]
        )
        A0_dot, A0 = both[:, : 6 * n], both[:, 6 * n :]
    else:
        A0, A0_dot = _mass_inverse(model, data), None
    J = data.J
    if J.shape[0] == 0:
        I6 = np.eye(6 * n)
        return Mobility(model, data, A0, A0_dot, I6, np.zeros_like(I6) if with_rate else None, A0, A0_dot)
    Jt = J.T
    B = A0 @ Jt
    S = J @ B
    solve = _schur_solver(S)
    P = A = P_dot = A_dot = SiJ = SiBt = None
    if want in ("P", "both"):
        SiJ = solve(J)  # S⁻¹J
        P = -(B @ SiJ)
        P.reshape(-1)[:: 6 * n + 1] += 1.0
    if want in ("A", "both"):
        SiBt = solve(B.T)  # S⁻¹Bᵀ
        A = A0 - B @ SiBt
        A = 0.5 * (A + A.T)
    if not with_rate:
        return Mobility(model, data, A, None, P, None, A0, None)
    Jd = constraint_jacobian_rate(model, data)
    J_Jd = np.concatenate([J, Jd], axis=1)
    Bd = both @ J_Jd.T  # 𝓜̇⁻¹ Jᵀ + 𝓜⁻¹ J̇ᵀ
    Sd = J_Jd @ np.concatenate([Bd, B])  # J Ḃ + J̇ B
    if SiJ is not None:
        SiJ_dot = solve(Jd - Sd @ SiJ)
        P_dot = -(Bd @ SiJ + B @ SiJ_dot)
    if SiBt is not None:
        BdX = Bd @ SiBt
        A_dot = A0_dot - BdX - BdX.T + SiBt.T @ (Sd @ SiBt)
    return Mobility(model, data, A, A_dot, P, P_dot, A0, A0_dot)


# ----------------------------------------------------------------------------- column-wise operators
try:  # np.linalg.inv without its Python wrapper (the wrapper costs as much as a 6×6 factorisation)
    from numpy.linalg import _umath_linalg as _LINALG

    def small_inverse(a: np.ndarray) -> np.ndarray:
        """Inverse of a small square matrix; ``LinAlgError`` when it is singular, as ``np.linalg.inv``."""
        out = _LINALG.inv(a, signature="d->d")
        flat = out.reshape(-1)
        if not math.isfinite(flat.dot(flat)):  # nan or inf anywhere: let numpy raise (or return) as it does
            return np.linalg.inv(a)
        return out
except ImportError:  # pragma: no cover - numpy without the private gufunc module
    small_inverse = np.linalg.inv


#: Relative damping of a task inverse that turned out singular (``T + ε tr(T)/m I``): the guard of
#: :func:`guarded_task_inverse`, far below the tasks' conditioning anywhere a task is reachable.
SINGULAR_DAMPING = 1e-6


def guarded_task_inverse(T: np.ndarray, inverse=None):
    """``(T⁻¹, guarded)``: the inverse of a task matrix ``T = J_t 𝓐 J_tᵀ`` (+ μ²I), and when ``T`` is
    singular or not invertible in floating point (a 6-D task on an arm with fewer joints and μ = 0, a
    stretched arm's position task) the damped ``(T + ε tr(T)/m I)⁻¹`` with ``guarded`` True: the law
    keeps commanding (the damped least-squares reference of eq 54 with a tiny μ) instead of failing."""
    inverse = inverse or small_inverse
    try:
        out = inverse(T)
        if (
            math.isfinite(float(out.reshape(-1).dot(out.reshape(-1))))
            and float(np.abs(out).max()) * float(np.abs(T).max()) < 1e12
        ):
            return out, False
    except np.linalg.LinAlgError:
        pass
    m = T.shape[0]
    scale = max(float(np.trace(T)) / m, 1e-12) if math.isfinite(float(np.trace(T))) else 1.0
    return np.linalg.inv(T + SINGULAR_DAMPING * scale * np.eye(m)), True


def task_reference(T_inv, JW, Q, W, W_dot, nu_er, nu_er_dot, obstacle_gain: float):
    """The reference rate and its derivative, ``(W c, Ẇ c + W[:, :m] ẏ)``, over the columns ``W`` of the
    task (m, weighted by ``T⁻¹``) and, where ``W`` has one more, of the obstacle potential: ``c = [y; −k_o]``
    with ``y = T⁻¹ (ν_{e,r} + k_o J_t W_∇U)``; ``JW = J_t W`` and ``Q`` its rate."""
    m, c = T_inv.shape[0], W.shape[1]
    coef = np.empty(c)
    rhs, rhs_dot = nu_er, nu_er_dot
    if c > m:
        k = obstacle_gain
        rhs, rhs_dot = nu_er + k * JW[:, m], nu_er_dot + k * Q[:, m]
        coef[m] = -k
    y = coef[:m] = T_inv.dot(rhs)
    y_dot = T_inv.dot(rhs_dot - Q[:, :m].dot(y))
    ref_dot = W_dot.dot(coef)
    ref_dot += W[:, :m].dot(y_dot)
    return W.dot(coef), ref_dot


class ConstraintOperators:
    """𝓐 and P applied to a few columns, with the exact rate, without forming the 6N×6N matrices.

    With ``B = 𝓜⁻¹Jᵀ``, ``S = J B`` (the Schur complement, inverted once per step):

    * ``Z = 𝓐 X = 𝓜⁻¹ F``, ``F = X − Jᵀ W``, ``W = S⁻¹ Bᵀ X``; differentiating ``J Z = 0`` gives
      ``Ż = V − B S⁻¹ (J V + J̇ Z)`` with ``V = 𝓜̇⁻¹ F + 𝓜⁻¹ (Ẋ − J̇ᵀ W)``;
    * ``z = P x = x − B w``, ``w = S⁻¹ J x``; ``ż = u − B S⁻¹ (J u + J̇ z)`` with ``u = ẋ − Ḃ w``.

    ``Ż`` is the total derivative of ``𝓐(x) X(t)`` along the current twist (``Ẋ`` the columns' own
    rate), the same as :func:`mobility`'s ``A_dot X + A Ẋ``, at the cost of a few matrix–vector
    products (test/control/test_control_fast_paths.py compares the two to round-off)."""

    __slots__ = ("A0", "A0_dot", "both", "J", "Jd", "B", "S_inv")

    def __init__(self, model, data):
        n = model.n_bodies
        template, ang, rate = _filled_pair(model, "inverse")
        Iinv = data.inertia_inv
        D = skew(data.omega) @ Iinv  # Ω I⁻¹; the rate block Ω I⁻¹ − I⁻¹ Ω = D + Dᵀ
        both = template.copy()  # [𝓜̇⁻¹ | 𝓜⁻¹], the constant 1/m diagonal already in place
        flat = both.reshape(-1)
        flat[ang] = Iinv.ravel()
        flat[rate] = (D + D.transpose(0, 2, 1)).ravel()
        self.both, self.A0_dot, self.A0 = both, both[:, : 6 * n], both[:, 6 * n :]
        J = self.J = data.J
        if J.shape[0]:
            self.Jd = constraint_jacobian_rate(model, data)
            self.B = self.A0.dot(J.T)
            self.S_inv = small_inverse(J.dot(self.B))
        else:
            self.Jd = self.B = self.S_inv = None

    def apply(self, X: np.ndarray, X_dot: np.ndarray):
        """``(𝓐 X, d/dt (𝓐 X))`` for columns ``X`` (6N, c) with rate ``X_dot`` (or vectors)."""
        A0, B, J, Jd, Si = self.A0, self.B, self.J, self.Jd, self.S_inv
        # 2-D products through ndarray.dot: the same BLAS call as @ at a third of its dispatch cost
        if B is None:
            return A0.dot(X), self.A0_dot.dot(X) + A0.dot(X_dot)
        W = Si.dot(B.T.dot(X))
        F = X - J.T.dot(W)
        Z = A0.dot(F)
        V = self.A0_dot.dot(F) + A0.dot(X_dot - Jd.T.dot(W))
        return Z, V - B.dot(Si.dot(J.dot(V) + Jd.dot(Z)))

    def project(self, x: np.ndarray, x_dot: np.ndarray):
        """``(P x, d/dt (P x))``: the mass-weighted projection onto ``null(J)`` and its exact rate."""
        B, J, Jd, Si = self.B, self.J, self.Jd, self.S_inv
        if B is None:
            return x, x_dot
        w = Si.dot(J.dot(x))
        z = x - B.dot(w)
        u = x_dot - self.A0_dot.dot(J.T.dot(w)) - self.A0.dot(Jd.T.dot(w))  # ẋ − Ḃ w
        return z, u - B.dot(Si.dot(J.dot(u) + Jd.dot(z)))


class JointSpaceOperators:
    """:class:`ConstraintOperators` for a state on the constraint manifold given with its twist map.

    When the columns of ``G`` span ``null(J)`` (a configuration from forward kinematics), the
    constrained mobility is ``𝓐 = G H⁻¹ Gᵀ`` with the joint-space inertia ``H = Gᵀ𝓜G`` — for an arm
    with n joints an n×n inverse instead of the Schur complement of its 5n revolute rows. Rates:
    ``Z = G w``, ``H w = GᵀX``; ``Ż = Ġ w + G ẇ`` with ``H ẇ = Ġᵀ (X − 𝓜Z) + Gᵀ (Ẋ − 𝓜̇Z − 𝓜Ġw)``
    (from ``Ḣ = Ġᵀ𝓜G + Gᵀ𝓜̇G + Gᵀ𝓜Ġ``); ``P x = 𝓐 (𝓜x)``. Equal to the Schur form to round-off
    on the manifold (test/control/test_control_fast_paths.py); off it (a simulator's drift) use that one."""

    __slots__ = ("M", "M_dot", "G", "G_dot", "H_inv")

    def __init__(self, model, data, G: np.ndarray, G_dot: np.ndarray):
        template, ang, rate = _filled_pair(model, "mass")
        E = skew(data.omega) @ data.inertia  # Ω I; the rate block Ω I − I Ω = E + Eᵀ
        both = template.copy()  # [𝓜, 𝓜̇], the constant mass diagonal already in place
        flat = both.reshape(-1)
        flat[ang] = data.inertia.ravel()
        flat[rate] = (E + E.transpose(0, 2, 1)).ravel()
        self.M, self.M_dot, self.G, self.G_dot = both[0], both[1], G, G_dot
        self.H_inv = small_inverse(G.T.dot(both[0].dot(G)))

    def apply(self, X: np.ndarray, X_dot: np.ndarray):
        M, G, Gd, Hi = self.M, self.G, self.G_dot, self.H_inv
        w = Hi.dot(G.T.dot(X))
        Z = G.dot(w)
        Gd_w = Gd.dot(w)
        rhs = Gd.T.dot(X - M.dot(Z)) + G.T.dot(X_dot - self.M_dot.dot(Z) - M.dot(Gd_w))
        return Z, Gd_w + G.dot(Hi.dot(rhs))

    def project(self, x: np.ndarray, x_dot: np.ndarray):
        M = self.M
        return self.apply(M.dot(x), self.M_dot.dot(x) + M.dot(x_dot))


def _mass_diagonal(model):
    d = model.__dict__.get("_mass_diagonal3")
    if d is None:
        d = model._mass_diagonal3 = np.repeat(model.masses, 3)
    return d


def _mass_pair_index(model):
    """Flat positions in the (2, 6N, 6N) buffer [𝓜, 𝓜̇]: the 3N linear diagonal and the N angular blocks
    of 𝓜, then the N angular blocks of its rate."""
    idx = model.__dict__.get("_mass_pair_index")
    if idx is None:
        _block_index(model)
        _lin, ang, diag, _ = model._mobility_block_index
        m2 = (6 * model.n_bodies) ** 2
        idx = model._mass_pair_index = np.concatenate([diag, ang, ang + m2])
    return idx


def _filled_pair(model, kind: str):
    """Cached per model: the [𝓜̇⁻¹ | 𝓜⁻¹] ("inverse") or [𝓜, 𝓜̇] ("mass") buffer with its constant
    linear diagonal filled in, and the flat positions of the angular blocks and of their rates."""
    key = "_filled_pair_" + kind
    cached = model.__dict__.get(key)
    if cached is None:
        n = model.n_bodies
        _block_index(model)
        if kind == "inverse":
            idx, diag = _pair_index(model), model._mobility_block_index[3]
            template = np.zeros((6 * n, 12 * n))
        else:
            idx, diag = _mass_pair_index(model), _mass_diagonal(model)
            template = np.zeros((2, 6 * n, 6 * n))
        template.reshape(-1)[idx[: 3 * n]] = diag
        template.setflags(write=False)
        cached = (template, idx[3 * n : 12 * n], idx[12 * n :])
        model.__dict__[key] = cached
    return cached
