"""ServoLNN (the ServoLNN paper, docs/papers.md) and DeLaN: one network, ``M = L Lᵀ + ε I`` and ``V``
of ``q``, trained by the inverse/forward/power losses of docs/EQUATIONS.md §1 on trials with free and
servo joints. DeLaN is a ServoLNN without servo joints, trained by the inverse and forward losses (the
DeLaN paper's setup); its checkpoints and ONNX metadata say ``servo_lnn``."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import ConfigError
from .base import (
    BAG_OPTIONS,
    SIMULATION_OPTIONS,
    TRIALS,
    Family,
    Given,
    Network,
    Shape,
    hooks,
    refuse_links_without_chain,
)

if TYPE_CHECKING:
    from ..inference.metadata import ModelMetadata
    from ..models.servo_lnn import ServoLNN

MODEL_FAMILY = "servo_lnn"
#: The canonical command line names these run options (``with_qe`` as --with-qe/--without-qe).
COMMAND_OPTIONS = (
    "with_qe",
    "epochs",
    "batch",
    "lr",
    "weight_decay",
    "seed",
    "n_train",
    "split_seed",
    "test_trials",
    "activation",
    "diag_activation",
    "epsilon",
    "device",
    "dtype",
    "out",
    "export_dtype",
)


def build(shape: Shape, net: Network) -> ServoLNN:
    from ..models.servo_lnn import ServoLNN

    joints = shape.coordinate_names
    units = list(shape.coordinate_units) or ["rad"] * len(joints)
    kinds = list(shape.joint_kinds) or ["revolute"] * len(joints)
    cyclic = [j for j, k in zip(joints, kinds) if k == "cyclic"]
    angles = [j for j, k in zip(joints, kinds) if k == "continuous"]
    if net.angle_features:
        angles += [j for j, u in zip(joints, units) if u == "rad" and j not in cyclic and j not in angles]
    epsilon: dict[str, Any] = {} if net.epsilon is None else {"epsilon": net.epsilon}  # None: the default
    extra: dict[str, Any] = {"cyclic_joints": cyclic} if cyclic else {}
    if net.dissipation:
        extra["dissipation"] = net.dissipation
    if net.prior:  # the rigid body's M is positive definite: no ε I added to the residual
        extra["prior"] = net.prior
        epsilon = {"epsilon": 0.0}
    return ServoLNN(
        list(shape.free_joints),
        list(shape.servo_joints),
        hidden=list(net.hidden),
        activation=net.activation,
        diag_activation=net.diag_activation,
        angle_joints=[j for j in joints if j in angles],
        coordinate_units=units,
        **epsilon,
        **extra,
    )


def from_config(config: dict) -> ServoLNN:
    from ..models.servo_lnn import ServoLNN

    return ServoLNN.from_config(config)


def normalise(model: ServoLNN, train: dict) -> None:
    from ..models.normalisation import normalisation

    model.set_normalisation(*normalisation(train["q"]))
    model.set_residual_scale(train["q"])


def servo_losses(model: ServoLNN, with_qe: bool) -> tuple[str, ...]:
    """The paper's loss set for what the data hold (:func:`ros_lnn.models.losses.select_losses`)."""
    from ..models.losses import select_losses

    return select_losses(with_qe, model.n_e)


def delan_losses(model: ServoLNN, with_qe: bool) -> tuple[str, ...]:
    return ("inv", "fwd")


def evaluate(model: ServoLNN, samples: dict) -> dict:
    """Accuracy on held-out samples (model order; ``Q_e`` is *not* used as an input):
    ``qdd_f_nmse`` = mean (q̈̂_f − q̈_f)² / variance of q̈_f; ``Q_e_rel_rms`` = rms(Q̂_e − Q_e) / rms(Q_e)
    (forward mode, as the estimator runs); ``M_rel_err`` = rms‖M̂ − M‖_F / rms‖M‖_F;
    ``V_rel_err`` and ``E_rel_err`` = rms of the error after removing its mean (V is defined up to a
    constant) over the standard deviation of the truth; per trial ``qdd_f_nmse``."""
    import torch

    dev = next(model.parameters()).device
    dt = next(model.parameters()).dtype
    t = {k: torch.as_tensor(np.asarray(samples[k]), device=dev, dtype=dt) for k in ("q", "qd", "qdd", "Q")}
    n_f = model.n_f
    with torch.no_grad():
        out = model(t["q"], t["qd"], t["qdd"][:, n_f:], t["Q"][:, :n_f])
        inv = model.inverse(t["q"], t["qd"], t["qdd"])

    def get(x):
        return x.detach().cpu().double().numpy()

    qdd_f, qdd_f_hat = np.asarray(samples["qdd"])[:, :n_f], get(out["qdd"])[:, :n_f]
    res: dict[str, Any] = {"qdd_f_nmse": float(np.mean((qdd_f_hat - qdd_f) ** 2) / np.var(qdd_f))}
    # what the data do not hold (a bag: no Q_e, no truth of M, V, E) is left out, not reported as NaN
    Q = np.asarray(samples["Q"])
    if model.n_e and np.isfinite(Q[:, n_f:]).all():
        Q_e = Q[:, n_f:]
        rms = np.sqrt(np.mean(Q_e**2))
        res["Q_e_rel_rms"] = float(np.sqrt(np.mean((get(out["Q_e"]) - Q_e) ** 2)) / rms)
        res["Q_e_rel_rms_inverse"] = float(np.sqrt(np.mean((get(inv["Q_e"]) - Q_e) ** 2)) / rms)
    if np.isfinite(Q[:, :n_f]).all():
        res["Q_f_rms_inverse"] = float(np.sqrt(np.mean((get(inv["Q"])[:, :n_f] - Q[:, :n_f]) ** 2)))
    if "M" in samples and np.isfinite(samples["M"]).all():
        M = np.asarray(samples["M"])
        res["M_rel_err"] = float(
            np.sqrt(np.mean(np.sum((get(out["M"]) - M) ** 2, (-1, -2))) / np.mean(np.sum(M**2, (-1, -2))))
        )
    for key in ("V", "E"):
        if key in samples and np.isfinite(samples[key]).all():
            truth = np.asarray(samples[key])
            err = get(out[key]) - truth
            res[f"{key}_rel_err"] = float(np.std(err) / np.std(truth))
    if "trial" in samples and "names" in samples:
        trial = np.asarray(samples["trial"])
        per = {}
        for i in np.unique(trial):
            sel = trial == i
            per[str(int(i))] = float(
                np.mean((qdd_f_hat[sel] - qdd_f[sel]) ** 2) / max(np.var(qdd_f[sel]), 1e-12)
            )
        res["qdd_f_nmse_per_trial"] = per
    return res


def metadata(model: ServoLNN, shape: Shape, **fields: Any) -> ModelMetadata:
    from ..models.export import default_metadata

    return default_metadata(model, **fields)


def export(
    model: ServoLNN,
    path: str | Path,
    metadata: ModelMetadata,
    dtype: str = "float32",
    exporter: str = "dynamo",
) -> Path:
    from ..models.export import export_onnx

    return export_onnx(model, path, metadata, dtype=dtype, dynamo=exporter == "dynamo")


def test_summary(metrics: dict) -> str:
    """The ``test: ...`` line; quantities the data do not hold are left out. When no test recording
    was given, the line says the figure is the in-distribution validation's."""
    where = metrics.get("evaluated_on", "test trials")
    kind = where.split("(")[0].strip()
    head = "test" if where.startswith("test") else f"validation (in-distribution, {kind})"
    parts = [f"{head}: q̈_f nMSE {metrics['qdd_f_nmse']:.2e}"]
    for key, label in (
        ("Q_e_rel_rms", "Q_e rel rms"),
        ("M_rel_err", "M rel err"),
        ("V_rel_err", "V rel err"),
        ("E_rel_err", "E rel err"),
    ):
        if key in metrics:
            parts.append(f"{label} {metrics[key]:.2%}")
    line = ", ".join(parts)
    if not where.startswith("test"):
        line += "; no test recording: pass --test-bag for a held-out figure"
    return line


def servo_lnn_rules(options: Mapping[str, Any], given: Given) -> None:
    refuse_links_without_chain(options, given)
    if any(given(d) for d in SIMULATION_OPTIONS):
        raise ConfigError(
            "--trajectories/--duration/--links are for the simulated zoo data; "
            "--model servo_lnn trains on the crane trials (--data) or bags (--bag)"
        )


def delan_rules(options: Mapping[str, Any], given: Given) -> None:
    if any(given(d) for d in BAG_OPTIONS):
        raise ConfigError(
            "--model delan does not read bags; a bag without servo joints trains a DeLaN "
            "with --model servo_lnn --bag ..."
        )
    if options["system"] == "chain" and options["data"]:
        raise ConfigError(
            "--model delan --system chain simulates its data; --data is the DeLaN character "
            "file of --system delan_character"
        )


def no_servo_joints(shape: Shape) -> None:
    if shape.servo_joints:
        raise ConfigError(
            f"--model delan needs data without servo joints, these have {list(shape.servo_joints)}; "
            "use --model servo_lnn"
        )


_COMMON: dict[str, Any] = dict(
    model_family=MODEL_FAMILY,
    data=TRIALS,
    monitor="qdd_f_nmse",
    skip_non_finite=False,
    exporters=("dynamo", "torchscript"),
    **hooks(globals()),
)

#: The run options both ServoLNN families train with: the papers' 10 000 epochs, weight decay 1e-5, float32,
#: a progress line every 500 epochs and a validation every 2000.
_SCHEDULE: dict[str, Any] = dict(
    epochs=10_000, weight_decay=1e-5, dtype="float32", log_every=500, val_every=2000
)

#: The ServoLNN paper's setup on the crane (its schedule: 10 000 epochs, batch 2048, lr 1e-4).
SERVO_LNN = Family(
    name="servo_lnn",
    systems=("crane",),
    losses=servo_losses,
    command_options=COMMAND_OPTIONS,
    check_options=servo_lnn_rules,
    defaults=dict(
        _SCHEDULE,
        batch=2048,
        lr=1e-4,
        hidden=(64,),
        epsilon=0.01,
        n_train=4096,
    ),
    **_COMMON,
)

#: DeLaN on its character data (the schedule of ``ros-lnn bench delan``) or a simulated chain.
DELAN = Family(
    name="delan",
    systems=("delan_character", "chain"),
    losses=delan_losses,
    command_options=tuple(o for o in COMMAND_OPTIONS if o != "with_qe"),
    check_options=delan_rules,
    check_shape=no_servo_joints,
    defaults=dict(
        _SCHEDULE,
        batch=512,
        lr=5e-4,
        hidden=(64, 64),
        epsilon=1e-3,
        trajectories=20,
        duration=5.0,
        links=2,
    ),
    **_COMMON,
)

__all__ = ["SERVO_LNN", "DELAN", "MODEL_FAMILY", "evaluate"]
