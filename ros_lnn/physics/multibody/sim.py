"""Simulator of the multibody model: RK4 on (r, quaternions, ν), the KKT solve of eq 32 at every stage.

Constraint stabilisation: the index-1 form ``J ν̇ = γ`` integrates the joint constraints only up to
the integration error, which then drifts (slowly, but without bound). ``baumgarte=(α, β)`` feeds the
velocity and position residuals back, ``J ν̇ = γ − 2α Jν − β² φ``: the drift then decays like a
critically damped oscillator of rate α = β instead of accumulating. The stabilising multipliers act as
equal and opposite internal forces, so momentum balance is untouched. Quaternions are renormalised
after every step. ``test/physics/test_multibody_validation.py`` measures both drifts. Fixed-base arms are
simulated in joint coordinates instead (:mod:`ros_lnn.physics.multibody.pin_sim`, no drift).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from .model import MultibodyModel, forward_dynamics, update
from .quaternion import quat_normalize, quat_rate


@dataclass
class MultibodyState:
    r: np.ndarray  # (N, 3)
    quat: np.ndarray  # (N, 4)
    nu: np.ndarray  # (6N,)
    t: float = 0.0

    def copy(self):
        return MultibodyState(self.r.copy(), self.quat.copy(), self.nu.copy(), self.t)


def _derivative(model, r, quat, nu, t, port_fn, baumgarte):
    n = model.n_bodies
    data = update(model, r, quat, nu)
    port = np.zeros(6 * n) if port_fn is None else np.asarray(port_fn(t, data), dtype=float)
    nu_dot, f_j = forward_dynamics(model, data, port, baumgarte)
    return data.v, quat_rate(quat, data.omega), nu_dot, f_j, port


def rk4_step(model: MultibodyModel, state: MultibodyState, dt: float, port_fn=None, baumgarte=None):
    """One RK4 step; ``port_fn(t, data) -> τ`` (6N) is evaluated at every stage (a continuous-time
    controller). Returns the new state and ``(F_J, τ)`` at the start of the step."""
    r, q, nu, t = state.r, state.quat, state.nu, state.t
    k1 = _derivative(model, r, q, nu, t, port_fn, baumgarte)
    h = 0.5 * dt
    k2 = _derivative(model, r + h * k1[0], q + h * k1[1], nu + h * k1[2], t + h, port_fn, baumgarte)
    k3 = _derivative(model, r + h * k2[0], q + h * k2[1], nu + h * k2[2], t + h, port_fn, baumgarte)
    k4 = _derivative(model, r + dt * k3[0], q + dt * k3[1], nu + dt * k3[2], t + dt, port_fn, baumgarte)
    w = dt / 6.0
    r_new = r + w * (k1[0] + 2 * k2[0] + 2 * k3[0] + k4[0])
    q_new = quat_normalize(q + w * (k1[1] + 2 * k2[1] + 2 * k3[1] + k4[1]))
    nu_new = nu + w * (k1[2] + 2 * k2[2] + 2 * k3[2] + k4[2])
    return MultibodyState(r_new, q_new, nu_new, t + dt), (k1[3], k1[4])


def simulate(
    model: MultibodyModel,
    state: MultibodyState,
    t_end: float,
    dt: float,
    port_fn=None,
    baumgarte=None,
    observe=None,
    every: int = 1,
) -> dict:
    """Integrate to ``t_end``. ``observe(state, data, F_J, τ) -> dict`` adds recorded quantities.
    Returns arrays ``t, r, quat, nu, F_J, port`` (+ observed keys), one row per recorded step."""
    state = state.copy()
    rec: dict[str, list] = {"t": [], "r": [], "quat": [], "nu": [], "F_J": [], "port": []}
    steps = int(round((t_end - state.t) / dt))
    for i in range(steps + 1):
        if i == steps:
            data = update(model, state.r, state.quat, state.nu)
            port = np.zeros(6 * model.n_bodies) if port_fn is None else np.asarray(port_fn(state.t, data))
            f_j = forward_dynamics(model, data, port, baumgarte)[1]
            new = None
        else:
            new, (f_j, port) = rk4_step(model, state, dt, port_fn, baumgarte)
        if i % every == 0 or i == steps:
            rec["t"].append(state.t)
            rec["r"].append(state.r)
            rec["quat"].append(state.quat)
            rec["nu"].append(state.nu)
            rec["F_J"].append(f_j)
            rec["port"].append(port)
            if observe is not None:
                data = update(model, state.r, state.quat, state.nu)
                for key, val in observe(state, data, f_j, port).items():
                    rec.setdefault(key, []).append(val)
        if new is not None:
            state = new
    out: dict[str, Any] = {k: np.asarray(v) for k, v in rec.items()}
    out["final_state"] = state
    return out
