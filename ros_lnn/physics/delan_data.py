"""The DeLaN character data set (``character_data.npz``, README beside it): 20 letters written by a
simulated 2-DoF arm, with the torque and its inertial, Coriolis+centrifugal and gravity parts and the
mass matrix per sample. The DeLaN reference implementation tests on the letters e, q, v and trains on
the other 17; ``ros-lnn train --model delan`` and ``ros-lnn bench delan`` read it through here.

The data do not ship with the package (they come from the DeLaN repository, converted to ``.npz``). Where
they are: ``--data`` (the file or its folder), else ``$ROS_LNN_DELAN_DATA`` (the same), else
``../shared/data/delan_character/`` beside a source checkout holding this package; nothing else is
searched."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from ..errors import DataError

TEST_LETTERS = ("e", "q", "v")
FILE_NAME = "character_data.npz"
ENV_VAR = "ROS_LNN_DELAN_DATA"
DATA_RELATIVE = Path("shared") / "data" / "delan_character" / FILE_NAME


def default_data_path() -> Path:
    """``$ROS_LNN_DELAN_DATA`` (file or folder), else ``../shared/data/delan_character/character_data.npz``
    next to the checkout holding this package (the path may not exist)."""
    env = os.environ.get(ENV_VAR)
    if env:
        return data_file(env)
    repo = Path(__file__).resolve().parents[2]
    return repo.parent / DATA_RELATIVE


def data_file(path) -> Path:
    """``path`` itself, or ``path/character_data.npz`` when it is a folder."""
    path = Path(path)
    return path / FILE_NAME if path.is_dir() else path


def find_character_data(path=None) -> Path:
    """The character data file ``path`` (file or folder) names, else the default; a one-line
    :class:`DataError` naming where it looked and what to pass when there is none."""
    file = data_file(path) if path else default_data_path()
    if not file.is_file():
        where = "--data" if path else (f"${ENV_VAR}" if os.environ.get(ENV_VAR) else "the default location")
        raise DataError(
            f"DeLaN character data not found at {file} (from {where}); pass --data DIR holding {FILE_NAME} "
            f"(or set {ENV_VAR}); the file is the DeLaN repository's data/character_data.pickle as .npz"
        )
    return file


def load_character_data(path=None, test_letters=TEST_LETTERS):
    """(train, test) dicts of stacked arrays: q, qd, qdd, Q (= τ), Q_m, Q_c, Q_g, M, letter, t."""
    path = find_character_data(path)
    raw = np.load(path)
    letters = [str(x) for x in raw["labels"]]
    missing = [t for t in test_letters if t not in letters]
    if missing:
        raise DataError(f"{path}: test letters {missing} are not in the data set's labels {letters}")
    keys = {
        "q": "qp",
        "qd": "qv",
        "qdd": "qa",
        "Q": "tau",
        "Q_m": "m",
        "Q_c": "c",
        "Q_g": "g",
        "M": "mass_matrix",
    }

    def stack(sel):
        out = {k: np.concatenate([raw[f"{src}/{L}"] for L in sel]).astype(float) for k, src in keys.items()}
        out["letter"] = np.concatenate([[L] * len(raw[f"t/{L}"]) for L in sel])
        out["t"] = np.concatenate([raw[f"t/{L}"] for L in sel]).astype(float)
        return out

    train_letters = [L for L in letters if L not in test_letters]
    return stack(train_letters), stack(list(test_letters))


def letter_trajectories(samples: dict) -> dict:
    """The stacked samples of :func:`load_character_data` split back into one trajectory per letter."""
    letters = list(dict.fromkeys(samples["letter"].tolist()))
    return {L: {k: v[samples["letter"] == L] for k, v in samples.items() if k != "letter"} for L in letters}
