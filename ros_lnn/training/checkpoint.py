"""Resume state of a training run: everything besides the weights that an uninterrupted run would
still hold in memory (optimizer moments, the shuffling generator, torch/numpy RNG, the loss
accumulator between log points, the early-stopping state, the history), so that N/2 epochs +
``--resume`` N/2 epochs reproduce N straight epochs (bitwise on CPU with the same thread count)."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from ..errors import ModelError

#: Training settings that must not change across a resume (anything else, e.g. ``epochs``, may).
MUST_MATCH = ("batch", "lr", "weight_decay", "seed", "dtype", "losses", "grad_clip", "skip_non_finite")


def rng_state(gen: torch.Generator) -> dict:
    state = {"shuffle": gen.get_state(), "torch": torch.get_rng_state(), "numpy": np.random.get_state()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict, gen: torch.Generator) -> None:
    gen.set_state(state["shuffle"])
    torch.set_rng_state(state["torch"])
    np.random.set_state(state["numpy"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def resume_extra(gen, acc, steps_since: int, stopper, data_hash: str, world_size: int = 1) -> dict:
    """The ``extra`` entry of a checkpoint that :func:`load_resume` needs."""
    return {"resume": {"rng": rng_state(gen), "acc": acc.detach().cpu().clone(), "steps_since": int(steps_since),
                       "early_stopping": stopper.state_dict(), "data_hash": data_hash,
                       "world_size": int(world_size)}}


def checkpoint_path(path) -> Path:
    """``path`` itself, or ``path/last.pt`` when it is a folder."""
    path = Path(path)
    return path / "last.pt" if path.is_dir() else path


def load_resume(path, model, optimizer, gen, acc, stopper, settings: dict, data_hash: str,
                world_size: int = 1) -> tuple[int, dict, int]:
    """Restore a run from the checkpoint at ``path`` (file or checkpoint folder) into ``model``,
    ``optimizer``, ``gen``, ``acc`` and ``stopper``; returns (epoch, history, steps_since)."""
    path = checkpoint_path(path)
    if not path.is_file():
        raise ModelError(f"cannot resume: no checkpoint at {path}; pass the --checkpoint-dir of the interrupted run")
    try:
        ckpt = torch.load(path, map_location="cpu", weights_only=False)
        state = ckpt["extra"]["resume"]
    except Exception as exc:  # noqa: BLE001 - torch raises many types for a bad file
        raise ModelError(f"cannot resume from {path}: not a resumable ros_lnn training checkpoint "
                         f"({type(exc).__name__}: {exc})") from exc
    saved = ckpt["history"].get("config", {})
    changed = [k for k in MUST_MATCH if k in saved and k in settings and list_or(saved[k]) != list_or(settings[k])]
    if changed:
        raise ModelError(f"cannot resume from {path}: {', '.join(f'{k} was {saved[k]!r}, now {settings[k]!r}' for k in changed)}"
                         "; resume with the same training options")
    if state["data_hash"] != data_hash:
        raise ModelError(f"cannot resume from {path}: the training data differ from the interrupted run's "
                         "(same --data/--bag, --n-train and --split-seed needed)")
    if state.get("world_size", 1) != world_size:
        raise ModelError(f"cannot resume from {path}: it was trained on {state.get('world_size', 1)} process(es), "
                         f"this run has {world_size}")
    if ckpt["model_config"] != model.config():
        raise ModelError(f"cannot resume from {path}: its network {ckpt['model_config']} differs from this run's")
    model.load_state_dict(ckpt["model_state"])
    optimizer.load_state_dict(ckpt["optimizer_state"])
    set_rng_state(state["rng"], gen)
    acc.copy_(state["acc"].to(acc.device))
    stopper.load_state_dict(state["early_stopping"], device=next(model.parameters()).device)
    return int(ckpt["epoch"]), ckpt["history"], int(state["steps_since"])


def list_or(value):
    return list(value) if isinstance(value, (list, tuple)) else value
