"""ServoLNN: analytic derivatives against torch.autograd, M positive definite, the shared machinery
on the analytic crane (torch) reproducing the exact Q_e, forward/inverse consistency."""

import numpy as np
import pytest

from conftest import requires_torch

pytestmark = requires_torch

torch = pytest.importorskip("torch")

from ros_lnn.models.autograd_reference import AutogradServoLNN  # noqa: E402
from ros_lnn.models.servo_lnn import ServoLNN  # noqa: E402
from ros_lnn.models.torch_ops import TORCH, cholesky_solve_unrolled  # noqa: E402
from ros_lnn.physics.crane import Crane  # noqa: E402
from ros_lnn.physics.lagrangian import NUMPY, dynamics  # noqa: E402

CASES = [
    dict(),  # default: softplus diagonal
    dict(diag_activation="relu"),  # the paper's ReLU diagonal
    dict(activation="tanh", hidden=(16, 16)),
    dict(activation="sin", hidden=(12,), diag_activation="softplus"),
    dict(activation="softplus", hidden=(8, 8, 8), angle_joints=["a"]),  # sin/cos feature map
    dict(activation="elu", hidden=(10, 10), angle_joints=["a", "c"], diag_activation="softplus"),
]


def _model(seed, **kw):
    torch.manual_seed(seed)
    m = ServoLNN(["a", "c"], ["b"], **kw).double()
    m.set_normalisation([0.1, -0.2, 0.3], [1.5, 2.0, 0.7])
    with torch.no_grad():  # push the diagonal pre-activations positive so ReLU slots are live, too
        m.net.out.bias[1:4] += 0.5
    return m


@pytest.mark.parametrize("kw", CASES)
def test_analytic_derivatives_match_autograd(kw):
    m = _model(1, **kw)
    q = torch.randn(64, 3, dtype=torch.float64)
    analytic = m.terms(q)
    reference = AutogradServoLNN.from_model(m).terms(q)
    for name, a, r in zip(("M", "dM", "V", "dV"), analytic, reference):
        assert a.shape == r.shape, name
        assert torch.allclose(a, r.detach(), atol=1e-6, rtol=0), (name, float((a - r).abs().max()))
    # and a derivative that is non-trivial: ∂M/∂q has entries well above the tolerance
    assert float(analytic[1].detach().abs().max()) > 1e-3


def test_analytic_derivatives_match_finite_differences():
    m = _model(2)
    q = torch.randn(16, 3, dtype=torch.float64)
    _M, dM, _V, dV = m.terms(q)
    h = 1e-6
    for k in range(3):
        e = torch.zeros(3, dtype=torch.float64)
        e[k] = h
        Mp, _, Vp, _ = m.terms(q + e)
        Mm, _, Vm, _ = m.terms(q - e)
        assert torch.allclose((Mp - Mm) / (2 * h), dM[:, k], atol=1e-6)
        assert torch.allclose((Vp - Vm) / (2 * h), dV[:, k], atol=1e-6)


def test_full_outputs_match_autograd_path():
    m = _model(3, hidden=(16, 16))
    ref = AutogradServoLNN.from_model(m)
    g = torch.Generator().manual_seed(0)
    q, qd = (
        torch.randn(32, 3, generator=g, dtype=torch.float64),
        torch.randn(32, 3, generator=g, dtype=torch.float64),
    )
    qdd_e, Q_f = (
        torch.randn(32, 1, generator=g, dtype=torch.float64),
        torch.randn(32, 2, generator=g, dtype=torch.float64),
    )
    a, r = m(q, qd, qdd_e, Q_f), ref(q, qd, qdd_e, Q_f)
    for key in a:
        assert torch.allclose(a[key], r[key].detach(), atol=1e-6), key


def test_mass_matrix_positive_definite_with_dead_diagonal():
    m = _model(4, diag_activation="relu")
    with torch.no_grad():
        m.net.out.bias[1:4] = -100.0  # every diagonal slot dead: M must still be ≥ ε I
    q = torch.randn(256, 3, dtype=torch.float64) * 3
    eig = torch.linalg.eigvalsh(m.terms(q)[0])
    assert float(eig.min()) >= float(m.eps_eye[0, 0]) - 1e-12
    eig = torch.linalg.eigvalsh(_model(5, diag_activation="softplus").terms(q)[0])
    assert float(eig.min()) > 0.01


def test_forward_and_inverse_modes_agree():
    m = _model(6, hidden=(16,))
    g = torch.Generator().manual_seed(1)
    q, qd = (
        torch.randn(20, 3, generator=g, dtype=torch.float64),
        torch.randn(20, 3, generator=g, dtype=torch.float64),
    )
    qdd_e, Q_f = (
        torch.randn(20, 1, generator=g, dtype=torch.float64),
        torch.randn(20, 2, generator=g, dtype=torch.float64),
    )
    fwd = m(q, qd, qdd_e, Q_f)
    assert torch.allclose(fwd["qdd"][:, 2:], qdd_e)
    assert torch.allclose(fwd["Q"][:, :2], Q_f, atol=1e-10)  # free rows reproduce the applied force
    inv = m.inverse(q, qd, fwd["qdd"])
    for key in ("Q", "Q_e", "T", "V", "E", "E_dot", "power", "M"):
        assert torch.allclose(inv[key], fwd[key], atol=1e-10), key
    assert torch.allclose(fwd["E_dot"], fwd["power"], atol=1e-10)  # first law holds by construction


def test_without_servo_joints_is_delan():
    torch.manual_seed(0)
    m = ServoLNN(["j1", "j2"], []).double()
    q, qd = torch.randn(5, 2, dtype=torch.float64), torch.randn(5, 2, dtype=torch.float64)
    Q = torch.randn(5, 2, dtype=torch.float64)
    out = m(q, qd, None, Q)
    assert out["Q_e"].shape == (5, 0) and out["qdd"].shape == (5, 2)
    assert torch.allclose(m.inverse(q, qd, out["qdd"])["Q"], Q, atol=1e-10)


def test_unrolled_cholesky_solve_matches_linalg():
    g = torch.Generator().manual_seed(2)
    for m in (2, 3, 4):
        B = torch.randn(10, m, m, generator=g, dtype=torch.float64)
        A = B @ B.transpose(-1, -2) + 0.1 * torch.eye(m, dtype=torch.float64)
        b = torch.randn(10, m, generator=g, dtype=torch.float64)
        x = cholesky_solve_unrolled(A, b)
        assert torch.allclose(x, torch.linalg.solve(A, b), atol=1e-9)
        assert torch.allclose(TORCH.solve(A, b), x)


def test_machinery_on_torch_reproduces_exact_crane_driving_force():
    """The crane's analytic M, ∂M/∂q, V, ∂V/∂q fed to the torch ops give the exact Q_e of the
    textbook closed form (and the numpy path), so the network sits on verified machinery."""
    crane = Crane()
    rng = np.random.default_rng(0)
    q = np.column_stack([rng.uniform(-1.5, 1.5, 50), rng.uniform(-1, 1, 50)])
    qd, x_dd = rng.normal(size=(50, 2)), rng.normal(size=50)
    t = lambda a: torch.as_tensor(a, dtype=torch.float64)  # noqa: E731
    out = dynamics(
        TORCH,
        t(crane.mass_matrix(q)),
        t(crane.mass_matrix_partials(q)),
        t(crane.potential(q)),
        t(crane.potential_gradient(q)),
        t(qd),
        crane.partition,
        qdd_e=t(x_dd[:, None]),
        Q_f=t(np.zeros((50, 1))),
    )
    theta_dd, force = crane.closed_form_acceleration(q[:, 0], qd[:, 0], x_dd)
    np.testing.assert_allclose(out["qdd"][:, 0].numpy(), theta_dd, atol=1e-12)
    np.testing.assert_allclose(out["Q_e"][:, 0].numpy(), force, atol=1e-12)
    ref = crane.dynamics(q, qd, qdd_e=x_dd[:, None], Q_f=np.zeros((50, 1)))
    for key, value in ref.items():
        np.testing.assert_allclose(out[key].numpy(), value, atol=1e-12, err_msg=key)
    assert NUMPY is not TORCH


def test_seven_joint_delan_loss_and_gradient_match_the_autograd_reference():
    """The batched contractions of ∂M/∂q and the Coriolis force (one (n², n) product per sample) on a
    7-joint DeLaN: the training loss (inverse + forward) and its gradient against the autograd
    reference (∂M/∂q, ∂V/∂q by autograd, double backward) on the same weights."""
    from ros_lnn.models.losses import loss_terms

    torch.manual_seed(7)
    n = 7
    m = ServoLNN([f"j{i}" for i in range(n)], [], hidden=(32, 32)).double()
    g = torch.Generator().manual_seed(1)
    batch = {k: torch.randn(96, n, generator=g, dtype=torch.float64) for k in ("q", "qd", "qdd", "Q")}
    grads = []
    for impl in (m, AutogradServoLNN.from_model(m)):
        m.zero_grad(set_to_none=True)
        loss = sum(loss_terms(impl, batch, ("inv", "fwd")).values())
        loss.backward()
        grads.append((float(loss), torch.cat([p.grad.flatten() for p in m.parameters()])))
    (la, ga), (lr, gr) = grads
    assert abs(la - lr) <= 1e-10 * abs(lr)
    assert float((ga - gr).norm() / gr.norm()) <= 1e-10
    _M, dM, _V, _dV = m.terms(batch["q"])
    assert float(dM.abs().max()) > 1e-3  # ∂M/∂q is exercised


@pytest.mark.parametrize("m", [2, 4, 5, 7])
def test_solve_matches_numpy_on_both_sides_of_the_lapack_switch(m):
    """TORCH.solve (unrolled below LAPACK_SOLVE_FROM coordinates, LAPACK's Cholesky from there in eager
    runs) against numpy's general solver, values and the gradient of a scalar of the solution."""
    g = torch.Generator().manual_seed(m)
    X = torch.randn(64, m, m, generator=g, dtype=torch.float64)
    A = (X @ X.transpose(-1, -2) + m * torch.eye(m, dtype=torch.float64)).requires_grad_(True)
    b = torch.randn(64, m, generator=g, dtype=torch.float64, requires_grad=True)
    x = TORCH.solve(A, b)
    ref = np.linalg.solve(A.detach().numpy(), b.detach().numpy()[..., None])[..., 0]
    assert np.abs(x.detach().numpy() - ref).max() <= 1e-12 * np.abs(ref).max()
    w = torch.randn(64, m, generator=g, dtype=torch.float64)
    (x * w).sum().backward()
    # d(wᵀA⁻¹b)/db = A⁻ᵀ w (A symmetric: A⁻¹ w)
    grad_b = np.linalg.solve(A.detach().numpy(), w.numpy()[..., None])[..., 0]
    assert np.abs(b.grad.numpy() - grad_b).max() <= 1e-12 * np.abs(grad_b).max()
