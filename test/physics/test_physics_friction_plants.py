"""The recording plants against physics: the rotary (Furuta) pendulum and the crane with friction.

References built independently of the Lagrangian machinery: rigid-body kinematics of the rod for the
kinetic energy, textbook equations of motion, the energy balance along simulated trajectories,
conservation without friction, small-angle frequencies and friction decay rates of the rod / point
pendulum written from their own formulas.
"""

import numpy as np
import pytest
from scipy.integrate import cumulative_trapezoid

from ros_lnn.physics.friction import FrictionPlant, JointFriction, friction_crane
from ros_lnn.physics.rotary_pendulum import RotaryPendulum, quanser_rotary_pendulum
from ros_lnn.physics.simulate import simulate
from ros_lnn.recordings.generator import simulate_plant
from ros_lnn.recordings.profiles import ChirpProfile, MultisineProfile

G = 9.81


def rot_z(a):
    c, s = np.cos(a), np.sin(a)
    return np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])


def rot_x(a):
    c, s = np.cos(a), np.sin(a)
    return np.array([[1.0, 0.0, 0.0], [0.0, c, -s], [0.0, s, c]])


def rod_pose(sys, theta, phi):
    """Rotation and centre of mass of the pendulum rod: the arm turns about z by φ, the hinge axis is
    the arm (body x), the rod hangs along body −z and turns by θ about the hinge."""
    R = rot_z(phi) @ rot_x(theta)
    hinge = rot_z(phi) @ np.array([sys.r, 0.0, 0.0])
    return R, hinge + R @ np.array([0.0, 0.0, -0.5 * sys.L_p])


def kinetic_energy_from_kinematics(sys, q, qd, h=1e-6):
    """½ m |v|² + ½ ωᵀ I ω of the rod (central differences along q̇) plus ½ J_arm φ̇²."""
    (R0, _), (Rp, pp), (Rm, pm) = (rod_pose(sys, *(q + k * h * qd)) for k in (0, 1, -1))
    v = (pp - pm) / (2 * h)
    W = (Rp - Rm) / (2 * h) @ R0.T  # skew(ω), world frame
    omega_body = R0.T @ np.array([W[2, 1], W[0, 2], W[1, 0]])
    I_body = np.diag([1.0, 1.0, 0.0]) * sys.m_p * sys.L_p**2 / 12  # slender rod along body z
    return 0.5 * sys.m_p * v @ v + 0.5 * omega_body @ I_body @ omega_body + 0.5 * sys.J_arm * qd[1] ** 2


def test_rotary_mass_matrix_is_the_rods_kinetic_energy():
    sys = RotaryPendulum()
    rng = np.random.default_rng(0)
    for _ in range(20):
        q, qd = rng.uniform(-4, 4, 2), rng.uniform(-10, 10, 2)
        T = 0.5 * qd @ sys.mass_matrix(q) @ qd
        assert T == pytest.approx(kinetic_energy_from_kinematics(sys, q, qd), rel=1e-7)
        V_expected = -sys.m_p * G * 0.5 * sys.L_p * np.cos(q[0])  # centre of mass height × m g
        assert sys.potential(q) == pytest.approx(V_expected, rel=1e-12)


def test_rotary_partials_match_finite_differences_and_the_arm_angle_is_cyclic():
    sys = RotaryPendulum()
    q, h = np.array([0.7, 2.0]), 1e-6
    for k in range(2):
        dq = np.eye(2)[k] * h
        fd = (sys.mass_matrix(q + dq) - sys.mass_matrix(q - dq)) / (2 * h)
        np.testing.assert_allclose(sys.mass_matrix_partials(q)[k], fd, atol=1e-12)
        fdV = (sys.potential(q + dq) - sys.potential(q - dq)) / (2 * h)
        assert sys.potential_gradient(q)[k] == pytest.approx(fdV, abs=1e-12)
    qd, qdd_e, Q_f = np.array([1.3, 9.0]), np.array([40.0]), np.array([1e-4])
    a = sys.dynamics(q, qd, qdd_e=qdd_e, Q_f=Q_f)
    b = sys.dynamics(q + [0.0, 200.0], qd, qdd_e=qdd_e, Q_f=Q_f)
    for key in ("qdd", "Q", "E", "M"):
        np.testing.assert_allclose(a[key], b[key], rtol=1e-13, atol=0)


def test_rotary_machinery_matches_the_textbook_equations_with_friction():
    plant = quanser_rotary_pendulum()
    sys = plant.system
    rng = np.random.default_rng(1)
    th, thd, phd, phdd = (rng.uniform(-lim, lim, 50) for lim in (3.0, 8.0, 15.0, 100.0))
    q, qd = np.stack([th, rng.uniform(-50, 50, 50)], -1), np.stack([thd, phd], -1)
    friction = plant.friction_forces(qd)
    out = sys.dynamics(q, qd, qdd_e=phdd[:, None], Q_f=friction[:, :1])
    theta_dd, tau = sys.closed_form_acceleration(th, thd, phd, phdd, torque=friction[:, 0])
    np.testing.assert_allclose(out["qdd"][:, 0], theta_dd, rtol=1e-11, atol=1e-9)
    np.testing.assert_allclose(out["Q_e"][:, 0], tau, rtol=1e-11, atol=1e-13)


def test_crane_machinery_matches_the_textbook_equations_with_friction():
    plant = friction_crane()
    rng = np.random.default_rng(2)
    th, thd, xd, xdd = (rng.uniform(-lim, lim, 50) for lim in (1.5, 3.0, 1.0, 5.0))
    q, qd = np.stack([th, rng.uniform(-1, 1, 50)], -1), np.stack([thd, xd], -1)
    friction = plant.friction_forces(qd)
    out = plant.system.dynamics(q, qd, qdd_e=xdd[:, None], Q_f=friction[:, :1])
    theta_dd, force = plant.system.closed_form_acceleration(th, thd, xdd, torque=friction[:, 0])
    np.testing.assert_allclose(out["qdd"][:, 0], theta_dd, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(out["Q_e"][:, 0], force, rtol=1e-12, atol=1e-12)


def test_friction_opposes_motion_and_dissipates():
    f = JointFriction(0.1, 0.5, 0.01)
    qd = np.linspace(-3, 3, 101)
    assert np.all(f.force(qd) * qd <= 0) and np.all(f.dissipated_power(qd) >= 0)
    assert f.force(2.0) == pytest.approx(-(0.2 + 0.5 * np.tanh(200.0)))
    with pytest.raises(ValueError):
        JointFriction(-1.0)
    with pytest.raises(ValueError):
        FrictionPlant(RotaryPendulum(), {"elbow": f})


@pytest.mark.parametrize(
    "plant, profile, q0",
    [
        (quanser_rotary_pendulum(), ChirpProfile(0.4, 0.3, 2.0, 2.0, fade_s=0.3), 0.4),
        (friction_crane(), MultisineProfile.random(3, band_hz=(0.3, 1.5), peak_speed=1.0), 0.3),
    ],
    ids=["rotary_pendulum", "friction_crane"],
)
def test_energy_balance_along_driven_trajectories(plant, profile, q0):
    """E(t) − E(0) = ∫ (q̇_e Q_e − dissipated power) dt: the servo's work minus what friction takes."""
    t = np.linspace(0.0, 2.0, 40001)
    trial = simulate_plant(plant, profile, t, q0_free=[q0])
    F = plant.friction_forces(trial.qd)
    drive = trial.Q[:, 1] - F[:, 1]  # the servo delivers the net force plus what its friction takes
    dissipated = -(trial.qd * F).sum(-1)
    assert np.all(dissipated >= 0) and dissipated.max() > 0
    work = cumulative_trapezoid(trial.qd[:, 1] * drive - dissipated, t, initial=0.0)
    scale = np.abs(trial.E - trial.E[0]).max()
    assert scale > 0
    np.testing.assert_allclose(trial.E - trial.E[0], work, atol=1e-6 * scale)
    # friction removed energy the servo put in: without it the balance is off by the dissipated work
    lost = cumulative_trapezoid(dissipated, t, initial=0.0)[-1]
    assert lost > 1e-3 * scale


@pytest.mark.parametrize("plant", [quanser_rotary_pendulum(), friction_crane()], ids=["rotary", "crane"])
def test_frictionless_plant_with_the_servo_still_conserves_energy(plant):
    still = plant.frictionless()
    trial = simulate(
        still.system,
        4.0,
        [1.0],
        [0.5],
        servo=lambda t: (np.array([0.3]), np.zeros(1), np.zeros(1)),
        force=still.free_force,
        method="DOP853",
        rtol=1e-12,
        atol=1e-12,
    )
    assert np.ptp(trial.E) < 1e-9 * np.abs(trial.V).max()
    # with friction it decays
    damped = simulate(
        plant.system,
        4.0,
        [1.0],
        [0.5],
        servo=lambda t: (np.array([0.3]), np.zeros(1), np.zeros(1)),
        force=plant.free_force,
        method="DOP853",
        rtol=1e-10,
        atol=1e-10,
    )
    assert np.all(np.diff(damped.E) <= 1e-12) and damped.E[-1] < damped.E[0]


def oscillation(t, x):
    """Angular frequency from the mean spacing of upward zero crossings (linear interpolation), and
    the peaks (times, values)."""
    i = np.flatnonzero((x[:-1] < 0) & (x[1:] >= 0))
    crossings = t[i] - x[i] * (t[i + 1] - t[i]) / (x[i + 1] - x[i])
    peaks = np.flatnonzero((x[1:-1] > x[:-2]) & (x[1:-1] >= x[2:])) + 1
    return 2 * np.pi / np.mean(np.diff(crossings)), t[peaks], x[peaks]


def spinning(speed):
    return lambda t: (np.array([speed * t]), np.array([speed]), np.zeros(1))


def test_rotary_small_angle_frequencies_hanging_and_spinning():
    sys = RotaryPendulum()
    t = np.linspace(0.0, 6.0, 60001)
    # hanging, arm still: a rod on its end, ω0² = 3g / (2 L_p)
    trial = simulate(
        sys, 6.0, [0.002], [0.0], servo=spinning(0.0), t_eval=t, method="DOP853", rtol=1e-12, atol=1e-14
    )
    w0 = np.sqrt(3 * G / (2 * sys.L_p))
    assert oscillation(t, trial.q[:, 0])[0] == pytest.approx(w0, rel=1e-5)
    # arm spinning at Ω > ω0: equilibrium cos θ* = ω0²/Ω², small swings at Ω sin θ*
    omega = 2.0 * w0
    theta_eq = np.arccos(w0**2 / omega**2)
    trial = simulate(
        sys,
        6.0,
        [theta_eq + 0.002],
        [0.0],
        servo=spinning(omega),
        t_eval=t,
        method="DOP853",
        rtol=1e-12,
        atol=1e-14,
    )
    assert oscillation(t, trial.q[:, 0] - theta_eq)[0] == pytest.approx(omega * np.sin(theta_eq), rel=1e-5)
    assert sys.small_angle_frequency(omega) == pytest.approx(omega * np.sin(theta_eq), rel=1e-12)


@pytest.mark.parametrize("kind", ["rotary", "crane"])
def test_viscous_hinge_friction_decays_swings_at_b_over_2J(kind):
    hinge = JointFriction(viscous=2e-5 if kind == "rotary" else 0.05, coulomb=0.0)
    if kind == "rotary":
        plant = quanser_rotary_pendulum(pendulum=hinge)
        J, w0 = plant.system.m_p * plant.system.L_p**2 / 3, np.sqrt(3 * G / (2 * plant.system.L_p))
    else:
        plant = friction_crane(pivot=hinge)
        J, w0 = plant.system.m2 * plant.system.L**2, np.sqrt(plant.system.g / plant.system.L)
    duration = 8 * 2 * np.pi / w0
    t = np.linspace(0.0, duration, 80001)
    trial = simulate(
        plant.system,
        duration,
        [0.002],
        [0.0],
        servo=spinning(0.0),
        t_eval=t,
        force=plant.free_force,
        method="DOP853",
        rtol=1e-12,
        atol=1e-14,
    )
    w, t_peaks, peaks = oscillation(t, trial.q[:, 0])
    rate = np.log(peaks[0] / peaks[-1]) / (t_peaks[-1] - t_peaks[0])
    zeta_w = hinge.viscous / (2 * J)
    assert rate == pytest.approx(zeta_w, rel=1e-3)
    assert w == pytest.approx(np.sqrt(w0**2 - zeta_w**2), rel=1e-4)


def test_coulomb_hinge_friction_loses_a_fixed_amplitude_per_swing():
    """Dry friction τ_c on a linear pendulum of stiffness k = m g l: each half swing loses 2 τ_c / k."""
    tau_c = 2.5e-5
    plant = quanser_rotary_pendulum(pendulum=JointFriction(0.0, tau_c, 1e-3))
    sys = plant.system
    t = np.linspace(0.0, 3.0, 30001)
    trial = simulate(
        sys,
        3.0,
        [0.05],
        [0.0],
        servo=spinning(0.0),
        t_eval=t,
        force=plant.free_force,
        method="DOP853",
        rtol=1e-11,
        atol=1e-13,
    )
    _, _, peaks = oscillation(t, trial.q[:, 0])
    per_swing = -np.mean(np.diff(peaks))
    k = sys.m_p * G * 0.5 * sys.L_p
    assert per_swing == pytest.approx(4 * tau_c / k, rel=0.03)
