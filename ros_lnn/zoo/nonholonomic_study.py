"""The LNN vs LNN-nh comparison of the nonholonomic-LNN paper (docs/papers.md), scaled to a CPU: both models
learn ``q̈`` from the same trajectories of each nonholonomic example; reported are the test acceleration MSE
and, along rollouts of the learned dynamics from held-out initial states, the drift of the true energy and
of the constraint ``Φ = A(q) q̇`` (the paper's three measures), plus the state error against the truth."""
from __future__ import annotations

import numpy as np

from ..physics.nonholonomic import SYSTEMS, make_dataset, simulate


def rk4_rollout(acceleration, q0, qd0, duration: float, dt: float):
    """Fixed-step RK4 of ``q̈ = acceleration(q, q̇)`` (torch tensors, batched); returns (steps+1, B, 2n)."""
    import torch

    n = q0.shape[-1]

    def f(y):
        return torch.cat([y[..., n:], acceleration(y[..., :n], y[..., n:])], -1)

    y = torch.cat([q0, qd0], -1)
    out = [y]
    for _ in range(int(round(duration / dt))):
        k1 = f(y)
        k2 = f(y + 0.5 * dt * k1)
        k3 = f(y + 0.5 * dt * k2)
        k4 = f(y + dt * k3)
        y = y + dt / 6.0 * (k1 + 2 * k2 + 2 * k3 + k4)
        out.append(y)
    return torch.stack(out)


def compare_on_system(name: str, *, n_trajectories=40, duration=5.0, n_samples=51, epochs=60, batch=256,
                      hidden=(128, 128), lr=1e-3, n_rollouts=5, rollout_duration=15.0, dt=0.02, seed=0,
                      progress=print) -> dict:
    import torch

    from ..models.lnn import for_system
    from ..training.trainer import train_acceleration

    system = SYSTEMS[name]()
    data = make_dataset(system, n_trajectories, duration, n_samples, seed=seed)
    n_train = int(round(0.88 * n_trajectories))
    train_sel = data["trajectory"] < n_train
    split = lambda sel: {k: v[sel] for k, v in data.items()}  # noqa: E731
    train, test = split(train_sel), split(~train_sel)
    rng = np.random.default_rng(seed + 1000)
    starts = [system.sample_state(rng) for _ in range(n_rollouts)]
    truth = [simulate(system, q0, qd0, rollout_duration, int(round(rollout_duration / dt)) + 1) for q0, qd0 in starts]
    q0 = torch.as_tensor(np.stack([s[0] for s in starts]))
    qd0 = torch.as_tensor(np.stack([s[1] for s in starts]))
    result = {"system": name, "n_train_samples": int(train_sel.sum()), "n_test_samples": int((~train_sel).sum())}
    for label, constrained in (("LNN", False), ("LNN-nh", True)):
        torch.manual_seed(seed)
        model = for_system(system, constrained, hidden=hidden)
        history = train_acceleration(model, train, epochs=epochs, batch=batch, lr=lr, seed=seed,
                                     progress=progress, log_every=max(1, epochs // 5))
        pred = model(torch.as_tensor(test["q"]), torch.as_tensor(test["qd"])).detach().numpy()
        traj = rk4_rollout(lambda q, qd: model(q, qd).detach(), q0, qd0, rollout_duration, dt).numpy()
        q, qd = traj[..., :system.n], traj[..., system.n:]
        energy = system.energy(q, qd)                                       # (T, B)
        e0 = energy[0]
        constraint = np.abs(system.constraint(q, qd)).max(-1)               # (T, B)
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
            "state_rel_error_final_median": float(np.nanmedian(
                np.linalg.norm(traj[-1] - z_true[-1], axis=-1) / np.linalg.norm(z_true[-1], axis=-1))),
            "finite_rollouts": int(finite.sum()),
            "energy_curve_median": np.nanmedian(np.abs(energy - e0) / e0, axis=1).tolist(),
            "constraint_curve_median": np.nanmedian(constraint, axis=1).tolist(),
        }
        progress(f"{name} {label}: test q̈ MSE {result[label]['acc_mse_test']:.3e}, energy drift max "
                 f"{result[label]['energy_rel_drift_max']:.2e}, constraint max {result[label]['constraint_max']:.2e}")
    result["t"] = (np.arange(len(result["LNN"]["energy_curve_median"])) * dt).tolist()
    return result


def run_study(systems=tuple(SYSTEMS), plot_dir=None, progress=print, **kw) -> dict:
    results = {name: compare_on_system(name, progress=progress, **kw) for name in systems}
    if plot_dir:
        plot_study(results, plot_dir)
    return results


def plot_study(results: dict, plot_dir) -> list:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from pathlib import Path

    Path(plot_dir).mkdir(parents=True, exist_ok=True)
    fig, axes = plt.subplots(2, len(results), figsize=(4.5 * len(results), 6), squeeze=False)
    for col, (name, r) in enumerate(results.items()):
        t = np.asarray(r["t"])
        for row, (key, label) in enumerate((("energy_curve_median", "|E(t)−E(0)|/E(0)"),
                                            ("constraint_curve_median", "|Φ(q, q̇)|"))):
            ax = axes[row, col]
            for model in ("LNN", "LNN-nh"):
                ax.semilogy(t, np.maximum(np.asarray(r[model][key]), 1e-16), label=model)
            ax.set_title(f"{name}: {label}")
            ax.set_xlabel("t")
            ax.legend()
    fig.tight_layout()
    path = Path(plot_dir) / "nonholonomic_lnn_vs_lnn_nh.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return [str(path)]


__all__ = ["rk4_rollout", "compare_on_system", "run_study", "plot_study"]
