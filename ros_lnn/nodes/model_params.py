"""What the nodes that load a model share: the one rule by which a ``model_path`` parameter names a file
(:func:`resolve_model_path`: ``servo_lnn``, ``dac_controller`` with its ``residual_model``,
``dac_chain_sim``, ``effort_observer``), and the limits an ONNX model must meet before it runs
(:mod:`ros_lnn.inference.model_guard`), read at configure."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from ..errors import ModelError
from ..inference.model_guard import DEFAULT_LOAD_TIMEOUT_S, DEFAULT_MAX_MB, DEFAULT_MAX_NODES, ModelLimits
from ..shipped import search_paths
from .params import CONFIGURE, Param

#: Where a bare file name is looked for among the shipped files, in this order.
SHIPPED_FOLDERS = ("models", "config")


def resolve_model_path(value: str, default: Callable[[], Path] | None = None) -> Path:
    """The file a node's ``model_path`` parameter (or ``residual_model``) names; one rule for every node:

    1. empty: the node's default file, ``default()`` (``servo_lnn``: the shipped ``crane_servo_lnn.onnx``;
       ``dac_chain_sim``: the shipped demo arm, ``config/dac_chain.urdf``). A node whose empty
       ``model_path`` means no file asks only for a value that is set (``dac_controller``:
       ``robot_description``, else the shipped demo arm; ``effort_observer``: the URDF-nominal dynamics
       of ``robot_description``; ``residual_model``: no learned port); ValueError otherwise;
    2. a leading ``~`` is the home folder;
    3. a file that exists, absolute or relative to the node's working directory: that file;
    4. a bare file name (no folder in it) that is no file there: the shipped file of that name,
       ``models/<name>`` then ``config/<name>`` (the source tree, then ``share/ros_lnn``:
       :mod:`ros_lnn.shipped`); shipped nowhere: ModelError naming every place looked at;
    5. any other path: as given; the node's loader then says it is missing.
    """
    if not value:
        if default is None:
            raise ValueError("an empty model_path names no file here: the node decides what it means")
        return default()
    path = Path(os.path.expanduser(value))  # an unknown ~user stays as written
    if os.path.isfile(path) or os.sep in value or (os.altsep and os.altsep in value):
        return path
    looked = [Path.cwd() / value, *(p for folder in SHIPPED_FOLDERS for p in search_paths(folder, value))]
    shipped = next((p for p in looked[1:] if os.path.isfile(p)), None)  # isfile: a too long name is no file
    if shipped is not None:
        return shipped
    raise ModelError(
        f"model '{value}' not found (looked in: {', '.join(map(str, looked))}); give a path, or the name of "
        "a model in share/ros_lnn/models"
    )


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


def model_file(values, default: Callable[[], Path] | None = None) -> Path:
    """The file of the parameter values' ``model_path`` (:func:`resolve_model_path`)."""
    return resolve_model_path(values["model_path"], default)
