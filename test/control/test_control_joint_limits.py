"""Joint position and velocity limits on efforts (ros_lnn.control.joint_limits), against hand-computed
values, and on the DAC pipeline closing the loop on the simulated arm (no ROS)."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from ros_lnn.control.joint_limits import JointLimitGuard, JointLimits, joint_limits_from_model
from ros_lnn.errors import ConfigError

ROOT = Path(__file__).resolve().parents[2]
URDF = ROOT / "config" / "dac_chain.urdf"


def _guard(**kw):
    """One joint: position limits [-1, 1], velocity limit 2, effort limit 10; margin 0.1 (soft limits
    at ±0.9), k_p = 10 1/s, k_v = 5."""
    limits = JointLimits(("j",), np.array([-1.0]), np.array([1.0]), np.array([2.0]))
    args = dict(margin=0.1, k_position=10.0, k_velocity=5.0) | kw
    return JointLimitGuard(limits, [10.0], **args)


def test_far_from_the_limits_the_bounds_are_the_effort_limits():
    guard = _guard()
    # v⁺ = clip(−10 (0 − 0.9), ±2) = 2, u_max = clip(−5 (0 − 2), ±10) = 10; u_min = −10 likewise
    u_min, u_max = guard.bounds(np.array([0.0]), np.array([0.0]))
    assert u_min == pytest.approx([-10.0]) and u_max == pytest.approx([10.0])
    out = guard.apply([0.0], [0.0], [8.0])
    assert out.effort == pytest.approx([8.0]) and not out.soft_limited.any() and out.violation == ""


def test_past_the_soft_limit_the_effort_towards_the_limit_becomes_a_spring_damper():
    guard = _guard()
    # q = 0.95, q̇ = 0.5: v⁺ = clip(−10 · 0.05, ±2) = −0.5, u_max = clip(−5 (0.5 + 0.5), ±10) = −5;
    # v⁻ = clip(−10 (0.95 + 0.9), ±2) = −2, u_min = clip(−5 (0.5 + 2), ±10) = −10
    u_min, u_max = guard.bounds(np.array([0.95]), np.array([0.5]))
    assert u_min == pytest.approx([-10.0]) and u_max == pytest.approx([-5.0])
    out = guard.apply([0.95], [0.5], [8.0])
    assert out.effort == pytest.approx([-5.0]) and out.soft_limited.all()
    # an effort away from the limit is left alone
    assert guard.apply([0.95], [0.5], [-7.0]).effort == pytest.approx([-7.0])
    # the lower side mirrors it: q = −0.95, q̇ = −0.5 → u_min = +5
    assert guard.apply([-0.95], [-0.5], [-8.0]).effort == pytest.approx([5.0])


def test_a_joint_faster_than_its_limit_is_braked():
    guard = _guard()
    # q̇ = 2.2 > 2 (but below 1.2 × 2): u_max = clip(−5 (2.2 − 2), ±10) = −1
    out = guard.apply([0.0], [2.2], [3.0])
    assert out.effort == pytest.approx([-1.0]) and out.violation == ""


def test_a_violation_zeros_the_efforts_until_reset():
    guard = _guard()
    out = guard.apply([1.01], [0.0], [-3.0])
    assert out.effort == pytest.approx([0.0])
    assert "j position 1.01 beyond its upper limit 1" in out.violation
    # latched: a state inside the limits again still gets zeros
    assert guard.apply([0.0], [0.0], [3.0]).effort == pytest.approx([0.0])
    assert guard.violation
    guard.reset()
    assert guard.apply([0.0], [0.0], [3.0]).effort == pytest.approx([3.0])
    assert "lower limit -1" in guard.apply([-1.2], [0.0], [1.0]).violation


def test_velocity_violation_and_tolerances():
    assert _guard().apply([0.0], [2.39], [1.0]).violation == ""  # within 1.2 × 2
    out = _guard().apply([0.0], [-2.5], [1.0])
    assert "j velocity -2.5 beyond 1.2 × its limit 2" in out.violation and out.effort == [0.0]
    assert _guard(position_tolerance=0.05).apply([1.04], [0.0], [0.0]).violation == ""
    assert _guard(velocity_tolerance=1.5).apply([0.0], [2.9], [0.0]).violation == ""


def test_a_joint_without_limits_is_left_alone_and_the_margin_fits_the_range():
    free = JointLimits(("c",), np.array([-math.inf]), np.array([math.inf]), np.array([math.inf]))
    guard = JointLimitGuard(free, [10.0])
    out = guard.apply([100.0], [50.0], [7.0])
    assert out.effort == pytest.approx([7.0]) and out.violation == ""
    narrow = JointLimits(("n",), np.array([0.0]), np.array([0.2]), np.array([1.0]))
    guard = JointLimitGuard(narrow, [10.0], margin=0.1)  # at most a quarter of the range: 0.05
    assert guard.soft_lower == pytest.approx([0.05]) and guard.soft_upper == pytest.approx([0.15])


def test_limits_are_checked():
    with pytest.raises(ConfigError, match="lower must be below upper"):
        JointLimits(("a",), np.array([1.0]), np.array([0.0]), np.array([1.0]))
    with pytest.raises(ConfigError, match="velocity"):
        JointLimits(("a",), np.array([0.0]), np.array([1.0]), np.array([0.0]))
    limits = JointLimits(("a",), np.array([0.0]), np.array([1.0]), np.array([1.0]))
    with pytest.raises(ConfigError):
        JointLimitGuard(limits, [10.0], k_position=0.0)


def _model(text=None):
    from ros_lnn.physics.multibody.urdf import model_from_urdf

    return model_from_urdf(text or URDF.read_text(), "test")


JOINTS = ["joint1", "joint2", "joint3", "joint4", "joint5"]


def test_limits_from_the_urdf_and_their_overrides():
    model = _model()
    limits = joint_limits_from_model(model, JOINTS)
    assert limits.lower == pytest.approx([-3.1] * 5) and limits.upper == pytest.approx([3.1] * 5)
    assert limits.velocity == pytest.approx([6.0] * 5)
    pairs = [-1.0, 1.0, -2.0, 2.0, -0.5, 0.5, -3.0, 0.1, 0.0, 1.0]
    limits = joint_limits_from_model(model, JOINTS, pairs, [2.0])
    assert limits.lower == pytest.approx(pairs[0::2]) and limits.upper == pytest.approx(pairs[1::2])
    assert limits.velocity == pytest.approx([2.0] * 5)
    limits = joint_limits_from_model(model, JOINTS, None, [1.0, 2.0, 3.0, 4.0, 5.0])
    assert limits.velocity == pytest.approx([1.0, 2.0, 3.0, 4.0, 5.0])
    with pytest.raises(ConfigError, match="lower, upper for each joint"):
        joint_limits_from_model(model, JOINTS, [-1.0, 1.0])
    with pytest.raises(ConfigError, match="velocity_limits has 2"):
        joint_limits_from_model(model, JOINTS, None, [1.0, 2.0])


def test_a_continuous_joint_has_no_position_limit():
    text = URDF.read_text().replace(
        '<joint name="joint1" type="revolute">', '<joint name="joint1" type="continuous">'
    )
    limits = joint_limits_from_model(_model(text), JOINTS)
    assert limits.lower[0] == -math.inf and limits.upper[0] == math.inf
    assert limits.lower[1] == pytest.approx(-3.1)


def test_the_pipeline_keeps_a_joint_driven_past_its_limit_inside_it():
    """Law II on a joint trajectory that ends 0.5 rad beyond joint1's URDF limit (3.1): without limits
    the arm follows it past the limit; with them joint1 stops at its soft limit (3.0) and nothing
    trips."""
    from ros_lnn.control.closed_loop import sampled_loop
    from ros_lnn.control.pipeline import DacPipeline

    model = _model()
    q0 = np.array([2.8, -0.7, 1.3, 0.5, 0.3])
    q1 = q0.copy()
    q1[0] = 3.6
    peaks = {}
    for enforce in (False, True):
        pipe = DacPipeline(model, law="pose")
        if enforce:
            pipe.set_joint_limits(
                JointLimitGuard(joint_limits_from_model(model, pipe.joint_names), pipe.efforts.limits)
            )
        pipe.set_joint_trajectory([0.0, 1.0], [q0, q1])
        log = sampled_loop(pipe, q0, 2.5)
        peaks[enforce] = float(log.q[:, 0].max())
    assert peaks[False] > 3.5
    assert peaks[True] < 3.1 - 0.05
    assert pipe.joint_limits is not None and pipe.joint_limits.violation == ""


def test_the_pipeline_zeros_and_latches_on_a_violation():
    from ros_lnn.control.pipeline import DacPipeline

    model = _model()
    pipe = DacPipeline(model, law="pose")
    pipe.set_joint_limits(
        JointLimitGuard(joint_limits_from_model(model, pipe.joint_names), pipe.efforts.limits)
    )
    q = np.array([0.1, -0.7, 1.3, 0.5, 0.3])
    assert np.any(pipe.step(q, np.zeros(5)).efforts.effort != 0)  # gravity is held
    beyond = q.copy()
    beyond[2] = 3.2
    out = pipe.step(beyond, np.zeros(5))
    assert (
        not out.efforts.effort.any()
        and "joint3 position 3.2 beyond its upper limit 3.1" in out.limits.violation
    )
    assert not pipe.step(q, np.zeros(5)).efforts.effort.any()
    pipe.joint_limits.reset()
    assert np.any(pipe.step(q, np.zeros(5)).efforts.effort != 0)
    with pytest.raises(ConfigError, match="joint limits are for"):
        limits = JointLimits(("a",), np.array([0.0]), np.array([1.0]), np.array([1.0]))
        pipe.set_joint_limits(JointLimitGuard(limits, [1.0]))
