"""Torque accuracy of an arm model on recordings, as a robot engineer reads it: per recording and
joint the relative error ``100 · ‖τ − τ̂‖ / ‖τ‖`` (rre, %; ≥ 100 is worse than predicting zero) and the
nMSE ``mean((τ − τ̂)²) / var(τ)`` against the **raw** measured torque, for the model and for the
least-squares fit it carries (the model with its residual off). q̇ and q̈ come from the same zero-phase
filter as in training; τ is not filtered. The model's fast torque runs on the logged velocities."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from .identification import relative_error_percent
from .mapping import ArmMapping
from .model import ArmModel
from .recording import ArmRecording
from .samples import filtered_samples


def torque_metrics(joints, tau, pred) -> dict:
    rre = relative_error_percent(tau, pred)
    var = np.var(tau, axis=0)
    nmse = np.mean((tau - pred) ** 2, axis=0) / np.where(var > 0, var, np.nan)
    return {
        "torque_rre_percent": {j: float(v) for j, v in zip(joints, rre)},
        "torque_rre_mean_percent": float(np.nanmean(rre)),
        "torque_rre_worst_percent": float(np.nanmax(rre)),
        "torque_nmse": {j: float(v) for j, v in zip(joints, nmse)},
    }


def evaluate_arm(
    model: ArmModel, recordings: list[ArmRecording], mapping: ArmMapping, keep_series: bool = False
) -> dict:
    """``{bag name: metrics}`` with the model's figures and, under ``least_squares_fit``, the fit's."""
    out = {}
    for rec in recordings:
        s = filtered_samples([rec], mapping.filter_cutoff_hz, mapping.gap_factor, raw_tau=True)
        pred = model.torque_of(s)
        fit = model.torque_of(s, residual=False)
        entry = torque_metrics(model.joints, s.tau, pred)
        entry["samples"] = len(s)
        entry["rate_hz"] = s.rate_hz
        if model.fast.active:
            entry["fast_torque"] = (
                "applied"
                if model.fast.applies_at(s.rate_hz)
                else f"left out: fitted at {model.fast.rate_hz:.0f} Hz, this log is at {s.rate_hz:.0f} Hz"
            )
        entry["least_squares_fit"] = torque_metrics(model.joints, s.tau, fit)
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
