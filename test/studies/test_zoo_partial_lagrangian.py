"""Partial-Lagrangian paper examples (docs/papers.md): damping obeys the first law, PD settles at the
gravity-shifted rest point, PID removes the offset, the prismatic reconstruction reaches its length,
the 10-link chain grown by extension is the uniform chain, and the cost model's three evaluations agree."""

import numpy as np

from conftest import requires_torch
from ros_lnn.physics.chain import Link, PlanarChain
from ros_lnn_lab.studies.partial_cost import fit_exponents, measure
from ros_lnn_lab.studies.partial_lagrangian_examples import (
    JointPID,
    one_link,
    pd_equilibrium,
    prismatic_reconstruction,
    simulate_chain,
    ten_links,
    two_links,
)


def test_damping_dissipates_energy_at_the_rate_qd_dot_q_damping():
    chain, damping, _ = two_links()
    sim = simulate_chain(
        chain, 4.0, [1.0, -0.5], [0.5, 0.0], damping=damping, n_samples=401, rtol=1e-11, atol=1e-11
    )
    # E(t) − E(0) = ∫ q̇ᵀ Q_damp dt with Q_damp = −d q̇, so E never rises and loses energy steadily
    np.testing.assert_allclose(sim["E"] - sim["E"][0], sim["work"], atol=1e-8)
    np.testing.assert_allclose(sim["Q_damp"], -damping * sim["qd"], rtol=0, atol=0)
    assert np.all(np.diff(sim["E"]) <= 1e-9)
    assert sim["E"][-1] < sim["E"][0] - 1.0
    # the rate itself: dE/dt (finite difference of the exact energy) equals q̇ᵀ Q_damp
    rate = np.einsum("ti,ti->t", sim["qd"], sim["Q_damp"])
    dE = np.gradient(sim["E"], sim["t"])
    np.testing.assert_allclose(dE[2:-2], rate[2:-2], atol=2e-3 * np.abs(rate).max())


def test_undamped_uncontrolled_chain_conserves_energy():
    chain, _, _ = two_links()
    sim = simulate_chain(chain, 1.5, [1.0, -0.5], n_samples=51, rtol=1e-11, atol=1e-11)
    assert np.ptp(sim["E"]) < 1e-7 * abs(sim["E"][0])


def test_pd_settles_at_the_gravity_shifted_rest_point_and_pid_at_the_target():
    chain, damping, pd = one_link()
    rest = pd_equilibrium(chain, pd)
    # the rest point balances the spring of the PD law against gravity, so it misses the target
    np.testing.assert_allclose(pd.kp * (pd.target - rest), chain.potential_gradient(rest), atol=1e-9)
    assert abs(rest[0] - pd.target[0]) > 0.05
    sim = simulate_chain(chain, 10.0, [0.0], damping=damping, controller=pd, n_samples=11)
    np.testing.assert_allclose(sim["q"][-1], rest, atol=1e-6)
    pid = JointPID(pd.target, pd.kp, pd.kd, ki=np.array([200.0]))
    sim = simulate_chain(chain, 15.0, [0.0], damping=damping, controller=pid, n_samples=11)
    np.testing.assert_allclose(sim["q"][-1], pid.target, atol=1e-4)
    np.testing.assert_allclose(sim["E"] - sim["E"][0], sim["work"], atol=1e-6)


def test_prismatic_reconstruction_shortens_link_2_to_its_target_length():
    chain, damping, pid = prismatic_reconstruction()
    assert [link.kind for link in chain.links] == ["revolute", "prismatic", "revolute"]
    sim = simulate_chain(
        chain, 20.0, [0.3, 0.0, 0.3], damping=damping, controller=pid, n_samples=11, method="LSODA"
    )
    joints = chain.joint_positions(sim["q"][-1])
    np.testing.assert_allclose(np.linalg.norm(joints[2] - joints[1]), 0.1, atol=1e-3)
    np.testing.assert_allclose(np.linalg.norm(joints[1] - joints[0]), 2.0, atol=1e-12)


def test_ten_links_grown_by_extension_are_the_uniform_chain():
    chain, _, _ = ten_links()
    uniform = PlanarChain.uniform(10, mass=1.0, length=0.5)
    q = np.random.default_rng(0).normal(size=(5, 10))
    np.testing.assert_allclose(chain.mass_matrix(q), uniform.mass_matrix(q), atol=1e-12)
    np.testing.assert_allclose(chain.potential_gradient(q), uniform.potential_gradient(q), atol=1e-12)


@requires_torch
def test_cost_model_whole_partial_and_autograd_agree():
    result = measure([3], batch=1, min_time=0.0)
    for row in result["rows"]:
        assert row["numpy_max_diff"] < 1e-12 and row["autograd_max_diff"] < 1e-12
    rows = [{"n": n, "a": 2.0 * n**3, "b": 5.0 * n**4} for n in range(3, 11)]
    ex = fit_exponents(rows)
    assert abs(ex["a"] - 3) < 1e-9 and abs(ex["b"] - 4) < 1e-9


def test_prismatic_link_keeps_revolute_neighbours():
    chain = two_links()[0].replace_link(1, Link("joint_2", "prismatic", mass=1.0, length=1.0))
    assert chain.coordinate_units == ("rad", "m")
