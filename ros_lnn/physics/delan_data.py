"""The DeLaN character data set (``character_data.npz``, README beside it): 20 letters written by a
simulated 2-DoF arm, with the torque and its inertial, Coriolis+centrifugal and gravity parts and the
mass matrix per sample. The DeLaN reference implementation tests on the letters e, q, v and trains on
the other 17; ``ros-lnn train --model delan`` and ``ros-lnn bench delan`` read it through here."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..errors import DataError

TEST_LETTERS = ("e", "q", "v")
DATA_RELATIVE = Path("shared") / "data" / "delan_character" / "character_data.npz"


def default_data_path() -> Path:
    """``../shared/data/delan_character/character_data.npz`` next to the checkout holding this package."""
    repo = Path(__file__).resolve().parents[2]
    return repo.parent / DATA_RELATIVE


def load_character_data(path=None, test_letters=TEST_LETTERS):
    """(train, test) dicts of stacked arrays: q, qd, qdd, Q (= τ), Q_m, Q_c, Q_g, M, letter."""
    path = Path(path) if path else default_data_path()
    if not path.is_file():
        raise DataError(f"DeLaN character data not found at {path}; pass --data PATH to character_data.npz")
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
        return out

    train_letters = [L for L in letters if L not in test_letters]
    return stack(train_letters), stack(list(test_letters))
