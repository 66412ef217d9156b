"""``ros-lnn bench train`` on a tiny budget: the analytic and autograd implementations compute the
same loss and gradient on the same weights, the analytic step is the faster one, and the paper
schedule figure is the trainer's measured rate scaled to 10 000 epochs."""

import argparse

import pytest

from conftest import requires_torch

pytestmark = requires_torch


@pytest.fixture
def one_thread():
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)  # two cores shared with other work: avoid oversubscription
    yield
    torch.set_num_threads(before)


def test_bench_train_small(one_thread, capsys):
    import torch

    from ros_lnn_lab.bench.train import PAPER, bench_train

    res = bench_train(argparse.Namespace(quick=True), steps=3, rounds=3, schedule_epochs=6)
    printed = capsys.readouterr().out
    step, sched = res["step"], res["schedule"]
    device = "cuda" if torch.cuda.is_available() else "cpu"  # a GPU machine benches its GPU
    assert res["device"] == device and f"device: {device}" in printed
    assert device == "cuda" or res["threads"] == 1
    assert step["batch"] == 2048 and step["dtype"] == "float32"
    # same weights, same batch: the same loss and gradient (float32 round-off)
    assert step["loss_rel_diff"] < 1e-5 and step["grad_rel_diff"] < 1e-4
    assert step["speedup"] == pytest.approx(step["analytic_steps_per_s"] / step["autograd_steps_per_s"])
    assert step["speedup"] > 1.0, step  # autograd's extra create_graph passes cost more than the closed forms
    assert [row["n"] for row in res["sizes"]] == [3] and res["sizes"][0]["speedup"] > 1.0
    assert sched["extrapolated"] and sched["epochs_run"] == 6
    assert sched["paper_schedule_s"] == pytest.approx(sched["seconds_run"] * PAPER["epochs"] / 6)
    assert "speed-up" in printed and "paper schedule (4096 samples, batch 2048, 10000 epochs)" in printed
    last = printed.strip().splitlines()[-1]  # the DeLaN side by side, without --reference: the package only
    assert last.startswith("DeLaN training: package ") and "reference" not in last.split(";")[0]
    delan = res["delan"]
    for runs in delan["rows"].values():
        assert set(runs) == {"package"}
        pkg = runs["package"]
        assert pkg["epochs"] == 20 and pkg["samples_epochs_per_s"] == pytest.approx(
            pkg["samples"] * 20 / pkg["seconds"]
        )


def test_scale_out_times_one_epoch_per_batch_and_extrapolates_on_the_cpu(one_thread):
    import torch

    from ros_lnn_lab.bench.train import scale_out

    lines = []
    res = scale_out(
        torch.device("cpu"), samples=40_000, distinct=500, batches=(512, 2048), progress=lines.append
    )
    assert [r["batch"] for r in res["rows"]] == [512, 2048] and len(lines) == 2
    for r in res["rows"]:
        assert r["extrapolated"] and r["samples_run"] == 2048  # 5 % of 40 000 is below the largest batch
        assert r["epoch_s"] == pytest.approx(r["seconds_run"] * 40_000 / 2048)
        assert r["samples_per_s"] == pytest.approx(40_000 / r["epoch_s"])
    assert "extrapolated from 2048 samples" in lines[0]


# A stand-in for a checkout of the published DeLaN implementation: only its import layout and the calls
# the side-by-side bench makes (DeepLagrangianNetwork(n_dof, **hyper), model(q, qd, qdd) -> (τ̂, Ê̇),
# inv_dyn, PyTorchReplayMemory). It is NOT the reference: a plain MLP from (q, q̇, q̈) to τ, so the bench's
# harness (import from DIR, the loop, the errors, the last line) is exercised without the real checkout.
STAND_IN_MODEL = """
import torch
from torch import nn


class DeepLagrangianNetwork(nn.Module):
    def __init__(self, n_dof, **kwargs):
        super().__init__()
        self.kwargs = kwargs
        width = kwargs["n_width"]
        self.net = nn.Sequential(nn.Linear(3 * n_dof, width), nn.Softplus(), nn.Linear(width, n_dof))

    def inv_dyn(self, q, qd, qdd):
        return self.net(torch.cat([q, qd, qdd], dim=1))

    def forward(self, q, qd, qdd):
        tau = self.inv_dyn(q, qd, qdd)
        return tau, torch.sum(qd * tau, dim=1)
"""
STAND_IN_MEMORY = """
import torch


class PyTorchReplayMemory:
    def __init__(self, size, minibatch_size, dim, cuda):
        self.size, self.batch, self.dim = size, minibatch_size, dim
        self.data = None

    def add_samples(self, data):
        self.data = [torch.as_tensor(x, dtype=torch.float32) for x in data]

    def __iter__(self):
        perm = torch.randperm(self.size)
        for i in range(0, self.size, self.batch):
            idx = perm[i : i + self.batch]
            yield [x[idx] for x in self.data]
"""


@pytest.fixture
def stand_in_checkout(tmp_path):
    package = tmp_path / "checkout" / "deep_lagrangian_networks"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "DeLaN_model.py").write_text(STAND_IN_MODEL)
    (package / "replay_memory.py").write_text(STAND_IN_MEMORY)
    yield package.parent
    import sys

    for name in [m for m in sys.modules if m.startswith("deep_lagrangian_networks")]:
        del sys.modules[name]
    sys.path.remove(str(package.parent.resolve()))


def test_delan_side_by_side_imports_the_reference_from_the_folder_given(
    one_thread, stand_in_checkout, capsys
):
    from ros_lnn_lab.bench.train import delan_side_by_side
    from ros_lnn_lab.studies.delan_reference import REFERENCE_HYPER, torque_error, train_reference

    res = delan_side_by_side(str(stand_in_checkout), epochs=3, arm_samples=600)
    lines = capsys.readouterr().out.strip().splitlines()
    ref = res["rows"][res["summary_data"]]["reference"]
    pkg = res["rows"][res["summary_data"]]["package"]
    assert ref["batches"] == "its replay memory" and ref["hyper"]["n_width"] == REFERENCE_HYPER["n_width"]
    assert res["ratio"] == pytest.approx(pkg["samples_epochs_per_s"] / ref["samples_epochs_per_s"])
    assert lines[-1] == (
        f"DeLaN training: package {pkg['samples_epochs_per_s']:.0f} samples*epochs/s, reference "
        f"{ref['samples_epochs_per_s']:.0f}, ratio = {res['ratio']:.2f}; test error package "
        f"{pkg['test_torque_error']:.3e}, reference {ref['test_torque_error']:.3e}"
    )
    # the module trained is the folder's own, imported from there
    import deep_lagrangian_networks.DeLaN_model as imported
    import numpy as np

    from ros_lnn_lab.studies.delan_reference import arm_data

    assert imported.__file__.startswith(str(stand_in_checkout.resolve()))
    train, test = arm_data(3, 200, seed=1)
    out = train_reference(str(stand_in_checkout), train, test, epochs=2)
    assert out["samples"] == 200 and np.isfinite(out["final_loss"]) and out["test_torque_error"] > 0
    zero = torque_error(np.zeros_like(test["Q"]), test["Q"])  # the measure: mean of per-sample sums
    assert zero == pytest.approx(float(np.mean(np.sum(test["Q"] ** 2, axis=1))))


def test_reference_folder_without_the_published_layout_is_refused_in_one_line(tmp_path):
    from ros_lnn.errors import ConfigError
    from ros_lnn_lab.studies.delan_reference import load_reference

    with pytest.raises(ConfigError, match=r"no deep_lagrangian_networks/DeLaN_model\.py") as info:
        load_reference(tmp_path)
    assert "\n" not in str(info.value)


def test_bench_ddp_trains_the_same_model_in_two_processes(tmp_path, capsys):
    """``ros-lnn bench ddp``: the CLI run in one process and under torchrun with 2 ranks (gloo) end with
    the same weights to float32 round-off; both rates are the trainers' own and the speed-up their ratio."""
    from ros_lnn_lab.bench.ddp import bench_ddp

    res = bench_ddp(argparse.Namespace(quick=True, epochs=3, nproc=2, output=str(tmp_path)))
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert last.startswith("DDP scaling (2 CPU processes, gloo;") and "speed-up = " in last
    assert res["ddp_run"]["world_size"] == 2 and res["ddp_run"]["backend"] == "gloo"
    assert res["weights_max_rel_diff"] < 1e-5, res
    assert res["speedup"] == pytest.approx(res["ddp_rate"] / res["single_rate"])
    assert res["single_loop_s"] > 0 and res["ddp_loop_s"] > 0
    assert (tmp_path / "single.pt").is_file() and (tmp_path / "ddp2.pt").is_file()
