"""The TLNN study of the TLNN paper (docs/papers.md) scaled to a 2-core CPU: planar chains of uniform rods
(m = 1 kg, l = 1 m, J = m l²/12, g = 9.8, no joint forces) with 2, 3 and 4 links. The paper's four
families — TLNN, a plain LNN, an HNN (:mod:`ros_lnn.models.hnn`: the observed ``q̇`` as its momentum, fitted
on ``q̇`` and ``q̈``) and a neural ODE (NODE, black box) — each learn from the same trajectories through
:func:`train_acceleration`, in absolute body angles and in relative joint angles. Rollouts (RK4 at the rollout
rate) from held-out initial states give ``E(t) = ‖ẑ − z‖₂ / ‖z‖₂`` with ``z = [φ; φ̇]`` in absolute angles
for every model (relative rollouts are converted), as median and 5–95 % band.

Fairness: same data, same epochs, batch and learning rate for every model; the LNN, HNN and NODE widths
are chosen so their parameter counts match the TLNN's (:func:`matched_width`). Starts: the TLNN's
kinetic heads are input-convex and scaled (see :mod:`ros_lnn.models.tlnn`); the LNN's network gets
the same input-convex start (:func:`ros_lnn.models.tlnn.convex_initialisation`) so that ``∂²𝓛/∂q̇²``
starts positive definite for both (from PyTorch's default start it ends indefinite on every test
sample and the LNN's test q̈ MSE is ~6× worse: 17 against 2.9 on the 2-link point-mass chain).

Scale-down from the paper (its setup, on a GPU: 250 initial conditions × 100 s at 25 Hz with random
joint forces, 350 000 training samples, 7:3 split; 100 rollouts × 10 s at 100 Hz). Defaults here:
40 initial conditions × 10 s at 25 Hz, free motion, 7:3 split by initial condition (7 028 training
samples), 100 rollouts × 10 s at 100 Hz (RK4, dt = 0.01 s) from held-out initial states drawn like
the training ones, 150 epochs of batch 256 at lr 3·10⁻³ (≈ 4 100 Adam steps) for every model.
Initial states: relative joint angles uniform in ±π/4, joint rates normal with σ = 0.5 rad/s (the
paper gives no ranges; from ±π/2 and σ = 1 the 3- and 4-rod chains whip, q̈ has tails past 400 rad/s²
and at this budget no model fits them: 3 links, test q̈ MSE TLNN 5.2·10³, LNN 1.3·10³ against a
q̈ variance of 3.6·10³). Ground truth and training data come from one batched DOP853 integration
(rtol = atol = 10⁻⁹). The test q̈ error is in absolute angles for every model (mean and median of
the per-sample squared norm; the mean is dominated by the few states where a learned W is nearly
singular).

The paper's "four-bar" example (四连杆) starts from four independent angles and rates, so it reads as a
4-DOF open chain under constant joint forces, not a closed four-bar linkage: :func:`forced_study` trains
the four families on 4-link trajectories under random constant generalised forces (every model takes
``Q``: the Lagrangian ones in their Euler–Lagrange equations, the HNN in ``ṗ``, the neural ODE as an
input) and rolls out held-out states and the paper's example (``Q = 0.05``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ros_lnn.physics.chain import PlanarChain, rod
from ros_lnn.physics.chain_motion import integrate, random_states, to_absolute, to_relative
from ros_lnn_lab.studies.config import StudyConfig
from ros_lnn_lab.studies.figures import pyplot, save_figure

FAMILIES = ("TLNN", "LNN", "HNN", "NODE")
COORDINATES = ("absolute", "relative")
MODELS = tuple(f"{f} ({c})" for f in FAMILIES for c in COORDINATES)
#: The study's scale (above): 40 initial conditions × 10 s, 150 epochs, TLNN width 32, 100 rollouts × 10 s,
#: seed 0, chains of 2, 3, 4 links (``links``; the forced study: 4).
DEFAULTS = StudyConfig(
    seeds=(0,),
    epochs=150,
    trajectories=40,
    duration=10.0,
    hidden=(32,),
    rollouts=100,
    rollout_duration=10.0,
    links=(2, 3, 4),
)
#: ``--quick``: 4 initial conditions × 2 s, 3 epochs, TLNN width 8, 3 rollouts × 1 s.
QUICK = DEFAULTS.replace(
    quick=True, trajectories=4, duration=2.0, epochs=3, hidden=(8,), rollouts=3, rollout_duration=1.0
)


@dataclass(frozen=True)
class ChainSettings:
    """The settings :func:`study_chain` and :func:`forced_study` share besides their ``config``: the data's
    sample rate, the batch and learning rate of every model, the rollouts' rate, the interval of the reported
    curves, and the initial states (relative joint angles uniform in ±``angle_range``, joint rates normal
    with σ = ``speed``)."""

    rate_hz: float = 25.0
    batch: int = 256
    lr: float = 3e-3
    rollout_hz: float = 100.0
    report_every: float = 0.1
    angle_range: float = np.pi / 4
    speed: float = 0.5

    def states(self, n_links: int, count: int, rng) -> tuple[np.ndarray, np.ndarray]:
        """``count`` initial states ``(q, q̇)`` of an ``n_links`` chain."""
        return random_states(n_links, count, rng, self.angle_range, self.speed)

    @property
    def stride(self) -> int:
        """Rollout steps between the reported points of a curve."""
        return max(1, int(round(self.report_every * self.rollout_hz)))

    def fit(self, epochs: int, seed: int) -> dict:
        """The training settings every model gets (and the result reports)."""
        return {"epochs": epochs, "batch": self.batch, "lr": self.lr, "seed": seed}


def _sizes(config: StudyConfig) -> tuple[int, float, int, int, int]:
    """(initial conditions, seconds each, epochs, TLNN width, seed) of ``config``."""
    return config.trajectories, config.duration, config.epochs, config.hidden[0], config.seed


def rod_chain(n_links: int) -> PlanarChain:
    return PlanarChain([rod(f"joint_{i + 1}") for i in range(n_links)])


def _start(
    n_links: int, config: StudyConfig, settings: dict
) -> tuple[ChainSettings, PlanarChain, np.random.Generator, tuple[np.ndarray, np.ndarray]]:
    """How a chain study starts: its :class:`ChainSettings`, the chain, the random generator of
    ``config``'s seed and, its first draw, the initial states of the training trajectories."""
    opts = ChainSettings(**settings)
    rng = np.random.default_rng(config.seed)
    return opts, rod_chain(n_links), rng, opts.states(n_links, config.trajectories, rng)


def parameter_count(model) -> int:
    return sum(p.numel() for p in model.parameters())


def make_model(family: str, n: int, width: int, forced: bool = False):
    """A model of ``family`` with two hidden layers of ``width`` (per head for the TLNN); ``forced``: the
    neural ODE takes ``Q`` as an input (the others take it in their equations of motion anyway)."""
    from ros_lnn.models.hnn import HNN
    from ros_lnn.models.lnn import LNN
    from ros_lnn.models.node_baseline import NeuralODE
    from ros_lnn.models.tlnn import TLNN, convex_initialisation, serial_chain_topology

    if family == "TLNN":
        return TLNN(serial_chain_topology(n), hidden=(width, width))
    if family == "LNN":
        model = LNN(n, hidden=(width, width), angle_coordinates=range(n))
        convex_initialisation(model.net)
        return model
    if family == "HNN":
        return HNN(n, hidden=(width, width), angle_coordinates=range(n))
    if family == "NODE":
        return NeuralODE(n, hidden=(width, width), force_input=forced)
    raise ValueError(f"unknown family '{family}', expected one of {FAMILIES}")


def matched_width(family: str, n: int, target: int, forced: bool = False) -> int:
    """The width whose parameter count is closest to ``target`` (counts grow with the width)."""
    best, width = 4, 4
    while True:
        count = parameter_count(make_model(family, n, width, forced))
        if abs(count - target) < abs(parameter_count(make_model(family, n, best, forced)) - target):
            best = width
        if count > target:
            return best
        width += 1


def rollout_error(z_pred, z_true):
    """``E(t)`` (T, B); a non-finite prediction (diverged rollout) counts as ``inf``."""
    err = np.linalg.norm(z_pred - z_true, axis=-1) / np.linalg.norm(z_true, axis=-1)
    return np.where(np.isfinite(err), err, np.inf)


def error_band(err):
    """Median and 5/95 % percentiles over rollouts (axis 1); nearest-rank, so ``inf`` stays ``inf``."""
    return {
        k: np.percentile(err, p, axis=1, method="nearest")
        for k, p in (("median", 50), ("p05", 5), ("p95", 95))
    }


def _fit_and_roll(
    model,
    data,
    coords,
    starts,
    z_true,
    *,
    epochs,
    batch,
    lr,
    seed,
    rollout_duration,
    dt,
    progress,
    forces=None,
):
    """Train ``model`` on ``data`` = ((q, q̇, q̈[, Q]) train, (q, q̇, q̈_abs[, Q]) test) and roll it out from
    ``starts`` (relative angles) under constant ``forces`` (B, n) in the model's coordinates."""
    import torch

    from ros_lnn.training.trainer import train_acceleration
    from ros_lnn_lab.studies.rollouts import model_rollout

    train, test = data
    forced = len(train) == 4
    samples = dict(zip(("q", "qd", "qdd", "Q"), train))
    history = train_acceleration(
        model,
        samples,
        epochs=epochs,
        batch=batch,
        lr=lr,
        seed=seed,
        progress=progress,
        forced=forced,
    )
    tq, tqd, tqdd_abs = test[:3]
    with torch.no_grad():
        Q_test = torch.as_tensor(test[3]) if forced else None
        pred = model(torch.as_tensor(tq), torch.as_tensor(tqd), Q_test).numpy()
        extra = {}
        if hasattr(model, "vector_field"):  # HNN: how well ∂H/∂p matches the observed q̇ (its coordinates)
            qd_hat = model.vector_field(torch.as_tensor(tq), torch.as_tensor(tqd), Q_test)[0].numpy()
            extra["qd_nmse_test"] = float(np.mean((qd_hat - tqd) ** 2) / np.var(tqd))
        if coords == "relative":
            pred = np.cumsum(pred, -1)
        q0, qd0 = starts
        if coords == "absolute":
            q0, qd0 = to_absolute(q0, qd0)
        force = None if forces is None else torch.as_tensor(forces)
        traj = model_rollout(
            model, torch.as_tensor(q0), torch.as_tensor(qd0), rollout_duration, dt, "rk4", force
        ).numpy()
    n = q0.shape[-1]
    phi, phid = traj[..., :n], traj[..., n:]
    if coords == "relative":
        phi, phid = to_absolute(phi, phid)
    sq_err = np.sum((pred - tqdd_abs) ** 2, -1)
    return history, sq_err, rollout_error(np.concatenate([phi, phid], -1), z_true), extra


def _model_entry(model, history, sq_err, err, t, rollout_hz, rollout_duration, stride, width, extra=None):
    band = error_band(err)
    at = {
        f"E_at_{s:g}s": {k: float(v[min(len(t) - 1, int(round(s * rollout_hz)))]) for k, v in band.items()}
        for s in (1.0, 5.0, rollout_duration)
    }
    return {
        "width": width,
        "parameters": parameter_count(model),
        "train_seconds": history["seconds"],
        "acc_mse_train_final": history["loss"][-1],
        "acc_mse_test": float(np.mean(sq_err)),
        "acc_se_test_median": float(np.median(sq_err)),
        "diverged_rollouts": int(np.sum(~np.isfinite(err[-1]))),
        **at,
        **{f"E_{k}": v[::stride].tolist() for k, v in band.items()},
        **(extra or {}),
    }


def _matched_widths(n_links: int, tlnn_width: int, forced: bool = False) -> dict:
    """Every family's width: the TLNN's given, the others' matched to its parameter count."""
    widths = {"TLNN": tlnn_width}
    target = parameter_count(make_model("TLNN", n_links, tlnn_width, forced))
    for family in FAMILIES[1:]:
        widths[family] = matched_width(family, n_links, target, forced)
    return widths


def _result(n_links, train, test, fit: dict, **fields) -> dict:
    """The head of a study's result: the data's sizes, the training settings ``fit``, then ``fields``."""
    return {
        "n_links": n_links,
        "n_train_samples": len(train[0]),
        "n_test_samples": len(test[0]),
        "acc_variance_test": float(np.sum(np.var(test[2], 0))),
        **fit,
        **fields,
        "models": {},
    }


def _train_model(family, n_links, width, data, coords, starts, z_true, t, stride, fit, rollout, forces=None):
    """Seed, build, train and roll out one ``family`` model; ``(model, its result entry)``. ``fit``: epochs,
    batch, lr, seed; ``rollout``: (duration, rate in Hz); ``forces``: the rollouts' constant forces, for
    models that take ``Q`` as an input."""
    import torch

    rollout_duration, rollout_hz = rollout
    torch.manual_seed(fit["seed"])
    model = make_model(family, n_links, width, forces is not None)
    history, sq_err, err, extra = _fit_and_roll(
        model,
        data,
        coords,
        starts,
        z_true,
        **fit,
        rollout_duration=rollout_duration,
        dt=1.0 / rollout_hz,
        progress=None,
        forces=forces,
    )
    entry = _model_entry(model, history, sq_err, err, t, rollout_hz, rollout_duration, stride, width, extra)
    return model, entry


def _say(progress, label, r, rollout_duration):
    keys = [k for k in r if k.startswith("E_at_")]
    progress(
        f"{label}: {r['parameters']} parameters, {r['train_seconds']:.0f} s training, test q̈ MSE "
        f"{r['acc_mse_test']:.3g} (median {r['acc_se_test_median']:.3g}), "
        f"median E at 1/5/{rollout_duration:g} s "
        + " / ".join(f"{r[k]['median']:.3g}" for k in keys)
        + (f", {r['diverged_rollouts']} diverged" if r["diverged_rollouts"] else "")
    )


def study_chain(n_links: int, config: StudyConfig = DEFAULTS, *, models=MODELS, **settings) -> dict:
    """Train every model of ``models`` (names of :data:`MODELS`) on one chain and roll it out; ``config``:
    initial conditions (``trajectories``), their duration, epochs, the TLNN's width (``hidden[0]``),
    rollouts and their duration, the seed (the first), progress; ``settings``: those of
    :class:`ChainSettings`."""
    opts, chain, rng, (q0, qd0) = _start(n_links, config, settings)
    rollout_hz = opts.rollout_hz
    n_ic, duration, epochs, tlnn_width, seed = _sizes(config)
    n_rollouts, rollout_duration, progress = config.rollouts, config.rollout_duration, config.progress
    q, qd, qdd = integrate(chain, q0, qd0, duration, opts.rate_hz)  # (T, n_ic, n)
    n_train = int(round(0.7 * n_ic))
    flat = lambda x: x.reshape(-1, n_links)  # noqa: E731
    rel_train = [flat(x[:, :n_train]) for x in (q, qd, qdd)]
    rel_test = [flat(x[:, n_train:]) for x in (q, qd, qdd)]
    abs_test = to_absolute(*rel_test)
    data = {
        "relative": (rel_train, (rel_test[0], rel_test[1], abs_test[2])),
        "absolute": (list(to_absolute(*rel_train)), abs_test),
    }
    starts = opts.states(n_links, n_rollouts, rng)
    rq, rqd, _ = integrate(chain, *starts, rollout_duration, rollout_hz)
    z_true = np.concatenate(to_absolute(rq, rqd), -1)  # (T, B, 2n)
    stride = opts.stride
    t = np.arange(len(z_true)) / rollout_hz
    widths = _matched_widths(n_links, tlnn_width)
    fit = opts.fit(epochs, seed)
    result = _result(n_links, rel_train, abs_test, fit, n_rollouts=n_rollouts, t=t[::stride].tolist())
    for name in models:
        family, coords = name.split(" (")[0], name.split("(")[1].rstrip(")")
        shared = (starts, z_true, t, stride, fit, (rollout_duration, rollout_hz))
        _, r = _train_model(family, n_links, widths[family], data[coords], coords, *shared)
        result["models"][name] = r
        _say(progress, f"{n_links}-link {name}", r, rollout_duration)
    return result


#: The TLNN paper's 4-link example (its Fig. 6): absolute body angles and rates, constant generalised forces.
PAPER_EXAMPLE = {"phi": [-2.06, -0.08, 0.12, -0.36], "phid": [-0.14, 0.017, -0.019, 0.095], "Q": [0.05] * 4}


def joint_torques(Q_abs):
    """Joint torques (the chain's relative coordinates) doing the work of generalised forces ``Q_abs`` in
    absolute angles: ``q_rel = D φ`` gives ``Q_abs = Dᵀ τ``, so ``τ_j = Σ_{k ≥ j} Q_abs,k``."""
    return np.cumsum(np.asarray(Q_abs)[..., ::-1], -1)[..., ::-1]


def forced_study(
    n_links: int = 4,
    config: StudyConfig = DEFAULTS,
    *,
    force_range=0.1,
    example=PAPER_EXAMPLE,
    families=FAMILIES,
    **settings,
) -> dict:
    """The four families in absolute angles on an ``n_links`` chain under constant generalised forces:
    each trajectory (training and rollout) has its own ``Q`` uniform in ±``force_range`` (absolute-angle
    coordinates; the paper's ``Q = 0.05`` lies inside), the models take ``Q`` as an input; then the paper's
    example state rolled out under its ``Q``. ``config`` and ``settings`` as for :func:`study_chain`."""
    import torch

    opts, chain, rng, (q0, qd0) = _start(n_links, config, settings)
    rollout_hz = opts.rollout_hz
    n_ic, duration, epochs, tlnn_width, seed = _sizes(config)
    n_rollouts, rollout_duration, progress = config.rollouts, config.rollout_duration, config.progress
    Q_ic = rng.uniform(-force_range, force_range, (n_ic, n_links))
    q, qd, qdd = integrate(chain, q0, qd0, duration, opts.rate_hz, forces=joint_torques(Q_ic))
    Q = np.broadcast_to(Q_ic, q.shape)
    n_train = int(round(0.7 * n_ic))
    flat = lambda x: np.ascontiguousarray(x).reshape(-1, n_links)  # noqa: E731
    train = [*to_absolute(*(flat(x[:, :n_train]) for x in (q, qd, qdd))), flat(Q[:, :n_train])]
    test = [*to_absolute(*(flat(x[:, n_train:]) for x in (q, qd, qdd))), flat(Q[:, n_train:])]
    starts = opts.states(n_links, n_rollouts, rng)
    Q_roll = rng.uniform(-force_range, force_range, (n_rollouts, n_links))
    rq, rqd, _ = integrate(chain, *starts, rollout_duration, rollout_hz, forces=joint_torques(Q_roll))
    z_true = np.concatenate(to_absolute(rq, rqd), -1)
    ex = None
    if example is not None and len(example["phi"]) == n_links:
        ex_start: tuple[np.ndarray, np.ndarray] = to_relative(
            np.asarray([example["phi"]], float), np.asarray([example["phid"]], float)
        )
        eq, eqd, _ = integrate(
            chain,
            *ex_start,
            rollout_duration,
            rollout_hz,
            forces=joint_torques(np.asarray([example["Q"]], float)),
        )
        ex = (ex_start, np.concatenate(to_absolute(eq, eqd), -1), np.asarray([example["Q"]], float))
    stride = opts.stride
    t = np.arange(len(z_true)) / rollout_hz
    widths = _matched_widths(n_links, tlnn_width, forced=True)
    fit = opts.fit(epochs, seed)
    head = {"force_range": force_range} | fit
    t_out = t[::stride].tolist()
    result = _result(n_links, train, test, head, n_rollouts=n_rollouts, t=t_out, example=example)
    if ex is not None:
        result["example_truth_phi"] = ex[1][::stride, 0, :n_links].tolist()
        phi_dd = to_absolute(
            *integrate(chain, *ex[0], rollout_duration, rollout_hz, forces=joint_torques(ex[2]))
        )[2]
        result["example_max_abs_phidd"] = float(np.abs(phi_dd).max())
        result["train_max_abs_phidd"] = float(np.abs(train[2]).max())
    for family in families:
        name = f"{family} (absolute)"
        shared = (starts, z_true, t, stride, fit, (rollout_duration, rollout_hz))
        model, r = _train_model(family, n_links, widths[family], (train, test), "absolute", *shared, Q_roll)
        result["models"][name] = r
        if ex is not None:
            (eq0, eqd0), z_ex, Q_ex = ex
            with torch.no_grad():
                from ros_lnn_lab.studies.rollouts import model_rollout

                phi0, phid0 = to_absolute(eq0, eqd0)
                traj = model_rollout(
                    model,
                    torch.as_tensor(phi0),
                    torch.as_tensor(phid0),
                    rollout_duration,
                    1.0 / rollout_hz,
                    "rk4",
                    torch.as_tensor(Q_ex),
                ).numpy()
            e = rollout_error(traj, z_ex)[:, 0]
            r["example_E"] = e[::stride].tolist()
            r["example_phi"] = traj[::stride, 0, :n_links].tolist()
            for s in (1.0, 5.0, rollout_duration):
                r[f"example_E_at_{s:g}s"] = float(e[min(len(e) - 1, int(round(s * rollout_hz)))])
        _say(progress, f"{n_links}-link forced {name}", r, rollout_duration)
    return result


def plot_chain_study(result: dict, plot_dir, suffix: str = "") -> str:
    from pathlib import Path

    plt = pyplot()

    Path(plot_dir).mkdir(parents=True, exist_ok=True)
    t = np.asarray(result["t"])[1:]  # E(0) = 0: every rollout starts on the true state
    colors = dict(zip(FAMILIES, ("C0", "C1", "C3", "C2")))
    coordinates = [c for c in COORDINATES if any(name.endswith(f"({c})") for name in result["models"])]
    fig, axes = plt.subplots(
        1, len(coordinates), figsize=(5.5 * len(coordinates), 4.2), sharey=True, squeeze=False
    )
    for ax, coords in zip(axes[0], coordinates):
        for name, r in result["models"].items():
            if not name.endswith(f"({coords})"):
                continue
            color = colors[name.split(" ")[0]]
            ax.semilogy(
                t, np.clip(r["E_median"][1:], 1e-6, 1e3), color=color, label=f"{name}, {r['parameters']} par."
            )
            ax.fill_between(
                t,
                np.clip(r["E_p05"][1:], 1e-6, 1e3),
                np.clip(r["E_p95"][1:], 1e-6, 1e3),
                color=color,
                alpha=0.15,
            )
        ax.set_xlabel("t [s]")
        ax.set_title(f"{result['n_links']}-link chain{suffix}, {coords} angles")
        ax.legend(fontsize=8)
    axes[0, 0].set_ylabel("E(t) = |ẑ − z| / |z|  (median, 5–95 %)")
    tag = "_forced" if suffix else ""
    return save_figure(fig, Path(plot_dir) / f"tlnn_{result['n_links']}link{tag}_rollout_error.png")


def plot_example(result: dict, plot_dir) -> str:
    """The paper's Fig. 6: each body angle of the example, truth and every model, and E(t)."""
    from pathlib import Path

    plt = pyplot()

    t = np.asarray(result["t"])
    truth = np.asarray(result["example_truth_phi"])
    n = truth.shape[1]
    colors = dict(zip(FAMILIES, ("C0", "C1", "C3", "C2")))
    fig, axes = plt.subplots(1, n + 1, figsize=(3.6 * (n + 1), 3.6))
    for j in range(n):
        axes[j].plot(t, truth[:, j], "k", lw=2, label="truth")
        for name, r in result["models"].items():
            phi = np.asarray(r["example_phi"])[:, j]
            axes[j].plot(
                t,
                np.where(np.abs(phi) < 50, phi, np.nan),
                color=colors[name.split(" ")[0]],
                lw=1,
                label=name.split(" ")[0],
            )
        axes[j].set_title(f"φ_{j + 1} [rad]")
        axes[j].set_xlabel("t [s]")
    axes[0].legend(fontsize=7)
    for name, r in result["models"].items():
        axes[n].semilogy(
            t[1:],
            np.clip(r["example_E"][1:], 1e-6, 1e3),
            color=colors[name.split(" ")[0]],
            label=name.split(" ")[0],
        )
    axes[n].set_title("E(t)")
    axes[n].set_xlabel("t [s]")
    return save_figure(fig, Path(plot_dir) / f"tlnn_{n}link_paper_example.png")


def run_study(config: StudyConfig = DEFAULTS, **kw) -> dict:
    """:func:`study_chain` for each of ``config.links``, plotted into ``config.output``; ``kw``: its own
    settings."""
    results = {}
    for n in config.links:
        results[n] = study_chain(n, config, **kw)
        if config.output:
            results[n]["plot"] = plot_chain_study(results[n], config.output)
    return results


def run_forced_study(config: StudyConfig = DEFAULTS, n_links: int = 4, **kw) -> dict:
    """:func:`forced_study`, plotted into ``config.output``; ``kw``: its own settings."""
    result = forced_study(n_links, config, **kw)
    if config.output:
        result["plots"] = [plot_chain_study(result, config.output, suffix=" under constant forces")]
        if "example_truth_phi" in result:
            result["plots"].append(plot_example(result, config.output))
    return result


def _row(name, r, horizon):
    e = lambda k: f"{r[k]['median']:.3g} [{r[k]['p05']:.2g}, {r[k]['p95']:.2g}]"  # noqa: E731
    div = f" ({r['diverged_rollouts']} diverged)" if r["diverged_rollouts"] else ""
    if "qd_nmse_test" in r:
        name = f"{name} (∂H/∂p vs q̇ nMSE {r['qd_nmse_test']:.2g})"
    return (
        f"| {name} | {r['parameters']} | {r['acc_mse_test']:.3g} / {r['acc_se_test_median']:.3g} | "
        f"{e('E_at_1s')} | {e('E_at_5s')} | {e(f'E_at_{horizon:g}s')}{div} | {r['train_seconds']:.0f} |"
    )


def format_table(results: dict) -> str:
    """Markdown: per chain and model, test q̈ MSE (mean / median) and median [5 %, 95 %] of E(t)."""
    lines = []
    for n, res in results.items():
        horizon = res["t"][-1]
        lines += [
            f"\n{n}-link chain ({res['n_train_samples']} training samples, {res['epochs']} epochs, "
            f"{res['n_rollouts']} rollouts; test q̈ variance {res['acc_variance_test']:.3g})\n",
            f"| model | parameters | test q̈ MSE mean / median | E(1 s) | E(5 s) | E({horizon:g} s) | "
            "training s |",
            "| --- | --- | --- | --- | --- | --- | --- |",
        ]
        lines += [_row(name, r, horizon) for name, r in res["models"].items()]
    return "\n".join(lines)


def format_forced_table(result: dict) -> str:
    horizon = result["t"][-1]
    lines = [
        f"{result['n_links']}-link chain under constant forces |Q_i| ≤ {result['force_range']:g} "
        f"({result['n_train_samples']} training samples, {result['epochs']} epochs, {result['n_rollouts']} "
        "rollouts)\n",
        f"| model | parameters | test q̈ MSE mean / median | E(1 s) | E(5 s) | E({horizon:g} s) "
        "| training s | "
        f"paper example E(1 s) / E(5 s) / E({horizon:g} s) |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for name, r in result["models"].items():
        ex = (
            " / ".join(f"{r[f'example_E_at_{s:g}s']:.3g}" for s in (1.0, 5.0, horizon))
            if "example_E" in r
            else "—"
        )
        lines.append(_row(name, r, horizon) + f" {ex} |")
    return "\n".join(lines)


__all__ = [
    "FAMILIES",
    "COORDINATES",
    "MODELS",
    "PAPER_EXAMPLE",
    "ChainSettings",
    "rod_chain",
    "parameter_count",
    "make_model",
    "matched_width",
    "rollout_error",
    "error_band",
    "joint_torques",
    "study_chain",
    "forced_study",
    "plot_chain_study",
    "plot_example",
    "run_study",
    "run_forced_study",
    "format_table",
    "format_forced_table",
]
