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
    assert main(["evaluate", "--model", str(untrained_model), "--data", str(path), "--json", str(report)]) == 0
    import json

    got = json.loads(report.read_text())[trial.name]
    _, expected = evaluate_trial(ServoLnnRuntime(untrained_model), trial)
    assert got["qdd_f_nmse"] == pytest.approx(expected["qdd_f_nmse"], rel=1e-12)
    assert np.isfinite(got["Q_e_rel_rms"]) and got["M_rel_err"] > 0
    assert main(["evaluate", "--model", str(untrained_model), "--data", str(path), "--trials", "nope"]) == 2
