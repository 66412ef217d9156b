"""The recording set and the structural least-squares baselines: the true coefficients come back from
exact and from noise-free bag data, and the fit on a noisy training recording holds on recordings of
other excitation (q̈_f nMSE ≪ 1e-3), with damping clearly better than without, and zero at 1."""

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from ros_lnn.bags.mapping import BagMapping
from ros_lnn.errors import DataError
from ros_lnn.physics.friction import JointFriction
from ros_lnn.physics.rotary_pendulum import RotaryPendulum
from ros_lnn.recordings.generator import bag_mapping, write_recording
from ros_lnn.recordings.recording_set import (
    PLANTS,
    SAVGOL_WINDOW,
    build_recording_set,
    format_baselines,
    recording_plans,
    structural_baselines,
)
from ros_lnn.recordings.structural_fit import (
    equation_for,
    exact_motion,
    fit_structural,
    measured_motion,
    nmse,
    zero_nmse,
)

pytest.importorskip("rosbags")
CONFIG = Path(__file__).resolve().parents[2] / "config"


@pytest.fixture(scope="module")
def recordings(tmp_path_factory):
    return build_recording_set(tmp_path_factory.mktemp("recordings"))


def test_true_coefficients_are_the_textbook_ones():
    plant = PLANTS["rotary_pendulum"]()
    eq = equation_for(plant)
    sys = plant.system
    # rod of length L_p on its end: m g (L_p/2) / (m L_p²/3) = 3 g / (2 L_p); coupling m r (L_p/2) / J_p
    expected = [
        -3 * 9.81 / (2 * 0.129),
        1.0,
        -3 * 0.085 / (2 * 0.129),
        -2.5e-5 / sys.J_p,
        -2.5e-5 / sys.J_p,
        0.0,
    ]
    np.testing.assert_allclose(eq.true_coefficients(), expected, rtol=1e-12)
    crane = equation_for(PLANTS["friction_crane"]())
    np.testing.assert_allclose(
        crane.true_coefficients(),
        [-9.8 / 1.5, -1 / 1.5, -0.02 / (0.13 * 2.25), -2e-3 / (0.13 * 2.25), 0.0],
        rtol=1e-12,
    )
    assert crane.active_terms(damping=False) == ("sin(theta)", "cos(theta)servo_dd", "1")


@pytest.mark.parametrize("system", list(PLANTS))
def test_fit_recovers_the_true_coefficients_on_noise_free_data(system, tmp_path):
    plan = next(p for p in recording_plans() if p.system == system and p.role == "train")
    plant = PLANTS[system]()
    quiet = replace(
        plan.spec,
        position_noise=0.0,
        velocity_noise=0.0,
        counts_per_rev=0,
        linear_resolution_m=0.0,
        jitter_s=0.0,
        latency_s=0.0,
    )
    truth = write_recording(tmp_path / "bag", plant, plan.profile, quiet)
    eq = equation_for(plant)
    true = eq.true_coefficients()
    # exact q, q̇, q̈: the equation is the plant's, so least squares is exact
    exact = fit_structural(eq, exact_motion(truth))
    np.testing.assert_allclose(exact.coefficients, true, rtol=1e-9, atol=1e-10 * np.abs(true).max())
    assert exact.train_nmse < 1e-20
    # through the bag path (q̈ by Savitzky–Golay of the recorded velocities): the differentiation's bias only
    mapping = BagMapping.from_dict(bag_mapping(truth, savgol_window=SAVGOL_WINDOW[system]))
    fit = fit_structural(eq, measured_motion(truth.path, mapping))
    got = dict(zip(eq.terms, fit.coefficients))
    want = dict(zip(eq.terms, true))
    for term in ("sin(theta)", "cos(theta)servo_dd", "sin(theta)cos(theta)servo_d^2"):
        if term in want:
            assert got[term] == pytest.approx(want[term], rel=1e-4), term
    assert got["theta_d"] == pytest.approx(want["theta_d"], rel=0.02)
    assert got["tanh(theta_d/eps)"] == pytest.approx(want["tanh(theta_d/eps)"], rel=0.1)
    assert abs(got["1"]) < 1e-5 * abs(want["sin(theta)"])
    assert fit.train_nmse < 1e-6


def test_recording_set_layout_manifest_and_mappings(recordings):
    assert recordings.systems == ["rotary_pendulum", "friction_crane"]
    manifest = json.loads((recordings.directory / "recordings.json").read_text())
    rows = {(r["system"], r["role"], r["excitation"]) for r in manifest["recordings"]}
    assert rows == {
        ("rotary_pendulum", "train", "step"),
        ("rotary_pendulum", "test", "impulse"),
        ("rotary_pendulum", "test", "chirp"),
        ("friction_crane", "train", "multisine"),
        ("friction_crane", "test", "impulse"),
        ("friction_crane", "test", "chirp"),
    }
    for row in manifest["recordings"]:
        assert (recordings.directory / row["path"] / "metadata.yaml").exists()
        assert "q" not in row and row["spec"]["servo_topic"] == ""
    # the mapping written with the set is the one shipped under config/
    for system in recordings.systems:
        shipped = BagMapping.from_yaml(CONFIG / f"bag_mapping_{system}.yaml")
        assert recordings.mapping(system) == shipped
    # seeds differ per recording, so noise is independent between train and test
    assert len({p.spec.seed for p in recording_plans()}) == len(recording_plans())


def test_rotary_training_recording_is_a_step(recordings):
    """Constant arm speed after a short ramp: the narrow excitation of a step-response recording."""
    train = recordings.train("rotary_pendulum")
    assert train.plan.excitation == "step"
    data = measured_motion(train.path, recordings.mapping("rotary_pendulum"))
    held = data.qd_e[np.argmax(data.qd_e > 0.99 * 4 * np.pi) :]
    assert (
        len(held) > 0.85 * len(data)
        and np.std(held) < 0.01
        and np.mean(held) == pytest.approx(4 * np.pi, rel=1e-3)
    )
    assert train.truth.q[-1, train.truth.servo_index[0]] > 50  # the arm has spun ~9 turns


@pytest.mark.parametrize("system", list(PLANTS))
def test_structural_fit_holds_on_recordings_of_other_excitation(recordings, system):
    rows = {r["baseline"]: r for r in structural_baselines(recordings, system)}
    full, bare, zero = rows["structural"], rows["structural, no damping"], rows["zero"]
    assert set(full["test_nmse"]) == {"test_impulse", "test_chirp"}
    for name, value in full["test_nmse"].items():
        assert value < 3e-4, (name, value)  # ≪ 1e-3 on noisy held-out data
        assert bare["test_nmse"][name] > 3 * value, name  # friction matters
        assert zero["test_nmse"][name] >= 1.0
    true = equation_for(recordings.plants[system]).true_coefficients()
    np.testing.assert_allclose(full["coefficients"][:2], true[:2], rtol=0.01)
    text = format_baselines(system, "train", list(rows.values()))
    assert "structural, no damping" in text and "test_impulse" in text


def test_scores_and_errors():
    assert nmse([1.0, 2.0, 3.0], [1.0, 2.0, 3.0]) == 0.0
    assert nmse([0.0, 0.0], [1.0, 3.0]) == pytest.approx(5.0 / 1.0)
    from ros_lnn.recordings.structural_fit import MotionData

    still = MotionData(*(np.zeros(10) for _ in range(5)), source="still.bag")
    still.qdd_f = np.array([1.0, 3.0] * 5)
    assert zero_nmse(still) == pytest.approx(5.0)  # mean square 5, variance 1
    eq = equation_for(PLANTS["rotary_pendulum"]())
    with pytest.raises(DataError, match=r"still\.bag: term"):
        fit_structural(eq, still)
    from ros_lnn.physics.chain import PlanarChain, rod
    from ros_lnn.physics.friction import FrictionPlant

    with pytest.raises(DataError, match="no structural equation"):
        equation_for(FrictionPlant(PlanarChain([rod("j1"), rod("j2")], servo_joints=["j1"]), {}))
    assert (
        equation_for(
            FrictionPlant(RotaryPendulum(), {"pendulum_joint": JointFriction(1e-5, 0.0, 0.1)})
        ).smoothing
        == 0.1
    )
