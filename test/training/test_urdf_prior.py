"""The URDF prior (gray box): the torch rigid-body model against Pinocchio's own algorithms, the
identification from a recording (physically consistent, better than the URDF it started from), and
end to end: trained on a step recording with a wrong URDF, the model transfers to an impulse
recording, which the same run without the URDF does not, and the excitation report says why."""

import json

import numpy as np
import pytest
import yaml

from conftest import requires_torch

pytestmark = requires_torch
torch = pytest.importorskip("torch")
pin = pytest.importorskip("pinocchio")

from furuta_helpers import (  # noqa: E402
    MAPPING,
    RotaryPendulum,
    impulse_servo,
    record,
    step_servo,
    urdf,
    write_joint_states_bag,
)

from ros_lnn.models.rigid_body import RigidBodyPrior  # noqa: E402
from ros_lnn.training.urdf_prior import (  # noqa: E402
    identify,
    pin_configuration,
    prior_config,
    pseudo_inertia,
    read_urdf,
    regressor,
)

#: A prismatic joint, an unaligned revolute axis, rpy origins, a fixed tool (lumped) and a continuous joint.
CHAIN = """<robot name="chain3">
  <link name="base"/>
  <joint name="slide" type="prismatic"><parent link="base"/><child link="cart"/>
    <origin xyz="0.1 -0.2 0.3" rpy="0.1 0.2 -0.3"/><axis xyz="1 0 0"/>
    <limit lower="-10" upper="10" effort="1" velocity="1"/></joint>
  <link name="cart"><inertial><origin xyz="0.01 0.02 -0.03" rpy="0.3 0 0.1"/><mass value="0.7"/>
    <inertia ixx="0.02" ixy="0.001" ixz="0.002" iyy="0.03" iyz="-0.001" izz="0.025"/></inertial></link>
  <joint name="shoulder" type="revolute"><parent link="cart"/><child link="upper"/>
    <origin xyz="0.05 0.1 0.0" rpy="0 0.4 0"/><axis xyz="0.6 0 0.8"/>
    <limit lower="-10" upper="10" effort="1" velocity="1"/></joint>
  <link name="upper"><inertial><origin xyz="0.1 0.05 -0.2"/><mass value="0.4"/>
    <inertia ixx="0.004" ixy="0.0002" ixz="0" iyy="0.003" iyz="0.0001" izz="0.002"/></inertial></link>
  <joint name="tool_mount" type="fixed"><parent link="upper"/><child link="tool"/>
    <origin xyz="0 0 -0.3"/></joint>
  <link name="tool"><inertial><origin xyz="0 0 -0.02"/><mass value="0.1"/>
    <inertia ixx="1e-4" ixy="0" ixz="0" iyy="1e-4" iyz="0" izz="1e-4"/></inertial></link>
  <joint name="elbow" type="continuous"><parent link="upper"/><child link="fore"/>
    <origin xyz="0 0 -0.3" rpy="0.2 0 0"/><axis xyz="0 1 0"/></joint>
  <link name="fore"><inertial><origin xyz="0.02 0 -0.15"/><mass value="0.3"/>
    <inertia ixx="0.002" ixy="0" ixz="0.0003" iyy="0.002" iyz="0" izz="0.0005"/></inertial></link>
</robot>
"""


def test_rigid_body_model_matches_pinocchio(tmp_path):
    path = tmp_path / "chain3.urdf"
    path.write_text(CHAIN)
    joints = ["elbow", "slide", "shoulder"]  # model order differs from the URDF's
    u = read_urdf(path, joints)
    assert u.types == ["prismatic", "revolute", "revolute"] and u.wraps == [False, False, True]
    prior = RigidBodyPrior.from_config(prior_config(u, u.params), joints)
    rng = np.random.default_rng(0)
    q, qd, qdd = rng.normal(size=(3, 6, 3))
    M, V, dV, Q_c = (x.numpy() for x in prior.terms(torch.tensor(q), torch.tensor(qd)))
    data = u.model.createData()
    perm = np.argsort(u.index)
    for k in range(6):
        c, v, a = pin_configuration(u, q[k]), qd[k][u.index], qdd[k][u.index]
        M_pin = pin.crba(u.model, data, c)
        M_pin = np.triu(M_pin) + np.triu(M_pin, 1).T
        g = pin.computeGeneralizedGravity(u.model, data, c)
        assert np.allclose(M[k], M_pin[np.ix_(perm, perm)], atol=1e-12)
        assert np.allclose(dV[k], g[perm], atol=1e-12)
        assert np.allclose(Q_c[k], (pin.rnea(u.model, data, c, v, np.zeros(3)) - g)[perm], atol=1e-12)
        assert V[k] == pytest.approx(pin.computePotentialEnergy(u.model, data, c), abs=1e-12)
        # the regressor is linear in the URDF's parameters and reproduces the inverse dynamics
        tau = regressor(u, q[k : k + 1], qd[k : k + 1], qdd[k : k + 1])[0] @ u.params.reshape(-1)
        assert np.allclose(tau, pin.rnea(u.model, data, c, v, a)[perm], atol=1e-12)


def test_urdf_joints_must_match_the_mapping(tmp_path):
    from ros_lnn.errors import ConfigError

    path = tmp_path / "chain3.urdf"
    path.write_text(CHAIN)
    with pytest.raises(
        ConfigError, match=r"not in the URDF: \['wrist'\].*but not in the mapping: \['elbow'\]"
    ):
        read_urdf(path, ["slide", "shoulder", "wrist"])


def test_consistent_least_squares_stays_in_the_cone():
    """A fit whose unconstrained optimum is not physically consistent (a point mass asked for more
    first moment than its mass and inertia allow) ends on a consistent body, on the boundary."""
    from ros_lnn.training.urdf_prior import consistent_least_squares

    prior = np.array([[0.13, 0.0, 0.0, -0.0286, 0.00629, 0.0, 0.00629, 0.0, 0.0, 0.0]])
    # rows that want m·c_z = −0.05 while holding the mass and I_xx, I_yy (unconstrained: inconsistent)
    B = np.zeros((4, 10))
    B[0, 3], B[1, 4], B[2, 0], B[3, 6] = 1.0, 10.0, 10.0, 10.0
    d = np.array([-0.05 + 0.0286, 0.0, 0.0, 0.0])
    body = prior[0] + consistent_least_squares(B, d, prior, 0)
    assert 0.05**2 > 0.13 * 0.00629  # the unconstrained optimum violates h² ≤ m I
    assert np.linalg.eigvalsh(pseudo_inertia(body)).min() > -1e-12 and body[0] > 0
    assert body[3] < -0.0287  # moved toward the data as far as consistency allows


def _pendulum_nmse(u, params, damping, coulomb, trial):
    """q̈_f of the rigid model with ``params`` on ``trial`` (textbook reference: the trial's exact q̈)."""
    Y = regressor(u, trial.q, trial.qd, trial.qdd)[:, 0, :]
    f = Y @ params.reshape(-1) + damping * trial.qd[:, 0] + coulomb * np.tanh(trial.qd[:, 0] / 0.05)
    unit = np.zeros_like(trial.qdd)
    unit[:, 0] = 1.0
    M_ff = (regressor(u, trial.q, 0 * trial.qd, unit) - regressor(u, trial.q, 0 * trial.qd, 0 * trial.qdd))[
        :, 0
    ]
    err = f / (M_ff @ params.reshape(-1))  # = q̈̂_f − q̈_f
    return float(np.mean(err**2) / np.var(trial.qdd[:, 0]))


def test_identification_from_a_step_fixes_a_wrong_urdf(tmp_path):
    system = RotaryPendulum()
    step = record(system, step_servo(), 6.0, name="step")
    impulse = record(system, impulse_servo(hold=3.0), 6.0, name="impulse")
    path = tmp_path / "wrong.urdf"
    path.write_text(urdf(m=0.13, l=0.22, r=0.14))
    u = read_urdf(path, ["pendulum_joint", "arm_joint"])
    samples = {"q": step.q, "qd": step.qd, "qdd": step.qdd, "Q": np.zeros_like(step.q)}
    ident = identify(u, samples, 1, use_qe=False)
    for body in ident.params:
        assert body[0] > 0 and np.linalg.eigvalsh(pseudo_inertia(body)).min() > -1e-12
    before = _pendulum_nmse(u, u.params, 0.0, 0.0, impulse)
    after = _pendulum_nmse(u, ident.params, ident.damping[0], ident.coulomb[0], impulse)
    assert before > 5e-3 and after < 2e-4
    # the servo arm's own inertia does not enter the pendulum's equation: left at the URDF's value
    assert np.allclose(ident.params[0], u.params[0])
    assert ident.damping[0] > 0 and ident.damping[1] == 0.0


@pytest.fixture(scope="module")
def rotary_bags(tmp_path_factory):
    root = tmp_path_factory.mktemp("prior")
    system = RotaryPendulum()
    step = write_joint_states_bag(root / "step", record(system, step_servo(), 6.0, name="step"))
    impulse = write_joint_states_bag(
        root / "impulse", record(system, impulse_servo(hold=3.0), 6.0, name="impulse")
    )
    (root / "wrong.urdf").write_text(urdf(m=0.13, l=0.22, r=0.14))
    kinds = {"arm_joint": "cyclic", "pendulum_joint": "continuous"}
    (root / "rotary.yaml").write_text(yaml.safe_dump({"bag": {**MAPPING, "joint_kinds": kinds}}))
    return root, step, impulse


def _train(root, step, impulse, out, *extra):
    from ros_lnn.cli import main

    return main(
        [
            "train",
            "--bag",
            str(step),
            "--test-bag",
            str(impulse),
            "--config",
            str(root / "rotary.yaml"),
            "--epochs",
            "60",
            "--lr",
            "1e-3",
            "--batch",
            "256",
            "--hidden",
            "16",
            "--exporter",
            "torchscript",
            "--dtype",
            "float64",
            "--export-dtype",
            "float64",
            "--threads",
            "1",
            "--log-every",
            "30",
            "--val-every",
            "30",
            "--out",
            str(out),
            *extra,
        ]
    )


def test_step_transfers_to_impulse_with_the_urdf_prior_only(rotary_bags, tmp_path, capsys):
    pytest.importorskip("onnxruntime")
    from ros_lnn.inference.runtime import ServoLnnRuntime

    root, step, impulse = rotary_bags
    assert _train(root, step, impulse, tmp_path / "black.onnx") == 0
    black_log = capsys.readouterr().out
    assert _train(root, step, impulse, tmp_path / "gray.onnx", "--urdf", str(root / "wrong.urdf")) == 0
    gray_log = capsys.readouterr().out
    black = ServoLnnRuntime(tmp_path / "black.onnx").metadata.metrics["qdd_f_nmse"]
    gray = ServoLnnRuntime(tmp_path / "gray.onnx").metadata.metrics["qdd_f_nmse"]
    assert gray <= 1e-3 and black > 1e-2, (gray, black)
    # the excitation report says why the step alone cannot do it, in the log and the report folder
    assert "runs at nearly constant speed" in black_log and "cannot be told apart" in black_log
    text = (tmp_path / "black_report" / "identifiability.txt").read_text()
    assert "arm_joint (servo, cyclic)" in text and "record arm_joint with varying speed" in text
    assert "URDF prior (free rows" in gray_log and "overall scale is fixed by the URDF" in gray_log
    doc = json.loads((tmp_path / "gray_report" / "metrics.json").read_text())
    assert doc["identifiability"]["prior"]["identified_directions"] >= 3

    # the exported graph carries the rigid body: the runtime agrees with the torch model
    from ros_lnn.training.checkpoint import load_checkpoint

    model, _ = load_checkpoint(tmp_path / "gray_checkpoints" / "final.pt")
    model = model.double()
    rt = ServoLnnRuntime(tmp_path / "gray.onnx")
    rng = np.random.default_rng(1)
    q, qd = rng.normal(size=(2, 16, 2))
    qdd_e = rng.normal(size=(16, 1))
    ours = rt.evaluate(q, qd, qdd_e, np.zeros((16, 1)))
    with torch.no_grad():
        ref = model(
            torch.tensor(q), torch.tensor(qd), torch.tensor(qdd_e), torch.zeros(16, 1, dtype=torch.float64)
        )
    for key in ("qdd", "Q_e", "M", "E", "Q_dissipative"):  # two float64 implementations of sin, cos, solve
        assert np.allclose(ours[key], ref[key].numpy(), rtol=1e-7, atol=1e-10), key
