"""Publishing fixed-shape messages as pre-serialized bytes (the per-sample fast path of the nodes)."""
from __future__ import annotations

import struct

import numpy as np
from builtin_interfaces.msg import Time


class SerializedTemplate:
    """A message whose shape is fixed (names, frame, array sizes), published as its serialized bytes.

    ``build(stamp, *blocks)`` makes the message the ordinary way; it is serialized once with sentinel
    values to find where the stamp and each float64 block lie, and checked: bytes from :meth:`fill`
    must deserialize to the ordinary message for a second set of values (bytes are not compared:
    the serializer leaves CDR alignment padding undefined). Per sample only the stamp and the
    blocks are written into a copy of the template, so rclpy's Python-to-C message conversion
    (the larger part of a publish) is skipped. ``ok`` is False where the layout could not be found
    (then publish ``build(...)`` instead). ``stamp_format``: how the stamp is serialized, "<iI" for a
    header's builtin_interfaces/Time, "<dd" for seconds and nanoseconds as two float64 entries, None for
    a message without a stamp (``fill`` then ignores ``sec``/``nanosec``)."""

    def __init__(self, build, sizes, stamp_format: str = "<iI"):
        from rclpy.serialization import deserialize_message, serialize_message

        self.build, self.sizes, self.stamp_format = build, tuple(int(n) for n in sizes), stamp_format
        self.ok = False
        rng = np.random.default_rng(20240917)
        blocks = [1.0 + rng.random(n) for n in self.sizes]
        sec, nsec = 1_234_567_891, 987_654_321
        probe = build(Time(sec=sec, nanosec=nsec), *blocks)
        raw = serialize_message(probe)
        self.buffer = bytearray(raw)
        self.stamp_offset = self._find(raw, struct.pack(stamp_format, sec, nsec)) if stamp_format else -1
        self.offsets = [self._find(raw, b.astype("<f8").tobytes()) if b.size else 0 for b in blocks]
        if raw[:2] != b"\x00\x01" or self.stamp_offset is None or None in self.offsets:
            return
        check = [-1.0 - rng.random(n) for n in self.sizes]
        self.ok = deserialize_message(self.fill(42, 7, *check), type(probe)) == build(Time(sec=42, nanosec=7), *check)

    @staticmethod
    def _find(raw: bytes, pattern: bytes):
        at = raw.find(pattern)
        return at if at >= 0 and raw.find(pattern, at + 1) < 0 else None

    def fill(self, sec: int, nanosec: int, *blocks) -> bytes:
        buf = self.buffer
        if self.stamp_format:
            struct.pack_into(self.stamp_format, buf, self.stamp_offset, sec, nanosec)
        for offset, size, block in zip(self.offsets, self.sizes, blocks):
            buf[offset:offset + 8 * size] = np.ascontiguousarray(block, dtype="<f8").tobytes()
        return bytes(buf)
