"""Samples for training: splits (whole trials or whole trajectories held out), stacked arrays in *model
order* (free joints, then servo joints), tensors on the training device, the data hash."""

from __future__ import annotations

import hashlib

import numpy as np
import torch

from ..errors import DataError
from ..physics.datasets import split_trials

FIELDS = ("q", "qd", "qdd", "Q")
TRUTH = ("T", "V", "E", "M")
SAMPLE_KEYS = ("t", *FIELDS, *TRUTH)


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


def split_by_trial(trials, test_names, n_train: int | None = None, seed: int = 0) -> tuple[dict, dict]:
    """Train on the trials not in ``test_names`` (every sample, or ``n_train`` drawn without replacement
    with ``seed``), test on every sample of the ``test_names`` trials. Each side is a dict of stacked
    arrays plus ``trial`` (index into ``trials``) and ``names``. The split is
    :func:`ros_lnn.physics.datasets.split_trials`, as is :func:`ros_lnn.physics.datasets.paper_split`
    (the paper's test trials and its 4096-sample draw)."""
    names = [tr.name for tr in trials]
    missing = [n for n in test_names if n not in names]
    if missing:
        raise DataError(f"test trials {missing} are not among the trials {names}")
    return split_trials(trials, test_names, n_train, seed)


def split_by_trajectory(data: dict, seed: int, test_fraction: float = 0.3) -> tuple[dict, dict, dict]:
    """(train, test, split info) of stacked samples with a ``trajectory`` index: whole trajectories
    held out (``test_fraction`` of them, at least one), chosen at random by ``seed``."""
    ids = np.unique(data["trajectory"])
    if len(ids) < 2:
        raise DataError(
            f"need at least 2 trajectories (one to train, one to test), got {len(ids)}; raise --trajectories"
        )
    n_test = max(1, int(round(test_fraction * len(ids))))
    test_ids = np.sort(np.random.default_rng(seed).choice(ids, n_test, replace=False))
    is_test = np.isin(data["trajectory"], test_ids)

    def pick(sel):
        return {k: v[sel] for k, v in data.items()}

    info = {
        "test_trajectories": [int(i) for i in test_ids],
        "n_trajectories": int(len(ids)),
        "n_train": int((~is_test).sum()),
        "n_test": int(is_test.sum()),
    }
    return pick(~is_test), pick(is_test), info
