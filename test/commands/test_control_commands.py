"""Smoke tests of the DAC demo and benchmark entry points (short runs; the figures are real PNGs)."""

import argparse
import json

import numpy as np

from ros_lnn.commands.demo import add_dac_demo_arguments, run_dac_demo
from ros_lnn.demos.dac import simulate_demo
from ros_lnn_lab.bench.control import bench_control


def test_demo_writes_figures_and_a_summary(tmp_path):
    parser = argparse.ArgumentParser()
    add_dac_demo_arguments(parser)
    args = parser.parse_args(["--output", str(tmp_path), "--duration", "0.6"])
    assert run_dac_demo(args) == 0
    for name in ("dac_tracking.png", "dac_lyapunov.png"):
        assert (tmp_path / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    summary = json.loads((tmp_path / "dac_summary.json").read_text())
    assert summary["lyapunov_before_disturbance"] < 1e-6 * summary["lyapunov_initial"]


def test_demo_without_avoidance_hits_the_obstacle():
    out = simulate_demo(1.6, avoidance=False)
    assert out["clearance"].min() < 0 and np.all(np.isfinite(out["error"]))


def test_bench_reports_every_size_and_law():
    res = bench_control(argparse.Namespace(quick=True))
    for n in (2, 5, 10):
        for key in (f"chain{n}_lawI", f"chain{n}_lawII", f"chain{n}_lawIII", f"arm{n}_pipeline_lawIII"):
            stats = res["steps"][key]
            assert 0 < stats["median_us"] <= stats["p99_us"] and stats["cpu_median_us"] > 0
    law_ii = res["law_ii_trajectory"]  # the law II row: both paths timed, and they agreed before
    assert law_ii["relative_difference"] <= 1e-9 and law_ii["law_iii_target_us"] > 0
    assert law_ii["ratio_ii_iii"] == law_ii["law_ii_trajectory_us"] / law_ii["law_iii_target_us"]


def test_dac_node_bench_is_dispatched_by_ros_lnn_bench():
    import importlib

    from ros_lnn_lab.bench import BENCHES

    module, func, _ = BENCHES["dac-node"]
    assert callable(getattr(importlib.import_module(module), func))
