"""Planar chain from partial Lagrangians: analytic partials, closed forms, Table 1 structure,
extension and reconstruction, energy conservation."""

import numpy as np
import pytest

from ros_lnn.errors import ConfigError
from ros_lnn.physics.chain import Link, PlanarChain, rod
from ros_lnn.physics.simulate import simulate

RNG = np.random.default_rng(3)


def mixed_chain():
    return PlanarChain(
        [
            rod("shoulder", 3.0, 2.0),
            Link("slide", "prismatic", 1.0, 1.0, 0.4, 0.05),
            Link("elbow", mass=0.5, length=0.7, com=0.3, inertia=0.02),
            Link("wrist", mass=0.2, length=0.4),
        ],
        servo_joints=("slide",),
    )


def states(n, batch=20):
    return RNG.normal(size=(batch, n)), RNG.normal(size=(batch, n)), RNG.normal(size=(batch, n))


def central_difference(f, q, h=1e-6):
    eye = np.eye(q.shape[-1])
    return np.stack([(f(q + h * eye[k]) - f(q - h * eye[k])) / (2 * h) for k in range(q.shape[-1])], axis=1)


def test_partials_match_finite_differences_per_link_and_whole():
    chain = mixed_chain()
    q, _, _ = states(chain.n)
    np.testing.assert_allclose(
        chain.mass_matrix_partials(q), central_difference(chain.mass_matrix, q), atol=1e-7
    )
    np.testing.assert_allclose(chain.potential_gradient(q), central_difference(chain.potential, q), atol=1e-7)
    for i in range(len(chain.links)):
        M_i = lambda x, i=i: chain.link_terms(x, i)[0]  # noqa: E731
        np.testing.assert_allclose(chain.link_terms(q, i)[1], central_difference(M_i, q), atol=1e-7)


def test_link_terms_depend_only_on_earlier_coordinates():
    chain = mixed_chain()
    q, _, _ = states(chain.n)
    for i in range(chain.n):
        M, dM, _V, dV = chain.link_terms(q, i)
        assert np.all(dM[:, i + 1 :] == 0) and np.all(dV[:, i + 1 :] == 0)
        assert np.all(M[:, i + 1 :, :] == 0) and np.all(M[:, :, i + 1 :] == 0)


def test_mass_matrix_is_symmetric_positive_definite():
    M = mixed_chain().mass_matrix(states(4)[0])
    np.testing.assert_allclose(M, np.swapaxes(M, -1, -2), atol=1e-14)
    assert np.all(np.linalg.eigvalsh(M) > 0)


def test_single_point_mass_link_is_the_simple_pendulum():
    m, l, g = 3.0, 2.0, 9.8
    chain = PlanarChain([Link("joint_1", mass=m, length=l)], g=g)
    q, qd, qdd = states(1)
    out = chain.dynamics(q, qd, qdd=qdd)
    np.testing.assert_allclose(out["Q"][:, 0], m * l**2 * qdd[:, 0] + m * g * l * np.sin(q[:, 0]), rtol=1e-12)
    np.testing.assert_allclose(out["V"], -m * g * l * np.cos(q[:, 0]), rtol=1e-12)
    np.testing.assert_allclose(out["T"], 0.5 * m * l**2 * qd[:, 0] ** 2, rtol=1e-12)


def test_double_pendulum_matches_textbook_mass_matrix_and_gravity():
    (m1, m2), (l1, l2), g = (3.0, 1.0), (2.0, 1.0), 9.8  # the paper's double pendulum
    chain = PlanarChain([Link("a", mass=m1, length=l1), Link("b", mass=m2, length=l2)], g=g)
    q, _, _ = states(2)
    c2 = np.cos(q[:, 1])
    M = chain.mass_matrix(q)
    np.testing.assert_allclose(M[:, 0, 0], (m1 + m2) * l1**2 + m2 * l2**2 + 2 * m2 * l1 * l2 * c2, rtol=1e-12)
    np.testing.assert_allclose(M[:, 0, 1], m2 * l2**2 + m2 * l1 * l2 * c2, rtol=1e-12)
    np.testing.assert_allclose(M[:, 1, 1], m2 * l2**2, rtol=1e-12)
    phi1, phi2 = q[:, 0], q[:, 0] + q[:, 1]
    V = -(m1 + m2) * g * l1 * np.cos(phi1) - m2 * g * l2 * np.cos(phi2)
    np.testing.assert_allclose(chain.potential(q), V, rtol=1e-12)


def test_prismatic_last_link_is_the_variable_length_pendulum():
    m, l, g = 0.7, 1.2, 9.8
    chain = PlanarChain(
        [Link("swing", mass=1e-3, length=0.0, com=0.0), Link("reel", "prismatic", mass=m, length=l)], g=g
    )
    # The first link is a (nearly) massless zero-length hub: the body is a point mass m at distance
    # r = l + d from the pivot at angle θ. Closed form with the hub's tiny mass at the origin.
    q, qd, qdd = states(2)
    th, d = q[:, 0], q[:, 1]
    r = l + d
    Q = chain.dynamics(q, qd, qdd=qdd)["Q"]
    tau = m * r**2 * qdd[:, 0] + 2 * m * r * qd[:, 1] * qd[:, 0] + m * g * r * np.sin(th)
    force = m * qdd[:, 1] - m * r * qd[:, 0] ** 2 - m * g * np.cos(th)
    np.testing.assert_allclose(Q[:, 0], tau, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(Q[:, 1], force, rtol=1e-12, atol=1e-12)
    assert chain.coordinate_units == ("rad", "m")


def test_partial_forces_sum_to_whole_system_and_are_upper_triangular():
    chain = mixed_chain()
    q, qd, qdd = states(chain.n)
    P = chain.partial_forces(q, qd, qdd)
    assert P.shape == (len(q), chain.n, len(chain.links))
    np.testing.assert_allclose(P.sum(-1), chain.dynamics(q, qd, qdd=qdd)["Q"], rtol=1e-12, atol=1e-12)
    rows, cols = np.tril_indices(chain.n, -1)  # row k > column i: D_k 𝓛_i = 0
    assert np.all(P[:, rows, cols] == 0)
    assert np.all(np.abs(np.diagonal(P, axis1=1, axis2=2)) > 0)


def test_extension_adds_one_column_and_reuses_the_others():
    """Paper eq. for extension: τ_k,new = Σ_{i≤n} D_k 𝓛_i (reused) + D_k 𝓛_{n+1} (new)."""
    base = mixed_chain()
    ext = base.append_link(rod("tip", 0.3, 0.5))
    assert ext.coordinate_names == base.coordinate_names + ("tip",)
    q, qd, qdd = states(ext.n)
    P_ext = ext.partial_forces(q, qd, qdd)
    P_base = base.partial_forces(q[:, :-1], qd[:, :-1], qdd[:, :-1])
    assert P_ext.shape[-1] == P_base.shape[-1] + 1
    np.testing.assert_array_equal(P_ext[:, :-1, :-1], P_base)  # reused columns: identical
    assert np.all(P_ext[:, -1, :-1] == 0)  # old links ignore the new coordinate
    np.testing.assert_allclose(P_ext[:, :-1, :].sum(-1), P_base.sum(-1) + P_ext[:, :-1, -1], rtol=1e-13)
    # the new column is not zero: the new link loads every joint below it
    assert np.all(np.abs(P_ext[:, :, -1]).max(axis=0) > 1e-3)


def test_reconstruction_replaces_columns_from_the_changed_link_on():
    base = PlanarChain.uniform(3, mass=1.0, length=1.0)
    rebuilt = base.replace_link(1, Link("joint_2", "prismatic", 1.0, 1.0))
    assert rebuilt.coordinate_units == ("rad", "m", "rad")
    q, qd, qdd = states(3)
    P0, P1 = base.partial_forces(q, qd, qdd), rebuilt.partial_forces(q, qd, qdd)
    np.testing.assert_array_equal(P0[..., 0], P1[..., 0])  # links before the change: reused
    for i in (1, 2):  # the changed link and those beyond
        assert np.abs(P0[..., i] - P1[..., i]).max() > 1e-3
    np.testing.assert_allclose(P1.sum(-1), rebuilt.dynamics(q, qd, qdd=qdd)["Q"], rtol=1e-12, atol=1e-12)


def test_servo_selection_and_errors():
    chain = PlanarChain.uniform(3, servo_joints=("joint_3", "joint_1"))
    assert chain.servo_names == ("joint_1", "joint_3") and chain.free_names == ("joint_2",)
    assert chain.with_servo([]).servo_names == ()
    with pytest.raises(ConfigError, match="joint_9"):
        PlanarChain.uniform(2, servo_joints=("joint_9",))
    with pytest.raises(ConfigError, match="telescope"):
        Link("a", kind="telescope")


def test_free_chain_conserves_energy_to_integrator_tolerance():
    chain = PlanarChain([rod("a", 1.0, 1.0), rod("b", 0.8, 0.9), Link("c", mass=0.5, length=0.6)])
    trial = simulate(chain, 3.0, [1.2, -0.5, 0.8], [0.0, 0.5, 0.0], rtol=1e-10, atol=1e-10)
    assert trial.servo_joints == () and np.all(trial.Q == pytest.approx(0.0, abs=1e-12))
    drift = np.abs(trial.E - trial.E[0]).max() / np.abs(trial.T).max()
    assert drift < 1e-8, drift


def test_servo_driven_chain_energy_balance():
    """E(t) − E(0) = ∫ q̇ᵀQ dt along a chain whose middle joint is servo-driven."""
    from ros_lnn.physics.simulate import CosineServo

    chain = PlanarChain.uniform(3, mass=0.5, length=0.8, servo_joints=("joint_2",))
    servo = CosineServo(amplitude=[[0.3, 0.1]], omega=[[2.0, 5.0]], phase=[[0.0, 1.0]])
    t = np.linspace(0.0, 2.0, 4001)
    trial = simulate(chain, 2.0, [0.3, -0.2], [0.0, 0.0], servo=servo, t_eval=t)
    power = np.einsum("ni,ni->n", trial.qd, trial.Q)
    work = np.concatenate([[0.0], np.cumsum(0.5 * (power[1:] + power[:-1]) * np.diff(t))])
    # trapezoid error ≤ (t_end) h² max|P''| / 12; P'' bounded by a coarse finite difference
    h = t[1] - t[0]
    bound = 2.0 * h**2 * np.abs(np.diff(power, 2) / h**2).max() / 12
    assert np.abs(trial.E - trial.E[0] - work).max() < 2 * bound + 1e-8


def test_free_chain_with_sprung_prismatic_link_conserves_energy_plus_spring_energy():
    """A spring force −k d on the prismatic joint, applied as Q_f: E + ½ k d² stays constant."""
    chain = PlanarChain(
        [rod("a", 1.0, 1.0), Link("b", "prismatic", 0.8, 0.9, 0.45, 0.05), Link("c", mass=0.5, length=0.6)]
    )
    k = 40.0
    spring = lambda t, q, qd: [0.0, -k * q[1], 0.0]  # noqa: E731
    trial = simulate(chain, 3.0, [1.2, 0.0, 0.8], [0.0, 0.3, 0.0], force=spring)
    assert 0.05 < np.ptp(trial.q[:, 1]) < 2.0  # it really slides, and the spring holds it
    total = trial.E + 0.5 * k * trial.q[:, 1] ** 2
    assert np.abs(total - total[0]).max() < 1e-8 * np.abs(trial.T).max()
    np.testing.assert_allclose(trial.Q_f[:, 1], -k * trial.q[:, 1], atol=1e-12)
