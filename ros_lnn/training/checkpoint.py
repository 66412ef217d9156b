"""One checkpoint format for every model family, with the resume state of a training run.

A checkpoint is a ``torch.save`` of one dict of tensors and plain containers (read back with
``torch.load(..., weights_only=True)``; a file that needs anything more is refused)::

    model_config     the model's ``config()`` with its ``family`` (:func:`ros_lnn.families.model_config`)
    model_state      its ``state_dict()``
    optimizer_state  the optimizer's ``state_dict()`` (None when not written by the trainer)
    epoch            epochs done
    history          the training history (losses per log point, validations, seconds, settings)
    command          the command line that reproduces the run ("" when not from the CLI)
    provenance       data source and split, coordinates, versions, date
    extra            ``metadata`` (the ONNX metadata JSON) and ``resume`` (below)

Resume state (``extra["resume"]``): everything besides the weights that an uninterrupted run would
still hold in memory (optimizer moments, the shuffling generator, torch/numpy RNG, the loss
accumulator between log points, the early-stopping state), so that N/2 epochs + ``--resume`` N/2
epochs reproduce N straight epochs (bitwise on CPU with the same thread count).

Configs without ``family`` but with ``free_joints`` (the ServoLNN trainer's older ``last.pt``) load as
ServoLNN. DeLaN is a ServoLNN without servo joints: family ``servo_lnn``, ``servo_joints == []``.
"""

from __future__ import annotations

import pickle
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from ..errors import ModelError
from ..families import build_model, family_of_config, model_config

#: Training settings that must not change across a resume (anything else, e.g. ``epochs``, may).
MUST_MATCH = ("batch", "lr", "weight_decay", "seed", "dtype", "losses", "grad_clip", "skip_non_finite")


def plain(value: Any, where: str = "checkpoint") -> Any:
    """``value`` as tensors and plain containers only (what ``weights_only`` loading accepts): numpy
    scalars become Python numbers, numpy arrays tensors; anything else is refused."""
    if value is None or isinstance(value, torch.Tensor):
        return value
    if isinstance(value, np.generic):
        return value.item()
    for kind in (bool, int, float, str):  # subclasses (numpy float64, torch's version string) as the base
        if isinstance(value, kind):
            return kind(value)
    if isinstance(value, np.ndarray):
        return torch.from_numpy(np.ascontiguousarray(value))
    if isinstance(value, Mapping):
        return {k: plain(v, f"{where}[{k!r}]") for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(plain(v, f"{where}[{i}]") for i, v in enumerate(value))
    raise ModelError(
        f"{where}: a {type(value).__name__} cannot be checkpointed (tensors and plain containers only)"
    )


def save_checkpoint(
    path,
    model: nn.Module,
    optimizer=None,
    epoch: int | None = None,
    history: dict | None = None,
    *,
    command: str = "",
    provenance: dict | None = None,
    extra: dict | None = None,
) -> Path:
    """Write the checkpoint of ``model`` atomically (temporary file, then ``os.replace``); its path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    history = history or {}
    state = {
        "model_config": plain(model_config(model)),
        "model_state": model.state_dict(),
        "optimizer_state": optimizer.state_dict() if optimizer is not None else None,
        "epoch": int(epoch if epoch is not None else (history.get("epoch") or [0])[-1]),
        "history": plain(history, "history"),
        "command": command,
        "provenance": plain(provenance or {}, "provenance"),
        "extra": plain(extra or {}, "extra"),
    }
    from ..files import atomic_output

    with atomic_output(path) as fh:  # an interrupted save leaves the previous checkpoint, never part of one
        torch.save(state, fh)
    return path


def read_checkpoint(path, map_location="cpu", head: str = "", what: str = "not a ros_lnn checkpoint") -> dict:
    """The checkpoint dict at ``path``, loaded with ``weights_only=True``; ModelError (one line,
    ``"<head or path>: <what> (...)"``) for anything else."""
    path = Path(path)
    head = head or str(path)
    try:
        ckpt = torch.load(path, map_location=map_location, weights_only=True)
    except pickle.UnpicklingError as exc:
        detail = next((line.strip() for line in str(exc).splitlines() if "Unsupported global" in line), "")
        raise ModelError(
            f"{head}: {what}: it stores objects other than tensors and plain containers"
            f"{f' ({detail})' if detail else ''}; only weights-only checkpoints are read"
        ) from None
    except Exception as exc:  # noqa: BLE001 - torch raises many types for a bad file
        reason = next(iter(str(exc).splitlines()), "")
        raise ModelError(f"{head}: {what} ({type(exc).__name__}: {reason})") from None
    if not isinstance(ckpt, dict) or "model_config" not in ckpt or "model_state" not in ckpt:
        raise ModelError(f"{head}: {what} (no model_config/model_state)")
    return ckpt


def load_checkpoint(path, map_location="cpu") -> tuple[Any, dict]:
    """(model in eval mode, checkpoint dict) for a checkpoint of any family."""
    path = Path(path)
    if not path.is_file():
        raise ModelError(
            f"checkpoint not found: {path}; train one with: ros-lnn train --model FAMILY --out {path.name}"
        )
    ckpt = read_checkpoint(path, map_location)
    config = ckpt["model_config"]
    model = build_model(config)
    try:
        model.load_state_dict(ckpt["model_state"])
    except Exception as exc:
        raise ModelError(
            f"{path}: weights do not fit its {family_of_config(config).name} config ({exc})"
        ) from exc
    first = next(iter(ckpt["model_state"].values()), None)
    if first is not None and first.is_floating_point():
        model.to(first.dtype)
    return model.eval(), ckpt


def tagged_config(config: dict) -> dict:
    """A stored ``model_config`` with its family tag (older untagged ServoLNN configs get theirs)."""
    return {**config, "family": family_of_config(config).model_family}


# -- resume state ---------------------------------------------------------------------------------
def _numpy_state() -> dict:
    state = np.random.get_state(legacy=False)
    return {
        "bit_generator": state["bit_generator"],
        "key": torch.from_numpy(state["state"]["key"].astype(np.int64)),
        "pos": int(state["state"]["pos"]),
        "has_gauss": int(state["has_gauss"]),
        "gauss": float(state["gauss"]),
    }


def _set_numpy_state(state: dict) -> None:
    np.random.set_state(
        {
            "bit_generator": state["bit_generator"],
            "state": {"key": state["key"].numpy().astype(np.uint32), "pos": state["pos"]},
            "has_gauss": state["has_gauss"],
            "gauss": state["gauss"],
        }
    )


def rng_state(gen: torch.Generator) -> dict:
    state = {"shuffle": gen.get_state(), "torch": torch.get_rng_state(), "numpy": _numpy_state()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict, gen: torch.Generator) -> None:
    gen.set_state(state["shuffle"])
    torch.set_rng_state(state["torch"])
    _set_numpy_state(state["numpy"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def resume_extra(gen, acc, steps_since: int, stopper, data_hash: str, world_size: int = 1) -> dict:
    """The ``extra`` entry of a checkpoint that :func:`load_resume` needs."""
    return {
        "resume": {
            "rng": rng_state(gen),
            "acc": acc.detach().cpu().clone(),
            "steps_since": int(steps_since),
            "early_stopping": stopper.state_dict(),
            "data_hash": data_hash,
            "world_size": int(world_size),
        }
    }


def checkpoint_path(path) -> Path:
    """``path`` itself, or ``path/last.pt`` when it is a folder."""
    path = Path(path)
    return path / "last.pt" if path.is_dir() else path


def load_resume(
    path, model, optimizer, gen, acc, stopper, settings: dict, data_hash: str, world_size: int = 1
) -> tuple[int, dict, int]:
    """Restore a run from the checkpoint at ``path`` (file or checkpoint folder) into ``model``,
    ``optimizer``, ``gen``, ``acc`` and ``stopper``; returns (epoch, history, steps_since)."""
    path = checkpoint_path(path)
    if not path.is_file():
        raise ModelError(
            f"cannot resume: no checkpoint at {path}; pass the --checkpoint-dir of the interrupted run"
        )
    head, what = f"cannot resume from {path}", "not a resumable ros_lnn training checkpoint"
    ckpt = read_checkpoint(path, head=head, what=what)
    try:
        state = ckpt["extra"]["resume"]
    except (KeyError, TypeError):
        raise ModelError(f"{head}: {what} (no resume state)") from None
    saved = ckpt["history"].get("config", {})
    changed = [
        k for k in MUST_MATCH if k in saved and k in settings and list_or(saved[k]) != list_or(settings[k])
    ]
    if changed:
        differences = ", ".join(f"{k} was {saved[k]!r}, now {settings[k]!r}" for k in changed)
        raise ModelError(f"cannot resume from {path}: {differences}; resume with the same training options")
    if state["data_hash"] != data_hash:
        raise ModelError(
            f"cannot resume from {path}: the training data differ from the interrupted run's "
            "(same --data/--bag, --n-train and --split-seed needed)"
        )
    if state.get("world_size", 1) != world_size:
        raise ModelError(
            f"cannot resume from {path}: it was trained on {state.get('world_size', 1)} process(es), "
            f"this run has {world_size}"
        )
    if tagged_config(ckpt["model_config"]) != model_config(model):
        raise ModelError(
            f"cannot resume from {path}: its network {ckpt['model_config']} differs from this run's"
        )
    model.load_state_dict(ckpt["model_state"])
    optimizer.load_state_dict(ckpt["optimizer_state"])
    set_rng_state(state["rng"], gen)
    acc.copy_(state["acc"].to(acc.device))
    stopper.load_state_dict(state["early_stopping"], device=next(model.parameters()).device)
    return int(ckpt["epoch"]), ckpt["history"], int(state["steps_since"])


def list_or(value):
    return list(value) if isinstance(value, (list, tuple)) else value


def export_checkpoint(path, out, dtype: str = "float32", exporter: str = "dynamo", system: str = "") -> Path:
    """A checkpoint of any family → ONNX with metadata (``ros-lnn export``): the metadata stored with
    the checkpoint when it has one, else built from the model and its provenance (``system`` names the
    system then); the export is noted in the metadata's provenance."""
    from datetime import datetime, timezone

    from ..errors import ConfigError
    from ..families import TRAJECTORIES, Shape, family_of
    from ..inference.metadata import ModelMetadata

    model, ckpt = load_checkpoint(path)
    family = family_of(model)
    if exporter not in family.exporters:
        raise ConfigError(
            f"{path}: the {family.name} graph exports with --exporter {family.exporters[0]} only "
            "(the TorchScript exporter fixes its batch size)"
        )
    text = (ckpt.get("extra") or {}).get("metadata")
    note = {
        "checkpoint": str(path),
        "exporter": exporter,
        "dtype": dtype,
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
    }
    if text:
        metadata = ModelMetadata.from_json(text, source=path)
    elif family.data == TRAJECTORIES:
        coords = (ckpt.get("provenance") or {}).get("coordinates") or {}
        names = (
            coords.get("names")
            or getattr(model, "coordinate_names", None)
            or [f"q{i + 1}" for i in range(model.n)]
        )
        units = coords.get("units") or [
            "rad" if i in model.angle_coordinates else "m" for i in range(model.n)
        ]
        metadata = family.metadata(
            model,
            Shape(system, tuple(names), (), tuple(units)),
            system=system,
            provenance=dict(ckpt.get("provenance") or {}),
        )
    else:
        metadata = family.metadata(
            model,
            Shape(system, tuple(model.free_joints), tuple(model.servo_joints)),
            system=system,
            provenance={"checkpoint": str(path), "epoch": ckpt.get("epoch")},
        )
    metadata.provenance = dict(metadata.provenance or {}) | {"export": note}
    return family.export(model, out, metadata, dtype=dtype, exporter=exporter)


__all__ = [
    "save_checkpoint",
    "load_checkpoint",
    "read_checkpoint",
    "export_checkpoint",
    "checkpoint_path",
    "resume_extra",
    "load_resume",
    "plain",
    "MUST_MATCH",
]
