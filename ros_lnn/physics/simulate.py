"""Simulate a Lagrangian system: integrate the free coordinates with scipy ``solve_ivp`` while the
servo coordinates follow a prescribed trajectory, optionally under applied forces on the free ones.

Every output sample carries exact ground truth from the shared machinery (``system.dynamics`` in
forward mode at the sampled state): ``q̈``, ``Q`` (free rows = applied ``Q_f``, servo rows = ``Q_e``),
energies and ``M``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike
from scipy.integrate import solve_ivp

from ..errors import RosLnnError
from .lagrangian import NUMPY, coriolis_force, forward_acceleration
from .systems import LagrangianSystem
from .trials import Trial

#: t -> (q_e, q̇_e, q̈_e), each of shape (n_e,)
ServoTrajectory = Callable[[float], tuple]
#: (t, q, q̇) -> Q_f of shape (n_f,)
AppliedForce = Callable[[float, np.ndarray, np.ndarray], ArrayLike]


class SimulationError(RosLnnError):
    """The integrator failed or the simulation was set up inconsistently."""


@dataclass(frozen=True)
class CosineServo:
    """``q_e(t) = offset + Σ_m a_m e^{−λ_m t} cos(ω_m t + φ_m)`` per servo coordinate, with exact
    derivatives. Arrays are (n_e, n_terms); ``offset`` is (n_e,)."""

    amplitude: np.ndarray
    omega: np.ndarray
    phase: np.ndarray | None = None
    decay: np.ndarray | None = None
    offset: np.ndarray | None = None

    def __call__(self, t):
        a = np.atleast_2d(np.asarray(self.amplitude, dtype=float))
        w = np.broadcast_to(np.asarray(self.omega, dtype=float), a.shape)
        p = np.zeros(a.shape) if self.phase is None else np.broadcast_to(self.phase, a.shape)
        lam = np.zeros(a.shape) if self.decay is None else np.broadcast_to(self.decay, a.shape)
        off = np.zeros(a.shape[0]) if self.offset is None else np.asarray(self.offset, dtype=float)
        env = a * np.exp(-lam * t)
        c, s = np.cos(w * t + p), np.sin(w * t + p)
        q = off + (env * c).sum(-1)
        qd = (env * (-lam * c - w * s)).sum(-1)
        qdd = (env * ((lam**2 - w**2) * c + 2 * lam * w * s)).sum(-1)
        return q, qd, qdd


def stationary_servo(values) -> ServoTrajectory:
    """Servo coordinates held at constant ``values``."""
    values = np.asarray(values, dtype=float)
    zeros = np.zeros_like(values)
    return lambda t: (values, zeros, zeros)


def system_name(system: LagrangianSystem) -> str:
    return getattr(system, "name", type(system).__name__.lower())


def equations_of_motion(
    system: LagrangianSystem, servo: ServoTrajectory | None = None, force: AppliedForce | None = None
):
    """``(rhs, state)`` for the first-order state ``y = [q_f, q̇_f]``: ``rhs(t, y) = ẏ`` (eq 18 of the
    shared machinery) and ``state(t, y) = (q, q̇, q̈_e, Q_f)`` with the servo and force applied."""
    part = system.partition
    free, servo_idx = list(part.free), list(part.servo)
    n, n_f, n_e = system.n, len(free), len(servo_idx)

    def state(t, y):
        q, qd = np.empty(n), np.empty(n)
        q[free], qd[free] = y[:n_f], y[n_f:]
        qdd_e = np.zeros(0)
        if n_e:
            q_e, qd_e, qdd_e = (np.asarray(v, dtype=float).reshape(n_e) for v in servo(t))
            q[servo_idx], qd[servo_idx] = q_e, qd_e
        Q_f = np.zeros(n_f) if force is None else np.asarray(force(t, q, qd), dtype=float).reshape(n_f)
        return q, qd, qdd_e, Q_f

    def rhs(t, y):
        q, qd, qdd_e, Q_f = state(t, y)
        M = system.mass_matrix(q)
        Q_c = coriolis_force(NUMPY, system.mass_matrix_partials(q), qd)
        qdd_f = forward_acceleration(NUMPY, M, Q_c, system.potential_gradient(q), qdd_e, Q_f, part)
        return np.concatenate([y[n_f:], qdd_f])

    return rhs, state


def simulate(
    system: LagrangianSystem,
    duration: float,
    q0_f: Sequence[float] | np.ndarray,
    qd0_f: Sequence[float] | np.ndarray,
    *,
    servo: ServoTrajectory | None = None,
    force: AppliedForce | None = None,
    t_eval: Sequence[float] | None = None,
    refine: int = 1,
    method: str = "RK45",
    rtol: float = 1e-10,
    atol: float = 1e-10,
    max_step: float = np.inf,
    t0: float = 0.0,
    name: str = "trial",
    attrs: dict | None = None,
) -> Trial:
    """Integrate ``system`` from ``t0`` to ``t0 + duration``.

    ``q0_f``/``qd0_f``: initial values of the free coordinates (order of ``system.free_names``).
    ``servo``: t -> (q_e, q̇_e, q̈_e), needed when the system has servo coordinates.
    ``force``: applied forces on the free coordinates (zero when omitted).
    Sampling: ``t_eval`` given -> dense output at those times; otherwise the integrator's accepted
    steps (with ``refine - 1`` extra dense points inside each step, like MATLAB ode45's Refine).
    """
    n_f, n_e = len(system.partition.free), len(system.partition.servo)
    if n_f == 0:
        raise SimulationError(f"{system_name(system)}: no free coordinates to integrate")
    if n_e and servo is None:
        raise SimulationError(
            f"{system_name(system)}: servo joints {system.servo_names} need a servo "
            "trajectory (servo=...), or use system.with_servo([])"
        )
    q0_f, qd0_f = np.asarray(q0_f, dtype=float).reshape(-1), np.asarray(qd0_f, dtype=float).reshape(-1)
    if q0_f.shape != (n_f,) or qd0_f.shape != (n_f,):
        raise SimulationError(
            f"{system_name(system)}: initial values must have {n_f} entries, one per "
            f"free joint {system.free_names}"
        )

    rhs, state = equations_of_motion(system, servo, force)
    t1 = t0 + float(duration)
    dense = t_eval is not None or refine > 1
    sol = solve_ivp(
        rhs,
        (t0, t1),
        np.concatenate([q0_f, qd0_f]),
        method=method,
        rtol=rtol,
        atol=atol,
        max_step=max_step,
        t_eval=t_eval,
        dense_output=dense,
    )
    if not sol.success:
        raise SimulationError(
            f"{system_name(system)} trial '{name}': integrator {method} failed at "
            f"t={sol.t[-1]:.6g}: {sol.message}"
        )
    t, Y = sol.t, sol.y.T
    if t_eval is None and refine > 1:
        frac = np.arange(1, refine) / refine
        inner = (t[:-1, None] + np.diff(t)[:, None] * frac).reshape(-1)
        t = np.sort(np.concatenate([t, inner]))
        Y = sol.sol(t).T
    info = {
        "method": method,
        "rtol": rtol,
        "atol": atol,
        "nfev": int(sol.nfev),
        "steps": int(len(sol.t) - 1) if t_eval is None else None,
        "sampling": "t_eval" if t_eval is not None else f"accepted steps, refine={refine}",
    }
    info.update(attrs or {})
    return trial_from_states(system, t, Y, state, name=name, attrs=info)


def trial_from_states(system, t, Y, state, *, name, attrs) -> Trial:
    """Ground truth at sampled states ``Y = [q_f, q̇_f]`` via the machinery's forward mode."""
    rows = [state(ti, yi) for ti, yi in zip(t, Y)]
    q, qd, qdd_e, Q_f = (np.stack([r[i] for r in rows]) for i in range(4))
    out = system.dynamics(q, qd, qdd_e=qdd_e, Q_f=Q_f)
    return Trial(
        name=name,
        system=system_name(system),
        coordinate_names=system.coordinate_names,
        free_joints=system.free_names,
        servo_joints=system.servo_names,
        t=np.asarray(t),
        q=q,
        qd=qd,
        qdd=out["qdd"],
        Q=out["Q"],
        T=out["T"],
        V=out["V"],
        E=out["E"],
        M=out["M"],
        attrs=attrs,
    )


class StepSimulator:
    """Advance a system step by step (for a simulation node fed by live commands).

    State: time ``t`` and the free coordinates' ``q_f``, ``q̇_f``. Each :meth:`step` integrates over
    ``dt`` with the servo trajectory and applied force valid for that step (e.g. the latest
    commands); :meth:`outputs` gives the exact ground truth at the current state.
    """

    def __init__(
        self,
        system: LagrangianSystem,
        q0_f,
        qd0_f,
        *,
        t0: float = 0.0,
        method: str = "RK45",
        rtol: float = 1e-10,
        atol: float = 1e-10,
    ):
        self.system, self.t = system, float(t0)
        self.y = np.concatenate(
            [np.asarray(q0_f, dtype=float).reshape(-1), np.asarray(qd0_f, dtype=float).reshape(-1)]
        )
        if self.y.shape != (2 * len(system.partition.free),):
            raise SimulationError(
                f"{system_name(system)}: initial values must have one entry per free "
                f"joint {system.free_names}"
            )
        self.method, self.rtol, self.atol = method, rtol, atol
        self._servo: ServoTrajectory | None = None
        self._force: AppliedForce | None = None

    def step(self, dt: float, servo: ServoTrajectory | None = None, force: AppliedForce | None = None):
        if self.system.partition.servo and servo is None:
            raise SimulationError(
                f"{system_name(self.system)}: servo joints {self.system.servo_names} "
                "need a servo trajectory for this step"
            )
        rhs, _ = equations_of_motion(self.system, servo, force)
        sol = solve_ivp(
            rhs, (self.t, self.t + dt), self.y, method=self.method, rtol=self.rtol, atol=self.atol
        )
        if not sol.success:
            raise SimulationError(f"{system_name(self.system)}: step at t={self.t:.6g} failed: {sol.message}")
        self.t, self.y = float(sol.t[-1]), sol.y[:, -1]
        self._servo, self._force = servo, force
        return self

    def outputs(self) -> dict:
        """Every output of the machinery (``q``, ``qd`` added) at the current time and state, with the
        servo and force of the last step."""
        _, state = equations_of_motion(self.system, self._servo, self._force)
        q, qd, qdd_e, Q_f = state(self.t, self.y)
        out = self.system.dynamics(q, qd, qdd_e=qdd_e, Q_f=Q_f)
        out.update(q=q, qd=qd, t=self.t)
        return out
