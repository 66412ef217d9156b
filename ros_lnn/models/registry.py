"""One checkpoint format for every model family, and the loader that rebuilds any of them.

A checkpoint is a ``torch.save`` of one dict::

    model_config     the model's ``config()`` tagged with ``family`` (servo_lnn, lnn, lnn_nh, tlnn, node)
    model_state      its ``state_dict()``
    history          the training history (losses per log point, seconds, ...)
    command          the command line that reproduces the run ("" when not from the CLI)
    provenance       data source and split, coordinates (names, units), versions, date
    epoch, optimizer_state, extra   as the ServoLNN trainer writes them (resume state in ``extra``)

ServoLNN checkpoints written by the trainer (``last.pt``) carry the untagged ``ServoLNN.config()``;
they load here too (a config with ``free_joints`` is a ServoLNN). DeLaN is a ServoLNN without servo
joints: family ``servo_lnn``, ``servo_joints == []``.
"""
from __future__ import annotations

import os
from pathlib import Path

import torch
from torch import nn

from ..errors import ModelError

SERVO_LNN, LNN, LNN_NH, TLNN, NODE = "servo_lnn", "lnn", "lnn_nh", "tlnn", "node"
FAMILIES = (SERVO_LNN, LNN, LNN_NH, TLNN, NODE)


def family_of(config: dict) -> str:
    family = config.get("family")
    if family is None and "free_joints" in config:
        return SERVO_LNN
    if family not in FAMILIES:
        raise ModelError(f"unknown model family {family!r}; known: {', '.join(FAMILIES)}")
    return family


def model_config(model: nn.Module) -> dict:
    """``model.config()`` with its ``family``."""
    cfg = dict(model.config())
    cfg.setdefault("family", getattr(model, "family", SERVO_LNN))
    return cfg


def build_model(config: dict) -> nn.Module:
    """An untrained model of the family and shape ``config`` describes (the inverse of :func:`model_config`)."""
    cfg = dict(config)
    family = family_of(cfg)
    cfg.pop("family", None)
    if family == SERVO_LNN:
        from .servo_lnn import ServoLNN

        return ServoLNN.from_config(cfg)
    if family == TLNN:
        from .tlnn import TLNN as TLNNModel

        return TLNNModel(**cfg)
    if family == NODE:
        from .node_baseline import NeuralODE

        return NeuralODE(cfg.pop("n"), **cfg)
    from .lnn import LNN as LNNModel, LNNnh

    n = cfg.pop("n")
    if family == LNN_NH:
        from ..physics.nonholonomic import SYSTEMS

        system = cfg.pop("system", "")
        if system not in SYSTEMS:
            raise ModelError(f"LNN-nh config names constraint system {system!r}; known: {', '.join(SYSTEMS)}")
        ref = SYSTEMS[system]()
        return LNNnh(n, ref.constraint_matrix, ref.constraint_drift, system=system, **cfg)
    cfg.pop("system", None)  # older zoo checkpoints tagged plain LNNs with their data's system
    return LNNModel(n, **cfg)


def save_checkpoint(path, model: nn.Module, *, history: dict | None = None, command: str = "",
                    provenance: dict | None = None, epoch: int | None = None, optimizer=None,
                    extra: dict | None = None) -> Path:
    """Write the checkpoint of ``model`` atomically (temporary file, then rename); returns the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    history = history or {}
    state = {"model_config": model_config(model), "model_state": model.state_dict(), "history": history,
             "command": command, "provenance": provenance or {},
             "epoch": epoch if epoch is not None else (history.get("epoch") or [0])[-1],
             "optimizer_state": optimizer.state_dict() if optimizer is not None else None, "extra": extra or {}}
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        torch.save(state, tmp)
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()
    return path


def load_checkpoint(path, map_location="cpu") -> tuple[nn.Module, dict]:
    """(model in eval mode, checkpoint dict) for a checkpoint of any family."""
    path = Path(path)
    if not path.is_file():
        raise ModelError(f"checkpoint not found: {path}; train one with: ros-lnn train --model FAMILY --out {path.name}")
    try:
        ckpt = torch.load(path, map_location=map_location, weights_only=False)
        config = ckpt["model_config"]
    except Exception as exc:  # noqa: BLE001 - torch raises many types for a bad file
        raise ModelError(f"{path}: not a ros_lnn checkpoint ({type(exc).__name__}: {exc})") from exc
    model = build_model(config)
    try:
        model.load_state_dict(ckpt["model_state"])
    except Exception as exc:  # noqa: BLE001
        raise ModelError(f"{path}: weights do not fit its {family_of(config)} config ({exc})") from exc
    first = next(iter(ckpt["model_state"].values()), None)
    if first is not None and first.is_floating_point():
        model.to(first.dtype)
    return model.eval(), ckpt


__all__ = ["FAMILIES", "family_of", "model_config", "build_model", "save_checkpoint", "load_checkpoint"]
