"""``ros-lnn record``: record the configured topics to rosbag2 through rclpy subscriptions and the
``rosbags`` writer, for machines without ``ros2 bag`` (on a ROS install, ``ros2 bag record`` is the
documented way). Messages are written as received (serialised CDR, no decode); the receive time is
the node clock. Ctrl-C, SIGTERM or ``--duration`` end it with metadata.yaml written: a complete bag.

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
                self.writer.write(conn, clock.now().nanoseconds, raw)
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
) -> dict:
    """Record until ``duration`` seconds pass (0: forever), ``stop`` is set, or Ctrl-C/SIGTERM.
    Returns message counts per topic (``counts``, when given, is filled live). The bag is closed
    (metadata written) on every way out."""
    import rclpy
    from rclpy.executors import SingleThreadedExecutor
    from rosbags.rosbag2 import StoragePlugin, Writer
    from rosbags.rosbag2.errors import WriterError

    out = Path(out)
    if out.exists():
        raise DataError(f"{out} exists already; choose another --out")
    if not topics:
        raise ConfigError("no topics to record; pass --topics or a mapping with topics")
    plugin = StoragePlugin.MCAP if storage == "mcap" else StoragePlugin.SQLITE3
    writer = Writer(out, version=9, storage_plugin=plugin)
    try:
        writer.open()
    except (WriterError, OSError) as exc:
        raise DataError(f"{out}: cannot create the bag ({exc})") from None
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
    try:
        last = 0.0
        while not stop.is_set() and time.monotonic() < end and context.ok():
            if recorder.pending and time.monotonic() - last > 0.1:
                recorder.discover()
                last = time.monotonic()
            executor.spin_once(timeout_sec=0.05)
    except KeyboardInterrupt:
        pass
    finally:
        executor.remove_node(node)
        node.destroy_node()
        if own:
            context.try_shutdown()
        with recorder.lock:
            writer.close()
    if recorder.pending:
        log(f"record: no publisher appeared on {', '.join(sorted(recorder.pending))}")
    return dict(recorder.counts)


def run(args) -> int:
    from ..bags.mapping import CRANE, BagMapping

    mapping = BagMapping.from_yaml(args.config) if args.config else BagMapping.from_dict(CRANE)
    topics = args.topics or default_topics(mapping, args.ground_truth)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    print(f"recording {', '.join(topics)} to {args.out} ({args.storage}); Ctrl-C to stop", file=sys.stderr)
    counts = record(
        args.out,
        topics,
        storage=args.storage,
        duration=args.duration,
        stop=stop,
        log=lambda m: print(m, file=sys.stderr),
    )
    total = sum(counts.values())
    print(f"wrote {args.out}: {total} messages (" + ", ".join(f"{t} {n}" for t, n in counts.items()) + ")")
    return 0
