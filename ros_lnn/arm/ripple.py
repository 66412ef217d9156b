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


def fit_ripple(q, qd, target, q_val, target_val, rate_hz: float, lines: int = LINES, ridge: float = 1e-3, min_gain: float = 0.01) -> Ripple:
    """Per joint: the strongest ``lines`` frequencies of ``target`` (raw τ minus the smooth model),
    amplitudes by ridge, kept only if they lower the joint's validation error by ``min_gain``."""
    n = target.shape[1]
    K = np.zeros((n, lines))
    A = np.zeros((n, lines))
    B = np.zeros((n, lines))
    joints = {}
    for j in range(n):
        k_max = resolvable_k(qd[:, j], rate_hz)
        if k_max < 20:
            joints[j] = {"kept": False, "reason": f"the sample rate resolves spatial frequencies up to {k_max:.0f} rad⁻¹ only"}
            continue
        grid = np.arange(10.0, k_max, GRID_STEP)
        y = target[:, j] - target[:, j].mean()
        power = np.zeros(len(grid))
        for chunk in range(0, len(grid), 200):
            X = _design(q[:, j], grid[chunk : chunk + 200])
            c = X.T @ y / len(y)
            m = len(grid[chunk : chunk + 200])
            power[chunk : chunk + 200] = c[:m] ** 2 + c[m:] ** 2
        ks = np.sort(grid[np.argsort(power)[-lines:]])
        X = _design(q[:, j], ks)
        lam = ridge * len(y)
        coef = np.linalg.solve(X.T @ X + lam * np.eye(2 * len(ks)), X.T @ y)
        Xv = _design(q_val[:, j], ks)
        yv = target_val[:, j] - target[:, j].mean()
        before = float(np.mean(yv**2))
        after = float(np.mean((yv - Xv @ coef) ** 2))
        gain = 1.0 - after / before if before > 0 else 0.0
        kept = gain >= min_gain
        joints[j] = {
            "kept": bool(kept),
            "validation_gain_percent": 100.0 * gain,
            "strongest_k": float(ks[np.argmax(coef[: len(ks)] ** 2 + coef[len(ks) :] ** 2)]),
            "k_max": k_max,
        }
        if kept:
            K[j], A[j], B[j] = ks, coef[: len(ks)], coef[len(ks) :]
    return Ripple(K, A, B, {"joints": joints})
