"""Read the topics of a rosbag2 recording (directory or single .db3/.mcap file; sqlite3 or mcap;
metadata versions Humble → Kilted) into arrays, with the pure-Python ``rosbags`` library.

Messages are fetched raw and decoded in bulk by :mod:`ros_lnn.bags.cdr`; every failure becomes a
``DataError`` that names the bag or topic and says what to do.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..errors import DataError
from . import cdr


def open_bag(path):
    """An opened ``rosbags.rosbag2.Reader`` (close it, or use it as a context manager)."""
    from rosbags.rosbag2 import Reader
    from rosbags.rosbag2.errors import ReaderError

    path = Path(path)
    if not path.exists():
        raise DataError(f"{path}: no such bag; record one with 'ros2 bag record' or 'ros-lnn record'")
    problem = bag_path_problem(path)
    if problem:
        raise DataError(f"{path}: {problem}; give a bag directory or its .db3/.mcap file")
    try:
        reader = Reader(path)
        reader.open()
    except (ReaderError, FileNotFoundError, KeyError, ValueError, TypeError, OSError) as exc:
        hint = (
            "it holds no metadata.yaml: a recording that was never closed? ros-lnn reindex makes it readable"
            if path.is_dir() and not (path / "metadata.yaml").exists()
            else exc
        )
        raise DataError(f"{path}: not a readable rosbag2 ({hint}); check the path, or re-record it") from None
    except Exception as exc:  # noqa: BLE001 - sqlite/mcap libraries raise their own types on corrupt files
        raise DataError(
            f"{path}: corrupt or truncated bag ({type(exc).__name__}: {exc}); re-record it"
        ) from None
    return reader


def bag_path_problem(path: Path) -> str:
    """Only a directory of regular files or a regular file is opened: a FIFO or a device named as a
    bag (or put inside one) would block or read without end."""
    from ..files import input_file_problem

    if path.is_dir():
        for member in sorted(path.iterdir()):
            if member.name == "metadata.yaml" or member.suffix in (".db3", ".mcap", ".yaml"):
                problem = input_file_problem(member)
                if problem:
                    return f"{member.name} {problem}"
        return ""
    problem = input_file_problem(path)
    return problem


def bag_files_sha256(path) -> str:
    """One hash over the bag's storage files (not metadata.yaml, which tools rewrite)."""
    path = Path(path)
    files = sorted(p for p in path.iterdir() if p.suffix in (".db3", ".mcap")) if path.is_dir() else [path]
    digest = hashlib.sha256()
    for file in files:
        with open(file, "rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                digest.update(block)
    return digest.hexdigest()


def normalise_topic(topic: str) -> str:
    return "/" + topic.strip().lstrip("/")


def topic_types(reader) -> dict:
    """``{"/topic": {"type": msgtype, "count": messages}}`` for every topic in the bag."""
    out: dict[str, dict] = {}
    for conn in reader.connections:
        entry = out.setdefault(normalise_topic(conn.topic), {"type": conn.msgtype, "count": 0})
        entry["count"] += conn.msgcount
    return out


def connections_of(reader, topic: str, bag_name: str = "bag"):
    """Connections of ``topic`` (with or without its leading slash); DataError if absent."""
    want = normalise_topic(topic)
    conns = [c for c in reader.connections if normalise_topic(c.topic) == want]
    if not conns:
        have = ", ".join(sorted(topic_types(reader))) or "none"
        raise DataError(
            f"{bag_name}: topic {want} is not in the bag (topics: {have}); "
            "set the topic in the bag mapping (--config or --joint-states-topic/--servo-topic)"
        )
    return conns


def read_raw(reader, conns, bag_name: str = "bag"):
    """``(receive ns (N,), [raw bytes])`` of the given connections (one topic), in receive order."""
    from .storage import fetch_topic

    topic = normalise_topic(conns[0].topic)
    try:
        fast = fetch_topic(reader, topic, normalise_topic)
        if fast is not None:
            return fast
        rows = list(reader.messages(connections=conns))
    except Exception as exc:  # noqa: BLE001 - storage back ends raise many types on damaged files
        raise DataError(
            f"{bag_name}: corrupt or truncated bag while reading {topic} "
            f"({type(exc).__name__}: {exc}); re-record it"
        ) from None
    recv = np.fromiter((r[1] for r in rows), dtype=np.int64, count=len(rows))
    return recv, [r[2] for r in rows]


@dataclass
class Stream:
    """One topic as arrays. ``values`` maps a field to (N, len(joints)) float64 (NaN where a message
    lacks the joint or the field); ``stamp_ns`` is None for header-less types."""

    topic: str
    msgtype: str
    joints: tuple
    recv_ns: np.ndarray
    stamp_ns: np.ndarray | None
    values: dict
    labels: tuple = ()
    counts: dict = field(default_factory=dict)


def _decode(raws, msgtype, topic, bag_name):
    try:
        return cdr.decode_messages(raws, msgtype)
    except cdr.CdrError as exc:
        raise DataError(
            f"{bag_name}: {topic}: undecodable {msgtype} ({exc}); the bag is corrupt "
            "or the topic type is wrong"
        ) from None


def read_named_arrays(reader, topic, joints, fields, *, index_order=(), bag_name="bag") -> Stream:
    """Read a JointState or JointTrajectory topic into per-joint columns matched by name.

    Messages with an empty name list are mapped by index through ``index_order`` (or, when that is
    empty, through the names of the topic's first named message); their count is reported."""
    conns = connections_of(reader, topic, bag_name)
    msgtype = conns[0].msgtype
    if msgtype not in (cdr.JOINT_STATE, cdr.JOINT_TRAJECTORY):
        raise DataError(
            f"{bag_name}: {topic} has type {msgtype}; expected {cdr.JOINT_STATE} or {cdr.JOINT_TRAJECTORY}"
        )
    recv, raws = read_raw(reader, conns, bag_name)
    if not raws:
        raise DataError(
            f"{bag_name}: {normalise_topic(topic)} holds no messages; was it published while recording?"
        )
    groups = _decode(raws, msgtype, topic, bag_name)
    N, n = len(raws), len(joints)
    values = {f: np.full((N, n), np.nan) for f in fields}
    stamp = np.zeros(N, dtype=np.int64)
    counts = {"messages": N, "nameless": 0, "no_point": 0, "short_arrays": 0}
    named = [g.layout.key[1] for g in groups if g.layout.key[1]]
    order = tuple(index_order) or (named[0] if named else ())
    seen = set()
    for g in groups:
        stamp[g.index] = g.stamp_ns
        names = g.layout.key[1]
        if msgtype == cdr.JOINT_TRAJECTORY and g.layout.key[2] == 0:
            counts["no_point"] += len(g.index)
            continue
        if not names:
            counts["nameless"] += len(g.index)
            if not order:
                raise DataError(
                    f"{bag_name}: {topic} messages have empty name fields and no message names "
                    "its joints; set bag.joint_order (joint names in array order)"
                )
            names = order
        seen.update(names)
        for f, name_field in fields.items():
            arr = g.arrays.get(name_field)
            if arr is None or arr.shape[1] == 0:
                continue
            if arr.shape[1] != len(names):
                counts["short_arrays"] += len(g.index)
                continue
            for j, joint in enumerate(joints):
                if joint in names:
                    values[f][g.index, j] = arr[:, names.index(joint)]
    missing = [j for j in joints if j not in seen]
    if missing:
        raise DataError(
            f"{bag_name}: joint(s) {', '.join(missing)} not found on {topic} (joints there: "
            f"{', '.join(sorted(seen)) or 'none'}); fix free_joints/servo_joints in the bag mapping"
        )
    return Stream(normalise_topic(topic), msgtype, tuple(joints), recv, stamp, values, order, counts)


def read_float64_array(reader, topic, *, bag_name="bag") -> Stream:
    """Float64MultiArray rows (N, k) under ``values["data"]``; ``labels`` from ``layout.dim[0].label``
    split on commas when the label names every entry."""
    conns = connections_of(reader, topic, bag_name)
    if conns[0].msgtype != cdr.FLOAT64_ARRAY:
        raise DataError(f"{bag_name}: {topic} has type {conns[0].msgtype}; expected {cdr.FLOAT64_ARRAY}")
    recv, raws = read_raw(reader, conns, bag_name)
    groups = _decode(raws, cdr.FLOAT64_ARRAY, topic, bag_name)
    widths = {g.arrays["data"].shape[1] for g in groups}
    if len(widths) > 1:
        raise DataError(f"{bag_name}: {topic} carries arrays of different lengths {sorted(widths)}")
    width = widths.pop() if widths else 0
    data = np.full((len(raws), width), np.nan)
    labels = ()
    for g in groups:
        data[g.index] = g.arrays["data"]
        dims = g.layout.key[:-1]
        if dims and not labels and len(dims[0][0].split(",")) == width:
            labels = tuple(dims[0][0].split(","))
    return Stream(
        normalise_topic(topic),
        cdr.FLOAT64_ARRAY,
        (),
        recv,
        None,
        {"data": data},
        labels,
        {"messages": len(raws)},
    )


__all__ = [
    "open_bag",
    "bag_files_sha256",
    "topic_types",
    "connections_of",
    "read_raw",
    "read_named_arrays",
    "read_float64_array",
    "Stream",
    "normalise_topic",
]
