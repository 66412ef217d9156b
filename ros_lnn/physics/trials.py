"""``Trial``: one simulated (or recorded) run with exact ground truth for every sample, and its
``.npz`` storage (plain arrays, no pickle)."""

from __future__ import annotations

import json
import os
import zipfile
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import DataError

ARRAY_FIELDS = ("t", "q", "qd", "qdd", "Q", "T", "V", "E", "M")
FORMAT = "ros_lnn.trials/1"


@dataclass
class Trial:
    """Samples of one run. ``Q`` is the exact generalised force on every coordinate: free rows are
    the applied ``Q_f``, servo rows the equivalent driving force ``Q_e`` (EQUATIONS.md §1)."""

    name: str
    system: str
    coordinate_names: tuple[str, ...]
    free_joints: tuple[str, ...]
    servo_joints: tuple[str, ...]
    t: np.ndarray  # (N,)
    q: np.ndarray  # (N, n)
    qd: np.ndarray  # (N, n)
    qdd: np.ndarray  # (N, n)
    Q: np.ndarray  # (N, n)
    T: np.ndarray  # (N,)
    V: np.ndarray  # (N,)
    E: np.ndarray  # (N,)
    M: np.ndarray  # (N, n, n)
    attrs: dict = field(default_factory=dict)  # JSON-serialisable provenance (parameters, solver)

    def __post_init__(self):
        self.coordinate_names = tuple(self.coordinate_names)
        self.free_joints = tuple(self.free_joints)
        self.servo_joints = tuple(self.servo_joints)
        n, N = len(self.coordinate_names), len(self.t)
        expected = {
            "t": (N,),
            "q": (N, n),
            "qd": (N, n),
            "qdd": (N, n),
            "Q": (N, n),
            "T": (N,),
            "V": (N,),
            "E": (N,),
            "M": (N, n, n),
        }
        for key, shape in expected.items():
            value = np.asarray(getattr(self, key), dtype=float)
            if value.shape != shape:
                raise DataError(f"trial '{self.name}': field {key} has shape {value.shape}, expected {shape}")
            setattr(self, key, value)
        if sorted(self.free_joints + self.servo_joints) != sorted(self.coordinate_names):
            raise DataError(
                f"trial '{self.name}': free {self.free_joints} and servo {self.servo_joints} "
                f"must partition the coordinates {self.coordinate_names}"
            )

    def __len__(self) -> int:
        return len(self.t)

    def _cols(self, names):
        return [self.coordinate_names.index(j) for j in names]

    @property
    def free_index(self) -> list[int]:
        return self._cols(self.free_joints)

    @property
    def servo_index(self) -> list[int]:
        return self._cols(self.servo_joints)

    @property
    def q_f(self):
        return self.q[:, self.free_index]

    @property
    def q_e(self):
        return self.q[:, self.servo_index]

    @property
    def Q_f(self):
        return self.Q[:, self.free_index]

    @property
    def Q_e(self):
        return self.Q[:, self.servo_index]


def save_trials(path, trials) -> None:
    """Write trials into one ``.npz``: arrays as ``<i>/<field>``, everything else as a JSON header."""
    header: dict[str, Any]
    arrays, header = {}, {"format": FORMAT, "trials": []}
    for i, trial in enumerate(trials):
        for key in ARRAY_FIELDS:
            arrays[f"{i}/{key}"] = getattr(trial, key)
        header["trials"].append(
            {
                "name": trial.name,
                "system": trial.system,
                "coordinate_names": list(trial.coordinate_names),
                "free_joints": list(trial.free_joints),
                "servo_joints": list(trial.servo_joints),
                "attrs": trial.attrs,
            }
        )
    arrays["header"] = np.array(json.dumps(header))
    path = os.fspath(path)
    tmp = f"{path}.{os.getpid()}.tmp.npz"  # unique: parallel writers of one cache file
    np.savez_compressed(tmp, **arrays)
    os.replace(tmp, path)


def load_trials(path) -> list[Trial]:
    """Read trials written by :func:`save_trials`; raise ``DataError`` naming the file otherwise."""
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise DataError(f"{path}: no such trials file; create one with 'ros-lnn simulate --out {path}'")
    try:
        with np.load(path, allow_pickle=False) as data:
            header = json.loads(str(data["header"]))
            if header.get("format") != FORMAT:
                raise DataError(f"{path}: not a ros_lnn trials file (format {header.get('format')!r})")
            trials = []
            for i, meta in enumerate(header["trials"]):
                arrays = {key: data[f"{i}/{key}"] for key in ARRAY_FIELDS}
                trials.append(Trial(**meta, **arrays))
            return trials
    except DataError:
        raise
    except (OSError, ValueError, KeyError, zipfile.BadZipFile, json.JSONDecodeError, TypeError) as exc:
        raise DataError(
            f"{path}: unreadable trials file ({type(exc).__name__}: {exc}); "
            "regenerate it with 'ros-lnn simulate'"
        ) from exc


def stack_trials(trials, keys=ARRAY_FIELDS) -> dict:
    """Concatenate the per-sample arrays of several trials (plus ``trial`` = index of the source)."""
    out = {key: np.concatenate([getattr(tr, key) for tr in trials]) for key in keys}
    out["trial"] = np.concatenate([np.full(len(tr), i) for i, tr in enumerate(trials)])
    return out


__all__ = ["Trial", "save_trials", "load_trials", "stack_trials", "ARRAY_FIELDS"]
