"""Plain LNN and LNN-nh (nonholonomic-LNN paper): the torch.func Euler–Lagrange terms reproduce exact
physics for a known Lagrangian, LNN-nh keeps the constraint for any network, training lowers the loss,
save/load."""

import numpy as np
import pytest

from conftest import requires_torch

pytestmark = requires_torch
torch = pytest.importorskip("torch")

from ros_lnn.models.lnn import LNN, constrained_acceleration, euler_lagrange_terms, for_system  # noqa: E402
from ros_lnn.physics.chain import PlanarChain  # noqa: E402
from ros_lnn.physics.nonholonomic import SYSTEMS, make_dataset, rolling_disk  # noqa: E402
from ros_lnn.training.checkpoint import load_checkpoint, save_checkpoint  # noqa: E402
from ros_lnn.training.trainer import train_acceleration  # noqa: E402
from ros_lnn_lab.studies.partial_cost import torch_link_lagrangian  # noqa: E402

RNG = np.random.default_rng(5)


def test_euler_lagrange_terms_of_the_exact_chain_lagrangian_give_the_chain_dynamics():
    chain = PlanarChain.uniform(3, mass=1.2, length=0.7, com=0.3, inertia=0.05)
    parts = [torch_link_lagrangian(chain, i) for i in range(3)]

    def lagrangian(q, qd):
        return sum(p(q[..., : i + 1], qd[..., : i + 1]) for i, p in enumerate(parts))

    q, qd = RNG.normal(size=(6, 3)), RNG.normal(size=(6, 3))
    with torch.no_grad():
        W, F = euler_lagrange_terms(lagrangian, torch.as_tensor(q), torch.as_tensor(qd))
    np.testing.assert_allclose(W.numpy(), chain.mass_matrix(q), atol=1e-12)
    qdd = torch.linalg.solve(W, F).numpy()
    exact = chain.dynamics(q, qd, qdd_e=np.zeros((6, 0)), Q_f=np.zeros((6, 3)))["qdd"]
    np.testing.assert_allclose(qdd, exact, atol=1e-11)


def test_constrained_formula_with_the_exact_disk_lagrangian_matches_the_reference():
    disk = rolling_disk()
    M = torch.as_tensor(disk.mass)
    rng = np.random.default_rng(2)
    states = [disk.sample_state(rng) for _ in range(8)]
    q, qd = (torch.as_tensor(np.stack([s[i] for s in states])) for i in range(2))
    with torch.no_grad():
        W, F = euler_lagrange_terms(lambda a, b: 0.5 * ((b @ M) * b).sum(-1), q, qd)
    A, b = disk.constraint_matrix(q, xp=torch), disk.constraint_drift(q, qd, xp=torch)
    qdd, lam = constrained_acceleration(W, F, A, b)
    ref_qdd, ref_lam = disk.acceleration(q.numpy(), qd.numpy())
    np.testing.assert_allclose(qdd.numpy(), ref_qdd, atol=1e-12)
    np.testing.assert_allclose(lam.numpy(), ref_lam, atol=1e-12)


@pytest.mark.parametrize("name", sorted(SYSTEMS))
def test_lnn_nh_keeps_the_constraint_for_any_network_and_lnn_does_not(name):
    system = SYSTEMS[name]()
    torch.manual_seed(0)
    rng = np.random.default_rng(0)
    states = [system.sample_state(rng) for _ in range(16)]
    q, qd = (torch.as_tensor(np.stack([s[i] for s in states])) for i in range(2))
    A, b = system.constraint_matrix(q, xp=torch), system.constraint_drift(q, qd, xp=torch)
    nh = for_system(system, True, hidden=(32, 32)).double()
    phi_dot = (A @ nh(q, qd).unsqueeze(-1)).squeeze(-1) + b
    assert phi_dot.abs().max() < 1e-9
    plain = for_system(system, False, hidden=(32, 32)).double()
    assert ((A @ plain(q, qd).unsqueeze(-1)).squeeze(-1) + b).abs().max() > 1e-3


def test_training_lowers_the_acceleration_error_and_checkpoints_round_trip(tmp_path):
    system = SYSTEMS["particle"]()
    data = make_dataset(system, 4, 2.0, 21, seed=0)
    model = for_system(system, True, hidden=(32, 32))
    history = train_acceleration(model, data, epochs=6, batch=42, lr=3e-3, log_every=1)
    assert history["loss"][-1] < 0.5 * history["loss"][0]
    save_checkpoint(tmp_path / "nh.pt", model, history=history)
    again = load_checkpoint(tmp_path / "nh.pt")[0]
    q, qd = torch.as_tensor(data["q"][:5]), torch.as_tensor(data["qd"][:5])
    torch.testing.assert_close(again.double()(q, qd), model(q, qd))
    assert isinstance(again, LNN) and again.family == "lnn_nh"
