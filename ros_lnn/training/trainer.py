"""Trainer of every model family: Adam (ServoLNN paper: lr 1e-4, weight decay 1e-5, batch 2048,
10 000 epochs), deterministic seed, data resident on the device, no host synchronisation between log
points, validation by trial or trajectory, early stopping, atomic checkpoints and resume.

The model's family (:mod:`ros_lnn.families`) decides the losses (ServoLNN/DeLaN the paper's
inverse/forward/power terms, the acceleration families LNN, LNN-nh, TLNN and neural ODE the single
``qdd`` term), the validation metrics and the one early stopping watches. The caller sets the model's
input normalisation before training (the family's ``normalise``).

Non-finite batches (``skip_non_finite``, on by default for the acceleration families, whose learned
mass matrix can be singular in one batch): on the device, the step's gradients are set to zero and the
batch is left out of the logged mean; the number skipped is in ``history["skipped"]``. Unlike skipping
the step on the host, Adam's moments and step count still advance on such a batch (its update is
the decayed momentum alone). ``grad_clip`` clips the gradient norm (``clip_grad_norm_``, on device)."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from ..families import family_of
from ..models.losses import NEEDS_QE, batch_keys
from ..models.normalisation import set_qd_scale
from . import distributed
from .checkpoint import load_resume, resume_extra, save_checkpoint
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
    losses: tuple = ()  # empty: the family's for the data (with_qe)
    with_qe: bool = True
    log_every: int = 100  # epochs between progress lines (the only host syncs)
    val_every: int = 500  # epochs between validations on the test trials
    checkpoint_dir: str | None = None
    checkpoint_every: int = 1000
    threads: int | None = (
        None  # torch intra-op threads on CPU (None: 1 — this net's ops are too small to split)
    )
    resume: str | None = None  # checkpoint (file or folder with last.pt) to continue from
    patience: int = 0  # early stopping: validations without improvement (0: off)
    min_delta: float = 0.0  # smaller improvements of the monitored metric do not count
    monitor: str = ""  # validation metric of early stopping (lower is better; "": the family's)
    compile: bool | str = False  # torch.compile the loss (True: inductor, or a backend name)
    grad_clip: float | None = None  # max gradient norm (None: off)
    skip_non_finite: bool | None = None  # zero the step of a non-finite batch (None: as the family says)
    extra: dict = field(default_factory=dict)


def resolve_device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(name)


def seed_everything(seed: int) -> None:
    torch.manual_seed(seed)
    np.random.seed(seed % 2**32)


def default_monitor(model: nn.Module) -> str:
    return family_of(model).monitor


def evaluate(model: nn.Module, samples: dict) -> dict:
    """Accuracy of ``model`` on held-out samples, as its family measures it."""
    return family_of(model).evaluate(model, samples)


def make_adam(params, lr: float, weight_decay: float) -> torch.optim.Adam:
    """Adam with torch's fused update (one kernel for all parameters; CPU and CUDA floating point), else
    the default implementation: same algorithm, the per-step optimiser overhead is what differs."""
    params = list(params)
    try:
        return torch.optim.Adam(params, lr=lr, weight_decay=weight_decay, fused=True)
    except (RuntimeError, ValueError):
        return torch.optim.Adam(params, lr=lr, weight_decay=weight_decay)


def train(
    model: nn.Module,
    train_samples: dict,
    val_samples: dict | None = None,
    config: TrainConfig | None = None,
    progress: Callable[[str], None] = print,
) -> dict:
    """Train ``model`` in place; returns the history (losses per log point, validations, timing)."""
    cfg = config or TrainConfig()
    device, dtype = resolve_device(cfg.device), DTYPES[cfg.dtype]
    if device.type == "cpu":
        torch.set_num_threads(int(cfg.threads or 1))
    dist = distributed.init_from_env(device)  # torchrun: this rank's device; else unchanged
    device = dist.device
    if not dist.is_main:
        progress = lambda line: None  # noqa: E731
    family = family_of(model)
    names = tuple(cfg.losses) or family.losses(model, cfg.with_qe)
    if not cfg.with_qe and NEEDS_QE & set(names):
        raise ValueError(f"losses {sorted(NEEDS_QE & set(names))} need measured Q_e (with_qe is False)")
    model.to(device=device, dtype=dtype).train()
    data = {
        k: torch.as_tensor(np.asarray(train_samples[k]), device=device, dtype=dtype)
        for k in batch_keys(names)
    }
    guard = family.skip_non_finite if cfg.skip_non_finite is None else bool(cfg.skip_non_finite)
    params = [p for p in model.parameters() if p.requires_grad]
    N = data["q"].shape[0]
    optimizer = make_adam(model.parameters(), cfg.lr, cfg.weight_decay)
    gen = torch.Generator(device=device)
    gen.manual_seed(cfg.seed)
    history: dict[str, Any] = {
        "epoch": [],
        "loss": [],
        "terms": {k: [] for k in names},
        "val": [],
        "losses": list(names),
        "config": asdict(cfg) | {"losses": list(names)},
        "device": str(device),
    }
    if guard:
        history["skipped"] = []
    # loss, each term (and with the guard, the count of finite batches) summed between log points
    acc = torch.zeros(len(names) + 1 + guard, device=device, dtype=torch.float64)
    steps_since, first, prior_seconds, stop = 0, 1, 0.0, False
    monitor = cfg.monitor or family.monitor
    stopper = EarlyStopping(cfg.patience, cfg.min_delta, monitor, keep_best=family.keep_best_weights or None)
    fingerprint = data_hash({k: train_samples.get(k, ()) for k in FIELDS})  # Q absent for acceleration models
    if cfg.resume:
        settings = history["config"]
        done, history, steps_since = load_resume(
            cfg.resume, model, optimizer, gen, acc, stopper, settings, fingerprint, dist.world_size
        )
        first, prior_seconds = done + 1, history.get("seconds", 0.0)
        history["config"] = settings
        history.setdefault("resumed", []).append({"from": str(cfg.resume), "epoch": done})
        progress(f"resumed from {cfg.resume} after epoch {done}")
    step, describe = distributed.make_loss_step(model, names, dist, cfg.compile, progress)
    # wall time of the loop (``seconds``) and, apart, the process CPU time, validations and checkpoints in it
    start, cpu_start = time.perf_counter(), time.process_time()
    prior_cpu = history.get("cpu_seconds", 0.0)
    spent = {
        "validation_seconds": history.get("validation_seconds", 0.0),
        "checkpoint_seconds": history.get("checkpoint_seconds", 0.0),
    }
    for epoch in range(first, cfg.epochs + 1):
        perm = torch.randperm(N, generator=gen, device=device)
        for i in range(0, N, cfg.batch):
            idx = distributed.shard(perm[i : i + cfg.batch], dist)
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
            progress(
                f"epoch {epoch}/{cfg.epochs}  loss {means[0]:.3e}  "
                + "  ".join(f"{k} {v:.2e}" for k, v in zip(names, means[1:]))
                + skipped
                + f"  {rate:.1f} epochs/s  eta {(cfg.epochs - epoch) / rate:.0f} s"
            )
        if val_samples is not None and (epoch % cfg.val_every == 0 or epoch == cfg.epochs):
            model.eval()
            t_val = time.perf_counter()
            metrics = evaluate(model, val_samples)
            spent["validation_seconds"] += time.perf_counter() - t_val
            model.train()
            history["val"].append({"epoch": epoch, **metrics})
            progress(
                f"  validation @ {epoch}: {monitor} {metrics.get(monitor, float('nan')):.2e}"
                + (f"  Q_e rel rms {metrics['Q_e_rel_rms']:.2%}" if "Q_e_rel_rms" in metrics else "")
                + (f"  non-finite {metrics['non_finite']}" if metrics.get("non_finite") else "")
            )
            stop = stopper.update(epoch, metrics, model)
        if (
            cfg.checkpoint_dir
            and dist.is_main
            and (epoch % cfg.checkpoint_every == 0 or epoch == cfg.epochs or stop)
        ):
            t_ckpt = time.perf_counter()
            history["seconds"] = prior_seconds + t_ckpt - start
            history["cpu_seconds"] = prior_cpu + time.process_time() - cpu_start
            history.update(spent)
            save_checkpoint(
                Path(cfg.checkpoint_dir) / "last.pt",
                model,
                optimizer,
                epoch,
                history,
                extra=resume_extra(gen, acc, steps_since, stopper, fingerprint, dist.world_size),
            )
            spent["checkpoint_seconds"] += time.perf_counter() - t_ckpt
        if stop:
            progress(
                f"early stop after epoch {epoch}: {stopper.monitor} did not improve by more than "
                f"{stopper.min_delta:g} in {stopper.patience} validations (best {stopper.best:.3e} @ "
                f"{stopper.best_epoch})"
            )
            break
    history["seconds"] = prior_seconds + time.perf_counter() - start
    history["cpu_seconds"] = prior_cpu + time.process_time() - cpu_start
    history.update(spent)
    history["early_stopping"] = stopper.summary()
    history["run"] = describe()
    if stopper.restore_best(model):
        progress(
            f"restored the best weights (epoch {stopper.best_epoch}, {stopper.monitor} {stopper.best:.3e})"
        )
    model.eval()
    return history


def train_acceleration(
    model: nn.Module,
    data: dict,
    *,
    epochs: int = 100,
    batch: int = 256,
    lr: float = 1e-3,
    seed: int = 0,
    progress: Callable[[str], None] | None = None,
    log_every: int | None = None,
    dtype: torch.dtype = torch.float64,
    clip: float = 10.0,
    forced: bool = False,
) -> dict:
    """Fit ``q̈`` of an acceleration-family model by mean squared error (the paper's loss; an HNN also
    fits ``q̇``: its family's losses), Adam, through :func:`train` (on the CPU, no validation), as the zoo
    studies do; sets ``model.qd_scale`` from the data; non-finite batches are skipped on the device.
    ``forced``: the data's ``Q`` (generalised forces) is a model input. ``log_every``: epochs between
    progress lines (None: five a run, as the studies print them). Returns the history (``epoch``,
    ``loss``, ``seconds`` and the trainer's other keys)."""
    from ..models.losses import forced as with_forces

    torch.manual_seed(seed)
    set_qd_scale(model, data["qd"])
    names = family_of(model).losses(model, False)
    cfg = TrainConfig(
        epochs=epochs,
        batch=batch,
        lr=lr,
        weight_decay=0.0,
        seed=seed,
        device="cpu",
        dtype={torch.float32: "float32", torch.float64: "float64"}[dtype],
        losses=with_forces(names) if forced else names,
        log_every=max(1, min(log_every or epochs // 5, epochs)),
        grad_clip=clip,
        skip_non_finite=True,
        threads=torch.get_num_threads(),
    )
    say = (lambda line: progress(f"{model.family} {line}")) if progress else (lambda line: None)
    return train(model, data, None, cfg, progress=say)
