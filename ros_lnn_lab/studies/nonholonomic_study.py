"""The LNN vs LNN-nh comparison of the nonholonomic-LNN paper (docs/papers.md), scaled to a CPU: both models
learn ``q̈`` from the same trajectories of each nonholonomic example; reported are the test acceleration MSE
and, along rollouts of the learned dynamics from held-out initial states, the drift of the true energy and
of the constraint ``Φ = A(q) q̇`` (the paper's three measures), plus the state error against the truth."""

from __future__ import annotations

from typing import Any

import numpy as np

from ros_lnn.physics.nonholonomic import SYSTEMS, make_dataset, simulate
from ros_lnn_lab.studies.config import StudyConfig
from ros_lnn_lab.studies.figures import pyplot, save_figure

#: The study's scale: 3 seeds × 40 trajectories × 5 s (51 samples each), 300 epochs (the paper's), two
#: hidden layers of 128, 5 rollouts × 15 s.
DEFAULTS = StudyConfig(
    seeds=(0, 1, 2),
    epochs=300,
    trajectories=40,
    duration=5.0,
    hidden=(128, 128),
    rollouts=5,
    rollout_duration=15.0,
)
#: ``--quick``: 1 seed × 6 trajectories × 2 s (21 samples each), 3 epochs, 32×32, 2 rollouts × 2 s.
QUICK = DEFAULTS.replace(
    quick=True,
    seeds=(0,),
    trajectories=6,
    duration=2.0,
    epochs=3,
    hidden=(32, 32),
    rollouts=2,
    rollout_duration=2.0,
)


def rk4_rollout(acceleration, q0, qd0, duration: float, dt: float):
    """Fixed-step RK4 of ``q̈ = acceleration(q, q̇)`` (torch tensors, batched); returns (steps+1, B, 2n)."""
    from ros_lnn_lab.studies.rollouts import rollout

    return rollout(lambda q, v, Q: (v, acceleration(q, v)), q0, qd0, duration, dt, "rk4")


def compare_on_system(
    name: str,
    config: StudyConfig = DEFAULTS,
    seed: int = 0,
    *,
    n_samples=51,
    batch=256,
    lr=1e-3,
    dt=0.02,
) -> dict:
    """LNN and LNN-nh on system ``name`` from ``seed``; ``config``: trajectories, their duration, epochs,
    hidden widths, rollouts and their duration, progress (its seeds are :func:`run_study`'s)."""
    import torch

    n_trajectories, duration, epochs, hidden = (
        config.trajectories,
        config.duration,
        config.epochs,
        config.hidden,
    )
    n_rollouts, rollout_duration, progress = config.rollouts, config.rollout_duration, config.progress

    from ros_lnn.models.lnn import for_system
    from ros_lnn.training.trainer import train_acceleration

    system = SYSTEMS[name]()
    data = make_dataset(system, n_trajectories, duration, n_samples, seed=seed)
    n_train = int(round(0.88 * n_trajectories))
    train_sel = data["trajectory"] < n_train
    split = lambda sel: {k: v[sel] for k, v in data.items()}  # noqa: E731
    train, test = split(train_sel), split(~train_sel)
    rng = np.random.default_rng(seed + 1000)
    starts = [system.sample_state(rng) for _ in range(n_rollouts)]
    truth = [
        simulate(system, q0, qd0, rollout_duration, int(round(rollout_duration / dt)) + 1)
        for q0, qd0 in starts
    ]
    q0 = torch.as_tensor(np.stack([s[0] for s in starts]))
    qd0 = torch.as_tensor(np.stack([s[1] for s in starts]))
    result: dict[str, Any] = {
        "system": name,
        "n_train_samples": int(train_sel.sum()),
        "n_test_samples": int((~train_sel).sum()),
    }
    for label, constrained in (("LNN", False), ("LNN-nh", True)):
        torch.manual_seed(seed)
        model = for_system(system, constrained, hidden=hidden)
        history = train_acceleration(
            model,
            train,
            epochs=epochs,
            batch=batch,
            lr=lr,
            seed=seed,
            progress=progress,
        )
        pred = model(torch.as_tensor(test["q"]), torch.as_tensor(test["qd"])).detach().numpy()
        traj = rk4_rollout(lambda q, qd: model(q, qd).detach(), q0, qd0, rollout_duration, dt).numpy()
        q, qd = traj[..., : system.n], traj[..., system.n :]
        energy = system.energy(q, qd)  # (T, B)
        e0 = energy[0]
        constraint = np.abs(system.constraint(q, qd)).max(-1)  # (T, B)
        z_true = np.stack([np.concatenate([t["q"], t["qd"]], -1) for t in truth], 1)
        finite = np.isfinite(traj).all(axis=(0, 2))
        result[label] = {
            "acc_mse_test": float(np.mean(np.sum((pred - test["qdd"]) ** 2, -1))),
            "acc_mse_train_final": history["loss"][-1],
            "train_seconds": history["seconds"],
            "energy_rel_drift_max": float(np.nanmax(np.abs(energy - e0) / e0)),
            "energy_rel_drift_final_median": float(np.nanmedian(np.abs(energy[-1] - e0) / e0)),
            "constraint_max": float(np.nanmax(constraint)),
            "constraint_final_median": float(np.nanmedian(constraint[-1])),
            "state_rel_error_final_median": float(
                np.nanmedian(
                    np.linalg.norm(traj[-1] - z_true[-1], axis=-1) / np.linalg.norm(z_true[-1], axis=-1)
                )
            ),
            "finite_rollouts": int(finite.sum()),
            "energy_curve_median": np.nanmedian(np.abs(energy - e0) / e0, axis=1).tolist(),
            "constraint_curve_median": np.nanmedian(constraint, axis=1).tolist(),
        }
        progress(
            f"{name} {label}: test q̈ MSE {result[label]['acc_mse_test']:.3e}, energy drift max "
            f"{result[label]['energy_rel_drift_max']:.2e}, "
            f"constraint max {result[label]['constraint_max']:.2e}"
        )
    result["t"] = (np.arange(len(result["LNN"]["energy_curve_median"])) * dt).tolist()
    return result


def summarise_system(runs: list[dict]) -> dict:
    """Over the seeds of one system: the q̈ MSE ratio LNN / LNN-nh, each model's energy drift and
    constraint violation along its rollouts, and in how many seeds LNN-nh drifts less."""
    ratio = [r["LNN"]["acc_mse_test"] / r["LNN-nh"]["acc_mse_test"] for r in runs]
    out = {"acc_mse_ratio": ratio, "acc_mse_ratio_median": float(np.median(ratio))}
    for key in (
        "acc_mse_test",
        "energy_rel_drift_final_median",
        "energy_rel_drift_max",
        "constraint_max",
        "finite_rollouts",
        "train_seconds",
    ):
        for model in ("LNN", "LNN-nh"):
            out[f"{model} {key}"] = [r[model][key] for r in runs]
    out["seeds_nh_less_final_drift"] = int(
        sum(
            r["LNN-nh"]["energy_rel_drift_final_median"] < r["LNN"]["energy_rel_drift_final_median"]
            for r in runs
        )
    )
    out["seeds_nh_less_max_drift"] = int(
        sum(r["LNN-nh"]["energy_rel_drift_max"] < r["LNN"]["energy_rel_drift_max"] for r in runs)
    )
    return out


def run_study(
    config: StudyConfig = DEFAULTS, *, systems=tuple(SYSTEMS), n_samples: int | None = None
) -> dict:
    """Every system for every seed of ``config`` (data, start and rollout states change with the seed);
    the per-seed results, a summary per system and the scale; plots into ``config.output``.
    ``n_samples``: samples per trajectory (default 21 for a quick config, else 51)."""
    n_samples = n_samples or (21 if config.quick else 51)
    runs = {
        name: [compare_on_system(name, config, s, n_samples=n_samples) for s in config.seeds]
        for name in systems
    }
    scale = {
        "n_trajectories": config.trajectories,
        "duration": config.duration,
        "n_samples": n_samples,
        "epochs": config.epochs,
        "hidden": config.hidden,
        "rollout_duration": config.rollout_duration,
        "n_rollouts": config.rollouts,
    }
    result: dict[str, Any] = {
        "seeds": list(config.seeds),
        "scale": scale,
        "systems": {name: {"runs": r, "summary": summarise_system(r)} for name, r in runs.items()},
    }
    if config.output:
        result["plots"] = plot_study({name: r[0] for name, r in runs.items()}, config.output)
        result["plots"].append(plot_summary(result, config.output))
    return result


def format_table(result: dict) -> str:
    """Markdown: per system, medians over the seeds (range in brackets)."""

    def med(values, fmt="{:.2g}"):
        v = np.asarray(values, float)
        return fmt.format(np.median(v)) + (
            f" [{fmt.format(v.min())}, {fmt.format(v.max())}]" if len(v) > 1 else ""
        )

    n = len(result["seeds"])
    lines = [
        f"| system ({n} seed{'s' if n > 1 else ''}) | test q̈ MSE LNN / LNN-nh | ratio LNN / LNN-nh | "
        "energy drift at the end, median over rollouts: LNN / LNN-nh | max energy drift LNN / LNN-nh | "
        "max constraint ‖Φ‖ LNN / LNN-nh | LNN-nh drifts less (seeds) |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for name, entry in result["systems"].items():
        s = entry["summary"]
        lines.append(
            f"| {name} | {med(s['LNN acc_mse_test'])} / {med(s['LNN-nh acc_mse_test'])} | "
            f"{med(s['acc_mse_ratio'], '{:.3g}')}× | {med(s['LNN energy_rel_drift_final_median'])} / "
            f"{med(s['LNN-nh energy_rel_drift_final_median'])} | {med(s['LNN energy_rel_drift_max'])} / "
            f"{med(s['LNN-nh energy_rel_drift_max'])} | {med(s['LNN constraint_max'])} / "
            f"{med(s['LNN-nh constraint_max'])} | final {s['seeds_nh_less_final_drift']}/{n}, "
            f"max {s['seeds_nh_less_max_drift']}/{n} |"
        )
    return "\n".join(lines)


def plot_summary(result: dict, plot_dir) -> str:
    """Per system and seed: the q̈ MSE ratio LNN / LNN-nh, and each model's final energy drift."""
    from pathlib import Path

    plt = pyplot()

    names = list(result["systems"])
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    x = np.arange(len(names))
    for i, name in enumerate(names):
        s = result["systems"][name]["summary"]
        axes[0].scatter(np.full(len(s["acc_mse_ratio"]), i), s["acc_mse_ratio"], color="C0")
        for k, model in enumerate(("LNN", "LNN-nh")):
            v = s[f"{model} energy_rel_drift_final_median"]
            axes[1].scatter(
                np.full(len(v), i + 0.15 * (2 * k - 1)),
                np.maximum(v, 1e-16),
                color=f"C{k}",
                label=model if i == 0 else None,
            )
    axes[0].axhline(100, color="k", ls=":", lw=0.8)
    axes[0].set_yscale("log")
    axes[0].set_xticks(x, names)
    axes[0].set_title("test q̈ MSE ratio LNN / LNN-nh (dotted: the paper's ≈ 100×)")
    axes[1].set_yscale("log")
    axes[1].set_xticks(x, names)
    axes[1].set_title(
        f"|E(T) − E(0)| / E(0) at T = {result['scale'].get('rollout_duration', 15.0):g} s "
        "(median over rollouts)"
    )
    axes[1].legend()
    return save_figure(fig, Path(plot_dir) / "nonholonomic_summary.png")


def plot_study(results: dict, plot_dir) -> list:
    from pathlib import Path

    plt = pyplot()

    Path(plot_dir).mkdir(parents=True, exist_ok=True)
    fig, axes = plt.subplots(2, len(results), figsize=(4.5 * len(results), 6), squeeze=False)
    for col, (name, r) in enumerate(results.items()):
        t = np.asarray(r["t"])
        for row, (key, label) in enumerate(
            (("energy_curve_median", "|E(t)−E(0)|/E(0)"), ("constraint_curve_median", "|Φ(q, q̇)|"))
        ):
            ax = axes[row, col]
            for model in ("LNN", "LNN-nh"):
                ax.semilogy(t, np.maximum(np.asarray(r[model][key]), 1e-16), label=model)
            ax.set_title(f"{name}: {label}")
            ax.set_xlabel("t")
            ax.legend()
    return [save_figure(fig, Path(plot_dir) / "nonholonomic_lnn_vs_lnn_nh.png")]


__all__ = [
    "rk4_rollout",
    "compare_on_system",
    "summarise_system",
    "run_study",
    "format_table",
    "plot_study",
    "plot_summary",
]
