"""Validation of the tensor multibody model the way seed 004 §4.1 does it (5-body chain), plus an
independent planar Lagrangian and frame invariance."""

import numpy as np
import pytest
from _multibody_cases import _random_rotation, rotate_state, rotated_model

from ros_lnn.physics.multibody import (
    Joint,
    MultibodyModel,
    energy,
    forward_dynamics,
    generalized_force,
    joint_mismatch,
    kkt_matrix,
    momentum,
    update,
)
from ros_lnn.physics.multibody.build import make_chain
from ros_lnn.physics.multibody.kinematics import (
    effort_map,
    forward_kinematics,
    n_rates,
    twist_map,
    twist_map_rate_times,
)
from ros_lnn.physics.multibody.sim import MultibodyState, simulate

DT = 1e-3
MOMENT_END, FORCE_START, FORCE_END, T_END = 0.2, 0.5, 0.7, 1.0


def _pulses(moment_axis):
    def port(t, data):
        tau = np.zeros(30)
        if t < MOMENT_END:
            tau[15:18] = 0.5 * moment_axis  # moment on body 1
        elif FORCE_START <= t < FORCE_END:
            tau[3:6] = [0.0, 2.0, 1.0]  # force on body 2 (through its CoM)
        return tau

    return port


def _run(moment_axis, baumgarte=None):
    model = make_chain(
        5
    )  # paper: free-floating 5-body chain, spherical joints with torsional springs, g compensated
    r, q = forward_kinematics(model, np.zeros(12))
    out = simulate(
        model,
        MultibodyState(r, q, np.zeros(30)),
        T_END,
        DT,
        _pulses(moment_axis),
        baumgarte,
        observe=lambda s, d, f, p: {
            "P": momentum(model, d)[0],
            "L": momentum(model, d)[1],
            "gap": joint_mismatch(model, d).max(),
        },
    )
    return model, out


@pytest.fixture(scope="module")
def twist_pulse():
    return _run(np.array([1.0, 0.0, 0.0]))


@pytest.fixture(scope="module")
def oblique_pulse():
    return _run(np.array([0.0, 0.6, 0.8]))


def test_momentum_constant_while_port_is_zero(oblique_pulse):
    _, out = oblique_pulse
    t, P, L = out["t"], out["P"], out["L"]
    for window in [(t >= MOMENT_END) & (t < FORCE_START), t >= FORCE_END]:
        dP = np.abs(P[window] - P[window][0]).max()
        dL = np.abs(L[window] - L[window][0]).max()
        # measured: dP ~ 4e-16 (round-off), dL ~ 3e-12 (RK4 error, dt = 1 ms)
        assert dP < 1e-13 and dL < 1e-9, (dP, dL)
    # the pulses changed the momenta by exactly their impulses (the force acts through the CoM of body 2),
    # integrated with RK4's own quadrature of the port (Simpson per step): internal forces cancel exactly
    port = _pulses(np.array([0.0, 0.6, 0.8]))
    steps = np.arange(0.0, T_END, DT)
    impulse = sum(DT / 6 * (port(s, None) + 4 * port(s + DT / 2, None) + port(s + DT, None)) for s in steps)
    after_moment = L[(t >= MOMENT_END) & (t < FORCE_START)][0]
    assert np.allclose(after_moment, impulse[15:18], atol=1e-12)
    assert np.allclose(P[t >= FORCE_END][0], impulse[3:6], atol=1e-12)
    assert np.linalg.norm(L[t >= FORCE_END][0] - after_moment) > 1e-2  # the force also adds angular momentum


def test_joint_mismatch_stays_at_integration_error_level(oblique_pulse, twist_pulse):
    for _, out in (oblique_pulse, twist_pulse):
        assert out["gap"].max() < 1e-8  # measured 1e-11 / 5e-10 without stabilisation, dt = 1 ms


def test_baumgarte_keeps_the_gap_bounded_without_changing_momentum():
    _model, out = _run(np.array([0.0, 0.6, 0.8]), baumgarte=(20.0, 20.0))
    t = out["t"]
    assert out["gap"].max() < 1e-8
    w = t >= FORCE_END
    assert np.abs(out["P"][w] - out["P"][w][0]).max() < 1e-13
    assert np.abs(out["L"][w] - out["L"][w][0]).max() < 1e-9


def test_joint_forces_vanish_under_a_pure_moment_and_carry_the_force(twist_pulse):
    _, out = twist_pulse
    t, F = out["t"], out["F_J"]
    # a moment about the chain axis spins every body about the line through the joints: no joint force
    assert np.abs(F[t < MOMENT_END]).max() < 1e-10
    during = np.linalg.norm(F[(t >= FORCE_START) & (t < FORCE_END)].reshape(-1, 4, 3), axis=2)
    assert during.max() > 0.1 * np.hypot(2.0, 1.0)  # the force is carried through the chain
    assert during.max() < np.hypot(2.0, 1.0)  # and bounded by the applied force
    steps = np.abs(np.diff(F[(t >= FORCE_START) & (t < FORCE_END)], axis=0)).max()
    assert steps < 1e-2  # continuous inside the pulse


def test_joint_force_balances_the_subchain_momentum_rate(oblique_pulse):
    """f_J of joint j (on the parent, −f_J on the child) is the only external force on bodies j+1…N."""
    model, out = oblique_pulse
    i = int(np.searchsorted(out["t"], 0.6))
    st = MultibodyState(out["r"][i], out["quat"][i], out["nu"][i], out["t"][i])
    data = update(model, st.r, st.quat, st.nu)
    port = _pulses(np.array([0.0, 0.6, 0.8]))(st.t, data)
    nu_dot, f_j = forward_dynamics(model, data, port)
    acc = model.masses[:, None] * nu_dot[:15].reshape(5, 3)
    for j in range(4):
        external = port[:15].reshape(5, 3)[j + 1 :].sum(axis=0)
        assert np.allclose(acc[j + 1 :].sum(axis=0), external - f_j[3 * j : 3 * j + 3], atol=1e-12)


def _planar_lagrangian_qdd(masses, lengths, inertias, theta, theta_dot, u, g):
    """Independent reference: a planar chain in absolute angles φ (Euler–Lagrange, hand-derived)."""
    n = len(masses)
    phi, phid = np.cumsum(theta), np.cumsum(theta_dot)
    a = np.zeros((n, n))  # a[k, i]: lever of angle i on the CoM of link k
    for k in range(n):
        a[k, :k] = lengths[:k]
        a[k, k] = lengths[k] / 2
    c = np.cos(phi[:, None] - phi[None, :])
    s = np.sin(phi[:, None] - phi[None, :])
    Mphi = np.einsum("k,ki,kj->ij", masses, a, a) * c + np.diag(inertias)
    h = np.einsum("k,ki,kj,ij,j->i", masses, a, a, s, phid**2)
    Qg = -g * np.einsum("k,ki->i", masses, a) * np.cos(phi)
    Qu = u - np.append(u[1:], 0.0)
    phidd = np.linalg.solve(Mphi, Qg + Qu - h)
    return np.diff(np.concatenate([[0.0], phidd]))


@pytest.mark.parametrize("n", [2, 5])
def test_accelerations_match_a_planar_lagrangian(n):
    rng = np.random.default_rng(n)
    masses, lengths = rng.uniform(0.5, 2.0, n), rng.uniform(0.3, 0.8, n)
    model = make_chain(
        n,
        joint="revolute",
        base="fixed",
        masses=masses,
        lengths=lengths,
        stiffness=[0.0],
        gravity=(0.0, -9.81, 0.0),
    )
    theta, theta_dot, u = rng.normal(size=n), rng.normal(size=n), rng.normal(size=n)
    r, quat = forward_kinematics(model, theta)
    data = update(model, r, quat, np.zeros(6 * n))
    nu = twist_map(model, data) @ theta_dot
    data = update(model, r, quat, nu)
    port = effort_map(model, data) @ u
    nu_dot, _ = forward_dynamics(model, data, port)
    phidd = nu_dot[3 * n :].reshape(n, 3)[:, 2]
    expected = _planar_lagrangian_qdd(masses, lengths, model.inertia_body[:, 2, 2], theta, theta_dot, u, 9.81)
    theta_dd = np.diff(np.concatenate([[0.0], phidd]))
    assert np.allclose(theta_dd, expected, rtol=0, atol=1e-9 * max(1, np.abs(expected).max()))
    assert np.abs(nu_dot[3 * n :].reshape(n, 3)[:, :2]).max() < 1e-12  # stays planar


def test_schur_solution_equals_the_dense_kkt_solve():
    model = make_chain(
        4,
        joint="revolute",
        base="fixed",
        axes=[[0, 0, 1], [0, 1, 0], [0, 1, 0], [1, 0, 0]],
        stiffness=[0.5],
        gravity=(0, 0, -9.81),
    )
    rng = np.random.default_rng(1)
    r, quat = forward_kinematics(model, rng.normal(size=4))
    data = update(model, r, quat, np.zeros(24))
    data = update(model, r, quat, twist_map(model, data) @ rng.normal(size=4))
    port = rng.normal(size=24)
    nu_dot, f_j = forward_dynamics(model, data, port)
    x = np.linalg.solve(
        kkt_matrix(model, data), np.concatenate([generalized_force(model, data, port), data.gamma])
    )
    assert np.allclose(x[:24], nu_dot, atol=1e-10) and np.allclose(x[24:], f_j, atol=1e-10)


@pytest.mark.parametrize("kind", ["free_spherical", "fixed_revolute"])
def test_frame_invariance_of_accelerations_and_joint_forces(kind):
    rng = np.random.default_rng(7)
    if kind == "free_spherical":
        model = make_chain(5, gravity=(0, 0, -9.81), damping=0.1)
        qj = rng.normal(size=12) * 0.4
    else:
        model = make_chain(
            4,
            joint="revolute",
            base="fixed",
            axes=[[0, 0, 1], [0, 1, 0], [0, 1, 0], [1, 0, 0]],
            stiffness=[0.3],
            gravity=(0, 0, -9.81),
        )
        qj = rng.normal(size=4)
    n = model.n_bodies
    r, quat = forward_kinematics(model, qj)
    data = update(model, r, quat, np.zeros(6 * n))
    nu = twist_map(model, data) @ rng.normal(size=n_rates(model))
    port = rng.normal(size=6 * n)
    data = update(model, r, quat, nu)
    nu_dot, f_j = forward_dynamics(model, data, port)
    Q, qQ = _random_rotation(rng)
    model2 = rotated_model(model, Q)
    r2, quat2, nu2 = rotate_state(Q, qQ, r, quat, nu)
    data2 = update(model2, r2, quat2, nu2)
    nu_dot2, f_j2 = forward_dynamics(model2, data2, rotate_state(Q, qQ, r, quat, port)[2])
    assert np.allclose(nu_dot2, (nu_dot.reshape(2 * n, 3) @ Q.T).ravel(), atol=1e-11)
    k = 3 * model.n_joints
    assert np.allclose(f_j2[:k], (f_j[:k].reshape(-1, 3) @ Q.T).ravel(), atol=1e-11)
    # constraint moments: Σ λ n per joint rotates too (the normal pair itself may be chosen differently)
    for i in set(model.rot_joint.tolist()):
        rows = model.rot_joint == i
        m1 = f_j[k:][rows] @ data.rot_normals[rows]
        m2 = f_j2[k:][rows] @ data2.rot_normals[rows]
        assert np.allclose(m2, Q @ m1, atol=1e-11)


def test_twist_map_spans_the_constraint_null_space_and_its_rate():
    model = make_chain(5, gravity=(0, 0, -9.81))
    rng = np.random.default_rng(3)
    qj = rng.normal(size=12) * 0.5
    r, quat = forward_kinematics(model, qj, base_position=[0.1, 0.2, 0.3])
    data = update(model, r, quat, np.zeros(30))
    G = twist_map(model, data)
    assert G.shape == (30, 18) and np.linalg.matrix_rank(G) == 18
    assert np.abs(data.J @ G).max() < 1e-13
    assert np.linalg.matrix_rank(np.vstack([data.J, G.T])) == 30  # null(J) = range(G)
    # Ġ q̇ satisfies the acceleration constraint: J (G q̈ + Ġ q̇) = γ for any q̈
    qd = rng.normal(size=18)
    data = update(model, r, quat, G @ qd)
    acc = G @ rng.normal(size=18) + twist_map_rate_times(model, data, qd)
    assert np.allclose(data.J @ acc, data.gamma, atol=1e-12)
    assert np.allclose(G.T @ effort_map(model, data), np.eye(18), atol=1e-13)


def test_twist_map_rate_against_finite_differences_on_an_arm():
    model = make_chain(4, joint="revolute", base="fixed", axes=[[0, 0, 1], [0, 1, 0], [0, 1, 0], [1, 0, 0]])
    rng = np.random.default_rng(5)
    q, qd = rng.normal(size=4), rng.normal(size=4)

    def G_at(qq):
        r, quat = forward_kinematics(model, qq)
        return twist_map(model, update(model, r, quat, np.zeros(24)))

    h = 1e-6
    fd = (G_at(q + h * qd) - G_at(q - h * qd)) @ qd / (2 * h)
    r, quat = forward_kinematics(model, q)
    data = update(model, r, quat, G_at(q) @ qd)
    assert np.allclose(twist_map_rate_times(model, data, qd), fd, atol=1e-8)


def test_energy_is_conserved_with_the_potential_spring_law():
    model = make_chain(4, gravity=(0, 0, -9.81), spring_law="potential", stiffness=(3.0, 2.0, 1.0))
    rng = np.random.default_rng(11)
    r, quat = forward_kinematics(model, rng.normal(size=9) * 0.5)
    data = update(model, r, quat, np.zeros(24))
    nu = twist_map(model, data) @ rng.normal(size=n_rates(model))
    out = simulate(
        model,
        MultibodyState(r, quat, nu),
        0.5,
        5e-4,
        observe=lambda s, d, f, p: {"E": energy(model, d)["total"]},
    )
    drift = np.abs(out["E"] - out["E"][0]).max()
    assert drift < 1e-7 * max(1.0, abs(out["E"][0])), drift


def test_baumgarte_bounds_the_drift_that_plain_integration_accumulates():
    """An energetic free chain at a coarse step (5 ms): the joint gap grows without stabilisation
    (measured 1.4e-4 m after 2 s, 2.6e-3 m after 20 s) and stays ~4e-6 m with α = β = 5 /s."""
    from ros_lnn.physics.multibody.kinematics import n_rates

    model = make_chain(5)
    rng = np.random.default_rng(0)
    r, quat = forward_kinematics(model, rng.normal(size=12) * 0.4)
    nu = twist_map(model, update(model, r, quat, np.zeros(30))) @ rng.normal(size=n_rates(model))
    gaps = {}
    for bg in (None, (5.0, 5.0)):
        out = simulate(
            model,
            MultibodyState(r, quat, nu),
            2.0,
            5e-3,
            baumgarte=bg,
            every=100,
            observe=lambda s, d, f, p: {"gap": joint_mismatch(model, d).max()},
        )
        gaps[bg] = out["gap"]
    assert gaps[None][-1] > 1e-5 and gaps[None][-1] > gaps[None][len(gaps[None]) // 2]  # accumulates
    assert gaps[(5.0, 5.0)].max() < 2e-5 and gaps[(5.0, 5.0)][-1] < 0.1 * gaps[None][-1]


@pytest.mark.parametrize("law", ["paper", "potential"])
def test_spring_moments_equal_the_joint_by_joint_formula_of_eq_19(law):
    """The vectorised spring moments against eq 19 written one joint at a time (Euler angles of the
    relative rotation R₀ᵀR_pᵀR_c, e₂ = frame [0, cos φ, sin φ]), with a rest rotation on one joint."""
    from ros_lnn.physics.multibody.quaternion import euler_xyz_intrinsic, rot_axis

    base = make_chain(4, stiffness=(2.0, 3.0, 5.0), damping=0.0, spring_law=law)
    joints = list(base.joints)
    j = joints[1]
    joints[1] = Joint(
        j.name,
        j.kind,
        j.parent,
        j.child,
        j.anchor_parent,
        j.anchor_child,
        rest=rot_axis([0.3, 0.5, 0.8], 0.4),
        stiffness=j.stiffness,
    )
    model = MultibodyModel(base.bodies, joints, spring_law=law)
    rng = np.random.default_rng(12)
    r, quat = forward_kinematics(model, rng.normal(size=9) * 0.5)
    data = update(model, r, quat, np.zeros(24))
    energy = 0.0
    for i, jt in enumerate(model.joints):
        frame = data.R[jt.parent] @ jt.rest
        Rc = data.R[jt.child]
        phi, theta, psi = (float(a) for a in euler_xyz_intrinsic(frame.T @ Rc))
        K = np.asarray(jt.stiffness)
        e1, e2, e3 = frame[:, 0], frame @ np.array([0.0, np.cos(phi), np.sin(phi)]), Rc[:, 2]
        if law == "paper":
            m = K[0] * phi * e1 + K[1] * theta * e2 + K[2] * psi * e3
        else:
            m = np.linalg.solve(np.stack([e1, e2, e3]), K * [phi, theta, psi])
        np.testing.assert_allclose(data.joint_moments[i], m, rtol=0, atol=1e-14 * max(1.0, np.abs(m).max()))
        energy += 0.5 * float(K @ np.array([phi, theta, psi]) ** 2)
    assert data.spring_energy == pytest.approx(energy, rel=1e-13)
