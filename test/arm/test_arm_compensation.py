"""An identified arm model in the controller: the certain model built from it and its compensated term
(ros_lnn.arm.compensation) give the model's own inverse dynamics, M and g (evaluated by ArmModel on its
own Pinocchio model and ONNX graph); a body that is not physically consistent is refused; the robot's
description is checked against the model's URDF (ros_lnn.arm.description)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pinocchio as pin
import pytest

from conftest import requires_torch

ROOT = Path(__file__).resolve().parents[2]
URDF = ROOT / "config" / "robots" / "panda" / "panda.urdf"
JOINTS = tuple(f"panda_joint{i}" for i in range(1, 8))


@pytest.fixture(scope="module")
def model_path(tmp_path_factory):
    """A real small training run: the simulated Panda with friction outside the model's law, the fit
    and a residual (kept whatever its gain, so that the compensated term has one)."""
    from ros_lnn.arm import simulation as sim
    from ros_lnn.arm.mapping import ArmMapping
    from ros_lnn.arm.residual import ResidualOptions
    from ros_lnn.arm.training import train_arm

    arm, truth, friction, noise = sim.panda_generator()
    run = sim.simulate_arm(truth, 8.0, nominal=arm, friction=friction, noise=noise, seed=41)
    out = tmp_path_factory.mktemp("arm") / "panda.onnx"
    options = ResidualOptions(ensemble=1, epochs=3, time_limit_s=20, min_gain=-1.0)
    train_arm([run.recording("r")], URDF, ArmMapping(actuated_joints=JOINTS), out=out, options=options)
    return out


def _states(k, seed=0):
    rng = np.random.default_rng(seed)
    base = np.array([0.0, 0, 0, -1.5, 0, 1.5, 0])
    return [
        (base + rng.uniform(-0.7, 0.7, 7), rng.uniform(-1, 1, 7), rng.uniform(-2, 2, 7)) for _ in range(k)
    ]


@requires_torch
def test_feedforward_on_the_certain_model_with_the_compensation_is_the_models_inverse_dynamics(model_path):
    from ros_lnn.arm.compensation import ArmCompensation, certain_model
    from ros_lnn.arm.model import ArmModel
    from ros_lnn.control.pipeline import DacPipeline
    from ros_lnn.physics.multibody.pin import PinocchioModel

    model = ArmModel(model_path)
    assert model.residual_enabled
    compensation = ArmCompensation(model)
    law = DacPipeline(
        certain_model(model), law="feedforward_pd", ee_link="panda_hand_tcp", compensation=compensation,
        effort_limits=[1e6] * 7,
    )  # fmt: skip
    assert law.joint_names == list(JOINTS)
    pm = PinocchioModel(certain_model(model))
    for q, qd, qdd in _states(6):
        law.set_joint_trajectory([0.0, 1.0, 2.0], [q, q, q], [qd] * 3, [qdd] * 3)
        law.reset_compensation()  # a friction memory starts neutral, as the model's default state
        u = law.step(q, qd, 1.0).efforts.effort  # at a point: q, q̇, q̈ exactly
        np.testing.assert_allclose(u, model.inverse_dynamics(q, qd, qdd)[0], atol=2e-5, rtol=1e-6)
        compensation.reset()
        np.testing.assert_allclose(compensation.torque(q, qd), model.non_rigid_torque(q, qd)[0], atol=2e-5)
        M = pin.crba(pm.pin, pm.data, q)
        np.testing.assert_allclose(np.triu(M) + np.triu(M, 1).T, model.mass_matrix(q), atol=1e-10)
        np.testing.assert_allclose(
            pin.computeGeneralizedGravity(pm.pin, pm.data, q), model.gravity_torque(q), atol=1e-10
        )


@requires_torch
def test_the_compensation_advances_the_friction_memory_sample_by_sample(model_path):
    from ros_lnn.arm.compensation import ArmCompensation
    from ros_lnn.arm.model import ArmModel

    model = ArmModel(model_path)
    compensation = ArmCompensation(model)
    states, state = _states(8, seed=5), None
    for q, qd, _ in states:  # the model stepped by hand: the state each sample leaves to the next
        expected, state = model.step_non_rigid(q, qd, state)
        np.testing.assert_allclose(compensation.torque(q, qd), expected, atol=1e-12)
    compensation.reset()
    q, qd, _ = states[0]
    np.testing.assert_allclose(compensation.torque(q, qd), model.step_non_rigid(q, qd, None)[0], atol=1e-12)


@requires_torch
def test_the_robots_description_gives_the_same_certain_model(model_path):
    from ros_lnn.arm.compensation import certain_model
    from ros_lnn.arm.model import ArmModel
    from ros_lnn.physics.multibody.pin import PinocchioModel

    model = ArmModel(model_path)
    text = URDF.read_text().replace('<robot name="panda"', '<robot name="panda_on_the_robot"', 1)
    assert "panda_on_the_robot" in text
    a, b = (PinocchioModel(certain_model(model, d)) for d in (None, text))
    q, qd, qdd = _states(1, seed=3)[0]
    np.testing.assert_allclose(
        pin.rnea(a.pin, a.data, q, qd, qdd), pin.rnea(b.pin, b.data, q, qd, qdd), atol=1e-12
    )
    assert "panda_hand_tcp" in certain_model(model, text).frames


@requires_torch
def test_a_body_that_is_not_physically_consistent_is_refused_in_one_line(model_path, tmp_path):
    import json

    import onnx

    from ros_lnn.arm.compensation import certain_model
    from ros_lnn.arm.model import METADATA_KEY, ArmModel

    proto = onnx.load(str(model_path))
    for prop in proto.metadata_props:
        if prop.key == METADATA_KEY:
            meta = json.loads(prop.value)
            meta["pi"][30] = -1.0  # the body of panda_joint4: a negative mass
            prop.value = json.dumps(meta)
    bad = tmp_path / "inconsistent.onnx"
    onnx.save(proto, str(bad))
    with pytest.raises(Exception, match="body of panda_joint4 is not physically consistent") as err:
        certain_model(ArmModel(bad))
    assert "\n" not in str(err.value)


def test_description_mismatch_names_the_joint_and_what_differs():
    from ros_lnn.arm.description import description_mismatch

    text = URDF.read_text()
    assert description_mismatch(text, text, JOINTS) == ""
    assert description_mismatch(text.replace("panda_finger_joint2", "gripper_joint"), text, JOINTS) == ""
    moved = text.replace('xyz="0 0 0.333"', 'xyz="0 0 0.343"')
    assert moved != text
    said = description_mismatch(moved, text, JOINTS)
    assert said.startswith("joint panda_joint1's frame is 0.01 m") and "(kinematics)" in said
    turned = text.replace('<axis xyz="0 0 1"/>', '<axis xyz="0 1 0"/>', 3)
    assert "(kinematics)" in description_mismatch(turned, text, JOINTS)
    renamed = text.replace("panda_joint4", "joint_4")
    assert description_mismatch(renamed, text, JOINTS).startswith("it has no joint(s) ['panda_joint4']")
    assert "not a URDF" in description_mismatch("<robot name='x'/>", text, JOINTS)
