"""``ros-lnn bench delan``: DeLaN (= ServoLNN without servo joints) on the DeLaN character data set,
scored the way the DeLaN reference implementation scores it (EQUATIONS.md §2).

Data: ``character_data.npz`` (README beside it), 20 letters of a simulated 2-DoF arm; test letters
e, q, v, train on the other 17. Error measure: mean over test samples of the squared error summed over
both joints, for the torque and its inertial, Coriolis+centrifugal and gravity parts and for the power
``q̇ᵀτ`` (the model's ``Ė = Ṫ + V̇``). Per-sample time: one sample, inverse mode, all outputs, torch CPU.
"""
from __future__ import annotations

import time

import numpy as np

from ..physics.delan_data import TEST_LETTERS, load_character_data

#: Published DeLaN figures (README of the data set). Gravity equals inertial there, apparently a typo
#: in the source; both are kept as printed.
PUBLISHED = {"torque": 4.327e-4, "inertial": 7.338e-4, "coriolis": 2.227e-4, "gravity": 7.338e-4,
             "power": 4.456e-5, "ms_per_sample": 0.659}


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
    return {"torque": mse(get(out["Q"]), samples["Q"]),
            "inertial": mse(get(out["Q_inertial"]), samples["Q_m"]),
            "coriolis": mse(get(out["Q_coriolis"]), samples["Q_c"]),
            "gravity": mse(get(out["Q_conservative"]), samples["Q_g"]),
            "power": float(np.mean((get(out["E_dot"]) - power_true) ** 2)),
            "mass_matrix_rel": float(np.sqrt(np.mean(np.sum((get(out["M"]) - samples["M"]) ** 2, (-1, -2)))
                                             / np.mean(np.sum(samples["M"] ** 2, (-1, -2)))))}


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


def train_delan(train, *, epochs=10_000, batch=512, lr=5e-4, weight_decay=1e-5, hidden=(64, 64), seed=0,
                epsilon=1e-3, losses=("inv", "fwd"), progress=print, log_every=500):
    """A ServoLNN with no servo joints (DeLaN) trained by the project trainer; returns (model, history)."""
    import torch

    from ..models.servo_lnn import ServoLNN
    from ..training.trainer import TrainConfig, seed_everything
    from ..training.trainer import train as run_training

    seed_everything(seed)
    model = ServoLNN(["joint_1", "joint_2"], [], hidden=hidden, activation="softplus",
                     diag_activation="softplus", epsilon=epsilon)
    cfg = TrainConfig(epochs=epochs, batch=batch, lr=lr, weight_decay=weight_decay, seed=seed, device="cpu",
                      dtype="float32", losses=tuple(losses), with_qe=False, log_every=log_every,
                      val_every=epochs + 1, threads=1)
    history = run_training(model, {k: train[k] for k in ("q", "qd", "qdd", "Q")}, None, cfg, progress=progress)
    model.to(torch.float32)
    return model, history


def bench_delan(args) -> dict:
    quick = bool(getattr(args, "quick", False))
    epochs = getattr(args, "epochs", None) or (300 if quick else 10_000)
    train, test = load_character_data(getattr(args, "data", None))
    print(f"DeLaN character data: {len(train['q'])} training samples (17 letters), {len(test['q'])} test "
          f"samples (letters {', '.join(TEST_LETTERS)}); training {epochs} epochs, 64x2 softplus, batch 512, "
          "lr 5e-4, weight decay 1e-5, losses inv+fwd, float32 CPU")
    model, history = train_delan(train, epochs=epochs, log_every=max(1, epochs // 20))
    errors = delan_errors(model, test)
    ms = time_per_sample(model, test, repeats=300 if quick else 2000)
    result = {"epochs": epochs, "train_seconds": history["seconds"], "test": errors,
              "train": delan_errors(model, train), "ms_per_sample": ms, "published": PUBLISHED}
    print(f"{'quantity':<12}{'this':>12}{'DeLaN':>12}{'ratio':>8}")
    for key in ("torque", "inertial", "coriolis", "gravity", "power"):
        print(f"{key:<12}{errors[key]:>12.3e}{PUBLISHED[key]:>12.3e}{errors[key] / PUBLISHED[key]:>8.2f}")
    print(f"{'ms/sample':<12}{ms:>12.3f}{PUBLISHED['ms_per_sample']:>12.3f}   (this machine vs AMD 3950)")
    print(f"mass matrix relative error {errors['mass_matrix_rel']:.2e}; training took {history['seconds']:.0f} s")
    return result
