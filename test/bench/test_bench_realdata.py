"""``ros-lnn bench realdata --quick``: the recording set is built, ServoLNN trained on the rotary
pendulum's step recording with the URDF prior holds on the impulse and chirp recordings (nMSE ≤ 1e-3,
within 10x of the structural least-squares fit computed in the same run), without the prior it does
not; the structural and zero rows are the recordings package's own baselines."""

import argparse

import pytest

from conftest import requires_torch

pytestmark = requires_torch
pytest.importorskip("pinocchio")
pytest.importorskip("rosbags")


def test_bench_realdata_quick(capsys):
    from ros_lnn_lab.bench.realdata import bench_realdata

    result = bench_realdata(argparse.Namespace(quick=True))
    printed = capsys.readouterr().out
    rows = {r["model"]: r for r in result["systems"]["rotary_pendulum"]["rows"]}
    full = rows["ServoLNN (dissipation, cyclic, URDF prior)"]["test_nmse"]
    structural = rows["structural"]["test_nmse"]
    assert set(full) == {"test_impulse", "test_chirp"}
    for test, value in full.items():
        assert value <= 1e-3 and value <= 10 * structural[test], (test, value, structural[test])
        assert rows["URDF prior off"]["test_nmse"][test] > 10 * value
        assert rows["zero"]["test_nmse"][test] == pytest.approx(1.0, abs=0.05)  # mean(q̈²)/var(q̈), q̈ mean ≈ 0
    assert "goal met" in printed and "held-out q̈_f nMSE" in printed
