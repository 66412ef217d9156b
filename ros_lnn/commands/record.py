"""``ros-lnn record``: record the configured topics to rosbag2 through rclpy subscriptions and the
``rosbags`` writer, for machines without ``ros2 bag`` (on a ROS install, ``ros2 bag record`` is the
documented way). Messages are written as received (serialised CDR, no decode); the receive time is
the node clock. Ctrl-C, SIGTERM or ``--duration`` end it with metadata.yaml written: a complete bag.

Crash-safe (:mod:`ros_lnn.bags.live`, rosbag2's ``resilient`` preset): the bag is flushed every
``--flush-interval`` seconds (sqlite3: WAL, committed and checkpointed; mcap: the chunk closed), so a
SIGKILL or a crash loses at most the messages of the last interval and leaves a bag that
``ros-lnn reindex`` (:mod:`ros_lnn.bags.recovery`) makes readable. A write the disk refuses (full,
file too large) stops the recording with one line: the flushed messages are kept and the bag made
readable where the disk allows.

Topics are subscribed when a publisher appears (type from the graph), reliable when every publisher
offers reliable delivery, best effort otherwise, like ``ros2 bag record``.
"""

from __future__ import annotations

import signal
import sys
import threading
import time
from pathlib import Path

from ..errors import ConfigError, DataError

#: Default seconds between flushes: a crash loses at most the messages of one interval.
FLUSH_INTERVAL_S = 1.0
#: Default free space [MB] below which a recording stops and closes its bag (ROS 1's rosbag kept 1 GB).
MIN_FREE_MB = 256.0


def add_arguments(parser):
    parser.add_argument("--out", "-o", required=True, help="bag directory to create")
    parser.add_argument("--storage", choices=("sqlite3", "mcap"), default="sqlite3", help="rosbag2 storage")
    parser.add_argument(
        "--topics",
        nargs="+",
        help="topics to record (default: the mapping's joint states, servo commands and effort topics)",
    )
    parser.add_argument("--config", help="YAML with a bag: mapping section (default: the crane's)")
    parser.add_argument("--duration", type=float, default=0.0, help="seconds to record (0: until Ctrl-C)")
    parser.add_argument(
        "--ground-truth", action="store_true", help="also record the mapping's ground-truth topic"
    )
    parser.add_argument(
        "--flush-interval",
        type=float,
        default=FLUSH_INTERVAL_S,
        help="seconds between flushes to the disk: what a crash may lose (default 1)",
    )
    parser.add_argument(
        "--min-free",
        type=float,
        default=MIN_FREE_MB,
        metavar="MB",
        help="stop recording, the bag closed and complete, when the disk has less than this free "
        "(default 256)",
    )


def default_topics(mapping, ground_truth=False) -> list[str]:
    topics = [mapping.joint_states_topic, mapping.servo_topic]
    topics += [s for s in (mapping.servo_effort, mapping.free_effort) if s.startswith("/")]
    if ground_truth:
        topics.append(mapping.ground_truth_topic)
    return list(dict.fromkeys("/" + t.lstrip("/") for t in topics if t))


def _message_class(msgtype: str):
    import importlib

    package, _, name = msgtype.replace("/msg/", "/").partition("/")
    return getattr(importlib.import_module(f"{package}.msg"), name)


def offered_qos(publishers) -> list:
    """The publishers' QoS as rosbags ``Qos`` (what ``ros2 bag play`` offers on replay)."""
    from rosbags import interfaces as ri

    def enum(kind, value):
        return getattr(kind, value.name, kind.UNKNOWN)

    def time(duration):
        ns = duration.nanoseconds
        return ri.QosTime(ns // 1_000_000_000, ns % 1_000_000_000)

    return [
        ri.Qos(
            enum(ri.QosHistory, q.history),
            q.depth,
            enum(ri.QosReliability, q.reliability),
            enum(ri.QosDurability, q.durability),
            time(q.deadline),
            time(q.lifespan),
            enum(ri.QosLiveliness, q.liveliness),
            time(q.liveliness_lease_duration),
            q.avoid_ros_namespace_conventions,
        )
        for q in (p.qos_profile for p in publishers)
    ]


class Recorder:
    """Subscribes raw to ``topics`` on ``node`` and writes every message to a rosbags ``Writer``."""

    def __init__(self, node, writer, topics, log=print):
        from rosbags.typesys import Stores, get_typestore

        self.node, self.writer, self.log = node, writer, log
        self.store = get_typestore(Stores.ROS2_KILTED)
        self.pending = {"/" + t.lstrip("/") for t in topics}
        self.counts, self.subs, self.lock = {}, [], threading.Lock()

    def discover(self):
        """Subscribe to every pending topic that now has a publisher."""
        from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy

        graph = dict(self.node.get_topic_names_and_types())
        for topic in sorted(self.pending & set(graph)):
            msgtype = graph[topic][0]
            self.pending.discard(topic)
            if msgtype not in self.store.types:
                self.log(f"record: {topic} has type {msgtype}, unknown to rosbags' typestore; skipped")
                continue
            pubs = self.node.get_publishers_info_by_topic(topic)
            reliable = pubs and all(p.qos_profile.reliability == ReliabilityPolicy.RELIABLE for p in pubs)
            qos = QoSProfile(
                history=HistoryPolicy.KEEP_LAST,
                depth=1000,
                durability=DurabilityPolicy.VOLATILE,
                reliability=ReliabilityPolicy.RELIABLE if reliable else ReliabilityPolicy.BEST_EFFORT,
            )
            conn = self.writer.add_connection(
                topic, msgtype, typestore=self.store, offered_qos_profiles=offered_qos(pubs)
            )
            self.counts[topic] = 0
            self.subs.append(
                self.node.create_subscription(
                    _message_class(msgtype), topic, self._callback(topic, conn), qos, raw=True
                )
            )
            self.log(f"record: {topic} ({msgtype}, {'reliable' if reliable else 'best effort'})")

    def _callback(self, topic, conn):
        clock = self.node.get_clock()

        def write(raw):
            with self.lock:
                if self.writer.write(conn, clock.now().nanoseconds, raw):
                    self.counts[topic] += 1

        return write


def record(
    out,
    topics,
    *,
    storage="sqlite3",
    duration=0.0,
    stop: threading.Event | None = None,
    context=None,
    counts: dict | None = None,
    log=print,
    flush_interval: float = FLUSH_INTERVAL_S,
    min_free_mb: float = 0.0,
) -> dict:
    """Record until ``duration`` seconds pass (0: forever), ``stop`` is set, or Ctrl-C/SIGTERM.
    Returns message counts per topic (``counts``, when given, is filled live). The bag is flushed
    every ``flush_interval`` seconds and closed (metadata written) on every way out; a disk with less
    than ``min_free_mb`` free, or a write the disk refuses, ends the recording with a DataError (one
    line) once the bag is closed, or its flushed part kept."""
    import rclpy
    from rclpy.executors import SingleThreadedExecutor

    from ..bags.live import LiveBagWriter

    out = Path(out)
    if out.exists():
        raise DataError(f"{out} exists already; choose another --out")
    if not topics:
        raise ConfigError("no topics to record; pass --topics or a mapping with topics")
    if not flush_interval > 0:
        raise ConfigError(f"--flush-interval must be > 0 s, got {flush_interval}")
    writer = LiveBagWriter(out, storage)
    writer.open()
    stop = stop or threading.Event()
    own = context is None
    if own:
        context = rclpy.Context()
        rclpy.init(context=context, signal_handler_options=rclpy.signals.SignalHandlerOptions.NO)
    node = rclpy.create_node("ros_lnn_record", context=context, start_parameter_services=False)
    executor = SingleThreadedExecutor(context=context)
    executor.add_node(node)
    recorder = Recorder(node, writer, topics, log)
    if counts is not None:
        recorder.counts = counts
    end = time.monotonic() + duration if duration > 0 else float("inf")
    low = ""
    try:
        last, flushed = 0.0, time.monotonic()
        while not stop.is_set() and time.monotonic() < end and context.ok() and writer.error is None:
            if recorder.pending and time.monotonic() - last > 0.1:
                recorder.discover()
                last = time.monotonic()
            executor.spin_once(timeout_sec=0.05)
            if time.monotonic() - flushed >= flush_interval:
                with recorder.lock:
                    writer.flush()
                flushed = time.monotonic()
                low = _low_space(out, min_free_mb)
                if low:
                    break
    except KeyboardInterrupt:
        pass
    finally:
        executor.remove_node(node)
        node.destroy_node()
        if own:
            context.try_shutdown()
        with recorder.lock:
            kept = writer.finish()
    if recorder.pending:
        log(f"record: no publisher appeared on {', '.join(sorted(recorder.pending))}")
    if low and writer.error is None:
        raise DataError(
            f"{out}: {low}: recording stopped after {writer.written} messages; the bag is closed and complete"
        )
    if writer.error is not None:
        raise DataError(
            f"{out}: the disk refused a write ({_reason(writer.error)}): recording stopped after "
            f"{writer.written} messages; the bag keeps {kept['messages']}"
            + ("" if (out / "metadata.yaml").exists() else f" (once there is space: ros-lnn reindex {out})")
        )
    return dict(recorder.counts)


def _low_space(out: Path, min_free_mb: float) -> str:
    """'' while the disk of ``out`` has at least ``min_free_mb`` free, else what is left."""
    import os

    if min_free_mb <= 0:
        return ""
    st = os.statvfs(out)
    free_mb = st.f_bavail * st.f_frsize / 1e6
    return (
        f"{free_mb:.0f} MB left on its disk, below --min-free {min_free_mb:g}"
        if free_mb < min_free_mb
        else ""
    )


def _reason(exc: BaseException) -> str:
    """An OSError's own words (No space left on device, File too large), else the error's text."""
    return getattr(exc, "strerror", None) or str(exc) or type(exc).__name__


def run(args) -> int:
    from ..bags.mapping import CRANE, BagMapping

    mapping = BagMapping.from_yaml(args.config) if args.config else BagMapping.from_dict(CRANE)
    topics = args.topics or default_topics(mapping, args.ground_truth)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    print(
        f"recording {', '.join(topics)} to {args.out} ({args.storage}); Ctrl-C to stop; written to the "
        f"disk every {args.flush_interval:g} s: a crash loses at most that last interval (ros-lnn "
        f"reindex {args.out} makes such a bag readable); stops below {args.min_free:g} MB free",
        file=sys.stderr,
    )
    counts = record(
        args.out,
        topics,
        storage=args.storage,
        duration=args.duration,
        stop=stop,
        log=lambda m: print(m, file=sys.stderr),
        flush_interval=args.flush_interval,
        min_free_mb=args.min_free,
    )
    total = sum(counts.values())
    print(f"wrote {args.out}: {total} messages (" + ", ".join(f"{t} {n}" for t, n in counts.items()) + ")")
    return 0
