"""Torque accuracy of an arm model on recordings, as a robot engineer reads it: per recording and
joint the relative error ``100 · ‖τ − τ̂‖ / ‖τ‖`` (rre, %; ≥ 100 is worse than predicting zero) and the
nMSE ``mean((τ − τ̂)²) / var(τ)`` against the **raw** measured torque, for the model and for the
least-squares fit it carries (the model with its residual off). q̇ and q̈ come from the same zero-phase
filter as in training; τ is not filtered. The model's fast torque runs on the logged velocities."""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np

from .identification import relative_error_percent
from .mapping import ArmMapping
from .model import ArmModel
from .recording import ArmRecording
from .samples import filtered_samples

#: |q̇| below this (rad/s or m/s) is standing
STILL_VELOCITY = 0.02
#: a moving sample within this time (s) of a change of q̇'s sign is near a reversal
REVERSAL_WINDOW_S = 0.1
PHASES = ("moving", "standing", "reversing")
#: a phase with fewer samples of a joint has no figure for that joint
MIN_PHASE_SAMPLES = 20


def motion_phases(
    t, qd, starts=(0,), still: float = STILL_VELOCITY, window: float = REVERSAL_WINDOW_S
) -> dict:
    """Per sample and joint (N, n masks) what the joint does: ``standing`` (``|q̇| < still``),
    ``reversing`` (not standing, within ``window`` s of a change of q̇'s sign) and ``moving`` (the
    rest). ``qd``: the filtered velocities; ``t`` (s): each piece's stamps, the pieces beginning at
    ``starts``."""
    t = np.asarray(t, dtype=float)
    qd = np.atleast_2d(np.asarray(qd, dtype=float))
    standing = np.abs(qd) < still
    reversing = np.zeros_like(standing)
    bounds = sorted({int(x) for x in starts} | {0}) + [len(t)]
    for a, b in itertools.pairwise(bounds):
        for j in range(qd.shape[1]):
            v, tt = qd[a:b, j], t[a:b]
            flips = np.flatnonzero(np.sign(v[1:]) * np.sign(v[:-1]) < 0) + 1
            if len(flips):
                # where q̇ crosses zero, between the two samples of opposite sign
                times = tt[flips - 1] + (tt[flips] - tt[flips - 1]) * v[flips - 1] / (v[flips - 1] - v[flips])
                at = np.clip(np.searchsorted(times, t[a:b]), 1, len(times)) - 1
                nearest = np.minimum(
                    np.abs(t[a:b] - times[at]), np.abs(times[np.minimum(at + 1, len(times) - 1)] - t[a:b])
                )
                reversing[a:b, j] = nearest <= window
    reversing &= ~standing
    return {"moving": ~standing & ~reversing, "standing": standing, "reversing": reversing}


def phase_rre(tau, pred, phases: dict) -> dict:
    """Per phase the torque rre per joint (%, NaN where the joint has fewer than
    ``MIN_PHASE_SAMPLES`` samples in it) and the phase's share of the samples."""
    tau, pred = np.asarray(tau, dtype=float), np.asarray(pred, dtype=float)
    out = {}
    for name in PHASES:
        mask = phases[name]
        err = np.linalg.norm(np.where(mask, tau - pred, 0.0), axis=0)
        ref = np.linalg.norm(np.where(mask, tau, 0.0), axis=0)
        ok = (mask.sum(axis=0) >= MIN_PHASE_SAMPLES) & (ref > 0)
        rre = np.where(ok, 100.0 * err / np.where(ref > 0, ref, 1.0), np.nan)
        out[name] = {"rre": rre, "share": mask.mean(axis=0)}
    return out


def torque_metrics(joints, tau, pred, phases: dict | None = None) -> dict:
    rre = relative_error_percent(tau, pred)
    var = np.var(tau, axis=0)
    nmse = np.mean((tau - pred) ** 2, axis=0) / np.where(var > 0, var, np.nan)
    out = {
        "torque_rre_percent": {j: float(v) for j, v in zip(joints, rre)},
        "torque_rre_mean_percent": float(np.nanmean(rre)),
        "torque_rre_worst_percent": float(np.nanmax(rre)),
        "torque_nmse": {j: float(v) for j, v in zip(joints, nmse)},
    }
    if phases is not None:
        for name, entry in phase_rre(tau, pred, phases).items():
            out[f"torque_rre_{name}_percent"] = {j: _finite(v) for j, v in zip(joints, entry["rre"])}
            out[f"torque_rre_{name}_mean_percent"] = _mean(entry["rre"])
    return out


def _finite(v) -> float | None:
    return float(v) if np.isfinite(v) else None


def _mean(values) -> float | None:
    values = np.asarray(values, dtype=float)
    return float(np.nanmean(values)) if np.isfinite(values).any() else None


def filter_floor(samples) -> np.ndarray:
    """Per joint the rre of the raw torque against its own filtered copy (%): what no model of the
    filtered motion can follow (the torque above the filter's cutoff)."""
    return relative_error_percent(samples.tau_raw, samples.tau_filtered)


def evaluate_arm(
    model: ArmModel, recordings: list[ArmRecording], mapping: ArmMapping, keep_series: bool = False
) -> dict:
    """``{bag name: metrics}`` with the model's figures and, under ``least_squares_fit``, the fit's."""
    out = {}
    for rec in recordings:
        s = filtered_samples([rec], mapping.filter_cutoff_hz, mapping.gap_factor, raw_tau=True)
        pred = model.torque_of(s)
        fit = model.torque_of(s, residual=False)
        phases = motion_phases(s.t, s.qd, s.starts)
        entry = torque_metrics(model.joints, s.tau, pred, phases)
        entry["samples"] = len(s)
        entry["rate_hz"] = s.rate_hz
        entry["phases"] = {
            "still_velocity": STILL_VELOCITY,
            "reversal_window_s": REVERSAL_WINDOW_S,
            "share": {k: {j: float(v) for j, v in zip(model.joints, phases[k].mean(axis=0))} for k in PHASES},
        }
        entry["filter_floor_percent"] = {j: float(v) for j, v in zip(model.joints, filter_floor(s))}
        if model.fast.active:
            entry["fast_torque"] = (
                "applied"
                if model.fast.applies_at(s.rate_hz)
                else f"left out: fitted at {model.fast.rate_hz:.0f} Hz, this log is at {s.rate_hz:.0f} Hz"
            )
        entry["least_squares_fit"] = torque_metrics(model.joints, s.tau, fit, phases)
        if keep_series:
            entry["series"] = {"tau": s.tau, "model": pred, "fit": fit}
        out[rec.name] = entry
    return out


def plot_torque(folder: Path, name: str, series: dict, joints) -> None:
    """``<folder>/<name>_torque.png``: measured, model and least-squares fit torque per joint and the
    model's residual, from the ``series`` of :func:`evaluate_arm` (``keep_series=True``); nothing without
    matplotlib."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return
    folder.mkdir(parents=True, exist_ok=True)
    n = len(joints)
    fig, axes = plt.subplots(n, 2, figsize=(12, 2.0 * n), sharex=True, gridspec_kw={"width_ratios": [3, 1]})
    axes = np.atleast_2d(axes)
    k = np.arange(len(series["tau"]))
    for j, joint in enumerate(joints):
        ax, res = axes[j]
        ax.plot(k, series["tau"][:, j], lw=0.5, color="0.6", label="measured")
        ax.plot(k, series["model"][:, j], lw=0.8, label="model")
        ax.plot(k, series["fit"][:, j], lw=0.8, ls="--", label="least-squares fit")
        ax.set_ylabel(f"{joint}\nN·m")
        res.plot(k, series["tau"][:, j] - series["model"][:, j], lw=0.5)
        res.set_ylabel("residual")
    axes[0, 0].legend(loc="upper right", fontsize=7)
    axes[-1, 0].set_xlabel("sample")
    fig.tight_layout()
    safe = "".join(c if c.isalnum() or c in "._-" else "_" for c in name)
    fig.savefig(folder / f"{safe}_torque.png", dpi=90)
    plt.close(fig)
