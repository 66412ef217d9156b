"""The TLNN study of seed 003 scaled to a 2-core CPU: planar point-mass chains of 2 and 3 links, TLNN
in absolute body angles and in relative joint angles, against a plain LNN and a neural ODE (both in
absolute angles). Every model learns ``q̈`` (MSE) from the same trajectories; rollouts from held-out
initial states give the error ``E(t) = ‖ẑ − z‖₂ / ‖z‖₂``, ``z = [φ; φ̇]`` in absolute angles for all
models, reported as median and 5–95 % band.

Paper: 250 initial conditions × 100 s at 25 Hz, 7:3 split, 100 rollouts × 10 s at 100 Hz. Defaults
here: 16 × 6 s at 25 Hz, 7:3 split (by initial condition), 20 rollouts × 5 s at 50 Hz, 60 epochs
of batch 64
(see ``study_chain`` arguments).
"""
from __future__ import annotations

import numpy as np

from ..physics.chain import PlanarChain
from ..physics.simulate import simulate


def chain_trajectories(chain: PlanarChain, n_ic: int, duration: float, rate_hz: float, seed: int,
                       angle_range=np.pi / 2, speed=1.0):
    """Free-motion trajectories (relative joint angles) from random initial states."""
    rng = np.random.default_rng(seed)
    t_eval = np.arange(0.0, duration + 1e-9, 1.0 / rate_hz)
    out = []
    for _ in range(n_ic):
        q0 = rng.uniform(-angle_range, angle_range, chain.n)
        qd0 = speed * rng.normal(size=chain.n)
        tr = simulate(chain, duration, q0, qd0, t_eval=t_eval, rtol=1e-10, atol=1e-10)
        out.append((tr.q, tr.qd, tr.qdd))
    return out


def to_absolute(q, qd, qdd=None):
    """Relative joint angles → absolute body angles (cumulative sums)."""
    conv = [np.cumsum(x, -1) for x in (q, qd)]
    return tuple(conv) + ((np.cumsum(qdd, -1),) if qdd is not None else ())


def to_relative(phi, phid):
    return (np.diff(phi, prepend=0.0, axis=-1), np.diff(phid, prepend=0.0, axis=-1))


def make_model(kind: str, n: int, hidden):
    from ..models.lnn import LNN
    from ..models.node_baseline import NeuralODE
    from ..models.tlnn import TLNN, serial_chain_topology

    if kind.startswith("TLNN"):
        return TLNN(serial_chain_topology(n), hidden=hidden)
    if kind == "LNN":
        return LNN(n, hidden=hidden, angle_coordinates=range(n))
    if kind == "NODE":
        return NeuralODE(n, hidden=hidden)
    raise ValueError(kind)


MODELS = {"TLNN (absolute)": "absolute", "TLNN (relative)": "relative", "LNN": "absolute", "NODE": "absolute"}


def study_chain(n_links: int, *, n_ic=16, duration=6.0, rate_hz=25.0, epochs=60, batch=64, lr=3e-3,
                hidden=(64, 64), n_rollouts=20, rollout_duration=5.0, rollout_hz=50.0, seed=0, models=tuple(MODELS),
                progress=print) -> dict:
    import torch

    from ..models.lnn import train_acceleration
    from .nonholonomic_study import rk4_rollout

    chain = PlanarChain.uniform(n_links, mass=1.0, length=1.0)
    trajs = chain_trajectories(chain, n_ic, duration, rate_hz, seed)
    n_train = int(round(0.7 * n_ic))
    stack = lambda ts: [np.concatenate([t[i] for t in ts]) for i in range(3)]  # noqa: E731
    rel_train, rel_test = stack(trajs[:n_train]), stack(trajs[n_train:])
    data = {"relative": (rel_train, rel_test),
            "absolute": (list(to_absolute(*rel_train)), list(to_absolute(*rel_test)))}
    starts = chain_trajectories(chain, n_rollouts, rollout_duration, rollout_hz, seed + 1000)
    z_true = np.stack([np.concatenate(to_absolute(s[0], s[1]), -1) for s in starts], 1)   # (T, B, 2n)
    dt = 1.0 / rollout_hz
    result = {"n_links": n_links, "n_train_samples": len(rel_train[0]), "t": (np.arange(len(z_true)) * dt).tolist()}
    for kind in models:
        coords = MODELS[kind]
        (q, qd, qdd), (tq, tqd, tqdd) = data[coords]
        torch.manual_seed(seed)
        model = make_model(kind, n_links, hidden)
        history = train_acceleration(model, {"q": q, "qd": qd, "qdd": qdd}, epochs=epochs, batch=batch, lr=lr,
                                     seed=seed, progress=progress, log_every=max(1, epochs // 5))
        pred = model(torch.as_tensor(tq), torch.as_tensor(tqd)).detach().numpy()
        q0 = np.stack([s[0][0] for s in starts])
        qd0 = np.stack([s[1][0] for s in starts])
        if coords == "absolute":
            q0, qd0 = to_absolute(q0, qd0)
        traj = rk4_rollout(lambda a, b: model(a, b).detach(), torch.as_tensor(q0), torch.as_tensor(qd0),
                           rollout_duration, dt).numpy()
        phi, phid = traj[..., :n_links], traj[..., n_links:]
        if coords == "relative":
            phi, phid = to_absolute(phi, phid)
        z = np.concatenate([phi, phid], -1)
        err = np.linalg.norm(z - z_true, axis=-1) / np.linalg.norm(z_true, axis=-1)       # (T, B)
        err = np.where(np.isfinite(err), err, np.inf)
        result[kind] = {"coordinates": coords, "acc_mse_test": float(np.mean(np.sum((pred - tqdd) ** 2, -1))),
                        "acc_mse_train_final": history["loss"][-1], "train_seconds": history["seconds"],
                        "E_median": np.median(err, 1).tolist(), "E_p05": np.percentile(err, 5, 1).tolist(),
                        "E_p95": np.percentile(err, 95, 1).tolist(),
                        "E_final_median": float(np.median(err[-1])), "E_mean_median": float(np.median(err.mean(0)))}
        progress(f"{n_links}-link {kind}: test q̈ MSE {result[kind]['acc_mse_test']:.3e}, "
                 f"median E at {rollout_duration:g} s {result[kind]['E_final_median']:.3e}")
    return result


def plot_chain_study(result: dict, plot_dir) -> str:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from pathlib import Path

    Path(plot_dir).mkdir(parents=True, exist_ok=True)
    t = np.asarray(result["t"])
    fig, ax = plt.subplots(figsize=(6.5, 4.2))
    for kind in MODELS:
        if kind not in result:
            continue
        r = result[kind]
        line, = ax.semilogy(t, np.maximum(r["E_median"], 1e-12), label=f"{kind}")
        ax.fill_between(t, np.maximum(r["E_p05"], 1e-12), np.minimum(r["E_p95"], 1e3), color=line.get_color(),
                        alpha=0.15)
    ax.set_xlabel("t [s]")
    ax.set_ylabel("E(t) = |ẑ − z| / |z|   (median, 5–95 %)")
    ax.set_title(f"{result['n_links']}-link chain rollouts")
    ax.legend()
    fig.tight_layout()
    path = Path(plot_dir) / f"tlnn_{result['n_links']}link_rollout_error.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return str(path)


def run_study(links=(2, 3), plot_dir=None, progress=print, **kw) -> dict:
    results = {}
    for n in links:
        results[n] = study_chain(n, progress=progress, **kw)
        if plot_dir:
            results[n]["plot"] = plot_chain_study(results[n], plot_dir)
    return results


__all__ = ["chain_trajectories", "to_absolute", "to_relative", "study_chain", "plot_chain_study", "run_study",
           "MODELS"]
