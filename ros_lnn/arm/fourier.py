"""Fourier-series joint trajectories (the identification literature's exciting trajectories, Swevers
et al. 1997): per joint

    q_j(t) = c_j + s_j Σ_k [a_jk / (k ω) sin(k ω t) − b_jk / (k ω) cos(k ω t)] + o_j

with ``ω = 2π / period``. Here ``k = 1 … H``; the first harmonic's coefficients follow from the
others so that q̇(0) = q̈(0) = 0 (the series starts and ends each period at rest), and ``o_j``
removes the cosine terms' value at t = 0 so that ``q_j(0) = c_j``. ``s_j`` scales joint ``j``'s
oscillation into its limits (:func:`fit_to_limits`): position range, speed and acceleration are
checked on a dense grid of one period, so the limits hold everywhere, not just at the samples.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import ConfigError

DEFAULT_ACCELERATION = 3.0  # rad/s² per rad/s of velocity limit, where the limits give none (URDFs don't)


@dataclass
class Limits:
    """Per joint: position range, |q̇| and |q̈| bounds (rad, rad/s, rad/s² or m, m/s, m/s²)."""

    lower: np.ndarray
    upper: np.ndarray
    velocity: np.ndarray
    acceleration: np.ndarray

    def __post_init__(self):
        for name in ("lower", "upper", "velocity", "acceleration"):
            setattr(self, name, np.asarray(getattr(self, name), dtype=float))
        n = len(self.lower)
        if not all(len(getattr(self, k)) == n for k in ("upper", "velocity", "acceleration")):
            raise ConfigError("limits: one value per joint for lower, upper, velocity and acceleration")
        bad = ~(np.isfinite(self.lower) & np.isfinite(self.upper) & (self.upper > self.lower))
        if bad.any():
            raise ConfigError(
                f"limits: joint(s) {np.flatnonzero(bad).tolist()} have no finite position range lower < upper"
            )
        for name in ("velocity", "acceleration"):
            v = getattr(self, name)
            if not (np.all(np.isfinite(v)) and np.all(v > 0)):
                raise ConfigError(f"limits: {name} must be finite and positive for every joint")

    @property
    def n(self) -> int:
        return len(self.lower)


@dataclass
class FourierTrajectory:
    """One period of a Fourier-series trajectory; :meth:`evaluate` repeats it periodically."""

    period: float
    center: np.ndarray  # (n,) q(0)
    a: np.ndarray  # (n, H) sine coefficients (velocity amplitudes), a[:, 0] derived
    b: np.ndarray  # (n, H) cosine coefficients, b[:, 0] derived
    scale: np.ndarray  # (n,)

    @property
    def n(self) -> int:
        return len(self.center)

    @property
    def harmonics(self) -> int:
        return self.a.shape[1]

    @property
    def omega(self) -> float:
        return 2 * np.pi / self.period

    @classmethod
    def from_free(cls, period: float, center, a_free, b_free, scale=None) -> FourierTrajectory:
        """``a_free``, ``b_free`` (n, H − 1): harmonics 2 … H; harmonic 1 makes q̇(0) = q̈(0) = 0."""
        a_free, b_free = np.atleast_2d(a_free), np.atleast_2d(b_free)
        k = np.arange(2, a_free.shape[1] + 2)
        a1 = -a_free.sum(axis=1, keepdims=True)  # q̇(0) = Σ a_k = 0
        b1 = -(b_free * k).sum(axis=1, keepdims=True)  # q̈(0) = ω Σ k b_k = 0
        n = len(center)
        return cls(
            float(period),
            np.asarray(center, dtype=float),
            np.hstack([a1, a_free]),
            np.hstack([b1, b_free]),
            np.ones(n) if scale is None else np.asarray(scale, dtype=float),
        )

    def evaluate(self, t) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """q, q̇, q̈ (N, n) at times ``t`` (s)."""
        t = np.atleast_1d(np.asarray(t, dtype=float))
        w = self.omega
        k = np.arange(1, self.harmonics + 1)
        phase = np.outer(t, k) * w  # (N, H)
        s, c = np.sin(phase), np.cos(phase)
        a = self.a * self.scale[:, None]
        b = self.b * self.scale[:, None]
        kw = k * w
        offset = (b / kw).sum(axis=1)  # removes −Σ b/(kω) cos(0)
        q = self.center + offset + s @ (a / kw).T - c @ (b / kw).T
        qd = c @ a.T + s @ b.T
        qdd = -(s * kw) @ a.T + (c * kw) @ b.T
        return q, qd, qdd

    def peaks(self, points: int = 2000) -> dict:
        """Min/max q and max |q̇|, |q̈| per joint on a dense grid of one period."""
        q, qd, qdd = self.evaluate(np.linspace(0.0, self.period, points))
        return {
            "q_min": q.min(0),
            "q_max": q.max(0),
            "qd_max": np.abs(qd).max(0),
            "qdd_max": np.abs(qdd).max(0),
        }

    def fit_to_limits(self, limits: Limits, points: int = 2000, safety: float = 0.998) -> FourierTrajectory:
        """A copy whose per-joint scale puts the oscillation as large as the limits allow around
        ``center`` (which must lie inside the position range). The peaks are found on a grid of
        ``points`` per period; ``safety`` covers a peak between grid points (a sinusoid's is missed
        by at most (π H / points)² / 2 of its amplitude: 3·10⁻⁵ for 5 harmonics on 2000 points).
        :meth:`within` checks the result on a finer grid."""
        unit = FourierTrajectory(self.period, self.center, self.a, self.b, np.ones(self.n))
        q, qd, qdd = unit.evaluate(np.linspace(0.0, self.period, points))
        dev = q - self.center
        tiny = 1e-12
        up = (limits.upper - self.center) / np.maximum(dev.max(0), tiny)
        down = (self.center - limits.lower) / np.maximum(-dev.min(0), tiny)
        vel = limits.velocity / np.maximum(np.abs(qd).max(0), tiny)
        acc = limits.acceleration / np.maximum(np.abs(qdd).max(0), tiny)
        scale = safety * np.clip(np.minimum.reduce([up, down, vel, acc]), 0.0, None)
        return FourierTrajectory(self.period, self.center, self.a, self.b, scale)

    def within(self, limits: Limits, points: int = 4000, rtol: float = 1e-6) -> bool:
        p = self.peaks(points)
        slack = rtol * (limits.upper - limits.lower)
        return bool(
            np.all(p["q_min"] >= limits.lower - slack)
            and np.all(p["q_max"] <= limits.upper + slack)
            and np.all(p["qd_max"] <= limits.velocity * (1 + rtol))
            and np.all(p["qdd_max"] <= limits.acceleration * (1 + rtol))
        )

    def as_dict(self) -> dict:
        return {
            "period_s": self.period,
            "harmonics": self.harmonics,
            "center": self.center.tolist(),
            "a": (self.a * self.scale[:, None]).tolist(),
            "b": (self.b * self.scale[:, None]).tolist(),
        }

    @classmethod
    def from_dict(cls, d: dict) -> FourierTrajectory:
        a, b = np.asarray(d["a"], dtype=float), np.asarray(d["b"], dtype=float)
        return cls(float(d["period_s"]), np.asarray(d["center"], dtype=float), a, b, np.ones(len(a)))


def random_multisine(
    limits: Limits, period: float, harmonics: int = 5, seed: int = 0, margin: float = 0.1
) -> FourierTrajectory:
    """A random Fourier series (normal coefficients, centre at the middle of the range) scaled into
    ``limits``; ``margin``: the fraction of each joint's range kept free at both ends."""
    rng = np.random.default_rng(seed)
    inner = shrink(limits, margin)
    center = 0.5 * (inner.lower + inner.upper)
    traj = FourierTrajectory.from_free(
        period, center, rng.normal(size=(limits.n, harmonics - 1)), rng.normal(size=(limits.n, harmonics - 1))
    )
    return traj.fit_to_limits(inner)


def shrink(limits: Limits, margin: float) -> Limits:
    """The position range narrowed by ``margin`` × its width at each end."""
    width = limits.upper - limits.lower
    return Limits(
        limits.lower + margin * width, limits.upper - margin * width, limits.velocity, limits.acceleration
    )
