"""The fast torque: a causal filter of the measured velocity's steps, fitted to what the rest of the arm
model leaves of the raw torque (ros_lnn.arm.fast_torque), alone and through train_arm → ONNX →
ArmModel.torque_of on a generated arm whose torque sensor sees a drive resonance."""

import itertools
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from ros_lnn.arm import identification as idn
from ros_lnn.arm.evaluation import evaluate_arm
from ros_lnn.arm.fast_torque import FastTorque, fit_fast_torque
from ros_lnn.arm.generator import ArmGenerator, GeneratorOptions, write_recording
from ros_lnn.arm.model import ArmModel, read_arm_metadata
from ros_lnn.arm.recording import read_arm_bag
from ros_lnn.arm.samples import filtered_samples
from ros_lnn.arm.training import train_arm
from ros_lnn.errors import ModelError

URDF = Path(__file__).resolve().parents[2] / "config" / "robots" / "panda" / "panda.urdf"
JOINTS = [f"panda_joint{i}" for i in range(1, 8)]
RATE = 1000.0


def resonance_taps(length=25, gain=3.0, freq_hz=40.0, decay=0.12):
    """A lightly damped drive mode seen through the velocity's steps, sampled at RATE, with no
    response to a constant acceleration (taps summing to zero, as the model's)."""
    k = np.arange(length)
    h = gain * np.exp(-decay * k) * np.cos(2 * np.pi * freq_hz * k / RATE)
    return h - h.mean()


def fir_by_loops(taps, qd, starts):
    """Σ_i h_i (q̇(k−i) − q̇(k−i−1)) written out sample by sample, no history across a piece's start."""
    out = np.zeros(len(qd))
    bounds = list(starts) + [len(qd)]
    for a, b in itertools.pairwise(bounds):
        for k in range(a, b):
            for i, h in enumerate(taps):
                m = k - i
                if m - 1 >= a:
                    out[k] += h * (qd[m] - qd[m - 1])
    return out


def velocity_stream(n_samples, seed):
    rng = np.random.default_rng(seed)
    t = np.arange(n_samples) / RATE
    slow = np.sin(1.3 * t) + 0.5 * np.sin(3.1 * t + 1.0)
    return np.stack([slow + 0.02 * rng.normal(size=n_samples), 0.7 * np.cos(2.2 * t)], 1)


def test_fit_recovers_a_drive_resonance_and_switches_off_where_there_is_none():
    rng = np.random.default_rng(0)
    qd = velocity_stream(8000, 1)
    taps = resonance_taps()
    starts = (0, 3000)  # a gap in the log: the filter restarts
    fast_true = fir_by_loops(taps, qd[:, 0], starts)
    remainder = np.stack([fast_true, np.zeros(len(qd))], 1) + 0.01 * rng.normal(size=qd.shape)
    tr, va = slice(0, 6000), slice(6000, 8000)
    ft = fit_fast_torque(
        qd[tr], starts, remainder[tr], qd[va], (0,), remainder[va], RATE, history=30, ridge=1e-6
    )
    assert ft.report["joints"][0]["kept"] and not ft.report["joints"][1]["kept"]
    np.testing.assert_allclose(ft.taps[0, : len(taps)], taps, atol=0.05 * np.abs(taps).max())
    np.testing.assert_array_equal(ft.taps[1], 0.0)
    pred = ft.torque(qd, starts, RATE)
    assert np.sqrt(np.mean((pred[va, 0] - fast_true[va]) ** 2)) < 0.05 * np.std(fast_true[va])
    # the model's own evaluation against the loops, with the taps it fitted
    np.testing.assert_allclose(pred[:, 0], fir_by_loops(ft.taps[0], qd[:, 0], starts), atol=1e-9)


def test_fast_torque_is_causal_blind_to_constant_velocity_and_tied_to_its_rate():
    ft = FastTorque(np.stack([resonance_taps(), resonance_taps(gain=-1.0)]), RATE)
    qd = velocity_stream(2000, 2)
    base = ft.torque(qd, (0,), RATE)
    later = qd.copy()
    later[1200:] += np.random.default_rng(3).normal(size=(800, 2))
    np.testing.assert_array_equal(ft.torque(later, (0,), RATE)[:1200], base[:1200])  # no future samples
    assert np.abs(ft.torque(later, (0,), RATE)[1200:] - base[1200:]).max() > 0.1
    np.testing.assert_allclose(ft.torque(qd + 5.0, (0,), RATE), base, atol=1e-9)  # zero gain at DC
    np.testing.assert_array_equal(ft.torque(np.full((50, 2), 0.4), (0,), RATE), 0.0)
    np.testing.assert_array_equal(ft.torque(qd, (0,), 2 * RATE), 0.0)  # another rate: left out
    assert ft.applies_at(1.05 * RATE) and not ft.applies_at(1.2 * RATE)
    again = FastTorque.from_metadata(ft.to_metadata(), 2)
    np.testing.assert_array_equal(again.torque(qd, (0,), RATE), base)
    assert not FastTorque.from_metadata(None, 2).active
    for broken in (
        {"taps": [[1.0, 2.0, 3.0]], "rate_hz": 1000.0},
        {"taps": [[np.nan], [0.0]], "rate_hz": 1000.0},
        {"taps": [[0.0], [0.0]]},
    ):
        with pytest.raises(ModelError, match="fast_torque"):
            FastTorque.from_metadata(broken, 2)


@pytest.fixture(scope="module")
def resonant_arm(tmp_path_factory):
    """Generated 1 kHz logs (rosbag2) of a Panda whose torque sensors on joints 2 and 4 also see a
    drive resonance driven by the joint's motion, and that resonance on each log."""
    folder = tmp_path_factory.mktemp("resonant")
    gen = ArmGenerator(URDF, JOINTS, seed=4)
    taps = resonance_taps(gain=150.0)

    def log(duration, seed):
        g = gen.generate(duration, options=GeneratorOptions(rate_hz=RATE, effort="joint_states"), seed=seed)
        resonance = np.zeros_like(g.effort)
        for j in (1, 3):
            resonance[:, j] = fir_by_loops(taps, g.qd[:, j], (0,))
        g.effort += resonance
        return read_arm_bag(write_recording(folder / f"log{seed}", g), g.mapping), resonance

    return log(10.0, 5), log(5.0, 6), gen.generate(1.0, seed=7).mapping


def test_train_arm_keeps_the_fast_torque_where_the_drive_rings_and_the_file_carries_it(
    tmp_path, resonant_arm
):
    (train, _), (test, resonance), mapping = resonant_arm
    out = tmp_path / "arm.onnx"
    result = train_arm([train], URDF, mapping, out=out, residual="off", ripple="off", friction_memory="off")
    kept = {j for j, info in result.metrics["fast_torque"].items() if info["kept"]}
    assert {"panda_joint2", "panda_joint4"} <= kept
    assert read_arm_metadata(out)["fast_torque"]["rate_hz"] == pytest.approx(RATE, rel=0.02)
    model = ArmModel(out)
    s = filtered_samples([test], mapping.filter_cutoff_hz, mapping.gap_factor, raw_tau=True)
    assert len(s) == len(resonance)
    fast = model.fast.torque(s.qd_measured, s.starts, s.rate_hz)
    for j in (1, 3):  # held out: the resonance predicted from the logged velocities
        assert np.linalg.norm(fast[:, j] - resonance[:, j]) < 0.2 * np.linalg.norm(resonance[:, j])
    with_fast = idn.relative_error_percent(s.tau, model.torque_of(s))
    without = idn.relative_error_percent(s.tau, model.inverse_dynamics(s.q, s.qd, s.qdd))
    for j in (1, 3):
        assert with_fast[j] < without[j], (with_fast, without)
    # residual=False is the least-squares fit alone: no fast torque either
    # ros-lnn evaluate's path: the fast torque on the log's own velocities, and left out at another rate
    at_rate = evaluate_arm(model, [test], mapping)[test.name]
    assert at_rate["fast_torque"] == "applied"
    assert at_rate["torque_rre_percent"]["panda_joint2"] == pytest.approx(with_fast[1], rel=1e-9)
    half = replace(test, t=test.t[::2], q=test.q[::2], qd=test.qd[::2], tau=test.tau[::2])
    assert evaluate_arm(model, [half], mapping)[test.name]["fast_torque"].startswith("left out")
    fit_alone = model.inverse_dynamics(s.q, s.qd, s.qdd, residual=False)
    np.testing.assert_allclose(model.torque_of(s, residual=False), fit_alone)


def test_train_arm_with_fast_torque_off_writes_no_taps(tmp_path, resonant_arm):
    (train, _), _, mapping = resonant_arm
    out = tmp_path / "arm.onnx"
    train_arm([train], URDF, mapping, out=out, residual="off", ripple="off", fast_torque="off")
    assert not ArmModel(out).fast.active


def test_fast_band_share_and_coherence_against_a_hand_made_torque():
    from scipy.signal import butter, filtfilt

    from ros_lnn.arm.samples import Samples
    from ros_lnn_lab.bench.realarm import fast_band

    rng = np.random.default_rng(5)
    n = 20000
    qd = velocity_stream(n, 4) + 0.05 * rng.normal(size=(n, 2))  # the velocity's own fast band
    b, a = butter(4, 10.0 / (RATE / 2))
    slow = np.stack([np.sin(np.arange(n) / RATE * 2.0), np.cos(np.arange(n) / RATE)], 1)
    qd_fast = qd - filtfilt(b, a, qd, axis=0)
    fast = np.stack([3.0 * qd_fast[:, 0], 0.1 * rng.normal(size=n)], 1)  # follows the motion / does not
    tau_raw = slow + fast
    s = Samples(
        q=np.zeros((n, 2)), qd=qd, qdd=qd, tau=filtfilt(b, a, tau_raw, axis=0), tau_raw=tau_raw,
        rate_hz=RATE, cutoff_hz=10.0, qd_measured=qd,
    )  # fmt: skip
    band = fast_band(s)
    expected = 100 * np.linalg.norm(tau_raw - s.tau, axis=0) / np.linalg.norm(tau_raw, axis=0)
    np.testing.assert_allclose(band["share_percent"], expected)
    assert band["coherence"][0] > 0.9 and band["coherence"][1] < 0.1
    assert band["band_hz"] == (10.0, 100.0)
