"""The minibatch loop of the small models trained beside the families' trainer — the arm's learned
residual and its DeLaN (:mod:`ros_lnn.arm.residual`, :mod:`ros_lnn.arm.delan`): shuffled minibatches
of samples resident in memory, one optimizer step each, a validation after every epoch, the
package's one :class:`ros_lnn.training.early_stopping.EarlyStopping` (the best weights kept, the
validation error before any step counted as epoch −1) and a time limit.

:func:`ros_lnn.training.trainer.train` is the families' loop (device-resident data, no host
synchronisation between log points, torchrun, checkpoints and resume); this one is for models of a few
thousand weights trained in seconds on the CPU, where a validation per epoch costs nothing."""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from .early_stopping import EarlyStopping


@dataclass
class LoopResult:
    epochs_run: int
    best_epoch: int  # −1: no epoch beat the start
    best: float  # the best validation error (the start's when no epoch beat it)
    start: float  # the validation error before any step
    stopped_early: bool
    timed_out: bool
    seconds: float
    history: list = field(default_factory=list)  # (epoch, mean training loss, validation error)


def fit_minibatches(
    model: torch.nn.Module,
    loss: Callable[[torch.Tensor], torch.Tensor],
    samples: int,
    validate: Callable[[], float],
    optimizer: torch.optim.Optimizer,
    *,
    epochs: int,
    batch: int,
    patience: int,
    time_limit_s: float = math.inf,
    scheduler=None,
    grad_clip: float | None = None,
    log: Callable[[int, float, float, EarlyStopping], None] | None = None,
) -> LoopResult:
    """Train ``model`` in place: per epoch a random permutation of ``samples`` indices in minibatches of
    ``batch``, ``loss(indices)`` → one step each, then ``validate()`` (lower is better; non-finite never
    counts as better). Stops after ``patience`` epochs without a better validation, after ``epochs``, or
    when ``time_limit_s`` has passed; ends with the best weights loaded (the start's when no epoch beat
    it). ``log(epoch, training loss, validation, stopping)`` after every epoch."""
    stopping = EarlyStopping(patience=max(1, int(patience)), monitor="validation", keep_best=True)
    model.eval()
    start_value = float(validate())
    stopping.update(-1, {"validation": start_value}, model)
    if not math.isfinite(start_value):
        stopping.best, stopping.bad = math.inf, 0
    start = time.perf_counter()
    history: list = []
    stopped = timed_out = False
    epoch = -1
    for epoch in range(epochs):
        model.train()
        perm = torch.randperm(samples)
        total, count = 0.0, 0
        for b in range(0, samples, batch):
            idx = perm[b : b + batch]
            optimizer.zero_grad()
            value = loss(idx)
            value.backward()
            if grad_clip is not None:
                torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)
            optimizer.step()
            total += float(value.detach()) * len(idx)
            count += len(idx)
        if scheduler is not None:
            scheduler.step()
        model.eval()
        val = float(validate())
        history.append((epoch, total / max(count, 1), val))
        stop = stopping.update(epoch, {"validation": val if math.isfinite(val) else math.inf}, model)
        if log is not None:
            log(epoch, total / max(count, 1), val, stopping)
        if stop:
            stopped = True
            break
        if time.perf_counter() - start > time_limit_s:
            timed_out = True
            break
    stopping.restore_best(model)
    model.eval()
    return LoopResult(
        epochs_run=epoch + 1,
        best_epoch=stopping.best_epoch,
        best=stopping.best if math.isfinite(stopping.best) else start_value,
        start=start_value,
        stopped_early=stopped,
        timed_out=timed_out,
        seconds=time.perf_counter() - start,
        history=history,
    )
