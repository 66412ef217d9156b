"""What a run's provenance says about its time: the wall-clock seconds of the training loop, and apart
from them the process CPU seconds and the share of validations and checkpoints (the shipped model's
913 s were the first alone, measured on a shared machine)."""

import pytest

from conftest import requires_torch

pytestmark = requires_torch
pytest.importorskip("torch")


def test_provenance_records_wall_cpu_validation_and_checkpoint_seconds(tmp_path):
    from ros_lnn.training.run import run
    from ros_lnn.training.spec import RunSpec

    result = run(
        RunSpec(
            family="servo_lnn",
            epochs=6,
            n_train=256,
            val_every=1,
            log_every=1,
            checkpoint_every=2,
            device="cpu",
            report=False,
            out=str(tmp_path / "m.pt"),
        ),
        progress=lambda s: None,
    )
    record = result.provenance["training"]
    history = result.history
    assert set(record) >= {"seconds", "cpu_seconds", "validation_seconds", "checkpoint_seconds"}
    assert len(history["val"]) == 6
    assert history["validation_seconds"] > 0 and history["checkpoint_seconds"] > 0
    assert history["validation_seconds"] + history["checkpoint_seconds"] < history["seconds"]
    assert 0 < history["cpu_seconds"]
