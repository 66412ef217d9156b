"""Acceleration families (LNN here) through the project trainer: resume, early stopping, non-finite
batches, CLI options and report."""

import json

import numpy as np
import pytest

from conftest import requires_torch

pytestmark = requires_torch
torch = pytest.importorskip("torch")

from ros_lnn.families import Network, get  # noqa: E402
from ros_lnn.models.normalisation import set_qd_scale  # noqa: E402
from ros_lnn.training.data import split_by_trajectory  # noqa: E402
from ros_lnn.training.sources import trajectory_data  # noqa: E402
from ros_lnn.training.trainer import TrainConfig, train, train_acceleration  # noqa: E402


def particle_data():
    data, shape, _ = trajectory_data("particle", links=2, trajectories=6, duration=1.0, seed=0)
    model = get("lnn").build(shape, Network(hidden=(16, 16), activation="softplus"))
    train_s, test_s, _ = split_by_trajectory(data, 0)
    return model, train_s, test_s


def fresh(model):
    torch.manual_seed(0)
    out = type(model)(model.n, hidden=model.hidden_widths)
    return out


def config(tmp_path, **kw):
    base = dict(
        epochs=6,
        batch=64,
        lr=1e-3,
        weight_decay=0.0,
        device="cpu",
        dtype="float64",
        log_every=1,
        val_every=1,
        checkpoint_every=1,
        checkpoint_dir=str(tmp_path / "ck"),
        grad_clip=10.0,
    )
    return TrainConfig(**(base | kw))


def test_resumed_acceleration_run_equals_the_uninterrupted_one(tmp_path):
    model, train_s, test_s = particle_data()
    a, b = fresh(model), fresh(model)
    for m in (a, b):
        set_qd_scale(m, train_s["qd"])
    full = train(a, train_s, test_s, config(tmp_path / "a"), progress=lambda line: None)
    train(b, train_s, test_s, config(tmp_path / "b", epochs=3), progress=lambda line: None)
    resumed = train(
        b,
        train_s,
        test_s,
        config(tmp_path / "b", resume=str(tmp_path / "b" / "ck")),
        progress=lambda line: None,
    )
    assert resumed["epoch"] == full["epoch"]
    np.testing.assert_allclose(resumed["loss"], full["loss"], rtol=1e-10)
    for pa, pb in zip(a.parameters(), b.parameters()):
        torch.testing.assert_close(pa, pb, rtol=1e-10, atol=0)
    assert full["losses"] == ["qdd"] and full["val"][-1]["qdd_nmse"] < full["val"][0]["qdd_nmse"]


def test_early_stopping_stops_an_acceleration_run(tmp_path):
    model, train_s, test_s = particle_data()
    set_qd_scale(model, train_s["qd"])
    # min_delta larger than any improvement of the nMSE: stops after patience validations
    hist = train(
        model,
        train_s,
        test_s,
        config(tmp_path, epochs=50, patience=2, min_delta=1e6),
        progress=lambda line: None,
    )
    assert hist["epoch"][-1] == 3
    assert hist["early_stopping"]["monitor"] == "qdd_nmse"


def test_a_batch_with_a_nan_sample_is_skipped_without_nan_parameters(tmp_path):
    model, train_s, _ = particle_data()
    train_s = {k: np.array(v, dtype=float, copy=True) for k, v in train_s.items() if k in ("q", "qd", "qdd")}
    train_s["qdd"][5] = np.nan  # one bad sample: its batch (one of each epoch) has a NaN loss
    n = len(train_s["q"])
    batch = 64
    hist = train_acceleration(model, train_s, epochs=3, batch=batch, lr=1e-3, log_every=1)
    assert hist["skipped"] == [1, 1, 1]
    assert all(np.isfinite(hist["loss"]))
    assert all(torch.isfinite(p).all() for p in model.parameters())
    assert n > batch  # other batches did train
    assert set(hist) >= {"epoch", "loss", "seconds"}


def test_without_the_guard_a_nan_sample_poisons_the_parameters(tmp_path):
    model, train_s, _ = particle_data()
    train_s = {k: np.array(v, dtype=float, copy=True) for k, v in train_s.items() if k in ("q", "qd", "qdd")}
    train_s["qdd"][5] = np.nan
    set_qd_scale(model, train_s["qd"])
    train(
        model,
        train_s,
        None,
        config(tmp_path, epochs=1, skip_non_finite=False, grad_clip=None, checkpoint_dir=None),
        progress=lambda line: None,
    )
    assert not all(torch.isfinite(p).all() for p in model.parameters())


def run_cli(*argv):
    from ros_lnn.cli import main

    return main(["train", *argv])


def test_cli_accepts_run_options_for_lnn_and_writes_the_report(tmp_path):
    out = tmp_path / "m.pt"
    common = [
        "--model",
        "lnn",
        "--system",
        "particle",
        "--trajectories",
        "4",
        "--duration",
        "1",
        "--hidden",
        "8",
        "8",
        "--out",
        str(out),
        "--report",
        str(tmp_path / "rep"),
    ]
    assert (
        run_cli(
            *common,
            "--epochs",
            "2",
            "--val-every",
            "1",
            "--checkpoint-every",
            "1",
            "--patience",
            "5",
            "--device",
            "cpu",
        )
        == 0
    )
    assert run_cli(*common, "--epochs", "3", "--resume") == 0
    doc = json.loads((tmp_path / "rep" / "metrics.json").read_text())
    assert doc["training"]["epoch"][-1] == 3 and doc["training"]["resumed"][0]["epoch"] == 2
    assert np.isfinite(doc["metrics"]["qdd_nmse"])
    assert {"loss_curves.png", "qdd_test.png", "metrics.json"} <= {
        p.name for p in (tmp_path / "rep").iterdir()
    }


def test_cli_still_refuses_bag_options_for_acceleration_families(tmp_path, capsys):
    code = run_cli(
        "--model",
        "lnn",
        "--system",
        "particle",
        "--epochs",
        "2",
        "--bag",
        str(tmp_path),
        "--out",
        str(tmp_path / "m.pt"),
    )
    assert code == 2
    assert "--bag" in capsys.readouterr().err
