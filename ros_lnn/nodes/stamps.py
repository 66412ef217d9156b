"""ROS time stamps and durations as integer nanoseconds and back."""

from __future__ import annotations

from builtin_interfaces.msg import Duration, Time


def stamp_ns(stamp) -> int:
    return int(stamp.sec) * 1_000_000_000 + int(stamp.nanosec)


def ns_to_stamp(ns: int) -> Time:
    return Time(sec=int(ns // 1_000_000_000), nanosec=int(ns % 1_000_000_000))


def duration_ns(d) -> int:
    return int(d.sec) * 1_000_000_000 + int(d.nanosec)


def seconds_to_duration(s: float) -> Duration:
    ns = int(round(s * 1e9))
    return Duration(sec=ns // 1_000_000_000, nanosec=ns % 1_000_000_000)
