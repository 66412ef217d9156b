"""``ros-lnn bench soak`` in short (the six node processes, faults every 2 s on average, no warm-up
round): its last line's figures are those of the data it measured — memory of every process, the
nodes' windowed latency p99s, the verdict of every fault — recomputed here from that data. No timing
is asserted."""

from __future__ import annotations

import os
import random

import numpy as np
import pytest

from conftest import requires_rclpy

pytestmark = [requires_rclpy, pytest.mark.ros]


def test_a_short_soak_reports_what_it_measured():
    from ros_lnn_lab.harness.soak import LATENCY_NODES, run_soak

    env = dict(os.environ)
    env["ROS_DOMAIN_ID"] = os.environ["ROS_DOMAIN_ID"] = str(random.SystemRandom().randint(101, 200))
    lines: list[str] = []
    result = run_soak(
        40.0, rate_hz=100.0, mean_gap_s=2.0, seed=3, env=env, report=lines.append, sample_s=2.0, warm_up=False
    )
    assert result.window_s == 8.0  # a fifth of a run under 25 min
    assert len(result.verdicts) >= 3
    assert all(
        per.keys() >= {"sim", "servo_lnn", "dac_chain_sim", "dac_controller"} for _, _, per in result.rss
    )
    assert all(total == sum(per.values()) > 0 for _, total, per in result.rss)
    # memory: the total at the end of the first window against the last sample
    base = [total for t, total, _ in result.rss if t <= result.start + 8.0][-1]
    growth = 100.0 * (result.rss[-1][1] - base) / base
    # latency: the 99th percentile of every windowed p99 of the three nodes in each window
    first = [p for t, _, p in result.latencies if t <= result.start + 8.0]
    last = [p for t, _, p in result.latencies if t >= result.start + 40.0 - 8.0]
    assert first and last and {node for _, node, _ in result.latencies} == set(LATENCY_NODES)
    a, b = (float(np.percentile(x, 99)) * 1e3 for x in (first, last))
    crashed = sum(v.crashed for v in result.verdicts) + len(result.died)
    hung = sum(v.hung for v in result.verdicts) + len(result.unanswered)
    missed = sum(v.missed_stop for v in result.verdicts)
    assert result.line() == (
        f"soak: 40 s, {len(result.verdicts)} faults injected, {crashed} crashed, {hung} hung, {missed} "
        f"missed stops, RSS growth {growth:.2f} %, latency p99 first/last fifth (8 s) {a:.2f}/{b:.2f} ms"
    )
    assert crashed == hung == missed == 0, [v.detail for v in result.verdicts if not v.passed]
