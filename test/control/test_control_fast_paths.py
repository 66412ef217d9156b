"""The vectorised controller step against straightforward dense reference computations (to round-off):
the mobility (through the Schur complement) against the inverse of the dense KKT matrix, its rate
against central differences along the motion, the obstacle field (all obstacles at once) against a loop
over the obstacles, and τ_c against the dense 𝓜, 𝓒(ν) and K_d of eqs 37/46."""

import numpy as np
import pytest

from ros_lnn.control.dac import DacController, Gains
from ros_lnn.control.mobility import ConstraintOperators, JointSpaceOperators, mobility, small_inverse
from ros_lnn.control.obstacles import (
    ObstacleField,
    SphereObstacle,
    default_control_points,
    potential_gradient,
)
from ros_lnn.control.pipeline import DacPipeline
from ros_lnn.physics.multibody import gravity_port, kkt_matrix, mass_matrix, pose_only, update
from ros_lnn.physics.multibody.build import make_chain
from ros_lnn.physics.multibody.kinematics import (
    forward_kinematics,
    n_rates,
    twist_map,
    twist_map_rate,
    twist_map_rate_times,
)
from ros_lnn.physics.multibody.quaternion import quat_exp, quat_mul

CHAINS = (
    make_chain(5, damping=0.05, gravity=(0, 0, -9.81)),
    make_chain(
        4,
        joint="revolute",
        base="fixed",
        axes=[[0, 0, 1]] + [[0, 1, 0]] * 3,
        stiffness=[0.0],
        gravity=(0, 0, -9.81),
        length=0.15,
        mass=0.75,
    ),
)


def _state(model, seed):
    rng = np.random.default_rng(seed)
    qj = rng.normal(size=n_rates(model) - (6 if model.floating_root is not None else 0)) * 0.4
    r, quat = forward_kinematics(model, qj)
    nu = twist_map(model, update(model, r, quat, np.zeros(6 * model.n_bodies))) @ rng.normal(
        size=n_rates(model)
    )
    return r, quat, nu


def _advance(model, r, quat, nu, h):
    """Configuration moved by h along the twist ν (first order is enough for a central difference)."""
    n = model.n_bodies
    return (r + h * nu[: 3 * n].reshape(n, 3), quat_mul(quat_exp(h * nu[3 * n :].reshape(n, 3)), quat), nu)


def test_mobility_equals_the_dense_kkt_inverse_and_its_rate_the_central_difference():
    for model in CHAINS:
        n = model.n_bodies
        r, quat, nu = _state(model, 1)
        data = update(model, r, quat, nu)
        mob = mobility(model, data)
        K_inv = np.linalg.inv(kkt_matrix(model, data))
        M = mass_matrix(model, data)
        scale = np.abs(K_inv[: 6 * n, : 6 * n]).max()
        np.testing.assert_allclose(mob.A, K_inv[: 6 * n, : 6 * n], rtol=0, atol=1e-11 * scale)
        np.testing.assert_allclose(mob.P, K_inv[: 6 * n, : 6 * n] @ M, rtol=0, atol=1e-11)
        np.testing.assert_allclose(mob.A0, np.linalg.inv(M), rtol=0, atol=1e-12 * np.abs(mob.A0).max())
        h = 1e-6
        plus = mobility(model, update(model, *_advance(model, r, quat, nu, h)), with_rate=False)
        minus = mobility(model, update(model, *_advance(model, r, quat, nu, -h)), with_rate=False)
        np.testing.assert_allclose(mob.A_dot, (plus.A - minus.A) / (2 * h), rtol=0, atol=1e-6 * scale)
        np.testing.assert_allclose(mob.P_dot, (plus.P - minus.P) / (2 * h), rtol=0, atol=1e-6)
        np.testing.assert_allclose(mob.A0_dot, (plus.A0 - minus.A0) / (2 * h), rtol=0, atol=1e-6 * scale)


def test_column_operators_equal_the_dense_mobility_and_projector_with_their_rates():
    """𝓐X, P x and their total rates from the Schur operators (what the laws use) against the dense
    𝓐, Ȧ, P, Ṗ of :func:`mobility` (themselves checked against the KKT inverse above)."""
    rng = np.random.default_rng(5)
    for model in CHAINS:
        n = model.n_bodies
        data = update(model, *_state(model, 6))
        mob, ops = mobility(model, data), ConstraintOperators(model, data)
        X, X_dot = rng.normal(size=(6 * n, 4)), rng.normal(size=(6 * n, 4))
        Z, Z_dot = ops.apply(X, X_dot)
        scale = np.abs(mob.A).max() * np.abs(X).max()
        np.testing.assert_allclose(Z, mob.A @ X, rtol=0, atol=1e-12 * scale)
        np.testing.assert_allclose(
            Z_dot,
            mob.A_dot @ X + mob.A @ X_dot,
            rtol=0,
            atol=1e-12 * np.abs(mob.A_dot @ X + mob.A @ X_dot).max(),
        )
        assert np.abs(data.J @ Z).max() < 1e-12 * np.abs(Z).max()  # in null(J) by construction
        x, x_dot = X[:, 0], X_dot[:, 0]
        z, z_dot = ops.project(x, x_dot)
        np.testing.assert_allclose(z, mob.P @ x, rtol=0, atol=1e-12 * np.abs(x).max())
        np.testing.assert_allclose(
            z_dot,
            mob.P_dot @ x + mob.P @ x_dot,
            rtol=0,
            atol=1e-12 * np.abs(mob.P_dot @ x + mob.P @ x_dot).max(),
        )
        z1, _z1_dot = ops.apply(X[:, 1], X_dot[:, 1])  # a single column as a vector
        np.testing.assert_allclose(z1, Z[:, 1], rtol=0, atol=1e-14 * scale)


def test_joint_space_operators_equal_the_schur_operators_on_the_constraint_manifold():
    """𝓐 = G H⁻¹ Gᵀ (the pipeline's form) against the Schur form at FK configurations, both models."""
    rng = np.random.default_rng(8)
    for model in CHAINS:
        n = model.n_bodies
        data = update(model, *_state(model, 9))
        G, G_dot = twist_map(model, data), twist_map_rate(model, data)
        qd = np.linalg.lstsq(G, data.nu, rcond=None)[0]
        np.testing.assert_allclose(G_dot @ qd, twist_map_rate_times(model, data, qd), rtol=0, atol=1e-13)
        schur, joint = ConstraintOperators(model, data), JointSpaceOperators(model, data, G, G_dot)
        X, X_dot = rng.normal(size=(6 * n, 3)), rng.normal(size=(6 * n, 3))
        for a, b in zip(schur.apply(X, X_dot), joint.apply(X, X_dot)):
            np.testing.assert_allclose(b, a, rtol=0, atol=1e-11 * np.abs(a).max())
        for a, b in zip(schur.project(X[:, 0], X_dot[:, 0]), joint.project(X[:, 0], X_dot[:, 0])):
            np.testing.assert_allclose(b, a, rtol=0, atol=1e-11 * np.abs(a).max())


def test_pose_from_forward_kinematics_parts_equals_the_pose_from_scratch():
    rng = np.random.default_rng(11)
    for model in CHAINS:
        qj = rng.normal(size=n_rates(model) - (6 if model.floating_root is not None else 0))
        parts = {}
        r, quat = forward_kinematics(model, qj, parts=parts)
        fast, plain = vars(pose_only(model, r, quat, parts)), vars(pose_only(model, r, quat))
        assert fast.keys() == plain.keys()
        for name, value in plain.items():
            np.testing.assert_allclose(fast[name], value, rtol=0, atol=1e-15, err_msg=name)


def test_pipeline_step_equals_the_law_on_the_schur_operators():
    """The pipeline (Pinocchio, law III in joint coordinates) against the coordinate-free law on the
    maximal-coordinate numpy model with the Schur-complement mobility."""
    arm = CHAINS[1]
    pipe = DacPipeline(
        arm,
        "end_effector",
        Gains(damping=0.05),
        obstacles=[([0.3, 0.1, 0.1], 0.05)],
        obstacle_influence=0.5,
        effort_limits=[1e6] * 4,
    )
    pipe.set_ee_target([0.3, 0.2, 0.1])
    rng = np.random.default_rng(10)
    q, qd = rng.normal(size=4) * 0.4, rng.normal(size=4)
    out = pipe.step(q, qd)
    r, quat = forward_kinematics(arm, q)
    data = update(arm, r, quat, twist_map(arm, update(arm, r, quat, np.zeros(24))) @ qd)
    ref = pipe.controller.compute(data, pipe._ee_target)
    assert out.result.obstacle_potential > 0  # the null-space column is exercised
    for name in ("tau_c", "nu_r", "nu_r_dot"):
        a, b = getattr(ref, name), getattr(out.result, name)
        np.testing.assert_allclose(b, a, rtol=0, atol=1e-11 * np.abs(a).max())


def test_small_inverse_matches_numpy_and_raises_on_a_singular_matrix():
    rng = np.random.default_rng(7)
    for m in (3, 6, 12):
        a = rng.normal(size=(m, m)) + m * np.eye(m)
        np.testing.assert_allclose(small_inverse(a), np.linalg.inv(a), rtol=0, atol=1e-15 * m)
    with np.errstate(invalid="ignore"), pytest.raises(np.linalg.LinAlgError):
        small_inverse(np.zeros((3, 3)))


def _gradient_by_loop(field, model, data):
    """The obstacle potential written one obstacle and one control point at a time."""
    n = model.n_bodies
    U, grad, rate = 0.0, np.zeros(6 * n), np.zeros(6 * n)
    for b, a_body in zip(field.points_body, field.points_offset):
        arm = data.R[b] @ a_body
        p = data.r[b] + arm
        arm_dot = np.cross(data.omega[b], arm)
        pdot = data.v[b] + arm_dot
        for obs in field.obstacles:
            diff = p - obs.center
            rho = max(np.linalg.norm(diff), 1e-9)
            nh = diff / rho
            a = max(field.influence - (rho - obs.radius), 0.0) / field.influence
            U += field.gain * field.influence * a**3 / 3
            f1, f2 = -field.gain * a * a, 2 * field.gain * a / field.influence
            g = f1 * nh
            H = f2 * np.outer(nh, nh) + f1 / rho * (np.eye(3) - np.outer(nh, nh))
            gd = H @ pdot
            grad[3 * b : 3 * b + 3] += g
            grad[3 * n + 3 * b : 3 * n + 3 * b + 3] += np.cross(arm, g)
            rate[3 * b : 3 * b + 3] += gd
            rate[3 * n + 3 * b : 3 * n + 3 * b + 3] += np.cross(arm_dot, g) + np.cross(arm, gd)
    return U, grad, rate


def test_obstacle_field_with_several_obstacles_equals_the_loop_over_them():
    model = CHAINS[0]
    r, quat, nu = _state(model, 2)
    data = update(model, r, quat, nu)
    centers = data.r[:3] + np.array([[0.1, 0.05, 0.0], [-0.05, 0.1, 0.05], [0.0, -0.1, 0.1]])
    field = ObstacleField(
        tuple(SphereObstacle(c, 0.05) for c in centers),
        *default_control_points(model),
        influence=0.4,
        gain=2.0,
    )
    U, grad, rate = potential_gradient(field, model, data)
    U_ref, grad_ref, rate_ref = _gradient_by_loop(field, model, data)
    assert U > 0 and np.abs(grad).max() > 0.1  # several points inside the field of several obstacles
    np.testing.assert_allclose(U, U_ref, rtol=1e-13)
    np.testing.assert_allclose(grad, grad_ref, rtol=0, atol=1e-13 * np.abs(grad_ref).max())
    np.testing.assert_allclose(rate, rate_ref, rtol=0, atol=1e-13 * np.abs(rate_ref).max())
    U2, grad2, none = potential_gradient(field, model, data, with_rate=False)
    assert none is None and U2 == U
    np.testing.assert_allclose(grad2, grad, rtol=0, atol=1e-14 * np.abs(grad).max())
    far = ObstacleField(
        tuple(SphereObstacle(c + 10.0, 0.05) for c in centers),
        *default_control_points(model),
        influence=0.4,
        gain=2.0,
    )
    U_far, grad_far, rate_far = potential_gradient(far, model, data)
    assert (
        U_far == 0.0
        and not np.any(grad_far)
        and not np.any(rate_far)
        and grad_far.shape == (6 * model.n_bodies,)
    )


def test_port_command_equals_the_dense_formula():
    rng = np.random.default_rng(3)
    for model in CHAINS:
        n = model.n_bodies
        data = update(model, *_state(model, 4))
        nu_r, nu_r_dot = rng.normal(size=6 * n), rng.normal(size=6 * n)
        for weighted in (True, False):
            gains = Gains(kd_linear=7.0, kd_angular=3.0, mass_weighted=weighted)
            res = DacController(model, "velocity", gains).port_command(data, nu_r, nu_r_dot)
            M = mass_matrix(model, data)
            coriolis = np.zeros(6 * n)
            for i in range(n):
                w, I = data.omega[i], data.inertia[i]
                coriolis[3 * n + 3 * i : 3 * n + 3 * i + 3] = np.cross(
                    w, I @ nu_r[3 * n + 3 * i : 3 * n + 3 * i + 3]
                )
            if weighted:
                Kd = np.diag(np.r_[np.full(3 * n, 7.0), np.full(3 * n, 3.0)]) @ M
            else:
                Kd = np.diag(np.r_[np.full(3 * n, 7.0), np.full(3 * n, 3.0)])
            s = data.nu - nu_r
            expected = M @ nu_r_dot + coriolis - gravity_port(model) - data.joint_moment_port - Kd @ s
            np.testing.assert_allclose(res.tau_c, expected, rtol=0, atol=1e-12 * np.abs(expected).max())
            np.testing.assert_allclose(res.lyapunov, 0.5 * s @ M @ s, rtol=1e-13)
