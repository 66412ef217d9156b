"""Resume: an interrupted run continued with ``--resume`` gives the same weights as an uninterrupted
one (bitwise on CPU, same thread count); an interrupted run leaves its last good checkpoint and no
half-written model; early stopping keeps the best weights."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from conftest import requires_torch, sigint_as_in_a_terminal

pytestmark = requires_torch

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def data():
    from ros_lnn.physics.crane import Crane
    from ros_lnn.physics.datasets import paper_crane_trials, paper_split
    from ros_lnn.training.data import model_order, reorder

    trials = paper_crane_trials(Crane())
    train_s, test_s = paper_split(trials, n_train_samples=512, seed=0)
    order = model_order(trials[0].coordinate_names, trials[0].free_joints, trials[0].servo_joints)
    return reorder(train_s, order), reorder(test_s, order)


def fresh_model(train_s, seed=0):
    import torch

    from ros_lnn.models.normalisation import normalisation
    from ros_lnn.models.servo_lnn import ServoLNN

    torch.manual_seed(seed)
    model = ServoLNN(["pendulum_joint"], ["cart_joint"], hidden=[16], coordinate_units=["rad", "m"])
    model.set_normalisation(*normalisation(train_s["q"]))
    return model


def config(tmp, epochs=20, **kw):
    from ros_lnn.training.trainer import TrainConfig

    base = dict(
        epochs=epochs,
        batch=128,
        lr=1e-3,
        seed=3,
        device="cpu",
        dtype="float64",
        log_every=5,
        val_every=5,
        checkpoint_every=5,
        checkpoint_dir=str(tmp),
        threads=1,
    )
    return TrainConfig(**(base | kw))


def val_subset(test_s, n=400):
    return {k: (v[:n] if k != "names" else v) for k, v in test_s.items()}


def test_interrupted_then_resumed_equals_straight_run_bitwise(tmp_path, data):
    import torch

    from ros_lnn.training.checkpoint import load_checkpoint
    from ros_lnn.training.trainer import train

    train_s, test_s = data
    val = val_subset(test_s)
    straight = fresh_model(train_s)
    h_straight = train(straight, train_s, val, config(tmp_path / "a"), progress=lambda line: None)

    def interrupt_at_13(line):
        if line.startswith("epoch 15/"):  # after epoch 15's log, before its checkpoint: last good is 10
            raise KeyboardInterrupt

    interrupted = fresh_model(train_s)
    with pytest.raises(KeyboardInterrupt):
        train(interrupted, train_s, val, config(tmp_path / "b"), progress=interrupt_at_13)
    assert not any(p.name.endswith(".tmp") for p in (tmp_path / "b").iterdir())
    _, ckpt = load_checkpoint(tmp_path / "b" / "last.pt")
    assert ckpt["epoch"] == 10

    resumed = fresh_model(train_s, seed=99)  # different init: everything must come from the checkpoint
    lines = []
    h_resumed = train(
        resumed, train_s, val, config(tmp_path / "b", resume=str(tmp_path / "b")), progress=lines.append
    )
    assert lines[0].startswith("resumed from") and "after epoch 10" in lines[0]
    a, b = straight.state_dict(), resumed.state_dict()
    assert a.keys() == b.keys()
    for k in a:
        assert torch.equal(a[k], b[k]), k  # bitwise
    assert h_resumed["loss"] == h_straight["loss"]
    assert h_resumed["epoch"] == h_straight["epoch"] == [5, 10, 15, 20]
    assert [v["qdd_f_nmse"] for v in h_resumed["val"]] == [v["qdd_f_nmse"] for v in h_straight["val"]]
    assert h_resumed["resumed"] == [{"from": str(tmp_path / "b"), "epoch": 10}]
    # and training did move the weights away from the initialisation
    init = dict(fresh_model(train_s).named_parameters())
    assert all(not torch.equal(init[k], p) for k, p in straight.named_parameters())


def test_resume_without_optimizer_state_would_differ(tmp_path, data):
    """Guards the test above: restoring the weights alone (fresh Adam moments) changes the result."""
    import torch

    from ros_lnn.training.trainer import train

    train_s, _test_s = data
    straight = fresh_model(train_s)
    train(straight, train_s, None, config(tmp_path / "a"), progress=lambda line: None)
    half = fresh_model(train_s)
    train(half, train_s, None, config(tmp_path / "b", epochs=10), progress=lambda line: None)
    ckpt = torch.load(tmp_path / "b" / "last.pt", weights_only=False)
    ckpt["optimizer_state"]["state"] = {}
    torch.save(ckpt, tmp_path / "b" / "weights_only.pt")
    resumed = fresh_model(train_s)
    train(
        resumed,
        train_s,
        None,
        config(tmp_path / "c", resume=str(tmp_path / "b" / "weights_only.pt")),
        progress=lambda line: None,
    )
    diff = max(
        float((straight.state_dict()[k] - v).abs().max())
        for k, v in resumed.state_dict().items()
        if v.is_floating_point()
    )
    assert diff > 1e-6


def test_resume_refuses_other_settings_or_data(tmp_path, data):
    from ros_lnn.errors import ModelError
    from ros_lnn.training.trainer import train

    train_s, _ = data
    train(fresh_model(train_s), train_s, None, config(tmp_path, epochs=5), progress=lambda line: None)
    with pytest.raises(ModelError, match="batch was 128, now 64"):
        train(
            fresh_model(train_s),
            train_s,
            None,
            config(tmp_path, batch=64, resume=str(tmp_path)),
            progress=lambda line: None,
        )
    other = {k: (v * 1.01 if k == "q" else v) for k, v in train_s.items()}
    with pytest.raises(ModelError, match="training data differ"):
        train(
            fresh_model(train_s),
            other,
            None,
            config(tmp_path, resume=str(tmp_path)),
            progress=lambda line: None,
        )
    with pytest.raises(ModelError, match="no checkpoint at"):
        train(
            fresh_model(train_s),
            train_s,
            None,
            config(tmp_path, resume=str(tmp_path / "nothing.pt")),
            progress=lambda line: None,
        )


def test_early_stopping_keeps_best_weights(tmp_path, data):
    import torch

    from ros_lnn.training.trainer import evaluate, train

    train_s, test_s = data
    val = val_subset(test_s)
    # lr large enough that validation worsens at some point; patience 2 validations
    model = fresh_model(train_s)
    h = train(
        model,
        train_s,
        val,
        config(tmp_path, epochs=400, lr=3e-2, val_every=4, log_every=4, checkpoint_every=400, patience=2),
        progress=lambda line: None,
    )
    es = h["early_stopping"]
    vals = [v["qdd_f_nmse"] for v in h["val"]]
    assert es["enabled"] and es["stopped_epoch"] is not None and es["stopped_epoch"] < 400
    assert h["val"][-1]["epoch"] == es["stopped_epoch"]
    assert es["best"] == min(vals) and es["best_epoch"] == h["val"][int(np.argmin(vals))]["epoch"]
    # the last two validations did not improve on the best, which is what stopped the run
    assert all(v >= es["best"] for v in vals[-2:]) and vals[-2:] != [es["best"]] * 2
    # the model holds the best weights, not the last ones
    model.eval()
    with torch.no_grad():
        assert evaluate(model, val)["qdd_f_nmse"] == pytest.approx(es["best"], rel=1e-12)
    # off by default: the full schedule runs
    h2 = train(
        fresh_model(train_s),
        train_s,
        val,
        config(tmp_path / "off", epochs=12, val_every=4),
        progress=lambda line: None,
    )
    assert h2["epoch"][-1] == 12 and not h2["early_stopping"]["enabled"]


def _cli_train(tmp_path, extra=()):
    out = tmp_path / "m.onnx"
    cmd = [
        sys.executable,
        "-m",
        "ros_lnn.cli",
        "train",
        "--epochs",
        "1000000",
        "--n-train",
        "512",
        "--batch",
        "256",
        "--hidden",
        "8",
        "--threads",
        "1",
        "--log-every",
        "20",
        "--val-every",
        "100000",
        "--checkpoint-dir",
        str(tmp_path / "ck"),
        "--checkpoint-every",
        "20",
        "--exporter",
        "torchscript",
        "--out",
        str(out),
        *extra,
    ]
    env = dict(os.environ, PYTHONPATH=str(REPO), PYTHONUNBUFFERED="1")
    return out, subprocess.Popen(
        cmd,
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        preexec_fn=sigint_as_in_a_terminal,
    )


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_signal_leaves_last_checkpoint_and_no_model(tmp_path, sig):
    from ros_lnn.training.checkpoint import load_checkpoint

    out, proc = _cli_train(tmp_path)
    ck = tmp_path / "ck" / "last.pt"
    try:
        deadline = time.monotonic() + 90
        while not ck.exists() and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.2)
        assert ck.exists(), (
            proc.communicate(timeout=5)[0] if proc.poll() is not None else "no checkpoint in 90 s"
        )
        time.sleep(0.5)
        proc.send_signal(sig)
        printed, _ = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, printed
    assert "interrupted" in printed
    assert not out.exists() and not list(tmp_path.glob(".m.onnx*"))
    assert not [p for p in (tmp_path / "ck").iterdir() if p.name != "last.pt"]
    _, ckpt = load_checkpoint(ck)
    assert ckpt["epoch"] % 20 == 0 and ckpt["epoch"] >= 20
    assert "resume" in ckpt["extra"]


def test_resume_keeps_early_stopping_state(tmp_path, data):
    """Interrupted and resumed with early stopping on: the same stop epoch and the same best weights."""
    import torch

    from ros_lnn.training.trainer import train

    train_s, test_s = data
    val = val_subset(test_s)
    kw = dict(epochs=400, lr=3e-2, val_every=4, log_every=4, checkpoint_every=4, patience=2)
    straight = fresh_model(train_s)
    h = train(straight, train_s, val, config(tmp_path / "a", **kw), progress=lambda line: None)
    stop = h["early_stopping"]["stopped_epoch"]
    assert stop and h["early_stopping"]["best_epoch"] < stop

    cut = h["early_stopping"]["best_epoch"] + 4  # between the best validation and the stop

    def interrupt(line):
        if line.startswith(f"epoch {cut + 2}/"):
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        train(
            fresh_model(train_s),
            train_s,
            val,
            config(tmp_path / "b", **(kw | {"log_every": 1})),
            progress=interrupt,
        )
    resumed = fresh_model(train_s)
    h2 = train(
        resumed,
        train_s,
        val,
        config(tmp_path / "b", resume=str(tmp_path / "b"), **(kw | {"log_every": 1})),
        progress=lambda line: None,
    )
    assert h2["resumed"][0]["epoch"] == cut + 0 and h2["early_stopping"] == h["early_stopping"]
    for k, v in straight.state_dict().items():
        assert torch.equal(v, resumed.state_dict()[k]), k


def test_a_run_killed_by_sigkill_mid_epoch_resumes_from_its_last_checkpoint(tmp_path):
    """SIGKILL gives the run no chance to save: what it leaves is the last checkpoint it wrote whole
    (written atomically: a kill during a save leaves the one before), no model, and a run with
    --resume goes on from that checkpoint's epoch."""
    from ros_lnn.training.checkpoint import load_checkpoint

    out, proc = _cli_train(tmp_path)
    ck = tmp_path / "ck" / "last.pt"
    try:
        deadline = time.monotonic() + 90
        while not ck.exists() and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.2)
        assert ck.exists(), "no checkpoint in 90 s"
        time.sleep(0.7)  # mid-epoch, or mid-save: either leaves a whole last.pt
        proc.send_signal(signal.SIGKILL)
        proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == -signal.SIGKILL
    assert not out.exists()
    _, ckpt = load_checkpoint(ck)
    epoch = ckpt["epoch"]
    assert epoch % 20 == 0 and epoch >= 20
    import threading

    _, resumed = _cli_train(tmp_path, ("--resume", str(tmp_path / "ck")))
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(resumed.stdout or ()), daemon=True)
    reader.start()
    try:
        deadline = time.monotonic() + 120
        while not any(line.startswith("resumed from") for line in lines) and time.monotonic() < deadline:
            time.sleep(0.1)
    finally:
        resumed.send_signal(signal.SIGINT)
        resumed.wait(timeout=120)
        reader.join(timeout=10)
    said = [line for line in lines if line.startswith("resumed from")]
    assert said and f"after epoch {epoch}" in said[0], lines
