"""End to end on real files: simulated trials -> rosbag2 (sqlite3, mcap) -> ``ros-lnn train --bag``
(short) -> ONNX -> the runtime evaluates the held-out bag trials, matching the metrics recorded in
the model's metadata, with the bag's hash and split as provenance."""

import numpy as np
import pytest

from bag_helpers import crane_trial, crane_trials, mapping
from conftest import requires_torch
from ros_lnn.bags.dataset import load_bag_dataset
from ros_lnn.bags.reader import bag_files_sha256
from ros_lnn.bags.writer import write_trials_bag
from ros_lnn.cli import main

pytestmark = requires_torch
pytest.importorskip("rosbags")
pytest.importorskip("onnxruntime")


@pytest.mark.parametrize("storage", ["sqlite3", "mcap"])
def test_train_from_bag_to_onnx(tmp_path, storage, capsys):
    from ros_lnn.inference.runtime import ServoLnnRuntime

    trials = list(crane_trials()) + [crane_trial(7 if storage == "mcap" else 2)]
    bag = write_trials_bag(tmp_path / "bag", trials, storage)
    out = tmp_path / "crane_from_bag.onnx"
    code = main(
        [
            "train",
            "--bag",
            str(bag),
            "--epochs",
            "20",
            "--n-train",
            "1024",
            "--batch",
            "512",
            "--log-every",
            "10",
            "--val-every",
            "10",
            "--dtype",
            "float64",
            "--export-dtype",
            "float64",
            "--threads",
            "1",
            "--out",
            str(out),
        ]
    )
    printed = capsys.readouterr().out
    assert code == 0, printed
    assert "Q_e measured" in printed and "validation on ground truth" in printed

    rt = ServoLnnRuntime(out)
    prov = rt.metadata.provenance
    assert prov["data"]["kind"] == "rosbag"
    assert prov["data"]["bags"][0]["sha256"] == bag_files_sha256(bag)
    assert prov["data"]["topics"]["/joint_states"]["messages"] == sum(len(t) for t in trials)
    ds = load_bag_dataset(bag, mapping())
    held_out = [t.name for t in ds.validation]
    assert prov["split"]["test_trials"] == held_out and held_out
    assert not set(prov["split"]["train_trials"]) & set(held_out)

    # the runtime on the held-out trials' ground truth reproduces the exported validation metric
    truth = [x for t, x in zip(ds.trials, ds.truth) if t.name in held_out]
    q, qd, qdd, Q = (np.concatenate([getattr(x, k) for x in truth]) for k in ("q", "qd", "qdd", "Q"))
    pred = rt.evaluate(q, qd, qdd[:, 1:], Q[:, :1])
    nmse = np.mean((pred["qdd"][:, 0] - qdd[:, 0]) ** 2) / np.var(qdd[:, 0])
    # exported graph vs the torch model that computed the metric: float64, elementary softplus
    assert nmse == pytest.approx(rt.metadata.metrics["qdd_f_nmse"], rel=1e-6)
    assert np.isfinite(pred["Q_e"]).all()
