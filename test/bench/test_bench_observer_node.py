"""``ros-lnn bench node --observer`` over real DDS, short: a model trained quickly (the fit alone), the
effort_observer node in its own process, 2 s of simulated Panda joint states at 1 kHz."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from conftest import requires_rclpy, requires_torch

pytestmark = [requires_rclpy, requires_torch, pytest.mark.ros, pytest.mark.slow]

SENT = re.compile(
    r"\] sent (?P<n>\d+) \(\d+/s\), external_effort received (?P<x>\d+), .*node counted received \d+, "
    r"processed (?P<y>\d+) at its last /diagnostics in (?P<batches>\d+) batches"
)
LAST = re.compile(
    r"^effort_observer: 1 kHz processed (?P<p>\d+\.\d\d) %, latency p50 (?P<a>\d+\.\d\d) ms "
    r"p99 (?P<b>\d+\.\d\d) ms, CPU (?P<c>\d+) us/sample; floor (?P<f>\d+) us \(Pinocchio M, C, g, J "
    r"\d+ us \+ model one sample \d+ us\), node/floor (?P<r>\d+\.\d\d)$"
)


def test_bench_node_observer_prints_its_figures():
    # its own process, as a user runs it (rclpy's EventsExecutor wants a real stderr for faulthandler)
    out = subprocess.run(
        [sys.executable, "-m", "ros_lnn.cli", "bench", "node", "--observer", "--quick", "--duration", "2"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    lines = out.stdout.strip().splitlines()
    m = LAST.match(lines[-1])
    assert m, lines[-1]
    # the figures come from the counts (how many it processes at 1 kHz is the benchmark's, not a test's)
    counts = [c for c in map(SENT.search, lines) if c]
    assert len(counts) == 1, lines
    sent, received, processed = int(counts[0]["n"]), int(counts[0]["x"]), int(counts[0]["y"])
    assert 0 < processed <= sent == 2000
    assert 0 < received <= processed  # ~/external_effort at output_rate_hz (100 Hz): a tenth
    assert 0 < int(counts[0]["batches"]) <= processed
    assert float(m["p"]) == pytest.approx(100 * processed / sent, abs=0.005)
    assert 0 < float(m["a"]) <= float(m["b"]) and int(m["c"]) > 0
    assert int(m["f"]) > 0 and float(m["r"]) == pytest.approx(int(m["c"]) / int(m["f"]), rel=0.05)
    assert any("residual off" in line for line in lines)  # --quick: the fit alone
