"""Servo profiles: exact derivatives (checked by finite differences), start at rest, and the shape each
one promises (a step holds its speed, an impulse moves by A w / 2, a chirp sweeps, a multisine is
seeded)."""

import numpy as np
import pytest

from ros_lnn.recordings.profiles import ChirpProfile, ImpulseProfile, MultisineProfile, StepProfile

#: (profile, instants where its third derivative jumps: central differences straddling them are off)
PROFILES = [
    (StepProfile(12.0, ramp_s=0.3, start_s=0.2, offset=1.0), (0.2, 0.5)),
    (ImpulseProfile((6.0, -4.0), (0.3, 1.0), 0.2), (0.3, 0.5, 1.0, 1.2)),
    (ChirpProfile(0.3, 0.2, 2.5, 2.0, fade_s=0.4), (0.0, 0.4, 2.0)),
    (MultisineProfile.random(5, band_hz=(0.2, 2.0), terms=5, peak_speed=1.5), (0.0, 0.5)),
]


@pytest.mark.parametrize("profile, kinks", PROFILES, ids=lambda p: getattr(p, "kind", ""))
def test_derivatives_are_exact(profile, kinks):
    t, h = np.linspace(0.0, 3.0, 3001), 1e-5
    t = t[np.min(np.abs(t[:, None] - np.array(kinks)[None, :]), axis=1) > 3 * h]
    _, qd, qdd = profile(t)
    qp, qdp, _ = profile(t + h)
    qm, qdm, _ = profile(t - h)
    np.testing.assert_allclose((qp - qm) / (2 * h), qd, atol=1e-6 * (1 + np.abs(qd).max()))
    np.testing.assert_allclose((qdp - qdm) / (2 * h), qdd, atol=1e-5 * (1 + np.abs(qdd).max()))
    # starts at rest; a scalar time gives 0-d values (the simulator's servo callback)
    assert profile(0.0)[1] == pytest.approx(0.0, abs=1e-12) and profile(0.0)[2] == pytest.approx(
        0.0, abs=1e-9
    )
    assert np.shape(profile(0.5)[0]) == ()


def test_step_holds_constant_speed_after_its_ramp():
    p = StepProfile(4 * np.pi, ramp_s=0.3, start_s=0.2)
    t = np.linspace(0.5, 5.0, 100)
    q, qd, qdd = p(t)
    np.testing.assert_allclose(qd, 4 * np.pi, rtol=1e-14)
    np.testing.assert_allclose(qdd, 0.0, atol=1e-12)
    # the position after the ramp: the ramp covers half its duration at full speed
    np.testing.assert_allclose(q, 4 * np.pi * (0.15 + (t - 0.5)), rtol=1e-12)
    assert p(5.0)[0] > 50  # the arm spins: its angle grows without bound


def test_impulse_moves_by_half_peak_times_width_and_stops():
    p = ImpulseProfile((6.0, -4.0), (0.3, 1.0), 0.2)
    q, qd, _ = p(np.array([0.0, 0.6, 2.0]))
    np.testing.assert_allclose(q, [0.0, 6.0 * 0.1, 6.0 * 0.1 - 4.0 * 0.1], atol=1e-14)
    np.testing.assert_allclose(qd[[0, 2]], 0.0, atol=1e-14)
    assert p(0.4)[1] == pytest.approx(6.0)  # the peak mid-pulse
    with pytest.raises(ValueError):
        ImpulseProfile((1.0, 2.0), (0.1,))


def test_chirp_sweeps_from_f0_to_f1():
    p = ChirpProfile(0.3, 0.5, 2.5, 4.0, fade_s=0.1)
    t = np.linspace(0.0, 6.0, 60001)
    q = p(t)[0]
    up = t[1:][(q[:-1] < 0) & (q[1:] >= 0)]
    freq = 1.0 / np.diff(up)
    mid = 0.5 * (up[1:] + up[:-1])
    expected = np.where(mid < 4.0, 0.5 + (2.5 - 0.5) * mid / 4.0, 2.5)
    assert np.abs(freq - expected).max() < 0.08


def test_multisine_is_seeded_and_bounded():
    a, b, c = (MultisineProfile.random(s, band_hz=(0.2, 1.5), peak_speed=1.0) for s in (7, 7, 8))
    assert a == b and a != c
    t = np.linspace(0.0, 20.0, 20001)
    qd = a(t)[1]
    assert np.abs(qd).max() <= 1.0 + 1e-9 and np.abs(qd).max() > 0.3
    assert all(0.2 <= f <= 1.5 for f in a.frequencies_hz)
    assert a.describe()["kind"] == "multisine" and len(a.describe()["frequencies_hz"]) == 6
