"""Training losses of the ServoLNN paper (EQUATIONS.md §1, eqs 33–38), mean over a batch.

    inv      ‖Q̂_f − Q_f‖²           inverse dynamics (Q̂ from measured q̈)
    fwd      ‖q̈̂_f − q̈_f‖²          forward dynamics
    inv_e    ‖Q̂_e − Q_e‖²           inverse rows of the servo coordinates   (Q_e measured)
    fwd_e    ‖Q̂_e^fwd − Q_e‖²       Q_e evaluated at the predicted q̈_f     (Q_e measured)
    power    ‖Ė̂ − q̇ᵀQ‖²            true power loss                        (Q_e measured)
    power_est ‖q̇_fᵀ(Q̂_f − Q_f)‖²    estimated power loss (eq 38 with the typo fixed: q̇_f, not q̇)

Batches are dicts of tensors in model order (free, then servo): ``q, qd, qdd, Q``.

Models whose forward is ``model(q, qd) -> q̈`` (LNN, LNN-nh, TLNN, neural ODE) have the one term

    qdd      ‖q̈̂ − q̈‖²               acceleration fit (batch: ``q, qd, qdd``)

and, trained on data with known generalised forces (the TLNN study's forced chains), its variant

    qdd_forced ‖q̈̂(q, q̇, Q) − q̈‖²    (batch: ``q, qd, qdd, Q``)

An HNN (``model.vector_field(q, p, Q) -> (q̇̂, ṗ̂)`` with ``p ≡ q̇``) fits both halves of its vector field:

    qd_hamiltonian ‖∂H/∂p − q̇‖²    with ``qdd`` or ``qdd_forced`` for ‖ṗ̂ − q̈‖²

Every term comes from the inverse residual ``r = Q̂(q, q̇, q̈) − Q`` of the shared machinery's pieces
(:func:`~ros_lnn.physics.lagrangian.coriolis_force`, the same solve), because ``Q̂`` is affine in ``q̈``:

    Ė̂ = q̇ᵀQ̂  (power balance)              ⇒ power = (q̇ᵀ r)²
    q̈̂_f − q̈_f = −M_ff⁻¹ r_f                ⇒ fwd   = ‖M_ff⁻¹ r_f‖²
    Q̂_e^fwd − Q_e = r_e + M_ef (q̈̂_f − q̈_f)  ⇒ fwd_e

so the network and the Coriolis contraction run once and the forward mode costs one small solve.
A test holds these equal to the terms computed from the full :func:`dynamics` outputs.
"""

from __future__ import annotations

from ..physics.lagrangian import coriolis_force
from .torch_ops import TORCH

WITH_QE = ("inv", "fwd", "inv_e", "fwd_e", "power")
WITHOUT_QE = ("inv", "fwd", "power_est")
ALL_LOSSES = ("inv", "fwd", "inv_e", "fwd_e", "power", "power_est")
NEEDS_QE = {"inv_e", "fwd_e", "power"}


def select_losses(has_qe: bool, n_e: int = 1) -> tuple[str, ...]:
    """The paper's loss set for what the data holds: all terms with measured ``Q_e``, else the
    ``Q_f``-only terms with the estimated power loss."""
    return WITH_QE if (has_qe and n_e > 0) else WITHOUT_QE


#: The loss of the families fitted by acceleration MSE (``model(q, qd) -> q̈``); which losses a model
#: trains with is its family's decision (:mod:`ros_lnn.families`).
ACCELERATION_LOSSES = ("qdd",)
#: The HNN's: both halves of its vector field.
HAMILTONIAN_LOSSES = ("qd_hamiltonian", "qdd")
#: Every term of the acceleration-fitted families (``qdd_forced``: ``qdd`` with the data's ``Q``).
VECTOR_FIELD_TERMS = ("qdd", "qdd_forced", "qd_hamiltonian")


def batch_keys(names) -> tuple[str, ...]:
    """The data tensors the named losses read."""
    if set(names) <= set(VECTOR_FIELD_TERMS):
        return ("q", "qd", "qdd", "Q") if "qdd_forced" in names else ("q", "qd", "qdd")
    return ("q", "qd", "qdd", "Q")


def forced(names) -> tuple[str, ...]:
    """The acceleration losses ``names`` with the data's generalised forces as a model input."""
    return tuple("qdd_forced" if n == "qdd" else n for n in names)


def _sq(x):
    return (x * x).sum(-1).mean()


def loss_terms(model, batch: dict, names=WITH_QE) -> dict:
    """Each named loss (scalar tensors); ``model.terms(q)`` gives ``M, ∂M/∂q, V, ∂V/∂q``."""
    names = tuple(names)
    own = getattr(model, "loss_terms", None)
    if own is not None:  # a family with a loss of its own (dac_residual: the effort residual)
        return own(batch, names)
    if names == ACCELERATION_LOSSES:
        return {"qdd": _sq(model(batch["q"], batch["qd"]) - batch["qdd"])}
    if set(names) <= set(VECTOR_FIELD_TERMS):
        return vector_field_terms(model, batch, names)
    unknown = set(names) - set(ALL_LOSSES)
    if unknown:
        raise ValueError(f"unknown losses {sorted(unknown)}; choose from {ALL_LOSSES}")
    n_f = model.n_f
    q, qd, qdd, Q = batch["q"], batch["qd"], batch["qdd"], batch["Q"]
    if getattr(model, "extra_forces", False):  # dissipation, rigid-body prior
        r, M = model.inverse_residual(q, qd, qdd, Q)
    else:
        M, dM, _, dV = model.terms(q)
        r = TORCH.einsum("...ij,...j->...i", M, qdd) + coriolis_force(TORCH, dM, qd) + dV - Q
    r_f, r_e = r[..., :n_f], r[..., n_f:]
    out = {}
    if "inv" in names:
        out["inv"] = _sq(r_f)
    if "inv_e" in names:
        out["inv_e"] = _sq(r_e)
    if "power" in names:
        out["power"] = ((qd * r).sum(-1) ** 2).mean()
    if "power_est" in names:
        out["power_est"] = ((qd[..., :n_f] * r_f).sum(-1) ** 2).mean()
    if ("fwd" in names or "fwd_e" in names) and n_f:
        err_f = -TORCH.solve(M[..., :n_f, :n_f], r_f)  # q̈̂_f − q̈_f
        if "fwd" in names:
            out["fwd"] = _sq(err_f)
        if "fwd_e" in names:
            out["fwd_e"] = _sq(r_e + TORCH.einsum("...ij,...j->...i", M[..., n_f:, :n_f], err_f))
    if "fwd" in names or "fwd_e" in names:
        out.setdefault("fwd", r_f.new_zeros(()))  # no free coordinate: nothing to predict
        out.setdefault("fwd_e", r_f.new_zeros(()))
    return {k: out[k] for k in names}


def vector_field_terms(model, batch: dict, names) -> dict:
    """``qdd`` / ``qdd_forced`` / ``qd_hamiltonian`` (an HNN's vector field is evaluated once for both)."""
    Q = batch["Q"] if "qdd_forced" in names else None
    if "qd_hamiltonian" in names:
        qd_hat, qdd_hat = model.vector_field(batch["q"], batch["qd"], Q)
    else:
        qd_hat, qdd_hat = None, model(batch["q"], batch["qd"], Q)
    out = {}
    for name in names:
        out[name] = _sq(qd_hat - batch["qd"]) if name == "qd_hamiltonian" else _sq(qdd_hat - batch["qdd"])
    return out


def total_loss(model, batch: dict, names=WITH_QE):
    terms = loss_terms(model, batch, names)
    return sum(terms.values()), terms
