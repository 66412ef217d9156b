"""The fast part of a measured joint torque, predicted from the measured velocity's recent history.

The rest of the arm model sees q̇ and q̈ through the zero-phase 10 Hz filter (:mod:`ros_lnn.arm.signals`):
what the torque does above that band is, for it, noise. Part of it is not noise. A torque sensor
between drive and link (a Panda's, an iiwa's) also sees the drive's own fast dynamics — the joint's
elasticity, the rotor's inertia, the current loop — and those follow the joint's motion in the same
band: on the real Panda recording the torque above 10 Hz is coherent with the measured velocity
(mean magnitude-squared coherence over 10–100 Hz 0.35–0.44 on the shoulder and elbow joints, 0.11 on
the last wrist joint; ``ros-lnn bench realarm`` prints it per joint). Differencing q̇ and
multiplying by M(q) does not capture it (a wider filter makes the least-squares fit worse; the
inertia-weighted form scored worse on held-out data than the per-joint filter): the drive is a
dynamic system of its own, with its own phase.

Per joint a causal FIR filter of the steps of the measured velocity::

    τ_fast,j(t_k) = Σ_{i=0..H} h_{j,i} · (q̇_j(t_{k−i}) − q̇_j(t_{k−i−1}))

with ``Σ_i h_{j,i} = 0``: neither a constant velocity nor a constant acceleration gives fast torque
(its gain grows as f² at low frequency), so it cannot take over what friction and the rigid body
explain — the slow motion's inertia stays the rigid body's. Causal (usable online); taps per sample
at the recording's rate (the model keeps that rate; at another rate the term is left out). The taps
come from ridge least squares on what the rest of the model leaves of the raw training torque, and a
joint keeps them only where they lower the validation error by at least ``MIN_GAIN``. A log with gaps
restarts the filter at each piece (no history before a piece's first sample).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..errors import ModelError

HISTORY = 40  # samples of velocity steps (40 ms at 1 kHz)
RIDGE = 1e-3  # relative to the mean diagonal of the normal equations
MIN_GAIN = 0.01  # kept where the validation error falls by at least 1 %
RATE_TOLERANCE = 0.1  # the taps apply to streams within ±10 % of the fitted sample rate
MOMENTS = 1  # blind to a constant acceleration (a second moment, to constant jerk, cost the Panda 3 %)
_CHUNK = 100_000


@dataclass
class FastTorque:
    taps: np.ndarray  # (n, H + 1); a joint whose term is off has zeros
    rate_hz: float  # the sample rate the taps were fitted at (0: no term)
    report: dict = field(default_factory=dict)

    @classmethod
    def none(cls, n: int) -> FastTorque:
        return cls(np.zeros((n, 1)), 0.0, {"joints": {}})

    @property
    def active(self) -> bool:
        return self.rate_hz > 0 and bool(np.any(self.taps))

    def applies_at(self, rate_hz: float) -> bool:
        return self.active and abs(rate_hz / self.rate_hz - 1.0) <= RATE_TOLERANCE

    def torque(self, qd_measured, starts=(0,), rate_hz: float | None = None) -> np.ndarray:
        """τ_fast (N, n) along a measured velocity stream (N, n) whose pieces begin at ``starts``;
        zeros when the term is off or ``rate_hz`` is not the fitted rate."""
        from scipy.signal import lfilter

        qd = np.atleast_2d(np.asarray(qd_measured, dtype=float))
        out = np.zeros_like(qd)
        if not self.active or (rate_hz is not None and not self.applies_at(rate_hz)):
            return out
        for a, b in _pieces(starts, len(qd)):
            steps = velocity_steps(qd[a:b])
            for j in np.flatnonzero(np.any(self.taps, axis=1)):
                out[a:b, j] = lfilter(self.taps[j], [1.0], steps[:, j])
        return out

    def to_metadata(self) -> dict:
        return {"taps": self.taps.tolist(), "rate_hz": float(self.rate_hz), "history": self.taps.shape[1] - 1}

    @classmethod
    def from_metadata(cls, meta: dict | None, n: int) -> FastTorque:
        if not meta:
            return cls.none(n)
        try:
            taps = np.asarray(meta["taps"], dtype=float).reshape(n, -1)
            rate = float(meta["rate_hz"])
        except (KeyError, TypeError, ValueError) as exc:
            raise ModelError(f"the arm metadata's fast_torque is unreadable ({exc})") from None
        if not (np.all(np.isfinite(taps)) and np.isfinite(rate) and rate >= 0):
            raise ModelError("the arm metadata's fast_torque holds non-finite taps or a negative rate")
        return cls(taps, rate)


def velocity_steps(qd: np.ndarray) -> np.ndarray:
    """Backward differences of one piece's velocities; the first sample's step is 0."""
    return np.diff(qd, axis=0, prepend=qd[:1])


def _pieces(starts, length: int):
    bounds = sorted({int(s) for s in starts if 0 <= int(s) < length} | {0})
    return list(zip(bounds, bounds[1:] + [length]))


def _steps_by_piece(qd, starts):
    """The velocity steps of every piece (each piece's first step 0) and, per sample, where its piece
    starts."""
    N = len(qd)
    pieces = _pieces(starts, N)
    steps = np.concatenate([velocity_steps(qd[a:b]) for a, b in pieces])
    piece_start = np.concatenate([np.full(b - a, a, dtype=np.int64) for a, b in pieces])
    return steps, piece_start


def _lagged_steps(steps, piece_start, history: int, rows: slice) -> np.ndarray:
    """(rows, n, history + 1): the velocity steps ``i`` samples back, 0 before the sample's piece."""
    t = np.arange(rows.start, rows.stop)
    idx = t[:, None] - np.arange(history + 1)[None, :]
    inside = idx >= piece_start[t][:, None]
    return np.where(inside[:, None, :], steps[np.maximum(idx, 0)].transpose(0, 2, 1), 0.0)


def _blind_to_slow_motion(history: int, moments: int) -> np.ndarray:
    """A basis of the taps with ``Σ_i i^m h_i = 0`` for ``m < moments``: no response to a constant
    acceleration (m = 0) or to a constant jerk (m = 1)."""
    if moments == 0:
        return np.eye(history + 1)
    i = np.arange(history + 1, dtype=float) / history
    C = np.stack([i**m for m in range(moments)])
    _, _, vt = np.linalg.svd(C)
    return vt[moments:].T


def _normal_equations(qd, starts, y, history: int):
    n = y.shape[1]
    G = np.zeros((n, history + 1, history + 1))
    c = np.zeros((n, history + 1))
    steps, piece_start = _steps_by_piece(qd, starts)
    for a in range(0, len(y), _CHUNK):
        X = _lagged_steps(steps, piece_start, history, slice(a, min(a + _CHUNK, len(y))))
        G += np.einsum("tjk,tjl->jkl", X, X)
        c += np.einsum("tjk,tj->jk", X, y[a : a + _CHUNK])
    return G, c


def fit_fast_torque(
    qd_train,
    starts_train,
    remainder_train,
    qd_val,
    starts_val,
    remainder_val,
    rate_hz: float,
    history: int = HISTORY,
    ridge: float = RIDGE,
    min_gain: float = MIN_GAIN,
) -> FastTorque:
    """Taps per joint fitted to ``remainder_train`` (raw torque minus the rest of the model, (N, n)),
    each joint kept only where it lowers the error of ``remainder_val`` by ``min_gain`` or more."""
    y = np.asarray(remainder_train, dtype=float)
    n = y.shape[1]
    G, c = _normal_equations(np.asarray(qd_train, dtype=float), starts_train, y, history)
    taps = np.zeros((n, history + 1))
    B = _blind_to_slow_motion(history, MOMENTS)
    for j in range(n):
        Gb, cb = B.T @ G[j] @ B, B.T @ c[j]
        scale = float(np.trace(Gb)) / len(Gb)
        if scale > 0:
            taps[j] = B @ np.linalg.solve(Gb + ridge * scale * np.eye(len(Gb)), cb)
    candidate = FastTorque(taps, float(rate_hz))
    r_val = np.asarray(remainder_val, dtype=float)
    pred = candidate.torque(qd_val, starts_val)
    before = np.linalg.norm(r_val, axis=0)
    after = np.linalg.norm(r_val - pred, axis=0)
    joints = {}
    for j in range(n):
        gain = 1.0 - after[j] / before[j] if before[j] > 0 else 0.0
        kept = bool(gain >= min_gain)
        if not kept:
            taps[j] = 0.0
        joints[j] = {"kept": kept, "validation_gain_percent": 100.0 * gain}
    return FastTorque(taps, float(rate_hz) if np.any(taps) else 0.0, {"joints": joints, "history": history})
