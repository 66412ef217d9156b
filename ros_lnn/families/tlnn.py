"""TLNN (the TLNN paper, docs/papers.md): one kinetic and one potential head per rigid body of a
serial chain, each seeing the coordinates its topology row selects."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .acceleration import acceleration_family
from .base import Network, Shape

if TYPE_CHECKING:
    from ..models.tlnn import TLNN as TLNNModel


def build(shape: Shape, net: Network) -> TLNNModel:
    from ..models.tlnn import TLNN as TLNNModel
    from ..models.tlnn import serial_chain_topology

    return TLNNModel(
        serial_chain_topology(len(shape.coordinate_names)), hidden=net.hidden, activation=net.activation
    )


def from_config(config: dict) -> TLNNModel:
    from ..models.tlnn import TLNN as TLNNModel

    return TLNNModel(**config)


TLNN = acceleration_family("tlnn", ("chain",), build, from_config)

__all__ = ["TLNN"]
