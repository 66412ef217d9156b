"""The ``ros-lnn`` command: one-line errors with exit code 2, offline demo, evaluate, lazy imports."""

import subprocess
import sys
import textwrap

import numpy as np
import pytest

from conftest import requires_torch
from ros_lnn.cli import main


def test_missing_model_is_one_line_and_exit_2(tmp_path, capsys):
    rc = main(["evaluate", "--model", str(tmp_path / "absent.onnx")])
    err = capsys.readouterr().err.strip()
    assert rc == 2
    assert len(err.splitlines()) == 1 and "absent.onnx" in err and "not found" in err


def test_no_command_prints_help_and_exit_2(capsys):
    assert main([]) == 2
    assert "demo" in capsys.readouterr().out


def test_deploy_commands_parse_without_torch():
    """demo/evaluate argument parsing and the runtime never import torch."""
    code = textwrap.dedent("""
        import sys
        sys.modules['torch'] = None
        from ros_lnn.cli import build_parser
        for cmd in ('demo', 'evaluate', 'simulate'):
            build_parser(only=cmd).parse_args([cmd])
        import ros_lnn.inference.runtime, ros_lnn.inference.evaluation, ros_lnn.commands.demo
        print('ok')
    """)
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0 and res.stdout.strip() == "ok", res.stderr


@pytest.fixture(scope="module")
def untrained_model(tmp_path_factory):
    torch = pytest.importorskip("torch")
    from ros_lnn.models.export import export_onnx
    from ros_lnn.models.servo_lnn import ServoLNN

    torch.manual_seed(0)
    model = ServoLNN(["pendulum_joint"], ["cart_joint"], coordinate_units=["rad", "m"])
    return export_onnx(model, tmp_path_factory.mktemp("m") / "crane.onnx")


@requires_torch
def test_offline_demo_prints_errors_against_truth(untrained_model, capsys):
    assert main(["demo", "--offline", "--model", str(untrained_model), "--rows", "3"]) == 0
    out = capsys.readouterr().out
    assert "Q_e relative RMS error" in out and "held-out trial 'multi_a'" in out
    assert main(["demo", "--offline", "--model", str(untrained_model), "--trial", "cosine_a"]) == 2


@requires_torch
def test_evaluate_on_npz_trials_matches_runtime(untrained_model, tmp_path, capsys):
    from ros_lnn.inference.evaluation import evaluate_trial
    from ros_lnn.inference.runtime import ServoLnnRuntime
    from ros_lnn.physics.crane import Crane
    from ros_lnn.physics.datasets import PAPER_TRIALS, crane_trial
    from ros_lnn.physics.trials import save_trials

    trial = crane_trial(Crane(), PAPER_TRIALS[1])
    path = tmp_path / "one.npz"
    save_trials(path, [trial])
    report = tmp_path / "m.json"
    assert (
        main(["evaluate", "--model", str(untrained_model), "--data", str(path), "--json", str(report)]) == 0
    )
    import json

    got = json.loads(report.read_text())[trial.name]
    _, expected = evaluate_trial(ServoLnnRuntime(untrained_model), trial)
    assert got["qdd_f_nmse"] == pytest.approx(expected["qdd_f_nmse"], rel=1e-12)
    assert np.isfinite(got["Q_e_rel_rms"]) and got["M_rel_err"] > 0
    assert main(["evaluate", "--model", str(untrained_model), "--data", str(path), "--trials", "nope"]) == 2


@pytest.mark.parametrize(
    "argv,named",
    [
        (["--model", "tlnn", "--system", "particle"], "--system particle"),
        (["--model", "lnn_nh", "--system", "chain"], "--system chain"),
        (["--model", "servo_lnn", "--system", "chain"], "--system chain"),
        (["--model", "node", "--epsilon", "0.1"], "--epsilon"),
        (["--model", "lnn", "--bag", "rec"], "--bag"),
        (["--model", "tlnn", "--exporter", "torchscript"], "--exporter"),
        (["--model", "lnn", "--system", "drone", "--links", "3"], "--links"),
        (["--model", "delan", "--bag", "rec"], "bags"),
        (["--trajectories", "4"], "--trajectories"),
        (["--model", "node", "--out", "model.txt"], "model.txt"),
    ],
)
def test_train_rejects_combinations_in_one_line(tmp_path, capsys, argv, named):
    """Checked before any data is made or torch is imported: exit code 2, one line naming the culprit."""
    assert main(["train", *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and named in err, err


def test_train_family_defaults_fill_only_what_is_not_given():
    from ros_lnn.cli import build_parser
    from ros_lnn.commands.train import canonical_command

    parse = lambda *a: build_parser(only="train").parse_args(["train", *a])  # noqa: E731
    servo = canonical_command(parse())
    assert "--model servo_lnn --system crane" in servo and "--epochs 10000 --batch 2048 --lr 0.0001" in servo
    assert "--hidden 64" in servo and "--out models/crane_servo_lnn.onnx" in servo
    tlnn = canonical_command(parse("--model", "tlnn", "--lr", "0.003"))
    assert "--system chain --trajectories 20 --duration 5.0 --links 2" in tlnn
    assert (
        "--epochs 60 --batch 256 --lr 0.003" in tlnn
        and "--hidden 128 128" in tlnn
        and "--dtype float64" in tlnn
    )
    assert "--weight-decay" not in tlnn and "--out models/chain2_tlnn.onnx" in tlnn
    delan = canonical_command(parse("--model", "delan"))
    assert (
        "--system delan_character" in delan
        and "--batch 512 --lr 0.0005" in delan
        and "--epsilon 0.001" in delan
    )


def _help(argv, capsys) -> str:
    with pytest.raises(SystemExit) as done:
        main(argv + ["--help"])
    assert done.value.code == 0
    return capsys.readouterr().out


def test_help_texts_a_user_can_act_on(capsys):
    """Top level: the whole description; demo: the live default; bench: every benchmark; train --data:
    no path into a development tree."""
    from ros_lnn.cli import DESCRIPTION
    from ros_lnn_lab.bench import BENCHES

    top = " ".join(_help([], capsys).split())
    assert " ".join(DESCRIPTION.split()) in top and "``" not in top
    demo = " ".join(_help(["demo"], capsys).split())
    assert "Live (the default" in demo and "--offline" in demo and "default 250" in demo
    bench = _help(["bench"], capsys)
    assert all(f"  {name} " in bench for name in BENCHES) and "dac-node" in bench and "fault" in bench
    train = " ".join(_help(["train"], capsys).split())
    data = train[train.index("--data FILE servo_lnn") :][:300]
    assert "../" not in data and "shared/" not in data and "character_data.npz" in data


def test_simulate_to_an_unwritable_place_fails_before_simulating(tmp_path, capsys):
    blocker = tmp_path / "a_file"
    blocker.write_text("")
    assert main(["simulate", "--out", str(blocker / "crane.npz")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--out" in err and "cannot write there" in err and "Traceback" not in err
    folder = tmp_path / "looks_like.npz"
    folder.mkdir()
    assert main(["simulate", "--out", str(folder)]) == 2
    assert "is a folder" in capsys.readouterr().err


def test_train_options_are_generated_from_the_run_spec():
    """Every RunSpec field is a `ros-lnn train` option generated from its metadata (or one of the few
    custom ones), and a command line parses into the RunSpec written out by hand."""
    import dataclasses

    from ros_lnn.cli import build_parser
    from ros_lnn.commands.train import run_spec
    from ros_lnn.training.spec import CUSTOM_OPTIONS, RunSpec

    for f in dataclasses.fields(RunSpec):
        assert "cli" in f.metadata or f.name in CUSTOM_OPTIONS, f.name
    argv = ["train", "--model", "delan", "--bag", "a", "b", "--hidden", "32", "16", "--test-trials", "e, q"]
    argv += ["--epochs", "5", "--lr", "0.01", "--angle-features", "--without-qe", "--resume", "--no-report"]
    argv += ["--free-joints", "j1,j2", "--dtype", "float64", "--patience", "3"]
    spec = run_spec(build_parser(only="train").parse_args(argv))
    assert spec == RunSpec(
        family="delan",
        bags=("a", "b"),
        hidden=(32, 16),
        test_trials=("e", "q"),
        epochs=5,
        lr=0.01,
        angle_features=True,
        with_qe=False,
        resume=True,
        report=False,
        bag_mapping={"free_joints": ("j1", "j2")},
        dtype="float64",
        patience=3,
    )
    assert run_spec(build_parser(only="train").parse_args(["train"])) == RunSpec()
