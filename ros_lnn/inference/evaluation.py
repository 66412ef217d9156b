"""Accuracy of an exported model against exact (or measured) trials, on numpy only.

Metrics (forward mode, as the estimator runs: ``q̈_e`` and ``Q_f`` are inputs, ``Q_e`` is not):
``qdd_f_nmse`` = mean (q̈̂_f − q̈_f)² / var(q̈_f); ``Q_e_rel_rms`` = rms(Q̂_e − Q_e) / rms(Q_e);
``E_rms`` = rms of the energy error after removing its mean, ``E_offset`` that mean (V, hence E, is
identifiable only up to a constant); ``M_rel_err`` = rms‖M̂ − M‖_F / rms‖M‖_F.
"""

from __future__ import annotations

import numpy as np


def model_order_inputs(trial, joints):
    """``q, q̇, q̈, Q`` of a trial rearranged into the model's coordinate order."""
    cols = [list(trial.coordinate_names).index(j) for j in joints]
    return tuple(a[:, cols] for a in (trial.q, trial.qd, trial.qdd, trial.Q))


def forward_errors(out: dict, qdd, Q, E, n_f: int, M=None) -> dict:
    """Errors of runtime outputs against the truth (all arrays in model order)."""
    f, e = slice(0, n_f), slice(n_f, None)
    qdd_f, Q_e = qdd[:, f], Q[:, e]
    offset = float(np.mean(out["E"] - E))
    res = {
        "qdd_f_nmse": float(np.mean((out["qdd_f"] - qdd_f) ** 2) / np.var(qdd_f)),
        "Q_e_rel_rms": (
            float(np.sqrt(np.mean((out["Q_e"] - Q_e) ** 2) / np.mean(Q_e**2)))
            if Q_e.size and np.any(Q_e)
            else float("nan")
        ),
        "E_offset": offset,
        "E_rms": float(np.sqrt(np.mean((out["E"] - offset - E) ** 2))),
    }
    if M is not None:
        res["M_rel_err"] = float(
            np.sqrt(
                np.mean(np.sum((out["M"] - M) ** 2, axis=(-1, -2))) / np.mean(np.sum(M**2, axis=(-1, -2)))
            )
        )
    return res


def evaluate_trial(runtime, trial) -> tuple[dict, dict]:
    """Run ``runtime`` over a whole trial (batched); returns (outputs, errors)."""
    q, qd, qdd, Q = model_order_inputs(trial, runtime.joints)
    cols = [list(trial.coordinate_names).index(j) for j in runtime.joints]
    M = trial.M[:, cols][:, :, cols]
    n_f = runtime.n_f
    out = runtime.evaluate(q, qd, qdd[:, n_f:], Q[:, :n_f])
    return out, forward_errors(out, qdd, Q, trial.E, n_f, M)


def _savgol_rate(y: np.ndarray, dt: float, window: int = 11, order: int = 3) -> np.ndarray:
    from scipy.signal import savgol_filter

    window = min(window, len(y) - (1 - len(y) % 2))
    return savgol_filter(y, window, min(order, window - 1), deriv=1, delta=dt, mode="interp")


def recording_errors(runtime, trial) -> tuple[dict, dict]:
    """Errors of ``runtime`` on a measured trial (a bag's), where the references are what the robot
    recorded, not a simulator's truth (EQUATIONS.md §1, "Evaluating on a recording"):

    ``qdd_f_nmse``: forward-mode q̈̂_f against the trial's q̈_f (the Savitzky–Golay derivative of the
    measured velocities), over var(q̈_f); ``power_residual_rel``: the free joints' power balance
    ``q̇_fᵀ (Q̂_f − Q_f)`` with ``Q̂_f`` from inverse mode at the measured q̈ (zero for an exact model),
    rms over rms of the free inertial power ``q̇_fᵀ (M q̈)_f``; ``energy_balance_rel``: ``dE/dt`` of the
    model's energy along the recording (Savitzky–Golay) against the input power ``q̇_fᵀ Q_f + q̇_eᵀ Q_e
    + q̇ᵀ Q_dissipative`` (``Q_e`` measured when the trial holds it, else the model's inverse-mode
    ``Q̂_e``), rms over rms of ``dE/dt``. Returns (per-sample series for plots, metrics)."""
    q, qd, qdd, Q = model_order_inputs(trial, runtime.joints)
    n_f = runtime.n_f
    Q_f = Q[:, :n_f]
    if not np.isfinite(Q_f).all():
        Q_f = np.where(np.isfinite(Q_f), Q_f, 0.0)
    out = runtime.evaluate(q, qd, qdd[:, n_f:], Q_f)
    inv = runtime.inverse(q, qd, qdd)
    ref = qdd[:, :n_f]
    nmse = float(np.mean((out["qdd_f"] - ref) ** 2) / max(float(np.var(ref)), 1e-300))
    r_f = inv["Q"][:, :n_f] - Q_f
    p_res = np.einsum("bi,bi->b", qd[:, :n_f], r_f)
    p_inertial = np.einsum("bi,bi->b", qd[:, :n_f], inv["Q_inertial"][:, :n_f])
    Q_e_measured = bool(runtime.n_e) and np.isfinite(Q[:, n_f:]).all()
    Q_e = Q[:, n_f:] if Q_e_measured else inv["Q"][:, n_f:]
    Q_d = inv.get("Q_dissipative", np.zeros_like(qd))
    p_in = (
        np.einsum("bi,bi->b", qd[:, :n_f], Q_f)
        + np.einsum("bi,bi->b", qd[:, n_f:], Q_e)
        + np.einsum("bi,bi->b", qd, Q_d)
    )
    dt = float(np.median(np.diff(trial.t))) if len(trial.t) > 1 else 1.0
    E_dot = _savgol_rate(inv["E"], dt) if len(trial.t) > 4 else np.zeros(len(trial.t))
    rms = lambda x: float(np.sqrt(np.mean(np.square(x))))  # noqa: E731
    metrics = {
        "samples": int(len(trial.t)),
        "qdd_f_nmse": nmse,
        "qdd_f_nmse_per_joint": {
            j: float(np.mean((out["qdd_f"][:, i] - ref[:, i]) ** 2) / max(float(np.var(ref[:, i])), 1e-300))
            for i, j in enumerate(runtime.free_joints)
        },
        "power_residual_rms_W": rms(p_res),
        "power_residual_rel": rms(p_res) / max(rms(p_inertial), 1e-300),
        "energy_balance_rel": rms(E_dot - p_in) / max(rms(E_dot), 1e-300),
        "energy_balance_Q_e": "measured" if Q_e_measured else "model (inverse mode)",
    }
    series = {
        "t": trial.t,
        "qdd_f": ref,
        "qdd_f_hat": out["qdd_f"],
        "power_residual": p_res,
        "E_dot": E_dot,
        "power_in": p_in,
    }
    return series, metrics
