"""The gray-box prior from a robot's URDF: its kinematic tree fixes the rigid-body structure, its
inertial parameters are identified from the recording by linear least squares (Pinocchio's joint
torque regressor), the URDF's values being the prior (EQUATIONS.md §7).

What a recording of position-driven servos identifies. The servo rows of ``Q = Y(q, q̇, q̈) π`` are the
forces the servos deliver; without measured efforts they are unknown, so only the free rows enter::

    Y_f(q, q̇, q̈) π + b ⊙ q̇_f + c ⊙ tanh(q̇_f / v) = Q_f        (Q_f = 0 for unactuated joints)

``π`` stacks the ten parameters of every body (mass, first moment, inertia about the joint frame),
``b``, ``c ≥ 0`` the free joints' viscous and Coulomb friction. With ``Q_f = 0`` the equations are
homogeneous: scaling every parameter by the same factor changes no q̈_f, so the overall scale is never
identified, and parameters that do not enter the free rows (the servo links' own inertia, a servo
arm's inertia about its axis) are not either — they do not affect q̈_f, which is what such a model
predicts. Which combinations a given recording identifies is the rank of the stacked ``Y_f`` (the
identifiability report lists them); a servo at constant speed leaves, for example, the centrifugal and
the gravity terms of a pendulum on a spinning arm as one combination.

The solution: ``min ‖A (π_urdf + δ) + friction‖² + λ ‖W δ‖²`` with ``W`` the inverse of each
parameter's URDF magnitude (relative changes) and ``λ = 10⁻⁶ σ_max²`` (``σ_max`` the data's largest
singular value), so that directions the data determine move freely and the others stay at the URDF's
values. The scale is pinned by one heavily weighted row: the mean diagonal of the fitted rows' mass
matrix over the data keeps the URDF's value (else shrinking every parameter would shrink the residual
too). The parameters stay physically consistent throughout: every body's pseudo-inertia
``J = [[½ tr(I) 1 − I, h], [hᵀ, m]]`` is written as ``L Lᵀ`` (``L`` lower triangular), so it is
positive semidefinite and ``m ≥ 0`` by construction (the linear matrix inequality of Wensing, Kim and
Slotine for physically consistent inertial parameters), friction coefficients are bounded below by
zero, and the (now nonlinear) least squares starts from the URDF's values.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import ConfigError, DataError
from ..physics.inertial_parameters import (
    PARAMETER_NAMES,
    consistent,
    from_pseudo_inertia,
    pseudo_inertia,
    pseudo_inertia_inside,
)
from ..physics.multibody.urdf import import_pinocchio, pinocchio_model

COULOMB_VELOCITY = 0.05


def _pin():
    return import_pinocchio("a URDF prior (--urdf / bag.robot_description)")


@dataclass
class UrdfModel:
    """A Pinocchio model of the URDF and how its joints map onto the model's coordinates."""

    model: Any  # pinocchio.Model
    path: str
    joints: list  # Pinocchio order
    index: list  # model-order coordinate of each Pinocchio joint
    types: list
    parents: list
    axes: np.ndarray
    origin_R: np.ndarray
    origin_p: np.ndarray
    params: np.ndarray  # (bodies, 10): the URDF's inertial parameters
    wraps: list = field(default_factory=list)  # continuous joints (Pinocchio stores cos, sin)

    @property
    def n(self) -> int:
        return len(self.joints)

    def body_names(self) -> list:
        return [f"body of {j}" for j in self.joints]


def read_urdf(path, model_joints) -> UrdfModel:
    """Read ``path`` with Pinocchio; every moving joint must be one of ``model_joints`` and vice versa."""
    pin = _pin()
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read the URDF ({exc.strerror})") from None
    model, names = pinocchio_model(pin, text, f"{path}: ")
    missing = [j for j in model_joints if j not in names]
    extra = [j for j in names if j not in model_joints]
    if missing or extra:
        raise ConfigError(
            f"{path}: joints do not match the mapping: "
            + "; ".join(
                x
                for x in (
                    f"not in the URDF: {missing}" if missing else "",
                    f"moving in the URDF but not in the mapping: {extra} (map them, or make them fixed)"
                    if extra
                    else "",
                )
                if x
            )
        )
    data = model.createData()
    q0 = pin.neutral(model)
    pin.computeJointJacobians(model, data, q0)
    types, axes, wraps = [], [], []
    for i in range(1, model.njoints):
        joint = model.joints[i]
        short = joint.shortname()
        if joint.nv != 1:
            raise ConfigError(
                f"{path}: joint {model.names[i]} ({short}) has {joint.nv} degrees of freedom; "
                "the prior takes revolute, continuous and prismatic joints"
            )
        J = pin.getJointJacobian(model, data, i, pin.ReferenceFrame.LOCAL)[:, joint.idx_v]
        prismatic = "JointModelP" in short
        types.append("prismatic" if prismatic else "revolute")
        axes.append(J[:3] if prismatic else J[3:])
        wraps.append(joint.nq == 2)
    params = np.array([model.inertias[i].toDynamicParameters() for i in range(1, model.njoints)])
    return UrdfModel(
        model=model,
        path=str(path),
        joints=names,
        index=[list(model_joints).index(j) for j in names],
        types=types,
        parents=[int(model.parents[i]) - 1 for i in range(1, model.njoints)],
        axes=np.array(axes),
        origin_R=np.array([model.jointPlacements[i].rotation for i in range(1, model.njoints)]),
        origin_p=np.array([model.jointPlacements[i].translation for i in range(1, model.njoints)]),
        params=params,
        wraps=wraps,
    )


def pin_configuration(urdf: UrdfModel, q) -> np.ndarray:
    """Pinocchio's configuration vector of model-order coordinates ``q`` (cos, sin for continuous)."""
    parts = []
    for b in range(urdf.n):
        value = q[urdf.index[b]]
        parts += [np.cos(value), np.sin(value)] if urdf.wraps[b] else [value]
    return np.array(parts)


def regressor(urdf: UrdfModel, q, qd, qdd) -> np.ndarray:
    """``Y`` (N, n, 10 · bodies) with ``Q = Y π``, rows in model order."""
    pin = _pin()
    data = urdf.model.createData()
    perm = np.argsort(urdf.index)  # model coordinate → Pinocchio joint
    out = np.empty((len(q), urdf.n, 10 * urdf.n))
    for k in range(len(q)):
        config = pin_configuration(urdf, q[k])
        v, a = np.asarray(qd[k])[urdf.index], np.asarray(qdd[k])[urdf.index]
        out[k] = pin.computeJointTorqueRegressor(urdf.model, data, config, v, a)[perm]
    return out


def prior_config(urdf: UrdfModel, params: np.ndarray) -> dict:
    """The :class:`~ros_lnn.models.rigid_body.RigidBodyPrior` config of identified ``params``."""
    return {
        "joints": list(urdf.joints),
        "types": list(urdf.types),
        "parents": list(urdf.parents),
        "axes": urdf.axes.tolist(),
        "origin_R": urdf.origin_R.tolist(),
        "origin_p": urdf.origin_p.tolist(),
        "params": np.asarray(params).reshape(urdf.n, 10).tolist(),
        "gravity": np.asarray(urdf.model.gravity.linear).tolist(),
        "source": Path(urdf.path).name,
    }


@dataclass
class Identification:
    params: np.ndarray  # (bodies, 10)
    damping: np.ndarray  # viscous coefficient per model coordinate (free joints identified, else 0)
    coulomb: np.ndarray  # Coulomb coefficient per model coordinate
    prior_weight: float
    rows: str
    residual_rel: float  # rms of the fitted free-row residual over rms of the URDF's
    changes: dict  # parameter → (URDF, identified) where they differ by more than 1 %


def _lower(L: np.ndarray) -> np.ndarray:
    return L[np.tril_indices(4)]


def consistent_least_squares(B: np.ndarray, d: np.ndarray, prior: np.ndarray, n_friction: int):
    """``min ‖B [π − π_prior; f] − d‖`` over physically consistent ``π`` (every body's pseudo-inertia
    ``J = L Lᵀ``, ``L`` lower triangular: positive semidefinite, mass ``‖L_4‖² ≥ 0``) and ``f ≥ 0``,
    from the prior (its pseudo-inertias nudged inside the cone). Returns ``[π − π_prior; f]``."""
    from scipy.optimize import least_squares

    bodies = len(prior)
    idx = np.tril_indices(4)
    starts = []
    for p in prior:
        starts.append(_lower(np.linalg.cholesky(pseudo_inertia_inside(p, 1e-6, least=1e-12))))
    z0 = np.concatenate(starts + [np.zeros(n_friction)])
    pi0 = prior.reshape(-1)

    def lower(z, b):
        L = np.zeros((4, 4))
        L[idx] = z[10 * b : 10 * b + 10]
        return L

    def params(z):
        return np.concatenate([from_pseudo_inertia(lower(z, b) @ lower(z, b).T) for b in range(bodies)])

    def residual(z):
        return B @ np.concatenate([params(z) - pi0, z[10 * bodies :]]) - d

    def jacobian(z):
        """``∂r/∂z``: π is linear in ``J = L Lᵀ`` and ``∂J/∂L_k = E_k Lᵀ + L E_kᵀ``."""
        dpi = np.zeros((10 * bodies, len(z)))
        for b in range(bodies):
            L = lower(z, b)
            for k, (i, j) in enumerate(zip(*idx)):
                E = np.zeros((4, 4))
                E[i, j] = 1.0
                dpi[10 * b : 10 * b + 10, 10 * b + k] = from_pseudo_inertia(E @ L.T + L @ E.T)
        dpi[:, 10 * bodies :] = 0.0
        return B[:, : 10 * bodies] @ dpi + np.hstack([np.zeros((len(B), 10 * bodies)), B[:, 10 * bodies :]])

    lower_bounds = np.concatenate([np.full(10 * bodies, -np.inf), np.zeros(n_friction)])
    fit = least_squares(
        residual,
        z0,
        jac=jacobian,
        bounds=(lower_bounds, np.inf),
        method="trf",
        x_scale="jac",
        xtol=1e-12,
        ftol=1e-12,
        gtol=1e-12,
        max_nfev=2000,
    )
    return np.concatenate([params(fit.x) - pi0, fit.x[10 * bodies :]])


def identify(
    urdf: UrdfModel, samples: dict, n_f: int, *, use_qe: bool, max_samples: int = 3000, seed: int = 0
) -> Identification:
    """Identify the inertial parameters (and the free joints' friction) from model-order ``samples``
    (``q, qd, qdd, Q``): the free rows, and the servo rows when ``use_qe``. See the module docstring."""
    q, qd, qdd, Q = (np.asarray(samples[k], float) for k in ("q", "qd", "qdd", "Q"))
    if len(q) > max_samples:
        pick = np.sort(np.random.default_rng(seed).choice(len(q), max_samples, replace=False))
        q, qd, qdd, Q = q[pick], qd[pick], qdd[pick], Q[pick]
    n = urdf.n
    rows = list(range(n)) if use_qe else list(range(n_f))
    Y = regressor(urdf, q, qd, qdd)[:, rows, :]  # (N, r, 10 nb)
    fric_joints = rows
    # friction columns: +b q̇_j, +c tanh(q̇_j / v) on row j (Y π + b q̇ + c tanh = Q)
    F = np.zeros(Y.shape[:2] + (2 * len(fric_joints),))
    for k, j in enumerate(fric_joints):
        F[:, k, k] = qd[:, j]
        F[:, k, len(fric_joints) + k] = np.tanh(qd[:, j] / COULOMB_VELOCITY)
    target = Q[:, rows]
    if not np.isfinite(target).all():
        raise DataError("the URDF prior needs the applied forces of the rows it fits (Q_f, and Q_e with it)")
    # rows scaled per joint by the spread of the URDF's prediction (so each joint counts alike)
    pi0 = urdf.params.reshape(-1)
    pred0 = Y @ pi0
    # rows scaled per joint by the size of the URDF's individual terms (they cancel in a good model)
    terms = np.sqrt(np.mean(np.sum((Y * pi0) ** 2, axis=-1), axis=0))
    row_scale = 1.0 / np.maximum(terms, 1e-12)  # (r,)
    A = np.concatenate([Y, F], axis=-1) * row_scale[None, :, None]
    A = A.reshape(-1, A.shape[-1])
    y = ((target - pred0) * row_scale).reshape(-1)  # unknowns: δπ, b, c
    scale = np.abs(urdf.params).reshape(-1)
    weight = 1.0 / np.maximum(scale, 1e-3 * max(scale.max(), 1e-12))  # relative changes
    n_p, n_fr = pi0.size, 2 * len(fric_joints)
    # friction columns scaled to the same footing as the parameters (relative to their column norm)
    col = np.linalg.norm(A, axis=0)
    fric_scale = np.where(col[n_p:] > 0, col[n_p:], 1.0)
    A[:, n_p:] /= fric_scale
    sigma_max = np.linalg.svd(A[:, :n_p] / weight, compute_uv=False)[0]
    lam = 1e-6 * sigma_max**2
    prior_rows = np.zeros((n_p, n_p + n_fr))
    prior_rows[:, :n_p] = np.sqrt(lam) * np.diag(weight)
    # The scale: with unmeasured forces every multiple of π fits, and shrinking π shrinks the residual
    # too; the fitted rows' inertia (mean diagonal of M over the data, linear in π) keeps the URDF's.
    unit = np.zeros((len(q), n, n))
    unit[:, rows, rows] = 1.0
    inertia_rows = np.stack([regressor(urdf, q, 0 * qd, unit[:, :, j])[:, j, :] for j in rows], axis=1)
    gravity_rows = regressor(urdf, q, 0 * qd, 0 * qdd)[:, rows, :]
    scale_row = np.zeros(n_p + n_fr)
    scale_row[:n_p] = (inertia_rows - gravity_rows).mean(axis=(0, 1))
    scale_row *= 1e3 * sigma_max / max(float(np.linalg.norm(scale_row)), 1e-300)
    B = np.vstack([A, prior_rows, scale_row[None, :]])
    d = np.concatenate([y, np.zeros(n_p + 1)])
    x = consistent_least_squares(B, d, urdf.params, n_fr)
    params = (pi0 + x[:n_p]).reshape(urdf.n, 10)  # x: δπ, then the (scaled) friction coefficients
    fric = x[n_p:] / fric_scale
    damping, coulomb = np.zeros(n), np.zeros(n)
    for k, j in enumerate(fric_joints):
        damping[j], coulomb[j] = fric[k], fric[len(fric_joints) + k]
    resid0 = np.sqrt(np.mean(y**2))
    resid = np.sqrt(np.mean((A @ x - y) ** 2))
    changes = {}
    for b in range(urdf.n):
        for k, name in enumerate(PARAMETER_NAMES):
            before, after = urdf.params[b, k], params[b, k]
            if abs(after - before) > 0.01 * max(abs(before), 1e-9):
                changes[f"{urdf.joints[b]}:{name}"] = (float(before), float(after))
    return Identification(
        params=params,
        damping=damping,
        coulomb=coulomb,
        prior_weight=float(lam),
        rows="free and servo rows" if use_qe else "free rows (no measured servo efforts)",
        residual_rel=float(resid / max(resid0, 1e-300)),
        changes=changes,
    )


__all__ = [
    "UrdfModel",
    "Identification",
    "read_urdf",
    "regressor",
    "identify",
    "prior_config",
    "consistent",
    "consistent_least_squares",
    "pseudo_inertia",
]
