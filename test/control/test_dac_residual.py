"""The learned port end to end without ROS: recordings of a mismatched arm in a real rosbag, the effort
residual the certain model misses (held against the plant's exact residual), a small real training run,
ONNX with the joints in its metadata, ONNX Runtime on the deployment path (no torch), the port's safety,
and the law's reference acceleration it is fed."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from conftest import requires_torch
from ros_lnn.control.closed_loop import multisine_joint_path, sampled_loop
from ros_lnn.control.dac import Gains
from ros_lnn.control.effort import PortToEfforts
from ros_lnn.control.pipeline import DacPipeline
from ros_lnn.demos.dac import (
    EXCITATION_AMPLITUDE,
    EXCITATION_GAINS,
    SAMPLE_DT,
    demo_plant,
    demo_task,
    law_ii,
    write_recordings_bag,
)
from ros_lnn.errors import ModelError
from ros_lnn.training.effort_residuals import shipped_config
from ros_lnn.training.spec import RunSpec

ROOT = Path(__file__).resolve().parents[2]
JOINTS = ["joint1", "joint2", "joint3", "joint4", "joint5"]


@pytest.fixture(scope="module")
def recordings(tmp_path_factory):
    """A short recording set of the mismatched demo arm under the model-only controller, as a rosbag."""
    arm, plant = demo_plant()
    _, times, q_task = demo_task(arm)
    logs = []
    pipe = law_ii(arm)
    pipe.set_joint_trajectory(times, q_task)
    logs.append(sampled_loop(pipe, q_task[0], 3.0, SAMPLE_DT, dynamics=plant.forward_dynamics))
    for seed in range(3):
        t, q = multisine_joint_path(q_task.mean(0), EXCITATION_AMPLITUDE, 4.0, seed=seed)
        pipe = law_ii(arm, **EXCITATION_GAINS)
        pipe.set_joint_trajectory(t, q)
        logs.append(sampled_loop(pipe, q[0], 4.0, SAMPLE_DT, dynamics=plant.forward_dynamics))
    bag = tmp_path_factory.mktemp("residual") / "recordings"
    write_recordings_bag(bag, logs, JOINTS)
    return arm, plant, bag, logs


def _spec(bag, tmp_path, **kw):
    values = dict(
        family="dac_residual",
        bags=(str(bag),),
        bag_config=str(shipped_config()),
        epochs=12,
        hidden=(32, 32),
        out=str(tmp_path / "port.onnx"),
        report=False,
        checkpoint_dir=str(tmp_path / "ckpt"),
    )
    values.update(kw)
    return RunSpec(**values)


def test_residual_targets_from_the_bag_equal_the_plants_exact_residual(recordings, tmp_path):
    from ros_lnn.training.effort_residuals import residual_data

    _, plant, bag, _ = recordings
    data = residual_data(_spec(bag, tmp_path), say=lambda m: None)
    train = data["train"]
    assert data["shape"].coordinate_names == tuple(JOINTS) and len(train["q"]) > 3000
    assert data["source"]["certain_model"]["name"] == "dac_chain"
    exact = np.array([plant.residual(q, qd, a) for q, qd, a in zip(train["q"], train["qd"], train["qdd"])])
    scale = np.sqrt(np.mean(exact**2, axis=0))
    # the target as a whole (the default regressor fit splits it: Q_fit + the remainder Q the network learns)
    assert np.allclose(train["Q_fit"] + train["Q"], train["Q_total"], rtol=0, atol=1e-12)
    held = np.sqrt(np.mean((train["Q_total"] - exact) ** 2, axis=0)) / scale
    assert held.max() < 5e-3, held  # central q̈ with the held efforts averaged: second order in the step
    # the same efforts read as sampled at the stamp are half a step off: an order of magnitude worse
    cfg = tmp_path / "sampled.yaml"
    cfg.write_text(
        shipped_config()
        .read_text()
        .replace("effort_timing: held", "effort_timing: sampled")
        .replace("model: dac_chain.urdf", f"model: {ROOT / 'config' / 'dac_chain.urdf'}")
    )
    sampled = residual_data(_spec(bag, tmp_path, bag_config=str(cfg)), say=lambda m: None)["train"]
    exact_s = np.array(
        [plant.residual(q, qd, a) for q, qd, a in zip(sampled["q"], sampled["qd"], sampled["qdd"])]
    )
    off = np.sqrt(np.mean((sampled["Q_total"] - exact_s) ** 2, axis=0)) / scale
    assert off.max() > 10 * held.max()


def _config(tmp_path, **settings) -> str:
    """The shipped config with the certain model's path made absolute and ``dac_residual:`` settings
    added (YAML scalars)."""
    text = (
        shipped_config()
        .read_text()
        .replace("model: dac_chain.urdf", f"model: {ROOT / 'config' / 'dac_chain.urdf'}")
    )
    text += "".join(f"  {k}: {v}\n" for k, v in settings.items())
    path = tmp_path / f"config_{len(settings)}_{abs(hash(tuple(settings.items())))}.yaml"
    path.write_text(text)
    return str(path)


@requires_torch
def test_a_training_run_exports_onnx_that_onnx_runtime_evaluates_like_torch(recordings, tmp_path):
    """The network alone (no regressor fit): it learns the whole residual, and its graph in ONNX Runtime
    is the torch model."""
    import torch

    from ros_lnn.inference.residual import ResidualRuntime
    from ros_lnn.training.run import run

    _, _, bag, _ = recordings
    spec = _spec(bag, tmp_path, bag_config=_config(tmp_path, regressor_fit="false"))
    result = run(spec, progress=lambda m: None)
    assert result.history["loss"][-1] < 0.5 * result.history["loss"][0]
    port = ResidualRuntime(result.out, JOINTS)
    assert port.regressor_fit is None and "regressor_fit" not in port.metadata.network
    assert port.metadata.family == "dac_residual" and port.metadata.free_joints == JOINTS
    assert port.metadata.coordinate_units == ["rad"] * 5
    assert port.certain_model["name"] == "dac_chain" and len(port.certain_model["sha256"]) == 64
    rng = np.random.default_rng(0)
    q, qd, qdd = rng.uniform(-1, 1, (3, 20, 5))
    with torch.no_grad():
        want = result.model(*(torch.as_tensor(x) for x in (q, qd, qdd))).numpy()
    scale = np.abs(want).max()
    assert np.abs(port.batch(q, qd, qdd) - want).max() < 1e-5 * scale  # float32 graph
    assert np.abs(np.array([port(a, b, c) for a, b, c in zip(q, qd, qdd)]) - want).max() < 1e-5 * scale
    # the configured order may differ from the model's: joints are matched by name
    order = [3, 0, 4, 1, 2]
    shuffled = ResidualRuntime(result.out, [JOINTS[i] for i in order])
    assert np.abs(shuffled(q[0][order], qd[0][order], qdd[0][order]) - want[0][order]).max() < 1e-5 * scale
    # a model of other joints is refused in one line naming both sides
    with pytest.raises(ModelError, match=r"does not fit the controller's joints.*wrist") as info:
        ResidualRuntime(result.out, JOINTS[:4] + ["wrist"])
    assert "\n" not in str(info.value)


@requires_torch
def test_the_regressor_fit_learns_the_plants_mismatch_and_the_port_adds_it(recordings, tmp_path):
    """Default training: the least-squares fit of inertial parameters, rotor inertia and friction first,
    the network on the rest. The port (ONNX Runtime + the fit the file carries) gives the plant's exact
    residual (payload, rotor inertia, friction: all of the fit's kind) at states of another motion."""
    import torch

    from ros_lnn.inference.residual import ResidualRuntime
    from ros_lnn.training.run import run

    arm, plant, bag, _ = recordings
    lines = []
    result = run(_spec(bag, tmp_path), progress=lines.append)
    assert any(line.startswith("regressor fit (") for line in lines)
    fit = result.metrics["tau_res_rel_rms_fit"]
    assert max(fit) < 0.01 and max(result.metrics["tau_res_rel_rms"]) < 0.01, result.metrics
    verdict = [line for line in lines if "network on the fit's remainder" in line]
    assert len(verdict) == 1 and ("kept" in verdict[0]) == result.model.network_enabled
    port = ResidualRuntime(result.out, JOINTS)
    assert port.network_enabled == result.model.network_enabled
    if not port.network_enabled:  # the port is the fit alone: the test metrics say the same
        assert result.metrics["tau_res_rel_rms"] == pytest.approx(fit, rel=1e-9)
    assert port.regressor_fit is not None and port.metadata.network["regressor_fit"]["model_format"] == "urdf"
    # another motion: a multi-sine the recordings did not hold, with the law's accelerations
    t, path = multisine_joint_path(np.array([0.1, -0.6, 1.2, 0.5, 0.3]), EXCITATION_AMPLITUDE, 4.0, seed=77)
    log = sampled_loop(_following(arm, t, path), path[0], 2.0, SAMPLE_DT, dynamics=plant.forward_dynamics)
    qdd = np.gradient(log.qd, SAMPLE_DT, axis=0)
    exact = np.array([plant.residual(*s) for s in zip(log.q, log.qd, qdd)])
    got = port.batch(log.q, log.qd, qdd)
    rel = np.sqrt(np.mean((got - exact) ** 2, axis=0)) / np.sqrt(np.mean(exact**2, axis=0))
    assert rel.max() < 0.01, rel
    # one sample at a time, and in another joint order, the same numbers
    order = [3, 0, 4, 1, 2]
    shuffled = ResidualRuntime(result.out, [JOINTS[i] for i in order])
    tol = 1e-6 * np.abs(exact).max()  # the network's graph is float32
    for k in (0, 400, 900):
        one = port(log.q[k], log.qd[k], qdd[k])
        assert np.abs(one - got[k]).max() < tol
        assert np.abs(shuffled(log.q[k][order], log.qd[k][order], qdd[k][order]) - one[order]).max() < tol
    # the network's graph alone is the torch model; the bound covers the whole residual, not the remainder
    with torch.no_grad():
        net = result.model(*(torch.as_tensor(x[:50]) for x in (log.q, log.qd, qdd))).numpy()
    port.regressor_fit = None
    assert np.abs(port.batch(log.q[:50], log.qd[:50], qdd[:50]) - net).max() < 1e-5 * max(
        np.abs(net).max(), 1e-9
    )
    assert np.all(port.trained_max > 0.5 * np.abs(exact).max(0))


@requires_torch
def test_the_network_stays_only_where_it_helps_the_fit():
    """The verdict after training: validation where the fit is already exact switches the network off;
    validation the network itself explains keeps it."""
    import torch

    from ros_lnn.families.dac_residual import finish
    from ros_lnn.models.dac_residual import DacResidual

    rng = np.random.default_rng(4)
    q, qd, qdd = rng.uniform(-1, 1, (3, 200, 5))
    model = DacResidual(5, hidden=(8,), regressor_fit={"theta": []}).double()
    with torch.no_grad():
        net = model(*(torch.as_tensor(x) for x in (q, qd, qdd))).numpy()
    base = rng.normal(size=(200, 5))
    exact_fit = {"q": q, "qd": qd, "qdd": qdd, "Q_fit": base, "Q_total": base, "Q": np.zeros_like(base)}
    assert "switched off" in finish(model, exact_fit) and not model.network_enabled
    wrong_fit = {"q": q, "qd": qd, "qdd": qdd, "Q_fit": base, "Q_total": base + net, "Q": net}
    assert "kept" in finish(model, wrong_fit) and model.network_enabled
    assert finish(DacResidual(5, hidden=(8,)), wrong_fit) == ""  # no fit: nothing to decide


def _following(arm, times, path):
    pipe = law_ii(arm, **EXCITATION_GAINS)
    pipe.set_joint_trajectory(times, path)
    return pipe


@pytest.mark.parametrize(
    "setting, match",
    [
        ({"regressor_fit": "'yes'"}, "regressor_fit must be true or false"),
        ({"coulomb_velocity": 0}, "coulomb_velocity"),
    ],
)
def test_regressor_settings_are_checked(recordings, tmp_path, setting, match):
    from ros_lnn.errors import ConfigError
    from ros_lnn.training.effort_residuals import residual_data

    _, _, bag, _ = recordings
    with pytest.raises(ConfigError, match=match):
        residual_data(_spec(bag, tmp_path, bag_config=_config(tmp_path, **setting)), say=lambda m: None)


@requires_torch
def test_train_command_line(recordings, tmp_path):
    from ros_lnn.cli import main

    _, _, bag, _ = recordings
    out = tmp_path / "cli.onnx"
    code = main(
        [
            "train",
            "--model",
            "dac_residual",
            "--bag",
            str(bag),
            "--config",
            str(shipped_config()),
            "--epochs",
            "2",
            "--hidden",
            "16",
            "16",
            "--out",
            str(out),
            "--no-report",
        ]
    )
    assert code == 0 and out.is_file()
    assert main(["train", "--model", "dac_residual", "--out", str(tmp_path / "x.onnx")]) == 2  # no --bag


def test_the_deployment_path_runs_without_torch(recordings, tmp_path):
    pytest.importorskip("torch")
    from ros_lnn.training.run import run

    _, _, bag, _ = recordings
    model = run(_spec(bag, tmp_path, epochs=1), progress=lambda m: None).out
    script = f"""
import sys
sys.modules['torch'] = None  # any import of torch fails
import numpy as np
from ros_lnn.demos.dac import demo_plant, law_ii
from ros_lnn.inference.residual import ResidualRuntime
arm, plant = demo_plant()
pipe = law_ii(arm, ResidualRuntime({str(model)!r}, {JOINTS!r}))
out = pipe.step(np.array([0.0, -0.8, 1.4, 0.6, 0.4]), np.zeros(5))
assert out.efforts.residual_state in ('ok', 'clipped') and np.any(out.efforts.residual_part != 0)
assert not any(m == 'torch' or m.startswith('torch.') for m in sys.modules if sys.modules[m] is not None)
print('ok')
"""
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, cwd=ROOT, timeout=120
    )
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr


def test_the_port_is_bounded_and_a_non_finite_correction_is_dropped():
    from ros_lnn.physics.multibody.build import load_model

    arm = load_model(ROOT / "config" / "dac_chain.urdf")
    gen = np.array([1.0, -2.0, 0.5, 0.2, -0.1])
    calls = []
    port = PortToEfforts(
        arm,
        JOINTS,
        [40.0] * 5,
        residual=lambda q, qd, a: calls.append(a) or np.full(5, 3.0),
        residual_limit=[1.0, 5.0, 1.0, 5.0, 1.0],
    )
    cmd = port.from_generalized(gen, np.zeros(5), np.zeros(5), np.arange(5.0))
    assert cmd.residual_state == "clipped" and np.array_equal(cmd.residual_part, [1.0, 3.0, 1.0, 3.0, 1.0])
    assert np.array_equal(cmd.requested, gen + cmd.residual_part) and np.array_equal(calls[0], np.arange(5.0))
    port.residual = lambda q, qd, a: np.array([0.1, np.nan, 0.0, 0.0, 0.0])
    cmd = port.from_generalized(gen, np.zeros(5), np.zeros(5), np.zeros(5))
    assert (
        cmd.residual_state == "non_finite" and np.array_equal(cmd.effort, gen) and not cmd.residual_part.any()
    )
    port.residual = lambda q, qd, a: np.full(5, np.inf)
    assert port.from_generalized(gen, np.zeros(5), np.zeros(5), np.zeros(5)).residual_state == "non_finite"


@pytest.mark.parametrize("law", ["velocity", "pose", "end_effector"])
def test_the_port_is_fed_the_laws_reference_acceleration(law):
    """ν_r = G q̇_r and ν̇_r = G q̈_r + Ġ q̇_r: the q̈_r handed to the port is the law's own (checked on
    the twists the law computes, with the twist map from the kinematics)."""
    from ros_lnn.physics.multibody.build import load_model

    arm = load_model(ROOT / "config" / "dac_chain.urdf")
    seen = []
    pipe = DacPipeline(
        arm,
        law,
        Gains(damping=0.05),
        ee_link="tool0",
        residual=lambda q, qd, a: seen.append(np.array(a)) or np.zeros(5),
    )
    q, qd = np.array([0.1, -0.7, 1.3, 0.5, 0.3]), np.array([0.2, -0.1, 0.3, 0.15, -0.2])
    if law == "end_effector":
        pipe.set_ee_target([0.45, 0.1, 0.15])
    else:
        pipe.set_joint_trajectory([0.0, 1.0, 2.0], [q, q + 0.2, q + 0.3])
    out = pipe.step(q, qd, t=0.7)
    data = pipe.kinematics(q, qd)
    qd_r = np.linalg.lstsq(data.G, out.result.nu_r, rcond=None)[0]
    assert np.allclose(data.G @ qd_r, out.result.nu_r, atol=1e-10)  # ν_r lies in the range of G
    rate = out.result.nu_r_dot - data.G_dot @ qd_r
    assert np.allclose(data.G @ seen[-1], rate, atol=1e-8 * np.abs(rate).max())
    assert np.abs(seen[-1]).max() > 1e-3


def test_the_exact_residual_through_the_port_brings_tracking_to_the_floor():
    """The port's place in the law: with the plant's exact residual the mismatched arm tracks as the
    certain model would track its own arm (both sampled at 500 Hz); the model alone does not."""
    arm, plant = demo_plant()
    point, times, q_task = demo_task(arm)
    rms = {}
    for name, residual, dynamics in (
        ("model", None, plant.forward_dynamics),
        ("exact", plant.residual, plant.forward_dynamics),
        ("matched", None, None),
    ):
        pipe = law_ii(arm, residual)
        pipe.set_joint_trajectory(times, q_task)
        rms[name] = sampled_loop(
            pipe, q_task[0], 3.0, SAMPLE_DT, dynamics=dynamics, target=point
        ).tracking_rms(1.0)
    assert rms["model"] > 5e-3
    assert rms["exact"] < 0.01 * rms["model"]
    assert rms["exact"] < 3 * rms["matched"]


def test_gains_of_the_pipeline_are_kept_when_a_port_is_set():
    from ros_lnn.physics.multibody.build import load_model

    arm = load_model(ROOT / "config" / "dac_chain.urdf")
    pipe = DacPipeline(arm, "pose", Gains(kd_linear=7.0), ee_link="tool0")
    pipe.set_residual(lambda q, qd, a: np.ones(5), 0.5)
    pipe.set_gains(replace(pipe.gains, lambda_position=2.0))
    out = pipe.step(np.zeros(5) + 0.3, np.zeros(5))
    assert pipe.gains.kd_linear == 7.0 and np.allclose(out.efforts.residual_part, 0.5)
