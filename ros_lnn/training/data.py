"""Trials → tensors in *model order* (free joints, then servo joints), resident on the training device."""
from __future__ import annotations

import hashlib

import numpy as np
import torch

from ..errors import DataError

FIELDS = ("q", "qd", "qdd", "Q")
TRUTH = ("T", "V", "E", "M")


def model_order(coordinate_names, free_joints, servo_joints) -> list[int]:
    names = list(coordinate_names)
    missing = [j for j in list(free_joints) + list(servo_joints) if j not in names]
    if missing:
        raise DataError(f"joints {missing} are not in the data's coordinates {names}")
    return [names.index(j) for j in list(free_joints) + list(servo_joints)]


def reorder(samples: dict, order) -> dict:
    """Stacked samples (as from ``paper_split``) with every coordinate axis permuted into model order."""
    out = {}
    for key, value in samples.items():
        if key in FIELDS:
            out[key] = np.asarray(value, float)[:, order]
        elif key == "M":
            out[key] = np.asarray(value, float)[:, order][:, :, order]
        else:
            out[key] = value
    return out


def to_tensors(samples: dict, device="cpu", dtype=torch.float32, keys=FIELDS + TRUTH + ("trial",)) -> dict:
    out = {}
    for key in keys:
        if key in samples:
            value = np.asarray(samples[key])
            t = torch.as_tensor(value, device=device)
            out[key] = t if key == "trial" else t.to(dtype)
    return out


def data_hash(*sample_dicts) -> str:
    """sha256 over the training/test arrays (model order), for provenance."""
    h = hashlib.sha256()
    for samples in sample_dicts:
        for key in FIELDS:
            h.update(np.ascontiguousarray(np.asarray(samples[key], np.float64)).tobytes())
    return h.hexdigest()


def normalisation(q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Offset and scale of the input normalisation: mean and standard deviation of the training ``q``
    (scale floored so a coordinate that never moves does not blow up)."""
    q = np.asarray(q, float)
    scale = q.std(0)
    return q.mean(0), np.where(scale > 1e-6, scale, 1.0)
