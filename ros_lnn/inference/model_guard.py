"""Models checked before they run (numpy-free, onnx-free): a graph too large is refused in one line
instead of configuring for minutes.

* before ONNX Runtime sees the file: its size (``max_bytes``) and the number of graph nodes
  (``max_nodes``), counted by walking the file's protobuf records — the main graph, the subgraphs of
  its nodes' attributes (``If``/``Loop``/``Scan`` bodies) and the model's local functions — without the
  ``onnx`` package;
* while the session is created: a load-time limit (``load_timeout_s``). Creating a session is one call
  into ONNX Runtime that cannot be interrupted; it runs in a worker thread, and when it is not done in
  time the caller gets :class:`ModelError` at once and the abandoned load finishes in the background
  (its CPU spent, its result dropped).

Tensors stored outside the file (ONNX external data) are not counted by the size check; the load-time
limit still holds for them.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import ModelError

#: Defaults, far above the shipped models (tens to hundreds of kB, a few hundred nodes, < 1 s to load).
DEFAULT_MAX_MB = 256.0
DEFAULT_MAX_NODES = 100_000
DEFAULT_LOAD_TIMEOUT_S = 60.0

# protobuf field numbers of onnx.proto (ModelProto, GraphProto, NodeProto, AttributeProto, FunctionProto)
_MODEL_GRAPH, _MODEL_FUNCTIONS = 7, 25
_GRAPH_NODE = 1
_NODE_ATTRIBUTE = 5
_ATTRIBUTE_GRAPH, _ATTRIBUTE_GRAPHS = 6, 11
_FUNCTION_NODE = 7
_MAX_DEPTH = 32  # subgraphs nested deeper than this are refused (a forged file cannot recurse forever)


@dataclass(frozen=True)
class ModelLimits:
    """``max_mb``: file size [MB = 10⁶ bytes]; ``max_nodes``: graph nodes (subgraphs and functions
    included); ``load_timeout_s``: session creation [s]."""

    max_mb: float = DEFAULT_MAX_MB
    max_nodes: int = DEFAULT_MAX_NODES
    load_timeout_s: float = DEFAULT_LOAD_TIMEOUT_S

    @property
    def max_bytes(self) -> int:
        return int(self.max_mb * 1e6)


class _Malformed(ValueError):
    pass


def _varint(raw: memoryview, at: int, end: int) -> tuple[int, int]:
    value, shift = 0, 0
    while True:
        if at >= end or shift > 63:
            raise _Malformed("truncated varint")
        byte = raw[at]
        value |= (byte & 0x7F) << shift
        at, shift = at + 1, shift + 7
        if byte < 0x80:
            return value, at


def _fields(raw: memoryview, start: int, end: int):
    """(field number, payload start, payload end) of each length-delimited record in ``raw[start:end]``;
    other wire types are skipped."""
    at = start
    while at < end:
        key, at = _varint(raw, at, end)
        wire = key & 7
        if wire == 0:
            _, at = _varint(raw, at, end)
        elif wire == 1:
            at += 8
        elif wire == 5:
            at += 4
        elif wire == 2:
            size, at = _varint(raw, at, end)
            if at + size > end:
                raise _Malformed("record past the end")
            yield key >> 3, at, at + size
            at += size
        else:
            raise _Malformed(f"wire type {wire}")
    if at != end:
        raise _Malformed("record past the end")


def _graph_nodes(raw: memoryview, start: int, end: int, depth: int, node_field: int = _GRAPH_NODE) -> int:
    if depth > _MAX_DEPTH:
        raise _Malformed(f"subgraphs nested deeper than {_MAX_DEPTH}")
    count = 0
    for number, a, b in _fields(raw, start, end):
        if number != node_field:
            continue
        count += 1
        for attr_number, c, d in _fields(raw, a, b):
            if attr_number != _NODE_ATTRIBUTE:
                continue
            for inner, e, f in _fields(raw, c, d):
                if inner in (_ATTRIBUTE_GRAPH, _ATTRIBUTE_GRAPHS):
                    count += _graph_nodes(raw, e, f, depth + 1)
    return count


def count_graph_nodes(data: bytes) -> int:
    """Nodes of a serialised ONNX ModelProto: its graph, the subgraphs in node attributes, its local
    functions. ValueError when the bytes are not protobuf records."""
    raw = memoryview(data)
    count = 0
    for number, a, b in _fields(raw, 0, len(raw)):
        if number == _MODEL_GRAPH:
            count += _graph_nodes(raw, a, b, 0)
        elif number == _MODEL_FUNCTIONS:
            count += _graph_nodes(raw, a, b, 0, _FUNCTION_NODE)
    return count


def check_model_file(path, limits: ModelLimits | None = None) -> int:
    """The node count of the model file ``path``; ModelError (one line) when it is missing, larger than
    ``limits.max_mb`` or has more than ``limits.max_nodes`` nodes — before anything loads it."""
    limits = limits or ModelLimits()
    path = Path(path)
    if not path.is_file():
        raise ModelError(f"model file not found: {path}")
    size = path.stat().st_size
    if size > limits.max_bytes:
        raise ModelError(
            f"{path}: {size / 1e6:.1f} MB, larger than the limit of {limits.max_mb:g} MB (model_max_mb): "
            "refused before loading"
        )
    try:
        nodes = count_graph_nodes(path.read_bytes())
    except ValueError as exc:
        raise ModelError(f"{path}: not a readable ONNX model ({exc})") from None
    if nodes > limits.max_nodes:
        raise ModelError(
            f"{path}: {nodes} graph nodes, more than the limit of {limits.max_nodes} (model_max_nodes): "
            "refused before loading"
        )
    return nodes


def load_within(path, create: Callable[[], Any], limits: ModelLimits | None = None):
    """``create()`` (an ONNX Runtime session of ``path``) after :func:`check_model_file`, given at most
    ``limits.load_timeout_s``: ModelError when it takes longer (the load goes on in the background and
    its result is dropped); what ``create`` raised, raised here."""
    limits = limits or ModelLimits()
    check_model_file(path, limits)
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["value"] = create()
        except BaseException as exc:  # noqa: BLE001 - handed to the caller's thread
            box["error"] = exc

    worker = threading.Thread(target=run, name=f"load {Path(path).name}", daemon=True)
    worker.start()
    worker.join(limits.load_timeout_s)
    if worker.is_alive():
        raise ModelError(
            f"{path}: loading took longer than {limits.load_timeout_s:g} s (model_load_timeout_s): refused"
        )
    if "error" in box:
        raise box["error"]
    return box["value"]
