"""Latency statistics for benchmarks (no timed assertions live in tests)."""

from __future__ import annotations

import os
import platform
import time

import numpy as np


def time_calls(fn, n: int, warmup: int = 50) -> np.ndarray:
    """Seconds per call of ``fn()`` over ``n`` timed calls after ``warmup`` untimed ones."""
    for _ in range(warmup):
        fn()
    times = np.empty(n)
    clock = time.perf_counter
    for i in range(n):
        t0 = clock()
        fn()
        times[i] = clock() - t0
    return times


def summary_us(times) -> dict:
    t = np.asarray(times) * 1e6
    return {
        "median_us": float(np.median(t)),
        "p99_us": float(np.percentile(t, 99)),
        "mean_us": float(t.mean()),
        "n": int(t.size),
    }


def machine_description() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return f"{cpu}, {os.cpu_count()} cores, Python {platform.python_version()}"


def process_cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` so far (Linux /proc)."""
    with open(f"/proc/{pid}/stat") as fh:
        fields = fh.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def percentile(x, q) -> float:
    """``np.percentile`` that answers NaN for no samples."""
    return float(np.percentile(x, q)) if len(x) else float("nan")
