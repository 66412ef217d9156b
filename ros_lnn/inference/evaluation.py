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
        "Q_e_rel_rms": (float(np.sqrt(np.mean((out["Q_e"] - Q_e) ** 2) / np.mean(Q_e ** 2)))
                        if Q_e.size and np.any(Q_e) else float("nan")),
        "E_offset": offset,
        "E_rms": float(np.sqrt(np.mean((out["E"] - offset - E) ** 2))),
    }
    if M is not None:
        res["M_rel_err"] = float(np.sqrt(np.mean(np.sum((out["M"] - M) ** 2, axis=(-1, -2)))
                                         / np.mean(np.sum(M ** 2, axis=(-1, -2)))))
    return res


def evaluate_trial(runtime, trial) -> tuple[dict, dict]:
    """Run ``runtime`` over a whole trial (batched); returns (outputs, errors)."""
    q, qd, qdd, Q = model_order_inputs(trial, runtime.joints)
    cols = [list(trial.coordinate_names).index(j) for j in runtime.joints]
    M = trial.M[:, cols][:, :, cols]
    n_f = runtime.n_f
    out = runtime.evaluate(q, qd, qdd[:, n_f:], Q[:, :n_f])
    return out, forward_errors(out, qdd, Q, trial.E, n_f, M)
