"""The DeLaN benchmark (``ros-lnn bench delan [--data DIR]``, ``ros-lnn bench zoo delan``): DeLaN (= ServoLNN
without servo joints) on the DeLaN character data set, scored the way the DeLaN reference implementation
scores it (EQUATIONS.md §2), and rolled out.

Data: ``character_data.npz`` (README beside it; where it is looked for: :mod:`ros_lnn.physics.delan_data`),
20 letters of a simulated 2-DoF arm; test letters e, q, v, train on the other 17. Error measure: mean over
test samples of the squared error summed over both joints, for the torque and its inertial,
Coriolis+centrifugal and gravity parts and for the power ``q̇ᵀτ`` (the model's ``Ė = Ṫ + V̇``). Per-sample
time: one sample, inverse mode, all outputs, torch CPU.

Rollouts (:func:`rollout_letters`): the held-out letters integrated under their recorded torques (held
over a sample for Euler and symplectic Euler, linear in time for RK4's midpoints) with explicit Euler,
symplectic (semi-implicit) Euler and RK4, at the data's 25 Hz and at 10 sub-steps per sample, from every
recorded sample over horizons of 0.2, 0.5 and 1 s (the joint-position error against the recording), and
each whole letter from its first sample (how long the error stays below 0.1 rad). The same integrators
driven by the *recorded* accelerations give each method's floor at that step: the part of the error that
is the integrator's and the 25 Hz data's, not the model's. (The data hold no dynamics function, so how
fast the true arm itself would drift from a letter under its torques replayed open loop is not known.)
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np

from ros_lnn.physics.delan_data import TEST_LETTERS, letter_trajectories, load_character_data
from ros_lnn_lab.studies.config import StudyConfig
from ros_lnn_lab.studies.figures import pyplot, save_figure

#: The published set-up: 10 000 epochs, seed 0, the data at ``data`` (None: the default place).
DEFAULTS = StudyConfig(seeds=(0,), epochs=10_000)
#: ``--quick``: 300 epochs, the per-sample time over 300 repeats instead of 2 000.
QUICK = DEFAULTS.replace(quick=True, epochs=300)

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
    compile=False,
    free_joints=("joint_1", "joint_2"),
    device="cpu",
):
    """A ServoLNN with no servo joints (DeLaN) trained by the project trainer; returns (model, history).
    ``compile``: the loss under ``torch.compile`` (as ``ros-lnn train --compile``); ``free_joints``: the
    joint names (their count is the model's); ``device``: cpu (one thread), cuda, auto."""
    import torch

    from ros_lnn.models.servo_lnn import ServoLNN
    from ros_lnn.training.trainer import TrainConfig, seed_everything
    from ros_lnn.training.trainer import train as run_training

    seed_everything(seed)
    model = ServoLNN(
        list(free_joints),
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
        device=device,
        dtype="float32",
        losses=tuple(losses),
        with_qe=False,
        log_every=log_every,
        val_every=epochs + 1,
        threads=1,
        compile=compile,
    )
    history = run_training(
        model, {k: train[k] for k in ("q", "qd", "qdd", "Q")}, None, cfg, progress=progress
    )
    model.to(torch.float32)
    return model, history


def _drive(t, values, starts, hold: bool):
    """``f(τ) -> (B, n)``: ``values`` (T, n) sampled at ``t`` as seen ``τ`` after each start index (B,):
    linear in time, or held over a sample (zero-order hold); held past the end."""
    import torch

    t = np.asarray(t, float)
    values = np.asarray(values, float)
    t0 = t[np.asarray(starts)]
    dt = float(np.median(np.diff(t)))

    def at(tau):
        if hold:
            k = np.minimum(len(t) - 1, np.asarray(starts) + int(np.floor(tau / dt + 1e-9)))
            return torch.as_tensor(values[k])
        return torch.as_tensor(np.stack([np.interp(t0 + tau, t, v) for v in values.T], -1))

    return at


def _errors(derivative, traj, starts, steps: int, method: str, sub: int, drive) -> np.ndarray:
    """Joint-position error (steps + 1, B) of rollouts from ``starts`` over ``steps`` data samples."""
    import torch

    from ros_lnn_lab.studies.rollouts import rollout

    starts = np.asarray(starts)
    dt = float(np.median(np.diff(traj["t"])))
    q0, v0 = (torch.as_tensor(traj[k][starts]) for k in ("q", "qd"))
    z = rollout(derivative, q0, v0, steps * dt, dt / sub, method, drive).numpy()[::sub, :, :2]
    truth = np.stack([traj["q"][starts + k] for k in range(steps + 1)])
    with np.errstate(over="ignore", invalid="ignore"):  # a diverged rollout: inf
        err = np.linalg.norm(z - truth, axis=-1)
    return np.where(np.isfinite(err), err, np.inf)


def rollout_letters(
    model,
    test: dict,
    *,
    methods=("euler", "symplectic_euler", "rk4"),
    substeps=(1, 10),
    horizons=(0.2, 0.5, 1.0),
    diverged=0.1,
) -> dict:
    """Rollouts of the held-out letters under their recorded torques (module docstring), for every method
    and step (the data's and ``substeps`` finer):

    * ``windows``: from every sample of every letter over ``horizons`` [s]: the median joint-position error
      [rad] at each horizon, of the model and of the same integrator driven by the recorded q̈ (the floor);
    * ``whole``: each whole letter from its first sample: the time until the error exceeds ``diverged`` rad
      and the RMS error over the letter (medians over the letters)."""
    model = model.double().eval()

    def learned(q, v, Q):
        return v, model(q, v, None, Q)["qdd"]

    def replay(q, v, recorded):
        return v, recorded  # driven by the recorded q̈ in place of a force

    letters = letter_trajectories(test)
    dt_data = float(np.median(np.diff(next(iter(letters.values()))["t"])))
    windows: dict = {}
    whole: dict = {}
    for method in methods:
        hold = method != "rk4"  # Euler's steps see the sample's torque; RK4's midpoints a linear one
        for sub in substeps:
            key = f"{method}, dt = {1e3 * dt_data / sub:g} ms"
            errs: dict[str, list[np.ndarray]] = {"model": [], "recorded_qdd": []}
            per_letter = {}
            for name, traj in letters.items():
                dt = float(np.median(np.diff(traj["t"])))
                steps = int(round(max(horizons) / dt))
                starts = np.arange(len(traj["t"]) - steps)
                for label, f, values in (
                    ("model", learned, traj["Q"]),
                    ("recorded_qdd", replay, traj["qdd"]),
                ):
                    e = _errors(f, traj, starts, steps, method, sub, _drive(traj["t"], values, starts, hold))
                    errs[label].append(e[[int(round(h / dt)) for h in horizons]])
                n = len(traj["t"]) - 1
                e = _errors(learned, traj, [0], n, method, sub, _drive(traj["t"], traj["Q"], [0], hold))[:, 0]
                over = np.flatnonzero(e > diverged)
                per_letter[name] = {
                    "seconds_below": float((over[0] if len(over) else n + 1) * dt),
                    "letter_seconds": float(n * dt),
                    "rms": float(np.sqrt(np.mean(e**2))),
                }
            windows[key] = {
                label: {
                    f"{h:g} s": float(np.median(np.concatenate([x[i] for x in v])))
                    for i, h in enumerate(horizons)
                }
                for label, v in errs.items()
            }
            whole[key] = {
                "per_letter": per_letter,
                "median_seconds_below": float(np.median([r["seconds_below"] for r in per_letter.values()])),
                "median_rms": float(np.median([r["rms"] for r in per_letter.values()])),
            }
    return {"horizons": list(horizons), "diverged_rad": diverged, "windows": windows, "whole": whole}


def format_rollouts(rollouts: dict) -> str:
    hs = [f"{h:g} s" for h in rollouts["horizons"]]
    lines = [
        f"| integrator, step | model: median error at {' / '.join(hs)} [rad] | recorded q̈ (floor) at "
        f"{' / '.join(hs)} | whole letter: s until error > {rollouts['diverged_rad']:g} rad |",
        "| --- | --- | --- | --- |",
    ]
    for key, w in rollouts["windows"].items():
        model, floor = (" / ".join(f"{w[label][h]:.2g}" for h in hs) for label in ("model", "recorded_qdd"))
        lines.append(f"| {key} | {model} | {floor} | {rollouts['whole'][key]['median_seconds_below']:.2f} |")
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
    """:func:`run_study` in keywords (``ros-lnn bench delan``'s call)."""
    config = DEFAULTS.replace(
        data=data, epochs=epochs, quick=quick, output=plot_dir and Path(plot_dir), progress=progress
    )
    return run_study(config, rollouts=rollouts)


def run_study(config: StudyConfig = DEFAULTS, *, rollouts: bool = True) -> dict:
    """Train the published DeLaN set-up for ``config.epochs`` from its seed on the 17 training letters of
    the character data at ``config.data`` (file or folder; None:
    :func:`~ros_lnn.physics.delan_data.find_character_data`'s default), score it on e, q, v against the
    published figures, time it, roll the test letters out (plotted into ``config.output``)."""
    epochs, quick, progress, plot_dir = config.epochs, config.quick, config.progress, config.output
    train, test = load_character_data(config.data)
    progress(
        f"DeLaN character data: {len(train['q'])} training samples (17 letters), {len(test['q'])} test "
        f"samples (letters {', '.join(TEST_LETTERS)}); training {epochs} epochs, 64x2 softplus, batch 512, "
        "lr 5e-4, weight decay 1e-5, losses inv+fwd, float32 CPU"
    )
    model, history = train_delan(
        train, epochs=epochs, seed=config.seed, log_every=max(1, epochs // 20), progress=progress
    )
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
    """Median error against the horizon, model and recorded-q̈ floor, for every integrator and step."""
    from pathlib import Path

    plt = pyplot()

    Path(out).mkdir(parents=True, exist_ok=True)
    hs = rollouts["horizons"]
    fig, ax = plt.subplots(figsize=(7, 4.2))
    for i, (key, w) in enumerate(rollouts["windows"].items()):
        ax.loglog(hs, [w["model"][f"{h:g} s"] for h in hs], "o-", color=f"C{i}", label=key)
        ax.loglog(hs, [w["recorded_qdd"][f"{h:g} s"] for h in hs], "x:", color=f"C{i}")
    ax.set_xlabel("horizon [s]")
    ax.set_ylabel("median joint-position error [rad]")
    ax.set_title("DeLaN rollouts from every held-out sample (o: model, x: recorded q̈)")
    ax.legend(fontsize=7)
    return save_figure(fig, Path(out) / "delan_rollouts.png")


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
