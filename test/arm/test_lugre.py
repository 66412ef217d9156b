"""The generator's dynamic friction (ros_lnn.arm.lugre) against the LuGre model's closed forms and a
fine explicit integration of its differential equation."""

import numpy as np
import pytest

from ros_lnn.arm.lugre import LuGre


def law(n=2):
    return LuGre(
        stiffness=np.full(n, 2000.0),
        damping=np.zeros(n),
        coulomb=np.array([1.0, 0.3])[:n],
        static=np.array([1.4, 0.45])[:n],
        stribeck_velocity=np.array([0.05, 0.1])[:n],
        viscous=np.array([0.5, 0.1])[:n],
    )


def test_steady_sliding_gives_the_stribeck_curve():
    f = law()
    for v in (0.01, 0.1, -0.3, 1.0):
        vv = np.full(2, v)
        z = np.zeros(2)
        for _ in range(100):
            z = f.advance(z, vv, 0.05)
        expected = np.sign(v) * (
            f.coulomb + (f.static - f.coulomb) * np.exp(-((v / f.stribeck_velocity) ** 2))
        )
        np.testing.assert_allclose(f.torque(z, vv), expected + f.viscous * v, rtol=1e-9)


def test_exact_step_matches_a_fine_explicit_integration():
    f = law()
    v = np.array([0.02, -0.05])
    z0 = np.array([-3e-4, 1e-4])
    z = z0.copy()
    h = 1e-7
    for _ in range(int(0.01 / h)):
        z = z + h * (v - f.rate(v) * z)
    np.testing.assert_allclose(f.advance(z0, v, 0.01), z, rtol=1e-5)


def test_deflection_holds_at_rest_with_the_sign_of_the_last_motion():
    f = law()
    t = np.linspace(0, 2, 2001)
    # +0.2 rad/s for 1 s, then at rest; the second joint the other way
    velocity = lambda x: np.where(np.asarray(x)[:, None] < 1.0, [0.2, -0.2], 0.0)  # noqa: E731
    z, torque = f.along(t, velocity, np.zeros(2))
    rest = t > 1.01
    assert np.all(torque[rest, 0] > 0.9 * f.coulomb[0]) and np.all(torque[rest, 1] < -0.9 * f.coulomb[1])
    np.testing.assert_allclose(torque[rest], np.broadcast_to(torque[-1], torque[rest].shape), rtol=1e-12)
    assert np.all(np.abs(f.stiffness * z) <= f.held_torque_bound() + 1e-12)


def test_like_a_real_arm_is_sized_by_the_effort_limits():
    f = LuGre.like_a_real_arm(np.array([87.0, 12.0]), np.random.default_rng(0))
    assert np.all(f.static > f.coulomb) and np.all(f.coulomb < 0.031 * np.array([87.0, 12.0]))
    presliding = f.coulomb / f.stiffness
    assert np.all((presliding >= 2e-4) & (presliding <= 1e-3))
    assert f.as_dict()["coulomb"] == pytest.approx(f.coulomb.tolist())
