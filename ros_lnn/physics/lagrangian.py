"""The Lagrangian machinery of EQUATIONS.md §1, written once for numpy and torch.

From the mass matrix ``M(q)``, its partials ``∂M/∂q``, the potential ``V(q)`` and ``∂V/∂q`` this module
computes every ServoLNN output: forward dynamics ``q̈_f``, all-coordinate generalised force ``Q`` and
the servo driving force ``Q_e``, the force decomposition, energies and power. The same function
serves the analytic reference systems (numpy, float64) and the network (torch, exported to ONNX),
so the network is checked against exact physics through identical code.

Shapes (leading batch dimensions ``...`` are allowed everywhere):
    M (..., n, n); dM (..., n, n, n) with dM[..., k, i, j] = ∂M_ij/∂q_k; V (...); dV (..., n);
    qd, qdd (..., n); qdd_e (..., n_e); Q_f (..., n_f).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np


class NumpyOps:
    """Array operations the machinery needs, on numpy."""

    einsum = staticmethod(np.einsum)

    @staticmethod
    def solve(A, b):
        if A.shape[-1] == 1:
            return b / A[..., 0]
        return np.linalg.solve(A, b[..., None])[..., 0]

    @staticmethod
    def cat(xs, axis=-1):
        return np.concatenate(xs, axis=axis)

    @staticmethod
    def take(x, idx, axis=-1):
        return np.asarray(x).take(idx, axis=axis)  # the method: np.take's dispatch wrapper costs ~1 µs a call

    @staticmethod
    def swap(x):
        """Transpose of the last two axes."""
        return np.swapaxes(x, -1, -2)


NUMPY = NumpyOps()


@dataclass(frozen=True)
class Partition:
    """Which coordinates are free (``q_f``) and which servo-driven (``q_e``); indices into ``q``."""

    free: tuple[int, ...]
    servo: tuple[int, ...]

    def __post_init__(self):
        both = sorted(self.free + self.servo)
        if both != list(range(len(both))):
            raise ValueError(f"free {self.free} and servo {self.servo} must partition 0..n-1 exactly")
        if not self.free:
            # Without free coordinates there is no forward dynamics; inverse mode still works.
            pass

    @property
    def n(self) -> int:
        return len(self.free) + len(self.servo)

    @property
    def order(self) -> tuple[int, ...]:
        """Permutation that sorts coordinates as ``[q_f; q_e]``."""
        return self.free + self.servo

    @property
    def inverse_order(self) -> tuple[int, ...]:
        inv = [0] * self.n
        for pos, i in enumerate(self.order):
            inv[i] = pos
        return tuple(inv)

    @classmethod
    def from_servo(cls, n: int, servo: Sequence[int]) -> Partition:
        servo = tuple(sorted(int(i) for i in servo))
        return cls(tuple(i for i in range(n) if i not in servo), servo)


#: The dissipative force ``Q_d`` (negative work: ``q̇ᵀ Q_d ≤ 0``), returned by ``dynamics`` and exported
#: only for models that have one; ``Ė = q̇ᵀ Q + q̇ᵀ Q_d`` with ``Q`` the applied force.
DISSIPATIVE_OUTPUT = "Q_dissipative"

# Names of everything ``dynamics`` returns, in a fixed order; the ONNX graph exports the same names.
OUTPUT_NAMES = (
    "qdd",
    "qdd_f",
    "Q",
    "Q_e",
    "Q_inertial",
    "Q_coriolis",
    "Q_conservative",
    "Q_ff_m",
    "Q_fe_m",
    "Q_ef_m",
    "Q_ee_m",
    "T",
    "V",
    "E",
    "T_dot",
    "V_dot",
    "E_dot",
    "W_dot",
    "power",
    "M",
)


def coriolis_force(ops, dM, qd):
    """Centrifugal/Coriolis force ``Ṁ q̇ − ½ k(q, q̇)`` as one contraction:
    ``Σ_k q̇_k (X_ki − ½ X_ik)`` with ``X_ki = Σ_j ∂M_ij/∂q_k q̇_j`` (fewer graph nodes than forming Ṁ)."""
    X = ops.einsum("...kij,...j->...ki", dM, qd)
    return ops.einsum("...k,...ki->...i", qd, X - 0.5 * ops.swap(X))


def _solve_free(ops, M, Q_cg, qdd_e, Q_f, part: Partition):
    f, e = list(part.free), list(part.servo)
    M_f = ops.take(M, f, axis=-2)
    rhs = Q_f - ops.take(Q_cg, f)
    if e:
        rhs = rhs - ops.einsum("...ij,...j->...i", ops.take(M_f, e, axis=-1), qdd_e)
    return ops.solve(ops.take(M_f, f, axis=-1), rhs)


def forward_acceleration(ops, M, Q_c, dV, qdd_e, Q_f, part: Partition):
    """Eq 18: ``q̈_f = M_ff⁻¹ (Q_f − M_fe q̈_e − Q_f,c − Q_f,g)``."""
    return _solve_free(ops, M, Q_c + dV, qdd_e, Q_f, part)


def dynamics(
    ops, M, dM, V, dV, qd, part: Partition, *, qdd=None, qdd_e=None, Q_f=None, Q_c=None, Q_d=None
) -> dict:
    """Every ServoLNN output of EQUATIONS.md §1.

    Inverse mode: pass the full ``qdd``. Forward mode: pass ``qdd_e`` and ``Q_f``; ``q̈_f`` is solved
    from eq 18 and ``Q`` (hence ``Q_e``) is evaluated at the predicted acceleration.
    The formulation keeps the exported graph small (every node costs time at batch size 1).

    ``Q_c``: the Coriolis/centrifugal force when the caller has it (e.g. a rigid-body part computed by
    recursive Newton–Euler added to the network's); default ``Ṁ q̇ − ½ k`` from ``dM``.
    ``Q_d``: a dissipative force (Rayleigh damping, friction). Then ``M q̈ + Q_c + ∂V/∂q = Q + Q_d``:
    ``Q`` stays the applied force (``Q_e`` what the servo delivers, friction included), the forward
    mode solves ``q̈_f = M_ff⁻¹ (Q_f + Q_d,f − M_fe q̈_e − Q_c,f − ∂V/∂q_f)``, and the energy balance is
    ``Ė = q̇ᵀ Q + q̇ᵀ Q_d`` (``T_dot`` includes ``q̇ᵀ Q_d``; ``power`` is the applied power ``q̇ᵀ Q``).
    Without ``Q_c``/``Q_d`` the computation (and an exported graph) is exactly the conservative one.
    """
    f, e = list(part.free), list(part.servo)
    if Q_c is None:
        Q_c = coriolis_force(ops, dM, qd)
    Q_cg = Q_c + dV if Q_d is None else Q_c + dV - Q_d
    if qdd is None:
        if qdd_e is None or Q_f is None:
            raise ValueError("forward mode needs qdd_e and Q_f (or pass qdd for inverse mode)")
        qdd_f = _solve_free(ops, M, Q_cg, qdd_e, Q_f, part)
        qdd = ops.take(ops.cat([qdd_f, qdd_e]), list(part.inverse_order))
    else:
        qdd_f, qdd_e = ops.take(qdd, f), ops.take(qdd, e)
    # P_ij = M_ij q̈_j: summing its free / servo columns gives every row's inertial force from the
    # free and from the servo accelerations, hence the four blocks of the decomposition (eq 16).
    P = M * qdd[..., None, :]
    by_free = ops.take(P, f).sum(-1)
    by_servo = ops.take(P, e).sum(-1) if e else 0.0 * by_free
    Q_m = by_free + by_servo if f else by_servo
    Q = Q_m + Q_cg
    T = 0.5 * ops.einsum("...i,...ij,...j->...", qd, M, qd)
    W_dot = qd * Q
    power = W_dot.sum(-1)
    V_dot = ops.einsum("...i,...i->...", dV, qd)
    T_dot = power - V_dot  # = q̇ᵀ(M q̈ + Ṁ q̇ − ½k), since Q − ∂V/∂q = M q̈ + Ṁ q̇ − ½k
    if Q_d is not None:  # Q + Q_d − ∂V/∂q = M q̈ + Q_c
        T_dot = T_dot + ops.einsum("...i,...i->...", qd, Q_d)
    out = {
        "qdd": qdd,
        "qdd_f": qdd_f,
        "Q": Q,
        "Q_e": ops.take(Q, e),
        "Q_inertial": Q_m,
        "Q_coriolis": Q_c,
        "Q_conservative": dV,
        "Q_ff_m": ops.take(by_free, f),
        "Q_fe_m": ops.take(by_servo, f),
        "Q_ef_m": ops.take(by_free, e),
        "Q_ee_m": ops.take(by_servo, e),
        "T": T,
        "V": V,
        "E": T + V,
        "T_dot": T_dot,
        "V_dot": V_dot,
        "E_dot": T_dot + V_dot,
        "W_dot": W_dot,
        "power": power,
        "M": M,
    }
    if Q_d is not None:
        out[DISSIPATIVE_OUTPUT] = Q_d
    return out
