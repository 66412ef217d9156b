"""An arm without a URDF: DeLaN + joint friction (ros_lnn.arm.delan) on a short generated recording of
three Panda joints — it trains, stops early on its validation stretch, predicts finite torques that
beat zero torque on held-out data — and ``bench realarm`` without a URDF prints its last line."""

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from ros_lnn.arm import friction
from ros_lnn.arm import identification as idn
from ros_lnn.arm.delan import DelanOptions, friction_least_squares, train_delan_recordings
from ros_lnn.arm.generator import ArmGenerator, GeneratorOptions, write_recording
from ros_lnn.arm.recording import read_arm_bag
from ros_lnn.arm.samples import filtered_samples

URDF = Path(__file__).resolve().parents[2] / "config" / "robots" / "panda" / "panda.urdf"
JOINTS = ["panda_joint1", "panda_joint2", "panda_joint4"]


@pytest.fixture(scope="module")
def recording(tmp_path_factory):
    gen = ArmGenerator(URDF, JOINTS, seed=3)
    rec = gen.generate(10.0, options=GeneratorOptions(rate_hz=200.0, effort="joint_states"), seed=5)
    return write_recording(tmp_path_factory.mktemp("delan") / "arm", rec), rec.mapping


def test_delan_trains_stops_early_and_beats_zero_torque_on_held_out_data(recording):
    bag, mapping = recording
    rec = read_arm_bag(bag, mapping)
    train, test = rec.part(0.0, 0.7), rec.part(0.7, 1.0)
    log = []
    options = DelanOptions(hidden=(32, 32), epochs=400, patience=4, batch=128, lr=5e-3)
    result = train_delan_recordings([train], mapping, options, progress=log.append)
    assert result.stopped_early and result.epochs_run < result.epochs_planned == 400
    assert 0 <= result.best_epoch < result.epochs_run and result.val_error <= result.val_error_start
    assert any("early stop" in line for line in log)
    te = filtered_samples([test], mapping.filter_cutoff_hz, mapping.gap_factor, raw_tau=True)
    pred = result.predict(te.q, te.qd, te.qdd)
    assert pred.shape == te.tau.shape and np.all(np.isfinite(pred))
    rre = idn.relative_error_percent(te.tau, pred)
    zero = idn.relative_error_percent(te.tau, np.zeros_like(te.tau))
    assert np.mean(rre) < 0.8 * np.mean(zero), rre
    # the friction starts at the per-joint least squares and stays a 3-per-joint parameter set
    assert result.friction_parameters().shape == (3 * len(JOINTS),)


def test_schedule_is_sized_to_the_data():
    options = DelanOptions()
    assert options.planned_epochs(1_000_000) == options.min_epochs
    assert options.planned_epochs(100) == options.max_epochs
    assert options.planned_epochs(10_000) == round(options.sample_budget / 10_000)
    assert DelanOptions(epochs=7).planned_epochs(10) == 7
    assert options.planned_patience(100) == 25 and DelanOptions(patience=3).planned_patience(100) == 3


def test_friction_least_squares_recovers_a_friction_only_torque():
    rng = np.random.default_rng(0)
    qd = rng.normal(size=(500, 2))
    phi = np.array([0.5, 1.0, -0.2, 2.0, 0.3, 0.1])
    tau = friction.torque(phi, qd, 0.02)
    np.testing.assert_allclose(friction_least_squares(qd, tau, 0.02), phi, atol=1e-8)


def test_bench_realarm_without_a_urdf_prints_the_friction_only_comparison(tmp_path, recording):
    bag, _ = recording
    config = tmp_path / "arm.yaml"
    config.write_text(f"bag:\n  actuated_joints: [{', '.join(JOINTS)}]\n")
    js = tmp_path / "bench.json"
    r = subprocess.run(
        [sys.executable, "-m", "ros_lnn.cli", "bench", "realarm", "--bag", str(bag), "--config", str(config)]
        + ["--epochs", "3", "--json", str(js)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr[-2000:]
    assert "zero torque" in r.stdout and "friction only (least squares per joint)" in r.stdout
    assert "DeLaN + friction (ros_lnn, no URDF)" in r.stdout
    lines = [line for line in r.stdout.splitlines() if line.strip()]
    last = next(line for line in reversed(lines) if line.startswith("held-out torque rre"))
    fig = json.loads(js.read_text())
    assert last == (
        f"held-out torque rre [%]: learned {fig['learned']:.2f}, friction-only {fig['friction_only']:.2f}, "
        f"ratio L/F = {fig['ratio']:.3f}"
    )
    assert np.isfinite(fig["learned"]) and fig["delan"]["epochs_run"] <= 3
