"""TLNN (TLNN paper): topology masks, periodic angle inputs, exact second derivatives against an
independent autograd Hessian, the positive-definite start, training on chain data; the study's data,
coordinate conversions and a tiny end-to-end run."""

import numpy as np
import pytest

from conftest import requires_torch

pytestmark = requires_torch
torch = pytest.importorskip("torch")

from ros_lnn.models.lnn import euler_lagrange_terms  # noqa: E402
from ros_lnn.models.node_baseline import NeuralODE  # noqa: E402
from ros_lnn.models.tlnn import TLNN, serial_chain_topology  # noqa: E402
from ros_lnn.physics.chain import PlanarChain  # noqa: E402
from ros_lnn.physics.chain_motion import chain_trajectories, integrate, to_absolute, to_relative  # noqa: E402
from ros_lnn.physics.simulate import simulate  # noqa: E402
from ros_lnn.training.trainer import train_acceleration  # noqa: E402
from ros_lnn_lab.studies.tlnn_study import (  # noqa: E402
    DEFAULTS,
    MODELS,
    make_model,
    parameter_count,
    rod_chain,
    study_chain,
)


def model(n=3, hidden=(16, 16)):
    torch.manual_seed(0)
    return TLNN(serial_chain_topology(n), hidden=hidden).double()


def test_body_energies_see_only_their_topology():
    net = model()
    q = torch.randn(5, 3, dtype=torch.float64, requires_grad=True)
    qd = torch.randn(5, 3, dtype=torch.float64, requires_grad=True)
    T, V = net.body_energies(q, qd)
    for i, row in enumerate(serial_chain_topology(3)):
        for E in (T, V):
            gq, gqd = torch.autograd.grad(E[:, i].sum(), (q, qd), retain_graph=True, allow_unused=True)
            for j, used in enumerate(row):
                if not used:
                    assert torch.all(gq[:, j] == 0) and (gqd is None or torch.all(gqd[:, j] == 0))
                elif E is T:
                    assert gqd[:, j].abs().max() > 0


def test_angles_enter_periodically():
    net = model()
    q, qd = torch.randn(4, 3, dtype=torch.float64), torch.randn(4, 3, dtype=torch.float64)
    with torch.no_grad():
        torch.testing.assert_close(net(q + 2 * np.pi, qd), net(q, qd), rtol=1e-9, atol=1e-9)


def test_accelerations_use_exact_second_derivatives():
    net = model()
    q, qd = torch.randn(3, 3, dtype=torch.float64), torch.randn(3, 3, dtype=torch.float64)
    with torch.no_grad():
        qdd = net(q, qd)
    for b in range(3):
        H = torch.autograd.functional.hessian(
            lambda x: net.lagrangian(x[:3], x[3:]), torch.cat([q[b], qd[b]])
        )
        g = torch.autograd.functional.jacobian(
            lambda x: net.lagrangian(x[:3], x[3:]), torch.cat([q[b], qd[b]])
        )
        W, mixed = H[3:, 3:], H[3:, :3]
        ref = torch.linalg.solve(W, g[:3] - mixed @ qd[b])
        torch.testing.assert_close(qdd[b], ref, rtol=1e-9, atol=1e-10)


def test_kinetic_heads_start_with_a_positive_definite_mass_matrix():
    """The convex start: Σ ∂²T_i/∂q̇² is positive definite on every state (PyTorch's default start
    gives an indefinite sum, the failure this initialisation removes)."""
    net = model(3, (32, 32))
    q, qd = 3 * torch.randn(200, 3, dtype=torch.float64), 3 * torch.randn(200, 3, dtype=torch.float64)
    W, _ = euler_lagrange_terms(net.lagrangian, q, qd)
    assert torch.linalg.eigvalsh(W.detach())[:, 0].min() > 0


def test_absolute_relative_round_trip():
    rng = np.random.default_rng(0)
    q, qd, qdd = (rng.normal(size=(7, 4)) for _ in range(3))
    phi, phid, phidd = to_absolute(q, qd, qdd)
    np.testing.assert_allclose(phi[:, 2], q[:, 0] + q[:, 1] + q[:, 2])
    for back, ref in zip(to_relative(phi, phid, phidd), (q, qd, qdd)):
        np.testing.assert_allclose(back, ref, atol=1e-13)


def test_batched_integration_matches_the_simulator_and_conserves_energy():
    chain = rod_chain(3)
    rng = np.random.default_rng(0)
    q0, qd0 = rng.uniform(-1, 1, (2, 3)), rng.normal(size=(2, 3))
    q, qd, qdd = integrate(chain, q0, qd0, 2.0, 25.0)
    assert q.shape == (51, 2, 3)
    ref = simulate(chain, 2.0, q0[1], qd0[1], t_eval=np.arange(51) / 25.0)
    np.testing.assert_allclose(q[:, 1], ref.q, atol=1e-6)
    np.testing.assert_allclose(qdd[:, 1], ref.qdd, atol=1e-5)
    E = chain.dynamics(q.reshape(-1, 3), qd.reshape(-1, 3), qdd=qdd.reshape(-1, 3))["E"].reshape(51, 2)
    assert np.abs(E - E[0]).max() < 1e-7 * np.abs(E).max()
    ((tq, _, _),) = chain_trajectories(chain, 1, 1.0, 25.0, seed=0)
    assert tq.shape == (26, 3)


def test_tiny_study_compares_matched_models_on_finite_rollout_errors():
    config = DEFAULTS.replace(
        trajectories=4, duration=1.0, epochs=1, hidden=(8,), rollouts=3, rollout_duration=0.5
    )
    r = study_chain(2, config, rollout_hz=20.0, report_every=0.1)
    assert len(r["t"]) == 6 and r["t"][-1] == pytest.approx(0.5)
    counts = [m["parameters"] for m in r["models"].values()]
    assert len(counts) == len(MODELS) == 8 and max(counts) < 1.1 * min(counts)
    for m in r["models"].values():
        for key in ("E_median", "E_p05", "E_p95"):
            assert len(m[key]) == 6 and np.all(np.isfinite(m[key]))
        assert m["E_median"][0] == 0.0 and m["E_median"][-1] > 0  # same start, then the models drift
        assert m["E_p05"][-1] <= m["E_median"][-1] <= m["E_p95"][-1]
    assert counts[0] == parameter_count(make_model("TLNN", 2, 8))


def test_tlnn_and_node_learn_on_chain_data():
    chain = PlanarChain.uniform(2)
    trajs = chain_trajectories(chain, 2, 1.0, 25.0, seed=1)
    q, qd, qdd = (np.concatenate([t[i] for t in trajs]) for i in range(3))
    phi, phid, phidd = to_absolute(q, qd, qdd)
    data = {"q": phi, "qd": phid, "qdd": phidd}
    for net, epochs in ((model(2, (16, 16)), 8), (NeuralODE(2, hidden=(16, 16)), 60)):
        history = train_acceleration(net, data, epochs=epochs, batch=26, lr=1e-2, log_every=1)
        assert history["loss"][-1] < 0.5 * history["loss"][0], (net.family, history["loss"])
