"""DeLaN benchmark on the character data: where the data are looked for (and the one-line error when they
are not there), the split, the torque decomposition, training, and the rollouts of the held-out letters.

The data do not ship with the package; these tests find them by ``$ROS_LNN_DELAN_DATA`` or as
``shared/data/delan_character`` beside the checkout or one of its parent folders, and skip only when
there is none."""

import os
from pathlib import Path

import numpy as np
import pytest

from conftest import requires_torch
from ros_lnn.errors import DataError
from ros_lnn.physics.delan_data import (
    ENV_VAR,
    FILE_NAME,
    TEST_LETTERS,
    find_character_data,
    letter_trajectories,
    load_character_data,
)


def _data_dir():
    if os.environ.get(ENV_VAR):
        return Path(os.environ[ENV_VAR])
    for folder in Path(__file__).resolve().parents[2:]:
        candidate = folder / "shared" / "data" / "delan_character"
        if (candidate / FILE_NAME).is_file():
            return candidate
    return None


DATA = _data_dir()
needs_data = pytest.mark.skipif(
    DATA is None, reason="DeLaN character data not found (set ROS_LNN_DELAN_DATA)"
)


@needs_data
def test_split_and_torque_decomposition():
    train, test = load_character_data(DATA)
    assert len(np.unique(train["letter"])) == 17 and len(train["q"]) == len(train["Q"]) > 17 * 100
    assert set(np.unique(test["letter"])) == set(TEST_LETTERS)
    assert not set(np.unique(train["letter"])) & set(TEST_LETTERS)
    np.testing.assert_allclose(test["Q_m"] + test["Q_c"] + test["Q_g"], test["Q"], atol=1e-12)
    np.testing.assert_allclose(np.einsum("kij,kj->ki", test["M"], test["qdd"]), test["Q_m"], atol=1e-12)
    letters = letter_trajectories(test)
    assert list(letters) == list(TEST_LETTERS)
    for traj in letters.values():  # whole letters, in time order, at 25 Hz
        np.testing.assert_allclose(np.diff(traj["t"]), 0.04, atol=1e-9)


@needs_data
def test_data_are_found_by_folder_file_and_environment(monkeypatch):
    assert find_character_data(DATA) == DATA / FILE_NAME
    assert find_character_data(DATA / FILE_NAME) == DATA / FILE_NAME
    monkeypatch.setenv(ENV_VAR, str(DATA))
    assert find_character_data() == DATA / FILE_NAME


def test_missing_data_is_a_clear_error(tmp_path, monkeypatch):
    with pytest.raises(DataError, match="--data"):
        load_character_data(tmp_path / "nope.npz")
    monkeypatch.setenv(ENV_VAR, str(tmp_path))
    with pytest.raises(DataError, match=f"from \\${ENV_VAR}"):
        find_character_data()


def test_bench_delan_without_data_exits_2_with_one_line(tmp_path, capsys, monkeypatch):
    from ros_lnn.cli import main

    monkeypatch.delenv(ENV_VAR, raising=False)
    assert main(["bench", "delan", "--data", str(tmp_path / "absent")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "DeLaN character data not found" in err and "--data DIR" in err
    assert str(tmp_path / "absent") in err


@needs_data
@requires_torch
def test_short_training_gives_finite_errors_that_fall():
    from ros_lnn_lab.studies.delan_benchmark import delan_errors, train_delan

    train, test = load_character_data(DATA)
    small = {k: v[::10] for k, v in train.items()}
    model, _ = train_delan(small, epochs=1, hidden=(16, 16), progress=lambda s: None, log_every=1)
    first = delan_errors(model, test)
    model, _ = train_delan(small, epochs=40, hidden=(16, 16), progress=lambda s: None, log_every=40)
    later = delan_errors(model, test)
    assert all(np.isfinite(v) for v in later.values())
    assert later["torque"] < first["torque"]


@needs_data
@requires_torch
def test_rollouts_of_held_out_letters():
    from ros_lnn_lab.studies.delan_benchmark import format_rollouts, rollout_letters, train_delan

    train, test = load_character_data(DATA)
    model, _ = train_delan(
        {k: v[::5] for k, v in train.items()},
        epochs=20,
        hidden=(16, 16),
        progress=lambda s: None,
        log_every=20,
    )
    r = rollout_letters(model, test, substeps=(1, 4), horizons=(0.2, 0.4))
    keys = list(r["windows"])
    assert keys == [f"{m}, dt = {d:g} ms" for m in ("euler", "symplectic_euler", "rk4") for d in (40, 10)]
    for key in keys:
        w, whole = r["windows"][key], r["whole"][key]
        assert set(whole["per_letter"]) == set(TEST_LETTERS)
        for row in whole["per_letter"].values():
            assert 0 <= row["seconds_below"] <= row["letter_seconds"] + 0.04 and not np.isnan(row["rms"])
        # a diverged rollout counts as inf, never nan; errors grow with the horizon
        assert not np.isnan(w["model"]["0.2 s"]) and w["model"]["0.2 s"] <= w["model"]["0.4 s"]
        assert 0 < w["recorded_qdd"]["0.2 s"] < w["recorded_qdd"]["0.4 s"] < 0.1
    floor = {k: v["recorded_qdd"]["0.4 s"] for k, v in r["windows"].items()}
    # integrating the recorded accelerations stays on the recorded path, RK4 (q̈ linear in time) closest;
    # sub-steps help Euler, whose 25 Hz steps are the data's own
    assert floor["rk4, dt = 40 ms"] < 0.5 * floor["euler, dt = 40 ms"]
    assert floor["euler, dt = 10 ms"] < floor["euler, dt = 40 ms"]
    # a barely trained model drifts from the letter far more than the integrator does
    assert r["windows"]["rk4, dt = 40 ms"]["model"]["0.4 s"] > 10 * floor["rk4, dt = 40 ms"]
    assert "| rk4, dt = 40 ms |" in format_rollouts(r)
