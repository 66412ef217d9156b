"""Plain LNN (a black-box Lagrangian network) and LNN-nh (the nonholonomic paper, docs/papers.md:
the same network with the system's known constraints ``A(q) q̇ = 0`` by Lagrange–d'Alembert)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..errors import ModelError
from .acceleration import acceleration_family, build_scalar_field
from .base import Network, Shape

if TYPE_CHECKING:
    from ..models.lnn import LNN as LNNModel
    from ..models.lnn import LNNnh

NONHOLONOMIC_SYSTEMS = ("particle", "drone", "rolling_disk")


def _constraint_system(name: str):
    from ..physics.nonholonomic import SYSTEMS

    if name not in SYSTEMS:
        raise ModelError(f"LNN-nh config names constraint system {name!r}; known: {', '.join(SYSTEMS)}")
    return SYSTEMS[name]()


def build_lnn(shape: Shape, net: Network) -> LNNModel:
    from ..models.lnn import LNN as LNNModel
    from ..models.lnn import for_system

    if shape.system in NONHOLONOMIC_SYSTEMS:
        return for_system(
            _constraint_system(shape.system), False, hidden=net.hidden, activation=net.activation
        )
    return build_scalar_field(LNNModel, shape, net)


def build_lnn_nh(shape: Shape, net: Network) -> LNNModel:
    from ..models.lnn import for_system

    return for_system(_constraint_system(shape.system), True, hidden=net.hidden, activation=net.activation)


def lnn_from_config(config: dict) -> LNNModel:
    from ..models.lnn import LNN as LNNModel

    cfg = dict(config)
    cfg.pop("system", None)  # older zoo checkpoints tagged plain LNNs with their data's system
    return LNNModel(cfg.pop("n"), **cfg)


def lnn_nh_from_config(config: dict) -> LNNnh:
    from ..models.lnn import LNNnh

    cfg = dict(config)
    system = cfg.pop("system", "")
    ref = _constraint_system(system)
    return LNNnh(cfg.pop("n"), ref.constraint_matrix, ref.constraint_drift, system=system, **cfg)


LNN = acceleration_family("lnn", (*NONHOLONOMIC_SYSTEMS, "chain"), build_lnn, lnn_from_config)
LNN_NH = acceleration_family("lnn_nh", NONHOLONOMIC_SYSTEMS, build_lnn_nh, lnn_nh_from_config)

__all__ = ["LNN", "LNN_NH"]
