"""TLNN (seed 003): topology masks, periodic angle inputs, exact second derivatives against an
independent autograd Hessian, training on chain data; neural-ODE baseline shapes."""
import numpy as np
import pytest

from conftest import requires_torch

pytestmark = requires_torch
torch = pytest.importorskip("torch")

from ros_lnn.models.lnn import train_acceleration  # noqa: E402
from ros_lnn.models.node_baseline import NeuralODE  # noqa: E402
from ros_lnn.models.tlnn import TLNN, serial_chain_topology  # noqa: E402
from ros_lnn.physics.chain import PlanarChain  # noqa: E402
from ros_lnn.zoo.tlnn_study import chain_trajectories, to_absolute, to_relative  # noqa: E402


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
        H = torch.autograd.functional.hessian(lambda x: net.lagrangian(x[:3], x[3:]), torch.cat([q[b], qd[b]]))
        g = torch.autograd.functional.jacobian(lambda x: net.lagrangian(x[:3], x[3:]), torch.cat([q[b], qd[b]]))
        W, mixed = H[3:, 3:], H[3:, :3]
        ref = torch.linalg.solve(W, g[:3] - mixed @ qd[b])
        torch.testing.assert_close(qdd[b], ref, rtol=1e-9, atol=1e-10)


def test_absolute_relative_round_trip_and_chain_data():
    chain = PlanarChain.uniform(2)
    (q, qd, qdd), = chain_trajectories(chain, 1, 1.0, 25.0, seed=0)
    phi, phid, phidd = to_absolute(q, qd, qdd)
    np.testing.assert_allclose(phi[:, 1], q[:, 0] + q[:, 1])
    back = to_relative(phi, phid)
    np.testing.assert_allclose(back[0], q, atol=1e-14)
    np.testing.assert_allclose(back[1], qd, atol=1e-14)


def test_tlnn_and_node_learn_on_chain_data():
    chain = PlanarChain.uniform(2)
    trajs = chain_trajectories(chain, 2, 1.0, 25.0, seed=1)
    q, qd, qdd = (np.concatenate([t[i] for t in trajs]) for i in range(3))
    phi, phid, phidd = to_absolute(q, qd, qdd)
    data = {"q": phi, "qd": phid, "qdd": phidd}
    for net, epochs in ((model(2, (16, 16)), 8), (NeuralODE(2, hidden=(16, 16)), 60)):
        history = train_acceleration(net, data, epochs=epochs, batch=26, lr=1e-2, log_every=1)
        assert history["loss"][-1] < 0.5 * history["loss"][0], (net.family, history["loss"])
