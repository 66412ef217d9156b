"""Crane (pendulum cart): analytic partials, closed-form equations vs the shared machinery."""

import numpy as np
import pytest

from ros_lnn.physics.crane import Crane

RNG = np.random.default_rng(7)


def random_states(n=50):
    q = np.stack([RNG.uniform(-3, 3, n), RNG.uniform(-2, 2, n)], axis=-1)
    qd = RNG.normal(size=(n, 2)) * 2
    return q, qd


def central_difference(f, q, h=1e-6):
    """∂f/∂q_k stacked on a new axis just after the batch axis: (N, k, ...)."""
    cols = []
    for k in range(q.shape[-1]):
        dq = np.zeros_like(q)
        dq[..., k] = h
        cols.append((f(q + dq) - f(q - dq)) / (2 * h))
    return np.stack(cols, axis=1)


def test_mass_matrix_and_potential_partials_match_finite_differences():
    crane = Crane()
    q, _ = random_states()
    np.testing.assert_allclose(
        crane.mass_matrix_partials(q), central_difference(crane.mass_matrix, q), atol=1e-8
    )
    np.testing.assert_allclose(crane.potential_gradient(q), central_difference(crane.potential, q), atol=1e-8)


def test_kinetic_energy_matches_paper_expression():
    crane = Crane()
    q, qd = random_states()
    th, thd, xd = q[:, 0], qd[:, 0], qd[:, 1]
    T = 0.5 * (0.45 + 0.13) * xd**2 + 0.13 * 1.5 * xd * thd * np.cos(th) + 0.5 * 0.13 * 1.5**2 * thd**2
    out = crane.dynamics(q, qd, qdd=np.zeros_like(q))
    np.testing.assert_allclose(out["T"], T, rtol=1e-13, atol=1e-15)
    np.testing.assert_allclose(out["V"], -0.13 * 9.8 * 1.5 * np.cos(th), rtol=1e-13)


def test_forward_mode_matches_closed_form():
    crane = Crane()
    q, qd = random_states()
    x_dd = RNG.normal(size=len(q)) * 3
    torque = RNG.normal(size=len(q)) * 0.1
    out = crane.dynamics(q, qd, qdd_e=x_dd[:, None], Q_f=torque[:, None])
    theta_dd, force = crane.closed_form_acceleration(q[:, 0], qd[:, 0], x_dd, torque)
    np.testing.assert_allclose(out["qdd"][:, 0], theta_dd, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(out["qdd"][:, 1], x_dd, rtol=0, atol=0)
    np.testing.assert_allclose(out["Q_e"][:, 0], force, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(out["Q"][:, 0], torque, atol=1e-12)


def test_inverse_of_forward_returns_applied_forces():
    crane = Crane()
    q, qd = random_states()
    x_dd = RNG.normal(size=(len(q), 1))
    torque = RNG.normal(size=(len(q), 1))
    fwd = crane.dynamics(q, qd, qdd_e=x_dd, Q_f=torque)
    inv = crane.dynamics(q, qd, qdd=fwd["qdd"])
    np.testing.assert_allclose(inv["Q"][:, :1], torque, atol=1e-12)
    np.testing.assert_allclose(inv["Q_e"], fwd["Q_e"], atol=1e-12)


def test_force_driven_crane_recovers_servo_acceleration():
    """Applying the servo view's Q_e as a cart force to the all-free crane reproduces ẍ (Sec. 3.4)."""
    crane = Crane()
    free = crane.with_servo([])
    assert free.free_names == ("pendulum_joint", "cart_joint") and crane.servo_names == ("cart_joint",)
    q, qd = random_states()
    x_dd = RNG.normal(size=(len(q), 1))
    servo_view = crane.dynamics(q, qd, qdd_e=x_dd, Q_f=np.zeros((len(q), 1)))
    force_view = free.dynamics(
        q,
        qd,
        qdd_e=np.zeros((len(q), 0)),
        Q_f=np.concatenate([np.zeros((len(q), 1)), servo_view["Q_e"]], axis=-1),
    )
    np.testing.assert_allclose(force_view["qdd"], servo_view["qdd"], atol=1e-11)


def test_energy_rate_equals_power_pointwise():
    crane = Crane()
    q, qd = random_states()
    out = crane.dynamics(q, qd, qdd_e=RNG.normal(size=(len(q), 1)), Q_f=RNG.normal(size=(len(q), 1)))
    np.testing.assert_allclose(out["E_dot"], np.einsum("ni,ni->n", qd, out["Q"]), atol=1e-12)


@pytest.mark.parametrize("shape", [(), (3,), (2, 4)])
def test_batch_dimensions(shape):
    crane = Crane(m1=1.0, m2=0.5, L=0.7, g=9.81)
    q = RNG.normal(size=shape + (2,))
    assert crane.mass_matrix(q).shape == shape + (2, 2)
    assert crane.mass_matrix_partials(q).shape == shape + (2, 2, 2)
    assert crane.potential(q).shape == shape
    assert crane.potential_gradient(q).shape == shape + (2,)
