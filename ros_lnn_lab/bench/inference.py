"""``ros-lnn bench inference``: per-sample latency with all outputs, one thread, in one run:

1. the ONNX runtime (``ros_lnn.inference``) on the exported graph,
2. the same weights in torch with the analytic-derivative graph,
3. the same weights in torch with autograd for ``∂M/∂q``, ``∂V/∂q`` (the paper's / DeLaN's way),

plus batched throughput at batch 1 024. The timed network has the paper's crane architecture
(2 × 64 × [1, 1, 2], softplus); the weights do not change the cost. The shipped model is timed too.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from ros_lnn.timing import machine_description, summary_us, time_calls

BATCH = 1024


def _inputs(n_samples: int, n_f: int, n_e: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    n = n_f + n_e
    return (
        rng.uniform(-1, 1, (n_samples, n)),
        rng.uniform(-1, 1, (n_samples, n)),
        rng.uniform(-1, 1, (n_samples, n_e)),
        rng.uniform(-0.1, 0.1, (n_samples, n_f)),
    )


def _cycle(fn, arrays):
    """A zero-argument callable that evaluates ``fn`` on the next sample each time."""
    state = {"i": 0}
    count = len(arrays[0])

    def call():
        i = state["i"] = (state["i"] + 1) % count
        fn(*(a[i] for a in arrays))

    return call


def bench_inference(args) -> dict:
    import torch

    from ros_lnn.inference.runtime import ServoLnnRuntime, default_model_path
    from ros_lnn.models.autograd_reference import AutogradServoLNN
    from ros_lnn.models.export import export_onnx
    from ros_lnn.models.servo_lnn import ServoLNN

    torch.set_num_threads(1)
    torch.manual_seed(0)
    quick = getattr(args, "quick", False)
    n_single = 3000 if quick else 20000
    n_autograd = 300 if quick else 2000

    model = ServoLNN(
        ["pendulum_joint"], ["cart_joint"], hidden=(64,), activation="softplus", coordinate_units=["rad", "m"]
    ).eval()
    autograd_model = AutogradServoLNN.from_model(model)
    q, qd, qdd_e, Q_f = _inputs(1000, model.n_f, model.n_e)
    results: dict[str, Any] = {
        "machine": machine_description(),
        "load_average_before": os.getloadavg()[0],
        "threads": 1,
        "network": "2x64x[1,1,2] softplus",
    }

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "bench.onnx"
        export_onnx(model, path)
        rt = ServoLnnRuntime(path, threads=1)
        results["onnx_single"] = summary_us(
            time_calls(_cycle(rt.evaluate, (q, qd, qdd_e, Q_f)), n_single, 200)
        )

        tq = [torch.as_tensor(a, dtype=torch.float32).unsqueeze(1) for a in (q, qd, qdd_e, Q_f)]
        with torch.no_grad():
            results["torch_analytic_single"] = summary_us(time_calls(_cycle(model, tq), n_single // 2, 50))
        results["torch_autograd_single"] = summary_us(time_calls(_cycle(autograd_model, tq), n_autograd, 20))

        big = [np.concatenate([a, a])[:BATCH] for a in (q, qd, qdd_e, Q_f)]
        t = time_calls(lambda: rt.evaluate(*big), 20 if quick else 100, 5)
        results["onnx_batch"] = {"batch": BATCH, "samples_per_s": BATCH / float(np.median(t))}
        tb = [torch.as_tensor(a, dtype=torch.float32) for a in big]
        with torch.no_grad():
            t = time_calls(lambda: model(*tb), 20 if quick else 100, 5)
        results["torch_analytic_batch"] = {"batch": BATCH, "samples_per_s": BATCH / float(np.median(t))}

    model_path = getattr(args, "model", None)
    try:
        shipped = ServoLnnRuntime(model_path or default_model_path(), threads=1)
    except Exception as exc:  # noqa: BLE001 - the shipped model is optional for this benchmark
        results["shipped_model"] = f"not timed: {exc}"
    else:
        qs = _inputs(1000, shipped.n_f, shipped.n_e)
        results["shipped_model"] = {
            "path": shipped.path.name,
            **summary_us(time_calls(_cycle(shipped.evaluate, qs), n_single, 200)),
        }

    results["speedup_onnx_vs_autograd"] = (
        results["torch_autograd_single"]["median_us"] / results["onnx_single"]["median_us"]
    )
    results["speedup_onnx_vs_torch_analytic"] = (
        results["torch_analytic_single"]["median_us"] / results["onnx_single"]["median_us"]
    )
    results["load_average_after"] = os.getloadavg()[0]
    _print(results)
    return results


def _print(r: dict) -> None:
    print(
        f"machine: {r['machine']} (load average {r['load_average_before']:.2f} before, "
        f"{r['load_average_after']:.2f} after); 1 thread; network {r['network']}; all outputs per call"
    )
    print(f"{'path':<34} {'median µs':>10} {'p99 µs':>10}")
    for key, label in (
        ("onnx_single", "ONNX Runtime (ros_lnn.inference)"),
        ("torch_analytic_single", "torch, analytic derivatives"),
        ("torch_autograd_single", "torch, autograd derivatives"),
    ):
        print(f"{label:<34} {r[key]['median_us']:>10.1f} {r[key]['p99_us']:>10.1f}")
    if isinstance(r.get("shipped_model"), dict):
        s = r["shipped_model"]
        print(f"{'shipped ' + s['path']:<34} {s['median_us']:>10.1f} {s['p99_us']:>10.1f}")
    print(
        f"ONNX vs autograd: {r['speedup_onnx_vs_autograd']:.0f}x faster; "
        f"vs torch analytic: {r['speedup_onnx_vs_torch_analytic']:.0f}x"
    )
    print(
        f"batched (batch {BATCH}): ONNX {r['onnx_batch']['samples_per_s']:,.0f} samples/s, "
        f"torch analytic {r['torch_analytic_batch']['samples_per_s']:,.0f} samples/s"
    )
