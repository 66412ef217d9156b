"""Rates, latencies, throttles and ``/diagnostics`` statuses of the nodes."""
from __future__ import annotations

import time
from collections import deque

import numpy as np
from diagnostic_msgs.msg import DiagnosticStatus, KeyValue


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
