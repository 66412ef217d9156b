"""Small pieces shared by the nodes: QoS, parameter declaration, stamps, message layouts, statistics.

The message builders here are used by both the estimator and the simulator's ``~/ground_truth``,
so the two publish the same layout by construction.
"""
from __future__ import annotations

import math
import struct
import time
from array import array
from collections import deque

import numpy as np
from builtin_interfaces.msg import Duration, Time
from diagnostic_msgs.msg import DiagnosticStatus, KeyValue
from rcl_interfaces.msg import ParameterDescriptor
from rclpy.qos import (DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy,
                       qos_profile_sensor_data)
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray, MultiArrayDimension
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

#: Entries of ``~/energy`` (Float64MultiArray): J, J, J, W, W, W, W, then the input's stamp
#: (seconds and nanoseconds as exact integers, since Float64MultiArray has no header).
ENERGY_LABELS = ("T", "V", "E", "T_dot", "V_dot", "E_dot", "power", "stamp_sec", "stamp_nanosec")
ENERGY_LAYOUT_LABEL = ",".join(ENERGY_LABELS)

#: High-rate streams (joint states and per-sample outputs): best effort, shallow queue.
SENSOR_QOS = QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=10, reliability=ReliabilityPolicy.BEST_EFFORT,
                        durability=DurabilityPolicy.VOLATILE)
#: Commands and low-rate outputs: reliable.
COMMAND_QOS = QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=10, reliability=ReliabilityPolicy.RELIABLE)
assert SENSOR_QOS.reliability == qos_profile_sensor_data.reliability


def declare(node, name: str, default, description: str, *, dynamic: bool = False, read_only: bool = False):
    """Declare one parameter with a description; returns its value. Array parameters are declared
    with dynamic typing: rclpy and the YAML parser cannot type an empty list ([] would be rejected
    or left unset), and an empty list is a meaningful value for several of them."""
    desc = ParameterDescriptor(description=description, read_only=read_only,
                               dynamic_typing=dynamic or isinstance(default, list))
    return node.declare_parameter(name, default, desc).value


def param(node, name: str):
    """A parameter's value; arrays as lists (an empty or unset array parameter reads as [])."""
    value = node.get_parameter(name).value
    if value is None:
        return []
    return list(value) if isinstance(value, (list, tuple, bytes)) or type(value).__name__ == "array" else value


def stamp_ns(stamp) -> int:
    return int(stamp.sec) * 1_000_000_000 + int(stamp.nanosec)


def ns_to_stamp(ns: int) -> Time:
    return Time(sec=int(ns // 1_000_000_000), nanosec=int(ns % 1_000_000_000))


def duration_ns(d) -> int:
    return int(d.sec) * 1_000_000_000 + int(d.nanosec)


def seconds_to_duration(s: float) -> Duration:
    ns = int(round(s * 1e9))
    return Duration(sec=ns // 1_000_000_000, nanosec=ns % 1_000_000_000)


def _floats(x) -> array:
    """float64[] field value: an array('d') is taken by the message setters without a per-element check."""
    out = array("d")
    out.frombytes(np.ascontiguousarray(x, dtype=np.float64).tobytes())
    return out


def driving_force_msg(stamp: Time, frame_id: str, names, q_e, qd_e, Q_e) -> JointState:
    msg = JointState()
    msg.header.stamp, msg.header.frame_id = stamp, frame_id
    msg.name = list(names)
    msg.position, msg.velocity, msg.effort = _floats(q_e), _floats(qd_e), _floats(Q_e)
    return msg


def prediction_msg(stamp: Time, frame_id: str, names, q, qd, qdd, Q) -> JointTrajectory:
    """One point at the input's time: measured q, q̇; q̈ with the predicted q̈_f; effort = Q."""
    msg = JointTrajectory()
    msg.header.stamp, msg.header.frame_id = stamp, frame_id
    msg.joint_names = list(names)
    point = JointTrajectoryPoint()
    point.positions, point.velocities, point.accelerations, point.effort = (
        _floats(q), _floats(qd), _floats(qdd), _floats(Q))
    msg.points = [point]
    return msg


def energy_msg(stamp: Time, out: dict) -> Float64MultiArray:
    msg = Float64MultiArray()
    msg.layout.dim = [MultiArrayDimension(label=ENERGY_LAYOUT_LABEL, size=len(ENERGY_LABELS),
                                          stride=len(ENERGY_LABELS))]
    values = [float(out[k]) for k in ENERGY_LABELS[:7]] + [float(stamp.sec), float(stamp.nanosec)]
    msg.data = array("d", values)
    return msg


def energy_values_msg(stamp: Time, values) -> Float64MultiArray:
    """``~/energy`` from its first seven entries (T, V, E, Ṫ, V̇, Ė, q̇ᵀQ); the stamp is appended."""
    msg = Float64MultiArray()
    msg.layout.dim = [MultiArrayDimension(label=ENERGY_LAYOUT_LABEL, size=len(ENERGY_LABELS),
                                          stride=len(ENERGY_LABELS))]
    data = array("d", np.ascontiguousarray(values, dtype=np.float64).tobytes())
    data.extend((float(stamp.sec), float(stamp.nanosec)))
    msg.data = data
    return msg


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


def energy_dict(msg: Float64MultiArray) -> dict:
    """Read ``~/energy`` back by its labels."""
    labels = msg.layout.dim[0].label.split(",") if msg.layout.dim else list(ENERGY_LABELS)
    return dict(zip(labels, msg.data))


def outputs_finite(out: dict) -> bool:
    """Everything the estimator publishes is finite (one sum: NaN/inf anywhere makes it non-finite)."""
    total = float(out["Q"].sum()) + float(out["qdd"].sum()) + float(out["T"]) + float(out["V"]) + \
        float(out["T_dot"]) + float(out["V_dot"]) + float(out["power"])
    return math.isfinite(total)


class RateLatency:
    """Input rate and processing latency over a sliding window (for /diagnostics and the live table)."""

    def __init__(self, window_s: float = 2.0, max_samples: int = 20000):
        self.window_s = window_s
        self.arrivals: deque = deque(maxlen=max_samples)
        self.latencies: deque = deque(maxlen=max_samples)

    def arrive(self, now: float | None = None) -> None:
        self.arrivals.append(time.monotonic() if now is None else now)

    def latency(self, latency_s: float, now: float | None = None) -> None:
        self.latencies.append((time.monotonic() if now is None else now, latency_s))

    def summary(self, now: float | None = None) -> dict:
        now = time.monotonic() if now is None else now
        cut = now - self.window_s
        while self.arrivals and self.arrivals[0] < cut:
            self.arrivals.popleft()
        while self.latencies and self.latencies[0][0] < cut:
            self.latencies.popleft()
        lat = np.array([v for _, v in self.latencies]) * 1e6
        rate = 0.0
        if len(self.arrivals) >= 2:
            span = self.arrivals[-1] - self.arrivals[0]
            rate = (len(self.arrivals) - 1) / span if span > 0 else 0.0
        return {"rate_hz": rate,
                "latency_median_us": float(np.median(lat)) if lat.size else float("nan"),
                "latency_p99_us": float(np.percentile(lat, 99)) if lat.size else float("nan")}


def diagnostic_status(name: str, hardware_id: str, level, message: str, values: dict) -> DiagnosticStatus:
    """``level`` is one of DiagnosticStatus.OK / WARN / ERROR."""
    status = DiagnosticStatus(level=level, name=name, message=message, hardware_id=hardware_id)
    status.values = [KeyValue(key=str(k), value=(f"{v:.6g}" if isinstance(v, float) else str(v)))
                     for k, v in values.items()]
    return status


def warn_throttled(node, key: str, message: str, period_s: float = 2.0) -> None:
    """A warning at most once per ``period_s`` per node and key. (rclpy's own throttling keys on the
    call site and raises when two nodes in one process share it, so it is not used here.)"""
    book = node.__dict__.setdefault("_warn_times", {})
    now = time.monotonic()
    if now - book.get(key, -np.inf) >= period_s:
        book[key] = now
        node.get_logger().warning(message)


def make_executor(context=None, kind: str | None = None):
    """The executor of a node process: SingleThreadedExecutor, or rclpy's experimental EventsExecutor
    with ``kind``/ROS_LNN_EXECUTOR="events" (falls back to the former where rclpy lacks it).

    EventsExecutor costs ~25-35 % less CPU per estimator sample here. In rclpy 9.1 it serves
    subscriptions created after the node was added to it (a servo_lnn activated, deactivated and
    re-activated through its lifecycle services: test/test_node_process.py); servo_lnn uses it by
    default."""
    from .compat import make_executor as detected   # EventsExecutor where rclpy has it, a logged fallback

    return detected(context, kind)


def init_ros(argv) -> None:
    """rclpy.init for a node process; Ctrl-C is handled by :func:`spin` (a flag checked between
    callbacks), so no callback ever runs against a context that is already shut down."""
    import rclpy
    from rclpy.signals import SignalHandlerOptions

    rclpy.init(args=argv, signal_handler_options=SignalHandlerOptions.NO)


def configure_and_activate(node, configured) -> bool:
    """Lifecycle configure, then activate; False (the error already logged) when ``configured()`` says
    the configure step failed."""
    node.trigger_configure()
    if not configured():
        return False
    node.trigger_activate()
    return True


def run_node_process(node, start, on_exit=None) -> int:
    """Body of a node executable after :func:`init_ros`: ``start(node)`` when the ``autostart``
    parameter is set, then spin on the executor ROS_LNN_EXECUTOR names (default events) until
    SIGINT/SIGTERM; ``on_exit(node)`` and teardown always run. Exit code 1 when autostart failed."""
    import os

    import rclpy

    code = 0
    try:
        if param(node, "autostart") and not start(node):
            code = 1
        else:
            spin(node, make_executor(node.context, os.environ.get("ROS_LNN_EXECUTOR", "events")))
    finally:
        if on_exit is not None:
            on_exit(node)
        node.destroy_node()
        rclpy.try_shutdown()
    return code


def spin(node, executor=None) -> None:
    """Spin until SIGINT/SIGTERM (or an external shutdown), then return for a clean exit."""
    import signal

    import rclpy
    from rclpy.executors import ExternalShutdownException

    stop = []
    previous = {sig: signal.signal(sig, lambda *_: stop.append(True)) for sig in (signal.SIGINT, signal.SIGTERM)}
    if executor is None:
        executor = make_executor(node.context)
    executor.add_node(node)
    try:
        # spin_once in a loop: EventsExecutor.spin() does not return on shutdown
        while not stop and rclpy.ok(context=node.context):
            executor.spin_once(timeout_sec=0.1)
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        executor.shutdown()


class Throttle:
    """True at most once per ``period_s`` (per key): for work that need not run at the input rate."""

    def __init__(self, period_s: float):
        self.period_s = period_s
        self.last: dict = {}

    def __call__(self, key="", now: float | None = None) -> bool:
        now = time.monotonic() if now is None else now
        if now - self.last.get(key, -np.inf) >= self.period_s:
            self.last[key] = now
            return True
        return False


class LifecycleTeardown:
    """Teardown shared by the lifecycle nodes (put it before ``LifecycleNode`` in the bases).

    Subscriptions and timers live in ``self._subs`` / ``self._timers`` and go on :meth:`_drop_io`
    (deactivate, cleanup, error); the attributes named in ``_io_attributes`` (timers also kept by
    name) are reset to None with them. Cleanup and shutdown also destroy the lifecycle publishers in
    ``self._pubs`` and drop what configure built, the attribute named ``_configured_attribute``."""

    _configured_attribute = ""
    _io_attributes: tuple = ()

    def _drop_io(self) -> None:
        for sub in self._subs:
            self.destroy_subscription(sub)
        for timer in self._timers:
            self.destroy_timer(timer)
        self._subs, self._timers = [], []
        for name in self._io_attributes:
            setattr(self, name, None)

    def on_cleanup(self, state):
        from rclpy.lifecycle import TransitionCallbackReturn

        self._drop_io()
        for pub in self._pubs.values():
            self.destroy_lifecycle_publisher(pub)
        self._pubs = {}
        if self._configured_attribute:
            setattr(self, self._configured_attribute, None)
        return TransitionCallbackReturn.SUCCESS

    def on_shutdown(self, state):
        return self.on_cleanup(state)

    def on_error(self, state):
        from rclpy.lifecycle import TransitionCallbackReturn

        self._drop_io()
        return TransitionCallbackReturn.SUCCESS
