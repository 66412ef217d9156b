"""Time-base repair of recorded streams: ordering, duplicates, gaps, jitter, resampling, and
Savitzky–Golay derivatives. Each function returns what it did, for the dataset summary."""

from __future__ import annotations

import itertools

import numpy as np
from scipy.interpolate import CubicSpline
from scipy.signal import savgol_filter

from ..errors import DataError


def order_and_dedupe(stamp_ns: np.ndarray):
    """Indices that put messages in stamp order with duplicated stamps dropped (first received kept),
    and the counts ``out_of_order`` (a stamp earlier than one received before it) and ``duplicates``."""
    stamp_ns = np.asarray(stamp_ns, dtype=np.int64)
    running = np.maximum.accumulate(stamp_ns) if len(stamp_ns) else stamp_ns
    out_of_order = int(np.count_nonzero(stamp_ns[1:] < running[:-1])) if len(stamp_ns) else 0
    order = np.argsort(stamp_ns, kind="stable")
    keep = np.ones(len(order), dtype=bool)
    keep[1:] = np.diff(stamp_ns[order]) != 0
    return order[keep], {"out_of_order": out_of_order, "duplicates": int(np.count_nonzero(~keep))}


def split_at_gaps(t: np.ndarray, gap_factor: float):
    """``[(start, stop), ...]`` index ranges separated where a step exceeds ``gap_factor`` × the
    median step; and the gap lengths in seconds."""
    if len(t) < 2:
        return [(0, len(t))], []
    dt = np.diff(t)
    cut = np.flatnonzero(dt > gap_factor * np.median(dt)) + 1
    bounds = np.concatenate([[0], cut, [len(t)]])
    return [(int(a), int(b)) for a, b in itertools.pairwise(bounds)], [float(dt[c - 1]) for c in cut]


def jitter(t: np.ndarray) -> tuple[float, float]:
    """Relative spread of the sample steps: (std(Δt), max |Δt − median|) / median(Δt). The second
    one decides resampling: a single missing sample already breaks a Savitzky–Golay grid."""
    dt = np.diff(t)
    if len(dt) < 2:
        return 0.0, 0.0
    med = np.median(dt)
    return float(np.std(dt) / med), float(np.max(np.abs(dt - med)) / med)


def uniform_grid(t: np.ndarray, rate_hz: float | None = None) -> np.ndarray:
    step = 1.0 / rate_hz if rate_hz else float(np.median(np.diff(t)))
    return t[0] + step * np.arange(int(np.floor((t[-1] - t[0]) / step + 1e-9)) + 1)


def resample(t: np.ndarray, y: np.ndarray, grid: np.ndarray, smooth: bool) -> np.ndarray:
    """Columns of ``y`` (N, k) at ``grid``: a cubic spline for smooth signals (positions,
    velocities), linear otherwise. NaN samples are left out of the fit; a grid point whose nearest
    source sample was NaN stays NaN (masked, not invented)."""
    out = np.full((len(grid), y.shape[1]), np.nan)
    nearest = np.clip(np.searchsorted(t, grid), 1, len(t) - 1)
    nearest -= (grid - t[nearest - 1]) < (t[nearest] - grid)
    for j in range(y.shape[1]):
        ok = np.isfinite(y[:, j])
        if ok.sum() < 4:
            continue
        if smooth:
            col = CubicSpline(t[ok], y[ok, j])(grid)
        else:
            col = np.interp(grid, t[ok], y[ok, j])
        col[~ok[nearest]] = np.nan
        out[:, j] = col
    return out


def savgol_derivative(y: np.ndarray, dt: float, window: int, order: int, deriv: int = 1) -> np.ndarray:
    """``deriv``-th time derivative of uniformly sampled columns by a Savitzky–Golay fit of
    ``order`` over ``window`` samples (edges: polynomial fit of the first/last window)."""
    if window % 2 == 0 or window <= order:
        raise DataError(f"Savitzky–Golay window {window} must be odd and larger than the order {order}")
    if len(y) < window:
        raise DataError(f"{len(y)} samples are fewer than the Savitzky–Golay window {window}")
    return savgol_filter(y, window, order, deriv=deriv, delta=dt, axis=0, mode="interp")


__all__ = ["order_and_dedupe", "split_at_gaps", "jitter", "uniform_grid", "resample", "savgol_derivative"]
