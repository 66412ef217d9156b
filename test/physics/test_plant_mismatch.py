"""The simulated arm that differs from its description: friction, payload and rotor inertia held against
physics computed independently (the payload point's potential energy and kinetic energy from the
description's kinematics by finite differences, the friction law), off by default, and the residual the
learned port approximates."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pinocchio as pin
import pytest

from ros_lnn.errors import ConfigError
from ros_lnn.physics.multibody.build import load_model
from ros_lnn.physics.multibody.pin import forward_dynamics, kinematics
from ros_lnn.physics.multibody.pin_plant import Plant, PlantMismatch, mismatch_from_values
from ros_lnn.physics.multibody.pin_sim import rk4_step

URDF = Path(__file__).resolve().parents[2] / "config" / "dac_chain.urdf"
RNG = np.random.default_rng(3)


@pytest.fixture(scope="module")
def arm():
    return load_model(URDF)


def _state(n=5):
    return RNG.uniform(-1, 1, n), RNG.uniform(-1, 1, n), RNG.uniform(-3, 3, n)


def test_off_by_default_the_plant_is_the_description(arm):
    plant = Plant(arm)
    assert not plant.mismatch.active
    for _ in range(5):
        q, qd, _ = _state()
        u = RNG.normal(size=5)
        assert np.array_equal(plant.forward_dynamics(q, qd, u), forward_dynamics(plant.certain, q, qd, u))
        assert np.abs(plant.residual(q, qd, RNG.normal(size=5))).max() < 1e-12


def test_friction_is_viscous_plus_regularised_coulomb(arm):
    d, c, v = np.array([0.5, 0.4, 0.3, 0.2, 0.1]), np.array([0.4, 0.3, 0.2, 0.1, 0.05]), 0.03
    plant = Plant(arm, PlantMismatch(viscous=tuple(d), coulomb=tuple(c), coulomb_velocity=v))
    for _ in range(5):
        q, qd, qdd = _state()
        assert np.allclose(plant.residual(q, qd, qdd), d * qd + c * np.tanh(qd / v), rtol=1e-12, atol=1e-12)
    # friction only takes energy out: with gravity cancelled by its own torque, the kinetic energy falls
    # by the friction's work ∫ q̇ᵀτ_f dt
    q, qd = np.array([0.2, -0.6, 1.2, 0.4, 0.3]), np.array([0.5, -0.4, 0.3, 0.6, -0.8])
    pm = plant.pmodel.pin
    data = pm.createData()

    def kinetic(q, qd):
        H = pin.crba(pm, data, q)
        H = np.triu(H) + np.triu(H, 1).T
        return 0.5 * qd @ H @ qd

    def gravity(t, q, qd):
        return pin.computeGeneralizedGravity(pm, data, q).copy()

    t0, work, dt = kinetic(q, qd), 0.0, 1e-4
    for _ in range(200):
        p0 = float(qd @ plant.friction(qd))
        q, qd = rk4_step(plant.pmodel, q, qd, dt, gravity, dynamics=plant.forward_dynamics)
        work += 0.5 * dt * (p0 + float(qd @ plant.friction(qd)))
    assert work > 0.01
    assert abs((t0 - kinetic(q, qd)) - work) < 1e-4 * work  # trapezoid rule on the power, O(dt²)


def _payload_point(arm, q, body, offset):
    """World position of a point fixed in ``body`` at ``offset`` from its CoM (description kinematics)."""
    from ros_lnn.physics.multibody.pin import PinocchioModel

    data = kinematics(PinocchioModel(arm), q, np.zeros(len(q)), dynamics=False)
    return data.r[body] + data.R[body] @ offset, data.R[body]


def test_payload_weight_and_inertia_match_the_point_mass_from_finite_differences(arm):
    m, offset, inertia = 0.4, np.array([0.05, 0.01, -0.02]), np.array([3e-4, 2e-4, 1e-4])
    plant = Plant(
        arm, PlantMismatch(payload_mass=m, payload_offset=tuple(offset), payload_inertia=tuple(inertia))
    )
    body, g = arm.n_bodies - 1, np.asarray(arm.gravity)
    q = np.array([0.3, -0.7, 1.1, 0.5, -0.4])
    # static residual = ∂V/∂q of the payload's potential energy V = −m gᵀ p(q)
    h = 1e-6
    grad = np.array(
        [
            (
                -m * g @ _payload_point(arm, q + h * e, body, offset)[0]
                + m * g @ _payload_point(arm, q - h * e, body, offset)[0]
            )
            / (2 * h)
            for e in np.eye(5)
        ]
    )
    assert np.allclose(plant.residual(q, np.zeros(5), np.zeros(5)), grad, atol=1e-7)
    # inertia the description lacks: m J_pᵀJ_p + J_ωᵀ R I Rᵀ J_ω (Jacobians by finite differences)
    Jp = np.column_stack(
        [
            (
                _payload_point(arm, q + h * e, body, offset)[0]
                - _payload_point(arm, q - h * e, body, offset)[0]
            )
            / (2 * h)
            for e in np.eye(5)
        ]
    )
    R = _payload_point(arm, q, body, offset)[1]
    Jw = []
    for e in np.eye(5):
        dR = (
            _payload_point(arm, q + h * e, body, offset)[1] - _payload_point(arm, q - h * e, body, offset)[1]
        ) / (2 * h)
        W = dR @ R.T
        Jw.append([W[2, 1], W[0, 2], W[1, 0]])
    Jw = np.array(Jw).T
    dH = m * Jp.T @ Jp + Jw.T @ R @ np.diag(inertia) @ R.T @ Jw
    H_plant = pin.crba(plant.pmodel.pin, plant.pmodel.pin.createData(), q)
    H_model = pin.crba(plant.certain.pin, plant.certain.pin.createData(), q)
    assert np.allclose(np.triu(H_plant - H_model), np.triu(dH), atol=1e-8)


def test_rotor_inertia_adds_to_the_diagonal(arm):
    rotor = np.array([0.02, 0.01, 0.005, 0.002, 0.001])
    plant = Plant(arm, PlantMismatch(rotor_inertia=tuple(rotor)))
    q, qd, qdd = _state()
    assert np.allclose(plant.residual(q, qd, qdd), rotor * qdd, atol=1e-12)
    # and the plant accelerates accordingly: (H + I_r) q̈ = u − (C q̇ + g)
    u = RNG.normal(size=5)
    a = plant.forward_dynamics(q, qd, u)
    assert np.allclose(plant.inverse_dynamics(q, qd, a), u, atol=1e-10)


def test_settings_are_checked_and_taken_by_name():
    with pytest.raises(ConfigError, match="friction"):
        PlantMismatch(viscous=(-1.0,))
    with pytest.raises(ConfigError, match="finite"):
        PlantMismatch(payload_mass=float("nan"))
    with pytest.raises(ConfigError, match="unknown setting"):
        mismatch_from_values({"payload": 1.0})
    assert mismatch_from_values({"viscous": [0.1, 0.2], "payload_mass": 0.5}).viscous == (0.1, 0.2)
    arm = load_model(URDF)
    with pytest.raises(ConfigError, match="one per joint"):
        Plant(arm, PlantMismatch(viscous=(0.1, 0.2)))
