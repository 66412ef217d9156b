"""The DeLaN benchmark (``ros-lnn bench delan [--data DIR]``, ``ros-lnn bench zoo delan``): DeLaN (= ServoLNN
without servo joints) on the DeLaN character data set, scored the way the DeLaN reference implementation
scores it (EQUATIONS.md §2), and rolled out.

Data: ``character_data.npz`` (README beside it; where it is looked for: :mod:`ros_lnn.physics.delan_data`),
20 letters of a simulated 2-DoF arm; test letters e, q, v, train on the other 17. Error measure: mean over
test samples of the squared error summed over both joints, for the torque and its inertial,
Coriolis+centrifugal and gravity parts and for the power ``q̇ᵀτ`` (the model's ``Ė = Ṫ + V̇``). Per-sample
time: one sample, inverse mode, all outputs, torch CPU.

Rollouts (:func:`rollout_letters`): each held-out letter integrated from its first recorded state under its
recorded torques (held over a step for Euler and symplectic Euler, linear in time for RK4's midpoints) with
explicit Euler, symplectic (semi-implicit) Euler and RK4, at the data's 25 Hz and at 10 sub-steps per
sample; the joint-position error against the recording. The same integrators driven by the *recorded*
accelerations (linear in time) give each method's floor at that step: the error that is the integrator's,
not the model's.
"""

from __future__ import annotations

import time

import numpy as np

from ..physics.delan_data import TEST_LETTERS, letter_trajectories, load_character_data

#: Published DeLaN figures (README of the data set). Gravity equals inertial there, apparently a typo
#: in the source; both are kept as printed.
PUBLISHED = {
    "torque": 4.327e-4,
    "inertial": 7.338e-4,
    "coriolis": 2.227e-4,
    "gravity": 7.338e-4,
    "power": 4.456e-5,
    "ms_per_sample": 0.659,
}


def delan_errors(model, samples) -> dict:
    """MSE (mean over samples of the squared error summed over joints) of each torque component."""
    import torch

    dtype = next(model.parameters()).dtype
    t = {k: torch.as_tensor(samples[k], dtype=dtype) for k in ("q", "qd", "qdd")}
    with torch.no_grad():
        out = model.inverse(t["q"], t["qd"], t["qdd"])
    get = lambda x: x.double().numpy()  # noqa: E731
    mse = lambda a, b: float(np.mean(np.sum((a - b) ** 2, axis=-1)))  # noqa: E731
    power_true = np.sum(samples["qd"] * samples["Q"], axis=-1)
    return {
        "torque": mse(get(out["Q"]), samples["Q"]),
        "inertial": mse(get(out["Q_inertial"]), samples["Q_m"]),
        "coriolis": mse(get(out["Q_coriolis"]), samples["Q_c"]),
        "gravity": mse(get(out["Q_conservative"]), samples["Q_g"]),
        "power": float(np.mean((get(out["E_dot"]) - power_true) ** 2)),
        "mass_matrix_rel": float(
            np.sqrt(
                np.mean(np.sum((get(out["M"]) - samples["M"]) ** 2, (-1, -2)))
                / np.mean(np.sum(samples["M"] ** 2, (-1, -2)))
            )
        ),
    }


def time_per_sample(model, samples, repeats=2000) -> float:
    """Median milliseconds of one single-sample inverse-mode evaluation (all outputs)."""
    import torch

    dtype = next(model.parameters()).dtype
    q, qd, qdd = (torch.as_tensor(samples[k][:1], dtype=dtype) for k in ("q", "qd", "qdd"))
    times = []
    with torch.no_grad():
        for _ in range(50):
            model.inverse(q, qd, qdd)
        for _ in range(repeats):
            t0 = time.perf_counter()
            model.inverse(q, qd, qdd)
            times.append(time.perf_counter() - t0)
    return 1e3 * float(np.median(times))


def train_delan(
    train,
    *,
    epochs=10_000,
    batch=512,
    lr=5e-4,
    weight_decay=1e-5,
    hidden=(64, 64),
    seed=0,
    epsilon=1e-3,
    losses=("inv", "fwd"),
    progress=print,
    log_every=500,
):
    """A ServoLNN with no servo joints (DeLaN) trained by the project trainer; returns (model, history)."""
    import torch

    from ..models.servo_lnn import ServoLNN
    from ..training.trainer import TrainConfig, seed_everything
    from ..training.trainer import train as run_training

    seed_everything(seed)
    model = ServoLNN(
        ["joint_1", "joint_2"],
        [],
        hidden=hidden,
        activation="softplus",
        diag_activation="softplus",
        epsilon=epsilon,
    )
    cfg = TrainConfig(
        epochs=epochs,
        batch=batch,
        lr=lr,
        weight_decay=weight_decay,
        seed=seed,
        device="cpu",
        dtype="float32",
        losses=tuple(losses),
        with_qe=False,
        log_every=log_every,
        val_every=epochs + 1,
        threads=1,
    )
    history = run_training(
        model, {k: train[k] for k in ("q", "qd", "qdd", "Q")}, None, cfg, progress=progress
    )
    model.to(torch.float32)
    return model, history


def _interpolator(t, values):
    """``f(τ) -> (1, n)`` tensor: ``values`` (T, n) linear in the time ``τ`` since ``t[0]`` (held past the
    ends)."""
    import torch

    t = np.asarray(t, float) - t[0]
    values = np.asarray(values, float)

    def at(tau):
        return torch.as_tensor(np.array([[np.interp(tau, t, v) for v in values.T]]))

    return at


def _held(t, values, dt_data):
    """Zero-order hold: the value of the sample at or before ``τ``."""
    import torch

    values = np.asarray(values, float)

    def at(tau):
        k = min(len(values) - 1, int(np.floor(tau / dt_data + 1e-9)))
        return torch.as_tensor(values[k : k + 1])

    return at


def rollout_letters(
    model, test: dict, *, methods=("euler", "symplectic_euler", "rk4"), substeps=(1, 10)
) -> dict:
    """Rollouts of every held-out letter (see the module docstring): per method and step, per letter the
    RMS and final joint-position error [rad] of the model and of the recorded-acceleration floor."""
    import torch

    from ..zoo.rollouts import rollout

    model = model.double().eval()

    def learned(q, v, Q):
        return v, model(q, v, None, Q)["qdd"]

    out: dict = {}
    for name, traj in letter_trajectories(test).items():
        t, q, qd = traj["t"], traj["q"], traj["qd"]
        dt_data = float(np.median(np.diff(t)))
        duration = dt_data * (len(t) - 1)
        q0, v0 = torch.as_tensor(q[:1]), torch.as_tensor(qd[:1])
        recorded_qdd = _interpolator(t, traj["qdd"])

        def replay(q_, v_, recorded):
            return v_, recorded  # driven by the recorded q̈ in place of a force

        for method in methods:
            for sub in substeps:
                dt = dt_data / sub
                force = _interpolator(t, traj["Q"]) if method == "rk4" else _held(t, traj["Q"], dt_data)
                acc = recorded_qdd if method == "rk4" else _held(t, traj["qdd"], dt_data)
                rows = {}
                for label, f, drive in (("model", learned, force), ("recorded_qdd", replay, acc)):
                    z = rollout(f, q0, v0, duration, dt, method, drive).numpy()[::sub, 0, :2]
                    err = np.linalg.norm(z - q, axis=-1)
                    err = np.where(np.isfinite(err), err, np.inf)
                    rows[label] = {
                        "rms": float(np.sqrt(np.mean(err**2))),
                        "final": float(err[-1]),
                        "max": float(err.max()),
                    }
                out.setdefault(f"{method}, dt = {1e3 * dt:g} ms", {})[name] = rows
    summary = {}
    for key, letters in out.items():
        summary[key] = {
            label: {
                m: float(np.median([letters[L][label][m] for L in letters])) for m in ("rms", "final", "max")
            }
            for label in ("model", "recorded_qdd")
        }
    return {"per_letter": out, "median_over_letters": summary}


def format_rollouts(rollouts: dict) -> str:
    lines = [
        "| integrator, step | model: RMS / final joint error [rad] "
        "| recorded q̈ (integrator floor): RMS / final |",
        "| --- | --- | --- |",
    ]
    for key, s in rollouts["median_over_letters"].items():
        lines.append(
            f"| {key} | {s['model']['rms']:.3g} / {s['model']['final']:.3g} | "
            f"{s['recorded_qdd']['rms']:.3g} / {s['recorded_qdd']['final']:.3g} |"
        )
    return "\n".join(lines)


def run_benchmark(
    data=None,
    *,
    epochs: int = 10_000,
    quick: bool = False,
    rollouts: bool = True,
    plot_dir=None,
    progress=print,
) -> dict:
    """Train the published DeLaN set-up for ``epochs`` on the 17 training letters of the character data at
    ``data`` (file or folder; None: :func:`~ros_lnn.physics.delan_data.find_character_data`'s default),
    score it on e, q, v against the published figures, time it, roll the test letters out."""
    train, test = load_character_data(data)
    progress(
        f"DeLaN character data: {len(train['q'])} training samples (17 letters), {len(test['q'])} test "
        f"samples (letters {', '.join(TEST_LETTERS)}); training {epochs} epochs, 64x2 softplus, batch 512, "
        "lr 5e-4, weight decay 1e-5, losses inv+fwd, float32 CPU"
    )
    model, history = train_delan(train, epochs=epochs, log_every=max(1, epochs // 20), progress=progress)
    errors = delan_errors(model, test)
    ms = time_per_sample(model, test, repeats=300 if quick else 2000)
    result = {
        "epochs": epochs,
        "train_seconds": history["seconds"],
        "train_cpu_seconds": history.get("cpu_seconds"),
        "test": errors,
        "train": delan_errors(model, train),
        "ms_per_sample": ms,
        "published": PUBLISHED,
    }
    progress(format_errors(result))
    if rollouts:
        result["rollouts"] = rollout_letters(model, test)
        progress(
            "rollouts of the held-out letters from their first state under their recorded torques "
            "(median over e, q, v):\n" + format_rollouts(result["rollouts"])
        )
        if plot_dir:
            result["plot"] = plot_rollouts(result["rollouts"], plot_dir)
    return result


def format_errors(result: dict) -> str:
    errors, ms = result["test"], result["ms_per_sample"]
    lines = [f"{'quantity':<12}{'this':>12}{'DeLaN':>12}{'ratio':>8}"]
    for key in ("torque", "inertial", "coriolis", "gravity", "power"):
        lines.append(
            f"{key:<12}{errors[key]:>12.3e}{PUBLISHED[key]:>12.3e}{errors[key] / PUBLISHED[key]:>8.2f}"
        )
    lines.append(
        f"{'ms/sample':<12}{ms:>12.3f}{PUBLISHED['ms_per_sample']:>12.3f}   (this machine vs AMD 3950)"
    )
    lines.append(
        f"mass matrix relative error {errors['mass_matrix_rel']:.2e}; "
        f"training took {result['train_seconds']:.0f} s"
    )
    return "\n".join(lines)


def plot_rollouts(rollouts: dict, out) -> str:
    import matplotlib

    matplotlib.use("Agg")
    from pathlib import Path

    import matplotlib.pyplot as plt

    Path(out).mkdir(parents=True, exist_ok=True)
    keys = list(rollouts["median_over_letters"])
    fig, ax = plt.subplots(figsize=(7, 4))
    x = np.arange(len(keys))
    for k, (label, color) in enumerate((("model", "C0"), ("recorded_qdd", "C7"))):
        ax.bar(
            x + 0.2 * (2 * k - 1),
            [rollouts["median_over_letters"][key][label]["rms"] for key in keys],
            0.4,
            color=color,
            label="learned DeLaN" if label == "model" else "recorded q̈ (integrator floor)",
        )
    ax.set_yscale("log")
    ax.set_xticks(x, [key.replace(", ", "\n") for key in keys], fontsize=7)
    ax.set_ylabel("RMS joint-position error [rad] (median over e, q, v)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    path = Path(out) / "delan_rollouts.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return str(path)


__all__ = [
    "PUBLISHED",
    "delan_errors",
    "time_per_sample",
    "train_delan",
    "rollout_letters",
    "format_rollouts",
    "run_benchmark",
    "format_errors",
    "plot_rollouts",
]
