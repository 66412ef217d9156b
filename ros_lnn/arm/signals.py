"""Joint signals from a robot's log: irregular stamps → a uniform grid → zero-phase low-pass → q̈ by
central differences → back at the recorded stamps.

The filter: a 4th-order Butterworth run forwards and backwards (``filtfilt``: zero phase, so q̇, q̈ and
τ stay aligned with q), on a uniform grid at the median sample rate (cubic-spline resampling bridges
jitter and dropped samples). The cutoff defaults to 10 Hz — above the bandwidth of an arm's rigid-body
motion, below its sensor noise — and never more than 0.4 × the Nyquist rate (20 Hz at 100 Hz,
so a 100 Hz log is filtered at 10 Hz too). The same filter is applied to q̇ (before differencing)
and to τ for training; evaluation compares with the raw τ, which is what the robot measures.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import DataError

DEFAULT_CUTOFF_HZ = 10.0
ORDER = 4


def cutoff_for(rate_hz: float, requested: float = 0.0) -> float:
    """The cutoff used for a sample rate: ``requested`` (0 = the default) capped at 0.4 × Nyquist."""
    wanted = requested if requested > 0 else DEFAULT_CUTOFF_HZ
    return float(min(wanted, 0.4 * rate_hz / 2))


@dataclass
class Filtered:
    q: np.ndarray
    qd: np.ndarray
    qdd: np.ndarray
    tau: np.ndarray | None
    rate_hz: float
    cutoff_hz: float


def _lowpass(x: np.ndarray, cutoff: float, rate: float) -> np.ndarray:
    from scipy.signal import butter, filtfilt

    b, a = butter(ORDER, cutoff / (rate / 2))
    return filtfilt(b, a, x, axis=0, padlen=min(len(x) - 1, 3 * max(len(a), len(b)) * 10))


def filter_joint_signals(t, q, qd=None, tau=None, cutoff_hz: float = 0.0) -> Filtered:
    """Filtered q, q̇, q̈ (and τ) at the stamps ``t`` (s, increasing). Without ``qd`` the velocity
    comes from the filtered positions."""
    from scipy.interpolate import CubicSpline

    t = np.asarray(t, dtype=float)
    if len(t) < 32:
        raise DataError(f"{len(t)} samples: too few to filter and differentiate (32 at least)")
    steps = np.diff(t)
    if np.any(steps <= 0):
        raise DataError("stamps must increase strictly (order and de-duplicate the samples first)")
    rate = 1.0 / float(np.median(steps))
    cutoff = cutoff_for(rate, cutoff_hz)
    grid = np.arange(t[0], t[-1], 1.0 / rate)
    if len(grid) < 32:
        raise DataError("the recording is too short to filter")

    def smooth(x):
        return _lowpass(CubicSpline(t, np.asarray(x, dtype=float))(grid), cutoff, rate)

    q_g = smooth(q)
    qd_g = smooth(qd) if qd is not None else np.gradient(q_g, grid, axis=0)
    qdd_g = np.gradient(qd_g, grid, axis=0)

    def back(x):
        return CubicSpline(grid, x)(np.clip(t, grid[0], grid[-1]))

    return Filtered(
        q=back(q_g),
        qd=back(qd_g),
        qdd=back(qdd_g),
        tau=None if tau is None else back(smooth(tau)),
        rate_hz=rate,
        cutoff_hz=cutoff,
    )
