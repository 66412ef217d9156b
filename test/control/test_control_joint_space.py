"""Law III evaluated in joint coordinates on Pinocchio (the pipeline's step) against the coordinate-free
law on the maximal-coordinate numpy model — port command, sliding variable, reference velocity and its
rate, task error, Lyapunov function, obstacle potential and joint efforts ``Gᵀ τ_c`` — on random states,
several arms (a branching tree with a fixed flange, unaligned axes, springs and dampers; the demo arm)
and every option of the law; laws I/II through the pipeline; the benchmark's plain Pinocchio reference."""

import zlib
from pathlib import Path

import numpy as np
import pytest
from _multibody_cases import MODELS, RP_URDF, _numpy_state

from ros_lnn.control.dac import (
    BodyPoseTarget,
    DacController,
    EndEffector,
    EndEffectorTarget,
    Gains,
    VelocityTarget,
)
from ros_lnn.control.joint_space import EndEffectorLawJointSpace
from ros_lnn.control.mobility import JointSpaceOperators
from ros_lnn.control.obstacles import (
    ObstacleField,
    SphereObstacle,
    default_control_points,
    joint_space_gradient,
    potential_gradient,
)
from ros_lnn.control.pinocchio_reference import ReferenceLawIII
from ros_lnn.control.pipeline import DacPipeline
from ros_lnn.physics.multibody.build import load_model
from ros_lnn.physics.multibody.kinematics import twist_map_rate
from ros_lnn.physics.multibody.pin import PinocchioModel, kinematics
from ros_lnn.physics.multibody.quaternion import quat_normalize, rot_axis
from ros_lnn.physics.multibody.urdf import model_from_urdf

URDF = Path(__file__).resolve().parents[2] / "config" / "dac_chain.urdf"
TOL = 1e-10  # relative to each output's largest entry; measured ≤ 2e-14
FIELDS = ("tau_c", "s", "nu_r", "nu_r_dot", "task_error")


def _end_effector(name, model):
    if name == "urdf_arm":
        b, R, p = model.frames["tool0"]
        return EndEffector(b, p, R)
    if name == "tree_fixed_flange":  # on the tool body, hung by a fixed joint at the end of a 6-joint branch
        return EndEffector(9, np.array([0.05, 0.01, -0.02]), rot_axis([0.3, 0.4, 1.0], 0.5))
    return EndEffector(model.n_bodies - 1, np.array([0.06, 0.0, 0.0]))


def _law(model, ee, gains, field):
    ctl = DacController(model, "end_effector", gains, ee, field)
    pm = PinocchioModel(model, frames=[("ee", ee.body, ee.offset, ee.rotation)])
    return ctl, EndEffectorLawJointSpace(ctl, pm, pm.frame_ids["ee"])


GAINS = {
    "default": Gains(),
    "task damping": Gains(damping=0.05, obstacle_gain=1.7),
    "two rates": Gains(kd_linear=7.0, kd_angular=3.0, lambda_position=2.0, lambda_attitude=6.0),
    "constant K_d": Gains(kd_linear=4.0, kd_angular=0.5, mass_weighted=False, damping=0.02),
}


@pytest.mark.parametrize("name", sorted(MODELS))
@pytest.mark.parametrize("gains", sorted(GAINS))
def test_joint_space_law_iii_equals_the_coordinate_free_law(name, gains):
    model = MODELS[name]()
    ee = _end_effector(name, model)
    rng = np.random.default_rng(zlib.crc32(f"{name}/{gains}".encode()))
    order = PinocchioModel(model).coordinate_order
    nv = len(order)
    exercised = set()
    for trial in range(8):
        q, qd = rng.normal(size=nv) * 0.8, rng.normal(size=nv)
        data, G = _numpy_state(model, q, qd, order)
        end_point = data.r[ee.body] + data.R[ee.body] @ ee.offset
        # an obstacle beside a random control point (in the field) on odd trials, far away on even ones
        bodies, offsets = default_control_points(model)
        k = rng.integers(len(bodies))
        point = data.r[bodies[k]] + data.R[bodies[k]] @ offsets[k]
        centre = point + (rng.normal(size=3) * 0.03 if trial % 2 else np.array([5.0, 5.0, 5.0]))
        field = ObstacleField(
            (SphereObstacle(centre, 0.02), SphereObstacle(point + 10.0, 0.05)),
            bodies,
            offsets,
            influence=0.15,
            gain=3.0,
        )
        ctl, law = _law(model, ee, GAINS[gains], field)
        # a pose task needs six joints under the end effector (the demo arm has five: position only)
        attitude = quat_normalize(rng.normal(size=4)) if trial % 4 >= 2 and name != "urdf_arm" else None
        target = EndEffectorTarget(
            end_point + rng.normal(size=3) * 0.1, attitude, rng.normal(size=6), rng.normal(size=6)
        )
        result, u, jdata, pos, _ = law.step(q, qd, target)
        G_dot = twist_map_rate(model, data)[:, order]
        for ops in (None, JointSpaceOperators(model, data, G, G_dot)):  # Schur complement / G H⁻¹ Gᵀ
            ref = ctl.compute(data, target, ops)
            for key in FIELDS:
                a, b = getattr(result, key), getattr(ref, key)
                assert np.abs(a - b).max() <= TOL * np.abs(b).max(), (key, trial)
            assert abs(result.lyapunov - ref.lyapunov) <= TOL * ref.lyapunov
            assert abs(result.obstacle_potential - ref.obstacle_potential) <= TOL * max(
                ref.obstacle_potential, 1e-300
            )
        u_ref = G.T @ ref.tau_c
        assert np.abs(u - u_ref).max() <= TOL * np.abs(u_ref).max()
        assert np.allclose(pos, end_point, rtol=0, atol=1e-14) and np.allclose(
            jdata.nu, data.nu, rtol=0, atol=1e-13
        )
        exercised.add((ref.obstacle_potential > 0, attitude is not None))
    assert exercised == (
        {(False, False), (True, False)}
        if name == "urdf_arm"
        else {(False, False), (True, False), (False, True), (True, True)}
    )


def test_joint_space_law_on_a_prismatic_arm_equals_the_law_on_its_pinocchio_workspace():
    """No maximal-coordinate model covers a prismatic joint: the joint-space evaluation is held against
    the coordinate-free law run on the Pinocchio workspace itself (G, Ġ, 𝓐 = G H⁻¹ Gᵀ)."""
    damped_slide = RP_URDF.replace(
        '<axis xyz="1 0 0"/><limit', '<axis xyz="1 0 0"/><dynamics damping="0.3"/><limit'
    )
    assert damped_slide != RP_URDF
    model = model_from_urdf(damped_slide, "rp.urdf")
    assert [j.damping for j in model.joints] == [0.05, 0.3]  # the port of both dampers enters τ_c
    b, R, p = model.frames["tip"]
    ee = EndEffector(b, p, R)
    field = ObstacleField(
        (SphereObstacle(np.array([0.3, 0.1, 0.25]), 0.05),),
        *default_control_points(model),
        influence=0.3,
        gain=2.0,
    )
    ctl, law = _law(model, ee, Gains(damping=0.05), field)
    rng = np.random.default_rng(6)
    for _ in range(4):
        q, qd = np.array([rng.normal(), 0.1 + 0.3 * rng.random()]), rng.normal(size=2)
        target = EndEffectorTarget(np.array([0.2, 0.2, 0.3]), None, rng.normal(size=6), rng.normal(size=6))
        result, u, _, _, _ = law.step(q, qd, target)
        data = kinematics(law.pmodel, q, qd)
        ref = ctl.compute(data, target)  # joint-space data: 𝓐 = G H⁻¹ Gᵀ by default
        assert ref.obstacle_potential > 0
        for key in FIELDS:
            assert (
                np.abs(getattr(result, key) - getattr(ref, key)).max()
                <= TOL * np.abs(getattr(ref, key)).max()
            ), key
        assert np.abs(u - data.G.T @ ref.tau_c).max() <= TOL * np.abs(u).max()


def test_obstacle_covector_in_joint_coordinates_equals_the_mapped_6n_covector():
    model = MODELS["tree_fixed_flange"]()
    pm = PinocchioModel(model)
    rng = np.random.default_rng(8)
    q, qd = rng.normal(size=pm.nv), rng.normal(size=pm.nv)
    d = kinematics(pm, q, qd)
    bodies, offsets = default_control_points(model)
    points = d.r[bodies] + np.einsum("pij,pj->pi", d.R[bodies], offsets)
    field = ObstacleField(
        tuple(SphereObstacle(points[k] + rng.normal(size=3) * 0.05, 0.03) for k in (1, 4, 7)),
        bodies,
        offsets,
        influence=0.2,
        gain=2.0,
    )
    U, grad, rate = potential_gradient(field, model, d)
    Uq, grad_q, rate_q = joint_space_gradient(
        field, points, qd, d.jacobian, d.jacobian_rate, pm.support[:, bodies].T
    )
    assert U > 0 and np.isclose(Uq, U, rtol=1e-14)
    assert np.abs(grad_q - d.G.T @ grad).max() < 1e-12 * np.abs(grad_q).max()
    expected = d.G_dot.T @ grad + d.G.T @ rate
    assert np.abs(rate_q - expected).max() < 1e-12 * np.abs(expected).max()


@pytest.mark.parametrize("law", ["velocity", "pose"])
def test_laws_i_and_ii_through_the_pipeline_equal_the_numpy_model(law):
    model = MODELS["chain_unaligned_springs"]()
    pipe = DacPipeline(model, law, Gains(kd_linear=9.0, kd_angular=4.0), effort_limits=[1e6] * 6)
    rng = np.random.default_rng(9)
    times, points = np.array([0.0, 0.4, 1.0]), rng.normal(size=(3, 6)) * 0.5
    pipe.set_joint_trajectory(times, points)
    for t in (0.1, 0.55, 2.0):
        q, qd = rng.normal(size=6) * 0.5, rng.normal(size=6)
        out = pipe.step(q, qd, t)
        q_d, qd_d, qdd_d = pipe._trajectory(t)
        data_d, G_d = _numpy_state(model, q_d, qd_d)
        nu_d_dot = G_d @ qdd_d + twist_map_rate(model, data_d) @ qd_d
        target = (
            VelocityTarget(data_d.nu, nu_d_dot)
            if law == "velocity"
            else BodyPoseTarget(data_d.r, data_d.quat, data_d.nu, nu_d_dot)
        )
        data, G = _numpy_state(model, q, qd)
        ref = pipe.controller.compute(
            data, target, JointSpaceOperators(model, data, G, twist_map_rate(model, data))
        )
        for key in FIELDS:
            assert (
                np.abs(getattr(out.result, key) - getattr(ref, key)).max()
                <= TOL * np.abs(getattr(ref, key)).max()
            )
        assert np.abs(out.efforts.requested - G.T @ ref.tau_c).max() <= TOL * np.abs(G.T @ ref.tau_c).max()


def test_pipeline_holds_the_current_pose_before_a_target_arrives():
    arm = load_model(URDF)
    pipe = DacPipeline(arm, "end_effector", Gains(damping=0.05), ee_link="tool0", ee_attitude=True)
    q, qd = np.array([0.2, -0.6, 1.0, 0.5, 0.2]), np.zeros(5)
    out = pipe.step(q, qd)
    assert np.abs(out.result.task_error).max() < 1e-15 and np.allclose(out.target_position, out.ee_position)
    moved = pipe.step(q + 0.01, qd)  # the held target stays where the tool was
    assert (
        np.allclose(moved.target_position, out.ee_position) and np.abs(moved.result.task_error).max() > 1e-3
    )


def test_the_benchmark_reference_gives_the_package_efforts_on_the_demo_arm():
    text = URDF.read_text()
    arm = model_from_urdf(text, "demo arm")
    gains = Gains(damping=0.05)
    rng = np.random.default_rng(12)
    active = 0
    for _ in range(6):
        q, qd = np.array([0.0, -0.8, 1.4, 0.6, 0.4]) + rng.normal(size=5) * 0.3, rng.normal(size=5)
        probe = DacPipeline(arm, "end_effector", gains, ee_link="tool0").step(q, qd)
        obstacle = (probe.data.r[rng.integers(5)] + rng.normal(size=3) * 0.04, 0.02)
        target = probe.ee_position + rng.normal(size=3) * 0.05
        pipe = DacPipeline(
            arm,
            "end_effector",
            gains,
            ee_link="tool0",
            obstacles=[obstacle],
            obstacle_influence=0.1,
            obstacle_eta=5.0,
        )
        pipe.set_ee_target(target)
        ref = ReferenceLawIII(text, "tool0", target, gains, [obstacle], 0.1, 5.0, pipe.efforts.limits)
        out = pipe.step(q, qd)
        clamped, requested = ref(q, qd)
        assert np.abs(out.efforts.requested - requested).max() <= TOL * np.abs(requested).max()
        assert np.allclose(out.efforts.effort, clamped, rtol=0, atol=TOL * np.abs(requested).max())
        active += out.result.obstacle_potential > 0
    assert active >= 3
