"""Trainer on the crane (short real runs): the loss falls, same seed → same weights, checkpoints
round-trip atomically; ``ros-lnn train``/``export`` end to end on a trials file."""

import json

import numpy as np
import pytest

from conftest import requires_torch

pytestmark = requires_torch

torch = pytest.importorskip("torch")

from ros_lnn.errors import ModelError  # noqa: E402
from ros_lnn.models.normalisation import normalisation  # noqa: E402
from ros_lnn.models.servo_lnn import ServoLNN  # noqa: E402
from ros_lnn.physics.crane import Crane  # noqa: E402
from ros_lnn.physics.datasets import paper_crane_trials, paper_split  # noqa: E402
from ros_lnn.training.checkpoint import load_checkpoint, save_checkpoint  # noqa: E402
from ros_lnn.training.data import model_order, reorder  # noqa: E402
from ros_lnn.training.trainer import TrainConfig, evaluate, seed_everything, train  # noqa: E402


@pytest.fixture(scope="module")
def trials():
    return paper_crane_trials()  # cached under $ROS_LNN_CACHE or the temp dir after the first run


@pytest.fixture(scope="module")
def split(trials):
    crane = Crane()
    order = model_order(crane.coordinate_names, crane.free_names, crane.servo_names)
    train_s, test_s = paper_split(trials, n_train_samples=1024, seed=0)
    return reorder(train_s, order), reorder(test_s, order)


def _model(split, seed=0):
    crane = Crane()
    seed_everything(seed)
    m = ServoLNN(crane.free_names, crane.servo_names, coordinate_units=list(crane.coordinate_units))
    m.set_normalisation(*normalisation(split[0]["q"]))
    return m


def test_short_training_reduces_loss_and_test_error(split):
    model = _model(split)
    before = evaluate(model.double(), split[1])
    cfg = TrainConfig(epochs=60, batch=256, lr=3e-3, log_every=10, val_every=60, device="cpu")
    lines = []
    history = train(model, *split, cfg, progress=lines.append)
    assert history["losses"] == ["inv", "fwd", "inv_e", "fwd_e", "power"]
    assert history["loss"][-1] < 0.1 * history["loss"][0], history["loss"]
    after = history["val"][-1]
    assert after["qdd_f_nmse"] < 0.2 * before["qdd_f_nmse"], (before["qdd_f_nmse"], after["qdd_f_nmse"])
    assert after["Q_e_rel_rms"] < 0.5 * before["Q_e_rel_rms"]
    assert any(line.startswith("epoch 60/60") for line in lines)


def test_without_qe_uses_the_estimated_power_loss(split):
    history = train(
        _model(split),
        *split,
        TrainConfig(epochs=2, batch=512, with_qe=False, log_every=1, device="cpu"),
        progress=lambda _: None,
    )
    assert history["losses"] == ["inv", "fwd", "power_est"]
    with pytest.raises(ValueError, match="need measured Q_e"):
        train(
            _model(split),
            *split,
            TrainConfig(epochs=1, with_qe=False, losses=("inv", "power")),
            progress=lambda _: None,
        )


def test_same_seed_same_weights(split):
    def run(seed):
        m = _model(split, seed)
        train(
            m,
            split[0],
            None,
            TrainConfig(epochs=3, batch=256, seed=seed, log_every=3, device="cpu"),
            progress=lambda _: None,
        )
        return m.state_dict()

    a, b, c = run(0), run(0), run(1)
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert any(not torch.equal(a[k], c[k]) for k in a if a[k].is_floating_point() and a[k].numel() > 4)


def test_checkpoint_round_trip(split, tmp_path):
    model = _model(split)
    cfg = TrainConfig(
        epochs=2, batch=512, log_every=1, checkpoint_dir=str(tmp_path), checkpoint_every=1, device="cpu"
    )
    train(model, split[0], None, cfg, progress=lambda _: None)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["last.pt"]
    loaded, ckpt = load_checkpoint(tmp_path / "last.pt")
    assert ckpt["epoch"] == 2 and ckpt["optimizer_state"] is not None
    q = torch.as_tensor(split[1]["q"][:50], dtype=torch.float32)
    assert torch.equal(loaded.terms(q)[0], model.terms(q)[0])
    save_checkpoint(tmp_path / "again.pt", loaded, None, 2, {})
    (tmp_path / "bad.pt").write_bytes(b"not a checkpoint")
    with pytest.raises(ModelError, match=r"bad\.pt"):
        load_checkpoint(tmp_path / "bad.pt")
    with pytest.raises(ModelError, match="not found"):
        load_checkpoint(tmp_path / "missing.pt")


def test_train_and_export_commands_end_to_end(trials, tmp_path):
    from ros_lnn.cli import main
    from ros_lnn.inference.runtime import ServoLnnRuntime
    from ros_lnn.physics.trials import save_trials

    data = tmp_path / "trials.npz"
    save_trials(data, [trials[1], trials[3], trials[2]])
    names = [trials[1].name, trials[3].name, trials[2].name]
    out = tmp_path / "m.onnx"
    rc = main(
        [
            "train",
            "--data",
            str(data),
            "--test-trials",
            names[2],
            "--epochs",
            "3",
            "--batch",
            "512",
            "--n-train",
            "1024",
            "--out",
            str(out),
            "--checkpoint-dir",
            str(tmp_path / "ck"),
            "--log-every",
            "1",
            "--exporter",
            "torchscript",
        ]
    )  # the dynamo exporter is covered in test_export_onnx
    assert rc == 0 and out.is_file()
    rt = ServoLnnRuntime(out, free_joints=["pendulum_joint"], servo_joints=["cart_joint"])
    meta = rt.metadata
    assert meta.system == "crane" and meta.network["diag_activation"] == "softplus"
    assert set(meta.metrics) >= {"qdd_f_nmse", "Q_e_rel_rms", "M_rel_err", "V_rel_err", "E_rel_err"}
    assert list(meta.metrics["qdd_f_nmse_per_trial"]) == [names[2]]
    prov = meta.provenance
    assert prov["split"]["train_trials"] == names[:2] and prov["split"]["test_trials"] == [names[2]]
    assert prov["data"]["kind"] == "trials_file" and len(prov["data"]["sha256"]) == 64
    assert len(prov["data_hash"]) == 64 and prov["versions"]["torch"] and prov["date"]
    assert "--epochs 3" in prov["command"] and f"--test-trials {names[2]}" in prov["command"]
    # export from the final checkpoint: same metadata, same numbers
    out2 = tmp_path / "again.onnx"
    assert (
        main(["export", str(tmp_path / "ck" / "final.pt"), "--out", str(out2), "--exporter", "torchscript"])
        == 0
    )
    rt2 = ServoLnnRuntime(out2)
    assert json.loads(rt2.metadata.to_json())["metrics"] == json.loads(meta.to_json())["metrics"]
    q, qd = np.array([[0.3, 0.1]]), np.array([[0.5, -0.2]])
    a, b = rt.evaluate(q, qd, [[0.4]], [[0.0]]), rt2.evaluate(q, qd, [[0.4]], [[0.0]])
    np.testing.assert_allclose(a["Q_e"], b["Q_e"], rtol=1e-6)


def test_fused_adam_takes_the_steps_of_plain_adam():
    """The trainer's optimiser is torch's fused Adam where available: same algorithm as the default one."""
    from ros_lnn.training.trainer import make_adam

    torch.manual_seed(0)
    w0 = torch.randn(64, 3)
    runs = {}
    for name, make in (
        ("fused", lambda p: make_adam(p, 1e-2, 1e-5)),
        ("plain", lambda p: torch.optim.Adam(p, lr=1e-2, weight_decay=1e-5)),
    ):
        w = torch.nn.Parameter(w0.clone())
        opt = make([w])
        for i in range(50):
            opt.zero_grad()
            ((w - 0.1 * i) ** 2).sum().backward()
            opt.step()
        runs[name] = (w.detach(), opt)
    assert runs["fused"][1].defaults.get("fused") is True
    assert (runs["fused"][0] - w0).abs().max() > 0.1
    torch.testing.assert_close(runs["fused"][0], runs["plain"][0], rtol=1e-5, atol=1e-6)
