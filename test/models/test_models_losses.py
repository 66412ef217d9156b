"""Losses of eqs 33–38: zero on exact data, each sensitive to what it should see, the corrected eq 38."""

import numpy as np
import pytest

from conftest import requires_torch

pytestmark = requires_torch

torch = pytest.importorskip("torch")

from ros_lnn.models.losses import WITH_QE, WITHOUT_QE, loss_terms, select_losses  # noqa: E402
from ros_lnn.physics.crane import Crane  # noqa: E402


class ExactCrane:
    """The analytic crane behind the model interface the losses use (``terms``, ``n_f``, ``partition``);
    ``V`` may be shifted by a function of the servo coordinate alone (unobservable without Q_e)."""

    def __init__(self, scale=1.0, v_servo=0.0):
        self.crane, self.scale, self.v_servo = Crane(), scale, v_servo
        self.n_f, self.n_e, self.partition = 1, 1, self.crane.partition

    def terms(self, q):
        c, x = self.crane, q.numpy()
        t = lambda a: torch.as_tensor(a, dtype=torch.float64)  # noqa: E731
        V = self.scale * c.potential(x) + self.v_servo * x[:, 1] ** 2
        dV = self.scale * c.potential_gradient(x)
        dV[:, 1] += 2 * self.v_servo * x[:, 1]
        return (t(self.scale * c.mass_matrix(x)), t(self.scale * c.mass_matrix_partials(x)), t(V), t(dV))


def _batch(n=200, seed=0, torque=False):
    crane, rng = Crane(), np.random.default_rng(seed)
    q = np.column_stack([rng.uniform(-1.2, 1.2, n), rng.uniform(-1, 1, n)])
    qd, x_dd = rng.normal(size=(n, 2)), rng.normal(size=(n, 1))
    Q_f = rng.normal(size=(n, 1)) if torque else np.zeros((n, 1))
    out = crane.dynamics(q, qd, qdd_e=x_dd, Q_f=Q_f)
    return {
        k: torch.as_tensor(v, dtype=torch.float64)
        for k, v in {"q": q, "qd": qd, "qdd": out["qdd"], "Q": out["Q"]}.items()
    }


@pytest.mark.parametrize("torque", [False, True])
def test_losses_vanish_on_exact_data(torque):
    terms = loss_terms(ExactCrane(), _batch(torque=torque), WITH_QE + ("power_est",))
    assert set(terms) == set(WITH_QE) | {"power_est"}
    for name, value in terms.items():
        assert float(value) < 1e-20, name


def test_scaled_lagrangian_is_invisible_without_qe_but_not_with_it():
    """Scaling 𝓛 leaves q̈_f and (for Q_f = 0) Q_f unchanged: the family of solutions of the paper."""
    batch = _batch()
    wrong = ExactCrane(scale=1.7)
    without = loss_terms(wrong, batch, WITHOUT_QE)
    assert max(float(v) for v in without.values()) < 1e-20
    with_qe = loss_terms(wrong, batch, WITH_QE)
    assert float(with_qe["inv_e"]) > 1e-3 and float(with_qe["power"]) > 1e-4


def test_servo_only_potential_is_caught_only_by_qe_terms():
    batch = _batch(torque=True)
    wrong = ExactCrane(v_servo=0.8)
    terms = loss_terms(wrong, batch, WITH_QE + ("power_est",))
    for name in ("inv", "fwd", "power_est"):
        assert float(terms[name]) < 1e-20, name
    for name in ("inv_e", "fwd_e", "power"):
        assert float(terms[name]) > 1e-3, name


def test_estimated_power_uses_free_velocities_only():
    """Eq 38 with the typo fixed: q̇_fᵀ(Q̂_f − Q_f); the servo velocity must not enter."""
    batch = _batch(torque=True)
    wrong = ExactCrane(scale=1.3)  # wrong Q_f now that a torque acts
    base = float(loss_terms(wrong, batch, ("power_est",))["power_est"])
    batch2 = dict(batch)
    qd = batch["qd"].clone()
    qd[:, 1] *= 10.0
    batch2["qd"] = qd
    # changing the servo velocity changes Q̂_f through Coriolis terms only; compare against a direct formula
    M, dM, V, dV = wrong.terms(batch2["q"])
    from ros_lnn.models.torch_ops import TORCH
    from ros_lnn.physics.lagrangian import dynamics

    Q_hat = dynamics(TORCH, M, dM, V, dV, batch2["qd"], wrong.partition, qdd=batch2["qdd"])["Q"]
    expected = float(((batch2["qd"][:, 0] * (Q_hat[:, 0] - batch2["Q"][:, 0])) ** 2).mean())
    got = float(loss_terms(wrong, batch2, ("power_est",))["power_est"])
    assert base > 1e-4 and got == pytest.approx(expected, rel=1e-12)


def test_loss_selection_follows_the_data():
    assert select_losses(True) == WITH_QE and "power" in WITH_QE
    assert select_losses(False) == WITHOUT_QE and "power_est" in WITHOUT_QE
    assert select_losses(True, n_e=0) == WITHOUT_QE
    with pytest.raises(ValueError, match="unknown losses"):
        loss_terms(ExactCrane(), _batch(), ("nope",))


def _terms_from_dynamics(model, batch, names):
    """The losses written straight from the full machinery's outputs (inverse and forward mode)."""
    from ros_lnn.models.torch_ops import TORCH
    from ros_lnn.physics.lagrangian import dynamics

    n_f = model.n_f
    q, qd, qdd, Q = batch["q"], batch["qd"], batch["qdd"], batch["Q"]
    M, dM, V, dV = model.terms(q)
    inv = dynamics(TORCH, M, dM, V, dV, qd, model.partition, qdd=qdd)
    fwd = dynamics(TORCH, M, dM, V, dV, qd, model.partition, qdd_e=qdd[:, n_f:], Q_f=Q[:, :n_f])
    sq = lambda x: (x * x).sum(-1).mean()  # noqa: E731
    full = {
        "inv": sq(inv["Q"][:, :n_f] - Q[:, :n_f]),
        "inv_e": sq(inv["Q_e"] - Q[:, n_f:]),
        "power": ((inv["E_dot"] - (qd * Q).sum(-1)) ** 2).mean(),
        "power_est": ((qd[:, :n_f] * (inv["Q"][:, :n_f] - Q[:, :n_f])).sum(-1) ** 2).mean(),
        "fwd": sq(fwd["qdd_f"] - qdd[:, :n_f]),
        "fwd_e": sq(fwd["Q_e"] - Q[:, n_f:]),
    }
    return {k: full[k] for k in names}


@pytest.mark.parametrize("free,servo", [(["a"], ["b"]), (["a", "b"], ["c"]), (["a", "b", "c"], [])])
def test_losses_equal_those_of_the_full_dynamics(free, servo):
    """The losses use Q̂'s affinity in q̈ (one residual, one solve); they must equal the terms built from
    the full forward- and inverse-mode outputs, for 1 and 2 free coordinates and for DeLaN (no servo)."""
    from ros_lnn.models.losses import ALL_LOSSES
    from ros_lnn.models.servo_lnn import ServoLNN

    torch.manual_seed(3)
    model = ServoLNN(free, servo, hidden=[16]).double()
    n, rng = len(free) + len(servo), np.random.default_rng(1)
    batch = {k: torch.as_tensor(rng.normal(size=(64, n))) for k in ("q", "qd", "qdd", "Q")}
    with torch.no_grad():
        got, want = loss_terms(model, batch, ALL_LOSSES), _terms_from_dynamics(model, batch, ALL_LOSSES)
    for name in ALL_LOSSES:
        assert float(want[name]) > 1e-6 or (name in ("inv_e", "fwd_e", "power") and not servo), name
        assert float(got[name]) == pytest.approx(float(want[name]), rel=1e-10, abs=1e-14), name
