"""The linear-in-parameters port: the least-squares fit recovers a mismatched plant's residual (a payload,
rotor inertia, friction — built by :class:`Plant` from Pinocchio inertias and armature, not from the
regressor) at states it was not fitted on, and a fit read back from its record gives the same efforts."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from ros_lnn.errors import ModelError
from ros_lnn.physics.multibody.build import load_model
from ros_lnn.physics.multibody.pin import PinocchioModel
from ros_lnn.physics.multibody.pin_plant import Plant, PlantMismatch
from ros_lnn.physics.multibody.regressor import RegressorPort, fit_regressor_port, load_model_text

URDF = Path(__file__).resolve().parents[2] / "config" / "dac_chain.urdf"
MISMATCH = PlantMismatch(
    viscous=(0.5, 0.4, 0.3, 0.2, 0.05),
    coulomb=(0.4, 0.3, 0.25, 0.15, 0.05),
    coulomb_velocity=0.05,
    payload_mass=0.3,
    payload_offset=(0.05, 0.01, -0.02),
    payload_inertia=(2e-4, 3e-4, 1e-4),
    rotor_inertia=(0.01, 0.02, 0.005, 0.003, 0.001),
)
YAML_ARM = """
name: arm3
gravity: [0, 0, -9.81]
bodies:
  - {name: a, mass: 1.0, inertia: [0.01, 0.01, 0.002]}
  - {name: b, mass: 0.7, inertia: [0.005, 0.005, 0.001]}
  - {name: c, mass: 0.4, inertia: [0.002, 0.002, 0.0005]}
joints:
  - {name: j1, type: revolute, parent: world, child: a, axis: [0, 0, 1],
     parent_anchor: [0, 0, 0], child_anchor: [0, 0, -0.1]}
  - {name: j2, type: revolute, parent: a, child: b, axis: [0, 1, 0],
     parent_anchor: [0, 0, 0.1], child_anchor: [-0.15, 0, 0]}
  - {name: j3, type: revolute, parent: b, child: c, axis: [0, 1, 0],
     parent_anchor: [0.15, 0, 0], child_anchor: [-0.1, 0, 0]}
"""


def _states(rng, count, n):
    return rng.uniform(-1.5, 1.5, (count, n)), rng.uniform(-2, 2, (count, n)), rng.uniform(-6, 6, (count, n))


def _residuals(plant, q, qd, qdd):
    return np.array([plant.residual(*s) for s in zip(q, qd, qdd)])


def test_the_fit_recovers_the_plants_residual_at_new_states():
    arm = load_model(URDF)
    plant = Plant(arm, MISMATCH)
    rng = np.random.default_rng(0)
    q, qd, qdd = _states(rng, 400, 5)
    fit = fit_regressor_port(PinocchioModel(arm), q, qd, qdd, _residuals(plant, q, qd, qdd), 0.05)
    q2, qd2, qdd2 = _states(rng, 200, 5)
    exact = _residuals(plant, q2, qd2, qdd2)
    got = fit.batch(q2, qd2, qdd2)
    assert np.abs(got - exact).max() < 1e-8 * np.abs(exact).max()
    # friction reaches each joint alone: it comes back as the plant's own (a rotor's inertia may merge
    # with its link's inertia about the same axis, so only their sum is determined)
    assert np.allclose(fit.viscous, MISMATCH.viscous, atol=1e-8)
    assert np.allclose(fit.coulomb, MISMATCH.coulomb, atol=1e-8)
    assert np.abs(fit.offset).max() < 1e-8
    # one sample is a row of the regressor times θ
    assert np.allclose(fit.rows(q2[0], qd2[0], qdd2[0]) @ fit.theta, got[0], rtol=1e-12, atol=1e-12)


def test_a_fit_of_the_wrong_kind_leaves_a_remainder():
    """Friction with another Coulomb velocity is not of the fit's kind: the fit is close, not exact
    (the check above is not passing by construction)."""
    arm = load_model(URDF)
    plant = Plant(arm, PlantMismatch(coulomb=(0.4, 0.3, 0.25, 0.15, 0.05), coulomb_velocity=0.3))
    rng = np.random.default_rng(1)
    q, qd, qdd = _states(rng, 400, 5)
    fit = fit_regressor_port(PinocchioModel(arm), q, qd, qdd, _residuals(plant, q, qd, qdd), 0.05)
    exact = _residuals(plant, q, qd, qdd)
    assert np.abs(fit.batch(q, qd, qdd) - exact).max() > 1e-3 * np.abs(exact).max()


@pytest.mark.parametrize("fmt", ["urdf", "yaml"])
def test_a_fit_read_back_from_its_record_gives_the_same_efforts(fmt):
    text = URDF.read_text() if fmt == "urdf" else YAML_ARM
    model = load_model_text(text, fmt, f"test.{fmt}")
    pmodel = PinocchioModel(model)
    n = pmodel.nv
    rng = np.random.default_rng(2)
    q, qd, qdd = _states(rng, 300, n)
    tau = rng.normal(size=(300, n))  # any data: the record must reproduce the fit, whatever it is
    fit = fit_regressor_port(pmodel, q, qd, qdd, tau, 0.1, text, fmt)
    back = RegressorPort.from_dict(fit.to_dict())
    assert back.pmodel.joint_names == pmodel.joint_names and back.coulomb_velocity == 0.1
    assert np.array_equal(back.batch(q[:20], qd[:20], qdd[:20]), fit.batch(q[:20], qd[:20], qdd[:20]))
    record = fit.to_dict() | {"theta": fit.theta[:-1].tolist()}
    with pytest.raises(ModelError, match="parameters"):
        RegressorPort.from_dict(record)
    with pytest.raises(ModelError, match="model format"):
        RegressorPort.from_dict(fit.to_dict() | {"model_format": "sdf"})
