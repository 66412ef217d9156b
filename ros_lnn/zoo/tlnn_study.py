"""The TLNN study of the TLNN paper (docs/papers.md) scaled to a 2-core CPU: planar chains of uniform rods
(m = 1 kg, l = 1 m, J = m l²/12, g = 9.8, no joint forces) with 2, 3 and 4 links. Three families — TLNN, a
plain LNN and a neural ODE (NODE, black box) — each learn ``q̈`` (MSE, :func:`train_acceleration`) in
absolute body angles and in relative joint angles from the same trajectories. Rollouts (RK4 at the rollout
rate) from held-out initial states give ``E(t) = ‖ẑ − z‖₂ / ‖z‖₂`` with ``z = [φ; φ̇]`` in absolute angles
for every model (relative rollouts are converted), as median and 5–95 % band.

Fairness: same data, same epochs, batch and learning rate for every model; the LNN and NODE widths
are chosen so their parameter counts match the TLNN's (:func:`matched_width`). Starts: the TLNN's
kinetic heads are input-convex and scaled (see :mod:`ros_lnn.models.tlnn`); the LNN's network gets
the same input-convex start (:func:`ros_lnn.models.tlnn.convex_initialisation`) so that ``∂²𝓛/∂q̇²``
starts positive definite for both (from PyTorch's default start it ends indefinite on every test
sample and the LNN's test q̈ MSE is ~6× worse: 17 against 2.9 on the 2-link point-mass chain).

Scale-down from the paper (its setup, on a GPU: 250 initial conditions × 100 s at 25 Hz with random
joint forces, 350 000 training samples, 7:3 split; 100 rollouts × 10 s at 100 Hz). Defaults here:
40 initial conditions × 10 s at 25 Hz, free motion, 7:3 split by initial condition (7 028 training
samples), 100 rollouts × 10 s at 100 Hz (RK4, dt = 0.01 s) from held-out initial states drawn like
the training ones, 150 epochs of batch 256 at lr 3·10⁻³ (≈ 4 100 Adam steps) for every model.
Initial states: relative joint angles uniform in ±π/4, joint rates normal with σ = 0.5 rad/s (the
paper gives no ranges; from ±π/2 and σ = 1 the 3- and 4-rod chains whip, q̈ has tails past 400 rad/s²
and at this budget no model fits them: 3 links, test q̈ MSE TLNN 5.2·10³, LNN 1.3·10³ against a
q̈ variance of 3.6·10³). Ground truth and training data come from one batched DOP853 integration
(rtol = atol = 10⁻⁹). The test q̈ error is in absolute angles for every model (mean and median of
the per-sample squared norm; the mean is dominated by the few states where a learned W is nearly
singular).

The paper's "four-bar" example (四连杆) starts from four independent angles and rates, so it reads as a
4-DOF open chain under constant joint forces, not a closed four-bar linkage: the 4-link chain here
covers it except for the forces (the neural ODE has no force input).
"""
from __future__ import annotations

import numpy as np

from ..physics.chain import PlanarChain, rod
from ..physics.chain_motion import integrate, random_states, to_absolute

FAMILIES = ("TLNN", "LNN", "NODE")
COORDINATES = ("absolute", "relative")
MODELS = tuple(f"{f} ({c})" for f in FAMILIES for c in COORDINATES)


def rod_chain(n_links: int) -> PlanarChain:
    return PlanarChain([rod(f"joint_{i + 1}") for i in range(n_links)])


def parameter_count(model) -> int:
    return sum(p.numel() for p in model.parameters())


def make_model(family: str, n: int, width: int):
    """A model of ``family`` with two hidden layers of ``width`` (per head for the TLNN)."""
    from ..models.lnn import LNN
    from ..models.node_baseline import NeuralODE
    from ..models.tlnn import TLNN, convex_initialisation, serial_chain_topology

    if family == "TLNN":
        return TLNN(serial_chain_topology(n), hidden=(width, width))
    if family == "LNN":
        model = LNN(n, hidden=(width, width), angle_coordinates=range(n))
        convex_initialisation(model.net)
        return model
    if family == "NODE":
        return NeuralODE(n, hidden=(width, width))
    raise ValueError(f"unknown family '{family}', expected one of {FAMILIES}")


def matched_width(family: str, n: int, target: int) -> int:
    """The width whose parameter count is closest to ``target`` (counts grow with the width)."""
    best, width = 4, 4
    while True:
        count = parameter_count(make_model(family, n, width))
        if abs(count - target) < abs(parameter_count(make_model(family, n, best)) - target):
            best = width
        if count > target:
            return best
        width += 1


def rollout_error(z_pred, z_true):
    """``E(t)`` (T, B); a non-finite prediction (diverged rollout) counts as ``inf``."""
    err = np.linalg.norm(z_pred - z_true, axis=-1) / np.linalg.norm(z_true, axis=-1)
    return np.where(np.isfinite(err), err, np.inf)


def error_band(err):
    """Median and 5/95 % percentiles over rollouts (axis 1); nearest-rank, so ``inf`` stays ``inf``."""
    return {k: np.percentile(err, p, axis=1, method="nearest") for k, p in (("median", 50), ("p05", 5), ("p95", 95))}


def _fit_and_roll(model, data, coords, starts, z_true, *, epochs, batch, lr, seed, rollout_duration, dt, progress):
    import torch

    from ..training.trainer import train_acceleration
    from .nonholonomic_study import rk4_rollout

    (q, qd, qdd), (tq, tqd, tqdd_abs) = data
    history = train_acceleration(model, {"q": q, "qd": qd, "qdd": qdd}, epochs=epochs, batch=batch, lr=lr,
                                 seed=seed, progress=progress, log_every=max(1, epochs // 5))
    with torch.no_grad():
        pred = model(torch.as_tensor(tq), torch.as_tensor(tqd)).numpy()
        if coords == "relative":
            pred = np.cumsum(pred, -1)
        q0, qd0 = starts
        if coords == "absolute":
            q0, qd0 = to_absolute(q0, qd0)
        traj = rk4_rollout(lambda a, b: model(a, b), torch.as_tensor(q0), torch.as_tensor(qd0),
                           rollout_duration, dt).numpy()
    n = q0.shape[-1]
    phi, phid = traj[..., :n], traj[..., n:]
    if coords == "relative":
        phi, phid = to_absolute(phi, phid)
    return history, np.sum((pred - tqdd_abs) ** 2, -1), rollout_error(np.concatenate([phi, phid], -1), z_true)


def study_chain(n_links: int, *, n_ic=40, duration=10.0, rate_hz=25.0, epochs=150, batch=256, lr=3e-3,
                tlnn_width=32, n_rollouts=100, rollout_duration=10.0, rollout_hz=100.0, report_every=0.1, seed=0,
                angle_range=np.pi / 4, speed=0.5, models=MODELS, progress=print) -> dict:
    """Train every model of ``models`` (names of :data:`MODELS`) on one chain and roll it out."""
    import torch

    chain = rod_chain(n_links)
    rng = np.random.default_rng(seed)
    q0, qd0 = random_states(n_links, n_ic, rng, angle_range, speed)
    q, qd, qdd = integrate(chain, q0, qd0, duration, rate_hz)                   # (T, n_ic, n)
    n_train = int(round(0.7 * n_ic))
    flat = lambda x: x.reshape(-1, n_links)  # noqa: E731
    rel_train = [flat(x[:, :n_train]) for x in (q, qd, qdd)]
    rel_test = [flat(x[:, n_train:]) for x in (q, qd, qdd)]
    abs_test = to_absolute(*rel_test)
    data = {"relative": (rel_train, (rel_test[0], rel_test[1], abs_test[2])),
            "absolute": (list(to_absolute(*rel_train)), abs_test)}
    starts = random_states(n_links, n_rollouts, rng, angle_range, speed)
    rq, rqd, _ = integrate(chain, *starts, rollout_duration, rollout_hz)
    z_true = np.concatenate(to_absolute(rq, rqd), -1)                            # (T, B, 2n)
    stride = max(1, int(round(report_every * rollout_hz)))
    t = np.arange(len(z_true)) / rollout_hz
    widths = {"TLNN": tlnn_width}
    target = parameter_count(make_model("TLNN", n_links, tlnn_width))
    for family in ("LNN", "NODE"):
        widths[family] = matched_width(family, n_links, target)
    result = {"n_links": n_links, "n_train_samples": len(rel_train[0]), "n_test_samples": len(rel_test[0]),
              "acc_variance_test": float(np.sum(np.var(abs_test[2], 0))),
              "epochs": epochs, "batch": batch, "lr": lr, "t": t[::stride].tolist(), "models": {}}
    for name in models:
        family, coords = name.split(" (")[0], name.split("(")[1].rstrip(")")
        torch.manual_seed(seed)
        model = make_model(family, n_links, widths[family])
        history, sq_err, err = _fit_and_roll(model, data[coords], coords, starts, z_true, epochs=epochs, batch=batch,
                                          lr=lr, seed=seed, rollout_duration=rollout_duration, dt=1.0 / rollout_hz,
                                          progress=None)
        band = error_band(err)
        at = {f"E_at_{s:g}s": {k: float(v[min(len(t) - 1, int(round(s * rollout_hz)))]) for k, v in band.items()}
              for s in (1.0, 5.0, rollout_duration)}
        result["models"][name] = {
            "width": widths[family], "parameters": parameter_count(model), "train_seconds": history["seconds"],
            "acc_mse_train_final": history["loss"][-1], "acc_mse_test": float(np.mean(sq_err)),
            "acc_se_test_median": float(np.median(sq_err)),
            "diverged_rollouts": int(np.sum(~np.isfinite(err[-1]))), **at,
            **{f"E_{k}": v[::stride].tolist() for k, v in band.items()}}
        r = result["models"][name]
        progress(f"{n_links}-link {name}: {r['parameters']} parameters, {r['train_seconds']:.0f} s training, "
                 f"test q̈ MSE {r['acc_mse_test']:.3g} (median {r['acc_se_test_median']:.3g}), median E at 1/5/{rollout_duration:g} s "
                 + " / ".join(f"{r[k]['median']:.3g}" for k in at))
    return result


def plot_chain_study(result: dict, plot_dir) -> str:
    import matplotlib

    matplotlib.use("Agg")
    from pathlib import Path

    import matplotlib.pyplot as plt

    Path(plot_dir).mkdir(parents=True, exist_ok=True)
    t = np.asarray(result["t"])[1:]              # E(0) = 0: every rollout starts on the true state
    colors = dict(zip(FAMILIES, ("C0", "C1", "C2")))
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2), sharey=True)
    for ax, coords in zip(axes, COORDINATES):
        for name, r in result["models"].items():
            if not name.endswith(f"({coords})"):
                continue
            color = colors[name.split(" ")[0]]
            ax.semilogy(t, np.clip(r["E_median"][1:], 1e-6, 1e3), color=color,
                        label=f"{name}, {r['parameters']} par.")
            ax.fill_between(t, np.clip(r["E_p05"][1:], 1e-6, 1e3), np.clip(r["E_p95"][1:], 1e-6, 1e3),
                            color=color, alpha=0.15)
        ax.set_xlabel("t [s]")
        ax.set_title(f"{result['n_links']}-link chain, {coords} angles")
        ax.legend(fontsize=8)
    axes[0].set_ylabel("E(t) = |ẑ − z| / |z|  (median, 5–95 %)")
    fig.tight_layout()
    path = Path(plot_dir) / f"tlnn_{result['n_links']}link_rollout_error.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return str(path)


def run_study(links=(2, 3, 4), plot_dir=None, progress=print, **kw) -> dict:
    results = {}
    for n in links:
        results[n] = study_chain(n, progress=progress, **kw)
        if plot_dir:
            results[n]["plot"] = plot_chain_study(results[n], plot_dir)
    return results


__all__ = ["FAMILIES", "COORDINATES", "MODELS", "rod_chain", "parameter_count", "make_model", "matched_width",
           "rollout_error", "error_band", "study_chain", "plot_chain_study", "run_study"]
