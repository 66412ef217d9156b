"""ROS-free pieces of the simulator node: excitations, the fixed-step RK4 integrator and the rollout."""

import numpy as np
import pytest

from ros_lnn.estimation.rollout import rollout_free
from ros_lnn.physics.chain import PlanarChain
from ros_lnn.physics.crane import Crane
from ros_lnn.physics.excitation import CosineSweep, MultiSine, make_excitation
from ros_lnn.physics.simulate import simulate
from ros_lnn.physics.stepper import FixedStepSimulator


@pytest.mark.parametrize(
    "excitation",
    [
        MultiSine(np.array([[0.1, 0.05], [0.2, 0.01]]), np.array([[0.3, 0.9], [0.5, 1.7]]), 0.4, [0.1, -0.2]),
        CosineSweep(np.array([0.1, 0.2]), 0.2, 1.5, 4.0, 0.05),
    ],
)
def test_excitations_have_exact_derivatives(excitation):
    h = 1e-5
    for t in (0.0, 0.7, 3.1, 11.0):
        _q, qd, qdd = excitation(t)
        qp, qdp, _ = excitation(t + h)
        qm, qdm, _ = excitation(t - h)
        # central differences: error h²·q'''/6 ≈ 1e-10·(2π·1.7)³ ≪ 1e-7
        np.testing.assert_allclose(qd, (qp - qm) / (2 * h), atol=1e-7)
        np.testing.assert_allclose(qdd, (qdp - qdm) / (2 * h), atol=1e-7)


def test_sweep_starts_at_rest_and_swings_between_its_frequencies():
    sweep = CosineSweep(np.array([0.1]), 0.2, 1.5, 10.0)
    q, qd, _ = sweep(0.0)
    assert q[0] == 0.0 and qd[0] == 0.0
    assert make_excitation("hold", 2, [0.1], [0.5], 0.1, 1.0, 10.0, [0.3, 0.4])(5.0)[0].tolist() == [0.3, 0.4]
    with pytest.raises(ValueError):
        make_excitation("square", 1, [0.1], [0.5], 0.1, 1.0, 10.0)


def crane_run(dt, duration=2.0):
    crane = Crane()
    servo = make_excitation("multisine", 1, [0.1, 0.08, 0.05], [0.2, 0.45, 0.8], 0.1, 1.0, 20.0)
    sim = FixedStepSimulator(crane, servo, [0.3], [0.0])
    for _ in range(int(round(duration / dt))):
        sim.step(dt)
    return crane, servo, sim


def test_rk4_matches_the_adaptive_reference_with_fourth_order_convergence():
    crane, servo, _ = crane_run(0.002)
    ref = simulate(crane, 2.0, [0.3], [0.0], servo=servo, t_eval=[2.0], rtol=1e-12, atol=1e-12)
    ref_state = np.array([ref.q[-1, 0], ref.qd[-1, 0]])
    errors = []
    for dt in (0.004, 0.002):
        _, _, sim = crane_run(dt)
        errors.append(np.max(np.abs(np.array([sim.q_f[0], sim.qd_f[0]]) - ref_state)))
    assert errors[1] < 1e-8
    assert errors[0] / errors[1] == pytest.approx(16.0, rel=0.25)


def test_outputs_are_the_exact_dynamics_at_the_current_state():
    crane, servo, sim = crane_run(0.002, duration=0.5)
    sim.Q_f = np.array([0.02])
    q, qd, out = sim.outputs()
    q_e, qd_e, qdd_e = servo(sim.t)
    assert q[1] == q_e[0] and qd[1] == qd_e[0]
    want = crane.dynamics(q, qd, qdd_e=qdd_e, Q_f=np.array([0.02]))
    for key in ("Q_e", "qdd", "E", "power"):
        np.testing.assert_array_equal(out[key], want[key])
    # the force on the free joint is what was applied (forward mode)
    assert out["Q"][0] == pytest.approx(0.02, abs=1e-12)


def test_chain_energy_change_equals_the_servo_work():
    chain = PlanarChain.uniform(3, servo_joints=["joint_2"])
    servo = make_excitation("multisine", 1, [0.2], [0.5], 0.1, 1.0, 10.0)
    sim = FixedStepSimulator(chain, servo, [0.2, -0.1], [0.0, 0.0])
    dt = 0.002
    energies, powers = [], []
    for _ in range(250):
        _, _, out = sim.outputs()
        energies.append(float(out["E"]))
        powers.append(float(out["power"]))
        sim.step(dt)
    # Ė = q̇ᵀQ: the energy change equals the work of the servo (trapezoidal quadrature, O(dt²))
    work = np.sum(0.5 * (np.array(powers[1:]) + np.array(powers[:-1]))) * dt
    assert energies[-1] - energies[0] == pytest.approx(work, abs=1e-3 * max(1.0, abs(work)))


def test_rollout_with_exact_dynamics_matches_the_simulator():
    crane = Crane()
    servo = make_excitation("multisine", 1, [0.1], [0.6], 0.1, 1.0, 10.0)
    sim = FixedStepSimulator(crane, servo, [0.25], [0.1], t0=0.5)

    def accel(x, v, q_e, qd_e, qdd_e):
        return crane.dynamics(
            np.concatenate([x, q_e]), np.concatenate([v, qd_e]), qdd_e=qdd_e, Q_f=np.zeros(1)
        )["qdd"][:1]

    taus, xs, vs, _accs = rollout_free(accel, servo, 0.5, [0.25], [0.1], 0.2, 0.01)
    assert len(taus) == 21
    for _k in range(20):
        sim.step(0.01)
    np.testing.assert_allclose([xs[-1, 0], vs[-1, 0]], [sim.q_f[0], sim.qd_f[0]], rtol=1e-12, atol=1e-14)
