"""sensor_msgs/JointState read straight from its serialized bytes (a raw subscription), by joint name.

A joint-state stream keeps one byte layout from message to message (frame_id, joint names and array
lengths do not change), so the layout is parsed once; afterwards a message whose non-numeric bytes
match it costs a stamp read, four byte-string comparisons and one gather of the float64s: every
double of a little-endian CDR message sits 8-aligned after the 4-byte encapsulation header, so the
whole message is one float64 view and q, q̇ and the free joints' efforts are one index away.

Anything else (a new layout, another encapsulation) takes the slow path: bounded in size, parsed with
bounds checks (or deserialized by rclpy and re-serialized when it is not little-endian CDR), checked
for duplicated and missing joints, and becomes the new layout.
"""

from __future__ import annotations

import struct
from typing import Any

import numpy as np

CDR_LE = b"\x00\x01"
#: Bigger joint states are refused before parsing (bounds the work one message can cause).
MAX_BYTES = 65536
#: Why :meth:`JointStateReader.read` refused a message.
READ_REASONS = ("malformed", "bad_size", "duplicate_joint", "missing_joint", "other_joints")
#: A message that names none of the model's joints (a gripper's own publisher): skipped, counted,
#: never a rejection — extra joints and other publishers do not degrade diagnostics.
NOT_REJECTED = ("other_joints",)


class _Cursor:
    def __init__(self, raw: bytes):
        self.raw, self.pos = raw, 4

    def align(self, size: int) -> None:
        self.pos += -(self.pos - 4) % size

    def u32(self) -> int:
        self.align(4)
        (value,) = struct.unpack_from("<I", self.raw, self.pos)
        self.pos += 4
        return value

    def string(self) -> str:
        length = self.u32()
        end = self.pos + length
        if length == 0 or end > len(self.raw) or self.raw[end - 1] != 0:
            raise ValueError("bad string")
        text = self.raw[self.pos : end - 1].decode("utf-8")
        self.pos = end
        return text

    def doubles(self):
        """(count word offset, count, first double's offset)."""
        self.align(4)
        at = self.pos
        count = self.u32()
        if count:
            self.align(8)
        first = self.pos
        self.pos += 8 * count
        if self.pos > len(self.raw):
            raise ValueError("truncated float64 sequence")
        return at, count, first


class JointStateReader:
    """Reads q, q̇ (when present) and the free joints' efforts (when present) of ``joints`` (model
    order; the first ``n_free`` are the free joints) from serialized JointState messages.

    After ``read(raw)`` returns "" the message's ``stamp_ns``, ``frame_id``, ``q``, ``qd`` (None without
    velocities) and ``effort_free`` (None without efforts) are set; ``q``/``qd`` are views of
    ``state`` ([q | q̇], the caller's buffer when given: ServoEstimator.joint_state), ``effort_free`` of
    the reader's own; all are overwritten by the next read. Otherwise it returns the reason (one of
    :data:`READ_REASONS`) and ``detail`` says more."""

    def __init__(self, joints, n_free: int, state=None, max_bytes: int = MAX_BYTES):
        self.joints, self.n_free, self.max_bytes = list(joints), int(n_free), int(max_bytes)
        n = len(self.joints)
        self.state = np.zeros(2 * n) if state is None else state
        if self.state.shape != (2 * n,) or self.state.dtype != np.float64:
            raise ValueError(f"state must be a float64 vector of {2 * n} entries")
        self._q, self._qd, self._eff = self.state[:n], self.state[n:], np.zeros(self.n_free)
        self._layout: Any = None
        self.stamp_ns, self.frame_id, self.reason, self.detail = 0, "", "", ""
        self.q = self._q
        self.qd: np.ndarray | None = None
        self.effort_free: np.ndarray | None = None

    def read(self, raw) -> str:
        layout = self._layout
        if (
            layout is None
            or len(raw) != layout[0]
            or not raw.startswith(layout[1], 12)
            or not raw.startswith(layout[2], layout[3])
            or not raw.startswith(layout[4], layout[5])
            or not raw.startswith(CDR_LE)
        ):
            raw = self._new_layout(raw)
            if raw is None:
                return self.reason
            layout = self._layout
        if layout[6]:  # a refused layout is cached too: counted without a re-parse
            self.detail = layout[7]
            return layout[6]
        sec, nanosec = struct.unpack_from("<iI", raw, 4)
        self.stamp_ns = sec * 1_000_000_000 + nanosec
        doubles = np.frombuffer(raw, "<f8", layout[9], 4)
        np.take(doubles, layout[8], out=layout[13])
        self.frame_id = layout[10]
        self.qd = self._qd if layout[11] else None
        if layout[12]:
            np.take(doubles, layout[14], out=self._eff)
            self.effort_free = self._eff
        else:
            self.effort_free = None
        return ""

    def _refuse(self, reason: str, detail: str) -> None:
        self.reason, self.detail = reason, detail
        return None

    def _new_layout(self, raw):
        """Parse a message's layout and make it the cached one; returns the (little-endian CDR) bytes
        to read the numbers from, or None (``reason``/``detail`` set) when the message is unreadable."""
        self._layout = None
        if len(raw) > self.max_bytes:
            return self._refuse("bad_size", f"{len(raw)} bytes, more than {self.max_bytes}")
        raw = bytes(raw)
        if not raw.startswith(CDR_LE):
            raw = _as_little_endian_cdr(raw)
            if raw is None:
                return self._refuse("malformed", "bytes rclpy cannot read as a JointState")
        try:
            cur = _Cursor(raw)
            cur.pos = 12
            frame = cur.string()
            names = [cur.string() for _ in range(cur.u32())]
            (p_at, k_p, p0), (v_at, k_v, v0), (e_at, k_e, e0) = (cur.doubles() for _ in range(3))
        except (ValueError, struct.error, UnicodeDecodeError) as exc:
            return self._refuse("malformed", f"not a JointState ({exc})")
        k = len(names)
        reason, detail = "", ""
        if k_p != k or k_v not in (0, k) or k_e not in (0, k):
            reason, detail = "bad_size", f"{k} names, {k_p} positions, {k_v} velocities, {k_e} efforts"
        elif len(set(names)) != k:
            repeated = sorted({j for j in names if names.count(j) > 1})
            reason, detail = "duplicate_joint", f"joint names {repeated} appear more than once"
        elif names and not any(j in names for j in self.joints):
            reason, detail = "other_joints", f"none of the model joints in {names[:8]}"
        elif any(j not in names for j in self.joints):
            missing = [j for j in self.joints if j not in names]
            reason, detail = "missing_joint", f"model joints {missing} not in {names}"
        index = effort = np.empty(0, dtype=np.intp)
        if not reason:
            at = {j: i for i, j in enumerate(names)}
            rows = np.array([at[j] for j in self.joints], dtype=np.intp)
            index = (p0 - 4) // 8 + rows
            if k_v:
                index = np.concatenate([index, (v0 - 4) // 8 + rows])
            if k_e:
                effort = (e0 - 4) // 8 + rows[: self.n_free]
        # The static bytes: frame and names with the position count (from byte 12), and the velocity
        # and effort count words (the padding before a double array is left out: it is undefined).
        self._layout = (
            len(raw),
            raw[12 : p_at + 4],
            raw[v_at : v_at + 4],
            v_at,
            raw[e_at : e_at + 4],
            e_at,
            reason,
            detail,
            index,
            (len(raw) - 4) // 8,
            frame,
            bool(k_v),
            bool(k_e),
            self.state[: index.size],
            effort,
        )
        return raw


def _as_little_endian_cdr(raw: bytes):
    """Another encapsulation (big-endian, XCDR2): rclpy reads it, and writes it back as CDR_LE."""
    try:
        from rclpy.serialization import deserialize_message, serialize_message
        from sensor_msgs.msg import JointState

        again = serialize_message(deserialize_message(raw, JointState))
    except Exception:  # noqa: BLE001 - rclpy raises several unrelated types for bytes it cannot read
        return None
    return again if again.startswith(CDR_LE) else None


def trajectory_size(raw) -> tuple[int, int] | None:
    """(joint names, points) of a serialized JointTrajectory, read from its first bytes (the points
    are not touched), or None when it is not little-endian CDR. ValueError when it is unreadable."""
    if not raw.startswith(CDR_LE):
        return None
    try:
        cur = _Cursor(raw)
        cur.pos = 12
        cur.string()
        names = cur.u32()
        if 5 * names > len(raw):
            raise ValueError(f"{names} joint names in {len(raw)} bytes")
        for _ in range(names):
            cur.string()
        return names, cur.u32()
    except (struct.error, UnicodeDecodeError) as exc:
        raise ValueError(f"truncated ({exc})") from None
