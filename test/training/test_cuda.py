"""Training on a GPU (skipped where CUDA is not available; `scripts/cuda_check.sh` runs them on a lent
GPU): the trainer on cuda against the same run on the CPU, the analytic step against autograd on cuda,
and a cuda-trained model exported to ONNX and run by ONNX Runtime on the CPU."""

from __future__ import annotations

import argparse

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA is not available here")


def _delan_data(n=256, joints=3, seed=0):
    from ros_lnn_lab.studies.delan_reference import arm_data

    return arm_data(joints, n, seed=seed)


def _train(device, data, *, epochs=20, dtype="float64"):
    from ros_lnn.models.servo_lnn import ServoLNN
    from ros_lnn.training.trainer import TrainConfig, seed_everything
    from ros_lnn.training.trainer import train as run_training

    joints = [f"joint_{i + 1}" for i in range(np.shape(data["q"])[1])]
    seed_everything(0)
    model = ServoLNN(joints, [], hidden=(32, 32), activation="softplus", diag_activation="softplus")
    cfg = TrainConfig(
        epochs=epochs,
        batch=len(data["q"]),  # one full batch: the permutation (drawn per device) cannot matter
        lr=1e-3,
        device=device,
        dtype=dtype,
        with_qe=False,
        log_every=epochs,
        val_every=epochs + 1,
    )
    history = run_training(
        model, {k: data[k] for k in ("q", "qd", "qdd", "Q")}, None, cfg, progress=lambda line: None
    )
    return model, history


def test_training_on_cuda_gives_the_cpu_run():
    train, test = _delan_data()
    cpu, h_cpu = _train("cpu", train)
    gpu, h_gpu = _train("cuda", train)
    assert h_gpu["device"].startswith("cuda") and h_cpu["device"] == "cpu"
    assert h_gpu["loss"][-1] == pytest.approx(h_cpu["loss"][-1], rel=1e-6)
    t = {k: torch.as_tensor(test[k], dtype=torch.float64) for k in ("q", "qd", "qdd")}
    with torch.no_grad():
        a = cpu.inverse(t["q"], t["qd"], t["qdd"])["Q"]
        b = gpu.to("cpu").inverse(t["q"], t["qd"], t["qdd"])["Q"]
    np.testing.assert_allclose(b.numpy(), a.numpy(), rtol=1e-6, atol=1e-8)


def test_the_analytic_step_equals_autograd_on_cuda():
    from ros_lnn_lab.bench.train import paper_data, step_rates

    train, free, servo, norm = paper_data()
    r = step_rates(train, free, servo, norm, torch.device("cuda"), steps=3, rounds=2)
    assert r["loss_rel_diff"] < 1e-5 and r["grad_rel_diff"] < 1e-4


def test_the_bench_runs_on_cuda():
    from ros_lnn_lab.bench.train import bench_train

    res = bench_train(
        argparse.Namespace(quick=True, scale_samples=20_000), steps=2, rounds=2, schedule_epochs=4
    )
    assert res["device"].startswith("cuda") and res["schedule"]["epochs_run"] == 4
    rows = res["scale"]["rows"]
    assert not any(r["extrapolated"] for r in rows) and all(r["samples_run"] == 20_000 for r in rows)


def test_a_cuda_trained_model_runs_in_onnx_runtime_as_in_torch(tmp_path):
    from ros_lnn.inference.runtime import ServoLnnRuntime
    from ros_lnn.models.export import default_metadata, export_onnx

    train, test = _delan_data()
    model, _ = _train("cuda", train, epochs=10, dtype="float32")
    model = model.to(device="cpu", dtype=torch.float64)
    path = export_onnx(model, tmp_path / "delan.onnx", default_metadata(model), dtype="float64")
    rt = ServoLnnRuntime(path)
    got = rt.inverse(test["q"], test["qd"], test["qdd"])["Q"]
    t = {k: torch.as_tensor(test[k], dtype=torch.float64) for k in ("q", "qd", "qdd")}
    with torch.no_grad():
        want = model.inverse(t["q"], t["qd"], t["qdd"])["Q"].numpy()
    np.testing.assert_allclose(got, want, rtol=1e-8, atol=1e-8 * np.abs(want).max())
