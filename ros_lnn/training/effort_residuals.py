"""Training data of the DAC's learned port: what an arm's certain model misses, from its recordings.

A recording holds joint states ``q, q̇`` with the efforts ``u`` the joints received (the ``effort``
field of ``joint_states`` as a robot driver or ``dac_chain_sim`` publishes it, or the controller's
effort topic). The bag ingest (:func:`ros_lnn.bags.dataset.load_bag_dataset`: repairs, gaps, jitter,
Savitzky–Golay ``q̈``) gives ``q, q̇, q̈, u`` per trial; the certain model (the URDF the controller runs,
Pinocchio's ``rnea``) gives ``τ_model = H q̈ + C q̇ + g − u_passive``, and the target is

    τ_res = u − τ_model(q, q̇, q̈).

Everything the description lacks ends up in τ_res: friction, a payload, rotor inertia, wrong link
parameters — but only what ``(q, q̇, q̈)`` determines, which is why the model takes ``q̈`` (at run time the
law's reference acceleration) and not the efforts themselves (they are its output).

Effort timing (``dac_residual.effort_timing``): ``held`` (default) — the effort in the message stamped
``t_k`` acted over the step before it, as a simulator or a driver echoing its held command reports it;
the effort at ``t_k`` is then the mean of the steps before and after, ``(e_k + e_{k+1}) / 2``, the
value that pairs with a centred ``q̈`` (exact to second order in the step for a central difference,
``savgol_window: 3``). ``sampled``: the effort was measured at ``t_k`` (a torque sensor).

Config (``--config``, e.g. ``config/dac_residual.yaml``): the ``bag:`` mapping (every joint listed as
``free_joints``, ``free_effort`` the effort source) and a ``dac_residual:`` section with ``model`` (the
certain model, URDF or YAML, relative to the config file), ``effort_timing`` and ``trim`` (samples
dropped at each trial's ends, where the derivative is one-sided; default half the window + 1).
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import ConfigError, DataError
from ..families import Shape
from ..physics.multibody.regressor import DEFAULT_COULOMB_VELOCITY
from .spec import RunSpec

SECTION = "dac_residual"
TIMINGS = ("held", "sampled")
DEFAULT_CONFIG = "dac_residual.yaml"


def shipped_config(name: str = DEFAULT_CONFIG) -> Path:
    """A config file shipped with the package, config/<name> (:mod:`ros_lnn.shipped`)."""
    from ..shipped import shipped_path

    return shipped_path("config", name)


def residual_settings(config) -> dict:
    """The ``dac_residual:`` section: ``model`` (resolved path), ``effort_timing``, ``trim``,
    ``regressor_fit`` (default true) and ``coulomb_velocity`` (default 0.05)."""
    from ..files import load_yaml

    path = Path(config)
    doc = load_yaml(path, "config") or {}
    section = doc.get(SECTION) if isinstance(doc, dict) else None
    if not isinstance(section, dict) or not section.get("model"):
        raise ConfigError(
            f"{path}: no '{SECTION}:' section naming the certain model (model: <URDF or YAML>); "
            f"see config/{DEFAULT_CONFIG}"
        )
    known = ("model", "effort_timing", "trim", "regressor_fit", "coulomb_velocity")
    unknown = sorted(set(section) - set(known))
    if unknown:
        raise ConfigError(
            f"{path}: unknown {SECTION} setting(s) {', '.join(unknown)} (known: {', '.join(known)})"
        )
    model = Path(section["model"])
    model = model if model.is_absolute() else path.parent / model
    timing = section.get("effort_timing", "held")
    if timing not in TIMINGS:
        raise ConfigError(f"{path}: {SECTION}.effort_timing '{timing}': choose {' or '.join(TIMINGS)}")
    trim = section.get("trim")
    if trim is not None and (not isinstance(trim, int) or trim < 0):
        raise ConfigError(f"{path}: {SECTION}.trim must be a whole number of samples >= 0")
    fit = section.get("regressor_fit", True)
    if not isinstance(fit, bool):
        raise ConfigError(f"{path}: {SECTION}.regressor_fit must be true or false, not {fit!r}")
    vs = section.get("coulomb_velocity", DEFAULT_COULOMB_VELOCITY)
    if isinstance(vs, bool) or not isinstance(vs, (int, float)) or not math.isfinite(vs) or vs <= 0:
        raise ConfigError(f"{path}: {SECTION}.coulomb_velocity must be a number > 0 (rad/s), not {vs!r}")
    return {
        "model": model,
        "effort_timing": timing,
        "trim": trim,
        "regressor_fit": fit,
        "coulomb_velocity": float(vs),
    }


def certain_model(path: Path):
    """``(PinocchioModel, model, sha256)`` of the certain model file."""
    from ..physics.multibody.build import load_model
    from ..physics.multibody.pin import PinocchioModel

    model = load_model(path)
    return PinocchioModel(model), model, hashlib.sha256(Path(path).read_bytes()).hexdigest()


def model_efforts(pmodel, q, qd, qdd) -> np.ndarray:
    """``H q̈ + C q̇ + g − u_passive`` of the certain model for rows of ``(q, q̇, q̈)`` (model order)."""
    import pinocchio as pin

    data = pmodel.pin.createData()
    out = np.empty_like(q)
    for k in range(len(q)):
        out[k] = pin.rnea(pmodel.pin, data, q[k], qd[k], qdd[k])
    if pmodel.has_passive:
        out -= pmodel.passive_efforts(q, qd)
    return out


def trial_samples(trial, pmodel, order, timing: str, trim: int) -> dict:
    """``q, q̇, q̈`` (configured joint order) and ``Q = τ_res`` of one trial, edges trimmed."""
    q, qd, qdd, u = (np.asarray(getattr(trial, k), float) for k in ("q", "qd", "qdd", "Q"))
    if timing == "held":
        u = np.vstack([0.5 * (u[:-1] + u[1:]), np.full((1, u.shape[1]), np.nan)])
    keep = np.zeros(len(q), dtype=bool)
    keep[trim : len(q) - trim] = True
    keep &= np.isfinite(q).all(1) & np.isfinite(qd).all(1) & np.isfinite(qdd).all(1) & np.isfinite(u).all(1)
    q, qd, qdd, u = q[keep], qd[keep], qdd[keep], u[keep]
    inv = np.argsort(order)
    tau = u - model_efforts(pmodel, q[:, order], qd[:, order], qdd[:, order])[:, inv]
    return {"t": np.asarray(trial.t, float)[keep], "q": q, "qd": qd, "qdd": qdd, "Q": tau}


def regressor_stage(pmodel, settings: dict, order, train: dict, test: dict) -> str:
    """Fit the linear-in-parameters part of τ_res on the training samples
    (:mod:`ros_lnn.physics.multibody.regressor`) and leave the network the rest: each side's ``Q``
    becomes the remainder, ``Q_total`` keeps the target and ``Q_fit`` the fit; ``train`` carries the
    fit's record (``regressor_fit``) for the model. Returns the progress line."""
    from ..physics.multibody.regressor import fit_regressor_port

    path = Path(settings["model"])
    fmt = "urdf" if path.suffix.lower() in (".urdf", ".xml") else "yaml"
    inv = np.argsort(order)
    fit = fit_regressor_port(
        pmodel,
        train["q"][:, order],
        train["qd"][:, order],
        train["qdd"][:, order],
        train["Q"][:, order],
        settings["coulomb_velocity"],
        path.read_text(),
        fmt,
    )
    errors = []
    for side in (train, test):
        side["Q_total"] = side["Q"]
        side["Q_fit"] = fit.batch(side["q"][:, order], side["qd"][:, order], side["qdd"][:, order])[:, inv]
        side["Q"] = side["Q_total"] - side["Q_fit"]
        spread = np.maximum(side["Q_total"].std(0), 1e-12)
        errors.append(np.sqrt(np.mean(side["Q"] ** 2, axis=0)) / spread)
    train["regressor_fit"] = fit.to_dict()
    return (
        f"regressor fit (inertial parameters, rotor inertia, friction; {fit.theta.size} parameters): "
        f"τ_res left over / spread per joint train [{', '.join(f'{v:.3g}' for v in errors[0])}], "
        f"validation [{', '.join(f'{v:.3g}' for v in errors[1])}]; the network learns the rest"
    )


def _stack(parts: list[dict], names: list[str]) -> dict:
    keys = ("t", "q", "qd", "qdd", "Q")
    out: dict[str, Any]  # arrays, and the names
    out = {k: np.concatenate([p[k] for p in parts]) if parts else np.zeros((0,)) for k in keys}
    out["trial"] = (
        np.concatenate([np.full(len(p["q"]), i) for i, p in enumerate(parts)]) if parts else np.zeros(0, int)
    )
    out["names"] = list(names)
    return out


def residual_data(spec: RunSpec, say: Callable[[str], None] = print) -> dict:
    """The run's samples, every trial of the bags split by trial as the mapping says: the fields of
    :class:`ros_lnn.training.sources.RunData`."""
    from ..bags.dataset import describe, load_bag_dataset
    from ..bags.mapping import mapping_from_options
    from ..physics.datasets import split_record

    config = Path(spec.bag_config) if spec.bag_config else shipped_config()
    settings = residual_settings(config)
    mapping = mapping_from_options(str(config), dict(spec.bag_mapping))
    pmodel, model, sha = certain_model(settings["model"])
    joints = list(mapping.free_joints)
    model_joints = list(pmodel.joint_names)
    if sorted(joints) != sorted(model_joints):
        raise DataError(
            f"{config}: bag.free_joints {joints} must list the certain model's joints {model_joints} "
            f"({settings['model']})"
        )
    if mapping.servo_joints:
        raise DataError(
            f"{config}: bag.servo_joints must be empty for {SECTION} (every joint takes an effort)"
        )
    if mapping.free_effort in ("zero", "none", ""):
        raise DataError(
            f"{config}: bag.free_effort is '{mapping.free_effort}'; name the effort source "
            "(joint_states or the effort command topic)"
        )
    order = np.array([joints.index(j) for j in model_joints])
    ds = load_bag_dataset(list(spec.bags), mapping)
    for line in describe(ds.summary):
        say(line)
    trim = settings["trim"] if settings["trim"] is not None else mapping.savgol_window // 2 + 1
    sides = []
    for trials in (ds.train, ds.validation):
        parts = [trial_samples(t, pmodel, order, settings["effort_timing"], trim) for t in trials]
        sides.append(_stack(parts, [t.name for t in trials]))
    train, test = sides
    if len(train["q"]) < 10 or len(test["q"]) < 1:
        raise DataError(
            f"{', '.join(map(str, spec.bags))}: too few samples with efforts for training "
            f"({len(train['q'])}) and validation ({len(test['q'])}); record longer or more runs"
        )
    if settings["regressor_fit"]:
        say(regressor_stage(pmodel, settings, order, train, test))
    kinds = dict(zip(pmodel.joint_names, pmodel.kinds))
    units = tuple("m" if kinds[j] == "prismatic" else "rad" for j in joints)
    system = mapping.system or model.name
    shape = Shape(system, tuple(joints), (), units)
    source = {
        "kind": "rosbag",
        "bags": ds.summary["bags"],
        "mapping": ds.summary["mapping"],
        "certain_model": {"name": model.name, "file": settings["model"].name, "sha256": sha},
        "effort_timing": settings["effort_timing"],
        "trim": trim,
    }
    split = split_record(train, test, mapping.seed)
    rms = np.sqrt(np.mean(train.get("Q_total", train["Q"]) ** 2, axis=0))
    summary = (
        f"data: {len(ds.trials)} trials (rosbag) against the certain model '{model.name}'; train "
        f"{split['n_train']} samples of {split['train_trials']}; validation {split['n_test']} samples of "
        f"{split['test_trials']}; τ_res RMS per joint [{', '.join(f'{v:.3g}' for v in rms)}]"
    )
    return dict(
        train=train,
        test=test,
        split=split,
        source=source,
        shape=shape,
        summary=summary,
        with_qe=False,
        test_trials=tuple(test["names"]),
    )


def write_residual_report(
    directory, history: dict, model, test: dict, metrics: dict, provenance: dict, joints
) -> dict:
    """Loss curves, predicted against target τ_res on the validation samples, metrics.json."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import torch

    from .report import HISTORY_KEYS, plot_losses, write_metrics

    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    files = [plot_losses(history, directory / "loss_curves.png").name]
    if len(test["q"]):
        with torch.no_grad():
            args = (torch.as_tensor(np.asarray(test[k]), dtype=torch.float64) for k in ("q", "qd", "qdd"))
            pred = model(*args).numpy()
        target = np.asarray(test.get("Q_total", test["Q"]))
        if not getattr(model, "network_enabled", True):
            pred = np.zeros_like(pred)
        if "Q_fit" in test:
            pred = pred + np.asarray(test["Q_fit"])
        n = pred.shape[1]
        fig, axes = plt.subplots(n, 1, figsize=(10, 1.8 * n), sharex=True, squeeze=False)
        for j in range(n):
            ax = axes[j, 0]
            ax.plot(target[:, j], "k", lw=0.8, label="target")
            ax.plot(pred[:, j], "r--", lw=0.8, label="learned")
            ax.set_ylabel(f"{list(joints)[j]}\nτ_res")
        axes[0, 0].legend(loc="upper right")
        axes[-1, 0].set_xlabel("validation sample")
        fig.tight_layout()
        fig.savefig(directory / "tau_res_validation.png", dpi=100)
        plt.close(fig)
        files.append("tau_res_validation.png")
    keys = tuple(k for k in HISTORY_KEYS if k != "skipped")
    return write_metrics(directory, metrics, history, provenance, files, keys)


__all__ = [
    "residual_data",
    "residual_settings",
    "model_efforts",
    "trial_samples",
    "write_residual_report",
    "shipped_config",
]
