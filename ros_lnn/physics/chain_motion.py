"""Free motion of planar chains from random initial states, integrated as one batched ODE (DOP853),
and the two angle conventions of the TLNN paper (docs/papers.md): relative joint angles
(the chain's own coordinates) and absolute body angles (cumulative sums)."""

from __future__ import annotations

import numpy as np

from .chain import PlanarChain


def random_states(n: int, count: int, rng, angle_range=np.pi / 2, speed=1.0) -> tuple[np.ndarray, np.ndarray]:
    """Initial relative joint angles uniform in ±angle_range, joint rates normal with std ``speed``."""
    return rng.uniform(-angle_range, angle_range, (count, n)), speed * rng.normal(size=(count, n))


def integrate(chain: PlanarChain, q0, qd0, duration: float, rate_hz: float, tol=1e-9, forces=None):
    """Motion of a batch of initial states as one ODE (DOP853): ``(q, q̇, q̈)`` each (T, B, n) in
    relative joint angles, sampled at ``rate_hz``; q̈ from the exact dynamics at each sample. Free
    motion, or under constant joint torques ``forces`` (B, n) (one row per initial state)."""
    from scipy.integrate import solve_ivp

    q0, qd0 = np.atleast_2d(q0), np.atleast_2d(qd0)
    B, n = q0.shape
    torques = np.zeros((B, n)) if forces is None else np.broadcast_to(np.asarray(forces, float), (B, n))

    def acceleration(q, qd):
        Q = np.broadcast_to(torques, (len(q) // B, B, n)).reshape(q.shape)
        return chain.dynamics(q, qd, qdd_e=np.zeros((len(q), 0)), Q_f=Q)["qdd"]

    def rhs(t, y):
        y = y.reshape(B, 2 * n)
        return np.concatenate([y[:, n:], acceleration(y[:, :n], y[:, n:])], 1).ravel()

    t_eval = np.arange(int(round(duration * rate_hz)) + 1) / rate_hz
    sol = solve_ivp(
        rhs,
        (0.0, t_eval[-1]),
        np.concatenate([q0, qd0], 1).ravel(),
        method="DOP853",
        rtol=tol,
        atol=tol,
        t_eval=t_eval,
    )
    if not sol.success:
        raise RuntimeError(f"chain integration failed: {sol.message}")
    y = sol.y.T.reshape(len(t_eval), B, 2 * n)
    q, qd = y[..., :n], y[..., n:]
    return q, qd, acceleration(q.reshape(-1, n), qd.reshape(-1, n)).reshape(q.shape)


def chain_trajectories(chain: PlanarChain, n_ic: int, duration: float, rate_hz: float, seed: int, **kw):
    """``n_ic`` free-motion trajectories from random initial states: a list of ``(q, q̇, q̈)`` (T, n)."""
    q0, qd0 = random_states(chain.n, n_ic, np.random.default_rng(seed), **kw)
    q, qd, qdd = integrate(chain, q0, qd0, duration, rate_hz)
    return [(q[:, b], qd[:, b], qdd[:, b]) for b in range(n_ic)]


def to_absolute(q, qd, qdd=None):
    """Relative joint angles → absolute body angles (cumulative sums)."""
    conv = [np.cumsum(x, -1) for x in (q, qd)]
    return tuple(conv) + ((np.cumsum(qdd, -1),) if qdd is not None else ())


def to_relative(phi, phid, phidd=None):
    """Absolute body angles → relative joint angles (first differences)."""
    conv = [np.diff(x, prepend=0.0, axis=-1) for x in (phi, phid)]
    return tuple(conv) + ((np.diff(phidd, prepend=0.0, axis=-1),) if phidd is not None else ())
