"""The excitation report in words: each warning appears exactly when the recording lacks what it
names (synthetic motions built to have or lack each property), with what to record instead."""

import numpy as np

from ros_lnn.training.identifiability import excitation_report

T = np.linspace(0.0, 6.0, 1200)


def _samples(theta, phi):
    dt = T[1] - T[0]
    q = np.column_stack([theta, phi])
    qd = np.gradient(q, dt, axis=0)
    return {"q": q, "qd": qd, "qdd": np.gradient(qd, dt, axis=0)}


def _report(theta, phi, recordings=2):
    return excitation_report(
        _samples(theta, phi),
        ["pendulum"],
        ["arm"],
        ("rad", "rad"),
        ("continuous", "cyclic"),
        recordings=recordings,
    )


def test_a_rich_recording_raises_no_warning():
    theta = 0.8 * np.sin(2.3 * T) + 0.3 * np.sin(5.1 * T)
    phi = 2.0 * np.sin(0.7 * T) + np.sin(3.1 * T)
    report = _report(theta, phi)
    assert report["warnings"] == []
    assert report["joints"]["arm"]["role"] == "servo" and report["joints"]["arm"]["kind"] == "cyclic"
    assert report["joints"]["pendulum"]["q"] == [float(theta.min()), float(theta.max())]
    assert any("pendulum (free, continuous): q [" in line for line in report["lines"])


def test_servo_at_constant_speed_names_the_collinear_terms():
    speed = 12.0
    phi = speed * T  # constant speed: q̈ = 0 throughout
    theta = 0.9 + 0.05 * np.sin(9.0 * T)  # lifted pendulum, small oscillation about it
    warnings = _report(theta, phi)["warnings"]
    constant = [w for w in warnings if "runs at nearly constant speed" in w]
    assert len(constant) == 1 and "record arm with varying speed" in constant[0]
    assert "correlate" in constant[0]  # sin θ and sin θ cos θ φ̇² move together here
    assert any("swings only 0.10 rad" in w for w in warnings)


def test_joint_that_never_moves_and_one_direction_and_one_recording():
    theta = 0.2 + 0.5 * T / T[-1]  # moves one way only
    phi = np.zeros_like(T)
    warnings = _report(theta, phi, recordings=1)["warnings"]
    text = " | ".join(warnings)
    assert "arm never moves" in text and "record a motion of arm" in text
    assert "pendulum's velocity never changes sign" in text
    assert "one recording" in text and "--test-bag" in text
