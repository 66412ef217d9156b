"""Multi-seed study of the ServoLNN paper's crane training (its Sec. 5.3 and Fig. 8), scaled to a CPU.

The paper trains the crane model "multiple times over while changing only the random seed" and keeps
the runs whose total loss ends below 10⁻² (10 with ``Q_e``, 8 without, at 10 000 epochs); its Fig. 8
is the same evaluation on an *untrained* network (the null hypothesis). The paper's ``l_diag`` goes
through a ReLU; ros_lnn ships softplus after one seed of ReLU stalled. Here every configuration

    diag(L) activation ∈ {softplus, relu}  ×  trained with / without the measured ``Q_e``

is trained through :func:`ros_lnn.training.run.run` (the command line's own path: the paper's split,
4 096 training samples of 6 trials, network 2×64×[1,1,2], Adam lr 10⁻⁴, weight decay 10⁻⁵, batch
2048) for every seed, changing only ``seed`` (network start and batch order; the split stays the
paper's). The untrained baseline is the same network built and normalised from each seed, not trained.

Reported per configuration over the seeds: median, quartiles and range of the test ``q̈_f`` nMSE, the
forward-mode ``Q_e`` error, ``M``/``V``/``E`` errors, the final total loss on the whole training set,
and how many runs meet the paper's criterion (total loss < 10⁻²). The scale (seeds, epochs, training
samples) is a :class:`~ros_lnn_lab.studies.config.StudyConfig` (:data:`DEFAULTS`, :data:`QUICK`); the paper's
schedule is ``DEFAULTS.replace(epochs=10_000)``.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from ros_lnn_lab.studies.config import StudyConfig
from ros_lnn_lab.studies.figures import pyplot, save_figure

#: (diag(L) activation, trained with Q_e); the shipped model is the first.
CONFIGS = (("softplus", True), ("relu", True), ("softplus", False), ("relu", False))
#: The paper's convergence criterion: total training loss below this at the end of training.
CONVERGED_LOSS = 1e-2
METRICS = ("qdd_f_nmse", "Q_e_rel_rms", "M_rel_err", "V_rel_err", "E_rel_err", "final_loss")
#: The study's scale: 10 seeds × 3 000 epochs on the family's 4 096 training samples.
DEFAULTS = StudyConfig(seeds=tuple(range(10)), epochs=3000, samples=None)
#: ``--quick``: 2 seeds × 40 epochs on 512 samples.
QUICK = DEFAULTS.replace(quick=True, seeds=(0, 1), epochs=40, samples=512)


def config_name(diag: str, with_qe: bool) -> str:
    return f"{diag} diag, {'with' if with_qe else 'without'} Q_e"


def full_training_loss(model, train: dict, with_qe: bool) -> tuple[float, dict]:
    """The paper's total loss (sum of its terms for what the data hold) on every training sample."""
    import torch

    from ros_lnn.models.losses import select_losses, total_loss

    names = select_losses(with_qe, model.n_e)
    dtype = next(model.parameters()).dtype
    batch = {k: torch.as_tensor(np.asarray(train[k]), dtype=dtype) for k in ("q", "qd", "qdd", "Q")}
    with torch.no_grad():
        total, terms = total_loss(model, batch, names)
    return float(total), {k: float(v) for k, v in terms.items()}


def untrained_baseline(diag: str, seed: int, *, n_train: int | None = None) -> dict:
    """Metrics of the network ``run(RunSpec(seed=seed, diag_activation=diag))`` would start from."""
    from ros_lnn.families import Network
    from ros_lnn.training.sources import load
    from ros_lnn.training.spec import RunSpec
    from ros_lnn.training.trainer import seed_everything

    spec = RunSpec(family="servo_lnn", diag_activation=diag, seed=seed, n_train=n_train).resolved()
    family = spec.family_spec
    data = load(family, spec, lambda line: None)
    seed_everything(seed)
    model = family.build(
        data.shape, Network(tuple(spec.hidden or ()), spec.activation, spec.epsilon, diag, False)
    )
    family.normalise(model, data.train)
    model = model.double().eval()
    metrics = family.evaluate(model, data.test)
    metrics.pop("qdd_f_nmse_per_trial", None)
    row = {k: float(v) for k, v in metrics.items()}
    for with_qe in (True, False):
        loss, _ = full_training_loss(model, data.train, with_qe)
        row[f"loss_{'with' if with_qe else 'without'}_qe"] = loss
    return row


def train_one(
    diag: str,
    with_qe: bool,
    seed: int,
    *,
    epochs: int,
    folder: Path,
    n_train: int | None = None,
    val_every: int | None = None,
) -> dict:
    """One training run through ``run()``; test metrics, final full-set loss, the loss curve, seconds."""
    from ros_lnn.training.run import run
    from ros_lnn.training.spec import RunSpec

    log_every = max(1, epochs // 30)
    spec = RunSpec(
        family="servo_lnn",
        with_qe=with_qe,
        diag_activation=diag,
        seed=seed,
        epochs=epochs,
        n_train=n_train,
        device="cpu",
        log_every=log_every,
        val_every=val_every or epochs,
        report=False,
        out=str(folder / f"{diag}_{int(with_qe)}_{seed}.pt"),
        checkpoint_every=10 * epochs,
    )
    wall, cpu = time.perf_counter(), time.process_time()
    result = run(spec, progress=lambda line: None)
    assert result is not None
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    metrics = {k: float(v) for k, v in result.metrics.items() if isinstance(v, (int, float))}
    from ros_lnn.training.sources import load

    data = load(spec.family_spec, spec.resolved(), lambda line: None)
    loss, terms = full_training_loss(result.model, data.train, with_qe)
    history = result.history
    return {
        **{k: metrics.get(k, float("nan")) for k in METRICS[:-1]},
        "final_loss": loss,
        "loss_terms": terms,
        "Q_e_rel_rms_inverse": metrics.get("Q_e_rel_rms_inverse", float("nan")),
        "curve_epoch": list(history["epoch"]),
        "curve_loss": list(history["loss"]),
        "val": [{k: v for k, v in row.items() if k != "qdd_f_nmse_per_trial"} for row in history["val"]],
        "train_seconds": float(history["seconds"]),
        "run_wall_seconds": wall,
        "run_cpu_seconds": cpu,
        "converged": bool(loss < CONVERGED_LOSS),
    }


def summarise(values: Sequence[float]) -> dict:
    v = np.asarray(values, float)
    v = v[np.isfinite(v)]
    if not len(v):
        return {
            "median": float("nan"),
            "p25": float("nan"),
            "p75": float("nan"),
            "min": float("nan"),
            "max": float("nan"),
            "n": 0,
        }
    return {
        "median": float(np.median(v)),
        "p25": float(np.percentile(v, 25)),
        "p75": float(np.percentile(v, 75)),
        "min": float(v.min()),
        "max": float(v.max()),
        "n": int(len(v)),
    }


def run_study(config: StudyConfig = DEFAULTS, *, configs=CONFIGS, val_every: int | None = None) -> dict:
    """Train every configuration for every seed of ``config`` (its epochs, training samples; plots into
    its output), evaluate the untrained baseline, summarise."""
    start = time.perf_counter()
    seeds, epochs, n_train, progress = config.seeds, config.epochs, config.samples, config.progress
    result: dict = {
        "seeds": list(seeds),
        "epochs": epochs,
        "n_train": n_train or 4096,
        "criterion_total_loss_below": CONVERGED_LOSS,
        "configs": {},
        "untrained": {},
    }
    with tempfile.TemporaryDirectory(prefix="servo_seeds_") as tmp:
        for diag, with_qe in configs:
            name = config_name(diag, with_qe)
            runs = []
            for seed in seeds:
                row = train_one(
                    diag, with_qe, seed, epochs=epochs, folder=Path(tmp), n_train=n_train, val_every=val_every
                )
                runs.append({"seed": seed, **row})
                progress(
                    f"{name}, seed {seed}: loss {row['final_loss']:.3e}, q̈_f nMSE {row['qdd_f_nmse']:.2e}, "
                    f"Q_e err {row['Q_e_rel_rms']:.1%} ({row['train_seconds']:.0f} s)"
                )
            result["configs"][name] = {
                "diag_activation": diag,
                "with_qe": with_qe,
                "runs": runs,
                "summary": {k: summarise([r[k] for r in runs]) for k in METRICS},
                "converged": int(sum(r["converged"] for r in runs)),
                "train_seconds": summarise([r["train_seconds"] for r in runs]),
            }
    for diag in dict.fromkeys(d for d, _ in configs):
        rows = [{"seed": s, **untrained_baseline(diag, s, n_train=n_train)} for s in seeds]
        keys = [k for k in rows[0] if k != "seed"]
        result["untrained"][f"{diag} diag, untrained"] = {
            "diag_activation": diag,
            "runs": rows,
            "summary": {k: summarise([r[k] for r in rows]) for k in keys},
        }
    result["seconds"] = time.perf_counter() - start
    if config.output:
        result["plots"] = plot_study(result, config.output)
    return result


def format_table(result: dict) -> str:
    """Markdown table: median [p25, p75] (min–max) per configuration; the untrained rows last."""

    def cell(s, pct=False):
        if not s["n"]:
            return "—"
        f = (lambda x: f"{100 * x:.3g} %") if pct else (lambda x: f"{x:.2e}")
        return f"{f(s['median'])} [{f(s['p25'])}, {f(s['p75'])}] ({f(s['min'])} – {f(s['max'])})"

    n = len(result["seeds"])
    lines = [
        f"| configuration ({n} seeds, {result['epochs']} epochs) | converged (loss < 1e-2) | total loss | "
        "`q̈_f` nMSE | `Q_e` rel. RMS error | `M` rel. error |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for name, c in result["configs"].items():
        s = c["summary"]
        lines.append(
            f"| {name} | {c['converged']}/{n} | {cell(s['final_loss'])} | {cell(s['qdd_f_nmse'])} | "
            f"{cell(s['Q_e_rel_rms'], True)} | {cell(s['M_rel_err'], True)} |"
        )
    for name, c in result["untrained"].items():
        s = c["summary"]
        loss = f"{cell(s['loss_with_qe'])} (with Q_e terms)"
        lines.append(
            f"| {name} | — | {loss} | {cell(s['qdd_f_nmse'])} | {cell(s['Q_e_rel_rms'], True)} | "
            f"{cell(s['M_rel_err'], True)} |"
        )
    return "\n".join(lines)


def plot_study(result: dict, plot_dir) -> list[str]:
    plt = pyplot()

    out = Path(plot_dir)
    out.mkdir(parents=True, exist_ok=True)
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.2))
    ax = axes[0]
    for i, (name, c) in enumerate(result["configs"].items()):
        for k, r in enumerate(c["runs"]):
            ax.semilogy(
                r["curve_epoch"],
                r["curve_loss"],
                color=f"C{i}",
                alpha=0.5,
                lw=0.8,
                label=name if k == 0 else None,
            )
    ax.axhline(CONVERGED_LOSS, color="k", ls=":", lw=0.8)
    ax.set_xlabel("epoch")
    ax.set_ylabel("total training loss (log)")
    ax.set_title(f"loss per seed ({len(result['seeds'])} seeds)")
    ax.legend(fontsize=7)
    groups = list(result["configs"].items()) + list(result["untrained"].items())
    labels = [name.replace(", ", "\n") for name, _ in groups]
    for ax, key, title in (
        (axes[1], "qdd_f_nmse", "test q̈_f nMSE"),
        (axes[2], "Q_e_rel_rms", "test Q_e rel. RMS error"),
    ):
        for i, (_, c) in enumerate(groups):
            v = np.asarray([r[key] for r in c["runs"]], float)
            ax.scatter(np.full(len(v), i) + np.linspace(-0.15, 0.15, len(v)), v, s=12, color=f"C{i}")
            ax.hlines(np.median(v), i - 0.3, i + 0.3, color="k")
        ax.set_yscale("log")
        ax.set_xticks(range(len(groups)), labels, fontsize=7)
        ax.set_title(f"{title} (bar: median)")
    return [save_figure(fig, out / "servo_seeds.png")]


__all__ = [
    "CONFIGS",
    "CONVERGED_LOSS",
    "config_name",
    "full_training_loss",
    "untrained_baseline",
    "train_one",
    "summarise",
    "run_study",
    "format_table",
    "plot_study",
]
