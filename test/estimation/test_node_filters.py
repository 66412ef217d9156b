"""ROS-free pieces of the estimator: the causal derivative filter and servo-plan interpolation."""

import numpy as np
import pytest

from ros_lnn.estimation.derivative import CausalPolyDerivative, ServoAccelerationEstimator
from ros_lnn.estimation.trajectory import CriticallyDampedServo, ServoPlan, SplicedPlan


def irregular_times(n, dt=0.002, seed=0):
    rng = np.random.default_rng(seed)
    return np.cumsum(dt * (1 + 0.4 * rng.uniform(-1, 1, n)))


def test_filter_is_exact_on_polynomials_of_its_degree():
    t = irregular_times(30)
    v = lambda s: np.array([1.0 - 2.0 * s + 3.5 * s**2, 0.5 * s**2])  # noqa: E731
    dv = lambda s: np.array([-2.0 + 7.0 * s, 1.0 * s])  # noqa: E731
    f = CausalPolyDerivative(window=9, degree=2, order=1)
    results = [(ti, f.update(ti, v(ti))) for ti in t]
    assert all(r is None for _, r in results[:2]) and all(r is not None for _, r in results[2:])
    for ti, r in results[2:]:
        np.testing.assert_allclose(r[0], dv(ti), rtol=1e-9, atol=1e-9)


def test_position_filter_gives_exact_first_and_second_derivatives_of_a_cubic():
    t = irregular_times(20, seed=1)
    f = CausalPolyDerivative(window=9, degree=3, order=2)
    for ti in t:
        d = f.update(ti, [2.0 + ti - 4 * ti**2 + 10 * ti**3])
    np.testing.assert_allclose(d[:, 0], [1 - 8 * ti + 30 * ti**2, -8 + 60 * ti], rtol=1e-7, atol=1e-7)


@pytest.mark.parametrize("window,degree,order", [(9, 2, 1), (11, 3, 2)])
def test_filter_error_on_smooth_signals_falls_with_the_window_length(window, degree, order):
    """Truncation error of a degree-d fit over a window of length h: O(h^(d+1-k)) for the k-th
    derivative. Halving the sample spacing (same sample count) must cut the error by about that
    power of two."""
    w = 2 * np.pi * 1.3

    def error(dt):
        f = CausalPolyDerivative(window=window, degree=degree, order=order)
        t = 0.3 - np.arange(40)[::-1] * dt  # same newest time for every spacing
        for ti in t:
            d = f.update(ti, [np.sin(w * ti)])
        exact = -w * w * np.sin(w * ti) if order == 2 else w * np.cos(w * ti)
        return abs(d[order - 1, 0] - exact)

    expected_order = degree + 1 - order
    ratio = error(0.004) / error(0.002)
    assert ratio == pytest.approx(2.0**expected_order, rel=0.15)


def test_filter_restarts_on_a_time_that_does_not_increase():
    f = CausalPolyDerivative(window=5, degree=2)
    for ti in (0.0, 0.01, 0.02, 0.03):
        f.update(ti, [ti])
    assert f.update(0.02, [1.0]) is None and not f.ready


def test_servo_estimator_uses_velocities_when_present_else_positions():
    est = ServoAccelerationEstimator(window=7)
    t = np.arange(10) * 0.002
    for ti in t:
        r = est.update(ti, [ti**3], [3 * ti**2])
    np.testing.assert_allclose(r[1], [6 * ti], rtol=1e-8)
    est.reset()
    for ti in t:
        r = est.update(ti, [ti**3])
    np.testing.assert_allclose(r[0], [3 * ti**2], rtol=1e-7, atol=1e-12)
    np.testing.assert_allclose(r[1], [6 * ti], rtol=1e-7)


def quintic(c, t):
    return (
        sum(ci * t**i for i, ci in enumerate(c)),
        sum(i * ci * t ** (i - 1) for i, ci in enumerate(c) if i),
        sum(i * (i - 1) * ci * t ** (i - 2) for i, ci in enumerate(c) if i > 1),
    )


def test_plan_interpolation_reproduces_polynomials_of_its_order():
    times = np.array([0.0, 0.3, 0.7, 1.0])
    c5 = [0.1, -0.4, 0.8, 1.1, -2.0, 0.9]
    q, qd, qdd = quintic(c5, times)
    plan = ServoPlan(times, q[:, None], qd[:, None], qdd[:, None])
    assert plan.commands_acceleration
    for t in np.linspace(0, 1, 23):
        s = plan.sample(t)
        want = quintic(c5, t)
        np.testing.assert_allclose([s.q[0], s.qd[0], s.qdd[0]], want, rtol=1e-10, atol=1e-10)
        assert s.commanded_acceleration and not s.finished
    c3 = c5[:4]
    q, qd, _ = quintic(c3, times)
    cubic = ServoPlan(times, q[:, None], qd[:, None])
    for t in np.linspace(0, 1, 23):
        s = cubic.sample(t)
        np.testing.assert_allclose([s.q[0], s.qd[0], s.qdd[0]], quintic(c3, t), rtol=1e-10, atol=1e-10)
        assert not s.commanded_acceleration
    linear = ServoPlan([0.0, 2.0], [[0.0], [1.0]])
    s = linear.sample(0.5)
    assert s.q[0] == pytest.approx(0.25) and s.qd[0] == pytest.approx(0.5) and s.qdd[0] == 0


def test_plan_before_start_holds_the_first_point_and_after_end_is_finished_at_rest():
    plan = ServoPlan([1.0, 2.0], [[0.0], [1.0]], [[0.5], [0.0]], [[0.1], [0.0]])
    s = plan.sample(0.5)
    assert s.q[0] == 0.0 and s.qd[0] == 0.5 and s.qdd[0] == 0.1 and not s.finished
    s = plan.sample(2.0)
    assert s.q[0] == 1.0 and not s.finished
    s = plan.sample(2.5)
    assert s.q[0] == 1.0 and s.qd[0] == 0.0 and s.qdd[0] == 0.0 and s.finished


def test_plan_rejects_bad_points():
    with pytest.raises(ValueError):
        ServoPlan([0.0, 0.0], [[0.0], [1.0]])
    with pytest.raises(ValueError):
        ServoPlan([0.0, 1.0], [[0.0], [np.nan]])
    with pytest.raises(ValueError):
        ServoPlan([0.0, 1.0], [[0.0], [1.0]], accelerations=[[0.0], [0.0]])


def test_spliced_plan_keeps_the_running_plan_until_the_new_one_starts():
    old = ServoPlan([0.0, 1.0], [[0.0], [1.0]], [[1.0], [1.0]], [[0.0], [0.0]])
    new = ServoPlan([0.5, 1.5], [[5.0], [6.0]], [[1.0], [1.0]], [[0.0], [0.0]])
    spliced = SplicedPlan(old, new)
    assert spliced.sample(0.25).q[0] == pytest.approx(0.25)
    assert spliced.sample(0.5).q[0] == pytest.approx(5.0)
    chain = None
    for k in range(20):  # a long command stream stays shallow
        chain = SplicedPlan(chain, ServoPlan([k, k + 2.0], [[k], [k + 2.0]]))
    depth, node = 0, chain
    while isinstance(node, SplicedPlan):
        depth, node = depth + 1, node.previous
    assert depth <= SplicedPlan.MAX_DEPTH + 1
    assert chain.sample(19.5).q[0] == pytest.approx(19.5)


def test_spliced_plans_at_20_hz_serve_a_sample_that_lags_by_most_of_a_second():
    """A loaded estimator processes queued joint states late: each still sees the plan in force at
    its stamp while that plan started less than HISTORY_S before the newest; the chain stays bounded."""
    period, chain = 0.05, None
    for k in range(200):  # 10 s of plans at 20 Hz, each a constant position k over 0.5 s
        t0 = k * period
        chain = SplicedPlan(chain, ServoPlan([t0, t0 + 0.5], [[float(k)], [float(k)]]))
    newest = 199 * period
    for lag in (0.0, 0.12, 0.5, 0.9):
        t = newest - lag + 0.01
        assert chain.sample(t).q[0] == pytest.approx(int(t / period + 1e-9)), lag
    depth, node = 0, chain
    while isinstance(node, SplicedPlan):
        depth, node = depth + 1, node.previous
    assert depth <= SplicedPlan.HISTORY_S / period + 2


def test_critically_damped_servo_solves_its_ode_and_is_continuous_at_commands():
    servo = CriticallyDampedServo([0.2], [0.0], 0.0, bandwidth=15.0)
    servo.command(0.1, [1.0])
    servo(0.1)
    servo.command(0.3, [-0.5])
    w = 15.0
    for t in (0.35, 0.5, 1.0):
        q, qd, qdd = servo(t)
        np.testing.assert_allclose(qdd, w * w * (-0.5 - q) - 2 * w * qd, rtol=1e-12, atol=1e-12)
        h = 1e-6
        np.testing.assert_allclose(qd, (servo(t + h)[0] - servo(t - h)[0]) / (2 * h), rtol=1e-6)
    # the state is continuous across the second command
    reference = CriticallyDampedServo([0.2], [0.0], 0.0, bandwidth=15.0)
    reference.command(0.1, [1.0])
    q_ref, qd_ref, _ = reference(0.3)
    q_new, qd_new, _ = servo(0.3)
    np.testing.assert_allclose([q_new, qd_new], [q_ref, qd_ref], rtol=1e-12)
    assert servo(10.0)[0][0] == pytest.approx(-0.5, abs=1e-9)


@pytest.mark.parametrize("window,degree,order", [(9, 2, 1), (7, 3, 2), (4, 3, 2)])
def test_filter_equals_a_least_squares_polynomial_fit_of_the_last_window(window, degree, order):
    """Against numpy's own polynomial fit of the held samples (independent code), sample by sample,
    through warm-up, steady and jittered spacing (weights reused and recomputed) and a restart."""
    rng = np.random.default_rng(7)
    steady = 0.002 * np.arange(1, 25)
    jitter = steady[-1] + np.cumsum(0.002 * (1 + 0.3 * rng.uniform(-1, 1, 15)))
    times = np.concatenate([steady, jitter, 0.01 + 0.002 * np.arange(12)])  # then a restart
    f = CausalPolyDerivative(window=window, degree=degree, order=order)
    held_t, held_x = [], []
    for t in times:
        x = np.array([np.sin(3 * t) + 0.1 * rng.normal(), np.cos(2 * t)])
        if held_t and t <= held_t[-1]:
            held_t, held_x = [], []
        held_t, held_x = (held_t + [t])[-window:], (held_x + [x])[-window:]
        got = f.update(t, x)
        if len(held_t) <= degree:
            assert got is None
            continue
        tau = np.array(held_t) - t
        for j in range(2):
            column = np.array(held_x)[:, j]
            poly = np.polynomial.Polynomial.fit(tau, column, degree, domain=[-1, 1], window=[-1, 1])
            want = [poly.deriv(k)(0.0) for k in range(1, order + 1)]
            np.testing.assert_allclose(got[:, j], want, rtol=1e-6, atol=1e-6 * max(1.0, np.max(np.abs(want))))
