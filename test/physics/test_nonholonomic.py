"""Nonholonomic reference systems (nonholonomic-LNN paper): the Lagrange–d'Alembert law keeps the
constraint, the constraint forces do no work, energy is conserved, and two examples match their closed
forms."""

import numpy as np
import pytest

from ros_lnn.physics.nonholonomic import (
    SYSTEMS,
    lagrange_dalembert,
    make_dataset,
    particle,
    rolling_disk,
    simulate,
)


def random_states(system, k=30, seed=0):
    rng = np.random.default_rng(seed)
    states = [system.sample_state(rng) for _ in range(k)]
    return np.stack([s[0] for s in states]), np.stack([s[1] for s in states])


@pytest.mark.parametrize("name", sorted(SYSTEMS))
def test_constraint_derivative_vanishes_and_multipliers_do_no_work(name):
    system = SYSTEMS[name]()
    q, qd = random_states(system)
    np.testing.assert_allclose(system.constraint(q, qd), 0.0, atol=1e-12)
    # b = (∂Φ/∂q) q̇ against a central difference along q̇
    h = 1e-6
    fd = (system.constraint(q + h * qd, qd) - system.constraint(q - h * qd, qd)) / (2 * h)
    np.testing.assert_allclose(system.constraint_drift(q, qd), fd, atol=1e-8)
    qdd, lam = system.acceleration(q, qd)
    A = system.constraint_matrix(q)
    np.testing.assert_allclose(
        np.einsum("kij,kj->ki", A, qdd) + system.constraint_drift(q, qd), 0.0, atol=1e-12
    )
    constraint_power = np.einsum("ki,kij,kj->k", qd, np.swapaxes(A, -1, -2), lam)
    np.testing.assert_allclose(constraint_power, 0.0, atol=1e-12)
    # the unconstrained law would break the constraint: the multipliers are not trivially zero
    assert np.abs(lam).max() > 1e-3


@pytest.mark.parametrize("name", sorted(SYSTEMS))
def test_simulation_keeps_constraint_and_energy(name):
    system = SYSTEMS[name]()
    rng = np.random.default_rng(4)
    q0, qd0 = system.sample_state(rng)
    sim = simulate(system, q0, qd0, 15.0, 76)
    assert sim["success"]
    assert np.abs(sim["constraint"]).max() < 1e-7
    assert np.ptp(sim["energy"]) < 1e-7 * sim["energy"][0]


def test_particle_matches_closed_form():
    system = particle()
    q, qd = random_states(system)
    qdd, lam = system.acceleration(q, qd)
    x_d, y, y_d = qd[:, 0], q[:, 1], qd[:, 1]
    np.testing.assert_allclose(lam[:, 0], x_d * y_d / (1 + y**2), atol=1e-13)
    np.testing.assert_allclose(qdd[:, 0], -y * x_d * y_d / (1 + y**2), atol=1e-13)
    np.testing.assert_allclose(qdd[:, 1], 0.0, atol=1e-13)


def test_rolling_disk_spins_and_turns_at_constant_rates():
    system = rolling_disk()
    q, qd = random_states(system)
    qdd, _ = system.acceleration(q, qd)
    np.testing.assert_allclose(qdd[:, 2:], 0.0, atol=1e-12)
    R, phi = 1.0, q[:, 3]
    # ẍ = d/dt (R θ̇ cos φ) = −R θ̇ φ̇ sin φ
    np.testing.assert_allclose(qdd[:, 0], -R * qd[:, 2] * qd[:, 3] * np.sin(phi), atol=1e-12)


def test_lagrange_dalembert_reduces_to_plain_dynamics_when_constraint_is_inactive():
    rng = np.random.default_rng(0)
    W = np.eye(3) * 2.0
    F = rng.normal(size=3)
    A = np.array([[0.0, 0.0, 1.0]])
    # a force already compatible with the constraint row (no third component) needs no multiplier
    F[2] = 0.0
    qdd, lam = lagrange_dalembert(W, F, A, np.zeros(1))
    np.testing.assert_allclose(lam, 0.0, atol=1e-15)
    np.testing.assert_allclose(qdd, F / 2.0)


def test_dataset_is_on_the_constraint():
    system = SYSTEMS["drone"]()
    data = make_dataset(system, 3, 2.0, 11, seed=1)
    assert data["q"].shape == (33, 3) and set(np.unique(data["trajectory"])) == {0, 1, 2}
    np.testing.assert_allclose(system.constraint(data["q"], data["qd"]), 0.0, atol=1e-7)
