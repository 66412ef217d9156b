"""What a model family is to the rest of the package: one :class:`Family` description per family.

The trainer, the run (:mod:`ros_lnn.training.run`), the checkpoint loader and ``ros-lnn export`` ask
the family, never the model's attributes, what to do: which losses, which metrics and which of them
stops a run early, how to normalise the inputs, how to export, which run options make sense.

Importing a family needs no torch: the family files import their models inside the functions, so the
command line can list the families and check options before anything heavy is loaded.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import ConfigError

if TYPE_CHECKING:  # annotations only
    from torch import nn

    from ..inference.metadata import ModelMetadata

#: Data kinds. ``trials``: runs of a system with free and servo joints (simulated, a trials file or
#: bags), split by trial, every coordinate's ``Q`` known; ``trajectories``: simulated free motion
#: ``(q, q̇, q̈)``, split by trajectory.
TRIALS, TRAJECTORIES = "trials", "trajectories"
#: ``effort_residuals``: an arm's recordings (joint states with the applied efforts) against its certain
#: model, the targets being what the model misses (:mod:`ros_lnn.training.effort_residuals`).
EFFORT_RESIDUALS = "effort_residuals"

#: ``given(option)``: whether the command line set that run option (its value differs from the default).
Given = Callable[[str], bool]


@dataclass(frozen=True)
class Shape:
    """The coordinates the data give a model, in model order (free joints, then servo joints)."""

    system: str
    free_joints: tuple[str, ...]
    servo_joints: tuple[str, ...] = ()
    coordinate_units: tuple[str, ...] = ()
    #: per coordinate (model order): revolute, continuous (wraps), prismatic or cyclic; () = all plain
    joint_kinds: tuple[str, ...] = ()

    @property
    def coordinate_names(self) -> tuple[str, ...]:
        return self.free_joints + self.servo_joints


@dataclass(frozen=True)
class Network:
    """Network options of a run (each family reads the ones it has)."""

    hidden: tuple[int, ...]
    activation: str = "softplus"
    epsilon: float | None = None
    diag_activation: str = "softplus"
    angle_features: bool = False
    #: "" (conservative), "rayleigh" or "rayleigh_coulomb" (ServoLNN's learned dissipation)
    dissipation: str = ""
    #: a rigid-body prior identified from the data (ServoLNN; ros_lnn.models.rigid_body config)
    prior: dict | None = None


def no_option_rules(options: Mapping[str, Any], given: Given) -> None:
    """A family that accepts every run option."""


def any_shape(shape: Shape) -> None:
    """A family that trains on any coordinates its data give."""


@dataclass(frozen=True)
class Family:
    """One model family: everything the run, the trainer, checkpoints and export need from it."""

    #: ``ros-lnn train --model NAME``
    name: str
    #: reference systems it trains on; the first is the default
    systems: tuple[str, ...]
    #: run options where the command line gives none
    defaults: Mapping[str, Any]
    #: :data:`TRIALS` or :data:`TRAJECTORIES`: the data source, split and report of its runs
    data: str
    #: an untrained model for the data's coordinates and the run's network options
    build: Callable[[Shape, Network], nn.Module]
    #: the untrained model a checkpoint's ``model_config`` (without ``family``) describes
    from_config: Callable[[dict], nn.Module]
    #: set the model's input normalisation from the training samples (before training)
    normalise: Callable[[Any, dict], None]
    #: loss names for ``(model, Q_e measured)`` (:mod:`ros_lnn.models.losses`)
    losses: Callable[[Any, bool], tuple[str, ...]]
    #: accuracy on held-out samples (validation during training, test metrics after it)
    evaluate: Callable[[Any, dict], dict]
    #: metric of :attr:`evaluate` that early stopping watches (lower is better)
    monitor: str
    #: zero the step of a batch with a non-finite loss (learned mass matrices can be singular)
    skip_non_finite: bool
    #: ``metadata(model, shape, **fields)``: the ONNX metadata of a trained model
    metadata: Callable[..., ModelMetadata]
    #: ``export(model, path, metadata, dtype, exporter)``: write the ONNX graph
    export: Callable[..., Path]
    #: the ``test: ...`` line of a finished run
    test_summary: Callable[[dict], str]
    #: run options the canonical command line spells out ("with_qe" as --with-qe/--without-qe)
    command_options: tuple[str, ...]
    #: family tag of its checkpoints and ONNX metadata; "" (the default): its :attr:`name` (DeLaN is a
    #: ServoLNN: ``servo_lnn``)
    model_family: str = ""
    #: torch.onnx exporters that can write its graph (the first is the default)
    exporters: tuple[str, ...] = ("dynamo",)
    #: option rules: raise ConfigError (one line) for options that make no sense for this family
    check_options: Callable[[Mapping[str, Any], Given], None] = no_option_rules
    #: refuse data whose coordinates the family cannot model (ConfigError)
    check_shape: Callable[[Shape], None] = any_shape
    #: prefix of the trainer's progress lines
    progress_prefix: str = ""
    #: export the weights of the best validation, not the last epoch's, even without early stopping
    #: (a network on a fit's small remainder can overfit it long before the last epoch)
    keep_best_weights: bool = False
    #: after training, before export: the family's last word on the trained model given the validation
    #: samples (e.g. switch off a part that does not help); returns a progress line ("" for none)
    finish: Callable[[Any, dict], str] | None = None

    def __post_init__(self):
        if not self.model_family:
            object.__setattr__(self, "model_family", self.name)


#: The callables of a :class:`Family` that a family module defines under their field names.
HOOKS = ("build", "from_config", "normalise", "losses", "evaluate", "metadata", "export", "test_summary")


def hooks(namespace: Mapping[str, Any]) -> dict[str, Any]:
    """The :data:`HOOKS` a family module's ``globals()`` defines, as :class:`Family` keywords: each family
    file names its functions after the fields, so its record does not list them again."""
    return {name: namespace[name] for name in HOOKS if name in namespace}


def graph_writer(module: str, function: str) -> Callable[..., Path]:
    """A family's ``export`` that writes the graph with ``ros_lnn.models.<module>.<function>(model, path,
    metadata, dtype=...)``, the dynamo exporter's graph (the family's only one); torch is imported when
    it is called."""

    def export(model: Any, path: str | Path, metadata: Any, dtype: str = "float32", exporter: str = "dynamo"):
        write = getattr(importlib.import_module(f"..models.{module}", __package__), function)
        return write(model, path, metadata, dtype=dtype)

    export.__qualname__ = f"graph_writer({module}.{function})"
    return export


#: Bag mapping settings the command line may override (``ros-lnn train --free-joints ...``: the fields of
#: :class:`ros_lnn.bags.mapping.BagMapping` of the same names).
BAG_MAPPING_OPTIONS = (
    "joint_states_topic",
    "servo_topic",
    "servo_type",
    "free_joints",
    "servo_joints",
    "servo_effort",
    "savgol_window",
    "savgol_order",
    "val_fraction",
    "free_effort",
    "split",
    "cyclic_joints",
    "robot_description",
)
#: Options of bag reading (``ros-lnn train --bag``): the recordings, the mapping file and its overrides.
BAG_OPTIONS = ("bag", "val_bag", "test_bag", "config", *BAG_MAPPING_OPTIONS)
#: Options of the simulated trajectories (chains and the nonholonomic examples).
SIMULATION_OPTIONS = ("trajectories", "duration", "links")


def refuse_links_without_chain(options: Mapping[str, Any], given: Given) -> None:
    if options["system"] != "chain" and given("links"):
        raise ConfigError(f"--links is for --system chain, not {options['system']}")


def option_flags(names) -> str:
    """``--a-b, --c`` for option names ``a_b, c``."""
    return ", ".join("--" + n.replace("_", "-") for n in names)


def refuse_given(options: Iterable[str], given: Given, why: str, kind: str = "") -> None:
    """ConfigError "``why`` and has no --x, --y ``kind``" for those of ``options`` the command line set."""
    wrong = [o for o in options if given(o)]
    if wrong:
        raise ConfigError(f"{why} and has no {option_flags(wrong)}{kind}")


__all__ = [
    "TRIALS",
    "TRAJECTORIES",
    "EFFORT_RESIDUALS",
    "BAG_MAPPING_OPTIONS",
    "BAG_OPTIONS",
    "SIMULATION_OPTIONS",
    "Given",
    "Shape",
    "Network",
    "Family",
    "HOOKS",
    "hooks",
    "graph_writer",
    "no_option_rules",
    "any_shape",
    "refuse_links_without_chain",
    "option_flags",
    "refuse_given",
]
