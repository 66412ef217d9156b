"""Report folder of a training run: loss curves (each loss term, log scale), predicted-vs-measured
plots on the validation trials (q̈_f; Q_e when measured; E when the data hold it) as PNG, and
``metrics.json``. Matplotlib through its object API on the Agg canvas (no display, no pyplot state)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np

LOSS_LABELS = {
    "inv": "inverse ‖Q̂_f−Q_f‖²",
    "fwd": "forward ‖q̈̂_f−q̈_f‖²",
    "inv_e": "inverse servo ‖Q̂_e−Q_e‖²",
    "fwd_e": "forward servo ‖Q̂_e−Q_e‖²",
    "power": "power ‖Ė̂−q̇ᵀQ‖²",
    "power_est": "estimated power ‖q̇_fᵀ(Q̂_f−Q_f)‖²",
}
VAL_LABELS = {
    "qdd_f_nmse": "q̈_f nMSE",
    "qdd_nmse": "q̈ nMSE",
    "Q_e_rel_rms": "Q_e rel. rms",
    "M_rel_err": "M rel. err",
    "V_rel_err": "V rel. err",
    "E_rel_err": "E rel. err",
}


def default_report_dir(out) -> Path:
    """``<out stem>_report/`` next to the model file."""
    out = Path(out)
    return out.with_name(f"{out.stem}_report")


def _figure(rows: int, cols: int, width=11.0, height=2.6, width_ratios=None):
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, max(height * rows, 3.2)), layout="constrained")
    FigureCanvasAgg(fig)
    return fig, fig.subplots(rows, cols, squeeze=False, width_ratios=width_ratios)


def plot_losses(history: dict, path) -> Path:
    """Training loss terms and total per log point; validation metrics beside them (log scales)."""
    fig, ax = _figure(1, 2, height=4.2)
    epochs = np.asarray(history["epoch"])
    a = ax[0, 0]
    a.plot(epochs, history["loss"], color="black", lw=2, label="total")
    for name, values in history["terms"].items():
        a.plot(epochs, values, lw=1.2, label=LOSS_LABELS.get(name, name))
    a.set(
        yscale="log", xlabel="epoch", ylabel="training loss (mean per log interval)", title="training losses"
    )
    b = ax[0, 1]
    vals = history.get("val", [])
    if vals:
        ve = [v["epoch"] for v in vals]
        for key, label in VAL_LABELS.items():
            if key in vals[0]:
                b.plot(ve, [max(v[key], 1e-16) for v in vals], marker="o", ms=3, label=label)
        es = history.get("early_stopping") or {}
        if es.get("best_epoch") and es.get("enabled"):
            b.axvline(es["best_epoch"], color="grey", ls="--", label=f"best (epoch {es['best_epoch']})")
        b.set(yscale="log", xlabel="epoch", ylabel="error on validation trials", title="validation")
        b.legend(fontsize=8)
    else:
        b.text(0.5, 0.5, "no validation", ha="center", va="center", transform=b.transAxes)
    for r in history.get("resumed", []):
        for x in (a, b):
            x.axvline(r["epoch"], color="tab:red", ls=":", lw=1)
    a.legend(fontsize=8)
    for x in (a, b):
        x.grid(True, which="both", alpha=0.3)
    fig.savefig(path, dpi=110)
    return Path(path)


def predictions(model, samples: dict) -> dict:
    """Forward-mode outputs on ``samples`` (model order) as float64 numpy: q̈_f, Q_e, E."""
    import torch

    p = next(model.parameters())
    t = {
        k: torch.as_tensor(np.asarray(samples[k]), device=p.device, dtype=p.dtype)
        for k in ("q", "qd", "qdd", "Q")
    }
    n_f = model.n_f
    with torch.no_grad():
        out = model(t["q"], t["qd"], t["qdd"][:, n_f:], t["Q"][:, :n_f])
    get = lambda x: x.detach().cpu().double().numpy()  # noqa: E731
    return {
        "qdd_f": get(out["qdd"])[:, :n_f],
        "Q_e": get(out["Q_e"]) if model.n_e else None,
        "E": get(out["E"]),
    }


def _trial_groups(samples: dict):
    trial = np.asarray(samples.get("trial", np.zeros(len(samples["q"]), int)))
    ids = np.unique(trial)
    names = list(samples.get("names", []))
    for k, i in enumerate(ids):
        yield (names[k] if len(names) == len(ids) else f"trial {int(i)}"), trial == i


def _nmse(pred, truth) -> float:
    return float(np.mean((pred - truth) ** 2) / max(np.var(truth), 1e-300))


def acceleration_unit(unit: str) -> str:
    return f"{unit}/s²"


def force_unit(unit: str) -> str:
    return "N·m" if unit == "rad" else "N"


def comparison_rows(
    samples: dict, sel, pred: dict, free_joints, servo_joints, units, qe_measured: bool
) -> list:
    """(label, unit, measured, predicted) per quantity the samples hold: q̈ of each free joint; Q_e of
    each servo joint when measured and finite; E when the data hold its truth (mean aligned: V is
    defined up to a constant). Quantities that are NaN in the data are left out."""
    n_f = len(free_joints)
    qdd = np.asarray(samples["qdd"])[sel]
    rows = [
        (f"q̈ {j}", acceleration_unit(units[i]), qdd[:, i], pred["qdd_f"][sel, i])
        for i, j in enumerate(free_joints)
    ]
    Q = np.asarray(samples["Q"])[sel]
    if qe_measured and pred.get("Q_e") is not None:
        rows += [
            (f"Q_e {j}", force_unit(units[n_f + i]), Q[:, n_f + i], pred["Q_e"][sel, i])
            for i, j in enumerate(servo_joints)
            if np.isfinite(Q[:, n_f + i]).all()
        ]
    if "E" in samples and np.isfinite(np.asarray(samples["E"])[sel]).all():
        truth, e = np.asarray(samples["E"])[sel], pred["E"][sel]
        rows.append(("E (mean aligned)", "J", truth, e - e.mean() + truth.mean()))
    return [r for r in rows if np.isfinite(r[2]).all() and np.isfinite(r[3]).all()]


def plot_comparison(name: str, t, rows: list, path, reference: str = "measured") -> dict:
    """Per quantity: time series of ``reference`` and predicted (left), the residual predicted −
    reference in its own panel (middle), predicted against reference (right); units on every axis.
    Returns the nMSE per quantity label."""
    fig, ax = _figure(max(len(rows), 1), 3, width=13.0, width_ratios=[3, 2, 1.3])
    scores = {}
    for r, (label, unit, truth, p) in enumerate(rows):
        score = _nmse(p, truth)
        scores[label] = score
        a, c, b = ax[r, 0], ax[r, 1], ax[r, 2]
        a.plot(t, truth, color="black", lw=1.4, label=reference)
        a.plot(t, p, color="tab:orange", lw=1.0, ls="--", label="predicted")
        a.set(ylabel=f"{label} [{unit}]", title=f"{name}: {label}  (nMSE {score:.2e})")
        a.grid(alpha=0.3)
        c.plot(t, p - truth, color="tab:red", lw=0.8)
        c.axhline(0.0, color="grey", lw=0.8)
        rms = float(np.sqrt(np.mean((p - truth) ** 2)))
        c.set(ylabel=f"residual [{unit}]", title=f"predicted − {reference} (rms {rms:.2e} {unit})")
        c.grid(alpha=0.3)
        lo, hi = float(min(truth.min(), p.min())), float(max(truth.max(), p.max()))
        if hi <= lo:
            lo, hi = lo - 1.0, hi + 1.0
        b.plot([lo, hi], [lo, hi], color="grey", lw=1)
        b.scatter(truth, p, s=3, alpha=0.5, color="tab:blue")
        b.set(xlabel=f"{reference} [{unit}]", ylabel=f"predicted [{unit}]", xlim=(lo, hi), ylim=(lo, hi))
        b.grid(alpha=0.3)
    if rows:
        ax[0, 0].legend(fontsize=8, loc="upper right")
    else:
        ax[0, 0].text(0.5, 0.5, "nothing to compare", ha="center", va="center", transform=ax[0, 0].transAxes)
    for col in (0, 1):
        ax[-1, col].set_xlabel("t [s]")
    fig.savefig(path, dpi=100)
    return scores


def plot_trial(name: str, sel, samples: dict, pred: dict, model, qe_measured: bool, path) -> dict:
    """One validation trial: every quantity the trial holds, predicted against measured."""
    t = np.asarray(samples["t"])[sel] if "t" in samples else np.arange(sel.sum())
    units = list(getattr(model, "coordinate_units", [])) or ["rad"] * model.n
    rows = comparison_rows(samples, sel, pred, model.free_joints, model.servo_joints, units, qe_measured)
    return plot_comparison(name, t, rows, path)


def _safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", name).strip("_") or "trial"


def write_report(
    directory,
    history: dict,
    model=None,
    val_samples: dict | None = None,
    metrics: dict | None = None,
    provenance: dict | None = None,
    qe_measured: bool = True,
    prefix: str = "validation",
    extra: dict | None = None,
) -> dict:
    """Write the report folder; returns {"dir", "files"}. ``model`` should be the exported one (CPU)."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    files = [plot_losses(history, directory / "loss_curves.png").name]
    per_trial = {}
    if model is not None and val_samples is not None and len(val_samples["q"]):
        pred = predictions(model, val_samples)
        for name, sel in _trial_groups(val_samples):
            fname = f"{prefix}_{_safe(name)}.png"
            per_trial[name] = plot_trial(name, sel, val_samples, pred, model, qe_measured, directory / fname)
            files.append(fname)
    doc = {
        "metrics": metrics or {},
        "per_trial_nmse": per_trial,
        "training": {
            "epoch": history["epoch"],
            "loss": history["loss"],
            "terms": history["terms"],
            "validation": history.get("val", []),
            "early_stopping": history.get("early_stopping"),
            "resumed": history.get("resumed", []),
            "run": history.get("run"),
            "seconds": history.get("seconds"),
            "device": history.get("device"),
            "config": history.get("config"),
        },
        "provenance": provenance or {},
        "files": files,
    }
    doc |= extra or {}
    _write_atomically(directory / "metrics.json", json.dumps(doc, indent=2, default=_json_default))
    files.append("metrics.json")
    return {"dir": str(directory), "files": files}


def plot_acceleration(model, samples: dict, names, path) -> Path:
    """Predicted against true q̈ of each coordinate on the test samples (acceleration families)."""
    import torch

    dtype = next(model.parameters()).dtype
    with torch.no_grad():
        pred = (
            model(*(torch.as_tensor(np.asarray(samples[k]), dtype=dtype) for k in ("q", "qd")))
            .double()
            .numpy()
        )
    true = np.asarray(samples["qdd"])
    n = true.shape[1]
    cols = min(n, 4)
    fig, ax = _figure((n + cols - 1) // cols, cols, height=2.8)
    for i, a in enumerate(ax.flat):
        if i >= n:
            a.set_axis_off()
            continue
        lo, hi = float(np.min(true[:, i])), float(np.max(true[:, i]))
        a.plot([lo, hi], [lo, hi], color="grey", lw=1)
        a.scatter(true[:, i], pred[:, i], s=2, alpha=0.4)
        name = names[i] if names and i < len(names) else f"q{i}"
        rms = float(np.sqrt(np.mean((pred[:, i] - true[:, i]) ** 2)))
        score = f"nMSE {_nmse(pred[:, i], true[:, i]):.2e}" if np.var(true[:, i]) > 1e-12 else "constant q̈"
        a.set(xlabel=f"true q̈ {name}", ylabel="predicted", title=f"{name}: {score}, rms err {rms:.2e}")
        a.grid(True, alpha=0.3)
    fig.savefig(path, dpi=110)
    return Path(path)


def write_acceleration_report(
    directory,
    history: dict,
    model,
    test_samples: dict,
    metrics: dict,
    provenance: dict | None = None,
    coordinate_names=None,
) -> dict:
    """Report of an acceleration family (LNN, LNN-nh, TLNN, neural ODE): loss and validation curves,
    predicted against true q̈ on the test trajectories, metrics.json. ``model`` on the CPU."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    files = [plot_losses(history, directory / "loss_curves.png").name]
    if len(test_samples["q"]):
        files.append(
            plot_acceleration(model, test_samples, coordinate_names, directory / "qdd_test.png").name
        )
    return write_metrics(directory, metrics, history, provenance or {}, files)


#: What a family report's metrics.json keeps of the training history.
HISTORY_KEYS = (
    "epoch",
    "loss",
    "terms",
    "skipped",
    "val",
    "early_stopping",
    "resumed",
    "run",
    "seconds",
    "device",
    "config",
)


def write_metrics(
    directory: Path, metrics, history: dict, provenance, files: list, keys=HISTORY_KEYS
) -> dict:
    """``metrics.json`` in ``directory`` (metrics, the history's ``keys``, provenance, the report's
    ``files``), written atomically; returns the report's ``{"dir", "files"}``."""
    doc = {
        "metrics": metrics,
        "training": {k: history.get(k) for k in keys},
        "provenance": provenance,
        "files": files,
    }
    _write_atomically(directory / "metrics.json", json.dumps(doc, indent=2, default=_json_default))
    files.append("metrics.json")
    return {"dir": str(directory), "files": files}


def _json_default(x):
    if isinstance(x, (np.floating, np.integer)):
        return x.item()
    if isinstance(x, np.ndarray):
        return x.tolist()
    return str(x)


def _write_atomically(path: Path, text: str) -> None:
    """``path`` replaced in one step (:func:`ros_lnn.files.write_atomically`: a unique temporary file
    beside it, so two runs writing one report folder never share one)."""
    from ..files import write_atomically

    write_atomically(path, text.encode())
