"""Gear torque ripple: the part of the measured torque that repeats with the joint angle at high
spatial frequency. A harmonic drive's flexspline deforms twice per wave-generator turn, so the torque
it transmits ripples at about twice the gear ratio cycles per joint revolution (≈ 240 per radian·2π on
a Panda's shoulder joints); cogging of the motor adds its own lines. The ripple moves far faster than
the arm (k·q̇ / 2π Hz), so it is in the raw torque only, above the filter's cutoff.

Per joint ``ρ_j(q_j) = Σ_i a_i sin(k_i q_j) + b_i cos(k_i q_j)``: the spatial frequencies ``k_i`` are
chosen from the data (the strongest lines of the raw torque's high-frequency remainder over a grid of
frequencies the sample rate resolves), the amplitudes by ridge least squares. A joint keeps its
ripple only if it lowers that joint's error on the validation samples.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

import numpy as np

GRID_STEP = 0.5  # rad⁻¹
MAX_K = 400.0
LINES = 40


@dataclass
class Ripple:
    k: np.ndarray  # (n, m) spatial frequencies, rad⁻¹ (0 = unused)
    a: np.ndarray  # (n, m) sine amplitudes
    b: np.ndarray  # (n, m) cosine amplitudes
    report: dict = field(default_factory=dict)

    def torque(self, q) -> np.ndarray:
        q = np.atleast_2d(np.asarray(q, dtype=float))
        phase = q[:, :, None] * self.k[None]
        return (np.sin(phase) * self.a + np.cos(phase) * self.b).sum(-1)

    @classmethod
    def none(cls, n: int) -> Ripple:
        z = np.zeros((n, 1))
        return cls(z, z.copy(), z.copy(), {"joints": {}})


def resolvable_k(qd, rate_hz: float) -> float:
    """Largest spatial frequency whose ripple stays below 0.4 × Nyquist at the 95th-percentile speed."""
    speed = float(np.percentile(np.abs(qd), 95)) if len(qd) else 0.0
    if speed <= 0:
        return 0.0
    return float(min(MAX_K, 2 * np.pi * 0.4 * (rate_hz / 2) / speed))


def _design(q, k):
    phase = np.outer(q, k)
    return np.concatenate([np.sin(phase), np.cos(phase)], axis=1)


def _select_and_fit(q, y, k_max: float, lines: int, ridge: float):
    """The ``lines`` strongest frequencies of ``y`` over the grid below ``k_max``, and ridge amplitudes."""
    grid = np.arange(10.0, k_max, GRID_STEP)
    y = y - y.mean()
    power = np.zeros(len(grid))
    for chunk in range(0, len(grid), 200):
        ks = grid[chunk : chunk + 200]
        c = _design(q, ks).T @ y / len(y)
        power[chunk : chunk + len(ks)] = c[: len(ks)] ** 2 + c[len(ks) :] ** 2
    ks = np.sort(grid[np.argsort(power)[-lines:]])
    X = _design(q, ks)
    coef = np.linalg.solve(X.T @ X + ridge * len(y) * np.eye(2 * len(ks)), X.T @ y)
    return ks, coef


def fit_ripple(
    q,
    qd,
    target,
    rate_hz: float,
    lines: int = LINES,
    ridge: float = 1e-2,
    folds: int = 5,
    min_gain: float = 0.01,
) -> Ripple:
    """Per joint: the strongest ``lines`` frequencies of ``target`` (what the low-pass filter removed
    from τ), amplitudes by ridge. A joint keeps its ripple only if it lowers the error on held-out
    stretches by ``min_gain``: blocked cross-validation over ``folds`` contiguous stretches of the
    samples, frequencies chosen anew in each fold (one validation stretch can sit where the arm
    visits angles the rest never does)."""
    n = target.shape[1]
    K = np.zeros((n, lines))
    A = np.zeros((n, lines))
    B = np.zeros((n, lines))
    joints = {}
    bounds = np.linspace(0, len(q), folds + 1).astype(int)
    for j in range(n):
        k_max = resolvable_k(qd[:, j], rate_hz)
        if k_max < 20:
            joints[j] = {
                "kept": False,
                "reason": f"the sample rate resolves spatial frequencies up to {k_max:.0f} rad⁻¹ only",
            }
            continue
        before = after = 0.0
        for a, b in itertools.pairwise(bounds):
            rest = np.r_[0:a, b : len(q)]
            ks, coef = _select_and_fit(q[rest, j], target[rest, j], k_max, lines, ridge)
            y = target[a:b, j] - target[rest, j].mean()
            before += float(np.sum(y**2))
            after += float(np.sum((y - _design(q[a:b, j], ks) @ coef) ** 2))
        gain = 1.0 - after / before if before > 0 else 0.0
        kept = gain >= min_gain
        ks, coef = _select_and_fit(q[:, j], target[:, j], k_max, lines, ridge)
        joints[j] = {
            "kept": bool(kept),
            "validation_gain_percent": 100.0 * gain,
            "strongest_k": float(ks[np.argmax(coef[: len(ks)] ** 2 + coef[len(ks) :] ** 2)]),
            "k_max": k_max,
        }
        if kept:
            K[j], A[j], B[j] = ks, coef[: len(ks)], coef[len(ks) :]
    return Ripple(K, A, B, {"joints": joints, "folds": folds, "lines": lines, "ridge": ridge})
