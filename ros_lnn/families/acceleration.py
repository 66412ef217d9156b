"""What the families fitted by acceleration MSE share (LNN, LNN-nh, TLNN, neural ODE; their forward is
``model(q, q̇) -> q̈``): the ``qdd`` loss, q̈ metrics, the ``q̇`` scale as input normalisation, the
``(q, qd) -> qdd`` ONNX graph and its metadata, the zoo's defaults and option rules.

A new family of this kind is one file: its ``build`` and ``from_config`` and :func:`acceleration_family`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np

from .base import BAG_OPTIONS, TRAJECTORIES, Family, Given, Network, Shape, graph_writer, hooks, refuse_given

if TYPE_CHECKING:
    from torch import nn

    from ..inference.metadata import ModelMetadata

M = TypeVar("M", bound="nn.Module")

#: The nonholonomic-LNN paper's 2x128 softplus net; 60 epochs (the paper: 300) to fit a CPU.
DEFAULTS = dict(
    epochs=60,
    batch=256,
    lr=1e-3,
    weight_decay=0.0,
    grad_clip=10.0,
    hidden=(128, 128),
    dtype="float64",
    trajectories=20,
    duration=5.0,
    links=2,
)
#: ServoLNN/crane options an acceleration family does not have.
SERVO_ONLY_OPTIONS = (
    "data",
    *BAG_OPTIONS,
    "with_qe",
    "n_train",
    "split_seed",
    "test_trials",
    "diag_activation",
    "angle_features",
    "dissipation",
    "epsilon",
    "exporter",
)
COMMAND_OPTIONS = ("epochs", "batch", "lr", "seed", "activation", "dtype", "out", "export_dtype")


def losses(model: nn.Module, with_qe: bool) -> tuple[str, ...]:
    from ..models.losses import ACCELERATION_LOSSES

    return ACCELERATION_LOSSES


def evaluate(model: nn.Module, samples: dict) -> dict:
    """``qdd_mse`` (mean over samples of the squared error summed over coordinates, the papers'
    measure), ``qdd_nmse`` (mean squared error over the variance of q̈) and ``non_finite`` (samples
    with a non-finite q̈̂)."""
    import torch

    dev = next(model.parameters()).device
    dt = next(model.parameters()).dtype
    q, qd = (torch.as_tensor(np.asarray(samples[k]), device=dev, dtype=dt) for k in ("q", "qd"))
    with torch.no_grad():
        pred = model(q, qd).double().cpu().numpy()
    true = np.asarray(samples["qdd"])
    err = (pred - true) ** 2
    return {
        "qdd_mse": float(np.mean(err.sum(-1))),
        "qdd_nmse": float(err.mean() / np.var(true)),
        "non_finite": int((~np.isfinite(pred)).any(-1).sum()),
    }


def normalise(model: nn.Module, train: dict) -> None:
    from ..models.normalisation import set_qd_scale

    set_qd_scale(model, train["qd"])


def metadata(model: nn.Module, shape: Shape, **fields: Any) -> ModelMetadata:
    from ..models.family_export import family_metadata

    return family_metadata(model, list(shape.coordinate_names), list(shape.coordinate_units), **fields)


export = graph_writer("family_export", "export_family_onnx")


def test_summary(metrics: dict) -> str:
    return f"test: q̈ MSE {metrics['qdd_mse']:.3e}, nMSE {metrics['qdd_nmse']:.2e}" + (
        f" ({metrics['non_finite']} non-finite predictions)" if metrics["non_finite"] else ""
    )


def refuse_servo_options(name: str) -> Callable[[Mapping[str, Any], Given], None]:
    def rules(options: Mapping[str, Any], given: Given) -> None:
        why = f"--model {name} trains by acceleration MSE on simulated data"
        refuse_given(SERVO_ONLY_OPTIONS, given, why, " (ServoLNN/bag options)")

    return rules


def build_scalar_field(model_class: type[M], shape: Shape, net: Network) -> M:
    """A network over the system's coordinates with sin/cos inputs for its angles (LNN, HNN)."""
    angles = [i for i, unit in enumerate(shape.coordinate_units) if unit == "rad"]
    return model_class(
        len(shape.coordinate_names),
        hidden=net.hidden,
        activation=net.activation,
        angle_coordinates=angles,
        coordinate_names=shape.coordinate_names,
    )


def acceleration_family(
    name: str,
    systems: tuple[str, ...],
    build: Callable[[Shape, Network], nn.Module],
    from_config: Callable[[dict], nn.Module],
) -> Family:
    """The :class:`Family` of a model fitted by q̈ MSE on simulated trajectories."""
    return Family(
        name=name,
        systems=systems,
        defaults=DEFAULTS,
        data=TRAJECTORIES,
        monitor="qdd_nmse",
        skip_non_finite=True,
        command_options=COMMAND_OPTIONS,
        check_options=refuse_servo_options(name),
        progress_prefix=f"{name} ",
        **(hooks(globals()) | dict(build=build, from_config=from_config)),
    )


__all__ = ["DEFAULTS", "SERVO_ONLY_OPTIONS", "acceleration_family", "build_scalar_field", "evaluate"]
