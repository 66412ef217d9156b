"""Neural ODE: the black-box baseline of the TLNN study, ``q̈ = f_θ([sin q, cos q], q̇)``."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .acceleration import acceleration_family
from .base import Network, Shape

if TYPE_CHECKING:
    from ..models.node_baseline import NeuralODE


def build(shape: Shape, net: Network) -> NeuralODE:
    from ..models.node_baseline import NeuralODE

    return NeuralODE(len(shape.coordinate_names), hidden=net.hidden, activation=net.activation)


def from_config(config: dict) -> NeuralODE:
    from ..models.node_baseline import NeuralODE

    cfg = dict(config)
    return NeuralODE(cfg.pop("n"), **cfg)


NODE = acceleration_family("node", ("chain",), build, from_config)

__all__ = ["NODE"]
