"""Trainer of every model family: Adam (ServoLNN paper: lr 1e-4, weight decay 1e-5, batch 2048,
10 000 epochs), deterministic seed, data resident on the device, no host synchronisation between log
points, validation by trial or trajectory, early stopping, atomic checkpoints and resume.

The losses come from the model (:func:`~ros_lnn.models.losses.model_losses`): ServoLNN/DeLaN the
paper's inverse/forward/power terms, the acceleration families (LNN, LNN-nh, TLNN, neural ODE, whose
forward is ``model(q, qd) -> q̈``) the single ``qdd`` term. The caller sets the model's input
normalisation before training (``ServoLNN.set_normalisation``; ``model.qd_scale`` for the others,
:func:`set_qd_scale`).

Non-finite batches (``skip_non_finite``, on by default for the acceleration families, whose learned
mass matrix can be singular in one batch): on the device, the step's gradients are set to zero and the
batch is left out of the logged mean; the number skipped is in ``history["skipped"]``. Unlike skipping
the step on the host, Adam's moments and step count still advance on such a batch (its update is
the decayed momentum alone). ``grad_clip`` clips the gradient norm (``clip_grad_norm_``, on device)."""
from __future__ import annotations

import os
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import torch

from ..models.losses import NEEDS_QE, batch_keys, is_acceleration_model, model_losses
from . import distributed
from .checkpoint import load_resume, resume_extra
from .data import FIELDS, data_hash
from .early_stopping import EarlyStopping

DTYPES = {"float32": torch.float32, "float64": torch.float64}


@dataclass
class TrainConfig:
    epochs: int = 10_000
    batch: int = 2048
    lr: float = 1e-4
    weight_decay: float = 1e-5
    seed: int = 0
    device: str = "auto"
    dtype: str = "float32"
    losses: tuple = ()            # empty: chosen from the data (select_losses)
    with_qe: bool = True
    log_every: int = 100          # epochs between progress lines (the only host syncs)
    val_every: int = 500          # epochs between validations on the test trials
    checkpoint_dir: str | None = None
    checkpoint_every: int = 1000
    threads: int | None = None    # torch intra-op threads on CPU (None: 1 — this net's ops are too small to split)
    resume: str | None = None     # checkpoint (file or folder with last.pt) to continue from
    patience: int = 0             # early stopping: validations without improvement (0: off)
    min_delta: float = 0.0        # smaller improvements of the monitored metric do not count
    monitor: str = ""             # validation metric of early stopping (lower is better; "": qdd_f_nmse, qdd_nmse for acceleration models)
    compile: bool | str = False   # torch.compile the loss (True: inductor, or a backend name)
    grad_clip: float | None = None  # max gradient norm (None: off)
    skip_non_finite: bool | None = None  # zero the step of a non-finite batch (None: for acceleration models)
    extra: dict = field(default_factory=dict)


def resolve_device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(name)


def seed_everything(seed: int) -> None:
    torch.manual_seed(seed)
    np.random.seed(seed % 2**32)


def default_monitor(model) -> str:
    return "qdd_nmse" if is_acceleration_model(model) else "qdd_f_nmse"


def set_qd_scale(model, qd) -> None:
    """Input normalisation of the acceleration models: per-coordinate std of the training q̇."""
    qd = torch.as_tensor(np.asarray(qd), dtype=torch.float64)
    model.qd_scale.copy_(qd.std(0).clamp_min(1e-6).to(model.qd_scale))


@torch.no_grad()
def evaluate_acceleration(model, samples: dict) -> dict:
    """``qdd_mse`` (mean over samples of the squared error summed over coordinates), ``qdd_nmse``
    (mean squared error over the variance of q̈) and ``non_finite`` (samples with a non-finite q̈̂)."""
    dev = next(model.parameters()).device
    dt = next(model.parameters()).dtype
    q, qd = (torch.as_tensor(np.asarray(samples[k]), device=dev, dtype=dt) for k in ("q", "qd"))
    pred, true = model(q, qd).double().cpu().numpy(), np.asarray(samples["qdd"])
    err = (pred - true) ** 2
    return {"qdd_mse": float(np.mean(err.sum(-1))), "qdd_nmse": float(err.mean() / np.var(true)),
            "non_finite": int((~np.isfinite(pred)).any(-1).sum())}


@torch.no_grad()
def evaluate(model, samples: dict) -> dict:
    """Accuracy on held-out samples (model order; ``Q_e`` is *not* used as an input):
    ``qdd_f_nmse`` = mean (q̈̂_f − q̈_f)² / variance of q̈_f; ``Q_e_rel_rms`` = rms(Q̂_e − Q_e) / rms(Q_e)
    (forward mode, as the estimator runs); ``M_rel_err`` = rms‖M̂ − M‖_F / rms‖M‖_F;
    ``V_rel_err`` and ``E_rel_err`` = rms of the error after removing its mean (V is defined up to a
    constant) over the standard deviation of the truth; per trial ``qdd_f_nmse``.
    Acceleration models: :func:`evaluate_acceleration`."""
    if is_acceleration_model(model):
        return evaluate_acceleration(model, samples)
    dev = next(model.parameters()).device
    dt = next(model.parameters()).dtype
    t = {k: torch.as_tensor(np.asarray(samples[k]), device=dev, dtype=dt) for k in ("q", "qd", "qdd", "Q")}
    n_f = model.n_f
    out = model(t["q"], t["qd"], t["qdd"][:, n_f:], t["Q"][:, :n_f])
    inv = model.inverse(t["q"], t["qd"], t["qdd"])
    get = lambda x: x.detach().cpu().double().numpy()  # noqa: E731
    qdd_f, qdd_f_hat = np.asarray(samples["qdd"])[:, :n_f], get(out["qdd"])[:, :n_f]
    res = {"qdd_f_nmse": float(np.mean((qdd_f_hat - qdd_f) ** 2) / np.var(qdd_f))}
    if model.n_e:
        Q_e = np.asarray(samples["Q"])[:, n_f:]
        rms = np.sqrt(np.mean(Q_e ** 2))
        res["Q_e_rel_rms"] = float(np.sqrt(np.mean((get(out["Q_e"]) - Q_e) ** 2)) / rms)
        res["Q_e_rel_rms_inverse"] = float(np.sqrt(np.mean((get(inv["Q_e"]) - Q_e) ** 2)) / rms)
    Q_f = np.asarray(samples["Q"])[:, :n_f]
    res["Q_f_rms_inverse"] = float(np.sqrt(np.mean((get(inv["Q"])[:, :n_f] - Q_f) ** 2)))
    if "M" in samples:
        M = np.asarray(samples["M"])
        res["M_rel_err"] = float(np.sqrt(np.mean(np.sum((get(out["M"]) - M) ** 2, (-1, -2))) /
                                         np.mean(np.sum(M ** 2, (-1, -2)))))
    for key in ("V", "E"):
        if key in samples:
            truth = np.asarray(samples[key])
            err = get(out[key]) - truth
            res[f"{key}_rel_err"] = float(np.std(err) / np.std(truth))
    if "trial" in samples and "names" in samples:
        trial = np.asarray(samples["trial"])
        per = {}
        for i in np.unique(trial):
            sel = trial == i
            per[str(int(i))] = float(np.mean((qdd_f_hat[sel] - qdd_f[sel]) ** 2) / max(np.var(qdd_f[sel]), 1e-12))
        res["qdd_f_nmse_per_trial"] = per
    return res


def make_adam(params, lr: float, weight_decay: float):
    """Adam with torch's fused update (one kernel for all parameters; CPU and CUDA floating point), else
    the default implementation: same algorithm, the per-step optimiser overhead is what differs."""
    params = list(params)
    try:
        return torch.optim.Adam(params, lr=lr, weight_decay=weight_decay, fused=True)
    except (RuntimeError, ValueError):
        return torch.optim.Adam(params, lr=lr, weight_decay=weight_decay)


def save_checkpoint(path, model, optimizer, epoch: int, history: dict, extra: dict | None = None) -> None:
    """Write a checkpoint atomically (temporary file, then ``os.replace``)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    state = {"model_config": model.config(), "model_state": model.state_dict(),
             "optimizer_state": optimizer.state_dict() if optimizer is not None else None,
             "epoch": epoch, "history": history, "extra": extra or {}}
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        torch.save(state, tmp)
        os.replace(tmp, path)
    finally:  # an interrupted save leaves the previous checkpoint and no partial file
        if tmp.exists():
            tmp.unlink()


def load_checkpoint(path, map_location="cpu"):
    """(model, checkpoint dict) from a checkpoint written by :func:`save_checkpoint`."""
    from ..errors import ModelError
    from ..models.servo_lnn import ServoLNN

    path = Path(path)
    if not path.is_file():
        raise ModelError(f"checkpoint not found: {path}; train one with: ros-lnn train --checkpoint-dir DIR")
    try:
        ckpt = torch.load(path, map_location=map_location, weights_only=False)
        model = ServoLNN.from_config(ckpt["model_config"])
        model.load_state_dict(ckpt["model_state"])
    except Exception as exc:  # noqa: BLE001 - torch raises many types for a bad file
        raise ModelError(f"{path}: not a ros_lnn checkpoint ({type(exc).__name__}: {exc})") from exc
    return model, ckpt


def train(model, train_samples: dict, val_samples: dict | None = None, config: TrainConfig | None = None,
          progress=print) -> dict:
    """Train ``model`` in place; returns the history (losses per log point, validations, timing)."""
    cfg = config or TrainConfig()
    device, dtype = resolve_device(cfg.device), DTYPES[cfg.dtype]
    if device.type == "cpu":
        torch.set_num_threads(int(cfg.threads or 1))
    dist = distributed.init_from_env(device)  # torchrun: this rank's device; else unchanged
    device = dist.device
    if not dist.is_main:
        progress = lambda line: None  # noqa: E731
    names = tuple(cfg.losses) or model_losses(model, cfg.with_qe)
    if not cfg.with_qe and NEEDS_QE & set(names):
        raise ValueError(f"losses {sorted(NEEDS_QE & set(names))} need measured Q_e (with_qe is False)")
    model.to(device=device, dtype=dtype).train()
    data = {k: torch.as_tensor(np.asarray(train_samples[k]), device=device, dtype=dtype)
            for k in batch_keys(names)}
    guard = is_acceleration_model(model) if cfg.skip_non_finite is None else bool(cfg.skip_non_finite)
    params = [p for p in model.parameters() if p.requires_grad]
    N = data["q"].shape[0]
    optimizer = make_adam(model.parameters(), cfg.lr, cfg.weight_decay)
    gen = torch.Generator(device=device)
    gen.manual_seed(cfg.seed)
    history = {"epoch": [], "loss": [], "terms": {k: [] for k in names}, "val": [], "losses": list(names),
               "config": asdict(cfg) | {"losses": list(names)}, "device": str(device)}
    if guard:
        history["skipped"] = []
    # loss, each term (and with the guard, the count of finite batches) summed between log points
    acc = torch.zeros(len(names) + 1 + guard, device=device, dtype=torch.float64)
    steps_since, first, prior_seconds, stop = 0, 1, 0.0, False
    monitor = cfg.monitor or default_monitor(model)
    stopper = EarlyStopping(cfg.patience, cfg.min_delta, monitor)
    fingerprint = data_hash({k: train_samples.get(k, ()) for k in FIELDS})  # Q absent for acceleration models
    if cfg.resume:
        config = history["config"]
        done, history, steps_since = load_resume(cfg.resume, model, optimizer, gen, acc, stopper, config,
                                                 fingerprint, dist.world_size)
        first, prior_seconds = done + 1, history.get("seconds", 0.0)
        history["config"] = config
        history.setdefault("resumed", []).append({"from": str(cfg.resume), "epoch": done})
        progress(f"resumed from {cfg.resume} after epoch {done}")
    step, describe = distributed.make_loss_step(model, names, dist, cfg.compile, progress)
    start = time.perf_counter()
    for epoch in range(first, cfg.epochs + 1):
        perm = torch.randperm(N, generator=gen, device=device)
        for i in range(0, N, cfg.batch):
            idx = distributed.shard(perm[i:i + cfg.batch], dist)
            batch = {k: v[idx] for k, v in data.items()}
            terms = step(batch)
            loss = sum(terms.values())
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            logged = [loss.detach(), *[terms[k].detach() for k in names]]
            if guard:  # all on the device: no host sync
                finite = torch.isfinite(loss.detach())
                for p in params:
                    if p.grad is not None:
                        p.grad.copy_(torch.where(finite, p.grad, 0.0))
                logged = [torch.where(finite, v, 0.0) for v in logged] + [finite.to(loss.dtype)]
            if cfg.grad_clip is not None:
                torch.nn.utils.clip_grad_norm_(params, cfg.grad_clip)
            optimizer.step()
            acc += torch.stack(logged).double()
            steps_since += 1
        if epoch % cfg.log_every == 0 or epoch == cfg.epochs:
            sums = distributed.mean_over_ranks(acc, dist).tolist()  # the one host sync per log point
            skipped = ""
            if guard:
                finite, sums = sums[-1], sums[:-1]
                history["skipped"].append(int(round(steps_since - finite)))
                means = [v / finite if finite else float("nan") for v in sums]  # nan: every batch skipped
                skipped = f"  skipped {history['skipped'][-1]}"
            else:
                means = [v / steps_since for v in sums]
            acc.zero_()
            steps_since = 0
            history["epoch"].append(epoch)
            history["loss"].append(means[0])
            for k, v in zip(names, means[1:]):
                history["terms"][k].append(v)
            elapsed = time.perf_counter() - start
            rate = (epoch - first + 1) / elapsed
            progress(f"epoch {epoch}/{cfg.epochs}  loss {means[0]:.3e}  "
                     + "  ".join(f"{k} {v:.2e}" for k, v in zip(names, means[1:])) + skipped
                     + f"  {rate:.1f} epochs/s  eta {(cfg.epochs - epoch) / rate:.0f} s")
        if val_samples is not None and (epoch % cfg.val_every == 0 or epoch == cfg.epochs):
            model.eval()
            metrics = evaluate(model, val_samples)
            model.train()
            history["val"].append({"epoch": epoch, **metrics})
            progress(f"  validation @ {epoch}: {monitor} {metrics.get(monitor, float('nan')):.2e}"
                     + (f"  Q_e rel rms {metrics['Q_e_rel_rms']:.2%}" if "Q_e_rel_rms" in metrics else "")
                     + (f"  non-finite {metrics['non_finite']}" if metrics.get("non_finite") else ""))
            stop = stopper.update(epoch, metrics, model)
        if cfg.checkpoint_dir and dist.is_main and (epoch % cfg.checkpoint_every == 0 or epoch == cfg.epochs or stop):
            history["seconds"] = prior_seconds + time.perf_counter() - start
            save_checkpoint(Path(cfg.checkpoint_dir) / "last.pt", model, optimizer, epoch, history,
                            extra=resume_extra(gen, acc, steps_since, stopper, fingerprint, dist.world_size))
        if stop:
            progress(f"early stop after epoch {epoch}: {stopper.monitor} did not improve by more than "
                     f"{stopper.min_delta:g} in {stopper.patience} validations (best {stopper.best:.3e} @ {stopper.best_epoch})")
            break
    history["seconds"] = prior_seconds + time.perf_counter() - start
    history["early_stopping"] = stopper.summary()
    history["run"] = describe()
    if stopper.restore_best(model):
        progress(f"restored the best weights (epoch {stopper.best_epoch}, {stopper.monitor} {stopper.best:.3e})")
    model.eval()
    return history
