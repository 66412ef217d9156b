"""DDP through torchrun: 2 CPU processes (gloo) train a few epochs; both ranks end with the same
weights, which equal a single-process run on the whole batch (DDP averages the equal shards'
gradients) to round-off; only rank 0 writes the model, checkpoints and report."""

import json
import os
import runpy
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from conftest import requires_torch

pytestmark = requires_torch
REPO = Path(__file__).resolve().parents[2]

SCRIPT = textwrap.dedent("""
    import json, os, sys
    import torch
    from ros_lnn.models.servo_lnn import ServoLNN
    from ros_lnn.physics.crane import Crane
    from ros_lnn.physics.datasets import paper_crane_trials, paper_split
    from ros_lnn.models.normalisation import normalisation
    from ros_lnn.training.data import model_order, reorder
    from ros_lnn.training.trainer import TrainConfig, train

    out = sys.argv[1]
    trials = paper_crane_trials(Crane())
    tr, _ = paper_split(trials, n_train_samples=512, seed=0)
    tr = reorder(tr, model_order(trials[0].coordinate_names, trials[0].free_joints, trials[0].servo_joints))
    # different init per rank: DDP must broadcast rank 0's
    torch.manual_seed(int(os.environ.get("RANK", "0")))
    model = ServoLNN(["pendulum_joint"], ["cart_joint"], hidden=[8], coordinate_units=["rad", "m"])
    model.set_normalisation(*normalisation(tr["q"]))
    cfg = TrainConfig(epochs=6, batch=128, lr=1e-3, seed=1, device="cpu", dtype="float64", log_every=3,
                      val_every=100, threads=1, checkpoint_dir=os.path.join(out, "ck"), checkpoint_every=3)
    h = train(model, tr, None, cfg, progress=print)
    rank = h["run"]["rank"]
    torch.save(model.state_dict(), os.path.join(out, f"rank{rank}.pt"))
    with open(os.path.join(out, f"rank{rank}.json"), "w") as fh:
        json.dump({"run": h["run"], "loss": h["loss"]}, fh)
""")


def _env():
    env = dict(os.environ, PYTHONPATH=str(REPO), OMP_NUM_THREADS="1")
    for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"):
        env.pop(k, None)
    return env


def test_two_process_gloo_equals_single_process(tmp_path, monkeypatch):
    import torch

    script = tmp_path / "ddp_train.py"
    script.write_text(SCRIPT)
    ddp, single = tmp_path / "ddp", tmp_path / "single"
    ddp.mkdir(), single.mkdir()
    res = subprocess.run(
        [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--nproc_per_node",
            "2",
            "--master_port",
            "0",
            "--rdzv-backend",
            "c10d",
            "--rdzv-endpoint",
            "localhost:0",
            str(script),
            str(ddp),
        ],
        env=_env(),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    monkeypatch.setattr(sys, "argv", [str(script), str(single)])  # the same script in one process, here
    for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK"):
        monkeypatch.delenv(k, raising=False)
    runpy.run_path(str(script), run_name="__main__")

    r0, r1, s = (
        torch.load(p, weights_only=True) for p in (ddp / "rank0.pt", ddp / "rank1.pt", single / "rank0.pt")
    )
    info0, info1 = (json.loads((ddp / f"rank{r}.json").read_text()) for r in (0, 1))
    assert info0["run"]["world_size"] == info1["run"]["world_size"] == 2
    assert info0["run"]["backend"] == "gloo"
    for k in r0:
        assert torch.equal(r0[k], r1[k]), k  # the ranks hold identical weights
    # each rank saw half of every batch; averaged gradients equal the whole batch's: same as 1 process
    worst = max(
        float((r0[k] - s[k]).abs().max() / (s[k].abs().max() + 1e-300)) for k in s if s[k].is_floating_point()
    )
    assert worst < 1e-9, worst
    assert info0["loss"] == pytest.approx(info1["loss"], rel=1e-12)  # logged losses are the all-reduced means
    ref = json.loads((single / "rank0.json").read_text())["loss"]
    assert info0["loss"] == pytest.approx(ref, rel=1e-9)
    # only rank 0 wrote checkpoints (one last.pt, no stray temporary files of rank 1)
    assert sorted(p.name for p in (ddp / "ck").iterdir()) == ["last.pt"]
    ck = torch.load(ddp / "ck" / "last.pt", weights_only=False)
    assert ck["epoch"] == 6 and ck["extra"]["resume"]["world_size"] == 2
    assert "epoch 6/6" in res.stdout and res.stdout.count("epoch 6/6") == 1  # progress from rank 0 only


def _small(seed=0):
    import torch

    from ros_lnn.models.normalisation import normalisation
    from ros_lnn.models.servo_lnn import ServoLNN
    from ros_lnn.physics.crane import Crane
    from ros_lnn.physics.datasets import paper_crane_trials, paper_split
    from ros_lnn.training.data import model_order, reorder

    trials = paper_crane_trials(Crane())
    tr, _ = paper_split(trials, n_train_samples=256, seed=0)
    tr = reorder(tr, model_order(trials[0].coordinate_names, trials[0].free_joints, trials[0].servo_joints))
    torch.manual_seed(seed)
    model = ServoLNN(["pendulum_joint"], ["cart_joint"], hidden=[8], coordinate_units=["rad", "m"])
    model.set_normalisation(*normalisation(tr["q"]))
    return model, tr


def _cfg(**kw):
    from ros_lnn.training.trainer import TrainConfig

    return TrainConfig(
        **(
            dict(
                epochs=4,
                batch=128,
                lr=1e-3,
                device="cpu",
                dtype="float64",
                log_every=1,
                val_every=100,
                threads=1,
            )
            | kw
        )
    )


def test_compile_failure_falls_back_to_eager_with_warning():
    import torch

    from ros_lnn.training.trainer import train

    def broken_backend(gm, example_inputs):
        raise RuntimeError("no compiler on this machine")

    eager, tr = _small()
    h_eager = train(eager, tr, None, _cfg(), progress=lambda line: None)
    model, _ = _small()
    lines = []
    with pytest.warns(RuntimeWarning, match="torch.compile failed.*no compiler on this machine"):
        h = train(model, tr, None, _cfg(compile=broken_backend), progress=lines.append)
    assert h["run"]["compile"] == "eager (compile failed)"
    assert any(line.startswith("warning: torch.compile failed") for line in lines)
    assert h["loss"] == h_eager["loss"]  # the fallback is the eager step, bitwise
    for k, v in eager.state_dict().items():
        assert torch.equal(v, model.state_dict()[k])


def test_compiled_loss_trains_like_eager():
    """Through dynamo + AOTAutograd (the aot_eager backend: the compile pipeline without inductor's C++
    build, which takes minutes on this machine); the losses agree with eager to round-off."""
    from ros_lnn.training.trainer import train

    eager, tr = _small()
    h_eager = train(eager, tr, None, _cfg(), progress=lambda line: None)
    model, _ = _small()
    h = train(model, tr, None, _cfg(compile="aot_eager"), progress=lambda line: None)
    assert h["run"]["compile"] == "compiled"
    assert h["loss"] == pytest.approx(h_eager["loss"], rel=1e-12)


def test_torchrun_cli_only_rank0_writes(tmp_path):
    """``torchrun --nproc_per_node 2 -m ros_lnn.cli train``: finishes; one model, one report, one
    checkpoint folder; the provenance records the two processes."""
    from ros_lnn.inference.runtime import ServoLnnRuntime

    out = tmp_path / "ddp.onnx"
    res = subprocess.run(
        [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--nproc_per_node",
            "2",
            "--rdzv-backend",
            "c10d",
            "--rdzv-endpoint",
            "localhost:0",
            "-m",
            "ros_lnn.cli",
            "train",
            "--epochs",
            "4",
            "--n-train",
            "256",
            "--batch",
            "128",
            "--hidden",
            "8",
            "--log-every",
            "2",
            "--val-every",
            "2",
            "--exporter",
            "torchscript",
            "--out",
            str(out),
        ],
        env=_env(),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ddp.onnx", "ddp_checkpoints", "ddp_report"]
    assert sorted(p.name for p in (tmp_path / "ddp_checkpoints").iterdir()) == ["final.pt", "last.pt"]
    assert res.stdout.count("wrote ") == 1 and res.stdout.count("epoch 4/4") == 1
    run = ServoLnnRuntime(out).metadata.provenance["run"]
    assert run["world_size"] == 2 and run["rank"] == 0 and run["backend"] == "gloo"
