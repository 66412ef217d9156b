"""``ros-lnn train`` for the zoo families: the checkpoint loads back into a working model, and a
family/system mismatch is one line (exit code 2) before anything is written."""

import pytest

from conftest import requires_torch

pytestmark = requires_torch
torch = pytest.importorskip("torch")

from ros_lnn.cli import main as cli_main  # noqa: E402
from ros_lnn.training.checkpoint import load_checkpoint  # noqa: E402


def main(argv):
    return cli_main(["train", *argv])


@pytest.mark.parametrize("model,system", [("lnn_nh", "particle"), ("tlnn", "chain"), ("node", "chain")])
def test_train_save_load(tmp_path, model, system):
    out = tmp_path / f"{model}.pt"
    assert (
        main(
            [
                "--model",
                model,
                "--system",
                system,
                "--trajectories",
                "2",
                "--duration",
                "1",
                "--epochs",
                "1",
                "--hidden",
                "8",
                "--out",
                str(out),
            ]
        )
        == 0
    )
    net = load_checkpoint(out)[0].double()
    assert net.family == model
    q, qd = torch.zeros(2, net.n, dtype=torch.float64), torch.ones(2, net.n, dtype=torch.float64)
    with torch.no_grad():
        assert net(q, qd).shape == (2, net.n)


def test_constrained_family_needs_a_constrained_system(tmp_path, capsys):
    assert main(["--model", "lnn_nh", "--system", "chain", "--out", str(tmp_path / "x.pt")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "lnn_nh" in err and "particle, drone, rolling_disk" in err
    assert not (tmp_path / "x.pt").exists()
