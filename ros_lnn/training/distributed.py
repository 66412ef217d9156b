"""Data-parallel training through ``torchrun`` (torch.distributed + DistributedDataParallel) and the
optional ``torch.compile`` of the loss.

Under ``torchrun`` (``WORLD_SIZE`` > 1) every rank draws the same permutation from the same seeded
generator and takes its contiguous share of each batch; DDP averages the gradients, so with equal
shares a step equals the single-process step on the whole batch (to round-off). Only rank 0 writes
checkpoints, ONNX and the report. Backend: NCCL on CUDA (one GPU per rank, ``LOCAL_RANK``), gloo on CPU.
"""

from __future__ import annotations

import os
import warnings
from dataclasses import dataclass

import torch
from torch import nn

from ..models.losses import batch_keys, loss_terms


@dataclass
class DistInfo:
    device: torch.device
    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    backend: str | None = None

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @property
    def active(self) -> bool:
        return self.world_size > 1


def world_size_from_env() -> int:
    return int(os.environ.get("WORLD_SIZE", "1") or 1)


def init_from_env(device: torch.device) -> DistInfo:
    """Join the process group ``torchrun`` set up (no-op for a single process)."""
    if world_size_from_env() <= 1:
        return DistInfo(device=device)
    import torch.distributed as dist

    local = int(os.environ.get("LOCAL_RANK", "0"))
    if device.type == "cuda":
        device = torch.device("cuda", local)
        torch.cuda.set_device(device)
    backend = "nccl" if device.type == "cuda" else "gloo"
    if not dist.is_initialized():
        dist.init_process_group(backend, device_id=device if device.type == "cuda" else None)
    return DistInfo(
        device=device,
        rank=dist.get_rank(),
        world_size=dist.get_world_size(),
        local_rank=local,
        backend=dist.get_backend(),
    )


def shard(idx: torch.Tensor, info: DistInfo) -> torch.Tensor:
    """This rank's contiguous share of a batch of sample indices."""
    if not info.active:
        return idx
    if idx.numel() < info.world_size:
        raise ValueError(
            f"a batch of {idx.numel()} samples cannot be shared by {info.world_size} processes; "
            "use a larger --batch or fewer processes"
        )
    return idx.tensor_split(info.world_size)[info.rank]


def mean_over_ranks(x: torch.Tensor, info: DistInfo) -> torch.Tensor:
    if not info.active:
        return x
    import torch.distributed as dist

    x = x.clone()
    dist.all_reduce(x)
    return x / info.world_size


def barrier(info: DistInfo) -> None:
    if info.active:
        import torch.distributed as dist

        dist.barrier()


def shutdown(info: DistInfo) -> None:
    if info.active:
        import torch.distributed as dist

        if dist.is_initialized():
            dist.destroy_process_group()


class LossModule(nn.Module):
    """The paper's loss terms as a module ``forward``, so DDP sees the forward pass it synchronises."""

    def __init__(self, model, names):
        super().__init__()
        self.model, self.names = model, tuple(names)
        self.keys = batch_keys(self.names)

    def forward(self, *tensors):
        terms = loss_terms(self.model, dict(zip(self.keys, tensors)), self.names)
        return tuple(terms[k] for k in self.names)


class _CompiledOrEager:
    """``torch.compile`` of the loss; the first call (forward and, single-process, a backward probe)
    decides, and any failure falls back to eager mode with a warning."""

    def __init__(self, module, backend, warn):
        self.eager, self.warn = module, warn
        self.compiled = torch.compile(module, backend=backend)
        self.fn = None
        self.status = "pending"
        self.probe = not isinstance(module, nn.parallel.DistributedDataParallel)

    def __call__(self, *args):
        if self.fn is not None:
            return self.fn(*args)
        try:
            out = self.compiled(*args)
            if self.probe:  # the backward graph is compiled lazily: make it fail here, not in loss.backward()
                params = [p for p in self.eager.parameters() if p.requires_grad]
                torch.autograd.grad(sum(out), params, retain_graph=True)
            self.fn, self.status = self.compiled, "compiled"
            return out
        except Exception as exc:  # noqa: BLE001 - dynamo/inductor raise many types
            msg = f"torch.compile failed ({_cause(exc)}); training in eager mode"
            warnings.warn(msg, RuntimeWarning, stacklevel=2)
            self.warn(f"warning: {msg}")
            self.fn, self.status = self.eager, "eager (compile failed)"
            return self.eager(*args)


def _cause(exc: BaseException) -> str:
    """``Type: first line`` of the innermost cause (dynamo wraps the backend's error)."""
    root = exc
    while (inner := root.__cause__ or getattr(root, "inner_exception", None)) is not None:
        root = inner
    lines = [line for line in str(root).splitlines() if line.strip()]
    return f"{type(root).__name__}: {lines[0].strip()[:200]}" if lines else type(root).__name__


def make_loss_step(model, names, info: DistInfo, compile=False, warn=print):
    """``step(batch) -> {name: scalar}``: the loss terms of one (sharded) batch through DDP when
    distributed and ``torch.compile`` when asked (``compile`` True for inductor, or a backend).
    Returns (step, describe) where ``describe()`` says how it runs."""
    module: nn.Module = LossModule(model, names)
    if info.active:
        ids = [info.device] if info.device.type == "cuda" else None
        module = nn.parallel.DistributedDataParallel(module, device_ids=ids, broadcast_buffers=False)
    fn = _CompiledOrEager(module, "inductor" if compile is True else compile, warn) if compile else module
    keys, inputs = tuple(names), batch_keys(names)

    def step(batch):
        return dict(zip(keys, fn(*(batch[k] for k in inputs))))

    def describe() -> dict:
        name = torch.cuda.get_device_name(info.device) if info.device.type == "cuda" else "cpu"
        return {
            "compile": getattr(fn, "status", "off"),
            "world_size": info.world_size,
            "rank": info.rank,
            "backend": info.backend,
            "device_name": name,
            "threads": torch.get_num_threads(),
        }

    return step, describe


def shutdown_process_group() -> None:
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()
