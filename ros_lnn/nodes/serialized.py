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

    def __init__(self, build, sizes, stamp_format: str | None = "<iI"):
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
        self.ok = deserialize_message(self.fill(42, 7, *check), type(probe)) == build(
            Time(sec=42, nanosec=7), *check
        )

    @staticmethod
    def _find(raw: bytes, pattern: bytes):
        at = raw.find(pattern)
        return at if at >= 0 and raw.find(pattern, at + 1) < 0 else None

    def fill(self, sec: int, nanosec: int, *blocks) -> bytes:
        buf = self.buffer
        if self.stamp_format:
            struct.pack_into(self.stamp_format, buf, self.stamp_offset, sec, nanosec)
        for offset, size, block in zip(self.offsets, self.sizes, blocks):
            buf[offset : offset + 8 * size] = np.ascontiguousarray(block, dtype="<f8").tobytes()
        return bytes(buf)


class PackedMessages:
    """Several fixed-shape messages filled from one float64 sample vector and a stamp by one gather.

    ``builders``: functions ``build(stamp, sample) -> message`` that read their numbers from slices of
    ``sample`` (a vector of ``size`` float64s). Each is serialized once with a sentinel stamp and
    sentinel values to find where each sample entry and the stamp land (the stamp as a header's
    int32 + uint32, or as two float64 entries), and checked: the bytes of :meth:`fill` must deserialize
    to the ordinary message for a second stamp and sample. Per sample, :meth:`fill` writes the stamp
    and the vector into one source buffer and copies every byte into place with one numpy gather;
    rclpy's Python-to-C message conversion is skipped. ``ok`` is False where a layout could not be
    found (then publish ``[build(stamp, sample) for build in builders]``)."""

    def __init__(self, builders, size: int):
        from rclpy.serialization import deserialize_message, serialize_message

        self.builders, self.size, self.ok = list(builders), int(size), False
        rng = np.random.default_rng(20240917)
        sample = 1.0 + rng.random(self.size)
        sec, nsec = 1_234_567_891, 987_654_321
        self._src = bytearray(24 + 8 * self.size)
        self._src_u8 = np.frombuffer(self._src, np.uint8)
        self._src_f64 = np.frombuffer(self._src, "<f8", self.size, 24)
        sources = {
            struct.pack("<iI", sec, nsec): np.arange(8),
            struct.pack("<dd", sec, nsec): np.arange(8, 24),
        }
        sources.update(
            {struct.pack("<d", v): np.arange(24 + 8 * i, 32 + 8 * i) for i, v in enumerate(sample)}
        )
        raws = [serialize_message(build(Time(sec=sec, nanosec=nsec), sample)) for build in self.builders]
        dst, src, self._spans, offset = [], [], [], 0
        for raw in raws:
            if raw[:2] != b"\x00\x01":
                return
            for pattern, where in sources.items():
                at = raw.find(pattern)
                while at >= 0:
                    dst.append(offset + at + np.arange(len(pattern)))
                    src.append(where)
                    at = raw.find(pattern, at + 1)
            self._spans.append((offset, offset + len(raw)))
            offset += len(raw)
        self._dst_buffer = bytearray(b"".join(raws))
        self._dst_u8 = np.frombuffer(self._dst_buffer, np.uint8)
        self._dst_index = np.concatenate(dst) if dst else np.empty(0, np.intp)
        self._src_index = np.concatenate(src) if src else np.empty(0, np.intp)
        self._views = [memoryview(self._dst_buffer)[a:b] for a, b in self._spans]
        check = -1.0 - rng.random(self.size)
        filled = self.fill(42, 7, check)
        self.ok = all(
            deserialize_message(raw, type(ref)) == ref
            for raw, ref in zip(filled, (build(Time(sec=42, nanosec=7), check) for build in self.builders))
        )

    def fill(self, sec: int, nanosec: int, sample) -> list[bytes]:
        """The serialized messages for one stamp and sample vector, in the order of the builders."""
        struct.pack_into("<iIdd", self._src, 0, sec, nanosec, sec, nanosec)
        self._src_f64[:] = sample
        self._dst_u8[self._dst_index] = self._src_u8[self._src_index]
        return [bytes(view) for view in self._views]

    def messages(self, sec: int, nanosec: int, sample) -> list:
        """:meth:`fill` where the layout was found, else the messages built the ordinary way."""
        if self.ok:
            return self.fill(sec, nanosec, sample)
        stamp = Time(sec=sec, nanosec=nanosec)
        return [build(stamp, sample) for build in self.builders]


class PackersByFrame:
    """One :class:`PackedMessages` per frame_id, made by ``make(frame)`` on first use. The frame comes
    from a live parameter or from the inputs, so the cache is cleared once it holds ``limit``."""

    def __init__(self, make, limit: int = 16):
        self._make, self._limit = make, limit
        self._packers: dict[str, PackedMessages] = {}

    def __getitem__(self, frame: str) -> PackedMessages:
        packer = self._packers.get(frame)
        if packer is None:
            if len(self._packers) >= self._limit:
                self._packers.clear()
            packer = self._packers[frame] = self._make(frame)
        return packer
