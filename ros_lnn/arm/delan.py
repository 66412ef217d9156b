"""An arm's torque model without a URDF (torch): the package's DeLaN — a ServoLNN whose coordinates
are all the actuated joints, ``M(q) = L Lᵀ + ε I`` and ``V(q)`` from one network, Coriolis and gravity
from the Lagrangian — plus per-joint friction ``f_v q̇ + f_c tanh(q̇ / v) + f_o`` (the form of
:mod:`ros_lnn.arm.friction`), trained together on the **inverse dynamics**: ``τ̂(q, q̇, q̈)`` against
the filtered measured torque, each joint's error divided by the spread of its torque.

What keeps it from overfitting one exciting trajectory (issue 22: a DeLaN trained 3 000 epochs fitted
its recording and was 10–25 × worse than zero on held-out data):

- weight decay on the network (AdamW), a small network (2 × 64 softplus by default);
- the friction starts at its per-joint least-squares fit (the friction-only model), so training
  starts from the baseline rather than from zero;
- early stopping on a validation stretch (the last 20 % of each training recording, contiguous, as
  :func:`ros_lnn.arm.training.split_validation` cuts it): the weights of the best validation epoch
  are kept, training stops after ``patience`` epochs without a better one;
- a schedule sized to the data: ``epochs = sample_budget / training samples`` (clipped to
  ``[min_epochs, max_epochs]``), so a few thousand samples take minutes on a small CPU, and a wall
  clock limit on top.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import numpy as np
import torch
from torch import nn

from . import friction as friction_model
from .samples import Samples


@dataclass
class DelanOptions:
    hidden: tuple = (64, 64)
    activation: str = "softplus"
    #: ε of ``M = L Lᵀ + ε I``, in the network's units (torques / ``torque_scale``)
    epsilon: float = 1e-4
    #: wrap every joint as ``[sin q, cos q]`` (gravity is trigonometric in q); else q normalised
    angle_inputs: bool = True
    #: 0: sized to the data (``sample_budget`` / training samples, within [min_epochs, max_epochs])
    epochs: int = 0
    sample_budget: float = 1.0e6
    min_epochs: int = 15
    max_epochs: int = 1000
    batch: int = 1024
    lr: float = 2e-3
    weight_decay: float = 1e-3
    #: epochs without a better validation error before stopping; 0: a quarter of the epochs (≥ 5)
    patience: int = 0
    val_fraction: float = 0.2
    time_limit_s: float = 240.0
    seed: int = 0

    def planned_epochs(self, samples: int) -> int:
        if self.epochs:
            return int(self.epochs)
        return int(min(self.max_epochs, max(self.min_epochs, round(self.sample_budget / max(samples, 1)))))

    def planned_patience(self, epochs: int) -> int:
        return int(self.patience) if self.patience else max(5, epochs // 4)


class ArmDelan(nn.Module):
    """``τ̂ = s · (M q̈ + C q̇ + ∂V/∂q) + f_v q̇ + f_c tanh(q̇ / v) + f_o`` with ``M, V`` of a ServoLNN
    without servo joints (DeLaN) and ``s`` a fixed torque scale (the network works in units of ``s``)."""

    def __init__(
        self,
        joints,
        options: DelanOptions,
        torque_scale: float,
        friction_init,
        coulomb_velocity: float,
    ):
        super().__init__()
        from ..models.servo_lnn import ServoLNN

        joints = list(joints)
        self.n = len(joints)
        self.lnn = ServoLNN(
            joints,
            (),
            hidden=tuple(options.hidden),
            activation=options.activation,
            epsilon=options.epsilon,
            angle_joints=joints if options.angle_inputs else (),
        )
        self.torque_scale: torch.Tensor
        self.register_buffer("torque_scale", torch.tensor(float(torque_scale)))
        self.v = float(coulomb_velocity)
        phi = torch.as_tensor(np.asarray(friction_init, dtype=float).reshape(-1, 3), dtype=torch.float32)
        self.friction = nn.Parameter(phi.clone())
        # start as the friction-only model: V flat, M small (the heads' weights scaled down, L's
        # diagonal at softplus(−4) ≈ 0.018)
        with torch.no_grad():
            out = self.lnn.net.out
            out.weight.mul_(0.01)
            out.bias.zero_()
            out.bias[1 : 1 + self.n] = -4.0

    def rigid(self, q, qd, qdd):
        """The Lagrangian's torque ``M q̈ + C q̇ + ∂V/∂q`` (N·m)."""
        r, _ = self.lnn.inverse_residual(q, qd, qdd, torch.zeros_like(q))
        return r * self.torque_scale

    def friction_torque(self, qd):
        p = self.friction
        return qd * p[:, 0] + torch.tanh(qd / self.v) * p[:, 1] + p[:, 2]

    def forward(self, q, qd, qdd):
        return self.rigid(q, qd, qdd) + self.friction_torque(qd)


@dataclass
class DelanResult:
    model: ArmDelan
    epochs_planned: int
    epochs_run: int
    best_epoch: int
    patience: int
    stopped_early: bool
    timed_out: bool
    train_s: float
    train_samples: int
    val_samples: int
    #: validation error (mean squared, joints weighted 1/σ) of the friction-only start and of the best epoch
    val_error_start: float
    val_error: float
    history: list = field(default_factory=list)  # (epoch, training loss, validation error)

    def predict(self, q, qd, qdd) -> np.ndarray:
        """τ̂ (N, n) for samples (q, q̇, q̈), float64."""
        return predict(self.model, q, qd, qdd)

    def friction_parameters(self) -> np.ndarray:
        """(3 n): per joint viscous, Coulomb, offset."""
        return self.model.friction.detach().numpy().astype(float).reshape(-1)

    def describe(self) -> str:
        why = (
            "time limit"
            if self.timed_out
            else f"early stop (patience {self.patience})"
            if self.stopped_early
            else "all planned epochs"
        )
        return (
            f"DeLaN + friction: {self.epochs_run} of {self.epochs_planned} planned epochs ({why}), best "
            f"epoch {self.best_epoch}, validation error {self.val_error:.4g} (friction-only start "
            f"{self.val_error_start:.4g}), {self.train_s:.1f} s"
        )


def friction_least_squares(qd, tau, coulomb_velocity: float) -> np.ndarray:
    """Per joint least squares of ``τ_j`` on ``(q̇_j, tanh(q̇_j / v), 1)``: the friction-only model."""
    A = friction_model.regressor(qd, coulomb_velocity)
    tau = np.asarray(tau, dtype=float)
    phi = np.zeros(A.shape[2])
    for j in range(tau.shape[1]):
        cols = slice(3 * j, 3 * j + 3)
        phi[cols] = np.linalg.lstsq(A[:, j, cols], tau[:, j], rcond=None)[0]
    return phi


def predict(model: ArmDelan, q, qd, qdd, batch: int = 4096) -> np.ndarray:
    t32 = lambda x: torch.as_tensor(np.asarray(x), dtype=torch.float32)  # noqa: E731
    Q, QD, QDD = t32(q), t32(qd), t32(qdd)
    out = []
    with torch.no_grad():
        for b in range(0, len(Q), batch):
            out.append(model(Q[b : b + batch], QD[b : b + batch], QDD[b : b + batch]))
    return torch.cat(out).numpy().astype(float) if out else np.zeros((0, model.n))


def train_delan(
    joints,
    train: Samples,
    validation: Samples,
    coulomb_velocity: float = friction_model.COULOMB_VELOCITY,
    options: DelanOptions | None = None,
    progress=None,
) -> DelanResult:
    """Train DeLaN + friction on ``train`` (filtered samples) with early stopping on ``validation``."""
    from ..models.normalisation import normalisation
    from ..training.loop import fit_minibatches

    options = options or DelanOptions()
    say = progress or (lambda _text: None)
    torch.manual_seed(options.seed)
    n = len(list(joints))
    sigma = np.std(train.tau, axis=0)
    sigma = np.where(sigma > 1e-9, sigma, 1.0)
    phi0 = friction_least_squares(train.qd, train.tau, coulomb_velocity)
    model = ArmDelan(joints, options, float(np.mean(sigma)), phi0, coulomb_velocity)
    model.lnn.set_normalisation(*normalisation(train.q))
    t32 = lambda x: torch.as_tensor(np.asarray(x), dtype=torch.float32)  # noqa: E731
    Q, QD, QDD, Y = t32(train.q), t32(train.qd), t32(train.qdd), t32(train.tau)
    QV, QDV, QDDV, YV = t32(validation.q), t32(validation.qd), t32(validation.qdd), t32(validation.tau)
    w = t32(1.0 / sigma)

    def val_error() -> float:
        with torch.no_grad():
            pred = t32(predict(model, QV, QDV, QDDV))
            return float((((pred - YV) * w) ** 2).mean())

    epochs = options.planned_epochs(len(Y))
    patience = options.planned_patience(epochs)
    say(
        f"DeLaN + friction: {len(Y)} training, {len(YV)} validation samples, {n} joints, network "
        f"{' × '.join(str(h) for h in options.hidden)} {options.activation}; schedule sized to the data: "
        f"{epochs} epochs (≈ {options.sample_budget:.3g} sample passes / {len(Y)} samples), batch "
        f"{options.batch}, AdamW lr {options.lr:g}, weight decay {options.weight_decay:g}, early stopping "
        f"patience {patience}, time limit {options.time_limit_s:g} s"
    )
    decay = [p for name, p in model.named_parameters() if name.startswith("lnn.") and p.dim() > 1]
    other = [p for name, p in model.named_parameters() if not (name.startswith("lnn.") and p.dim() > 1)]
    opt = torch.optim.AdamW(
        [{"params": decay, "weight_decay": options.weight_decay}, {"params": other, "weight_decay": 0.0}],
        lr=options.lr,
    )
    # cosine decay of the learning rate over the planned epochs
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda e: 0.05 + 0.95 * 0.5 * (1 + math.cos(math.pi * min(e, epochs) / epochs))
    )
    every = max(1, epochs // 20)
    clock = time.perf_counter()

    def loss(i):
        return (((model(Q[i], QD[i], QDD[i]) - Y[i]) * w) ** 2).mean()

    def log(epoch, train_loss, val, stopping):
        if epoch % every == 0 or epoch == epochs - 1:
            say(
                f"  epoch {epoch}: training {train_loss:.4g}, validation {val:.4g} "
                f"(best {stopping.best:.4g} at {stopping.best_epoch}; friction-only {start_err:.4g}) "
                f"{time.perf_counter() - clock:.0f} s"
            )

    start_err = val_error()
    run = fit_minibatches(
        model, loss, len(Y), val_error, opt, epochs=epochs, batch=options.batch, patience=patience + 1,
        time_limit_s=options.time_limit_s, scheduler=sched, grad_clip=10.0, log=log,
    )  # fmt: skip
    result = DelanResult(
        model=model,
        epochs_planned=epochs,
        epochs_run=run.epochs_run,
        best_epoch=run.best_epoch,
        patience=patience,
        stopped_early=run.stopped_early,
        timed_out=run.timed_out,
        train_s=run.seconds,
        train_samples=len(Y),
        val_samples=len(YV),
        val_error_start=run.start,
        val_error=run.best,
        history=run.history,
    )
    say(result.describe())
    return result


def train_delan_recordings(
    recordings,
    mapping,
    options: DelanOptions | None = None,
    progress=None,
) -> DelanResult:
    """Filtered samples of ``recordings``; the last ``val_fraction`` of each is the validation stretch."""
    from .samples import filtered_samples
    from .training import split_validation

    options = options or DelanOptions()
    train, val = split_validation(list(recordings), options.val_fraction)
    tr = filtered_samples(train, mapping.filter_cutoff_hz, mapping.gap_factor)
    va = filtered_samples(val, mapping.filter_cutoff_hz, mapping.gap_factor)
    if progress:
        progress(
            f"validation: the last {options.val_fraction:.0%} of each training recording; "
            f"{tr.rate_hz:.0f} Hz, zero-phase Butterworth {tr.cutoff_hz:g} Hz"
        )
    return train_delan(mapping.actuated_joints, tr, va, mapping.coulomb_velocity, options, progress)
