"""Bags as a robot records them (joint states only, no truth, no efforts; field robots with nameless
20 Hz joint states, NaN efforts and custom message types): training runs end to end without NaN in
the report or the log, validation and test come from the recordings named for them, too little usable
data is one line, and a pickled checkpoint is refused by ``ros-lnn export``."""

import json
import math
import shutil

import numpy as np
import pytest
import yaml
from furuta_helpers import MAPPING, RotaryPendulum, impulse_servo, record, step_servo, write_joint_states_bag

from conftest import requires_torch
from ros_lnn.bags.writer import BagWriter
from ros_lnn.cli import main

pytestmark = requires_torch
pytest.importorskip("rosbags")
pytest.importorskip("onnxruntime")


@pytest.fixture(scope="module")
def recordings(tmp_path_factory):
    """A step and an impulse recording of the rotary pendulum and their mapping file."""
    root = tmp_path_factory.mktemp("rotary")
    system = RotaryPendulum()
    step = record(system, step_servo(), 4.0, name="step")
    impulse = record(system, impulse_servo(), 4.0, name="impulse")
    bags = {
        "step": write_joint_states_bag(root / "step", step),
        "impulse": write_joint_states_bag(root / "impulse", impulse),
    }
    config = root / "rotary.yaml"
    config.write_text(yaml.safe_dump({"bag": MAPPING}))
    return bags, config, {"step": step, "impulse": impulse}


def _no_nan(text):
    def refuse(constant):
        raise AssertionError(f"{constant} in metrics.json")

    return json.loads(text, parse_constant=refuse)


def _train(argv, capsys):
    code = main(
        [
            "train",
            "--epochs",
            "30",
            "--hidden",
            "16",
            "--batch",
            "256",
            "--dtype",
            "float64",
            "--threads",
            "1",
            "--log-every",
            "10",
            "--val-every",
            "10",
            *argv,
        ]
    )
    captured = capsys.readouterr()
    return code, captured.out + captured.err


def test_joint_states_only_bag_trains_and_reports_without_nan(recordings, tmp_path, capsys):
    bags, config, _ = recordings
    out = tmp_path / "m.onnx"
    code, printed = _train(["--bag", str(bags["step"]), "--config", str(config), "--out", str(out)], capsys)
    assert code == 0, printed
    assert "nan" not in printed.lower().replace("nan efforts", "")
    assert "IN-DISTRIBUTION" in printed and "validation (in-distribution" in printed
    report = tmp_path / "m_report"
    files = sorted(p.name for p in report.iterdir())
    assert "metrics.json" in files and "loss_curves.png" in files
    assert any(f.startswith("validation_step") and f.endswith(".png") for f in files)
    doc = _no_nan((report / "metrics.json").read_text())
    metrics = doc["metrics"]
    assert math.isfinite(metrics["qdd_f_nmse"])
    assert not {"M_rel_err", "V_rel_err", "E_rel_err", "Q_e_rel_rms"} & set(metrics)  # the bag has none
    assert metrics["evaluated_on"].startswith("validation trials (in-distribution")


def test_test_bag_is_reported_and_never_validated_on(recordings, tmp_path, capsys):
    from ros_lnn.inference.runtime import ServoLnnRuntime

    bags, config, _ = recordings
    out = tmp_path / "m.onnx"
    code, printed = _train(
        [
            "--bag",
            str(bags["step"]),
            "--test-bag",
            str(bags["impulse"]),
            "--config",
            str(config),
            "--patience",
            "50",
            "--out",
            str(out),
        ],
        capsys,
    )
    assert code == 0, printed
    meta = ServoLnnRuntime(out).metadata
    split = meta.provenance["split"]
    assert split["test_trials"] == ["impulse_0"] and split["test_recording"]
    assert not set(split["validation_trials"]) & set(split["test_trials"])
    assert all(name.startswith("step") for name in split["validation_trials"] + split["train_trials"])
    assert meta.system == "rotary_pendulum"
    data = meta.provenance["data"]
    assert data["qdd_e_from"].startswith("differentiated joint states")
    assert data["joints"] == {"free": ["pendulum_joint"], "servo": ["arm_joint"]}
    assert "q̈_e from differentiated joint states" in printed
    assert "--test-bag" in meta.provenance["command"]
    # the reported figure is the test recording's: recompute it from the impulse bag with the runtime
    rt = ServoLnnRuntime(out)
    from ros_lnn.bags.dataset import load_bag_dataset
    from ros_lnn.bags.mapping import BagMapping

    ds = load_bag_dataset(bags["impulse"], BagMapping.from_dict({**MAPPING, "val_fraction": 0.0}))
    tr = ds.trials[0]
    pred = rt.evaluate(tr.q, tr.qd, tr.qdd[:, 1:], np.zeros((len(tr), 1)))
    nmse = np.mean((pred["qdd_f"][:, 0] - tr.qdd[:, 0]) ** 2) / np.var(tr.qdd[:, 0])
    assert nmse == pytest.approx(meta.metrics["qdd_f_nmse"], rel=1e-4)
    assert meta.metrics["evaluated_on"].startswith("test trials (held-out recording")
    # early stopping validated on the step recording: every validation entry is the step's figure
    doc = json.loads((tmp_path / "m_report" / "metrics.json").read_text())
    assert doc["training"]["validation"] and all(
        abs(v["qdd_f_nmse"] - meta.metrics["qdd_f_nmse"]) > 0 for v in doc["training"]["validation"]
    )
    assert (tmp_path / "m_report" / "test_impulse_0.png").is_file()


def test_split_by_bag_takes_the_last_bag_as_test(recordings, tmp_path, capsys):
    bags, config, _ = recordings
    doc = yaml.safe_load(config.read_text())
    doc["bag"]["split"] = "by_bag"
    by_bag = tmp_path / "by_bag.yaml"
    by_bag.write_text(yaml.safe_dump(doc))
    out = tmp_path / "m.pt"
    code, printed = _train(
        [
            "--bag",
            str(bags["step"]),
            str(bags["impulse"]),
            "--config",
            str(by_bag),
            "--out",
            str(out),
            "--no-report",
        ],
        capsys,
    )
    assert code == 0, printed
    assert "test on measured values from" in printed and str(bags["impulse"]) in printed


def _field_bag(path, trial, rate_hz=20.0):
    """A field robot's recording: nameless JointState at ``rate_hz`` with NaN efforts in every
    message, and a topic of the robot's own message type without a definition."""
    keep = np.arange(0, len(trial), int(round(200.0 / rate_hz)))
    stamps = 1_700_000_000 * 10**9 + np.round(trial.t[keep] * 1e9).astype(np.int64)
    with BagWriter(path) as w:
        w.joint_states(
            "/joint_states", stamps, [], trial.q[keep], trial.qd[keep], np.full((len(keep), 2), np.nan)
        )
        w.raw(
            "/robot/status", "acme_msgs/msg/Status", stamps, [b"\x00\x01\x00\x00\x07\x00\x00\x00"] * len(keep)
        )
    return path


def test_field_robot_bag_all_efforts_nan_is_one_line_exit_2(recordings, tmp_path, capsys):
    del recordings
    long = record(RotaryPendulum(), impulse_servo(hold=4.0), 12.0, name="field")
    bag = _field_bag(tmp_path / "field", long)
    mapping = {
        **MAPPING,
        "joint_order": ["pendulum_joint", "arm_joint"],
        "free_effort": "joint_states",
        "savgol_window": 5,
        "savgol_order": 2,
        "min_samples": 20,
    }
    config = tmp_path / "field.yaml"
    config.write_text(yaml.safe_dump({"bag": mapping}))
    code, printed = _train(
        ["--bag", str(bag), "--config", str(config), "--out", str(tmp_path / "f.onnx")], capsys
    )
    assert code == 2
    error = [line for line in printed.splitlines() if ": error: " in line]
    assert len(error) == 1 and "Traceback" not in printed
    assert "NaN" in error[0] and "free_effort" in error[0] and "0 training samples" in error[0]

    mapping["free_effort"] = "zero"  # unactuated pendulum: the same bag trains
    config.write_text(yaml.safe_dump({"bag": mapping}))
    code, printed = _train(
        ["--bag", str(bag), "--config", str(config), "--out", str(tmp_path / "f.onnx")], capsys
    )
    assert code == 0, printed
    assert "/robot/status" in printed  # the custom topic is skipped and listed, not fatal


def test_export_refuses_a_pickled_checkpoint_in_one_line(tmp_path, capsys):

    import torch

    class Payload:
        def __reduce__(self):
            return (shutil.rmtree, (str(tmp_path / "victim"),))

    (tmp_path / "victim").mkdir()
    torch.save(
        {"model_config": {"family": "servo_lnn"}, "model_state": {}, "x": Payload()},
        tmp_path / "evil.pt",
        pickle_protocol=2,
    )
    code = main(["export", str(tmp_path / "evil.pt"), "--out", str(tmp_path / "e.onnx")])
    captured = capsys.readouterr()
    lines = [line for line in (captured.out + captured.err).splitlines() if line.strip()]
    assert code == 2 and len(lines) == 1 and "weights-only" in lines[0]
    assert (tmp_path / "victim").is_dir() and not (tmp_path / "e.onnx").exists()


def test_evaluate_on_bags_against_savgol_reference(recordings, tmp_path, capsys, monkeypatch):
    from scipy.signal import savgol_filter

    from ros_lnn.inference.runtime import ServoLnnRuntime

    bags, config, trials = recordings
    out = tmp_path / "m.onnx"
    code, printed = _train(
        [
            "--bag",
            str(bags["step"]),
            "--config",
            str(config),
            "--out",
            str(out),
            "--export-dtype",
            "float64",
            "--no-report",
        ],
        capsys,
    )
    assert code == 0, printed
    monkeypatch.chdir(tmp_path)
    code = main(
        [
            "evaluate",
            "--model",
            str(out),
            "--bag",
            str(bags["impulse"]),
            str(bags["step"]),
            "--config",
            str(config),
            "--json",
            "ev.json",
        ]
    )
    printed = capsys.readouterr().out
    assert code == 0, printed
    assert "Savitzky–Golay" in printed and "impulse_0" in printed
    doc = _no_nan((tmp_path / "ev.json").read_text())
    assert set(doc) == {str(bags["impulse"]), str(bags["step"])}
    # the reference, rebuilt from the simulated velocities written into the bag: scipy's filter
    tr = trials["impulse"]
    dt = tr.t[1] - tr.t[0]
    ref = savgol_filter(tr.qd, 11, 3, deriv=1, delta=dt, axis=0)
    rt = ServoLnnRuntime(out)
    pred = rt.evaluate(tr.q, tr.qd, ref[:, 1:], np.zeros((len(tr), 1)))["qdd_f"][:, 0]
    expected = np.mean((pred - ref[:, 0]) ** 2) / np.var(ref[:, 0])
    got = doc[str(bags["impulse"])]
    assert got["qdd_f_nmse"] == pytest.approx(expected, rel=1e-6)
    m = got["trials"]["impulse_0"]
    assert m["energy_balance_Q_e"] == "model (inverse mode)" and m["power_residual_rel"] > 0
    assert (tmp_path / "evaluation_m" / "impulse_0.png").is_file()
