"""Point-to-point programs with dwells and holds (ros_lnn.arm.programs): within the limits, at rest
in every dwell, derivatives consistent with the positions; the motion phases of an evaluation."""

import numpy as np

from ros_lnn.arm.evaluation import motion_phases, phase_rre
from ros_lnn.arm.fourier import FourierTrajectory, Limits
from ros_lnn.arm.programs import PEAK_ACCELERATION, PEAK_VELOCITY, Sequence, holds, point_to_point

LIMITS = Limits(
    np.array([-2.0, -1.0, 0.0]),
    np.array([2.0, 1.0, 3.0]),
    np.array([2.0, 1.5, 1.0]),
    np.array([6.0, 4.0, 3.0]),
)


def test_quintic_peaks():
    s = np.linspace(0, 1, 100001)
    p = 10 * s**3 - 15 * s**4 + 6 * s**5
    v = np.gradient(p, s)
    a = np.gradient(v, s)
    assert abs(v.max() - PEAK_VELOCITY) < 1e-6 and abs(np.abs(a).max() - PEAK_ACCELERATION) < 1e-3


def test_point_to_point_stays_within_the_limits_and_stops_in_every_dwell():
    prog = point_to_point(LIMITS, 30.0, seed=3, speed=0.8)
    assert prog.duration >= 30.0
    t = np.linspace(0, prog.duration, 60001)
    q, qd, qdd = prog.evaluate(t)
    assert np.all(q >= LIMITS.lower) and np.all(q <= LIMITS.upper)
    assert np.all(np.abs(qd) <= 0.8 * LIMITS.velocity * (1 + 1e-6))
    assert np.all(np.abs(qdd) <= 0.8 * LIMITS.acceleration * (1 + 1e-3))
    dt = t[1] - t[0]
    np.testing.assert_allclose(np.gradient(q, dt, axis=0), qd, atol=2e-3)
    stops = prog.stops()
    assert len(stops) == len(prog.moves)
    for a, b in stops:
        inside = (t > a + 1e-6) & (t < b - 1e-6)
        assert np.all(qd[inside] == 0.0) and np.ptp(q[inside], axis=0).max() == 0.0
    # steps of several sizes and reversals: both signs of motion on every joint, small and large moves
    deltas = np.abs(np.diff(prog.poses, axis=0))
    width = LIMITS.upper - LIMITS.lower
    assert np.all((deltas / width).min(0) < 0.01) and np.all((deltas / width).max(0) > 0.1)


def test_holds_and_a_sequence_after_a_fourier_period():
    hold = holds(LIMITS, poses=3, hold_s=2.0, seed=1)
    four = FourierTrajectory.from_free(5.0, hold.poses[0], np.full((3, 1), 0.1), np.zeros((3, 1)))
    seq = Sequence([four, hold], [5.0, hold.duration])
    t = np.linspace(0, seq.duration, 20001)
    q, qd, _ = seq.evaluate(t)
    assert np.max(np.abs(np.diff(q, axis=0))) < 0.01  # continuous across the join
    np.testing.assert_allclose(q[t < 5.0], four.evaluate(t[t < 5.0])[0])
    assert np.sum(np.all(qd == 0, axis=1)) * (t[1] - t[0]) >= 6.0  # three 2 s holds


def test_motion_phases_of_a_known_velocity():
    t = np.arange(0, 4, 0.01)
    qd = np.column_stack([np.sin(np.pi * t), np.where(t < 2, 0.5, 0.0)])  # sign changes at t = 1, 2, 3
    ph = motion_phases(t, qd)
    assert not ph["reversing"][:, 1].any() and np.all(ph["standing"][t >= 2, 1])
    distance = np.min(np.abs(t[:, None] - np.array([1.0, 2.0, 3.0])), axis=1)
    clear = np.abs(distance - 0.1) > 1e-3  # the crossing is interpolated: leave the window's edge alone
    near = distance <= 0.1
    np.testing.assert_array_equal(ph["reversing"][clear, 0], (near & ~ph["standing"][:, 0])[clear])
    total = sum(ph[k].astype(int) for k in ("moving", "standing", "reversing"))
    assert np.all(total == 1)
    tau = np.ones_like(qd)
    rre = phase_rre(tau, tau * np.where(ph["standing"], 0.5, 1.0), ph)
    assert (
        np.isnan(rre["standing"]["rre"][0]) and rre["standing"]["rre"][1] == 50.0
    )  # few standing samples on 0
    assert np.isnan(rre["reversing"]["rre"][1]) and rre["moving"]["rre"][0] == 0.0
