"""Training losses of the ServoLNN paper (EQUATIONS.md §1, eqs 33–38), mean over a batch.

    inv      ‖Q̂_f − Q_f‖²           inverse dynamics (Q̂ from measured q̈)
    fwd      ‖q̈̂_f − q̈_f‖²          forward dynamics
    inv_e    ‖Q̂_e − Q_e‖²           inverse rows of the servo coordinates   (Q_e measured)
    fwd_e    ‖Q̂_e^fwd − Q_e‖²       Q_e evaluated at the predicted q̈_f     (Q_e measured)
    power    ‖Ė̂ − q̇ᵀQ‖²            true power loss                        (Q_e measured)
    power_est ‖q̇_fᵀ(Q̂_f − Q_f)‖²    estimated power loss (eq 38 with the typo fixed: q̇_f, not q̇)

Batches are dicts of tensors in model order (free, then servo): ``q, qd, qdd, Q``.
"""
from __future__ import annotations

import torch

from ..physics.lagrangian import dynamics
from .torch_ops import TORCH

WITH_QE = ("inv", "fwd", "inv_e", "fwd_e", "power")
WITHOUT_QE = ("inv", "fwd", "power_est")
ALL_LOSSES = ("inv", "fwd", "inv_e", "fwd_e", "power", "power_est")
NEEDS_QE = {"inv_e", "fwd_e", "power"}


def select_losses(has_qe: bool, n_e: int = 1) -> tuple[str, ...]:
    """The paper's loss set for what the data holds: all terms with measured ``Q_e``, else the
    ``Q_f``-only terms with the estimated power loss."""
    return WITH_QE if (has_qe and n_e > 0) else WITHOUT_QE


def _sq(x):
    return (x * x).sum(-1) if x.dim() > 1 else x * x


def loss_terms(model, batch: dict, names=WITH_QE) -> dict:
    """Each named loss (scalar tensors). The network is evaluated once; the shared machinery runs in
    inverse mode (measured q̈) and, when a forward term is asked for, in forward mode."""
    unknown = set(names) - set(ALL_LOSSES)
    if unknown:
        raise ValueError(f"unknown losses {sorted(unknown)}; choose from {ALL_LOSSES}")
    n_f = model.n_f
    q, qd, qdd, Q = batch["q"], batch["qd"], batch["qdd"], batch["Q"]
    M, dM, V, dV = model.terms(q)
    out = {}
    if {"inv", "inv_e", "power", "power_est"} & set(names):
        inv = dynamics(TORCH, M, dM, V, dV, qd, model.partition, qdd=qdd)
        Q_hat = inv["Q"]
        if "inv" in names:
            out["inv"] = _sq(Q_hat[..., :n_f] - Q[..., :n_f]).mean()
        if "inv_e" in names:
            out["inv_e"] = _sq(Q_hat[..., n_f:] - Q[..., n_f:]).mean()
        if "power" in names:
            out["power"] = _sq(inv["E_dot"] - (qd * Q).sum(-1)).mean()
        if "power_est" in names:
            out["power_est"] = _sq((qd[..., :n_f] * (Q_hat[..., :n_f] - Q[..., :n_f])).sum(-1)).mean()
    if {"fwd", "fwd_e"} & set(names):
        fwd = dynamics(TORCH, M, dM, V, dV, qd, model.partition, qdd_e=qdd[..., n_f:], Q_f=Q[..., :n_f])
        if "fwd" in names:
            out["fwd"] = _sq(fwd["qdd"][..., :n_f] - qdd[..., :n_f]).mean()
        if "fwd_e" in names:
            out["fwd_e"] = _sq(fwd["Q"][..., n_f:] - Q[..., n_f:]).mean()
    return out


def total_loss(model, batch: dict, names=WITH_QE):
    terms = loss_terms(model, batch, names)
    return sum(terms.values()), terms
