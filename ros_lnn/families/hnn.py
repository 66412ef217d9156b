"""HNN (Greydanus et al.; the TLNN paper's comparison set, docs/papers.md): ``H_θ(q, p)`` with the
observed ``q̇`` as its momentum, fitted on both halves of Hamilton's equations (``∂H/∂p`` to ``q̇``,
``−∂H/∂q`` to ``q̈``). Its ONNX graph gives ``qdd`` (= ``ṗ``) and ``qd_h`` (= ``∂H/∂p``)."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

import numpy as np

from .acceleration import acceleration_family, build_scalar_field
from .acceleration import evaluate as evaluate_acceleration
from .base import Network, Shape, graph_writer, hooks

if TYPE_CHECKING:
    from ..inference.metadata import ModelMetadata
    from ..models.hnn import HNN as HNNModel

SYSTEMS = ("chain", "particle", "drone", "rolling_disk")


def build(shape: Shape, net: Network) -> HNNModel:
    from ..models.hnn import HNN as HNNModel

    return build_scalar_field(HNNModel, shape, net)


def from_config(config: dict) -> HNNModel:
    from ..models.hnn import HNN as HNNModel

    cfg = dict(config)
    return HNNModel(cfg.pop("n"), **cfg)


def losses(model: Any, with_qe: bool) -> tuple[str, ...]:
    from ..models.losses import HAMILTONIAN_LOSSES

    return HAMILTONIAN_LOSSES


def evaluate(model: HNNModel, samples: dict) -> dict:
    """The acceleration metrics (of ``ṗ``) and ``qd_nmse``: the ``∂H/∂p`` half against ``q̇``."""
    import torch

    metrics = evaluate_acceleration(model, samples)
    p = next(model.parameters())
    q, qd = (torch.as_tensor(np.asarray(samples[k]), device=p.device, dtype=p.dtype) for k in ("q", "qd"))
    with torch.no_grad():
        qd_hat = model.vector_field(q, qd)[0].double().cpu().numpy()
    true = np.asarray(samples["qd"])
    return metrics | {"qd_nmse": float(np.mean((qd_hat - true) ** 2) / np.var(true))}


def metadata(model: HNNModel, shape: Shape, **fields: Any) -> ModelMetadata:
    from ..models.family_export import family_metadata
    from ..models.hnn import GRAPH_OUTPUTS

    meta = family_metadata(model, list(shape.coordinate_names), list(shape.coordinate_units), **fields)
    meta.network["graph_outputs"] = list(GRAPH_OUTPUTS)
    return meta


export = graph_writer("hnn", "export_hnn_onnx")

HNN = dataclasses.replace(acceleration_family("hnn", SYSTEMS, build, from_config), **hooks(globals()))

__all__ = ["HNN"]
