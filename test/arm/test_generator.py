"""The arm recording generator: its bags read back exactly, its torques are the true arm's, and
least squares recovers them when the generated friction is within the model's reach."""

from pathlib import Path

import numpy as np
import pytest

from ros_lnn.arm import friction
from ros_lnn.arm import identification as idn
from ros_lnn.arm.generator import ArmGenerator, GeneratorOptions, Payload, write_recording
from ros_lnn.arm.recording import read_arm_bag

URDF = Path(__file__).resolve().parents[2] / "config" / "robots" / "panda" / "panda.urdf"
JOINTS = [f"panda_joint{i}" for i in range(1, 8)]


@pytest.fixture(scope="module")
def gen():
    return ArmGenerator(URDF, JOINTS, seed=4)


@pytest.mark.parametrize(("storage", "effort"), [("sqlite3", "motor_current"), ("mcap", "joint_states")])
def test_bag_reads_back_exactly(tmp_path, gen, storage, effort):
    opts = GeneratorOptions(rate_hz=250.0, jitter=0.15, drop=0.03, effort=effort)
    rec = gen.generate(4.0, options=opts, seed=5)
    bag = write_recording(tmp_path / "arm", rec, storage=storage)
    assert (bag / "metadata.yaml").is_file()
    back = read_arm_bag(bag, rec.mapping)
    assert back.joints == tuple(JOINTS)
    assert back.counts["non_finite_dropped"] == 0 and back.counts["duplicates"] == 0
    np.testing.assert_array_equal(back.t, (rec.stamp_ns - rec.stamp_ns[0]) * 1e-9)
    np.testing.assert_array_equal(back.q, rec.q)
    np.testing.assert_array_equal(back.qd, rec.qd)
    gains = gen.gains if effort == "motor_current" else np.ones(7)
    np.testing.assert_array_equal(back.tau, rec.effort * gains)
    # the log is irregular: jitter and dropped samples around the nominal 4 ms
    steps = np.diff(back.t)
    assert 0.9 * 4.0 / 0.004 * (1 - opts.drop) < len(back) < 4.0 / 0.004
    assert steps.max() > 1.5 * 0.004 and steps.min() < 0.9 * 0.004
    # noise: the logged effort is not the true torque, but close to it
    err = back.tau - rec.tau_true
    assert 0 < np.abs(err).max() < 0.05 * np.abs(rec.tau_true).max()
    if effort == "motor_current":  # quantised current
        steps_a = rec.effort / opts.current_lsb_a
        np.testing.assert_allclose(steps_a, np.round(steps_a), atol=1e-6)


def test_true_arm_differs_from_urdf_and_is_consistent(gen):
    import pinocchio as pin

    urdf = gen.nominal.body_parameters()
    rel = np.abs(gen.pi[::10] - urdf[::10]) / urdf[::10]
    assert rel.max() > 0.02 and rel.max() <= 0.15 + 1e-12
    for b in range(7):
        body = pin.Inertia.FromDynamicParameters(gen.pi[10 * b : 10 * b + 10])
        eig = np.linalg.eigvalsh(np.array(body.inertia))
        assert body.mass > 0 and eig.min() > 0 and 2 * eig.max() <= eig.sum() * (1 + 1e-9)


def test_payload_torque_is_a_point_mass_weight(gen):
    """At rest, a point payload adds Jᵀ m g at its position (a reference built from Pinocchio's
    Jacobian, not from inertial parameters)."""
    import pinocchio as pin

    payload = Payload(1.7, [0.01, -0.02, 0.15])
    rng = np.random.default_rng(0)
    q = rng.uniform(gen.limits.lower, gen.limits.upper, size=(5, 7))
    zero = np.zeros_like(q)
    delta = gen.torque(q, zero, zero, payload) - gen.torque(q, zero, zero)
    model = gen.nominal.model
    assert np.array_equal(gen.nominal.order, np.arange(7))
    data = model.createData()
    jid = model.getJointId(JOINTS[-1])
    for k in range(len(q)):
        pin.computeJointJacobians(model, data, q[k])
        J = pin.getJointJacobian(model, data, jid, pin.ReferenceFrame.LOCAL)
        R = data.oMi[jid].rotation
        Jp = R @ (J[:3] - pin.skew(payload.com) @ J[3:])  # world-frame velocity of the payload point
        np.testing.assert_allclose(delta[k], Jp.T @ np.array([0.0, 0.0, 1.7 * 9.81]), atol=1e-9)


def test_noise_free_recording_identifies_to_the_true_torques(tmp_path):
    """Friction within the model (no Stribeck, no spring, the model's Coulomb width), no noise: the
    least-squares fit on the recording's samples reproduces the true torques."""
    gen = ArmGenerator(
        URDF, JOINTS, seed=7, stribeck=False, spring=False, coulomb_velocity=friction.COULOMB_VELOCITY
    )
    rec = gen.generate(8.0, options=GeneratorOptions(rate_hz=200.0, noise=False), seed=8)
    back = read_arm_bag(write_recording(tmp_path / "clean", rec), rec.mapping)
    np.testing.assert_allclose(back.tau, rec.tau_true, rtol=1e-12, atol=1e-12)
    np.testing.assert_array_equal(back.q, rec.q_true)
    fit = idn.identify(gen.nominal, back.q, back.qd, rec.qdd_true, back.tau)
    pred = idn.predict(gen.nominal, fit, back.q, back.qd, rec.qdd_true)
    assert idn.relative_error_percent(back.tau, pred).max() < 1e-6
    np.testing.assert_allclose(fit.phi, gen.friction.model_part(), rtol=1e-6, atol=1e-8)
    # the nominal URDF (no fit) is far off: the generated arm is not the URDF
    nominal = gen.nominal.inverse_dynamics(back.q, back.qd, rec.qdd_true)
    assert idn.relative_error_percent(back.tau, nominal).mean() > 5.0


def test_command_line_writes_bag_mapping_and_truth(tmp_path):
    import json

    from ros_lnn.arm.mapping import ArmMapping
    from ros_lnn.cli import main

    bag = tmp_path / "gen"
    argv = [str(URDF), "--joints", ",".join(JOINTS), "--duration", "3", "--rate", "100", "-o", str(bag)]
    assert main(["generate-arm", *argv, "--payload", "1.5,0,0,0.1", "--trajectory", "random"]) == 0
    mapping = ArmMapping.from_yaml(f"{bag}.mapping.yaml")
    assert mapping.effort == "motor_current" and len(mapping.effort_scale) == 7
    rec = read_arm_bag(bag, mapping)
    assert 250 < len(rec) <= 300
    truth = json.loads(open(f"{bag}.truth.json").read())
    assert truth["payload"]["mass_kg"] == 1.5 and len(truth["pi"]) == 70
    assert main(["generate-arm", *argv[:-1], str(tmp_path / "x"), "--payload", "1,2"]) == 2
