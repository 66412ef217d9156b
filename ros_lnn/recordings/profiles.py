"""Servo motion profiles of recorded experiments: step (constant speed after a short ramp), impulse
(short velocity pulses), chirp, and a smooth random multisine.

Each profile is ``t -> (q_e, q̇_e, q̈_e)`` with exact derivatives, for a scalar or an array ``t``
(output shaped like ``t``); it starts at rest (``q̇_e = q̈_e = 0`` at ``t = 0``) and is C² in
``q_e``, so an accurate integrator sees no kinks. Profiles drive one servo coordinate.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

import numpy as np


def smootherstep(x):
    """``s(x) = 6x⁵ − 15x⁴ + 10x³`` on [0, 1] (0 before, 1 after), its derivative and second derivative."""
    x = np.clip(x, 0.0, 1.0)
    s = x**3 * (10.0 - 15.0 * x + 6.0 * x**2)
    ds = 30.0 * x**2 * (1.0 - x) ** 2
    dds = 60.0 * x * (1.0 - x) * (1.0 - 2.0 * x)
    return s, ds, dds


def smootherstep_integral(x):
    """``∫₀ˣ s``: ``x⁶ − 3x⁵ + 2.5x⁴`` on [0, 1], 0 before, ``½ + (x − 1)`` after."""
    x = np.asarray(x, dtype=float)
    xc = np.clip(x, 0.0, 1.0)
    inside = xc**4 * (xc**2 - 3.0 * xc + 2.5)
    return np.where(x > 1.0, 0.5 + (x - 1.0), inside)


def _shortest_period(*frequencies_hz) -> float:
    highest = max(frequencies_hz, default=0.0)
    return 1.0 / highest if highest > 0 else float("inf")


class Profile:
    """Base: subclasses implement ``evaluate(t) -> (q, q̇, q̈)`` for an array ``t``."""

    kind = "profile"

    def __call__(self, t):
        t_arr = np.asarray(t, dtype=float)
        q, qd, qdd = self.evaluate(np.atleast_1d(t_arr))
        return q.reshape(t_arr.shape), qd.reshape(t_arr.shape), qdd.reshape(t_arr.shape)

    def evaluate(self, t):  # pragma: no cover - abstract
        raise NotImplementedError

    @property
    def feature_s(self) -> float:
        """The duration of its fastest feature (a ramp, a pulse, the shortest period); ``inf``: none."""
        return float("inf")

    def describe(self) -> dict:
        values = asdict(self)  # type: ignore[call-overload]
        return {"kind": self.kind, **{k: (list(v) if isinstance(v, tuple) else v) for k, v in values.items()}}


@dataclass(frozen=True)
class StepProfile(Profile):
    """Servo speed stepped to ``speed`` (rad/s or m/s) at ``start_s``, through a smooth ramp of
    ``ramp_s`` (the drive's acceleration limit), then held: a step-response recording."""

    speed: float
    ramp_s: float = 0.3
    start_s: float = 0.2
    offset: float = 0.0
    kind = "step"

    def evaluate(self, t):
        x = (t - self.start_s) / self.ramp_s
        s, ds, _ = smootherstep(x)
        return (
            self.offset + self.speed * self.ramp_s * smootherstep_integral(x),
            self.speed * s,
            self.speed * ds / self.ramp_s,
        )

    @property
    def feature_s(self) -> float:
        return self.ramp_s


@dataclass(frozen=True)
class ImpulseProfile(Profile):
    """Short velocity pulses ``A_k sin²(π (t − t_k)/w)`` of width ``width_s`` starting at ``times_s``
    (peak speeds ``peaks``, one per pulse): the servo jerks and stops; each pulse moves it by ``A_k w/2``."""

    peaks: tuple = (8.0,)
    times_s: tuple = (0.3,)
    width_s: float = 0.15
    offset: float = 0.0
    kind = "impulse"

    def __post_init__(self):
        object.__setattr__(self, "peaks", tuple(float(p) for p in np.atleast_1d(self.peaks)))
        object.__setattr__(self, "times_s", tuple(float(p) for p in np.atleast_1d(self.times_s)))
        if len(self.peaks) != len(self.times_s):
            raise ValueError(f"impulse: {len(self.peaks)} peaks for {len(self.times_s)} pulse times")

    def evaluate(self, t):
        q, qd, qdd = np.full(t.shape, self.offset), np.zeros(t.shape), np.zeros(t.shape)
        w = self.width_s
        for a, t0 in zip(self.peaks, self.times_s):
            x = np.clip((t - t0) / w, 0.0, 1.0)
            q = q + a * w * (x / 2.0 - np.sin(2 * np.pi * x) / (4 * np.pi))
            qd = qd + a * np.sin(np.pi * x) ** 2
            qdd = qdd + a * np.pi / w * np.sin(2 * np.pi * x)
        return q, qd, qdd

    @property
    def feature_s(self) -> float:
        return self.width_s


def _faded(t, fade_s, y, yd, ydd):
    """``e(t)·y`` with a smootherstep fade-in ``e`` over ``fade_s`` (product rule for the derivatives)."""
    e, de, dde = smootherstep(t / fade_s)
    de, dde = de / fade_s, dde / fade_s**2
    return e * y, de * y + e * yd, dde * y + 2 * de * yd + e * ydd


@dataclass(frozen=True)
class ChirpProfile(Profile):
    """``a sin ψ(t)`` with the frequency ``ψ'/2π`` rising linearly from ``f0_hz`` to ``f1_hz`` over
    ``sweep_s`` (held after), faded in over ``fade_s``."""

    amplitude: float
    f0_hz: float = 0.2
    f1_hz: float = 2.0
    sweep_s: float = 5.0
    fade_s: float = 0.5
    offset: float = 0.0
    kind = "chirp"

    def evaluate(self, t):
        k = (self.f1_hz - self.f0_hz) / self.sweep_s
        tc = np.minimum(t, self.sweep_s)
        psi = 2 * np.pi * (self.f0_hz * tc + 0.5 * k * tc**2 + self.f1_hz * (t - tc))
        dpsi = 2 * np.pi * (self.f0_hz + k * tc)
        ddpsi = np.where(t < self.sweep_s, 2 * np.pi * k, 0.0)
        a, s, c = self.amplitude, np.sin(psi), np.cos(psi)
        q, qd, qdd = _faded(t, self.fade_s, a * s, a * c * dpsi, a * (c * ddpsi - s * dpsi**2))
        return self.offset + q, qd, qdd

    @property
    def feature_s(self) -> float:
        return _shortest_period(self.f0_hz, self.f1_hz)


@dataclass(frozen=True)
class MultisineProfile(Profile):
    """``Σ_m a_m sin(2π f_m t + φ_m)``, faded in over ``fade_s``; :meth:`random` draws a seeded one."""

    amplitudes: tuple
    frequencies_hz: tuple
    phases: tuple
    fade_s: float = 0.5
    offset: float = 0.0
    seed: int | None = field(default=None, compare=False)
    kind = "multisine"

    @classmethod
    def random(
        cls,
        seed: int,
        *,
        band_hz=(0.2, 2.0),
        terms: int = 6,
        peak_speed: float = 1.0,
        fade_s: float = 0.5,
        offset: float = 0.0,
    ) -> MultisineProfile:
        """Frequencies spread log-uniformly over ``band_hz``, random phases, amplitudes ∝ 1/f (equal
        speed per term) scaled so the speed's worst-case peak ``Σ a_m 2π f_m`` is ``peak_speed``."""
        rng = np.random.default_rng(seed)
        lo, hi = np.log(band_hz[0]), np.log(band_hz[1])
        edges = np.linspace(lo, hi, terms + 1)
        freqs = np.exp(rng.uniform(edges[:-1], edges[1:]))
        amps = 1.0 / (2 * np.pi * freqs)
        amps *= peak_speed / np.sum(amps * 2 * np.pi * freqs)
        phases = rng.uniform(0.0, 2 * np.pi, terms)
        return cls(tuple(amps), tuple(freqs), tuple(phases), fade_s, offset, seed)

    def evaluate(self, t):
        a, f, p = (
            np.asarray(v, dtype=float)[:, None] for v in (self.amplitudes, self.frequencies_hz, self.phases)
        )
        w = 2 * np.pi * f
        arg = w * t[None, :] + p
        s, c = np.sin(arg), np.cos(arg)
        q, qd, qdd = _faded(t, self.fade_s, (a * s).sum(0), (a * w * c).sum(0), -(a * w**2 * s).sum(0))
        return self.offset + q, qd, qdd

    @property
    def feature_s(self) -> float:
        return _shortest_period(*self.frequencies_hz)


__all__ = ["Profile", "StepProfile", "ImpulseProfile", "ChirpProfile", "MultisineProfile", "smootherstep"]
