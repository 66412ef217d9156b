"""Causal derivative estimation from a sampled stream (the estimator's q̈_e filter).

Filter: a causal local-polynomial least-squares fit (a one-sided Savitzky–Golay filter on possibly
irregular time stamps). The last ``window`` samples of a signal are fitted by a polynomial of degree
``degree`` in ``t − t_newest``; the fit's derivatives at the newest sample are the estimates. For
signals that are polynomials of degree ≤ ``degree`` over the window the estimates are exact, with no
lag; otherwise the error is the truncation of the signal's Taylor series over the window length.
Larger windows average more noise (the estimate's noise falls roughly as window^-3/2 for the first
derivative) at the cost of truncation error on fast signals.

The estimator differentiates the measured servo *velocities* once (``degree`` 2, default window 9
samples, i.e. 18 ms at 500 Hz); where a stream carries no velocities it differentiates positions
twice (``degree`` 3).
"""

from __future__ import annotations

from collections import deque

import numpy as np


class CausalPolyDerivative:
    """Derivatives at the newest sample of a local polynomial fit over the last ``window`` samples.

    The samples sit twice in a ring of 2 × ``window`` rows, so the window in time order is always one
    contiguous slice: an update costs two row writes and one small matrix product, and the fit's
    weights are recomputed only when the spacing of the stamps changes (to the nanosecond)."""

    def __init__(self, window: int = 9, degree: int = 2, order: int = 1):
        if degree < order:
            raise ValueError(f"degree {degree} cannot give derivatives up to order {order}")
        if window < degree + 1:
            raise ValueError(f"window {window} must hold at least degree + 1 = {degree + 1} samples")
        self.window, self.degree, self.order = int(window), int(degree), int(order)
        self._orders = np.arange(1, self.order + 1)
        self._factorials = np.cumprod(self._orders, dtype=float)
        self._ring: np.ndarray | None = None
        self.reset()

    def reset(self) -> None:
        self._times: deque = deque(maxlen=self.window)
        self._spacing: tuple = ()  # nanosecond gaps between the held samples, oldest first
        self._key: tuple | None = None  # the spacing self._weights were made for
        self._weights: np.ndarray | None = None
        self._slot, self._held = 0, 0

    @property
    def ready(self) -> bool:
        return self._held >= self.degree + 1

    def update(self, t: float, x) -> np.ndarray | None:
        """Add the sample ``x`` (1-D) at time ``t``; returns derivatives of order 1..``order`` at ``t``
        as an array (order, len(x)), or None while fewer than ``degree + 1`` samples are held.
        A time that does not increase resets the history (a restarted stream)."""
        x = np.asarray(x, dtype=float).ravel()
        ring, w = self._ring, self.window
        if ring is None or ring.shape[1] != x.size:
            ring = self._ring = np.zeros((2 * w, x.size))
            self.reset()
        elif self._held and t <= self._times[-1]:
            self.reset()
        times = self._times
        if self._held:
            gap = round((t - times[-1]) * 1e9)
            self._spacing = (self._spacing + (gap,))[1 - w :]
        times.append(t)
        slot = self._slot
        ring[slot] = x
        ring[slot + w] = x
        self._slot = slot + 1 if slot + 1 < w else 0
        held = self._held = min(self._held + 1, w)
        if held <= self.degree:
            return None
        if self._spacing != self._key:
            self._key = self._spacing
            self._weights = (
                self._slope_weights([ti - t for ti in times])
                if self.degree == 2 and self.order == 1
                else self._derivative_weights(np.asarray(times) - t)
            )
        assert self._weights is not None  # made above for the first spacing held
        return self._weights @ ring[slot + 1 + w - held : slot + 1 + w]

    @staticmethod
    def _slope_weights(tau) -> np.ndarray:
        """:meth:`_derivative_weights` of the quadratic fit's slope in closed form (the estimator's
        default, recomputed at every sample of a stream with jittered stamps): the second row of the
        inverse of the 3×3 normal matrix from the power sums S_k = Σ s^k, by cofactors. ``tau``: the
        held times relative to the newest, oldest first (a sequence of floats); plain float arithmetic
        over the few held samples (a handful of numpy calls on 9 numbers cost several times more)."""
        scale = max(-float(tau[0]), 1e-12)
        inv = 1.0 / scale
        s = [x * inv for x in tau]
        S1 = S2 = S3 = S4 = 0.0
        for v in s:
            v2 = v * v
            S1 += v
            S2 += v2
            S3 += v2 * v
            S4 += v2 * v2
        S0 = float(len(s))
        det = scale * (S0 * (S2 * S4 - S3 * S3) - S1 * (S1 * S4 - S3 * S2) + S2 * (S1 * S3 - S2 * S2))
        c0, c1, c2 = (S3 * S2 - S1 * S4) / det, (S0 * S4 - S2 * S2) / det, (S2 * S1 - S0 * S3) / det
        return np.array([[c0 + c1 * v + c2 * (v * v) for v in s]])

    def _derivative_weights(self, tau: np.ndarray) -> np.ndarray:
        """Rows w_k with w_k · x = d^k/dt^k of the least-squares fit at τ = 0 (cached: a stream at a
        steady rate reuses them). Normal equations on the scaled Vandermonde matrix (columns s^0..s^d
        with s in [-1, 0], well conditioned for the small degrees used here): a stream with jittered
        stamps recomputes them every sample, and one small solve costs a fraction of an SVD."""
        scale = max(-tau[0], 1e-12)  # conditions the Vandermonde matrix
        A = np.vander(tau / scale, self.degree + 1, increasing=True)  # columns s^0..s^d
        At = A.T
        coef = np.linalg.solve(At @ A, At)  # coef = coef @ x
        # d^k/dt^k of Σ c_j (t/scale)^j at t = 0 is k! c_k / scale^k
        return coef[1 : self.order + 1] * (self._factorials / scale**self._orders)[:, None]


class ServoAccelerationEstimator:
    """q̈_e (and, when velocities are missing, q̇_e) of the servo joints from the joint-state stream."""

    def __init__(self, window: int = 9):
        self.from_velocity = CausalPolyDerivative(window=window, degree=2, order=1)
        self.from_position = CausalPolyDerivative(window=max(window, 5), degree=3, order=2)

    def reset(self) -> None:
        self.from_velocity.reset()
        self.from_position.reset()

    def update(self, t: float, q_e, qd_e=None):
        """Returns ``(qd_e, qdd_e)`` estimates (``qd_e`` is the measured one when given), or None
        until the filter holds enough samples."""
        if qd_e is not None:
            self.from_position.reset()
            d = self.from_velocity.update(t, qd_e)
            return None if d is None else (np.asarray(qd_e, dtype=float), d[0])
        self.from_velocity.reset()
        d = self.from_position.update(t, q_e)
        return None if d is None else (d[0], d[1])
