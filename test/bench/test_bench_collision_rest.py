"""The at-rest collision bench's bookkeeping: the pushes it schedules and how much of each the sensors
could see (the bench itself runs minutes: ``ros-lnn bench collision --at-rest``)."""

import numpy as np

from ros_lnn.arm.fourier import Limits
from ros_lnn.arm.programs import point_to_point
from ros_lnn.arm.simulation import Pulse
from ros_lnn_lab.bench.collision_rest import FRACTIONS, pushes_in_dwells, torque_reach


def _record(push, taken_up: float, move: float):
    """1 kHz, two joints standing; during the push the drive's torque on its joint changes by
    ``−taken_up · magnitude`` and the joint moves by ``move`` rad."""
    t = np.arange(0.0, 2.0, 1e-3)
    q = np.zeros((t.size, 2))
    tau = np.full((t.size, 2), 3.0)
    on = (t >= push.start) & (t < push.end)
    tau[on, push.joint] -= taken_up * push.magnitude
    q[on, push.joint] = move
    return t, q, tau


def test_a_push_the_drive_takes_up_reaches_the_torque_in_full():
    push = Pulse(1, -2.5, 1.0, 0.2)
    t, q, tau = _record(push, taken_up=1.0, move=1e-4)
    reached, moved = torque_reach(t, q, tau, push)
    assert np.isclose(reached, 2.5)
    assert np.isclose(moved, 1e-4)


def test_a_push_stiction_holds_reaches_nothing():
    push = Pulse(0, 4.0, 1.0, 0.25)
    t, q, tau = _record(push, taken_up=0.0, move=0.0)
    reached, moved = torque_reach(t, q, tau, push)
    assert reached == 0.0 and moved == 0.0


def test_a_push_half_taken_up_reaches_half():
    push = Pulse(0, 4.0, 1.0, 0.25)
    t, q, tau = _record(push, taken_up=0.5, move=0.0)
    assert np.isclose(torque_reach(t, q, tau, push)[0], 2.0)


def test_one_push_per_dwell_inside_it_each_joint_and_size_once():
    n = 3
    limits = Limits(-np.ones(n), np.ones(n), np.ones(n), 3.0 * np.ones(n))
    prog = point_to_point(limits, 60.0, seed=3, dwell=(1.0, 3.0), amplitudes=(0.002, 0.15), speed=0.4)
    effort = np.array([87.0, 87.0, 12.0])
    pushes = pushes_in_dwells(prog, effort, seed=3)
    stops = list(prog.stops())
    assert 0 < len(pushes) <= min(len(stops), len(FRACTIONS) * n)
    pairs = {(p.joint, round(abs(p.magnitude) / effort[p.joint], 6)) for p in pushes}
    assert len(pairs) == len(pushes)  # no joint at the same size twice
    for p in pushes:
        assert any(a <= p.start and p.end <= b for a, b in stops), p
        assert round(abs(p.magnitude) / effort[p.joint], 6) in {round(f, 6) for f in FRACTIONS}
