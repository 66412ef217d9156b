"""Gear torque ripple: the part of the measured torque that repeats with the joint angle at high
spatial frequency. A harmonic drive's flexspline deforms twice per wave-generator turn, so the torque
it transmits ripples at about twice the gear ratio cycles per joint revolution (≈ 240 rad⁻¹ on a
Panda's shoulder joints); cogging of the motor adds its own lines. The ripple moves far faster than
the arm (k·q̇ / 2π Hz), so it is in the raw torque only, above the filter's cutoff.

Per joint ``ρ_j = Σ_i (a_i + c_i s_j) sin(k_i q_j) + (b_i + d_i s_j) cos(k_i q_j)`` with
``s_j = |q̇_j| / σ_j`` (the ripple of a gear in mesh grows with its speed — measured on the Panda:
the speed-modulated lines explain 22–41 % of the shoulder joints' high-frequency torque on held-out
data, the plain lines 14–31 %). The spatial frequencies ``k_i`` are chosen from the data (the
strongest lines of the raw torque's high-frequency remainder over a grid of frequencies the sample
rate resolves), the amplitudes by ridge least squares. Per joint the plain or the speed-modulated
form, whichever lowers that joint's error more on held-out stretches (blocked cross-validation),
and only if it does.
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
    c: np.ndarray  # (n, m) sine amplitudes per unit of s_j
    d: np.ndarray  # (n, m) cosine amplitudes per unit of s_j
    speed_scale: np.ndarray  # (n,) σ_j, rad/s
    report: dict = field(default_factory=dict)

    def torque(self, q, qd) -> np.ndarray:
        q = np.atleast_2d(np.asarray(q, dtype=float))
        s = np.abs(np.atleast_2d(np.asarray(qd, dtype=float))) / self.speed_scale
        phase = q[:, :, None] * self.k[None]
        sin, cos = np.sin(phase), np.cos(phase)
        return (sin * (self.a + self.c * s[:, :, None]) + cos * (self.b + self.d * s[:, :, None])).sum(-1)

    @classmethod
    def none(cls, n: int) -> Ripple:
        z = np.zeros((n, 1))
        return cls(z, z.copy(), z.copy(), z.copy(), z.copy(), np.ones(n), {"joints": {}})


def resolvable_k(qd, rate_hz: float) -> float:
    """Largest spatial frequency whose ripple stays below 0.4 × Nyquist at the 95th-percentile speed."""
    speed = float(np.percentile(np.abs(qd), 95)) if len(qd) else 0.0
    if speed <= 0:
        return 0.0
    return float(min(MAX_K, 2 * np.pi * 0.4 * (rate_hz / 2) / speed))


def _lines(q, k):
    phase = np.outer(q, k)
    return np.concatenate([np.sin(phase), np.cos(phase)], axis=1)


def _design(q, s, k):
    """Plain lines (``s is None``) or lines with speed-modulated amplitudes."""
    X = _lines(q, k)
    return X if s is None else np.concatenate([X, X * s[:, None]], axis=1)


class _Spectrum:
    """The line projections ``Σ_t x_t y_t`` and ``Σ_t x_t`` of one joint's samples over the frequency
    grid (``x_t`` the sines and cosines of ``k q_t``), summed per contiguous block of samples: the
    spectrum of any union of blocks, its mean removed, follows without evaluating the lines again
    (one pass over the samples serves every fold and both variants)."""

    def __init__(self, q, y, k_max: float, bounds):
        self.grid = np.arange(10.0, k_max, GRID_STEP)
        g = len(self.grid)
        blocks = np.zeros((len(q), len(bounds) - 1))
        for i, (a, b) in enumerate(itertools.pairwise(bounds)):
            blocks[a:b, i] = 1.0
        weights = np.concatenate([blocks * y[:, None], blocks], axis=1)
        self.xy = np.zeros((len(bounds) - 1, 2 * g))
        self.x = np.zeros((len(bounds) - 1, 2 * g))
        for chunk in range(0, g, 200):
            ks = self.grid[chunk : chunk + 200]
            sums = (_lines(q, ks).T @ weights).T  # (2 blocks, 2 len(ks))
            cols = np.r_[chunk : chunk + len(ks), g + chunk : g + chunk + len(ks)]
            self.xy[:, cols], self.x[:, cols] = sums[: len(blocks.T)], sums[len(blocks.T) :]
        self.y = blocks.T @ y
        self.count = blocks.sum(axis=0)

    def strongest(self, lines: int, use) -> np.ndarray:
        """The ``lines`` strongest frequencies of the blocks ``use`` (a boolean per block)."""
        n = self.count[use].sum()
        mean = self.y[use].sum() / n
        c = (self.xy[use].sum(axis=0) - mean * self.x[use].sum(axis=0)) / n
        g = len(self.grid)
        power = c[:g] ** 2 + c[g:] ** 2
        return np.sort(self.grid[np.argsort(power)[-lines:]])


def _fit_amplitudes(q, s, y, ks, ridge: float):
    """Ridge amplitudes of the lines ``ks`` (plain, or speed-modulated with ``s``) for ``y``."""
    y = y - y.mean()
    X = _design(q, s, ks)
    return np.linalg.solve(X.T @ X + ridge * len(y) * np.eye(X.shape[1]), X.T @ y)


def _fit_both(q, s, y, ks, ridge: float) -> dict[str, np.ndarray]:
    """:func:`_fit_amplitudes` of both variants from one design: the plain lines are the first
    columns of the speed-modulated design, so their normal equations are a block of its own."""
    y = y - y.mean()
    X = _design(q, s, ks)
    gram, rhs, m2 = X.T @ X, X.T @ y, 2 * len(ks)
    reg = ridge * len(y) * np.eye(X.shape[1])
    return {
        "plain": np.linalg.solve(gram[:m2, :m2] + reg[:m2, :m2], rhs[:m2]),
        "speed-modulated": np.linalg.solve(gram + reg, rhs),
    }


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
    K, A, B, C, D = (np.zeros((n, lines)) for _ in range(5))
    scale = np.std(np.abs(qd), axis=0)
    scale = np.where(scale > 1e-9, scale, 1.0)
    joints: dict[int, dict] = {}
    bounds = np.linspace(0, len(q), folds + 1).astype(int)
    for j in range(n):
        k_max = resolvable_k(qd[:, j], rate_hz)
        if k_max < 20:
            joints[j] = {"kept": False, "reason": f"the sample rate resolves up to {k_max:.0f} rad⁻¹ only"}
            continue
        speed = np.abs(qd[:, j]) / scale[j]
        spectrum = _Spectrum(q[:, j], target[:, j], k_max, bounds)
        fold_lines = [spectrum.strongest(lines, np.arange(folds) != i) for i in range(folds)]
        before, after = 0.0, {"plain": 0.0, "speed-modulated": 0.0}
        for (a, b), ks in zip(itertools.pairwise(bounds), fold_lines, strict=True):
            rest = np.r_[0:a, b : len(q)]
            fits = _fit_both(q[rest, j], speed[rest], target[rest, j], ks, ridge)
            y = target[a:b, j] - target[rest, j].mean()
            before += float(np.sum(y**2))
            held = _design(q[a:b, j], speed[a:b], ks)
            for variant, coef in fits.items():
                after[variant] += float(np.sum((y - held[:, : len(coef)] @ coef) ** 2))
        gains = {v: 1.0 - e / before if before > 0 else 0.0 for v, e in after.items()}
        variant = max(gains, key=lambda v: gains[v])
        kept = gains[variant] >= min_gain
        s = None if variant == "plain" else speed
        ks = spectrum.strongest(lines, np.ones(folds, dtype=bool))
        coef = _fit_amplitudes(q[:, j], s, target[:, j], ks, ridge)
        m = len(ks)
        joints[j] = {
            "kept": bool(kept),
            "variant": variant,
            "validation_gain_percent": 100.0 * gains[variant],
            "cross_validated_gain_percent": {v: 100.0 * g for v, g in gains.items()},
            "strongest_k": float(ks[np.argmax(coef[:m] ** 2 + coef[m : 2 * m] ** 2)]),
            "k_max": k_max,
        }
        if kept:
            K[j], A[j], B[j] = ks, coef[:m], coef[m : 2 * m]
            if s is not None:
                C[j], D[j] = coef[2 * m : 3 * m], coef[3 * m :]
    return Ripple(K, A, B, C, D, scale, {"joints": joints, "folds": folds, "lines": lines, "ridge": ridge})
