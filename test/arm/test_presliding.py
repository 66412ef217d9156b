"""Friction with memory (ros_lnn.arm.presliding): the stop operators against a scalar loop written
here and against closed forms, the state's start rules, and the memory identified with the rigid body
against torques built here."""

from pathlib import Path

import numpy as np
import pytest

from ros_lnn.arm import identification as idn
from ros_lnn.arm.presliding import WIDTHS, FrictionMemory, memory_columns, state_matching
from ros_lnn.arm.rigid_body import ArmRigidBody
from ros_lnn.errors import ModelError

URDF = Path(__file__).resolve().parents[2] / "config" / "robots" / "panda" / "panda.urdf"
JOINTS = tuple(f"panda_joint{i}" for i in range(1, 8))


def scalar_stops(q, widths, start=None):
    """Each element a spring that sticks until its joint is ``w`` away, one number at a time."""
    N, n = q.shape
    out = np.zeros((N, n, len(widths)))
    for j in range(n):
        for i, w in enumerate(widths):
            p = q[0, j] if start is None else start[j, i]
            for k in range(N):
                if q[k, j] - p > w:
                    p = q[k, j] - w
                elif p - q[k, j] > w:
                    p = q[k, j] + w
                out[k, j, i] = (q[k, j] - p) / w
    return out


def bank(n=2, widths=(1e-3, 1e-2)):
    return FrictionMemory(np.array(widths), np.zeros((n, len(widths))))


def test_outputs_match_a_scalar_loop_on_a_random_walk():
    rng = np.random.default_rng(0)
    q = np.cumsum(rng.normal(scale=2e-3, size=(400, 3)), axis=0)
    memory = bank(3, WIDTHS)
    np.testing.assert_allclose(memory.outputs(q), scalar_stops(q, WIDTHS), atol=1e-12)
    # two pieces: the second starts neutral again at its own first sample
    both = memory.outputs(q, starts=(0, 250))
    np.testing.assert_allclose(both[250:], scalar_stops(q[250:], WIDTHS), atol=1e-12)


def test_rise_then_reversal_closed_form():
    w = 1e-3
    memory = bank(1, (w,))
    up = np.linspace(0.0, 0.4e-3, 5)  # inside the element: a spring, s = d / w
    s = memory.outputs(up[:, None])[:, 0, 0]
    np.testing.assert_allclose(s, up / w, atol=1e-12)
    path = np.concatenate([np.linspace(0, 5e-3, 50), 5e-3 - np.linspace(0, 3e-3, 31)[1:]])
    s = memory.outputs(path[:, None])[:, 0, 0]
    assert s[49] == pytest.approx(1.0)  # sliding up
    back = 5e-3 - path[50:]
    np.testing.assert_allclose(s[50:], np.maximum(1.0 - back / w, -1.0), atol=1e-12)  # 2 w to flip
    # at rest the output holds whatever happened before
    held = memory.outputs(np.concatenate([path, np.full(20, path[-1])])[:, None])[:, 0, 0]
    assert np.all(held[-20:] == held[len(path) - 1])


def test_outputs_do_not_depend_on_the_sample_rate():
    """The state follows the path's turning points only: a path monotone between the samples of a
    slow log gives the same outputs there as a ten times faster log of it."""
    rng = np.random.default_rng(4)
    knots = np.cumsum(rng.normal(scale=3e-3, size=(61, 2)), axis=0)
    t_knots = np.arange(61.0)
    t_fine = np.linspace(0, 60, 601)
    fine_q = np.column_stack([np.interp(t_fine, t_knots, knots[:, j]) for j in range(2)])
    memory = bank(2, WIDTHS)
    np.testing.assert_allclose(memory.outputs(knots), memory.outputs(fine_q)[::10], atol=1e-9)


def test_state_is_known_once_the_joint_travelled_twice_the_widest_element():
    w = np.array([1e-3, 4e-3])
    memory = bank(2, w)
    rest = np.zeros(10)
    ramp = np.linspace(0, 1.2e-2, 121)[1:]  # 1e-4 per sample
    q = np.column_stack([np.concatenate([rest, ramp]), np.zeros(130)])
    known = memory.known(q)
    assert not known[:10].any()
    first = 10 + int(np.argmax(ramp >= 2 * w.max() - 1e-12))
    assert not known[first - 1, 0] and known[first:, 0].all()
    assert not known[:, 1].any()  # joint 2 never moves: its state stays unknown


def test_state_matching_sets_the_memory_torque_within_its_bounds():
    memory = FrictionMemory(np.array([1e-3, 1e-2]), np.array([[0.5, 1.5], [0.2, 0.3]]))
    q = np.array([0.3, -1.0])
    state = state_matching(memory, q, np.array([1.0, -4.0]))
    s = (q[:, None] - state) / memory.widths
    torque = memory.torque_of_outputs(s)
    assert torque[0] == pytest.approx(1.0)  # inside ±2
    assert torque[1] == pytest.approx(-0.5)  # clipped to the saturation −0.5
    # the state is a possible one: every element within its width of q
    assert np.all(np.abs(q[:, None] - state) <= memory.widths + 1e-15)


def test_metadata_round_trip_and_refusals():
    memory = FrictionMemory(np.array(WIDTHS), np.arange(12.0).reshape(2, 6))
    again = FrictionMemory.from_metadata(memory.to_metadata(), 2)
    np.testing.assert_array_equal(again.weights, memory.weights)
    assert FrictionMemory.from_metadata(None, 2) is None
    with pytest.raises(ModelError, match="unreadable"):
        FrictionMemory.from_metadata({"widths": [1e-3]}, 2)
    with pytest.raises(ModelError, match="widths"):
        FrictionMemory(np.array([0.0]), np.zeros((1, 1)))


def test_least_squares_recovers_the_memory_with_the_rigid_body():
    """Torques built here: the URDF's rigid body + viscous/Coulomb friction + a memory term whose
    element torques are known, the elements run by the scalar loop above. The fit with the package's
    stop-operator columns gets every one back."""
    arm = ArmRigidBody.from_urdf(URDF, JOINTS)
    rng = np.random.default_rng(3)
    t = np.linspace(0, 12, 3000)
    steps = rng.normal(size=(len(t), 7)) * 4e-3
    q = np.cumsum(steps, axis=0) * np.linspace(1, 0.2, len(t))[:, None] + 0.3
    dt = t[1] - t[0]
    qd = np.gradient(q, dt, axis=0)
    qdd = np.gradient(qd, dt, axis=0)
    widths = np.array([1e-3, 1e-2])
    h_true = rng.uniform(0.1, 1.0, (7, 2))
    phi_true = np.column_stack([rng.uniform(0.1, 1, 7), rng.uniform(0.1, 1, 7), rng.uniform(-0.1, 0.1, 7)])
    s_ref = scalar_stops(q, widths)
    tau = (
        arm.inverse_dynamics(q, qd, qdd)
        + qd * phi_true[:, 0]
        + np.tanh(qd / 0.02) * phi_true[:, 1]
        + phi_true[:, 2]
        + np.einsum("tjk,jk->tj", s_ref, h_true)
    )
    s = FrictionMemory(widths, np.zeros((7, 2))).outputs(q)
    fit = idn.identify(arm, q, qd, qdd, tau, memory_outputs=s)
    np.testing.assert_allclose(fit.memory, h_true, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(fit.phi.reshape(7, 3), phi_true, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(idn.predict(arm, fit, q, qd, qdd, s), tau, atol=1e-6)
    assert fit.report["friction"]["panda_joint1"]["share_percent"]["memory"] > 0
    # without the memory columns the same data leave an error the size of the memory term
    plain = idn.identify(arm, q, qd, qdd, tau)
    assert np.mean(idn.relative_error_percent(tau, idn.predict(arm, plain, q, qd, qdd))) > 1.0
    assert memory_columns(s).shape == (len(t), 7, 14)
