"""sensor_msgs/JointState read straight from its serialized bytes (a raw subscription), by joint name.

A joint-state stream keeps one byte layout from message to message (frame_id, joint names and array
lengths do not change), so the layout is parsed once; afterwards a message whose non-numeric bytes
match it costs a stamp read, four byte-string comparisons and one gather of the float64s: every
double of a little-endian CDR message sits 8-aligned after the 4-byte encapsulation header, so the
whole message is one float64 view and q, q̇ and the free joints' efforts are one index away.

Anything else (a new layout, another encapsulation) takes the slow path: bounded in size, parsed with
bounds checks (or deserialized by rclpy and re-serialized when it is not little-endian CDR), checked
for duplicated and missing joints, and becomes the new layout. The last :data:`LAYOUTS` layouts are
kept, so two publishers on one topic (an arm's and a gripper's) both stay on the fast path.

Joint states split over several publishers (arm and gripper, or one message per joint) are merged by
joint name when ``merge_window_ns`` > 0 (:class:`JointStateMerge`): a message that carries some of
the joints is held as a *part*, and a sample is read once every joint has a part within the window.
"""

from __future__ import annotations

import struct
from typing import Any

import numpy as np

from ..bags.cdr import CdrCursor

CDR_LE = b"\x00\x01"
#: Bigger joint states are refused before parsing (bounds the work one message can cause).
MAX_BYTES = 65536
#: Layouts kept for the fast path (one per publisher of a split joint-state topic, a few spare).
LAYOUTS = 8
#: Why :meth:`JointStateReader.read` gave no sample for a message.
READ_REASONS = ("malformed", "bad_size", "duplicate_joint", "missing_joint", "other_joints", "partial")
#: A message that names none of the model's joints (a gripper's own publisher), and a part held for
#: merging (``partial``): counted, never a rejection — extra joints and other publishers do not
#: degrade diagnostics. (A part dropped without ever completing a sample counts as ``missing_joint``.)
NOT_REJECTED = ("other_joints", "partial")
#: Counted by reason, but not a skipped input: a held part's values go into the next sample.
HELD = ("partial",)


class JointStateMerge:
    """One joint state of ``n`` joints (the first ``n_free`` with efforts) assembled from parts that
    each carry some of the joints — ROS-free: stamps are integer nanoseconds, values numpy arrays.

    :meth:`add` holds a part's values by joint (a newer part of a joint replaces the held one). The
    held values whose stamp lies more than ``window_ns`` before the newest held stamp are dropped.
    Once every joint holds a value the sample is complete: ``stamp_ns`` is the newest part's stamp
    (the time the assembled state was last known to be current; the other parts are at most
    ``window_ns`` older), ``q``/``qd``/``effort`` are set (``qd``/``effort`` None unless every part
    carried them), and every held value is consumed — each part goes into at most one sample, so a
    part that keeps repeating with no partner never produces one. ``dropped`` counts the parts
    discarded without going into a sample (every one of their joints replaced or out of the window);
    ``detail`` says why the last was."""

    def __init__(self, n: int, n_free: int, window_ns: int):
        self.n, self.n_free, self.window_ns = int(n), int(n_free), int(window_ns)
        self._q, self._qd, self._eff = np.zeros(n), np.zeros(n), np.zeros(self.n_free)
        self._stamp = np.zeros(n, dtype=np.int64)
        self._part = np.full(n, -1, dtype=np.int64)  # id of the part holding each joint; -1 none
        self._has_qd, self._has_eff = np.zeros(n, dtype=bool), np.zeros(self.n_free, dtype=bool)
        self._seq = 0
        self.held = False
        self.dropped = 0
        self.stamp_ns, self.detail = 0, ""
        self.q = self._q
        self.qd: np.ndarray | None = None
        self.effort: np.ndarray | None = None

    def add(self, stamp_ns: int, rows, q, qd=None, effort=None) -> bool:
        """A part: ``rows`` (model indices of the joints it carries), their ``q``, ``qd`` (None: no
        velocities) and ``effort`` (None: no efforts; else one per row, free rows used). True when
        the sample is complete (then read ``stamp_ns``, ``q``, ``qd``, ``effort``)."""
        rows = np.asarray(rows, dtype=np.intp)
        part = self._part
        before = set(part[part >= 0].tolist()) if self.held else set()
        self._seq += 1
        part[rows] = self._seq
        self._stamp[rows] = stamp_ns
        self._q[rows] = q
        has_qd = qd is not None
        if has_qd:
            self._qd[rows] = qd
        self._has_qd[rows] = has_qd
        free = rows < self.n_free
        if free.any():
            self._has_eff[rows[free]] = effort is not None
            if effort is not None:
                self._eff[rows[free]] = np.asarray(effort)[free]
        held = part >= 0
        newest = int(self._stamp[held].max())
        late = held & (self._stamp < newest - self.window_ns)
        if late.any():
            part[late] = -1
        gone = (before | {self._seq}) - set(part[part >= 0].tolist())
        if gone:
            self.dropped += len(gone)
            self.detail = (
                f"a part stamped {(newest - int(self._stamp[late].min())) * 1e-9:.6f} s before the newest "
                f"(more than the merge window {self.window_ns * 1e-9:g} s)"
                if late.any()
                else "replaced by a newer part before the rest of the joints arrived"
            )
        if (part >= 0).all():
            self.stamp_ns = newest
            self.qd = self._qd if self._has_qd.all() else None
            self.effort = self._eff if self._has_eff.all() else None
            part[:] = -1
            self.held = False
            return True
        self.held = bool((part >= 0).any())
        return False

    def discard(self, why: str = "a message with every joint arrived before the rest of the part's") -> None:
        """Drop every held part (counted): a complete message superseded them."""
        if self.held:
            self.dropped += len(set(self._part[self._part >= 0].tolist()))
            self.detail = why
            self._part[:] = -1
            self.held = False

    def reset(self) -> None:
        """Forget held parts, uncounted (a new activation)."""
        self._part[:] = -1
        self.held = False


class JointStateReader:
    """Reads q, q̇ (when present) and the free joints' efforts (when present) of ``joints`` (model
    order; the first ``n_free`` are the free joints) from serialized JointState messages.

    After ``read(raw)`` returns "" the message's ``stamp_ns``, ``frame_id``, ``q``, ``qd`` (None without
    velocities) and ``effort_free`` (None without efforts) are set; ``q``/``qd`` are views of
    ``state`` ([q | q̇], the caller's buffer when given: ServoEstimator.joint_state), ``effort_free`` of
    the reader's own; all are overwritten by the next read. Otherwise it returns the reason (one of
    :data:`READ_REASONS`) and ``detail`` says more.

    ``merge_window_ns`` > 0: a message with some but not all of the joints is a part
    (:class:`JointStateMerge`, ``merge``): held (``read`` returns "partial") until the other joints
    arrive within the window; the message that completes the sample returns "" with the merged
    values, the newest part's stamp and its own frame_id. Parts dropped without completing a sample
    are counted in ``merge.dropped`` (the caller takes them as ``missing_joint``). 0: every message
    must carry every joint (``missing_joint`` otherwise)."""

    def __init__(self, joints, n_free: int, state=None, max_bytes: int = MAX_BYTES, merge_window_ns: int = 0):
        self.joints, self.n_free, self.max_bytes = list(joints), int(n_free), int(max_bytes)
        n = len(self.joints)
        self.state = np.zeros(2 * n) if state is None else state
        if self.state.shape != (2 * n,) or self.state.dtype != np.float64:
            raise ValueError(f"state must be a float64 vector of {2 * n} entries")
        if merge_window_ns < 0:
            raise ValueError(f"merge_window_ns {merge_window_ns} must be >= 0")
        self._q, self._qd, self._eff = self.state[:n], self.state[n:], np.zeros(self.n_free)
        self._layout: Any = None
        self._layouts: list = []
        self.merge = JointStateMerge(n, self.n_free, merge_window_ns) if merge_window_ns > 0 else None
        self.stamp_ns, self.frame_id, self.reason, self.detail = 0, "", "", ""
        self.q = self._q
        self.qd: np.ndarray | None = None
        self.effort_free: np.ndarray | None = None

    def reset(self) -> None:
        """Forget held parts (a new activation)."""
        if self.merge is not None:
            self.merge.reset()

    def take_dropped(self) -> int:
        """Parts dropped since the last call without completing a sample (``merge.detail`` says why)."""
        merge = self.merge
        if merge is None or not merge.dropped:
            return 0
        dropped, merge.dropped = merge.dropped, 0
        return dropped

    @staticmethod
    def _matches(raw, layout) -> bool:
        return (
            len(raw) == layout[0]
            and raw.startswith(layout[1], 12)
            and raw.startswith(layout[2], layout[3])
            and raw.startswith(layout[4], layout[5])
            and raw.startswith(CDR_LE)
        )

    def read(self, raw) -> str:
        layout = self._layout
        if layout is None or not self._matches(raw, layout):
            for layout in self._layouts:
                if self._matches(raw, layout):
                    self._layout = layout
                    break
            else:
                raw = self._new_layout(raw)
                if raw is None:
                    return self.reason
                layout = self._layout
        if layout[6]:  # a refused layout is cached too: counted without a re-parse
            self.detail = layout[7]
            return layout[6]
        sec, nanosec = struct.unpack_from("<iI", raw, 4)
        stamp = sec * 1_000_000_000 + nanosec
        doubles = np.frombuffer(raw, "<f8", layout[9], 4)
        self.frame_id = layout[10]
        merge = self.merge
        if layout[15] is not None:  # a part: held until the other joints arrive
            assert merge is not None  # parts are laid out only when merging
            values = np.take(doubles, layout[8])
            k = layout[15].size
            effort = np.take(doubles, layout[14]) if layout[12] else None
            if not merge.add(stamp, layout[15], values[:k], values[k:] if layout[11] else None, effort):
                self.detail = f"part {layout[16]} held for merging"
                return "partial"
            self.stamp_ns = merge.stamp_ns
            self._q[:] = merge.q
            self.qd = None
            if merge.qd is not None:
                self._qd[:] = merge.qd
                self.qd = self._qd
            self.effort_free = None
            if merge.effort is not None:
                self._eff[:] = merge.effort
                self.effort_free = self._eff
            return ""
        if merge is not None and merge.held:
            merge.discard()
        self.stamp_ns = stamp
        np.take(doubles, layout[8], out=layout[13])
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
            cur = CdrCursor(raw, strict=True)
            _, frame = cur.header()
            names = list(cur.strings())
            (p_at, p0, k_p), (v_at, v0, k_v), (e_at, e0, k_e) = (cur.counted_f64_seq() for _ in range(3))
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
        elif any(j not in names for j in self.joints) and (self.merge is None or not names):
            missing = [j for j in self.joints if j not in names]
            reason, detail = "missing_joint", f"model joints {missing} not in {names}"
        index = effort = np.empty(0, dtype=np.intp)
        carried = None  # a part's model rows (merging), None for a whole state
        if not reason:
            at = {j: i for i, j in enumerate(names)}
            model_rows = [r for r, j in enumerate(self.joints) if j in at]
            if len(model_rows) < len(self.joints):
                carried = np.array(model_rows, dtype=np.intp)
            rows = np.array([at[self.joints[r]] for r in model_rows], dtype=np.intp)
            index = (p0 - 4) // 8 + rows
            if k_v:
                index = np.concatenate([index, (v0 - 4) // 8 + rows])
            if k_e:
                # a whole state: the free joints' efforts; a part: one per carried joint
                effort = (e0 - 4) // 8 + (rows if carried is not None else rows[: self.n_free])
        # The static bytes: frame and names with the position count (from byte 12), and the velocity
        # and effort count words (the padding before a double array is left out: it is undefined).
        self._layout = layout = (
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
            carried,
            [self.joints[r] for r in carried] if carried is not None else None,
        )
        self._layouts.insert(0, layout)
        del self._layouts[LAYOUTS:]
        return raw


def merge_window_ns(seconds: float) -> int:
    """The ``joint_state_merge_window_s`` parameter in integer nanoseconds (0: merging off)."""
    return max(0, int(round(float(seconds) * 1e9)))


#: The ``joint_state_merge_window_s`` parameter's description (every node that reads joint states).
MERGE_WINDOW_TEXT = (
    "joint_states split over several publishers (arm and gripper, one message per joint) are merged by "
    "joint name: a message with some of the joints is held, and the state is processed once every joint "
    "has a value stamped within this window of the newest (stamp = the newest part's); each part is used "
    "once, parts that find no partner within it are dropped (counted as missing_joint); 0 = off: every "
    "message must carry every joint"
)
#: Its default: parts of one cycle are stamped within microseconds of each other; 2 ms also covers
#: per-joint drivers that stamp at their own read time.
MERGE_WINDOW_DEFAULT_S = 0.002


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
        cur = CdrCursor(raw, strict=True)
        cur.header()
        names = cur.u32()
        if 5 * names > len(raw):
            raise ValueError(f"{names} joint names in {len(raw)} bytes")
        for _ in range(names):
            cur.string()
        return names, cur.u32()
    except (struct.error, UnicodeDecodeError) as exc:
        raise ValueError(f"truncated ({exc})") from None
