"""DeLaN training side by side: this package's DeLaN family and the published DeLaN implementation's
torch training, on the same data, network size, batch and epochs (``ros-lnn bench train [--reference
DIR]``).

The published implementation is not part of this package and none of its code is copied here: ``DIR`` is
a checkout of it (milutter/deep_lagrangian_networks) that the user passes, and its modules are imported
from there. What is taken from the checkout:

* ``deep_lagrangian_networks/DeLaN_model.py``: ``DeepLagrangianNetwork(n_dof, **hyper)``, called as
  ``model(q, qd, qdd)`` for the predicted torque and the predicted power (the first two entries of what it
  returns), and ``model.inv_dyn(q, qd, qdd)`` for the test torques;
* ``deep_lagrangian_networks/replay_memory.py``: ``PyTorchReplayMemory(size, minibatch, dims, cuda)``,
  the minibatches of its training loop (when it is missing, or takes other arguments, a random
  permutation per epoch in minibatches of the same size takes its place, and the figures say so).

The training loop is the one its example script runs (the script itself is not importable): Adam with
AMSGrad, ``loss = mean |τ̂ − τ|² + mean (Ê̇ − q̇ᵀτ)²`` per minibatch, the loss read back to the host after
every step (``loss.item()``) as the script does. Hyperparameters: the script's (64 × 2 softplus, batch
512, learning rate 5e-4, weight decay 1e-5), overridable.

Throughput: training samples × epochs per second of wall time of the training loop alone (model
construction and data transfer excluded, for both). Test error: the reference's measure, mean over test
samples of the squared torque error summed over the joints.
"""

from __future__ import annotations

import importlib
import sys
import time
from pathlib import Path

import numpy as np

from ros_lnn.errors import ConfigError

#: The example script's hyperparameters (the published set-up of the character benchmark).
REFERENCE_HYPER = {
    "n_width": 64,
    "n_depth": 2,
    "diagonal_epsilon": 0.01,
    "activation": "SoftPlus",
    "b_init": 1.0e-4,
    "b_diag_init": 0.001,
    "w_init": "xavier_normal",
    "gain_hidden": float(np.sqrt(2.0)),
    "gain_output": 0.1,
    "n_minibatch": 512,
    "learning_rate": 5.0e-4,
    "weight_decay": 1.0e-5,
}
PACKAGE = "deep_lagrangian_networks"


def torque_error(tau_hat, tau) -> float:
    """Mean over samples of the squared torque error summed over the joints."""
    tau_hat = np.asarray(tau_hat, float).reshape(np.shape(tau))
    return float(np.mean(np.sum((tau_hat - np.asarray(tau, float)) ** 2, axis=-1)))


def load_reference(directory):
    """``(DeepLagrangianNetwork, PyTorchReplayMemory or None)`` imported from the checkout at
    ``directory``; :class:`ConfigError` in one line when it does not hold the published layout."""
    root = Path(directory).expanduser().resolve()
    if not (root / PACKAGE / "DeLaN_model.py").is_file():
        raise ConfigError(
            f"--reference {directory}: no {PACKAGE}/DeLaN_model.py there; pass the root of a checkout of "
            "the published DeLaN implementation (github.com/milutter/deep_lagrangian_networks)"
        )
    if str(root) not in sys.path:
        sys.path.insert(0, str(root))
    for name in [m for m in sys.modules if m == PACKAGE or m.startswith(PACKAGE + ".")]:
        if not str(getattr(sys.modules[name], "__file__", "") or "").startswith(str(root)):
            del sys.modules[name]  # another checkout's modules: import this one's
    try:
        model_module = importlib.import_module(f"{PACKAGE}.DeLaN_model")
    except Exception as exc:  # whatever the checkout's import raises, said in one line
        raise ConfigError(
            f"--reference {directory}: importing {PACKAGE}.DeLaN_model failed: {exc!r}"
        ) from exc
    network = getattr(model_module, "DeepLagrangianNetwork", None)
    if network is None:
        raise ConfigError(f"--reference {directory}: {PACKAGE}.DeLaN_model has no DeepLagrangianNetwork")
    try:
        memory = getattr(importlib.import_module(f"{PACKAGE}.replay_memory"), "PyTorchReplayMemory", None)
    except Exception:  # noqa: BLE001 - optional: the loop batches by itself without it
        memory = None
    return network, memory


def _batches(memory_class, arrays, batch: int, rng):
    """The minibatches of one epoch: from the checkout's replay memory when it takes ``arrays`` (a
    fresh iteration per epoch), else a random permutation. Returns ``(iterable factory, source)``."""
    import torch

    n = len(arrays[0])
    if memory_class is not None:
        try:
            memory = memory_class(n, batch, tuple((a.shape[1],) for a in arrays), False)
            memory.add_samples(list(arrays))
            iter(memory)
            return (lambda: memory), "its replay memory"
        except Exception:  # noqa: BLE001 - another signature: fall back, and say so
            pass
    tensors = [torch.as_tensor(a, dtype=torch.float32) for a in arrays]

    def epoch():
        perm = torch.as_tensor(rng.permutation(n))
        for i in range(0, n, batch):
            idx = perm[i : i + batch]
            yield [t[idx] for t in tensors]

    return epoch, "a random permutation (its replay memory was not usable)"


def train_reference(directory, train: dict, test: dict, *, epochs: int, hyper=None, seed: int = 0) -> dict:
    """Train the checkout's DeLaN on ``train`` (q, qd, qdd, Q) for ``epochs``; throughput and test error."""
    import torch

    network, memory_class = load_reference(directory)
    hp = dict(REFERENCE_HYPER, **(hyper or {}))
    torch.manual_seed(seed)
    n_dof = int(np.shape(train["q"])[1])
    try:
        model = network(n_dof, **hp).cpu()
    except TypeError as exc:
        raise ConfigError(
            f"--reference {directory}: DeepLagrangianNetwork(n_dof, **hyper) failed: {exc}"
        ) from exc
    optimizer = torch.optim.Adam(
        model.parameters(), lr=hp["learning_rate"], weight_decay=hp["weight_decay"], amsgrad=True
    )
    arrays = [np.asarray(train[k], np.float32) for k in ("q", "qd", "qdd", "Q")]
    epoch_batches, source = _batches(
        memory_class, arrays, int(hp["n_minibatch"]), np.random.default_rng(seed)
    )
    model.train()
    losses = []
    start = time.perf_counter()
    for _ in range(epochs):
        total, count = 0.0, 0
        for q, qd, qdd, tau in epoch_batches():
            optimizer.zero_grad()
            out = model(q, qd, qdd)
            tau_hat, dEdt_hat = out[0], out[1]
            err_inv = torch.sum((tau_hat.view(tau.shape) - tau) ** 2, dim=1)
            dEdt = torch.sum(qd * tau, dim=1)
            loss = torch.mean(err_inv) + torch.mean((dEdt_hat.view(-1) - dEdt) ** 2)
            loss.backward()
            optimizer.step()
            total += loss.item()  # the example script reads the loss back every step
            count += 1
        losses.append(total / max(count, 1))
    seconds = time.perf_counter() - start
    model.eval()
    t = {k: torch.as_tensor(np.asarray(test[k]), dtype=torch.float32) for k in ("q", "qd", "qdd")}
    with torch.no_grad():
        tau_test = model.inv_dyn(t["q"], t["qd"], t["qdd"])
    return {
        "epochs": epochs,
        "samples": len(arrays[0]),
        "seconds": seconds,
        "samples_epochs_per_s": len(arrays[0]) * epochs / seconds,
        "final_loss": losses[-1] if losses else float("nan"),
        "test_torque_error": torque_error(tau_test.cpu().numpy(), test["Q"]),
        "batches": source,
        "hyper": hp,
    }


def train_package(train: dict, test: dict, *, epochs: int, seed: int = 0, compile: bool = False) -> dict:
    """This package's DeLaN family (:func:`ros_lnn_lab.studies.delan_benchmark.train_delan`: the project
    trainer,
    64 × 2 softplus, batch 512, lr 5e-4, weight decay 1e-5, float32 CPU) on the same data."""
    import torch

    from ros_lnn_lab.studies.delan_benchmark import train_delan

    n = int(np.shape(train["q"])[1])
    model, history = train_delan(
        train,
        epochs=epochs,
        seed=seed,
        log_every=max(1, epochs),
        progress=lambda line: None,
        compile=compile,
        free_joints=[f"joint_{i + 1}" for i in range(n)],
    )
    samples = len(train["q"])
    t = {k: torch.as_tensor(np.asarray(test[k]), dtype=torch.float32) for k in ("q", "qd", "qdd")}
    with torch.no_grad():
        tau_test = model.inverse(t["q"], t["qd"], t["qdd"])["Q"]
    return {
        "epochs": epochs,
        "samples": samples,
        "seconds": history["seconds"],
        "samples_epochs_per_s": samples * epochs / history["seconds"],
        "final_loss": history["loss"][-1],
        "test_torque_error": torque_error(tau_test.double().numpy(), test["Q"]),
    }


def arm_data(n_joints: int = 7, samples: int = 3000, seed: int = 0) -> tuple[dict, dict]:
    """``(train, test)`` of a planar ``n_joints``-link arm (:class:`ros_lnn.physics.chain.PlanarChain`,
    exact inverse dynamics) at random states: q uniform in ±π, q̇ and q̈ standard normal; a fifth more
    samples for the test set."""
    from ros_lnn.physics.chain import Link, PlanarChain

    arm = PlanarChain(
        [Link(f"joint_{i + 1}", mass=1.0, length=0.3, com=0.15, inertia=0.01) for i in range(n_joints)]
    )
    rng = np.random.default_rng(seed)
    out = []
    for count in (samples, samples // 5):
        q = rng.uniform(-np.pi, np.pi, (count, n_joints))
        qd, qdd = rng.normal(size=(2, count, n_joints))
        out.append({"q": q, "qd": qd, "qdd": qdd, "Q": arm.dynamics(q, qd, qdd=qdd)["Q"]})
    return out[0], out[1]
