"""The parameters every node that loads an ONNX model shares (``servo_lnn``, ``effort_observer``, the
learned port of ``dac_controller``): the limits a model must meet before it runs
(:mod:`ros_lnn.inference.model_guard`), read at configure."""

from __future__ import annotations

from ..inference.model_guard import DEFAULT_LOAD_TIMEOUT_S, DEFAULT_MAX_MB, DEFAULT_MAX_NODES, ModelLimits
from .params import CONFIGURE, Param

#: ``model_threads`` of the nodes that run their model in ONNX Runtime (servo_lnn, effort_observer).
MODEL_THREADS_PARAMETER = Param("model_threads", 1, "ONNX Runtime intra-op threads", CONFIGURE, ge=1, le=64)

MODEL_LIMIT_PARAMETERS = (
    Param(
        "model_max_mb",
        DEFAULT_MAX_MB,
        "a model file larger than this is refused at configure, before it is loaded [MB]",
        CONFIGURE,
        gt=0.0,
        le=1e6,
    ),
    Param(
        "model_max_nodes",
        DEFAULT_MAX_NODES,
        "a model graph with more nodes than this (subgraphs and local functions included, counted from "
        "the file) is refused at configure, before it is loaded",
        CONFIGURE,
        ge=1,
        le=1_000_000_000,
    ),
    Param(
        "model_load_timeout_s",
        DEFAULT_LOAD_TIMEOUT_S,
        "a model whose ONNX Runtime session takes longer than this to create is refused at configure [s]",
        CONFIGURE,
        gt=0.0,
        le=3600.0,
    ),
)


def model_limits(values) -> ModelLimits:
    """The limits of the parameter values ``values`` (a node's :class:`ParameterValues` or a dict)."""
    return ModelLimits(
        float(values["model_max_mb"]), int(values["model_max_nodes"]), float(values["model_load_timeout_s"])
    )
