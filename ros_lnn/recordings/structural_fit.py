"""Structural least-squares baselines: the plant's true equation for the free acceleration ``q̈_f``,
linear in its parameters, fitted to measured data; and the "predict zero" baseline.

Rotary pendulum (θ free, arm φ servo; the arm angle itself never appears — it is cyclic):

    θ̈ = a sin θ + b sin θ cos θ φ̇² + c cos θ φ̈ + d θ̇ + e tanh(θ̇/ε) + f

Crane (θ free, cart x servo):

    θ̈ = a sin θ + c cos θ ẍ + d θ̇ + e tanh(θ̇/ε) + f

``d`` and ``e`` are the hinge's viscous and Coulomb friction (``ε`` the plant's smoothing, taken as
known), ``f`` a constant (sensor offsets). "Without damping" drops ``d`` and ``e``. Measured data are
what the package's bag path gives: ``q``, ``q̇`` from the joint states, ``q̈`` by Savitzky–Golay
differentiation of the measured velocities (:func:`ros_lnn.bags.dataset.load_bag_dataset`). Scores are
``nMSE = mean((q̈̂_f − q̈_f)²) / var(q̈_f)`` against that measured ``q̈_f``; zero predicts ``q̈̂_f = 0``.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from ..bags.dataset import load_bag_dataset
from ..bags.mapping import BagMapping
from ..errors import DataError
from ..physics.crane import Crane
from ..physics.friction import FrictionPlant
from ..physics.rotary_pendulum import RotaryPendulum

#: feature of each term: (θ, θ̇, servo rate, servo acceleration, ε) -> column
TERMS = {
    "sin(theta)": lambda th, thd, sd, sdd, eps: np.sin(th),
    "sin(theta)cos(theta)servo_d^2": lambda th, thd, sd, sdd, eps: np.sin(th) * np.cos(th) * sd**2,
    "cos(theta)servo_dd": lambda th, thd, sd, sdd, eps: np.cos(th) * sdd,
    "theta_d": lambda th, thd, sd, sdd, eps: thd,
    "tanh(theta_d/eps)": lambda th, thd, sd, sdd, eps: np.tanh(thd / eps),
    "1": lambda th, thd, sd, sdd, eps: np.ones_like(th),
}
DAMPING_TERMS = ("theta_d", "tanh(theta_d/eps)")


@dataclass(frozen=True)
class StructuralEquation:
    """``q̈_f = Σ_k c_k feature_k`` for one free coordinate; ``true`` holds the plant's coefficients."""

    system: str
    terms: tuple
    true: tuple
    smoothing: float

    def features(self, data: MotionData, damping: bool = True) -> np.ndarray:
        terms = self.active_terms(damping)
        return np.column_stack(
            [TERMS[k](data.q_f, data.qd_f, data.qd_e, data.qdd_e, self.smoothing) for k in terms]
        )

    def active_terms(self, damping: bool = True) -> tuple:
        return self.terms if damping else tuple(k for k in self.terms if k not in DAMPING_TERMS)

    def true_coefficients(self, damping: bool = True) -> np.ndarray:
        keep = self.active_terms(damping)
        return np.array([c for k, c in zip(self.terms, self.true) if k in keep])


def equation_for(plant: FrictionPlant) -> StructuralEquation:
    """The true structural equation of a rotary pendulum or crane plant, with its true coefficients."""
    system = plant.system
    hinge = plant.joint_friction(system.free_names[0])
    true: tuple[float, ...]
    terms: tuple[str, ...]
    if isinstance(system, RotaryPendulum):
        Jp = system.J_p
        true = (
            -system.m_p * system.g * system.l / Jp,
            1.0,
            -system.m_p * system.r * system.l / Jp,
            -hinge.viscous / Jp,
            -hinge.coulomb / Jp,
            0.0,
        )
        terms = (
            "sin(theta)",
            "sin(theta)cos(theta)servo_d^2",
            "cos(theta)servo_dd",
            "theta_d",
            "tanh(theta_d/eps)",
            "1",
        )
    elif isinstance(system, Crane):
        J = system.m2 * system.L**2
        true = (-system.g / system.L, -1.0 / system.L, -hinge.viscous / J, -hinge.coulomb / J, 0.0)
        terms = ("sin(theta)", "cos(theta)servo_dd", "theta_d", "tanh(theta_d/eps)", "1")
    else:
        raise DataError(f"no structural equation for {type(system).__name__}; use a rotary pendulum or crane")
    return StructuralEquation(plant.name, terms, true, hinge.smoothing)


@dataclass
class MotionData:
    """One free and one servo coordinate, samples of every trial concatenated."""

    q_f: np.ndarray
    qd_f: np.ndarray
    qdd_f: np.ndarray
    qd_e: np.ndarray
    qdd_e: np.ndarray
    source: str = ""

    def __len__(self) -> int:
        return len(self.q_f)


def measured_motion(bags, mapping: BagMapping) -> MotionData:
    """What the package's bag path measures (no validation split): ``q``, ``q̇`` of the joint states,
    ``q̈`` by its Savitzky–Golay differentiation; the first free and first servo joint of ``mapping``."""
    dataset = load_bag_dataset(bags, replace(mapping, val_fraction=0.0))
    f, e = mapping.free_joints[0], mapping.servo_joints[0]

    def column(attr, joint):
        return np.concatenate(
            [getattr(tr, attr)[:, tr.coordinate_names.index(joint)] for tr in dataset.trials]
        )

    return MotionData(
        column("q", f),
        column("qd", f),
        column("qdd", f),
        column("qd", e),
        column("qdd", e),
        source=", ".join(b["path"] for b in dataset.summary["bags"]),
    )


def exact_motion(truth) -> MotionData:
    """The exact values of a :class:`ros_lnn.recordings.generator.RecordingTruth`."""
    f, e = truth.free_index[0], truth.servo_index[0]
    return MotionData(
        truth.q[:, f],
        truth.qd[:, f],
        truth.qdd[:, f],
        truth.qd[:, e],
        truth.qdd[:, e],
        source=f"{truth.path} (exact)",
    )


@dataclass(frozen=True)
class StructuralFit:
    equation: StructuralEquation
    damping: bool
    coefficients: np.ndarray
    train_nmse: float

    @property
    def terms(self) -> tuple:
        return self.equation.active_terms(self.damping)

    def predict(self, data: MotionData) -> np.ndarray:
        return self.equation.features(data, self.damping) @ self.coefficients

    def nmse(self, data: MotionData) -> float:
        return nmse(self.predict(data), data.qdd_f)


def nmse(prediction, reference) -> float:
    """``mean((prediction − reference)²) / var(reference)``."""
    reference = np.asarray(reference, dtype=float)
    return float(np.mean((np.asarray(prediction) - reference) ** 2) / np.var(reference))


def zero_nmse(data: MotionData) -> float:
    """The "predict zero" baseline: ``mean(q̈_f²) / var(q̈_f)``."""
    return nmse(np.zeros_like(data.qdd_f), data.qdd_f)


def fit_structural(equation: StructuralEquation, data: MotionData, damping: bool = True) -> StructuralFit:
    """Least squares of the equation's coefficients on ``data`` (columns scaled to unit norm first)."""
    A = equation.features(data, damping)
    scale = np.linalg.norm(A, axis=0)
    if np.any(scale == 0):
        dead = [k for k, s in zip(equation.active_terms(damping), scale) if s == 0]
        raise DataError(
            f"{data.source}: term(s) {dead} are zero on every sample; the recording does not excite them"
        )
    coef = np.linalg.lstsq(A / scale, data.qdd_f, rcond=None)[0] / scale
    return StructuralFit(equation, damping, coef, nmse(A @ coef, data.qdd_f))


def baseline_rows(equation: StructuralEquation, train: MotionData, tests: dict) -> list:
    """Rows of the baseline table: structural fit with and without damping, and zero; each with its
    training nMSE and held-out nMSE on every test set (``{name: MotionData}``)."""
    rows = []
    for damping in (True, False):
        fit = fit_structural(equation, train, damping)
        rows.append(
            {
                "baseline": "structural" if damping else "structural, no damping",
                "terms": list(fit.terms),
                "coefficients": fit.coefficients.tolist(),
                "train_nmse": fit.train_nmse,
                "test_nmse": {k: fit.nmse(d) for k, d in tests.items()},
            }
        )
    rows.append(
        {
            "baseline": "zero",
            "terms": [],
            "coefficients": [],
            "train_nmse": zero_nmse(train),
            "test_nmse": {k: zero_nmse(d) for k, d in tests.items()},
        }
    )
    return rows


__all__ = [
    "StructuralEquation",
    "StructuralFit",
    "MotionData",
    "equation_for",
    "measured_motion",
    "exact_motion",
    "fit_structural",
    "baseline_rows",
    "nmse",
    "zero_nmse",
    "TERMS",
]
