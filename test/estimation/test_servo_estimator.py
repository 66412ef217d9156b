"""ServoEstimator (the estimator's step without ROS) against physics: the analytic crane exported through
the shared Lagrangian machinery is run by the estimator on a stream whose servo motion the filter
differentiates exactly (velocities quadratic in time) and on a commanded quintic plan; its outputs
must equal the crane's exact dynamics (ros_lnn.physics.crane, numpy) to the graph's float32 precision.
And its bookkeeping: warm-up, skips, stream restarts, stale commands, Q_f choice, rollouts bounded."""

from __future__ import annotations

import numpy as np
import pytest

from conftest import HAVE_TORCH
from ros_lnn.estimation.servo_estimator import ENERGY_NAMES, RESTART_AFTER, ServoEstimator
from ros_lnn.physics.crane import Crane

BASE_NS = 1_700_000_000_000_000_000
DT_NS = 2_000_000


@pytest.fixture(scope="module")
def exact_runtime(tmp_path_factory):
    if not HAVE_TORCH:
        pytest.skip("torch is needed to export the analytic crane model")
    from _node_model import export_crane_model
    from ros_lnn.inference.runtime import ServoLnnRuntime

    return ServoLnnRuntime(export_crane_model(tmp_path_factory.mktemp("exact") / "crane.onnx"))


@pytest.fixture(scope="module")
def shipped_runtime():
    from ros_lnn.inference.runtime import ServoLnnRuntime, default_model_path

    return ServoLnnRuntime(default_model_path())


def cart_cubic(t):
    """x(t) cubic: its velocity is quadratic, which the degree-2 velocity fit differentiates exactly."""
    return 0.1 + 0.4 * t - 0.9 * t**2 + 0.7 * t**3, 0.4 - 1.8 * t + 2.1 * t**2, -1.8 + 4.2 * t


def pendulum(t):
    return 0.3 * np.sin(2.1 * t) + 0.05, 0.63 * np.cos(2.1 * t)


def assert_physics(sample, est, q, qd, qdd_e, Q_f=0.0):
    truth = Crane().dynamics(q, qd, qdd_e=np.array([qdd_e]), Q_f=np.array([Q_f]))
    L = est.layout
    scale = lambda v: 1e-5 * max(1.0, float(np.max(np.abs(v))))  # noqa: E731 - float32 graph
    np.testing.assert_allclose(sample[L["Q_e"]], truth["Q_e"], atol=scale(truth["Q_e"]))
    np.testing.assert_allclose(sample[L["qdd"]], truth["qdd"], atol=scale(truth["qdd"]))
    np.testing.assert_allclose(sample[L["Q"]], truth["Q"], atol=scale(truth["Q"]))
    for name in ENERGY_NAMES:
        np.testing.assert_allclose(sample[L[name]], truth[name], atol=scale(truth[name]), err_msg=name)
    np.testing.assert_array_equal(sample[L["q"]], q)
    np.testing.assert_array_equal(sample[L["qd"]], qd)


def test_estimated_servo_acceleration_gives_the_exact_crane_dynamics(exact_runtime):
    est = ServoEstimator(exact_runtime, qdd_filter_window=7)
    checked = 0
    for k in range(40):
        t = k * DT_NS * 1e-9
        x, xd, xdd = cart_cubic(t)
        th, thd = pendulum(t)
        q, qd = np.array([th, x]), np.array([thd, xd])
        sample = est.step(BASE_NS + k * DT_NS, q, qd)
        if k < 2:
            assert sample is None and est.skipped == "warming_up"
            continue
        assert sample is not None, est.skipped
        assert_physics(sample, est, q, qd, xdd)
        checked += 1
    assert checked == 38 and est.counts["warming_up"] == 2


def test_positions_only_stream_is_differentiated_to_the_exact_state(exact_runtime):
    """No velocities: a cubic fit of positions gives q̇ and q̈_e; on cubic motion both are exact."""
    est = ServoEstimator(exact_runtime, qdd_filter_window=9)
    for k in range(30):
        t = k * DT_NS * 1e-9
        x, xd, xdd = cart_cubic(t)
        th, thd = 0.2 - 0.3 * t + 0.5 * t**3, -0.3 + 1.5 * t**2
        sample = est.step(BASE_NS + k * DT_NS, np.array([th, x]))
    truth_qd = np.array([thd, xd])
    np.testing.assert_allclose(sample[est.layout["qd"]], truth_qd, atol=1e-6)
    truth = Crane().dynamics(np.array([th, x]), truth_qd, qdd_e=np.array([xdd]), Q_f=np.zeros(1))
    np.testing.assert_allclose(sample[est.layout["Q_e"]], truth["Q_e"], atol=1e-4)
    assert est.counts["velocity_estimated"] == 30


def test_commanded_plan_acceleration_and_applied_force(exact_runtime):
    """A plan with accelerations is interpolated with quintics: a quintic x(t) is reproduced exactly,
    its q̈_e replaces the estimate; a finite free-joint effort is the Q_f the physics gets."""
    est = ServoEstimator(exact_runtime, command_timeout_s=0.05)
    c = np.array([0.0, 0.2, -0.3, 0.8, -0.6, 0.25])
    tp = np.linspace(0.0, 1.0, 6)
    powers = np.arange(6)
    pos = np.array([[np.sum(c * s**powers)] for s in tp])
    vel = np.array([[np.sum(c[1:] * powers[1:] * s ** (powers[1:] - 1))] for s in tp])
    acc = np.array([[np.sum(c[2:] * powers[2:] * (powers[2:] - 1) * s ** (powers[2:] - 2))] for s in tp])
    est.step(BASE_NS, np.zeros(2), np.zeros(2))  # the stream starts: the time origin
    est.set_plan([BASE_NS + int(s * 1e9) for s in tp], pos, vel, acc)
    for k in range(1, 59):  # up to the plan's last point
        t = k * 0.017
        x = np.sum(c * t**powers)
        xd = np.sum(c[1:] * powers[1:] * t ** (powers[1:] - 1))
        xdd = np.sum(c[2:] * powers[2:] * (powers[2:] - 1) * t ** (powers[2:] - 2))
        th, thd = pendulum(t)
        q, qd = np.array([th, x]), np.array([thd, xd])
        sample = est.step(BASE_NS + int(round(t * 1e9)), q, qd, np.array([0.3]))
        assert est.command_state == "commanded" and sample is not None
        assert_physics(sample, est, q, qd, xdd, Q_f=0.3)
    # past the plan's end + command_timeout_s: stale, q̈_e from the filter again (a held rest: zero)
    for k in range(12):  # the filter's window (9) holds only the rest
        sample = est.step(BASE_NS + int(1.2e9) + k * DT_NS, np.array([0.1, pos[-1, 0]]), np.array([0.0, 0.0]))
    assert est.command_state == "stale" and est.counts["stale_command"] == 12
    assert sample[est.layout["qdd"]][1] == pytest.approx(0.0, abs=1e-9)


def test_skips_restarts_and_free_joint_forces(shipped_runtime):
    est = ServoEstimator(shipped_runtime, free_joint_forces=[0.4])
    q, qd = np.array([0.1, 0.2]), np.array([0.3, -0.1])
    for k in range(5):
        est.step(BASE_NS + k * DT_NS, q, qd)
    assert est.step(BASE_NS + 5 * DT_NS, np.array([np.nan, 0.0]), qd) is None and est.skipped == "non_finite"
    assert est.step(BASE_NS + 5 * DT_NS, q, np.array([0.0, np.inf])) is None and est.skipped == "non_finite"
    sample = est.step(BASE_NS + 5 * DT_NS, q, qd, np.array([np.nan]))  # NaN effort: the parameter's Q_f
    assert sample[est.layout["Q_f"]][0] == pytest.approx(0.4)
    sample = est.step(BASE_NS + 6 * DT_NS, q, qd, np.array([-1.5]))
    assert sample[est.layout["Q_f"]][0] == pytest.approx(-1.5, rel=1e-6)
    # a bogus future stamp: later (valid) stamps are out of order until RESTART_AFTER in a row restart
    assert est.step(BASE_NS + 3600 * 10**9, q, qd) is not None
    for k in range(RESTART_AFTER - 1):
        assert est.step(BASE_NS + (7 + k) * DT_NS, q, qd) is None and est.skipped == "out_of_order"
    assert est.step(BASE_NS + (7 + RESTART_AFTER) * DT_NS, q, qd) is None and est.skipped == "warming_up"
    assert est.counts["stream_restarts"] == 1
    assert est.step(BASE_NS + (8 + RESTART_AFTER) * DT_NS, q, qd) is None
    assert est.step(BASE_NS + (9 + RESTART_AFTER) * DT_NS, q, qd) is not None
    with pytest.raises(ValueError, match="free_joint_forces needs 1"):
        est.free_joint_forces = [1.0, 2.0]
    with pytest.raises(ValueError, match="at least 3"):
        ServoEstimator(shipped_runtime, qdd_filter_window=2)


def test_array_commands_and_a_bounded_rollout(shipped_runtime):
    est = ServoEstimator(shipped_runtime, command_timeout_s=0.1)
    q, qd = np.array([0.1, 0.2]), np.array([0.3, -0.1])
    est.step(BASE_NS, q, qd)
    est.set_command([[0.2], [0.1], [-2.5]])
    for k in range(1, 4):
        sample = est.step(BASE_NS + k * DT_NS, q, qd)
    assert sample[est.layout["qdd"]][1] == pytest.approx(-2.5, rel=1e-6)
    with pytest.raises(ValueError):
        est.set_command([[np.nan]])
    assert est.predict_free_motion(0.5, 0.01) is None  # no plan
    times = [BASE_NS + int(s * 1e9) for s in (0.0, 100.0)]
    est.set_plan(times, [[0.0], [1.0]], [[0.0], [0.0]])
    est.step(BASE_NS + 4 * DT_NS, q, qd)
    taus, positions, _, accelerations = est.predict_free_motion(10.0, 0.001, max_steps=50)
    assert len(taus) == 51 and taus[-1] == pytest.approx(0.05)  # capped at max_steps
    assert positions.shape == (51, 2) and np.isfinite(accelerations).all()
