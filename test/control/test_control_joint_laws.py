"""The joint laws of the pipeline (feed-forward + PD, gravity compensation) and the compensated term,
against Pinocchio on the arm's own model (ros_lnn.arm.rigid_body, not the multibody model the pipeline
runs on) and hand-computed PD terms; the quintic trajectory against the polynomial it samples."""

from __future__ import annotations

import functools
import math
from pathlib import Path

import numpy as np
import pytest

from ros_lnn.control.pipeline import DacPipeline, JointTrajectorySampler

URDF = Path(__file__).resolve().parents[2] / "config" / "robots" / "panda" / "panda.urdf"
JOINTS = tuple(f"panda_joint{i}" for i in range(1, 8))


@functools.lru_cache(maxsize=1)
def arms():
    """(the URDF's arm, an arm whose bodies differ from it), both reduced to the seven joints."""
    from ros_lnn.arm.rigid_body import ArmRigidBody
    from ros_lnn.arm.simulation import perturbed_arm

    arm = ArmRigidBody.from_urdf(URDF, JOINTS)
    return arm, perturbed_arm(arm, seed=3)


def multibody(arm):
    from ros_lnn.physics.multibody.urdf import model_from_pinocchio

    pm = arm.model.copy()
    pm.damping = np.zeros(pm.nv)  # the reference RNEA below knows no joint damping
    return model_from_pinocchio(pm, "test arm")


def pipeline(law, names=JOINTS, **kw):
    return DacPipeline(
        multibody(arms()[1]), law=law, joint_names=list(names), ee_link="panda_hand_tcp",
        effort_limits=[1e6] * 7, **kw,
    )  # fmt: skip


def states(k, seed=0):
    rng = np.random.default_rng(seed)
    return [
        rng.uniform(-0.8, 0.8, (3, 7)) + np.array([[0.0, 0, 0, -1.5, 0, 1.5, 0]] + [[0.0] * 7] * 2)
        for _ in range(k)
    ]


def test_quintic_segments_reproduce_the_polynomial_through_their_points():
    c = np.random.default_rng(1).normal(size=(6, 3))

    def poly(t, d=0):
        coeffs = np.polynomial.polynomial.polyder(c, d) if d else c
        return np.polynomial.polynomial.polyval(t, coeffs).T

    times = np.array([0.0, 0.4, 1.1, 1.5])
    sampler = JointTrajectorySampler(times, poly(times), poly(times, 1), poly(times, 2))
    for t in np.linspace(0.01, 1.49, 37):
        q, qd, qdd = sampler(t)
        np.testing.assert_allclose(q, poly(t), atol=1e-12)
        np.testing.assert_allclose(qd, poly(t, 1), atol=1e-11)
        np.testing.assert_allclose(qdd, poly(t, 2), atol=1e-10)
    cubic = JointTrajectorySampler(times, poly(times), poly(times, 1))
    assert not np.allclose(cubic(0.7)[2], poly(0.7, 2), atol=1e-3)  # without accelerations: cubic


def test_feedforward_pd_is_rnea_along_the_trajectory_plus_the_joint_pd():
    truth = arms()[1]
    kp, kd = np.array([200.0, 190, 180, 170, 30, 20, 10]), np.array([5.0, 6, 7, 8, 0.5, 0.4, 0.3])
    law = pipeline("feedforward_pd", joint_kp=kp, joint_kd=kd)
    for q_d, qd_d, qdd_d in states(5):
        law.set_joint_trajectory([0.0, 1.0, 2.0], [q_d - qd_d, q_d, q_d + qd_d], [qd_d] * 3, [qdd_d] * 3)
        q, qd = q_d + 0.01, qd_d - 0.02
        out = law.step(q, qd, 1.0)
        ff = truth.inverse_dynamics(q_d, qd_d, qdd_d)[0]
        np.testing.assert_allclose(out.efforts.effort, ff + kp * (q_d - q) + kd * (qd_d - qd), atol=1e-9)
        np.testing.assert_allclose(out.efforts.feedback_part, kp * (q_d - q) + kd * (qd_d - qd), atol=1e-12)
        # the port carries the same command: Gᵀ port = u
        np.testing.assert_allclose(out.data.G.T.dot(out.result.tau_c), out.efforts.effort, atol=1e-8)
        e, edot = q - q_d, qd - qd_d
        V = 0.5 * edot.dot(truth.mass_matrix(q).dot(edot)) + 0.5 * e.dot(kp * e)
        assert out.result.lyapunov == pytest.approx(V, rel=1e-9)


def test_gravity_compensation_floats_the_arm_and_damps_with_kd():
    truth = arms()[1]
    law = pipeline("gravity_compensation", joint_kd=[0.5])
    for q, qd, _ in states(4, seed=2):
        out = law.step(q, qd)
        np.testing.assert_allclose(out.efforts.effort, truth.gravity_torque(q) - 0.5 * qd, atol=1e-9)
    assert not law.has_target and not law.needs_clock


def test_joint_order_and_live_gains():
    names = [JOINTS[i] for i in (3, 0, 6, 1, 5, 2, 4)]
    idx = [JOINTS.index(n) for n in names]
    kp = np.arange(1.0, 8.0) * 10
    ordered, shuffled = (
        pipeline("feedforward_pd", joint_kp=kp),
        pipeline("feedforward_pd", names, joint_kp=kp[idx]),
    )
    q_d, qd_d, qdd_d = states(1, seed=4)[0]
    q, qd = q_d + 0.02, qd_d
    for law, order in ((ordered, list(range(7))), (shuffled, idx)):
        law.set_joint_trajectory([0.0, 1.0], [q_d[order], q_d[order]], [qd_d[order]] * 2, [qdd_d[order]] * 2)
    a = ordered.step(q, qd, 0.5).efforts.effort
    b = shuffled.step(q[idx], qd[idx], 0.5).efforts.effort
    np.testing.assert_allclose(b, a[idx], atol=1e-10)
    ordered.set_joint_gains([0.0], [0.0])  # live: from the next step on
    c = ordered.step(q, qd, 0.5).efforts.effort
    desired = JointTrajectorySampler([0.0, 1.0], [q_d, q_d], [qd_d] * 2, [qdd_d] * 2)(0.5)[0]
    np.testing.assert_allclose(a - c, kp * (desired - q), atol=1e-9)
    with pytest.raises(Exception, match="joint_kp needs one finite gain"):
        ordered.set_joint_gains([1.0, 2.0], [0.0])


class Friction:
    """A compensated term of known values; ``bad`` makes it non-finite."""

    def __init__(self):
        self.calls, self.resets, self.bad = [], 0, False

    def reset(self):
        self.resets += 1

    def torque(self, q, qd):
        self.calls.append((np.array(q), np.array(qd)))
        return np.full(7, math.nan) if self.bad else 0.5 * np.tanh(np.asarray(qd) / 0.05)


def test_the_compensated_term_is_added_at_the_desired_state_and_a_non_finite_one_zeros_the_command():
    truth = arms()[1]
    comp = Friction()
    law = pipeline("feedforward_pd", compensation=comp, joint_kp=[100.0], joint_kd=[1.0])
    q_d, qd_d, qdd_d = states(1, seed=5)[0]
    law.set_joint_trajectory([0.0, 1.0, 2.0], [q_d - qd_d, q_d, q_d + qd_d], [qd_d] * 3, [qdd_d] * 3)
    law.reset_compensation()
    out = law.step(q_d, qd_d + 0.3, 1.0)
    np.testing.assert_allclose(comp.calls[-1][1], qd_d)  # the desired velocity, not the measured one
    expected = truth.inverse_dynamics(q_d, qd_d, qdd_d)[0] + 0.5 * np.tanh(qd_d / 0.05) - 0.3
    np.testing.assert_allclose(out.efforts.effort, expected, atol=1e-9)
    assert out.efforts.compensation_state == "ok" and comp.resets == 1
    comp.bad = True
    out = law.step(q_d, qd_d, 1.0)
    assert out.efforts.compensation_state == "non_finite"
    assert not out.efforts.effort.any() and np.isfinite(out.efforts.effort).all()
    # a DAC law gets the compensated term at the measured state
    dac = pipeline("pose", compensation=(comp := Friction()))
    q, qd = q_d, qd_d + 0.1
    with_comp = dac.step(q, qd).efforts
    np.testing.assert_allclose(comp.calls[-1][1], qd)
    np.testing.assert_allclose(with_comp.compensation_part, 0.5 * np.tanh(qd / 0.05))
    np.testing.assert_allclose(
        with_comp.effort - with_comp.model_part, with_comp.compensation_part, atol=1e-12
    )


def test_unknown_law_is_refused_in_one_line():
    with pytest.raises(Exception, match="law 'torque' is not one of") as err:
        pipeline("torque")
    assert "\n" not in str(err.value)
