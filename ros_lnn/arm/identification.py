"""Least-squares identification of an arm: base inertial parameters and joint friction from
``τ = Y(q, q̇, q̈) π + F(q̇) φ``.

Not every inertial parameter reaches the joint torques: some never move (the first body's mass on a
vertical first axis), some only in fixed combinations. The identifiable combinations — the base
parameters — are found structurally, from the regressor at random states (QR with column pivoting:
the independent columns, and how the others combine with them), so they do not depend on how well a
recording excites the arm. The fit is weighted least squares on the base columns, each joint's rows
divided by the spread of its torque (else the heavy shoulder joints decide the fit and the wrist's
error is left at 100 %). The condition number of the weighted base regressor says how well the
recording excites the base parameters (an exciting trajectory: tens to a few hundred).

Friction with memory (:mod:`ros_lnn.arm.presliding`) adds per joint the outputs of its stop
operators as columns: they are functions of the position history, not of the state, so every one of
them is identifiable on its own and joins the base columns as it is.

The fitted base parameters are carried back to a full set of per-body parameters — the URDF's
values moved as little as possible (relative to each parameter's size) along the directions the data
determine — so Pinocchio computes M(q), C(q, q̇) and g(q) of the identified arm, and its inverse
dynamics equals the base-parameter fit exactly.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..errors import DataError
from ..physics.inertial_parameters import PARAMETER_NAMES, consistent
from . import friction
from .presliding import memory_columns
from .rigid_body import ArmRigidBody


@dataclass
class BaseParameters:
    """The structurally identifiable combinations of ``[π; φ]`` (inertial, then friction)."""

    columns: np.ndarray  # independent columns of [Y, F]
    combination: np.ndarray  # (len(columns), n_all): base = combination @ [π; φ]

    @property
    def count(self) -> int:
        return len(self.columns)

    def with_memory(self, columns: int) -> BaseParameters:
        """These base parameters and ``columns`` memory columns appended after ``[π; φ]``."""
        rows, width = self.combination.shape
        combination = np.zeros((rows + columns, width + columns))
        combination[:rows, :width] = self.combination
        combination[rows:, width:] = np.eye(columns)
        return BaseParameters(np.concatenate([self.columns, width + np.arange(columns)]), combination)

    def without_memory(self, width: int) -> BaseParameters:
        """These base parameters restricted to the first ``width`` columns (``[π; φ]``)."""
        keep = self.columns < width
        return BaseParameters(self.columns[keep], self.combination[keep][:, :width])


def structural_base(arm: ArmRigidBody, samples: int = 200, seed: int = 0) -> BaseParameters:
    """Base parameters of ``arm`` with friction, from the regressor at random states."""
    from scipy.linalg import qr

    rng = np.random.default_rng(seed)
    lo, hi = arm.position_limits()
    lo = np.where(np.isfinite(lo) & (lo > -10), lo, -np.pi)
    hi = np.where(np.isfinite(hi) & (hi < 10), hi, np.pi)
    q = rng.uniform(lo, hi, size=(samples, arm.n))
    qd, qdd = rng.normal(size=(2, samples, arm.n))
    W = np.concatenate([arm.regressor(q, qd, qdd), friction.regressor(qd)], axis=2).reshape(
        -1, arm.n_params + 3 * arm.n
    )
    scale = np.linalg.norm(W, axis=0)
    live = scale > 1e-10 * scale.max()
    Ws = np.zeros_like(W)
    Ws[:, live] = W[:, live] / scale[live]
    _, R, perm = qr(Ws, mode="economic", pivoting=True)
    diag = np.abs(np.diag(R))
    rank = int(np.sum(diag > 1e-8 * diag[0]))
    columns = np.sort(perm[:rank])
    # [π; φ] → base: the least-squares combination that reproduces W's columns from the independent ones
    combination = np.linalg.lstsq(W[:, columns], W, rcond=None)[0]
    combination[np.abs(combination) < 1e-10] = 0.0
    return BaseParameters(columns=columns, combination=combination)


@dataclass
class ArmFit:
    """An identified arm: per-body inertial parameters ``pi`` (n·10), friction ``phi`` (n·3) and, with
    friction memory, the element torques ``memory`` (n, K) of :mod:`ros_lnn.arm.presliding`."""

    joints: tuple
    pi: np.ndarray
    phi: np.ndarray
    coulomb_velocity: float
    base_count: int
    condition_number: float
    weights: np.ndarray  # per joint 1/σ(τ_j) used in the fit
    report: dict = field(default_factory=dict)
    memory: np.ndarray | None = None

    def friction_vector(self) -> np.ndarray:
        """``φ`` and the memory's element torques, in the regressor's column order."""
        return self.phi if self.memory is None else np.concatenate([self.phi, self.memory.reshape(-1)])


def weighted_rows(A: np.ndarray, tau: np.ndarray, weights: np.ndarray, rows: np.ndarray | None = None):
    """Stacked rows ``(A, b)`` of per-sample ``A`` (N, n, p) and ``tau`` (N, n), joint rows weighted;
    ``rows`` (N, n) bool: only these sample-joint rows."""
    w = np.broadcast_to(weights, tau.shape) if rows is None else np.where(rows, weights, 0.0)
    Aw, bw = (A * w[:, :, None]).reshape(-1, A.shape[2]), (tau * w).reshape(-1)
    if rows is None:
        return Aw, bw
    live = rows.reshape(-1)
    return Aw[live], bw[live]


@dataclass
class WeightedProblem:
    """One data set's weighted least-squares problem, computed once for every prior weight and the
    consistent refit: the joint weights ``1/σ(τ_j)``, the normal equations of all columns
    (``A_wᵀA_w``, ``A_wᵀb_w``) and the condition number of the weighted base regressor."""

    weights: np.ndarray
    gram: np.ndarray
    rhs: np.ndarray
    condition_number: float
    rows: np.ndarray | None = None  # (N, n) the sample-joint rows in the fit (None: all)

    def first(self, columns: int, base: BaseParameters) -> WeightedProblem:
        """The same problem on the first ``columns`` columns only (``[π; φ]`` without the memory)."""
        G = self.gram[:columns, :columns]
        cols = base.columns[np.diag(G)[base.columns] > 0]
        Gb = G[np.ix_(cols, cols)]
        d = np.sqrt(np.diag(Gb))
        cond = float(np.sqrt(np.linalg.cond(Gb / np.outer(d, d))))
        return WeightedProblem(self.weights, G, self.rhs[:columns], cond, self.rows)


def weighted_problem(
    A: np.ndarray, tau, base: BaseParameters, rows: np.ndarray | None = None
) -> WeightedProblem:
    """The :class:`WeightedProblem` of the regressor ``A`` (N, n, p) and torques ``tau`` (N, n); ``rows``
    (N, n): the sample-joint rows to fit (the joint weights come from every sample)."""
    tau = np.asarray(tau, dtype=float)
    spread = np.std(tau, axis=0)
    weights = 1.0 / np.where(spread > 1e-9, spread, 1.0)
    Aw, bw = weighted_rows(A, tau, weights, rows)
    Ab = Aw[:, base.columns]
    norms = np.linalg.norm(Ab, axis=0)
    live = norms > 0  # a joint's memory columns are all zero where its memory is off
    cond = float(np.linalg.cond(Ab[:, live] / norms[live]))
    return WeightedProblem(weights, Aw.T @ Aw, Aw.T @ bw, cond, rows)


def identify(
    arm: ArmRigidBody,
    q,
    qd,
    qdd,
    tau,
    *,
    coulomb_velocity: float = friction.COULOMB_VELOCITY,
    base: BaseParameters | None = None,
    prior_weight: float = 0.0,
    regressor: np.ndarray | None = None,
    problem: WeightedProblem | None = None,
    memory_outputs: np.ndarray | None = None,
    progress=None,
) -> ArmFit:
    """Weighted least squares of base parameters + friction on (filtered) samples.

    ``prior_weight`` γ > 0: the URDF as a prior — ``min ‖A_w [π; φ] − b_w‖² + γ s ‖D⁻¹(π − π_urdf)‖²``
    (``D``: each parameter's size, ``s``: the mean diagonal of ``A_wᵀA_w``), which pulls the parameters
    the data hardly determine (a wrist's inertia seen through noisy currents) towards the URDF.
    ``regressor``: ``[Y, F]`` (N, n, 10 n + 3 n) when already computed; ``problem``: its
    :func:`weighted_problem` with these torques and ``base``, when already computed.
    ``memory_outputs`` (N, n, K): the stop operators' outputs along the samples (friction memory);
    then ``regressor``, ``base`` and ``problem``, when given, include its columns."""
    tau = np.asarray(tau, dtype=float)
    if tau.ndim != 2 or tau.shape[1] != arm.n:
        raise DataError(f"torques of shape {tau.shape}; expected (samples, {arm.n})")
    if len(tau) < 5 * (arm.n_params // arm.n + 3):
        raise DataError(f"{len(tau)} samples: too few to identify {arm.n} joints")
    say = progress or (lambda _text: None)
    K = 0 if memory_outputs is None else memory_outputs.shape[2]
    base = base or structural_base(arm).with_memory(arm.n * K)
    say(f"regressor of {len(tau)} samples × {arm.n} joints")
    if regressor is None:
        A = full_regressor(arm, q, qd, qdd, coulomb_velocity, memory_outputs)
    else:
        A = regressor
    problem = problem or weighted_problem(A, tau, base)
    cond = problem.condition_number
    say(f"{base.count} base parameters, condition number {cond:.1f} (columns scaled to unit norm)")
    if prior_weight > 0:
        full = _with_prior(arm, problem, prior_weight)
    else:
        # the base columns' rows themselves: their normal equations square the condition number
        Aw, bw = weighted_rows(A[:, :, base.columns], tau, problem.weights, problem.rows)
        beta, *_ = np.linalg.lstsq(Aw, bw, rcond=None)
        full = _full_parameters(arm, base, beta)
    fit = _fit_of(arm, full, K, coulomb_velocity, base.count, cond, problem.weights)
    fit.report = fit_report(arm, fit, A, tau)
    return fit


def _fit_of(arm: ArmRigidBody, full, K: int, coulomb_velocity, base_count, cond, weights) -> ArmFit:
    """An :class:`ArmFit` of the solution ``[π; φ; h]``."""
    n_pi, n_phi = arm.n_params, 3 * arm.n
    return ArmFit(
        joints=arm.joints,
        pi=full[:n_pi],
        phi=full[n_pi : n_pi + n_phi],
        coulomb_velocity=coulomb_velocity,
        base_count=base_count,
        condition_number=cond,
        weights=weights,
        memory=full[n_pi + n_phi :].reshape(arm.n, K) if K else None,
    )


def full_regressor(
    arm: ArmRigidBody, q, qd, qdd, coulomb_velocity: float = friction.COULOMB_VELOCITY, memory_outputs=None
):
    """``[Y, F]`` (N, n, 10 n + 3 n): rigid body and friction; with ``memory_outputs`` (N, n, K) the
    memory's columns after them (N, n, 13 n + n K)."""
    parts = [arm.regressor(q, qd, qdd), friction.regressor(qd, coulomb_velocity)]
    if memory_outputs is not None:
        parts.append(memory_columns(memory_outputs))
    return np.concatenate(parts, axis=2)


def _parameter_scale(arm: ArmRigidBody, prior: np.ndarray) -> np.ndarray:
    """Each parameter's size: its URDF magnitude, at least 1 % of its body's largest parameter."""
    per_body = np.repeat([max(np.abs(prior[10 * b : 10 * b + 10]).max(), 1e-3) for b in range(arm.n)], 10)
    return np.maximum(np.abs(prior[: arm.n_params]), 1e-2 * per_body)


def _prior_penalty(arm: ArmRigidBody, G: np.ndarray, gamma: float):
    """Per inertial parameter ``1/D²`` and the weight ``λ`` that makes ``γ`` relative to ``A_wᵀA_w``."""
    prior = arm.body_parameters()
    penalty = 1.0 / _parameter_scale(arm, prior) ** 2
    lam = gamma * float(np.mean(np.diag(G)[: arm.n_params])) / float(np.mean(penalty))
    return penalty, lam


def _with_prior(arm: ArmRigidBody, problem: WeightedProblem, gamma: float) -> np.ndarray:
    prior = np.concatenate([arm.body_parameters(), np.zeros(len(problem.rhs) - arm.n_params)])
    penalty = np.zeros(len(prior))
    penalty[: arm.n_params], lam = _prior_penalty(arm, problem.gram, gamma)
    lhs = problem.gram + lam * np.diag(penalty)
    rhs = problem.rhs + lam * penalty * prior
    return np.linalg.lstsq(lhs, rhs, rcond=None)[0]


def _full_parameters(arm: ArmRigidBody, base: BaseParameters, beta: np.ndarray) -> np.ndarray:
    """``[π; φ]`` closest to the URDF (relative to each parameter's size) whose base combination
    is ``beta``."""
    rest = base.combination.shape[1] - arm.n_params
    prior = np.concatenate([arm.body_parameters(), np.zeros(rest)])
    scale = np.concatenate([_parameter_scale(arm, prior), np.ones(rest)])
    K = base.combination
    r = beta - K @ prior
    delta = scale * np.linalg.lstsq(K * scale, r, rcond=None)[0]
    return prior + delta


def identify_consistent(
    arm: ArmRigidBody, fit: ArmFit, A, tau, prior_weight: float, problem: WeightedProblem | None = None
) -> ArmFit:
    """``fit`` refitted with every body physically consistent (:mod:`ros_lnn.arm.consistency`): the same
    weighted least squares and URDF prior (γ, at least 1e-6 to pin what the data leave free), started at
    the URDF's bodies and ``fit``'s friction. ``problem``: the fit's :class:`WeightedProblem`, when at
    hand."""
    from .consistency import consistent_fit

    if problem is None:
        Aw, bw = weighted_rows(A, tau, fit.weights)
        G, rhs = Aw.T @ Aw, Aw.T @ bw
    else:
        G, rhs = problem.gram, problem.rhs
    penalty, lam = _prior_penalty(arm, G, max(prior_weight, 1e-6))
    start = fit.friction_vector()
    pi, phi, info = consistent_fit(G, rhs, arm.n, arm.body_parameters(), start, penalty, lam)
    K = 0 if fit.memory is None else fit.memory.shape[1]
    out = _fit_of(
        arm,
        np.concatenate([pi, phi]),
        K,
        fit.coulomb_velocity,
        fit.base_count,
        fit.condition_number,
        fit.weights,
    )
    out.report = fit_report(arm, out, A, tau) | {"consistent_fit": info}
    return out


def fit_report(arm: ArmRigidBody, fit: ArmFit, A: np.ndarray, tau: np.ndarray) -> dict:
    """Parameters per body, friction per joint and each friction term's share of the torque."""
    bodies = {}
    for b, joint in enumerate(arm.joints):
        bodies[joint] = {name: float(v) for name, v in zip(PARAMETER_NAMES, fit.pi[10 * b : 10 * b + 10])}
    urdf = arm.body_parameters()
    qd_rows = A[:, :, arm.n_params : arm.n_params + 3 * arm.n]
    fr = {}
    for j, joint in enumerate(arm.joints):
        terms = qd_rows[:, j, 3 * j : 3 * j + 3] * fit.phi[3 * j : 3 * j + 3]
        norm = float(np.linalg.norm(tau[:, j])) or 1.0
        share = {
            name: 100.0 * float(np.linalg.norm(terms[:, i])) / norm for i, name in enumerate(friction.NAMES)
        }
        entry: dict = {name: float(v) for name, v in zip(friction.NAMES, fit.phi[3 * j : 3 * j + 3])}
        if fit.memory is not None:
            K = fit.memory.shape[1]
            cols = A[:, j, arm.n_params + 3 * arm.n + K * j : arm.n_params + 3 * arm.n + K * (j + 1)]
            entry["memory"] = fit.memory[j].tolist()
            share["memory"] = 100.0 * float(np.linalg.norm(cols @ fit.memory[j])) / norm
        fr[joint] = {**entry, "share_percent": share}
    return {
        "physically_consistent": {
            j: consistent(fit.pi[10 * b : 10 * b + 10]) for b, j in enumerate(arm.joints)
        },
        "base_parameters": fit.base_count,
        "condition_number": fit.condition_number,
        "masses_kg": {j: float(fit.pi[10 * b]) for b, j in enumerate(arm.joints)},
        "urdf_masses_kg": {j: float(urdf[10 * b]) for b, j in enumerate(arm.joints)},
        "bodies": bodies,
        "friction": fr,
    }


def predict(arm: ArmRigidBody, fit: ArmFit, q, qd, qdd, memory_outputs=None) -> np.ndarray:
    """τ̂ (N, n) of the identified rigid body and friction; with friction memory its torque from the
    stop operators' outputs ``memory_outputs`` (N, n, K) along the same samples."""
    identified = arm.with_parameters(fit.pi)
    tau = identified.inverse_dynamics(q, qd, qdd) + friction.torque(fit.phi, qd, fit.coulomb_velocity)
    if fit.memory is not None:
        if memory_outputs is None:
            raise DataError("this fit has friction memory: give the stop operators' outputs")
        tau = tau + np.einsum("tjk,jk->tj", memory_outputs, fit.memory)
    return tau


def relative_error_percent(tau, pred) -> np.ndarray:
    """Per joint 100 · ‖τ − τ̂‖ / ‖τ‖ (≥ 100: worse than predicting zero)."""
    tau, pred = np.asarray(tau, dtype=float), np.asarray(pred, dtype=float)
    den = np.linalg.norm(tau, axis=0)
    return 100.0 * np.linalg.norm(tau - pred, axis=0) / np.where(den > 0, den, np.nan)
