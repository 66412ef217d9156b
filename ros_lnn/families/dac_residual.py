"""``ros-lnn train --model dac_residual``: the learned port of data-assisted control.

Trained on an arm's recordings (``--bag``, a config with the ``bag:`` mapping and the certain model:
``config/dac_residual.yaml``); the targets are the joint efforts the certain model misses,
``τ_res = u − [H q̈ + C q̇ + g]`` (:mod:`ros_lnn.training.effort_residuals`), and the model is
:class:`ros_lnn.models.dac_residual.DacResidual`. The exported graph ``(q, qd, qdd) -> tau_res`` is
loaded by ``dac_controller`` (``residual_model:=``) through :mod:`ros_lnn.inference.residual`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import ConfigError
from .base import EFFORT_RESIDUALS, Family, Given, Network, Shape, graph_writer, hooks, refuse_given

if TYPE_CHECKING:
    from ..inference.metadata import ModelMetadata
    from ..models.dac_residual import DacResidual

NAME = "dac_residual"
#: Float64 training: the residual has to be right to a fraction of a percent where the arm is light
#: (on the demo arm 0.01 N m at the wrist moves the tool by a centimetre under the default gains).
DEFAULTS = dict(epochs=300, batch=256, lr=1e-3, weight_decay=0.0, hidden=(128, 128), dtype="float64")
#: Options of the other families that make no sense here.
NOT_HERE = (
    "data",
    "with_qe",
    "test_trials",
    "diag_activation",
    "epsilon",
    "angle_features",
    "links",
    "trajectories",
    "duration",
    "exporter",
    "servo_topic",
    "servo_type",
    "servo_joints",
    "servo_effort",
)
COMMAND_OPTIONS = ("epochs", "batch", "lr", "seed", "activation", "dtype", "out", "export_dtype")


def build(shape: Shape, net: Network) -> DacResidual:
    from ..models.dac_residual import DacResidual

    revolute = [unit != "m" for unit in shape.coordinate_units] or None
    return DacResidual(
        len(shape.coordinate_names),
        hidden=net.hidden or DEFAULTS["hidden"],
        activation=net.activation,
        revolute=revolute,
    )


def from_config(config: dict) -> DacResidual:
    from ..models.dac_residual import from_config as build_from_config

    return build_from_config(config)


def normalise(model: DacResidual, train: dict) -> None:
    """Scales from the samples the network learns (the regressor fit's remainder when there is one);
    the bound ``tau_max`` and the fit itself from the whole residual."""
    import torch

    model.set_scales(train["q"], train["qd"], train["qdd"], train["Q"])
    if "regressor_fit" in train:
        model.regressor_fit = dict(train["regressor_fit"])
        total = torch.as_tensor(np.asarray(train["Q_total"]), dtype=torch.float64).abs().amax(0)
        with torch.no_grad():
            model.tau_max.copy_(total.to(model.tau_max.dtype))


def losses(model: DacResidual, with_qe: bool) -> tuple[str, ...]:
    from ..models.dac_residual import LOSSES

    return LOSSES


def evaluate(model: DacResidual, samples: dict) -> dict:
    """``tau_res_nmse``: mean over joints of the squared error over the target's variance;
    ``tau_res_rms`` and ``tau_res_rel_rms`` per joint (error RMS, and over the target's RMS); with a
    regressor fit, of the whole port (fit + network) against the whole residual."""
    import torch

    dev, dt = next(model.parameters()).device, next(model.parameters()).dtype
    q, qd, qdd = (torch.as_tensor(np.asarray(samples[k]), device=dev, dtype=dt) for k in ("q", "qd", "qdd"))
    with torch.no_grad():
        pred = model(q, qd, qdd).double().cpu().numpy()
    if not model.network_enabled:
        pred = np.zeros_like(pred)
    true = np.asarray(samples["Q"], float)
    extra = {}
    if "Q_fit" in samples:  # the port is fit + network: judged on the whole residual
        fit = np.asarray(samples["Q_fit"], float)
        pred, true = pred + fit, np.asarray(samples["Q_total"], float)
        scale = np.maximum(np.sqrt(np.mean(true**2, axis=0)), 1e-300)
        extra["tau_res_rel_rms_fit"] = (np.sqrt(np.mean((fit - true) ** 2, axis=0)) / scale).tolist()
    err = pred - true
    rms = np.sqrt(np.mean(err**2, axis=0))
    scale = np.sqrt(np.mean(true**2, axis=0))
    var = np.maximum(np.var(true, axis=0), 1e-300)
    return {
        "tau_res_nmse": float(np.mean(np.mean(err**2, axis=0) / var)),
        "tau_res_rms": rms.tolist(),
        "tau_res_rel_rms": (rms / np.maximum(scale, 1e-300)).tolist(),
        "samples": int(len(true)),
        "non_finite": int((~np.isfinite(pred)).any(-1).sum()),
    } | extra


#: The network stays only if it lowers the port's validation nMSE below the fit's alone by this share.
NETWORK_GAIN = 0.01


def finish(model: DacResidual, validation: dict) -> str:
    """With a regressor fit: keep the network only where it helps on the validation recordings (else the
    port is the fit alone, and the controller skips the graph)."""
    if not model.regressor_fit or "Q_fit" not in validation:
        return ""
    model.network_enabled = True
    port = evaluate(model, validation)["tau_res_nmse"]
    fit = np.asarray(validation["Q_fit"], float)
    true = np.asarray(validation["Q_total"], float)
    fit_alone = float(np.mean(np.mean((fit - true) ** 2, axis=0) / np.maximum(np.var(true, axis=0), 1e-300)))
    keep = port < (1.0 - NETWORK_GAIN) * fit_alone
    model.network_enabled = bool(keep)
    verdict = "kept" if keep else "switched off: the port is the regressor fit alone"
    return (
        f"network on the fit's remainder: validation nMSE {port:.3e} with it, {fit_alone:.3e} without; "
        f"{verdict}"
    )


def metadata(model: DacResidual, shape: Shape, **fields: Any) -> ModelMetadata:
    from ..inference.metadata import ModelMetadata
    from ..models.dac_residual import GRAPH_INPUTS, GRAPH_OUTPUTS

    network = dict(model.config()) | {
        "graph_inputs": list(GRAPH_INPUTS),
        "graph_outputs": list(GRAPH_OUTPUTS),
        "friction": model.friction_parameters(),
        # the controller's default bound derives from it
        "tau_res_max": model.tau_max.detach().cpu().tolist(),
    }
    return ModelMetadata(
        family=NAME,
        free_joints=list(shape.coordinate_names),
        servo_joints=[],
        coordinate_units=list(shape.coordinate_units),
        network=network,
        **fields,
    )


export = graph_writer("dac_residual", "export_dac_residual_onnx")


def test_summary(metrics: dict) -> str:
    rel = ", ".join(f"{100 * v:.2f}" for v in metrics["tau_res_rel_rms"])
    fit = metrics.get("tau_res_rel_rms_fit")
    fit_line = f"; the regressor fit alone [{', '.join(f'{100 * v:.2f}' for v in fit)}] %" if fit else ""
    return (
        f"test: τ_res RMS error per joint [{', '.join(f'{v:.2e}' for v in metrics['tau_res_rms'])}] "
        f"(relative [{rel}] %), nMSE {metrics['tau_res_nmse']:.2e} on {metrics['samples']} samples"
        f"{fit_line}"
    )


def check_options(options: Mapping[str, Any], given: Given) -> None:
    why = f"--model {NAME} learns the efforts an arm's certain model misses from its recordings"
    refuse_given(NOT_HERE, given, why)
    if not options.get("bag"):
        raise ConfigError(
            f"--model {NAME} trains on recordings: pass --bag BAG [BAG ...] and --config with the "
            "bag: mapping and the certain model (config/dac_residual.yaml)"
        )


DAC_RESIDUAL = Family(
    name=NAME,
    systems=("arm",),
    defaults=DEFAULTS,
    data=EFFORT_RESIDUALS,
    monitor="tau_res_nmse",
    skip_non_finite=False,
    command_options=COMMAND_OPTIONS,
    check_options=check_options,
    progress_prefix=f"{NAME} ",
    keep_best_weights=True,
    finish=finish,
    **hooks(globals()),
)

__all__ = ["DAC_RESIDUAL"]
