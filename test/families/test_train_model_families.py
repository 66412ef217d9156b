"""Every family trains through ``ros-lnn train --model``, saves one checkpoint format, loads back, and
its ONNX export evaluated by ONNX Runtime matches the torch model (autograd Hessians) it came from.

Tolerances: float64 graphs 1e-9 of max |q̈|; float32 graphs 1e-4 of max |q̈| (float32 rounding of
second derivatives and of the elimination; measured 1e-7 .. 2e-5 on random nets)."""

import json

import numpy as np
import pytest

from conftest import requires_torch

pytestmark = requires_torch
torch = pytest.importorskip("torch")
ort = pytest.importorskip("onnxruntime")

from ros_lnn.cli import main  # noqa: E402
from ros_lnn.families import build_model, model_config  # noqa: E402
from ros_lnn.inference.metadata import METADATA_KEY, ModelMetadata  # noqa: E402
from ros_lnn.models.family_export import AccelerationGraph, pivoted_solve  # noqa: E402
from ros_lnn.training.checkpoint import load_checkpoint  # noqa: E402

SMALL = ["--trajectories", "3", "--duration", "1", "--epochs", "2", "--hidden", "8"]


def onnx_qdd(path, q, qd, dtype=np.float32):
    sess = ort.InferenceSession(str(path))
    assert [i.name for i in sess.get_inputs()] == ["q", "qd"] and [o.name for o in sess.get_outputs()] == [
        "qdd"
    ]
    return sess.run(None, {"q": q.astype(dtype), "qd": qd.astype(dtype)})[0]


def metadata(path):
    import onnx

    props = {p.key: p.value for p in onnx.load(str(path)).metadata_props}
    return ModelMetadata.from_json(props[METADATA_KEY])


def states(n, count=40, seed=1):
    rng = np.random.default_rng(seed)
    return rng.uniform(-1, 1, (count, n)), rng.normal(size=(count, n))


@pytest.mark.parametrize(
    "family,system,names",
    [
        ("lnn", "chain", ["phi_1", "phi_2"]),
        ("lnn_nh", "rolling_disk", ["x", "y", "theta", "phi"]),
        ("tlnn", "chain", ["phi_1", "phi_2"]),
        ("node", "chain", ["phi_1", "phi_2"]),
    ],
)
def test_family_trains_saves_loads_and_exports(tmp_path, capsys, family, system, names):
    out = tmp_path / f"{family}.onnx"
    assert main(["train", "--model", family, "--system", system, *SMALL, "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert f"{family} epoch 2/2" in printed and "test: q̈ MSE" in printed and f"wrote {out}" in printed

    model, ckpt = load_checkpoint(tmp_path / f"{family}_checkpoints" / "final.pt")
    assert model.family == family and ckpt["model_config"]["family"] == family
    assert set(ckpt) >= {"model_config", "model_state", "history", "command", "provenance"}
    assert f"--model {family}" in ckpt["command"] and "--epochs 2" in ckpt["command"]
    assert ckpt["provenance"]["coordinates"]["names"] == names

    meta = metadata(out)
    assert meta.family == family and meta.free_joints == names and meta.servo_joints == []
    assert meta.system == system and meta.network["graph_inputs"] == ["q", "qd"]
    assert meta.metrics["qdd_mse"] == pytest.approx(
        json.loads(ckpt["extra"]["metadata"])["metrics"]["qdd_mse"]
    )

    q, qd = states(len(names))
    ref = model.double()(torch.as_tensor(q), torch.as_tensor(qd)).detach().numpy()
    got = onnx_qdd(out, q, qd)
    assert np.all(np.isfinite(ref))
    assert np.abs(got - ref).max() <= 1e-4 * np.abs(ref).max()

    from ros_lnn.errors import ModelError
    from ros_lnn.inference.runtime import ServoLnnRuntime

    with pytest.raises(ModelError, match=f"a '{family}' model .* not a ServoLNN"):
        ServoLnnRuntime(out)  # the estimator refuses it in one line, naming the family


def test_checkpoint_out_and_export_command_float64(tmp_path, capsys):
    """``--out x.pt`` saves the checkpoint only; ``ros-lnn export`` turns it into a float64 graph."""
    ckpt_path, onnx_path = tmp_path / "disk.pt", tmp_path / "disk.onnx"
    assert main(["train", "--model", "lnn_nh", "--system", "particle", *SMALL, "--out", str(ckpt_path)]) == 0
    assert ckpt_path.is_file() and not list(tmp_path.glob("*.onnx"))
    assert main(["export", str(ckpt_path), "--out", str(onnx_path), "--dtype", "float64"]) == 0
    model, _ = load_checkpoint(ckpt_path)
    q, qd = states(3)
    ref = model.double()(torch.as_tensor(q), torch.as_tensor(qd)).detach().numpy()
    got = onnx_qdd(onnx_path, q, qd, np.float64)
    assert np.abs(got - ref).max() <= 1e-9 * np.abs(ref).max()
    assert metadata(onnx_path).free_joints == ["x", "y", "z"]
    assert main(["export", str(ckpt_path), "--out", str(onnx_path), "--exporter", "torchscript"]) == 2
    assert "dynamo" in capsys.readouterr().err


def test_delan_on_a_chain_runs_in_the_servo_lnn_runtime(tmp_path):
    """DeLaN = ServoLNN without servo coordinates: same trainer, same metadata contract, same runtime."""
    from ros_lnn.inference.runtime import ServoLnnRuntime

    out = tmp_path / "delan.onnx"
    assert (
        main(
            [
                "train",
                "--model",
                "delan",
                "--system",
                "chain",
                *SMALL,
                "--exporter",
                "torchscript",
                "--no-report",
                "--out",
                str(out),
            ]
        )
        == 0
    )
    rt = ServoLnnRuntime(out)
    assert rt.metadata.family == "servo_lnn" and rt.metadata.servo_joints == []
    assert rt.metadata.network["epsilon"] == 1e-3 and rt.metadata.network["hidden"] == [8]
    assert rt.metadata.provenance["training"]["losses"] == ["inv", "fwd"]
    model, ckpt = load_checkpoint(tmp_path / "delan_checkpoints" / "final.pt")
    assert ckpt["model_config"]["family"] == "servo_lnn" and model.n_e == 0
    q, qd = states(2)
    Q_f = np.zeros((len(q), 2))
    ref = (
        model.double()(torch.as_tensor(q), torch.as_tensor(qd), None, torch.as_tensor(Q_f))["qdd"]
        .detach()
        .numpy()
    )
    got = rt.evaluate(q, qd, np.zeros((len(q), 0)), Q_f)["qdd"]
    assert np.abs(got - ref).max() <= 1e-4 * np.abs(ref).max()


def test_delan_on_the_character_data(tmp_path):
    from ros_lnn.physics.delan_data import default_data_path

    if not default_data_path().is_file():
        pytest.skip("DeLaN character data not present")
    out = tmp_path / "delan.pt"
    assert (
        main(
            [
                "train",
                "--model",
                "delan",
                "--epochs",
                "1",
                "--hidden",
                "8",
                "--n-train",
                "256",
                "--no-report",
                "--out",
                str(out),
            ]
        )
        == 0
    )
    _, ckpt = load_checkpoint(out)
    split = ckpt["provenance"]["split"]
    assert (
        split["test_trials"] == ["e", "q", "v"]
        and len(split["train_trials"]) == 17
        and split["n_train"] == 256
    )
    assert (
        ckpt["provenance"]["data"]["kind"] == "delan_character"
        and len(ckpt["provenance"]["data"]["sha256"]) == 64
    )


@pytest.mark.parametrize("family", ["lnn", "lnn_nh", "tlnn"])
def test_export_graph_has_the_autograd_derivatives(family):
    """The jets of the export graph equal the model's autograd Hessians in float64 (no export needed)."""
    from ros_lnn.models.lnn import LNN, for_system
    from ros_lnn.models.tlnn import TLNN, serial_chain_topology
    from ros_lnn.physics.nonholonomic import rolling_disk

    torch.manual_seed(0)
    model = {
        "lnn": lambda: LNN(3, hidden=(16, 16), activation="tanh", angle_coordinates=[1]),
        "lnn_nh": lambda: for_system(rolling_disk(), True, hidden=(16, 16)),
        "tlnn": lambda: TLNN(serial_chain_topology(3), hidden=(16, 16)),
    }[family]().double()
    model.qd_scale.copy_(torch.linspace(0.5, 2.0, model.n))
    q, qd = (torch.as_tensor(x) for x in states(model.n, 32))
    ref = model(q, qd).detach()
    with torch.no_grad():
        got = AccelerationGraph(model)(q, qd)
    assert torch.allclose(got, ref, rtol=1e-10, atol=1e-10 * float(ref.abs().max()))


def test_pivoted_solve_needs_and_does_pivoting():
    A = torch.tensor([[[0.0, 2.0, 1.0], [1.0, 1.0, 0.0], [3.0, 0.0, 1.0]]], dtype=torch.float64)  # A[0,0] = 0
    B = torch.tensor([[[1.0, 0.0], [2.0, 1.0], [0.5, -1.0]]], dtype=torch.float64)
    torch.testing.assert_close(pivoted_solve(A, B), torch.linalg.solve(A, B), rtol=1e-13, atol=1e-13)
    gen = torch.Generator().manual_seed(0)
    A = torch.randn(64, 4, 4, generator=gen, dtype=torch.float64)
    B = torch.randn(64, 4, 3, generator=gen, dtype=torch.float64)
    torch.testing.assert_close(pivoted_solve(A, B), torch.linalg.solve(A, B), rtol=1e-9, atol=1e-9)


def test_registry_rebuilds_every_family_and_reads_trainer_checkpoints(tmp_path):
    from ros_lnn.models.lnn import LNN
    from ros_lnn.models.node_baseline import NeuralODE
    from ros_lnn.models.servo_lnn import ServoLNN
    from ros_lnn.models.tlnn import TLNN, serial_chain_topology

    for model in (
        LNN(2, hidden=(4,)),
        TLNN(serial_chain_topology(2), hidden=(4,)),
        NeuralODE(2, hidden=(4,)),
        ServoLNN(["a"], ["b"], hidden=(4,)),
    ):
        assert model_config(build_model(model_config(model))) == model_config(model)
    servo = ServoLNN(["pendulum_joint"], ["cart_joint"], hidden=(4,))
    # the layout the ServoLNN trainer wrote before every family shared one checkpoint: untagged config
    torch.save(
        {
            "model_config": servo.config(),
            "model_state": servo.state_dict(),
            "optimizer_state": None,
            "epoch": 3,
            "history": {"loss": [1.0]},
            "extra": {},
        },
        tmp_path / "last.pt",
    )
    loaded, ckpt = load_checkpoint(tmp_path / "last.pt")
    assert isinstance(loaded, ServoLNN) and loaded.servo_joints == ["cart_joint"] and ckpt["epoch"] == 3
    for key, value in servo.state_dict().items():
        assert torch.equal(loaded.state_dict()[key], value)


def test_delan_refuses_a_file_that_is_not_the_character_data(tmp_path, capsys):
    wrong = tmp_path / "trials.npz"
    np.savez(wrong, q=np.zeros(3))
    assert main(["train", "--model", "delan", "--data", str(wrong), "--epochs", "1"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "trials.npz" in err and "character" in err
