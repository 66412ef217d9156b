"""``ros-lnn bench train``: training speed.

1. Steps/s of a training step (loss of the paper, eqs 33–38 with measured ``Q_e``; backward; Adam) with
   the analytic-derivative :class:`ServoLNN` against the DeLaN-style :class:`AutogradServoLNN`
   (``∂M/∂q``, ``∂V/∂q`` by ``torch.autograd.grad(create_graph=True)``, the loss differentiated through
   them), sharing the same weights, same device, same run, batch 2048. The two are timed in alternating
   rounds (a shared machine's load hits both alike); the figure is the median over rounds.
   The same for DeLaN systems of n = 3, 4, 7 coordinates (random data), where the autograd baseline's
   n² + 1 backward passes grow and the analytic graph's single pass does not.
2. Wall time of the paper's schedule (4096 samples, batch 2048, 10 000 epochs) through the trainer of
   ``ros-lnn train`` (data resident on the device, host syncs only at log points). ``--quick`` runs a
   few hundred epochs and extrapolates; otherwise the full schedule runs, eager and with ``--compile``
   (the analytic step's loss under ``torch.compile``; the autograd baseline cannot be compiled:
   AOTAutograd refuses double backward).

3. DeLaN training side by side (:mod:`ros_lnn_lab.studies.delan_reference`), last: this package's DeLaN
   family on
   the DeLaN character data (when found: ``--data`` or the default location) and on a 7-joint planar arm
   (exact inverse dynamics at random states), 64 × 2 softplus, batch 512, the same epochs; samples·epochs
   per second of the training loop and the final test torque error. With ``--reference DIR`` the published
   implementation's torch training (imported from the checkout DIR, never copied here) runs on the same
   data in the same process; the last line is then ``DeLaN training: package S1 samples*epochs/s,
   reference S2, ratio = X; test error package E1, reference E2`` (X = S1 / S2), without it the package's
   figures only. ``--epochs`` sets the epochs (default 300; 20 with ``--quick``).

4. Scale-out (``--scale-samples N``, 3.6 M by default: an hour of 1 kHz data): the package's DeLaN of a
   7-joint arm through the trainer, one epoch per batch size (512, the reference's; 16 384, the batch a
   GPU wants). The data are ``SCALE_DISTINCT`` exact samples repeated to N (throughput does not depend
   on the values, and exact 7-link dynamics of millions of states would take longer than the training).
   On a GPU the whole epoch is measured; on the CPU a 5 % share is, and the epoch extrapolated (said so).

Device: cuda when available (else CPU); float32 as ``ros-lnn train`` trains by default.
"""

from __future__ import annotations

import os
import time

import numpy as np

PAPER = {"samples": 4096, "batch": 2048, "epochs": 10_000}
#: An hour of 1 kHz data, and how many distinct exact samples stand for it.
SCALE_SAMPLES, SCALE_DISTINCT = 3_600_000, 100_000


def paper_data():
    """Training samples of the paper's crane split (model order) and the joint names."""
    from ros_lnn.models.normalisation import normalisation
    from ros_lnn.physics.crane import Crane
    from ros_lnn.physics.datasets import paper_crane_trials, paper_split
    from ros_lnn.training.data import model_order, reorder

    trials = paper_crane_trials(Crane())
    train, _ = paper_split(trials, n_train_samples=PAPER["samples"], seed=0)
    free, servo = list(trials[0].free_joints), list(trials[0].servo_joints)
    train = reorder(train, model_order(trials[0].coordinate_names, free, servo))
    return train, free, servo, normalisation(train["q"])


def make_model(free, servo, norm, seed=0):
    import torch

    from ros_lnn.models.servo_lnn import ServoLNN

    torch.manual_seed(seed)
    n = len(free) + len(servo)
    model = ServoLNN(free, servo, hidden=[64], coordinate_units=(["rad", "m"] if n == 2 else ["rad"] * n))
    model.set_normalisation(*norm)
    return model


def _sync(device):
    import torch

    if device.type == "cuda":
        torch.cuda.synchronize(device)


def step_rates(train, free, servo, norm, device, *, batch=2048, steps=20, rounds=5, dtype="float32") -> dict:
    """Median steps/s of analytic and autograd training steps, alternating rounds of ``steps`` steps."""
    import torch

    from ros_lnn.models.autograd_reference import AutogradServoLNN
    from ros_lnn.models.losses import loss_terms, select_losses
    from ros_lnn.training.trainer import make_adam

    names = select_losses(True, len(servo))  # the trainer's choice: Q_e measured where there is one
    dt = {"float32": torch.float32, "float64": torch.float64}[dtype]
    model = make_model(free, servo, norm).to(device=device, dtype=dt)
    reference = AutogradServoLNN(model)  # shares the weights
    data = {
        k: torch.as_tensor(np.asarray(train[k]), device=device, dtype=dt) for k in ("q", "qd", "qdd", "Q")
    }
    gen = torch.Generator(device=device)
    gen.manual_seed(0)
    idx = torch.randperm(len(train["q"]), generator=gen, device=device)[:batch]
    b = {k: v[idx] for k, v in data.items()}

    # same weights, same batch: the two implementations compute the same loss and gradient
    grads = {}
    for name, impl in (("analytic", model), ("autograd", reference)):
        model.zero_grad(set_to_none=True)
        loss = sum(loss_terms(impl, b, names).values())
        loss.backward()
        loss = loss.detach()
        grads[name] = (loss.item(), torch.cat([p.grad.flatten() for p in model.parameters()]).double().cpu())
    g_a, g_r = grads["analytic"][1], grads["autograd"][1]
    agreement = {
        "loss_rel_diff": abs(grads["analytic"][0] - grads["autograd"][0]) / abs(grads["autograd"][0]),
        "grad_rel_diff": float((g_a - g_r).norm() / g_r.norm()),
    }

    opt = make_adam(model.parameters(), 1e-4, 1e-5)
    state = {k: v.clone() for k, v in model.state_dict().items()}

    def run(impl, n):
        for _ in range(n):
            loss = sum(loss_terms(impl, b, names).values())
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()

    class SharedPart:  # network outputs fixed: what is left is the dynamics and losses both share
        n_f, partition = model.n_f, model.partition
        fixed = tuple(x.detach().requires_grad_(True) for x in model.terms(b["q"]))

        def terms(self, q):
            return self.fixed

    impls = {"analytic": model, "autograd": reference, "shared": SharedPart()}
    for impl in impls.values():  # warm-up (allocator, kernels, lazy init)
        run(impl, 2)
    _sync(device)
    times: dict[str, list[float]] = {k: [] for k in impls}
    for _ in range(rounds):
        for name, impl in impls.items():
            model.load_state_dict(state)  # both time the same region of weight space
            _sync(device)
            t0 = time.perf_counter()
            run(impl, steps)
            _sync(device)
            times[name].append(steps / (time.perf_counter() - t0))
    med = {k: float(np.median(v)) for k, v in times.items()}
    return {
        "batch": batch,
        "steps_per_round": steps,
        "rounds": rounds,
        "dtype": dtype,
        "analytic_steps_per_s": med["analytic"],
        "autograd_steps_per_s": med["autograd"],
        "speedup": med["analytic"] / med["autograd"],
        "shared_steps_per_s": med["shared"],
        "derivative_speedup": (1 / med["autograd"] - 1 / med["shared"])
        / (1 / med["analytic"] - 1 / med["shared"]),
        "rounds_steps_per_s": times,
        **agreement,
    }


def size_rates(n: int, device, *, steps=10, rounds=3) -> dict:
    """Analytic vs autograd steps/s for a DeLaN of ``n`` coordinates (random data: only the cost is
    measured). The autograd baseline needs one backward pass per entry of ``M`` (n²) and one for ``V``;
    the analytic graph carries ``∂/∂q`` beside the values in one pass, whatever ``n``."""
    rng = np.random.default_rng(n)
    data = {k: rng.normal(size=(4096, n)) for k in ("q", "qd", "qdd", "Q")}
    names = [f"j{i}" for i in range(n)]
    r = step_rates(data, names, [], (np.zeros(n), np.ones(n)), device, steps=steps, rounds=rounds)
    return {
        "n": n,
        "analytic_steps_per_s": r["analytic_steps_per_s"],
        "autograd_steps_per_s": r["autograd_steps_per_s"],
        "speedup": r["speedup"],
    }


def compiled_rate(
    train, free, servo, norm, device, *, batch=2048, steps=30, rounds=3, dtype="float32"
) -> dict:
    """Steps/s of the analytic step with the loss under ``torch.compile`` (inductor), as ``--compile``
    trains; the compile time is reported apart. A failed compile reports the eager fallback."""
    import torch

    from ros_lnn.models.losses import WITH_QE
    from ros_lnn.training.distributed import DistInfo, make_loss_step
    from ros_lnn.training.trainer import make_adam

    dt = {"float32": torch.float32, "float64": torch.float64}[dtype]
    model = make_model(free, servo, norm).to(device=device, dtype=dt)
    idx = torch.randperm(len(train["q"]), generator=torch.Generator().manual_seed(0))[:batch]
    b = {
        k: torch.as_tensor(np.asarray(train[k])[idx.numpy()], device=device, dtype=dt)
        for k in ("q", "qd", "qdd", "Q")
    }
    opt = make_adam(model.parameters(), 1e-4, 1e-5)
    step, describe = make_loss_step(model, WITH_QE, DistInfo(device=device), compile=True)

    def run(n):
        for _ in range(n):
            loss = sum(step(b).values())
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()

    t0 = time.perf_counter()
    run(2)
    _sync(device)
    compile_s = time.perf_counter() - t0
    rates = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        run(steps)
        _sync(device)
        rates.append(steps / (time.perf_counter() - t0))
    return {
        "compiled_steps_per_s": float(np.median(rates)),
        "compile_s": compile_s,
        "status": describe()["compile"],
    }


def paper_schedule(
    train,
    free,
    servo,
    norm,
    device,
    *,
    epochs=None,
    quick=False,
    dtype="float32",
    progress=None,
    compile=False,
) -> dict:
    """Seconds for the paper schedule through the trainer (measured, or extrapolated with ``quick``)."""
    from ros_lnn.training.trainer import TrainConfig
    from ros_lnn.training.trainer import train as run_training

    run_epochs = epochs or (300 if quick else PAPER["epochs"])
    model = make_model(free, servo, norm)
    cfg = TrainConfig(
        epochs=run_epochs,
        batch=PAPER["batch"],
        device=str(device),
        dtype=dtype,
        log_every=max(1, min(1000, run_epochs)),
        val_every=run_epochs + 1,
        compile=compile,
    )
    lines: list[str] = []
    history = run_training(model, train, None, cfg, progress=progress or lines.append)
    seconds = history["seconds"]
    full = seconds * PAPER["epochs"] / run_epochs
    return {
        "epochs_run": run_epochs,
        "seconds_run": seconds,
        "epochs_per_s": run_epochs / seconds,
        "paper_schedule_s": full,
        "extrapolated": run_epochs != PAPER["epochs"],
        "final_loss": history["loss"][-1],
        "compile": history["run"]["compile"],
    }


def bench_train(args, *, steps=None, rounds=None, schedule_epochs=None) -> dict:
    import torch

    from ros_lnn.training.trainer import resolve_device

    quick = bool(getattr(args, "quick", False))
    device = resolve_device("auto")
    if device.type == "cpu":
        torch.set_num_threads(1)  # the trainer's CPU default (the per-step tensors are too small to split)
    threads = torch.get_num_threads()
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else f"CPU ({os.cpu_count()} cores)"
    print(f"device: {device} ({name}); torch {torch.__version__}; intra-op threads {threads}")
    train, free, servo, norm = paper_data()

    rates = step_rates(
        train,
        free,
        servo,
        norm,
        device,
        steps=steps or (10 if quick else 30),
        rounds=rounds or (3 if quick else 5),
    )
    print(f"training step, batch {rates['batch']}, paper losses (with Q_e), {rates['dtype']}:")
    print(f"  analytic ServoLNN        {rates['analytic_steps_per_s']:9.1f} steps/s")
    print(f"  autograd (DeLaN-style)   {rates['autograd_steps_per_s']:9.1f} steps/s")
    print(f"  speed-up                 {rates['speedup']:9.1f}x   (target >= 5x)")
    print(
        f"  dynamics + losses alone  {rates['shared_steps_per_s']:9.1f} steps/s (network outputs fixed; "
        "shared by both)"
    )
    print(f"  network + derivatives part, analytic vs autograd: {rates['derivative_speedup']:.1f}x")
    print(
        f"  same loss/gradient: loss rel diff {rates['loss_rel_diff']:.1e}, gradient rel diff "
        f"{rates['grad_rel_diff']:.1e}"
    )

    compiled = None
    if not quick:
        compiled = compiled_rate(train, free, servo, norm, device)
        print(
            f"  analytic + torch.compile {compiled['compiled_steps_per_s']:9.1f} steps/s "
            f"({compiled['status']}; first two steps incl. compiling {compiled['compile_s']:.0f} s)"
        )
        compiled["speedup_vs_autograd"] = compiled["compiled_steps_per_s"] / rates["autograd_steps_per_s"]
        print(
            f"  compiled analytic vs autograd (autograd cannot be compiled: double backward) "
            f"{compiled['speedup_vs_autograd']:.1f}x"
        )

    sizes = []
    for n in (3,) if quick else (3, 4, 7):
        sizes.append(size_rates(n, device))
        print(
            f"  DeLaN with n = {n} coordinates (random data): analytic "
            f"{sizes[-1]['analytic_steps_per_s']:.1f}, "
            f"autograd {sizes[-1]['autograd_steps_per_s']:.1f} steps/s -> {sizes[-1]['speedup']:.1f}x"
        )

    sched = paper_schedule(
        train,
        free,
        servo,
        norm,
        device,
        epochs=schedule_epochs,
        quick=quick,
        progress=lambda line: print("  " + line, flush=True),
    )
    how = (
        f"extrapolated from {sched['epochs_run']} epochs ({sched['seconds_run']:.1f} s)"
        if sched["extrapolated"]
        else "measured"
    )
    print(
        f"paper schedule ({PAPER['samples']} samples, batch {PAPER['batch']}, {PAPER['epochs']} epochs): "
        f"{sched['paper_schedule_s']:.1f} s, {how}; {sched['epochs_per_s']:.1f} epochs/s (target <= 60 s "
        "on one H100)"
    )
    scale = None
    scale_samples = getattr(args, "scale_samples", None)
    if scale_samples or (scale_samples is None and not quick):  # --quick: only when asked for
        print(f"scale-out on {device} (an hour of 1 kHz data; throughput, repeated exact samples):")
        scale = scale_out(
            device,
            samples=scale_samples or SCALE_SAMPLES,
            distinct=10_000 if quick else SCALE_DISTINCT,
            progress=lambda line: print(line, flush=True),
        )
    sched_compiled = None
    if not quick:
        sched_compiled = paper_schedule(
            train,
            free,
            servo,
            norm,
            device,
            compile=True,
            progress=lambda line: print("  " + line, flush=True),
        )
        print(
            f"paper schedule with --compile: {sched_compiled['paper_schedule_s']:.1f} s, measured, compiling "
            f"included ({sched_compiled['compile']}); {sched_compiled['epochs_per_s']:.1f} epochs/s"
        )
    delan = delan_side_by_side(
        getattr(args, "reference", None),
        epochs=getattr(args, "epochs", None) or (20 if quick else 300),
        data=getattr(args, "data", None),
    )
    return {
        "device": str(device),
        "device_name": name,
        "threads": threads,
        "torch": torch.__version__,
        "step": rates,
        "compiled": compiled,
        "sizes": sizes,
        "schedule": sched,
        "schedule_compiled": sched_compiled,
        "scale": scale,
        "delan": delan,
    }


def scale_out(
    device,
    *,
    samples: int = SCALE_SAMPLES,
    distinct: int = SCALE_DISTINCT,
    batches=(512, 16_384),
    cpu_share: float = 0.05,
    progress=print,
) -> dict:
    """Seconds per epoch of the package's 7-joint DeLaN on ``samples`` samples, per batch size (module
    docstring, item 4): measured on a GPU, from a ``cpu_share`` of the samples on the CPU."""
    from ros_lnn_lab.studies.delan_benchmark import train_delan
    from ros_lnn_lab.studies.delan_reference import arm_data

    base, _ = arm_data(7, distinct)
    share = 1.0 if device.type == "cuda" else cpu_share
    n = max(int(samples * share), max(batches))
    idx = np.arange(n) % distinct
    data = {k: np.asarray(v)[idx] for k, v in base.items()}
    rows = []
    for batch in batches:
        _, history = train_delan(
            data,
            epochs=1,
            batch=batch,
            log_every=1,
            progress=lambda line: None,
            free_joints=[f"joint_{i + 1}" for i in range(7)],
            device=str(device),
        )
        seconds = history["seconds"] * samples / n
        rows.append(
            {
                "batch": batch,
                "samples_run": n,
                "seconds_run": history["seconds"],
                "epoch_s": seconds,
                "samples_per_s": samples / seconds,
                "extrapolated": n != samples,
            }
        )
        how = "measured" if n == samples else f"extrapolated from {n} samples ({history['seconds']:.1f} s)"
        progress(
            f"  {samples:,} samples, 7-joint DeLaN 64x2, batch {batch:6d}: {seconds:8.1f} s per "
            f"epoch, {samples / seconds:10.0f} samples/s ({how})"
        )
    return {"device": str(device), "samples": samples, "distinct": distinct, "rows": rows}


def delan_side_by_side(reference=None, *, epochs: int = 300, data=None, arm_samples: int = 3000) -> dict:
    """This package's DeLaN and, with ``reference`` (a checkout's folder), the published implementation on
    the character data (when found) and a 7-joint arm: one table row per data set and implementation, then
    the summary line (:mod:`ros_lnn_lab.studies.delan_reference`). CPU, one intra-op thread for both."""
    import torch

    from ros_lnn.errors import DataError
    from ros_lnn.physics.delan_data import load_character_data
    from ros_lnn_lab.studies.delan_reference import arm_data, train_package, train_reference

    if reference is not None:
        from ros_lnn_lab.studies.delan_reference import load_reference

        load_reference(reference)  # a wrong folder fails now, before the package's training
    torch.set_num_threads(1)
    sets = {}
    try:
        sets["character"] = load_character_data(data)
    except DataError as exc:
        print(f"DeLaN character data not used: {exc}")
    sets["arm7"] = arm_data(7, arm_samples)
    print(
        f"DeLaN training, {epochs} epochs, 64x2 softplus, batch 512, lr 5e-4, weight decay 1e-5, float32 "
        "CPU, one thread; samples*epochs/s of the training loop, test torque error (mean over samples of the "
        "squared error summed over joints):"
    )
    print(
        f"  {'data':10s} {'samples':>7s} {'implementation':16s} {'samples*epochs/s':>17s} {'s':>8s} "
        f"{'test error':>11s}"
    )
    rows: dict = {}
    for name, (train, test) in sets.items():
        runs = {"package": train_package(train, test, epochs=epochs)}
        if reference is not None:
            runs["reference"] = train_reference(reference, train, test, epochs=epochs)
        for impl, r in runs.items():
            print(
                f"  {name:10s} {r['samples']:7d} {impl:16s} {r['samples_epochs_per_s']:17.0f} "
                f"{r['seconds']:8.1f} {r['test_torque_error']:11.3e}"
            )
        rows[name] = runs
    head = rows.get("character") or rows["arm7"]
    pkg = head["package"]
    out = {"epochs": epochs, "rows": rows, "summary_data": "character" if "character" in rows else "arm7"}
    if reference is None:
        print(
            f"DeLaN training: package {pkg['samples_epochs_per_s']:.0f} samples*epochs/s; test error package "
            f"{pkg['test_torque_error']:.3e} ({out['summary_data']} data; no --reference given)"
        )
        return out
    ref = head["reference"]
    out["ratio"] = pkg["samples_epochs_per_s"] / ref["samples_epochs_per_s"]
    print(f"(reference minibatches: {ref['batches']}; data set of the line below: {out['summary_data']})")
    print(
        f"DeLaN training: package {pkg['samples_epochs_per_s']:.0f} samples*epochs/s, reference "
        f"{ref['samples_epochs_per_s']:.0f}, ratio = {out['ratio']:.2f}; test error package "
        f"{pkg['test_torque_error']:.3e}, reference {ref['test_torque_error']:.3e}"
    )
    return out
