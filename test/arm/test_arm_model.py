"""The arm model end to end on generated recordings of a Panda with a perturbed URDF, friction the
model only approximates, motor-current noise and irregular stamps: least squares, the learned
residual and gear ripple, the ONNX file, the CLI (train, evaluate, bench realarm)."""

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from ros_lnn.arm import identification as idn
from ros_lnn.arm import ripple as ripple_mod
from ros_lnn.arm.generator import ArmGenerator, GeneratorOptions, write_recording
from ros_lnn.arm.mapping import ArmMapping
from ros_lnn.arm.model import ArmModel, read_arm_metadata
from ros_lnn.arm.recording import read_arm_bag
from ros_lnn.arm.residual import ResidualOptions
from ros_lnn.arm.rigid_body import ArmRigidBody
from ros_lnn.arm.samples import filtered_samples
from ros_lnn.arm.signals import cutoff_for, filter_joint_signals
from ros_lnn.arm.training import train_arm
from ros_lnn.errors import ConfigError, ModelError

URDF = Path(__file__).resolve().parents[2] / "config" / "robots" / "panda" / "panda.urdf"
JOINTS = [f"panda_joint{i}" for i in range(1, 8)]
FAST = ResidualOptions(epochs=40, patience=15, hidden=16, ensemble=2)


@pytest.fixture(scope="module")
def gen():
    return ArmGenerator(URDF, JOINTS, seed=2)


@pytest.fixture(scope="module")
def bags(tmp_path_factory, gen):
    folder = tmp_path_factory.mktemp("arm")
    opts = GeneratorOptions(rate_hz=250.0)
    train = gen.generate(12.0, options=opts, seed=11)
    test = gen.generate(6.0, options=opts, seed=12)
    return (
        write_recording(folder / "train", train),
        write_recording(folder / "test", test),
        train.mapping,
        folder,
    )


@pytest.fixture(scope="module")
def trained(bags):
    train_bag, _, mapping, folder = bags
    rec = read_arm_bag(train_bag, mapping)
    out = folder / "arm.onnx"
    result = train_arm([rec], URDF, mapping, out=out, options=FAST)
    return result, out


def test_rigid_body_matches_rnea_crba_and_aba_in_mapping_order():
    joints = JOINTS[::-1]  # any order: every array follows the mapping's
    arm = ArmRigidBody.from_urdf(URDF, joints)
    assert arm.locked == ("panda_finger_joint1", "panda_finger_joint2")
    rng = np.random.default_rng(0)
    q, qd, qdd = rng.normal(size=(3, 4, 7))
    tau = arm.inverse_dynamics(q, qd, qdd)
    np.testing.assert_allclose(
        np.einsum("nij,j->ni", arm.regressor(q, qd, qdd), arm.body_parameters()), tau, atol=1e-10
    )
    for k in range(4):
        M = arm.mass_matrix(q[k])
        C = arm.coriolis_matrix(q[k], qd[k])
        np.testing.assert_allclose(M @ qdd[k] + C @ qd[k] + arm.gravity_torque(q[k]), tau[k], atol=1e-10)
        np.testing.assert_allclose(arm.forward_dynamics(q[k], qd[k], tau[k]), qdd[k], atol=1e-9)
        assert np.all(np.linalg.eigvalsh(M) > 0)
    # a joint moving alone: its own torque from gravity only at rest changes sign with the configuration
    with pytest.raises(ConfigError, match="not in the URDF"):
        ArmRigidBody.from_urdf(URDF, ["panda_joint1", "elbow"])


def test_filter_is_zero_phase_and_differentiates_a_sine_from_irregular_stamps():
    rng = np.random.default_rng(1)
    t = np.cumsum(rng.uniform(0.002, 0.006, 3000))
    w = 2 * np.pi * 0.7
    q = np.sin(w * t)[:, None]
    f = filter_joint_signals(t, q, w * np.cos(w * t)[:, None] + 0.01 * rng.normal(size=(3000, 1)))
    inner = slice(200, -200)
    np.testing.assert_allclose(f.qdd[inner, 0], -(w**2) * np.sin(w * t[inner]), atol=0.02 * w**2)
    assert cutoff_for(100.0) == 10.0 and cutoff_for(1000.0) == 10.0 and cutoff_for(40.0) == pytest.approx(8.0)


def test_least_squares_recovers_the_true_torque_without_noise(gen):
    rec = gen.generate(10.0, options=GeneratorOptions(rate_hz=200.0, noise=False), seed=3)
    arm = ArmRigidBody.from_urdf(URDF, JOINTS)
    truth = ArmRigidBody.from_urdf(URDF, JOINTS).with_parameters(gen.pi)
    tau_rigid = truth.inverse_dynamics(rec.q_true, rec.qd_true, rec.qdd_true)
    fit = idn.identify(arm, rec.q_true, rec.qd_true, rec.qdd_true, tau_rigid)
    assert fit.base_count < 7 * 10 + 21  # some parameters never reach the torques
    pred = idn.predict(arm, fit, rec.q_true, rec.qd_true, rec.qdd_true)
    assert idn.relative_error_percent(tau_rigid, pred).max() < 0.5
    # the carried-back full parameters give M, C, g of an arm with the same torques
    k = len(rec.q_true) // 2
    ident = arm.with_parameters(fit.pi)
    M = ident.mass_matrix(rec.q_true[k])
    np.testing.assert_allclose(
        M @ rec.qdd_true[k]
        + ident.coriolis_matrix(rec.q_true[k], rec.qd_true[k]) @ rec.qd_true[k]
        + ident.gravity_torque(rec.q_true[k]),
        tau_rigid[k],
        atol=1e-6 * np.abs(tau_rigid).max(),
    )


def test_trained_model_file_is_self_contained_and_never_worse_than_its_fit_on_validation(trained, bags):
    result, out = trained
    meta = read_arm_metadata(out)
    assert meta["family"] == "arm" and meta["joints"] == JOINTS and "<robot" in meta["urdf"]
    model = ArmModel(out)
    assert model.joints == tuple(JOINTS)
    _, test_bag, mapping, _ = bags
    s = filtered_samples([read_arm_bag(test_bag, mapping)], 0.0, 5.0, raw_tau=True)
    pred = model.inverse_dynamics(s.q, s.qd, s.qdd)
    fit = model.inverse_dynamics(s.q, s.qd, s.qdd, residual=False)
    # friction from the graph equals the numpy friction of the fitted parameters
    np.testing.assert_allclose(
        model.non_rigid_torque(s.q, s.qd) - model.residual_torque(s.q, s.qd),
        model.friction_torque(s.qd),
        atol=1e-4,
    )
    assert np.all(np.isfinite(pred))
    urdf_nominal = ArmRigidBody.from_urdf(URDF, JOINTS).inverse_dynamics(s.q, s.qd, s.qdd)
    rre_model = idn.relative_error_percent(s.tau, pred).mean()
    rre_fit = idn.relative_error_percent(s.tau, fit).mean()
    rre_nominal = idn.relative_error_percent(s.tau, urdf_nominal).mean()
    assert rre_fit < 0.5 * rre_nominal  # identification beats the URDF on a recording it never saw
    residual = result.metrics["residual"]
    if residual["enabled"]:
        assert residual["validation_gain_percent"] >= 1.0
    else:
        np.testing.assert_array_equal(model.residual_torque(s.q, s.qd), 0.0)
    assert rre_model < 1.05 * rre_fit


def test_gear_ripple_is_found_at_its_spatial_frequency():
    rng = np.random.default_rng(3)
    t = np.linspace(0, 20, 20000)
    q = np.stack([np.sin(0.5 * t) * 2, np.cos(0.3 * t)], 1)
    qd = np.gradient(q, t, axis=0)
    ripple = np.stack([0.3 * np.sin(241.0 * q[:, 0] + 0.4), np.zeros(len(t))], 1)
    target = ripple + 0.1 * rng.normal(size=q.shape)
    half = len(t) // 2
    r = ripple_mod.fit_ripple(q[:half], qd[:half], target[:half], rate_hz=1000.0)
    assert r.report["joints"][0]["kept"] and r.report["joints"][0]["strongest_k"] == pytest.approx(
        241.0, abs=0.5
    )
    assert not r.report["joints"][1]["kept"]  # noise alone: switched off
    pred = r.torque(q[half:], qd[half:])
    assert np.sqrt(np.mean((pred[:, 0] - ripple[half:, 0]) ** 2)) < 0.1 * 0.3


def test_ripple_spectrum_of_every_fold_equals_the_projection_of_its_own_samples():
    """The one-pass spectrum (sums per block) against each fold's lines written out on its own rows:
    the mean-removed projection of the rest onto sin and cos of every grid frequency."""
    rng = np.random.default_rng(5)
    n, folds, lines = 3000, 5, 12
    q = np.cumsum(rng.normal(scale=0.01, size=n))
    y = 0.2 * np.sin(150.0 * q) + 0.1 * np.cos(87.5 * q) + 0.05 * rng.normal(size=n) + 0.7
    bounds = np.linspace(0, n, folds + 1).astype(int)
    spectrum = ripple_mod._Spectrum(q, y, 200.0, bounds)
    grid = np.arange(10.0, 200.0, ripple_mod.GRID_STEP)
    for held in [*range(folds), None]:
        rest = np.ones(n, dtype=bool)
        if held is not None:
            rest[bounds[held] : bounds[held + 1]] = False
        qr, yr = q[rest], y[rest] - y[rest].mean()
        power = np.array(
            [np.mean(np.sin(k * qr) * yr) ** 2 + np.mean(np.cos(k * qr) * yr) ** 2 for k in grid]
        )
        expected = np.sort(grid[np.argsort(power)[-lines:]])
        use = np.arange(folds) != held
        np.testing.assert_array_equal(spectrum.strongest(lines, use), expected)
    assert spectrum.strongest(1, np.ones(folds, dtype=bool))[0] == 150.0


def test_mapping_keys_for_motor_currents_and_one_line_errors():
    m = ArmMapping(actuated_joints=["a", "b"], effort="motor_current", effort_scale={"a": 0.1})
    assert m.gains() == [0.1, 1.0]
    for bad, match in (
        (dict(actuated_joints=[]), "actuated_joints"),
        (dict(actuated_joints=["a", "a"]), "twice"),
        (dict(actuated_joints=["a"], effort="amps"), "effort"),
        (dict(actuated_joints=["a"], effort_scale={"a": 2.0}), "motor_current"),
        (
            dict(actuated_joints=["a"], effort="motor_current", effort_scale={"z": 2.0}),
            "not an actuated joint",
        ),
        (dict(actuated_joints=["a"], effort="motor_current", effort_scale={"a": float("nan")}), "finite"),
    ):
        with pytest.raises(ConfigError, match=match):
            ArmMapping(**bad)


def test_a_file_that_is_not_an_arm_model_is_refused(tmp_path):
    bogus = tmp_path / "x.onnx"
    bogus.write_bytes(b"not onnx")
    with pytest.raises(ModelError):
        ArmModel(bogus)
    shipped = Path(__file__).resolve().parents[2] / "models" / "crane_servo_lnn.onnx"
    if shipped.is_file():
        with pytest.raises(ModelError, match="not an arm model"):
            ArmModel(shipped)


def _cli(*argv, cwd):
    return subprocess.run(
        [sys.executable, "-m", "ros_lnn.cli", *map(str, argv)],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=600,
    )


def test_cli_train_evaluate_and_bench_on_the_arm_flow(tmp_path, bags, trained):
    train_bag, test_bag, mapping, _ = bags
    config = tmp_path / "arm.yaml"
    scale = "{" + ", ".join(f"{j}: {g!r}" for j, g in mapping.effort_scale.items()) + "}"
    config.write_text(
        f"bag:\n  actuated_joints: [{', '.join(JOINTS)}]\n  effort: motor_current\n  effort_scale: {scale}\n"
    )
    out = tmp_path / "model.onnx"
    r = _cli(
        "train",
        "--config",
        config,
        "--urdf",
        URDF,
        "--bag",
        train_bag,
        "--test-bag",
        test_bag,
        "--epochs",
        "30",
        "--out",
        out,
        cwd=tmp_path,
    )
    assert r.returncode == 0, r.stderr[-2000:]
    assert "base parameters, condition number" in r.stdout and "no force" not in r.stdout
    assert "motor current × drive gain" in r.stdout
    assert out.is_file()
    report = json.loads((tmp_path / "model_report" / "metrics.json").read_text())
    assert report["metrics"]["training_samples"] > 0 and "test" in report["test"]
    assert (tmp_path / "model_report" / "test_test_torque.png").is_file()
    js = tmp_path / "eval.json"
    r = _cli(
        "evaluate",
        "--model",
        out,
        "--bag",
        test_bag,
        "--json",
        js,
        "--plots",
        tmp_path / "plots",
        cwd=tmp_path,
    )
    assert r.returncode == 0, r.stderr[-2000:]
    metrics = json.loads(js.read_text())["test"]
    assert set(metrics["torque_rre_percent"]) == set(JOINTS)
    assert metrics["torque_rre_mean_percent"] == pytest.approx(
        np.mean(list(metrics["torque_rre_percent"].values()))
    )
    assert metrics["least_squares_fit"]["torque_rre_mean_percent"] > 0
    assert (tmp_path / "plots" / "test_torque.png").is_file()
    # an arm config without a URDF: one line, exit 2
    bare = tmp_path / "bare.yaml"
    bare.write_text(f"bag:\n  actuated_joints: [{', '.join(JOINTS)}]\n")
    r = _cli("train", "--config", bare, "--bag", train_bag, "--out", tmp_path / "x.onnx", cwd=tmp_path)
    assert r.returncode == 2 and "URDF" in r.stderr and "Traceback" not in r.stderr


def test_arm_urdf_from_the_option_or_the_config_relative_to_it(tmp_path):
    from ros_lnn.arm.run import arm_urdf
    from ros_lnn.training.spec import RunSpec

    (tmp_path / "robots").mkdir()
    config = tmp_path / "arm.yaml"
    config.write_text(
        f"bag:\n  actuated_joints: [{', '.join(JOINTS)}]\n  robot_description: robots/arm.urdf\n"
    )
    mapping = ArmMapping.from_yaml(config)
    spec = RunSpec(bag_config=str(config))
    assert Path(arm_urdf(spec, mapping)) == tmp_path / "robots" / "arm.urdf"
    spec = RunSpec(bag_config=str(config), bag_mapping={"robot_description": str(URDF)})  # --urdf wins
    assert arm_urdf(spec, mapping) == str(URDF)


def test_bench_realarm_last_line_on_a_generated_arm(tmp_path, bags):
    train_bag, test_bag, mapping, _ = bags
    config = tmp_path / "arm.yaml"
    scale = "{" + ", ".join(f"{j}: {g!r}" for j, g in mapping.effort_scale.items()) + "}"
    config.write_text(
        f"bag:\n  actuated_joints: [{', '.join(JOINTS)}]\n  effort: motor_current\n  effort_scale: {scale}\n"
    )
    js = tmp_path / "bench.json"
    r = _cli(
        "bench",
        "realarm",
        "--bag",
        train_bag,
        "--test-bag",
        test_bag,
        "--config",
        config,
        "--urdf",
        URDF,
        "--epochs",
        "20",
        "--json",
        js,
        cwd=tmp_path,
    )
    assert r.returncode == 0, r.stderr[-2000:]
    lines = [line for line in r.stdout.splitlines() if line.strip()]
    last = next(line for line in reversed(lines) if line.startswith("held-out torque rre"))
    fig = json.loads(js.read_text())
    assert last == (
        f"held-out torque rre [%]: learned {fig['learned']:.2f}, regressor-OLS {fig['regressor_ols']:.2f}, "
        f"URDF-nominal {fig['urdf_nominal']:.2f}, ratio L/R = {fig['ratio']:.3f}; "
        f"standing: learned {fig['standing_learned']:.2f}, "
        f"regressor-OLS {fig['standing_regressor_ols']:.2f}, "
        f"ratio Ls/Rs = {fig['standing_ratio']:.3f}"
    )
    assert fig["regressor_ols"] < fig["urdf_nominal"] and np.isfinite(fig["ratio"])
    # the standing figures are the rows' standing means, over the samples with |q̇| < 0.02 rad/s
    rows = {r["model"].split(" (")[0]: r for r in fig["rows"]}
    assert fig["standing_learned"] == fig["rows"][-1]["standing_mean"]
    assert fig["standing_regressor_ols"] == rows["regressor least squares + friction"]["standing_mean"]
    assert "standing: |q̇| < 0.02 rad/s" in r.stdout
    share = " ".join(f"{v:.1f}" for v in fig["above_filter"]["share_percent"])
    assert f"filter: torque share [%] {share}; coherence with the logged velocity" in r.stdout


def test_run_observer_with_a_model_equals_the_sample_by_sample_path(trained, bags):
    from ros_lnn.arm import observer as ob

    _, out = trained
    _, test_bag, mapping, _ = bags
    rec = read_arm_bag(test_bag, mapping)
    t, q, qd, tau = rec.t[:300], rec.q[:300], rec.qd[:300], rec.tau[:300]
    model = ArmModel(out)
    batched = ob.run_observer(ob.MomentumObserver(model, 50.0), t, q, qd, tau)
    one = ob.MomentumObserver(model, 50.0)
    single = np.array([one.update(float(t[k]), q[k], qd[k], tau[k]) for k in range(len(t))])
    # the graph runs in float32: a batch and single rows differ in the last bits of its outputs
    np.testing.assert_allclose(batched, single, rtol=1e-5, atol=1e-6)
    assert np.abs(batched).max() > 0


def test_residual_ensemble_is_the_mean_of_its_members_in_torch_and_in_the_onnx_file(tmp_path):
    import onnxruntime as ort
    import torch

    from ros_lnn.arm.residual import export_arm_onnx, train_residual
    from ros_lnn.arm.ripple import Ripple

    rng = np.random.default_rng(3)
    q, qd = rng.uniform(-2, 2, size=(2, 600, 3))
    target = np.sin(2 * q) + 0.3 * np.tanh(qd / 0.05)
    options = ResidualOptions(epochs=40, patience=40, hidden=4, ensemble=3, seed=5, batch=50)
    res = train_residual(
        q[:500], qd[:500], target[:500], q[500:], qd[500:], target[500:], [False] * 3, 0.05, options
    )
    assert res.enabled and res.members == 3 and len(res.history) == 3
    assert res.val_error < 0.5 * res.val_error_fit  # the members learned the shape
    x, xd = torch.as_tensor(q[500:], dtype=torch.float32), torch.as_tensor(qd[500:], dtype=torch.float32)
    with torch.no_grad():
        outputs = [member(x, xd).numpy() for member in res.net.members]
        together = res.net(x, xd).numpy()
    assert np.abs(outputs[0] - outputs[1]).max() > 1e-3  # different seeds, different members
    np.testing.assert_allclose(together, (outputs[0] + outputs[1] + outputs[2]) / 3, atol=1e-6)
    path = export_arm_onnx(tmp_path / "e.onnx", np.zeros(9), 0.05, res.net, Ripple.none(3), {})
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    friction, residual = session.run(
        None, {"q": q[500:].astype(np.float32), "qd": qd[500:].astype(np.float32)}
    )
    np.testing.assert_allclose(residual, together, atol=1e-5)
    np.testing.assert_allclose(friction, 0.0, atol=0)
    torch.randn(7)  # whatever ran before, the same options train the same members
    again = train_residual(
        q[:500], qd[:500], target[:500], q[500:], qd[500:], target[500:], [False] * 3, 0.05, options
    )
    assert again.history == res.history
