"""The model families and their one registry.

A family is one file here that builds a :class:`~ros_lnn.families.base.Family` (ServoLNN/DeLaN in
``servo_lnn.py``, LNN/LNN-nh in ``lnn.py``, ``tlnn.py``, ``node.py``, ``hnn.py``; the acceleration
families share
``acceleration.py``) plus its entry in :data:`FAMILIES` below. Nothing here imports torch until a model
is built.
"""

from __future__ import annotations

from typing import Any

from ..errors import ConfigError, ModelError
from .base import EFFORT_RESIDUALS, TRAJECTORIES, TRIALS, Family, Network, Shape
from .dac_residual import DAC_RESIDUAL
from .hnn import HNN
from .lnn import LNN, LNN_NH
from .node import NODE
from .servo_lnn import DELAN, SERVO_LNN
from .tlnn import TLNN

#: ``ros-lnn train --model NAME`` → its family, in the order the command line lists them.
FAMILIES: dict[str, Family] = {
    f.name: f for f in (SERVO_LNN, DELAN, LNN, LNN_NH, TLNN, NODE, HNN, DAC_RESIDUAL)
}
#: Every reference system some family trains on (``ros-lnn train --system``).
SYSTEMS = ("crane", "delan_character", "particle", "drone", "rolling_disk", "chain", "arm")
#: Family tags of checkpoints and ONNX metadata (DeLaN models say ``servo_lnn``).
MODEL_FAMILIES = tuple(dict.fromkeys(f.model_family for f in FAMILIES.values()))


def get(name: str) -> Family:
    """The family of ``--model NAME``."""
    try:
        return FAMILIES[name]
    except KeyError:
        raise ConfigError(f"unknown model family {name!r}; known: {', '.join(FAMILIES)}") from None


def family_of_config(config: dict) -> Family:
    """The family of a checkpoint's ``model_config``. Untagged configs with ``free_joints`` are the
    ServoLNN trainer's older checkpoints."""
    name = config.get("family")
    if name is None and "free_joints" in config:
        name = SERVO_LNN.model_family
    if name not in MODEL_FAMILIES:
        raise ModelError(f"unknown model family {name!r}; known: {', '.join(MODEL_FAMILIES)}")
    return FAMILIES[name]


def family_of(model: Any) -> Family:
    """The family a model belongs to (every model class names its family in ``family``)."""
    return family_of_config({"family": model.family})


def model_config(model: Any) -> dict:
    """``model.config()`` tagged with its ``family`` (what a checkpoint stores)."""
    return dict(model.config()) | {"family": model.family}


def build_model(config: dict) -> Any:
    """An untrained model of the family and shape ``config`` describes (inverse of :func:`model_config`)."""
    family = family_of_config(config)
    return family.from_config({k: v for k, v in config.items() if k != "family"})


__all__ = [
    "FAMILIES",
    "SYSTEMS",
    "MODEL_FAMILIES",
    "TRIALS",
    "TRAJECTORIES",
    "EFFORT_RESIDUALS",
    "Family",
    "Network",
    "Shape",
    "get",
    "family_of",
    "family_of_config",
    "model_config",
    "build_model",
]
