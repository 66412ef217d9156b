"""Built-in servo excitations for the simulator: continuous multi-sine and cosine sweep, each
``t -> (q_e, q̇_e, q̈_e)`` with exact derivatives, defined for all t ≥ 0 (the simulator runs forever)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


@dataclass(frozen=True)
class MultiSine:
    """``q_e = offset + Σ_m a_m sin(2π f_m t + φ_m)`` per servo joint; arrays (n_e, n_terms) broadcast."""

    amplitude: np.ndarray
    frequency_hz: np.ndarray
    phase: np.ndarray | float = 0.0
    offset: np.ndarray | float = 0.0
    _terms: tuple = field(init=False, repr=False, compare=False)  # broadcast arrays, set once

    def __post_init__(self):
        # Broadcast once: the simulator calls this five times per step (RK4 stages and outputs).
        a = np.atleast_2d(np.asarray(self.amplitude, dtype=float))
        w = 2 * np.pi * np.broadcast_to(np.asarray(self.frequency_hz, dtype=float), a.shape)
        p = np.broadcast_to(np.asarray(self.phase, dtype=float), a.shape)
        off = np.broadcast_to(np.asarray(self.offset, dtype=float), a.shape[:1])
        object.__setattr__(self, "_terms", (a, w, p, off, a * w, a * w * w))

    def __call__(self, t: float):
        a, w, p, off, aw, aww = self._terms
        arg = w * t + p
        s, c = np.sin(arg), np.cos(arg)
        return off + (a * s).sum(-1), (aw * c).sum(-1), -(aww * s).sum(-1)


@dataclass(frozen=True)
class CosineSweep:
    """``q_e = offset + a (1 − cos φ(t))`` whose instantaneous frequency ``φ'/2π`` swings smoothly
    between ``f_low`` and ``f_high`` and back every ``period_s`` (a sinusoidally modulated sweep, so
    the signal and all its derivatives stay continuous forever). Starts at rest: q_e(0) = offset."""

    amplitude: np.ndarray
    f_low: float = 0.1
    f_high: float = 1.0
    period_s: float = 20.0
    offset: np.ndarray | float = 0.0

    def __call__(self, t: float):
        a = np.asarray(self.amplitude, dtype=float).ravel()
        fm, fa, w_sweep = (
            0.5 * (self.f_low + self.f_high),
            0.5 * (self.f_high - self.f_low),
            2 * np.pi / self.period_s,
        )
        # f(t) = fm − fa cos(w_sweep t) starts at f_low; φ = 2π ∫ f.
        phi = 2 * np.pi * (fm * t - fa * np.sin(w_sweep * t) / w_sweep)
        dphi = 2 * np.pi * (fm - fa * np.cos(w_sweep * t))
        ddphi = 2 * np.pi * fa * w_sweep * np.sin(w_sweep * t)
        off = np.broadcast_to(np.asarray(self.offset, dtype=float), a.shape)
        s, c = np.sin(phi), np.cos(phi)
        q = off + a * (1 - c)
        qd = a * s * dphi
        qdd = a * (c * dphi**2 + s * ddphi)
        return q, qd, qdd


def make_excitation(
    kind: str, n_e: int, amplitude, frequencies_hz, f_low: float, f_high: float, period_s: float, offset=0.0
):
    """Excitation by name: "multisine" (``amplitude`` per term, shared by every servo joint with a
    phase shift per joint), "sweep", or "hold" (rest at ``offset``)."""
    offset = np.broadcast_to(np.asarray(offset, dtype=float), (n_e,)).copy()
    if kind == "hold":
        zeros = np.zeros(n_e)
        return lambda t: (offset.copy(), zeros.copy(), zeros.copy())
    amplitude = np.asarray(amplitude, dtype=float).ravel()
    if kind == "multisine":
        freqs = np.asarray(frequencies_hz, dtype=float).ravel()
        if amplitude.size not in (1, freqs.size):
            raise ValueError(f"multisine: {amplitude.size} amplitudes for {freqs.size} frequencies")
        a = np.broadcast_to(amplitude, freqs.shape)
        phase = np.arange(n_e)[:, None] * (np.pi / 2) + np.arange(freqs.size)[None, :] * 1.3
        return MultiSine(np.tile(a, (n_e, 1)), np.tile(freqs, (n_e, 1)), phase, offset)
    if kind == "sweep":
        return CosineSweep(np.broadcast_to(amplitude[:1], (n_e,)).copy(), f_low, f_high, period_s, offset)
    raise ValueError(f"unknown excitation '{kind}' (use multisine, sweep or hold)")
