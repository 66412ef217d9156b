"""``ros-lnn bench ddp``: data-parallel training through torchrun against one process, side by side.

The same ``ros-lnn train`` run — the crane ServoLNN of the paper (4 096 samples, batch 2 048, one
intra-op thread per process) — once in one process and once under ``torchrun --nproc_per_node N``
(gloo on the CPU, NCCL with one GPU per rank), each writing its final checkpoint. Printed: samples·epochs
per second of each training loop (the trainer's own wall time, start-up and data loading excluded), the
speed-up, and how far apart the two final models are (largest weight difference over the largest
weight): DDP averages the gradients of equal shards, so the runs agree to round-off.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SAMPLES, BATCH = 4096, 2048


def _train_args(epochs: int, out: Path, device: str) -> list[str]:
    return [
        "train",
        "--n-train",
        str(SAMPLES),
        "--batch",
        str(BATCH),
        "--epochs",
        str(epochs),
        "--threads",
        "1",
        "--device",
        device,
        "--log-every",
        str(max(1, epochs // 4)),
        "--no-report",
        "--out",
        str(out),
    ]


def _env() -> dict:
    env = dict(os.environ, OMP_NUM_THREADS="1")
    for key in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"):
        env.pop(key, None)
    return env


def _run(command: list[str], what: str, cwd: Path) -> float:
    start = time.perf_counter()
    done = subprocess.run(command, env=_env(), cwd=cwd, capture_output=True, text=True)
    if done.returncode != 0:
        from ros_lnn.errors import RosLnnError

        tail = (done.stdout + done.stderr).strip().splitlines()[-15:]
        raise RosLnnError(f"bench ddp: the {what} run failed (exit {done.returncode}):\n" + "\n".join(tail))
    return time.perf_counter() - start


def _checkpoint(path: Path) -> tuple[dict, dict]:
    import torch

    state = torch.load(path, map_location="cpu", weights_only=False)
    return state["model_state"], state["history"]


def ddp_scaling(nproc: int = 2, epochs: int = 200, device: str = "cpu", folder=None) -> dict:
    """One process against ``nproc`` torchrun ranks on the same ``ros-lnn train`` run."""
    import torch

    work = Path(folder or tempfile.mkdtemp(prefix="ros_lnn_ddp_"))
    work.mkdir(parents=True, exist_ok=True)
    single, ddp = work / "single.pt", work / f"ddp{nproc}.pt"
    cli = [sys.executable, "-m", "ros_lnn.cli"]
    wall_single = _run(cli + _train_args(epochs, single, device), "single-process", work)
    torchrun = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", str(nproc)]
    torchrun += ["--rdzv-backend", "c10d", "--rdzv-endpoint", "localhost:0", "-m", "ros_lnn.cli"]
    wall_ddp = _run(torchrun + _train_args(epochs, ddp, device), f"{nproc}-process", work)
    (w1, h1), (w2, h2) = _checkpoint(single), _checkpoint(ddp)
    diff = max(float((w1[k].double() - w2[k].double()).abs().max()) for k in w1 if w1[k].is_floating_point())
    scale = max(float(w1[k].double().abs().max()) for k in w1 if w1[k].is_floating_point())
    rate = lambda h: SAMPLES * epochs / float(h["seconds"])  # noqa: E731
    out = {
        "nproc": nproc,
        "epochs": epochs,
        "samples": SAMPLES,
        "batch": BATCH,
        "device": device,
        "torch": torch.__version__,
        "cpu_count": os.cpu_count(),
        "single_loop_s": float(h1["seconds"]),
        "ddp_loop_s": float(h2["seconds"]),
        "single_wall_s": wall_single,
        "ddp_wall_s": wall_ddp,
        "single_rate": rate(h1),
        "ddp_rate": rate(h2),
        "speedup": rate(h2) / rate(h1),
        "weights_max_rel_diff": diff / max(scale, 1e-300),
        "ddp_run": h2.get("run", {}),
        "folder": str(work),
    }
    return out


def bench_ddp(args) -> dict:
    quick = bool(getattr(args, "quick", False))
    nproc = int(getattr(args, "nproc", None) or 2)
    epochs = int(getattr(args, "epochs", None) or (40 if quick else 200))
    print(
        f"ros-lnn train (crane ServoLNN, {SAMPLES} samples, batch {BATCH}, {epochs} epochs, one thread per "
        f"process): one process, then torchrun --nproc_per_node {nproc} (gloo, CPU) ...",
        flush=True,
    )
    out = ddp_scaling(nproc, epochs, folder=getattr(args, "output", None))
    print(
        f"  one process: training loop {out['single_loop_s']:.1f} s ({out['single_wall_s']:.1f} s with "
        f"start-up); {nproc} processes: {out['ddp_loop_s']:.1f} s ({out['ddp_wall_s']:.1f} s)"
    )
    print(
        f"DDP scaling ({nproc} CPU processes, gloo; {os.cpu_count()} cores): one process "
        f"{out['single_rate']:.0f} samples*epochs/s, {nproc} processes {out['ddp_rate']:.0f}, "
        f"speed-up = {out['speedup']:.2f}; final weights max relative difference "
        f"{out['weights_max_rel_diff']:.1e}"
    )
    return out


__all__ = ["bench_ddp", "ddp_scaling"]
