"""ServoLNN's learned dissipation and cyclic coordinates, checked against physics: the energy balance
``Ė = q̇ᵀ Q − q̇ᵀ D q̇ − Σ c |q̇| tanh`` holds for the model (autograd and finite differences along a
trajectory), ``D`` is positive semidefinite, forward and inverse mode agree, the ONNX graph exports
``Q_dissipative`` and the runtime's inverse mode accounts for it; a model without dissipation keeps
the conservative graph; a model trained on arm angles in [0, 20] rad predicts the same at 200 rad."""

import numpy as np
import pytest
import yaml

from conftest import requires_torch

pytestmark = requires_torch
torch = pytest.importorskip("torch")

from ros_lnn.models.servo_lnn import ServoLNN  # noqa: E402


def _model(dissipation="rayleigh_coulomb", cyclic=(), angles=(), seed=0):
    torch.manual_seed(seed)
    model = ServoLNN(
        ["theta", "psi"],
        ["phi"],
        hidden=(16, 16),
        dissipation=dissipation,
        cyclic_joints=cyclic,
        angle_joints=angles,
    ).double()
    with torch.no_grad():  # a damping that depends on q and couples the joints
        model.damping.weight.normal_(0.0, 0.3)
        model.damping.bias.normal_(0.0, 0.3)
        if dissipation == "rayleigh_coulomb":
            model.coulomb_raw.fill_(-1.0)
    return model


def _trajectory(t):
    """A smooth trajectory with its exact velocities and accelerations (3 coordinates)."""
    w = np.array([1.3, 0.7, 2.1])
    a = np.array([0.8, 0.5, 1.5])
    q = a * np.sin(w * t[:, None]) + np.array([0.1, -0.2, 0.3]) * t[:, None]
    qd = a * w * np.cos(w * t[:, None]) + np.array([0.1, -0.2, 0.3])
    qdd = -a * w**2 * np.sin(w * t[:, None])
    return (torch.as_tensor(x, dtype=torch.float64) for x in (q, qd, qdd))


@pytest.mark.parametrize("dissipation", ["rayleigh", "rayleigh_coulomb"])
def test_energy_balance_holds_with_dissipation(dissipation):
    model = _model(dissipation)
    t = np.linspace(0.0, 3.0, 61)
    q, qd, qdd = _trajectory(t)
    q.requires_grad_(True)
    qd.requires_grad_(True)
    out = model.inverse(q, qd, qdd)
    # dE/dt by autograd: ∂E/∂q · q̇ + ∂E/∂q̇ · q̈
    gq, gqd = torch.autograd.grad(out["E"].sum(), (q, qd))
    E_dot = ((gq * qd).sum(-1) + (gqd * qdd).sum(-1)).detach()
    Q, Q_d = out["Q"].detach(), out["Q_dissipative"].detach()
    D = model.damping_matrix(q.detach()).detach()
    qd0 = qd.detach()
    friction = -(qd0 * Q_d).sum(-1) - torch.einsum("bi,bij,bj->b", qd0, D, qd0)  # Coulomb power, ≥ 0
    assert torch.allclose(
        E_dot,
        (qd0 * Q).sum(-1) - torch.einsum("bi,bij,bj->b", qd0, D, qd0) - friction,
        rtol=1e-10,
        atol=1e-10,
    )
    assert torch.allclose(out["E_dot"].detach(), E_dot, rtol=1e-10, atol=1e-10)
    if dissipation == "rayleigh":
        assert torch.allclose(friction, torch.zeros_like(friction), atol=1e-12)
    else:
        c = torch.nn.functional.softplus(model.coulomb_raw.detach())
        coulomb = (c * qd0 * torch.tanh(qd0 / model.coulomb_velocity)).sum(-1)
        assert torch.allclose(friction, coulomb, rtol=1e-10, atol=1e-12) and (coulomb > 0).all()
    eig = torch.linalg.eigvalsh(D)
    assert (eig > -1e-12).all() and (eig.max(-1).values > 1e-3).all()
    assert ((qd0 * Q_d).sum(-1) <= 0).all() and ((qd0 * Q_d).sum(-1) < -1e-4).any()

    # finite differences of E along the trajectory against the model's E_dot
    h = 1e-5
    q_p, qd_p, _ = _trajectory(t + h)
    q_m, qd_m, _ = _trajectory(t - h)
    with torch.no_grad():
        fd = (model.inverse(q_p, qd_p, qdd)["E"] - model.inverse(q_m, qd_m, qdd)["E"]) / (2 * h)
    assert torch.allclose(fd, out["E_dot"].detach(), rtol=1e-6, atol=1e-6)


def test_forward_and_inverse_agree_with_dissipation():
    model = _model()
    q, qd, qdd = _trajectory(np.linspace(0, 2, 20))
    Q_f = torch.randn(20, 2, dtype=torch.float64)
    with torch.no_grad():
        fwd = model(q, qd, qdd[:, 2:], Q_f)
        inv = model.inverse(q, qd, fwd["qdd"])
    assert torch.allclose(inv["Q"][:, :2], Q_f, atol=1e-10)
    assert torch.allclose(inv["Q_e"], fwd["Q_e"], atol=1e-10)
    # without the dissipative force the same accelerations need other forces: the term is not inert
    assert not torch.allclose(fwd["Q_dissipative"], torch.zeros_like(fwd["Q_dissipative"]))


def test_without_dissipation_the_model_is_the_conservative_one():
    torch.manual_seed(3)
    plain = ServoLNN(["theta"], ["x"], hidden=(8,))
    torch.manual_seed(3)
    same = ServoLNN(["theta"], ["x"], hidden=(8,), dissipation="", cyclic_joints=())
    assert plain.config() == same.config() and "dissipation" not in plain.config()
    assert list(plain.state_dict()) == list(same.state_dict())
    q, qd = torch.randn(5, 2), torch.randn(5, 2)
    out = same(q, qd, torch.randn(5, 1), torch.zeros(5, 1))
    assert "Q_dissipative" not in out and not same.extra_forces


def test_onnx_exports_q_dissipative_and_runtime_inverse_accounts_for_it(tmp_path):
    pytest.importorskip("onnxruntime")
    from ros_lnn.inference.runtime import ServoLnnRuntime
    from ros_lnn.models.export import export_onnx

    model = _model(cyclic=("phi",))
    path = export_onnx(model, tmp_path / "d.onnx", dtype="float64", dynamo=False)
    rt = ServoLnnRuntime(path)
    assert "Q_dissipative" in rt.output_names
    q, qd, qdd = _trajectory(np.linspace(0, 2, 15))
    Q_f = np.zeros((15, 2))
    ours = rt.evaluate(q.numpy(), qd.numpy(), qdd[:, 2:].numpy(), Q_f)
    with torch.no_grad():
        ref = model(q, qd, qdd[:, 2:], torch.zeros(15, 2))
        ref_inv = model.inverse(q, qd, qdd)
    for key in ("qdd", "Q_e", "Q_dissipative", "E_dot", "E"):
        assert np.allclose(ours[key], ref[key].numpy(), rtol=1e-9, atol=1e-9), key
    single = rt.evaluate(q[0].numpy(), qd[0].numpy(), qdd[0, 2:].numpy(), Q_f[0])
    assert np.allclose(single["Q_dissipative"], ref["Q_dissipative"][0].numpy(), atol=1e-9)
    inv = rt.inverse(q.numpy(), qd.numpy(), qdd.numpy())
    for key in ("Q", "power", "E_dot"):
        assert np.allclose(inv[key], ref_inv[key].numpy(), rtol=1e-9, atol=1e-9), key


@pytest.fixture(scope="module")
def step_bag(tmp_path_factory):
    from furuta_helpers import RotaryPendulum, record, step_servo, write_joint_states_bag

    root = tmp_path_factory.mktemp("cyclic")
    trial = record(RotaryPendulum(), step_servo(speed=6.0), 3.6, name="step")
    assert 15.0 < trial.q[:, 1].max() < 20.5  # the arm angle covers [0, 20] rad
    return write_joint_states_bag(root / "step", trial), trial


@pytest.mark.parametrize("kind", ["cyclic", "continuous", "revolute"])
def test_trained_on_arm_angles_to_20_rad_predicts_the_same_at_200(step_bag, tmp_path, kind, capsys):
    pytest.importorskip("onnxruntime")
    from furuta_helpers import MAPPING

    from ros_lnn.cli import main
    from ros_lnn.inference.runtime import ServoLnnRuntime

    bag, trial = step_bag
    config = tmp_path / "m.yaml"
    config.write_text(yaml.safe_dump({"bag": {**MAPPING, "joint_kinds": {"arm_joint": kind}}}))
    out = tmp_path / "m.onnx"
    assert (
        main(
            [
                "train",
                "--bag",
                str(bag),
                "--config",
                str(config),
                "--epochs",
                "40",
                "--hidden",
                "16",
                "--batch",
                "256",
                "--lr",
                "3e-3",
                "--dtype",
                "float64",
                "--export-dtype",
                "float64",
                "--threads",
                "1",
                "--no-report",
                "--out",
                str(out),
            ]
        )
        == 0
    ), capsys.readouterr().out
    rt = ServoLnnRuntime(out)
    q, qd, qdd = trial.q[::7], trial.qd[::7], trial.qdd[::7]
    base = rt.evaluate(q, qd, qdd[:, 1:], np.zeros((len(q), 1)))
    shift = 2 * np.pi * 30 if kind == "continuous" else 180.0  # to about 200 rad
    far = rt.evaluate(q + [0.0, shift], qd, qdd[:, 1:], np.zeros((len(q), 1)))
    same = np.allclose(far["qdd_f"], base["qdd_f"], rtol=1e-9, atol=1e-9)
    assert same == (kind != "revolute")
    if kind != "revolute":
        assert np.allclose(far["Q_e"], base["Q_e"], rtol=1e-9, atol=1e-9)
