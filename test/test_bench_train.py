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
    from ros_lnn.commands.bench_train import PAPER, bench_train

    res = bench_train(argparse.Namespace(quick=True), steps=3, rounds=3, schedule_epochs=6)
    printed = capsys.readouterr().out
    step, sched = res["step"], res["schedule"]
    assert res["device"] == "cpu" and res["threads"] == 1 and "device: cpu" in printed
    assert step["batch"] == 2048 and step["dtype"] == "float32"
    # same weights, same batch: the same loss and gradient (float32 round-off)
    assert step["loss_rel_diff"] < 1e-5 and step["grad_rel_diff"] < 1e-4
    assert step["speedup"] == pytest.approx(step["analytic_steps_per_s"] / step["autograd_steps_per_s"])
    assert step["speedup"] > 1.0, step  # autograd's extra create_graph passes cost more than the closed forms
    assert [row["n"] for row in res["sizes"]] == [3] and res["sizes"][0]["speedup"] > 1.0
    assert sched["extrapolated"] and sched["epochs_run"] == 6
    assert sched["paper_schedule_s"] == pytest.approx(sched["seconds_run"] * PAPER["epochs"] / 6)
    assert "speed-up" in printed and "paper schedule (4096 samples, batch 2048, 10000 epochs)" in printed
