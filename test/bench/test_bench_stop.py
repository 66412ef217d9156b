"""``ros-lnn bench stop``: the figures of its last line are those of the runs it made (the demo loop
with gains of 1e6), and the two reactions differ as the protective stop promises."""

from __future__ import annotations

import argparse

import numpy as np

from ros_lnn_lab.bench.stop import bench_stop, run_stop


def test_the_last_line_reports_the_runs_it_made(capsys):
    result = bench_stop(argparse.Namespace(duration=4.0))
    zero, brake = result["runs"]["zero"], result["runs"]["brake"]
    for run in (zero, brake):
        assert run["stopped"] and "beyond" in run["cause"] and 2.0 <= run["stop_time_s"] < 2.1
    assert zero["max_overshoot_rad"] > 1.0 and zero["rest_after_stop_s"] is None
    assert brake["max_overshoot_rad"] == 0.0 and brake["inside_limits"] and brake["rest_after_stop_s"] < 1.0
    assert max(zero["overshoot_rad"]) == round(zero["max_overshoot_rad"], 4)
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert last == result["summary"]
    assert last == (
        f"protective stop after gains of 1e6: overshoot past the joint limits zero "
        f"{zero['max_overshoot_rad']:.3g} rad, brake 0 rad; brake at rest {brake['rest_after_stop_s']:.3g} s "
        "after the stop, inside the limits: yes"
    )


def test_without_the_gain_change_nothing_stops():
    run = run_stop("brake", duration=1.0, change_at=5.0)
    assert run == {"reaction": "brake", "stopped": False}
    assert np.isfinite(run_stop("brake", duration=2.5, change_at=2.0)["final_speed"])
