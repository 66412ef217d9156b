"""The protective stop (ros_lnn.control.protective_stop) against hand-computed values and Pinocchio's
dynamics of the URDF, and on the DAC pipeline closing the loop on the simulated arm (no ROS): zero
efforts let a moving arm coast past its limits, the stop brings it to rest inside them and holds it."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pinocchio as pin
import pytest

from ros_lnn.control.protective_stop import RETURN_SPEED, SETTLED_SPEED, ProtectiveStop
from ros_lnn.errors import ConfigError

ROOT = Path(__file__).resolve().parents[2]
URDF = ROOT / "config" / "dac_chain.urdf"
Q0 = np.array([0.1, -0.7, 1.3, 0.5, 0.3])


def _one_joint(**kw):
    """One joint with unit inertia, effort limit 10, soft limits ±0.9, velocity limit 2 (a tenth: 0.2)."""
    return ProtectiveStop([10.0], **({"rate": 50.0, "lower": [-0.9], "upper": [0.9], "velocity": [2.0]} | kw))


def _unit_inertia(q, qd, qdd):
    return np.asarray(qdd, float)  # H = 1, no gravity: u = q̈


def test_a_moving_joint_is_braked_towards_zero_velocity_within_its_effort_limit():
    stop = _one_joint()
    # inside the soft limits, moving: v_ref = 0, q̈ = 50 (0 − 0.1) = −5
    assert stop.effort([0.0], [0.1], _unit_inertia) == pytest.approx([-5.0])
    assert math.isnan(stop.rest[0])  # not at rest yet (0.1 ≥ SETTLED_SPEED)
    # fast: q̈ = −50 · 3 = −150, clipped to the effort limit
    assert stop.effort([0.0], [3.0], _unit_inertia) == pytest.approx([-10.0])


def test_a_joint_at_rest_is_held_where_it_stopped():
    stop = _one_joint()
    assert stop.effort([0.3], [0.0], _unit_inertia) == pytest.approx([0.0])
    assert stop.rest == pytest.approx([0.3])
    # pushed away from it: v_ref = clip(12.5 (0.3 − 0.308), ±0.2) = −0.1, q̈ = 50 (−0.1 − 0) = −5
    assert stop.effort([0.308], [0.0], _unit_inertia) == pytest.approx([-5.0])
    # a small push: v_ref = 12.5 · (−0.001) = −0.0125, q̈ = 50 · (−0.0125 − 0.01) = −1.125
    assert stop.effort([0.301], [0.01], _unit_inertia) == pytest.approx([-1.125])
    stop.reset()
    assert math.isnan(stop.rest[0])


def test_a_joint_past_its_soft_limit_is_brought_back_slowly():
    stop = _one_joint()
    # q = 1.0, past 0.9: v_ref = clip(12.5 (0.9 − 1.0), ±min(0.25, 0.2)) = −0.2, q̈ = 50 (−0.2 − 0.0) = −10
    assert stop.effort([1.0], [0.0], _unit_inertia) == pytest.approx([-10.0])
    assert stop.rest == pytest.approx([0.9])  # it rests at the soft limit, not where it stopped
    # without a velocity limit the return speed is RETURN_SPEED
    free = _one_joint(velocity=None, rate=4.0)
    assert free.return_speed == pytest.approx([RETURN_SPEED])
    # v_ref = clip(1 · (0.9 − 1.0), ±0.25) = −0.1, q̈ = 4 (−0.1 − 0) = −0.4
    assert free.effort([1.0], [0.0], _unit_inertia) == pytest.approx([-0.4])


def test_the_stop_is_inverse_dynamics_of_the_braking_acceleration_on_the_urdf():
    """Against Pinocchio on the URDF: u = H q̈ + C q̇ + g (crba, nonLinearEffects) at q̈ = −50 q̇."""
    from ros_lnn.control.pipeline import DacPipeline
    from ros_lnn.physics.multibody.urdf import model_from_urdf

    pipe = DacPipeline(model_from_urdf(URDF.read_text(), "dac_chain.urdf"))
    limits = pipe.efforts.limits
    pipe.set_protective_stop(ProtectiveStop(limits, 50.0))
    model = pin.buildModelFromXML(URDF.read_text())
    data = model.createData()
    qd = np.array([0.02, -0.03, 0.01, 0.04, -0.02])  # slow enough not to saturate
    H = pin.crba(model, data, Q0)
    H = np.triu(H) + np.triu(H, 1).T
    expected = H @ (-50.0 * qd) + pin.nonLinearEffects(model, data, Q0, qd)
    assert np.all(np.abs(expected) < limits)
    np.testing.assert_allclose(pipe.stop_efforts(Q0, qd), expected, rtol=1e-10, atol=1e-12)
    # at rest: gravity held
    pipe.protective_stop.reset()
    np.testing.assert_allclose(
        pipe.stop_efforts(Q0, np.zeros(5)), pin.computeGeneralizedGravity(model, data, Q0), atol=1e-12
    )
    # without a stop, zeros
    pipe.set_protective_stop(None)
    assert not pipe.stop_efforts(Q0, qd).any()


def test_a_model_that_is_not_finite_gives_zeros_and_bad_settings_are_refused():
    stop = _one_joint()
    assert stop.effort([0.0], [0.5], lambda q, qd, a: np.array([math.nan])) == pytest.approx([0.0])
    for kw in ({"rate": 0.0}, {"rate": math.inf}):
        with pytest.raises(ConfigError, match="rate"):
            ProtectiveStop([1.0], **kw)
    with pytest.raises(ConfigError, match="effort limits"):
        ProtectiveStop([1.0, -1.0])


@pytest.mark.parametrize("reaction", ["zero", "brake"])
def test_a_violation_on_the_closed_loop_coasts_with_zero_efforts_and_comes_to_rest_with_the_stop(reaction):
    """The arm at Q0 with joint5 at 9 rad/s (beyond 1.2 × 6): the stop latches at once. Zero efforts:
    the arm coasts and falls past its limits. The stop: every joint at rest inside the limits, held."""
    from ros_lnn.control.closed_loop import sampled_loop
    from ros_lnn.nodes.dac_controller.build import make_pipeline
    from ros_lnn.nodes.dac_controller.parameters import PARAMETERS
    from ros_lnn.physics.multibody.build import load_model

    values = PARAMETERS.coerce({p.name: p.default for p in PARAMETERS} | {"limit_reaction": reaction})
    pipe = make_pipeline(load_model(URDF), values)
    log = sampled_loop(pipe, Q0, 3.0, qd0=[0.0, 0.0, 0.0, 0.0, 9.0])
    assert log.stopped.all()
    beyond = np.abs(log.q).max()
    if reaction == "zero":
        assert not log.u.any()
        assert beyond > 3.1  # past the URDF's ±3.1
        return
    limits = pipe.efforts.limits
    assert np.all(np.abs(log.u) <= limits + 1e-12)
    assert beyond < 3.1
    tail = slice(-250, None)  # the last 0.5 s
    assert np.abs(log.qd[tail]).max() < SETTLED_SPEED
    assert np.ptp(log.q[tail], axis=0).max() < 1e-6  # held against gravity, not sinking


def _late_stop_run(latency_known: bool, seed: int = 1, delay_steps: int = 10, dt: float = 0.005):
    """The demo arm (Pinocchio's ABA, RK4 in sub-steps, efforts held over each step) from three random
    states moving at up to 8 rad/s, under the stop evaluated on states ``delay_steps`` steps old (a loop
    50 ms late); ``latency_known``: the stop is told how late. The largest |q̇| of each run's last
    0.5 s."""
    model = pin.buildModelFromXML(URDF.read_text())
    data = model.createData()

    def step(q, qd, u, n=10):
        h = dt / n
        for _ in range(n):
            a1 = pin.aba(model, data, q, qd, u)
            a2 = pin.aba(model, data, q + h / 2 * qd, qd + h / 2 * a1, u)
            a3 = pin.aba(model, data, q + h / 2 * (qd + h / 2 * a1), qd + h / 2 * a2, u)
            a4 = pin.aba(model, data, q + h * (qd + h / 2 * a2), qd + h * a3, u)
            q, qd = q + h * (qd + h / 6 * (a1 + a2 + a3)), qd + h / 6 * (a1 + 2 * a2 + 2 * a3 + a4)
        return q, qd

    rng = np.random.default_rng(seed)
    ends = []
    for _ in range(3):
        stop = ProtectiveStop([40.0, 40.0, 25.0, 12.0, 6.0], 50.0, [-3.0] * 5, [3.0] * 5, [6.0] * 5)
        if latency_known:
            stop.latency_s = (delay_steps + 1) * dt  # the state's age and the hold until the next command
        q, qd = rng.uniform(-3, 3, 5), rng.uniform(-8, 8, 5)
        seen = [(q, qd)] * (delay_steps + 1)
        speeds = []
        for _ in range(2000):
            late_q, late_qd = seen[-1 - delay_steps]
            u = stop.effort(late_q, late_qd, lambda a, b, c: pin.rnea(model, data, a, b, c))
            q, qd = step(q, qd, u)
            seen.append((q, qd))
            speeds.append(np.abs(qd).max())
        ends.append(max(speeds[-100:]))
    return ends


def test_a_late_loop_brakes_softer_and_still_brings_the_arm_to_rest():
    """At 50 1/s a brake acting on 55 ms old states is past the stability bound (k_d τ = 2.75 > π/2): the
    arm never comes to rest, it whips. Told its latency, the stop brakes at 0.3 / 55 ms ≈ 5.5 1/s and every
    run ends at rest."""
    assert all(end > 5.0 for end in _late_stop_run(latency_known=False))
    assert all(end < 0.5 for end in _late_stop_run(latency_known=True))


def test_the_braking_rate_is_bounded_by_the_latency():
    stop = _one_joint()
    assert stop.braking_rate() == 50.0  # latency unknown: the rate as set
    stop.latency_s = 0.002  # 0.3 / 0.002 = 150: above the rate
    assert stop.braking_rate() == 50.0
    stop.latency_s = 0.03  # 0.3 / 0.03 = 10
    assert stop.braking_rate() == pytest.approx(10.0)
    # moving inside the soft limits: q̈ = 10 (0 − 0.1) = −1
    assert stop.effort([0.0], [0.1], _unit_inertia) == pytest.approx([-1.0])
