"""Rates, latencies, throttles and ``/diagnostics`` statuses of the nodes."""

from __future__ import annotations

import contextlib
import functools
import math
import time
from collections import deque

import numpy as np
from diagnostic_msgs.msg import DiagnosticStatus, KeyValue


class RateLatency:
    """Input rate and processing latency over a sliding window (for /diagnostics and the live table).
    Times are ``time.perf_counter()`` seconds (a monotonic clock), so a node's per-sample timer serves."""

    def __init__(self, window_s: float = 2.0, max_samples: int = 20000):
        self.window_s = window_s
        self.arrivals: deque = deque(maxlen=max_samples)
        self.latencies: deque = deque(maxlen=max_samples)

    def arrive(self, now: float | None = None) -> None:
        self.arrivals.append(time.perf_counter() if now is None else now)

    def latency(self, latency_s: float, now: float | None = None) -> None:
        self.latencies.append((time.perf_counter() if now is None else now, latency_s))

    def summary(self, now: float | None = None) -> dict:
        now = time.perf_counter() if now is None else now
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
        return {
            "rate_hz": rate,
            "latency_median_us": float(np.median(lat)) if lat.size else float("nan"),
            "latency_p99_us": float(np.percentile(lat, 99)) if lat.size else float("nan"),
        }


def diagnostic_status(name: str, hardware_id: str, level, message: str, values: dict) -> DiagnosticStatus:
    """``level`` is one of DiagnosticStatus.OK / WARN / ERROR."""
    status = DiagnosticStatus(level=level, name=name, message=message, hardware_id=hardware_id)
    status.values = [KeyValue(key=str(k), value=_text(v)) for k, v in values.items()]
    return status


def _text(value) -> str:
    """A diagnostics value; a float without a value yet (a median of no samples) reads "n/a", not "nan"."""
    if isinstance(value, float):
        return f"{value:.6g}" if math.isfinite(value) else "n/a"
    return str(value)


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


class CountWindow:
    """Counters over a sliding window, as diagnostic_updater's statuses judge a node: the lifetime
    counters are snapshotted at every diagnostics publish and the window's counts are the difference to
    the snapshot ``periods`` publishes back. One bad sample leaves the window after ``periods``
    publishes, so a status returns to OK by itself."""

    def __init__(self, periods: int = 5):
        self.snapshots: deque = deque(maxlen=int(periods) + 1)

    def start(self, counts: dict, now: float | None = None) -> None:
        """Begin a window at these counts (activation)."""
        self.snapshots.clear()
        self.snapshots.append((time.monotonic() if now is None else now, dict(counts)))

    def update(self, counts: dict, now: float | None = None) -> dict:
        """The counts within the window (keys of ``counts``) and ``window_s``, its length."""
        now = time.monotonic() if now is None else now
        self.snapshots.append((now, dict(counts)))
        then, old = self.snapshots[0]
        window = {key: value - old.get(key, 0) for key, value in counts.items()}
        window["window_s"] = now - then
        return window


def input_status(
    window: dict,
    rejected: tuple,
    last_input_s: float | None,
    timeout_s: float,
    topic: str = "joint_states",
    now: float | None = None,
) -> tuple:
    """(level, message) of a node fed by one input stream, from the counts of a :class:`CountWindow`:
    ERROR when callbacks failed in the window or the stream went stale (nothing for ``timeout_s`` after
    it had started), WARN before the first input and when inputs were rejected in the window, else OK.
    ``rejected``: the count keys that are rejected inputs; ``last_input_s``: ``time.perf_counter()`` of
    the newest input (None: none yet)."""
    now = time.perf_counter() if now is None else now
    errors = window.get("internal_error", 0)
    if errors:
        span = window["window_s"]
        return DiagnosticStatus.ERROR, f"{errors} callback errors in the last {span:.0f} s (see the log)"
    if last_input_s is None:
        return DiagnosticStatus.WARN, f"no {topic} received yet"
    silent = now - last_input_s
    if silent > timeout_s:
        return DiagnosticStatus.ERROR, f"{topic} stale: none for {silent:.1f} s"
    bad = {key: window[key] for key in rejected if window.get(key, 0)}
    if bad:
        total = window.get("received", 0)
        reasons = ", ".join(f"{key} {count}" for key, count in bad.items())
        return DiagnosticStatus.WARN, (
            f"{sum(bad.values())} of {total} inputs rejected in the last "
            f"{window['window_s']:.0f} s ({reasons})"
        )
    return DiagnosticStatus.OK, "ok"


def status_name(node) -> str:
    """A /diagnostics status name that tells two instances apart: the node's namespace and name."""
    return node.get_fully_qualified_name()


def report_error(node, where: str, exc: BaseException) -> None:
    """A callback or transition met an exception it did not expect: counted (``internal_error``, an
    ERROR in /diagnostics), one throttled log line, and the node goes on."""
    node.counts["internal_error"] = node.counts.get("internal_error", 0) + 1
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    warn_throttled(
        node,
        f"internal_error:{where}",
        f"{where}: {type(exc).__name__}{': ' + text if text else ''} (skipped; the node keeps running)",
    )


def guarded(where: str):
    """Decorator for a node's callback: any exception goes to :func:`report_error`, never the executor;
    run under the node's ``input_lock`` where it has one (the lock its joint_states intake takes:
    :mod:`.intake`)."""

    def wrap(method):
        # functools.wraps keeps the signature visible: rclpy passes a timer's TimerInfo only to
        # callbacks that take an argument
        @functools.wraps(method)
        def callback(self, *args):
            try:
                with getattr(self, "input_lock", None) or contextlib.nullcontext():
                    return method(self, *args)
            except Exception as exc:  # noqa: BLE001 - a callback must never take the process down
                report_error(self, where, exc)
                return None

        return callback

    return wrap
