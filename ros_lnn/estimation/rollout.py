"""Rollout of the free coordinates over a servo plan with a model's forward dynamics (RK4)."""

from __future__ import annotations

import numpy as np


def rollout_free(accel, servo, t0: float, q_f, qd_f, horizon_s: float, dt: float):
    """Integrate ``q̈_f = accel(q_f, q̇_f, q_e, q̇_e, q̈_e)`` from ``t0`` over ``horizon_s`` while the servo
    coordinates follow ``servo(t) -> (q_e, q̇_e, q̈_e)``.

    Returns ``(tau, q_f, qd_f, qdd_f)``: times since ``t0`` (k+1,) and states (k+1, n_f) including the
    start. Stops early (returning what it has) if the model produces a non-finite acceleration.
    """
    steps = max(int(round(horizon_s / dt)), 1)
    x, v = np.asarray(q_f, dtype=float).copy(), np.asarray(qd_f, dtype=float).copy()

    def f(t, x, v):
        q_e, qd_e, qdd_e = servo(t)
        return accel(x, v, q_e, qd_e, qdd_e)

    taus, xs, vs, accs = [0.0], [x], [v], [f(t0, x, v)]
    for k in range(steps):
        t = t0 + k * dt
        a1 = accs[-1]
        a2 = f(t + dt / 2, x + dt / 2 * v, v + dt / 2 * a1)
        v2 = v + dt / 2 * a1
        a3 = f(t + dt / 2, x + dt / 2 * v2, v + dt / 2 * a2)
        v3 = v + dt / 2 * a2
        a4 = f(t + dt, x + dt * v3, v + dt * a3)
        v4 = v + dt * a3
        x = x + dt / 6 * (v + 2 * v2 + 2 * v3 + v4)
        v = v + dt / 6 * (a1 + 2 * a2 + 2 * a3 + a4)
        a = f(t + dt, x, v)
        if not (np.all(np.isfinite(x)) and np.all(np.isfinite(v)) and np.all(np.isfinite(a))):
            break
        taus.append((k + 1) * dt)
        xs.append(x)
        vs.append(v)
        accs.append(a)
    return np.array(taus), np.array(xs), np.array(vs), np.array(accs)
