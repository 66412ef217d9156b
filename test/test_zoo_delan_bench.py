"""DeLaN benchmark plumbing on the character data (skipped when the data set is not next to the checkout)."""
import numpy as np
import pytest

from conftest import requires_torch
from ros_lnn.physics.delan_data import TEST_LETTERS, default_data_path, load_character_data
from ros_lnn.errors import DataError

DATA = default_data_path()
needs_data = pytest.mark.skipif(not DATA.is_file(), reason=f"DeLaN character data not found at {DATA}")


@needs_data
def test_split_and_torque_decomposition():
    train, test = load_character_data()
    assert len(np.unique(train["letter"])) == 17 and len(train["q"]) == len(train["Q"]) > 17 * 100
    assert set(np.unique(test["letter"])) == set(TEST_LETTERS)
    assert not set(np.unique(train["letter"])) & set(TEST_LETTERS)
    np.testing.assert_allclose(test["Q_m"] + test["Q_c"] + test["Q_g"], test["Q"], atol=1e-12)
    np.testing.assert_allclose(np.einsum("kij,kj->ki", test["M"], test["qdd"]), test["Q_m"], atol=1e-12)


def test_missing_data_is_a_clear_error(tmp_path):
    with pytest.raises(DataError, match="--data"):
        load_character_data(tmp_path / "nope.npz")


@needs_data
@requires_torch
def test_short_training_gives_finite_errors_that_fall():
    from ros_lnn.commands.bench_delan import delan_errors, train_delan

    train, test = load_character_data()
    small = {k: v[::10] for k, v in train.items()}
    model, _ = train_delan(small, epochs=1, hidden=(16, 16), progress=lambda s: None, log_every=1)
    first = delan_errors(model, test)
    model, _ = train_delan(small, epochs=40, hidden=(16, 16), progress=lambda s: None, log_every=40)
    later = delan_errors(model, test)
    assert all(np.isfinite(v) for v in later.values())
    assert later["torque"] < first["torque"]
