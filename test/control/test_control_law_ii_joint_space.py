"""Laws I/II on a joint trajectory evaluated in joint coordinates (the pipeline's step: the target's
kinematics once per trajectory sample, no G or Ġ formed) against the coordinate-free law on the
maximal-coordinate numpy model (its own kinematics, twist map and rate, the quaternion attitude error) —
port command, sliding variable, reference velocity and its rate, task error, Lyapunov function, joint
efforts and the joint-space reference q̇_r, q̈_r; the per-sample cache against fresh evaluations; the
pipeline's fast step against its plain path (``step_body_twists``) with a learned part and a permuted
joint order; the attitude error from rotation matrices against quaternions (errors beyond 120°
included); the trajectory sampler against scipy's cubic Hermite spline."""

import zlib

import numpy as np
import pytest
from _multibody_cases import MODELS, _numpy_state
from scipy.interpolate import CubicHermiteSpline

from ros_lnn.control.dac import BodyPoseTarget, DacController, EndEffector, Gains, VelocityTarget
from ros_lnn.control.joint_space import JointTargetLawJointSpace, _attitude_errors
from ros_lnn.control.mobility import JointSpaceOperators
from ros_lnn.control.pipeline import DacPipeline, JointTrajectorySampler
from ros_lnn.physics.multibody.kinematics import twist_map_rate
from ros_lnn.physics.multibody.pin import PinocchioModel
from ros_lnn.physics.multibody.quaternion import quat_mul_conj, quat_normalize, quat_to_matrix

TOL = 1e-10  # relative to each output's largest entry
FIELDS = ("tau_c", "s", "nu_r", "nu_r_dot", "task_error")
GAINS = {
    "default": Gains(),
    "two rates": Gains(kd_linear=7.0, kd_angular=3.0, lambda_position=2.0, lambda_attitude=6.0),
    "constant K_d": Gains(kd_linear=4.0, kd_angular=0.5, mass_weighted=False),
}


def _rel(a, b):
    return float(np.abs(np.asarray(a) - np.asarray(b)).max() / max(np.abs(b).max(), 1e-300))


@pytest.mark.parametrize("law", ["pose", "velocity"])
@pytest.mark.parametrize("name", sorted(MODELS))
@pytest.mark.parametrize("gains", sorted(GAINS))
def test_joint_space_laws_i_ii_equal_the_coordinate_free_law_on_the_numpy_model(law, name, gains):
    model = MODELS[name]()
    ee = EndEffector(model.n_bodies - 1, np.array([0.04, 0.01, 0.0]))
    ctl = DacController(model, law, GAINS[gains], ee)
    pm = PinocchioModel(model, frames=[("ee", ee.body, ee.offset, ee.rotation)])
    fast = JointTargetLawJointSpace(ctl, pm, pm.frame_ids["ee"])
    order = pm.coordinate_order
    nv = len(order)
    rng = np.random.default_rng(zlib.crc32(f"{law}/{name}/{gains}".encode()))
    large = 0
    for trial in range(8):
        spread = 0.05 if trial < 4 else 1.5  # small tracking errors, then errors of any size
        q_d, qd_d, qdd_d = rng.normal(size=nv) * 0.8, rng.normal(size=nv), rng.normal(size=nv) * 3
        q, qd = q_d + rng.normal(size=nv) * spread, qd_d + rng.normal(size=nv) * spread
        q = (q + np.pi) % (
            2 * np.pi
        ) - np.pi  # within (−π, π]: the numpy model's springs act on wrapped angles
        result, u, jdata, ee_pos = fast.step(q, qd, q_d, qd_d, qdd_d)
        qd_r, qdd_r = fast.joint_reference
        # the reference: numpy model at the target and at the state, the law through G, Ġ
        data_d, G_d = _numpy_state(model, q_d, qd_d, order)
        nu_d_dot = G_d @ qdd_d + twist_map_rate(model, data_d)[:, order] @ qd_d
        target = (
            BodyPoseTarget(data_d.r, data_d.quat, data_d.nu, nu_d_dot)
            if law == "pose"
            else VelocityTarget(data_d.nu, nu_d_dot)
        )
        data, G = _numpy_state(model, q, qd, order)
        G_dot = twist_map_rate(model, data)[:, order]
        ref = ctl.compute(data, target, JointSpaceOperators(model, data, G, G_dot))
        for key in FIELDS:
            assert _rel(getattr(result, key), getattr(ref, key)) <= TOL, (key, trial)
        assert abs(result.lyapunov - ref.lyapunov) <= TOL * ref.lyapunov
        assert _rel(u, G.T @ ref.tau_c) <= TOL
        assert _rel(G @ qd_r, ref.nu_r) <= TOL and _rel(G @ qdd_r + G_dot @ qd_r, ref.nu_r_dot) <= TOL
        assert np.allclose(ee_pos, data.r[ee.body] + data.R[ee.body] @ ee.offset, rtol=0, atol=1e-14)
        assert np.allclose(jdata.nu, data.nu, rtol=0, atol=1e-13)
        w = quat_mul_conj(data.quat, data_d.quat)[:, 0]
        large += bool(np.any(np.abs(w) < 0.5))  # some body's attitude error beyond 120°
    assert law == "velocity" or large > 0 or name == "urdf_arm"


def test_attitude_error_from_rotations_equals_the_quaternion_error_at_any_angle():
    rng = np.random.default_rng(3)
    quat = quat_normalize(rng.normal(size=(400, 4)))
    quat_d = quat_normalize(rng.normal(size=(400, 4)))
    quat_d[:100] = quat_normalize(quat[:100] + rng.normal(size=(100, 4)) * 0.05)  # small errors
    e, w = _attitude_errors(quat_to_matrix(quat), quat_to_matrix(quat_d))
    qe = quat_mul_conj(quat, quat_d)
    sign = np.where(qe[:, :1] < 0, -1.0, 1.0)
    assert np.abs(w - np.abs(qe[:, 0])).max() < 1e-12
    assert np.abs(e - 2.0 * sign * qe[:, 1:]).max() < 1e-12
    assert (np.abs(qe[:, 0]) < 0.5).sum() > 50  # the branch beyond 120° is exercised
    # the branch below 120° alone (every body's trace positive)
    e_small, w_small = _attitude_errors(quat_to_matrix(quat[:100]), quat_to_matrix(quat_d[:100]))
    assert np.abs(e_small - e[:100]).max() < 1e-14 and np.abs(w_small - w[:100]).max() < 1e-14


def test_sampler_equals_scipys_cubic_hermite_spline():
    rng = np.random.default_rng(4)
    times = np.cumsum(rng.uniform(0.05, 0.3, 12))
    q, v = rng.normal(size=(12, 4)), rng.normal(size=(12, 4))
    sampler = JointTrajectorySampler(times, q, v)
    spline = CubicHermiteSpline(times, q, v, axis=0)
    for t in rng.uniform(times[0], times[-1], 200).tolist() + times[1:-1].tolist():
        got = sampler(t)
        for k in range(3):
            # at a knot q̈ jumps: the sampler takes the segment that ends there (the left limit)
            want = spline(np.nextafter(t, -np.inf) if k == 2 and t in times else t, k)
            assert np.abs(got[k] - want).max() <= 1e-10 * max(1.0, np.abs(want).max()), (t, k)
    for t, end in ((times[0] - 1.0, 0), (times[-1] + 1.0, -1)):  # before/after: the end point at rest
        got = sampler(t)
        assert np.array_equal(got[0], q[end]) and not got[1].any() and not got[2].any()


def _pipelines(residual):
    model = MODELS["chain_unaligned_springs"]()
    names = [j.name for j in model.joints][::-1]  # the configured order differs from the model's
    pipes = {}
    for name in ("fast", "plain"):
        pipes[name] = DacPipeline(
            model, "pose", Gains(kd_linear=9.0, kd_angular=4.0), joint_names=names, effort_limits=[1e6] * 6
        )
        pipes[name].set_residual(residual)
    return pipes


def test_pipeline_step_equals_its_plain_path_with_a_learned_part_and_caches_per_sample():
    calls = []

    def residual(q, qd, qdd_r):
        calls.append(np.array(qdd_r))
        return 0.1 * np.tanh(q) + 0.01 * qdd_r

    pipes = _pipelines(residual)
    rng = np.random.default_rng(9)
    times, points = np.array([0.0, 0.4, 1.0, 1.3]), rng.normal(size=(4, 6)) * 0.5
    for pipe in pipes.values():
        pipe.set_joint_trajectory(times, points)
    law = pipes["fast"]._law_joint_target
    # a new sample needs one Pinocchio pass; the same sample again (the same t; held past the end) none
    for t, new in ((-0.5, 1), (0.1, 1), (0.1, 0), (0.55, 1), (1.29, 1), (2.0, 1), (2.5, 0)):
        q, qd = rng.normal(size=6) * 0.5, rng.normal(size=6)
        before = law.target.evaluations
        calls.clear()
        fast = pipes["fast"].step(q, qd, t)
        plain = pipes["plain"].step_body_twists(q, qd, t)
        assert len(calls) == 2 and _rel(calls[0], calls[1]) <= TOL  # the learned part's q̈_r input
        assert _rel(fast.efforts.requested, plain.efforts.requested) <= TOL
        assert _rel(fast.efforts.residual_part, plain.efforts.residual_part) <= TOL
        for key in FIELDS:
            assert _rel(getattr(fast.result, key), getattr(plain.result, key)) <= TOL
        assert np.allclose(fast.ee_position, plain.ee_position, rtol=0, atol=1e-14)
        # served from the cache with the numbers of a fresh evaluation
        assert law.target.evaluations == before + new
        if not new:
            law.target._key = None  # forget: the same step evaluated afresh
            again = pipes["fast"].step(q, qd, t)
            assert law.target.evaluations == before + 1
            assert np.array_equal(again.efforts.requested, fast.efforts.requested)


def test_pipeline_holds_the_current_joints_before_a_trajectory_arrives():
    pipes = _pipelines(None)
    rng = np.random.default_rng(2)
    q = rng.normal(size=6) * 0.4
    out = pipes["fast"].step(q, np.zeros(6), 0.3)
    assert np.abs(out.result.task_error).max() < 1e-12
    moved = pipes["fast"].step(q + 0.05, np.zeros(6), 0.4)  # the held configuration stays where it was
    plain = pipes["plain"]
    plain.step_body_twists(q, np.zeros(6), 0.3)
    ref = plain.step_body_twists(q + 0.05, np.zeros(6), 0.4)
    assert np.abs(moved.result.task_error).max() > 1e-3
    assert _rel(moved.efforts.requested, ref.efforts.requested) <= TOL
