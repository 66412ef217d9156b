"""``run(RunSpec(...))`` without the command line: bags are split by trial and keep every training
sample (not the crane paper's 4096-sample draw); checkpoints hold tensors and plain containers only,
load with ``weights_only=True`` and a file that needs more is refused in one line."""

import numpy as np
import pytest

from conftest import requires_torch

pytestmark = requires_torch
torch = pytest.importorskip("torch")
pytest.importorskip("rosbags")

from bag_helpers import crane_trial, mapping  # noqa: E402
from ros_lnn.bags.dataset import load_bag_dataset  # noqa: E402
from ros_lnn.bags.writer import write_trials_bag  # noqa: E402
from ros_lnn.errors import ConfigError, ModelError  # noqa: E402
from ros_lnn.models.servo_lnn import ServoLNN  # noqa: E402
from ros_lnn.training.checkpoint import load_checkpoint, save_checkpoint  # noqa: E402
from ros_lnn.training.run import RunSpec, run  # noqa: E402
from ros_lnn.training.spec import check  # noqa: E402


def test_bag_run_splits_by_trial_and_keeps_every_training_sample(tmp_path):
    trials = [crane_trial(i, duration=8.0) for i in (1, 3, 5, 7)]  # 4 x 1600 samples: more than 4096 train
    bag = write_trials_bag(tmp_path / "bag", trials, "sqlite3")
    spec = RunSpec(
        bags=(str(bag),),
        epochs=1,
        hidden=(8,),
        batch=1024,
        dtype="float64",
        threads=1,
        out=str(tmp_path / "m.pt"),
        report=False,
    )
    lines = []
    result = run(spec, progress=lines.append)

    ds = load_bag_dataset(bag, mapping())
    validation = [t.name for t in ds.validation]
    usable = 0  # every finite training sample of the training trials, counted here from the dataset
    for trial in ds.trials:
        if trial.name not in validation:
            usable += int(np.isfinite(np.column_stack([trial.q, trial.qd, trial.qdd, trial.Q])).all(1).sum())
    split = result.provenance["split"]
    assert usable > 4096 and split["n_train"] == usable
    assert split["test_trials"] == validation and not set(split["train_trials"]) & set(validation)
    assert f"--test-trials {','.join(validation)}" in result.provenance["command"]
    assert "--n-train" not in result.provenance["command"]
    assert spec.n_train is None and spec.test_trials == ()  # the caller's spec is left as it was
    assert any(line.startswith("bag: ") for line in lines) and any(
        line.startswith("data: ") for line in lines
    )
    # no test recording: the figure is the in-distribution validation's, and says so
    assert result.metrics["evaluated_on"].startswith("validation trials (in-distribution")
    assert np.isfinite(result.metrics["qdd_f_nmse"]) and split["validation_in_distribution"]


def test_run_checks_options_before_anything_runs(tmp_path):
    spec = RunSpec(family="tlnn", system="particle", out=str(tmp_path / "x.onnx"))
    with pytest.raises(ConfigError, match="--model tlnn does not train on --system particle"):
        run(spec)
    with pytest.raises(ConfigError, match="--epsilon"):
        bad = RunSpec(family="lnn", epsilon=0.1)
        check(bad, bad.resolved())
    # every option of another family that was set is named, in one line that says why
    for family, why, kind in (
        ("hnn", "--model hnn trains by acceleration MSE on simulated data", " (ServoLNN/bag options)"),
        ("dac_residual", "--model dac_residual learns the efforts an arm's certain model misses", ""),
    ):
        bad = RunSpec(family=family, epsilon=0.1, diag_activation="tanh")
        with pytest.raises(ConfigError) as refused:
            check(bad, bad.resolved())
        assert str(refused.value).startswith(why)
        assert str(refused.value).endswith(f" and has no --diag-activation, --epsilon{kind}")
    assert not list(tmp_path.iterdir())


def _servo():
    torch.manual_seed(0)
    return ServoLNN(["pendulum_joint"], ["cart_joint"], hidden=(4,))


def test_checkpoints_are_weights_only_and_plain(tmp_path):
    model = _servo()
    provenance = {"rms": np.float64(0.25), "counts": np.array([1, 2, 3]), "names": ("a", "b")}
    path = save_checkpoint(
        tmp_path / "c.pt",
        model,
        epoch=np.int64(4),
        history={"loss": [np.float32(1.5)]},
        provenance=provenance,
    )
    raw = torch.load(path, weights_only=True)  # plain containers and tensors only
    assert raw["model_config"]["family"] == "servo_lnn" and raw["epoch"] == 4
    assert type(raw["provenance"]["rms"]) is float and raw["provenance"]["rms"] == 0.25
    assert torch.equal(raw["provenance"]["counts"], torch.tensor([1, 2, 3]))
    assert type(raw["history"]["loss"][0]) is float and raw["provenance"]["names"] == ("a", "b")
    loaded, _ = load_checkpoint(path)
    for key, value in model.state_dict().items():
        assert torch.equal(loaded.state_dict()[key], value)
    with pytest.raises(ModelError, match="set cannot be checkpointed"):
        save_checkpoint(tmp_path / "d.pt", model, provenance={"joints": {"a", "b"}})
    assert not (tmp_path / "d.pt").exists()


class Payload:
    """An object a weights-only load must not construct."""


def test_a_checkpoint_that_needs_more_than_tensors_is_refused_in_one_line(tmp_path):
    model = _servo()
    path = tmp_path / "pickled.pt"
    torch.save(
        {
            "model_config": dict(model.config(), family="servo_lnn"),
            "model_state": model.state_dict(),
            "extra": {"object": Payload()},
        },
        path,
    )
    with pytest.raises(ModelError) as info:
        load_checkpoint(path)
    message = str(info.value)
    assert len(message.splitlines()) == 1 and "pickled.pt" in message
    assert "tensors and plain containers" in message and "Payload" in message


def test_resume_state_round_trips_the_numpy_generator(tmp_path):
    from ros_lnn.training.checkpoint import rng_state, set_rng_state

    gen = torch.Generator().manual_seed(3)
    np.random.seed(11)
    np.random.normal(size=5)
    state = rng_state(gen)
    expected = np.random.normal(size=4), torch.randperm(10, generator=gen)
    save_checkpoint(tmp_path / "r.pt", _servo(), extra={"resume": {"rng": state}})
    again = torch.load(tmp_path / "r.pt", weights_only=True)["extra"]["resume"]["rng"]
    np.random.seed(0)
    set_rng_state(again, gen)
    got = np.random.normal(size=4), torch.randperm(10, generator=gen)
    assert np.array_equal(got[0], expected[0]) and torch.equal(got[1], expected[1])


def test_a_new_family_is_one_description_and_one_registry_entry(tmp_path, monkeypatch):
    """A family defined here (a neural ODE with tanh units and its own tag) trains, checkpoints and
    loads back through the run and the checkpoint module once it is in the registry."""
    import ros_lnn.families as families
    from ros_lnn.families.acceleration import acceleration_family
    from ros_lnn.models.node_baseline import NeuralODE

    class TanhODE(NeuralODE):
        family = "node_tanh"

        def config(self):
            return super().config() | {"family": self.family}

    def build(shape, net):
        return TanhODE(len(shape.coordinate_names), hidden=net.hidden, activation="tanh")

    def from_config(config):
        config = dict(config)
        return TanhODE(config.pop("n"), **config)

    family = acceleration_family("node_tanh", ("chain",), build, from_config)
    monkeypatch.setitem(families.FAMILIES, family.name, family)
    monkeypatch.setattr(families, "MODEL_FAMILIES", (*families.MODEL_FAMILIES, family.name))

    spec = RunSpec(
        family="node_tanh",
        trajectories=3,
        duration=1.0,
        epochs=2,
        hidden=(8,),
        out=str(tmp_path / "m.pt"),
        report=False,
        threads=1,
    )
    lines = []
    result = run(spec, progress=lines.append)
    assert any(line.startswith("node_tanh epoch 2/2") for line in lines)
    assert "--model node_tanh --system chain" in result.provenance["command"]
    model, ckpt = load_checkpoint(tmp_path / "m.pt")
    assert isinstance(model, TanhODE) and ckpt["model_config"]["activation"] == "tanh"
    q, qd = torch.zeros(2, 2, dtype=torch.float64), torch.ones(2, 2, dtype=torch.float64)
    assert torch.allclose(model.double()(q, qd), result.model(q, qd))
