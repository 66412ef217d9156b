"""``ros-lnn train`` end to end on the CLI: report folder (loss curves, validation plots, metrics.json
agreeing with the model's metadata), provenance in the ONNX metadata, default checkpoint folder,
``--resume`` continuing a finished run with more epochs."""

import json

import numpy as np
import pytest

from conftest import requires_torch
from ros_lnn.cli import main

pytestmark = requires_torch
pytest.importorskip("onnxruntime")
pytest.importorskip("matplotlib")

COMMON = [
    "train",
    "--exporter",
    "torchscript",
    "--n-train",
    "512",
    "--batch",
    "256",
    "--hidden",
    "8",
    "--threads",
    "1",
    "--log-every",
    "10",
    "--val-every",
    "10",
    "--dtype",
    "float64",
    "--export-dtype",
    "float64",
]


def _png_ok(path, min_px=300):
    from matplotlib.image import imread

    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", path
    img = imread(path)
    assert min(img.shape[:2]) >= min_px and img[..., :3].std() > 0.05, path  # a drawn figure, not blank


def test_train_writes_report_provenance_and_resumes(tmp_path, capsys):
    import torch

    from ros_lnn.inference.runtime import ServoLnnRuntime
    from ros_lnn.physics.datasets import PAPER_TEST_TRIALS

    out = tmp_path / "crane.onnx"
    assert main([*COMMON, "--epochs", "30", "--out", str(out)]) == 0, capsys.readouterr().out
    printed = capsys.readouterr().out
    report = tmp_path / "crane_report"
    assert f"report: {report}" in printed

    names = ["loss_curves.png", *(f"validation_{t}.png" for t in PAPER_TEST_TRIALS), "metrics.json"]
    assert sorted(p.name for p in report.iterdir()) == sorted(names)
    for name in names[:-1]:
        _png_ok(report / name)

    rt = ServoLnnRuntime(out)
    meta = rt.metadata
    doc = json.loads((report / "metrics.json").read_text())
    assert doc["metrics"]["qdd_f_nmse"] == pytest.approx(meta.metrics["qdd_f_nmse"], rel=1e-12)
    assert doc["training"]["epoch"] == [10, 20, 30] and len(doc["training"]["validation"]) == 3
    assert set(doc["training"]["terms"]) == {"inv", "fwd", "inv_e", "fwd_e", "power"}
    assert sorted(doc["per_trial_nmse"]) == sorted(PAPER_TEST_TRIALS)
    assert set(doc["per_trial_nmse"]["force_c"]) == {"q̈ pendulum_joint", "Q_e cart_joint", "E (mean aligned)"}
    # the per-trial q̈ score of the plot is the trainer's per-trial metric
    assert doc["per_trial_nmse"]["force_c"]["q̈ pendulum_joint"] == pytest.approx(
        meta.metrics["qdd_f_nmse_per_trial"]["force_c"], rel=1e-9
    )

    prov = meta.provenance
    assert len(prov["data_hash"]) == 64 and prov["data"]["kind"] == "simulated"
    assert prov["split"]["test_trials"] == list(PAPER_TEST_TRIALS) and prov["split"]["n_train"] == 512
    assert prov["versions"]["torch"] == torch.__version__ and prov["versions"]["ros_lnn"]
    assert prov["command"].startswith("ros-lnn train") and "--epochs 30" in prov["command"]
    assert prov["date"][:2] == "20"
    run = prov["run"]
    assert run["epochs_run"] == 30 and run["world_size"] == 1 and run["compile"] == "off"
    assert run["resumed"] == [] and run["early_stopping"]["enabled"] is False
    assert doc["provenance"]["data_hash"] == prov["data_hash"]

    ck = tmp_path / "crane_checkpoints"
    assert sorted(p.name for p in ck.iterdir()) == ["final.pt", "last.pt"]

    # continue the finished run to 50 epochs; no report this time (the old one stays as it was)
    before = (report / "metrics.json").read_text()
    assert main([*COMMON, "--epochs", "50", "--resume", "--no-report", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert (
        f"resumed from {ck} after epoch 30" in printed
        and "epoch 40/50" in printed
        and "epoch 10/" not in printed
    )
    run = ServoLnnRuntime(out).metadata.provenance["run"]
    assert run["epochs_run"] == 50 and run["resumed"] == [{"from": str(ck), "epoch": 30}]
    assert (report / "metrics.json").read_text() == before


def test_resume_with_other_options_is_one_clear_line(tmp_path, capsys):
    out = tmp_path / "m.onnx"
    assert main([*COMMON, "--epochs", "10", "--no-report", "--out", str(out)]) == 0
    capsys.readouterr()
    out.unlink()
    assert main([*COMMON, "--epochs", "20", "--lr", "1e-3", "--resume", "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "cannot resume" in err[0] and "lr was 0.0001, now 0.001" in err[0]
    assert not out.exists() and not (tmp_path / "m_report").exists()


def test_report_without_truth_or_measured_qe(tmp_path):
    """A bag without ground truth and without Q_e: only q̈_f is plotted and scored."""
    import torch

    from ros_lnn.models.servo_lnn import ServoLNN
    from ros_lnn.training.report import write_report

    rng = np.random.default_rng(0)
    n = 300
    val = {
        "t": np.tile(np.arange(150) * 0.01, 2),
        "q": rng.normal(size=(n, 2)),
        "qd": rng.normal(size=(n, 2)),
        "qdd": rng.normal(size=(n, 2)),
        "Q": rng.normal(size=(n, 2)),
        "trial": np.repeat([3, 8], 150),
        "names": ["run a", "run/b"],
    }
    torch.manual_seed(0)
    model = ServoLNN(["pendulum_joint"], ["cart_joint"], hidden=[8]).double()
    history = {
        "epoch": [1, 2],
        "loss": [2.0, 1.0],
        "terms": {"inv": [1.0, 0.5], "fwd": [1.0, 0.5]},
        "val": [],
    }
    res = write_report(tmp_path / "r", history, model, val, {"qdd_f_nmse": 1.0}, qe_measured=False)
    assert res["files"] == ["loss_curves.png", "validation_run_a.png", "validation_run_b.png", "metrics.json"]
    doc = json.loads((tmp_path / "r" / "metrics.json").read_text())
    assert {k: set(v) for k, v in doc["per_trial_nmse"].items()} == {
        "run a": {"q̈ pendulum_joint"},
        "run/b": {"q̈ pendulum_joint"},
    }
    for f in res["files"][:-1]:
        _png_ok(tmp_path / "r" / f, min_px=250)
    # the score is the nMSE of the forward prediction on that trial's samples
    with torch.no_grad():
        t = {k: torch.as_tensor(val[k]) for k in ("q", "qd", "qdd", "Q")}
        pred = model(t["q"], t["qd"], t["qdd"][:, 1:], t["Q"][:, :1])["qdd"][:150, 0].numpy()
    truth = val["qdd"][:150, 0]
    assert doc["per_trial_nmse"]["run a"]["q̈ pendulum_joint"] == pytest.approx(
        np.mean((pred - truth) ** 2) / np.var(truth), rel=1e-12
    )


def test_command_in_provenance_names_bags_config_and_early_stopping():
    from ros_lnn.cli import build_parser
    from ros_lnn.commands.train import canonical_command

    args = build_parser(only="train").parse_args(
        [
            "train",
            "--bag",
            "rec_a",
            "rec_b",
            "--config",
            "crane.yaml",
            "--patience",
            "3",
            "--min-delta",
            "1e-4",
        ]
    )
    cmd = canonical_command(args)
    assert (
        "--bag rec_a rec_b" in cmd
        and "--config crane.yaml" in cmd
        and "--patience 3 --min-delta 0.0001" in cmd
    )
    plain = canonical_command(build_parser(only="train").parse_args(["train"]))
    assert "--bag" not in plain and "--patience" not in plain
