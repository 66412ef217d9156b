"""Vectorised CDR (little-endian, ROS 2) decoding and encoding of the few message types a dynamics
bag carries: sensor_msgs/JointState, trajectory_msgs/JointTrajectory (first point) and
std_msgs/Float64MultiArray.

Why: deserialising a million JointState messages one by one costs several µs each. Messages of one
topic almost always share one byte layout (same frame_id, same joint names, same array lengths), so
one message is parsed in Python (its *layout*: where the stamp and the float64 arrays sit), every
message of the same length whose non-numeric bytes match it is decoded at once as a row of a
``(messages, bytes)`` matrix, and any other message gets a layout of its own.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

import numpy as np

JOINT_STATE = "sensor_msgs/msg/JointState"
JOINT_TRAJECTORY = "trajectory_msgs/msg/JointTrajectory"
FLOAT64_ARRAY = "std_msgs/msg/Float64MultiArray"
HEADER_BYTES = 4  # encapsulation header; CDR alignment counts from the end of it


class CdrError(ValueError):
    """A message is not the CDR its type says."""


@dataclass(frozen=True)
class Layout:
    """Where one message keeps its numbers. ``key`` holds the labels (joint names, dim labels,
    frame_id); ``arrays`` maps a field to ``(byte offset, count)``; ``stamp`` is the offset of the
    header stamp (sec int32, nanosec uint32) or None for stamp-less types."""

    size: int
    key: tuple
    arrays: dict
    stamp: int | None

    def static_mask(self) -> np.ndarray:
        """Bytes that must equal the template's for another message to share this layout."""
        mask = np.ones(self.size, dtype=bool)
        mask[2:HEADER_BYTES] = False  # encapsulation options may differ between writers
        if self.stamp is not None:
            mask[self.stamp : self.stamp + 8] = False
        for offset, count in self.arrays.values():
            mask[offset : offset + 8 * count] = False
        return mask


class CdrCursor:
    """Reads little-endian CDR field by field after the encapsulation header, every read bounds-checked
    (:class:`CdrError`, a ValueError). ``strict``: a string must end in its NUL and be valid UTF-8 (a live
    message that is not is refused); otherwise, as for a recorded bag, bad bytes are decoded as
    replacement characters."""

    def __init__(self, raw: bytes, strict: bool = False):
        if len(raw) < HEADER_BYTES or raw[1] != 1:
            raise CdrError("not little-endian CDR")
        self.raw, self.pos, self.strict = raw, HEADER_BYTES, strict

    def align(self, size: int):
        self.pos += -(self.pos - HEADER_BYTES) % size

    def u32(self) -> int:
        self.align(4)
        if self.pos + 4 > len(self.raw):
            raise CdrError("truncated message")
        (value,) = struct.unpack_from("<I", self.raw, self.pos)
        self.pos += 4
        return value

    def string(self) -> str:
        length = self.u32()
        end = self.pos + length
        if length == 0 or end > len(self.raw) or (self.strict and self.raw[end - 1] != 0):
            raise CdrError("bad string")
        text = bytes(self.raw[self.pos : end - 1]).decode("utf-8", "strict" if self.strict else "replace")
        self.pos = end
        return text

    def strings(self) -> tuple:
        return tuple(self.string() for _ in range(self.u32()))

    def counted_f64_seq(self) -> tuple[int, int, int]:
        """(offset of the count word, offset of the first double, count) of a float64 sequence."""
        self.align(4)
        at = self.pos
        count = self.u32()
        if count:
            self.align(8)
        first = self.pos
        self.pos += 8 * count
        if self.pos > len(self.raw):
            raise CdrError("truncated float64 sequence")
        return at, first, count

    def f64_seq(self) -> tuple[int, int]:
        """(offset of the first double, count) of a float64 sequence."""
        return self.counted_f64_seq()[1:]

    def header(self) -> tuple[int, str]:
        stamp = self.pos
        self.pos += 8
        return stamp, self.string()


def joint_state_layout(raw: bytes) -> Layout:
    cur = CdrCursor(raw)
    stamp, frame = cur.header()
    names = cur.strings()
    arrays = {field: cur.f64_seq() for field in ("position", "velocity", "effort")}
    return Layout(len(raw), (frame, names), arrays, stamp)


def joint_trajectory_layout(raw: bytes) -> Layout:
    """Layout of a JointTrajectory; only its first point is read (a servo command is one point)."""
    cur = CdrCursor(raw)
    stamp, frame = cur.header()
    names = cur.strings()
    if cur.u32() == 0:
        return Layout(len(raw), (frame, names, 0), {}, stamp)
    arrays = {field: cur.f64_seq() for field in ("positions", "velocities", "accelerations", "effort")}
    return Layout(len(raw), (frame, names, 1), arrays, stamp)


def float64_array_layout(raw: bytes) -> Layout:
    cur = CdrCursor(raw)
    dims: list[tuple[str, int, int] | int] = []  # (label, size, stride) per dim, then data_offset
    for _ in range(cur.u32()):
        label = cur.string()
        dims.append((label, cur.u32(), cur.u32()))
    dims.append(cur.u32())  # data_offset
    return Layout(len(raw), tuple(dims), {"data": cur.f64_seq()}, None)


LAYOUTS = {
    JOINT_STATE: joint_state_layout,
    JOINT_TRAJECTORY: joint_trajectory_layout,
    FLOAT64_ARRAY: float64_array_layout,
}


@dataclass
class Group:
    """Messages (by index into the input list) that share one layout, decoded."""

    layout: Layout
    index: np.ndarray  # (m,) positions in the input list
    stamp_ns: np.ndarray | None  # (m,) int64
    arrays: dict  # field -> (m, count) float64


def _decode_rows(rows: np.ndarray, layout: Layout):
    stamp = None
    if layout.stamp is not None:
        s = layout.stamp
        sec = np.ascontiguousarray(rows[:, s : s + 4]).view("<i4")[:, 0].astype(np.int64)
        nsec = np.ascontiguousarray(rows[:, s + 4 : s + 8]).view("<u4")[:, 0].astype(np.int64)
        stamp = sec * 1_000_000_000 + nsec
    arrays = {
        field: np.ascontiguousarray(rows[:, off : off + 8 * cnt]).view("<f8").reshape(len(rows), cnt)
        for field, (off, cnt) in layout.arrays.items()
    }
    return stamp, arrays


def decode_messages(raws: list, msgtype: str, max_layouts: int = 64) -> list[Group]:
    """Decode every message in ``raws`` (bytes) of ``msgtype``; raise ``CdrError`` with the index of
    the first message that does not parse."""
    parse = LAYOUTS[msgtype]
    lengths = np.fromiter((len(r) for r in raws), dtype=np.int64, count=len(raws))
    groups: list[Group] = []
    for size in np.unique(lengths):
        index = np.flatnonzero(lengths == size)
        matrix = np.frombuffer(b"".join([raws[i] for i in index]), dtype=np.uint8).reshape(len(index), size)
        while len(index):
            if len(groups) >= max_layouts:
                raise CdrError(f"more than {max_layouts} distinct message layouts")
            try:
                layout = parse(raws[index[0]])
            except (CdrError, struct.error, UnicodeDecodeError) as exc:
                raise CdrError(f"message {index[0]}: {exc}") from None
            mask = layout.static_mask()
            same = (matrix[:, mask] == matrix[0, mask]).all(axis=1)
            stamp, arrays = _decode_rows(matrix[same], layout)
            groups.append(Group(layout, index[same], stamp, arrays))
            index, matrix = index[~same], matrix[~same]
    return groups


def encode_messages(template: bytes, msgtype: str, stamp_ns=None, arrays=None) -> list[bytes]:
    """Messages like ``template`` (one serialised message of ``msgtype`` with arrays of the right
    lengths) with the stamps and float64 arrays replaced row by row."""
    layout = LAYOUTS[msgtype](template)
    arrays = arrays or {}
    count = len(stamp_ns) if stamp_ns is not None else len(next(iter(arrays.values())))
    rows = np.tile(np.frombuffer(template, dtype=np.uint8), (count, 1))
    if stamp_ns is not None:
        stamp_ns = np.asarray(stamp_ns, dtype=np.int64)
        s = layout.stamp
        if s is None:
            raise CdrError(f"{msgtype} has no header stamp to set")
        rows[:, s : s + 4] = (stamp_ns // 1_000_000_000).astype("<i4").view(np.uint8).reshape(count, 4)
        rows[:, s + 4 : s + 8] = (stamp_ns % 1_000_000_000).astype("<u4").view(np.uint8).reshape(count, 4)
    for field, values in arrays.items():
        off, cnt = layout.arrays[field]
        values = np.ascontiguousarray(values, dtype="<f8").reshape(count, cnt)
        rows[:, off : off + 8 * cnt] = values.view(np.uint8).reshape(count, 8 * cnt)
    flat = rows.tobytes()
    size = layout.size
    return [flat[i : i + size] for i in range(0, count * size, size)]
