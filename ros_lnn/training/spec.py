"""``RunSpec``: everything a training run is asked to do, typed, with its family's defaults and option
rules, and the command line that reproduces it. Built by ``ros-lnn train`` from its options (or by any
caller directly); :func:`ros_lnn.training.run.run` carries it out. Nothing here imports torch."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import ConfigError
from ..families import FAMILIES, TRAJECTORIES, Family, get
from ..families.base import refuse_links_without_chain

#: Option names of the command line whose RunSpec field is named differently.
FIELD_OF_OPTION = {"bag": "bags", "config": "bag_config", "val_bag": "val_bags", "test_bag": "test_bags"}


@dataclass(frozen=True)
class RunSpec:
    """A training run. ``None`` means "the family's default" (:meth:`resolved` fills it in)."""

    family: str = "servo_lnn"
    system: str | None = None  # reference system; None: the family's first
    # data
    data: str | None = None  # trials file (servo_lnn) or character_data.npz (delan)
    bags: tuple[str, ...] = ()  # rosbag2 recordings (servo_lnn)
    val_bags: tuple[str, ...] = ()  # recordings early stopping validates on (not trained on)
    test_bags: tuple[str, ...] = ()  # recordings the reported metrics come from (never validated on)
    bag_config: str | None = None  # YAML with a bag: mapping section (default: the crane's)
    bag_mapping: Mapping[str, Any] = field(default_factory=dict)  # overrides of single mapping settings
    with_qe: bool = True  # train on the measured servo forces Q_e (when measured)
    n_train: int | None = None  # training samples drawn (trials data; bags: all if None)
    split_seed: int = 0
    test_trials: tuple[str, ...] = ()  # held-out trials (letters for delan_character)
    trajectories: int | None = None  # simulated trajectories (chains, nonholonomic examples)
    duration: float | None = None  # seconds per simulated trajectory
    links: int | None = None  # links of --system chain
    # network
    hidden: tuple[int, ...] | None = None
    activation: str = "softplus"
    diag_activation: str = "softplus"
    epsilon: float | None = None
    angle_features: bool = False
    #: learned dissipation Q_d = −D(q) q̇ (+ smooth Coulomb): auto (on for bags without measured
    #: forces, off otherwise), off, rayleigh, rayleigh_coulomb
    dissipation: str = "auto"
    # training
    epochs: int | None = None
    batch: int | None = None
    lr: float | None = None
    weight_decay: float | None = None
    grad_clip: float | None = None
    seed: int = 0
    device: str = "auto"
    dtype: str | None = None
    threads: int | None = None
    log_every: int | None = None
    val_every: int | None = None
    checkpoint_dir: str | None = None  # default <out stem>_checkpoints/ next to out
    checkpoint_every: int = 1000
    resume: bool | str = False  # True: this run's checkpoint folder; or a checkpoint path
    patience: int = 0
    min_delta: float = 0.0
    compile: bool = False
    # output
    out: str | None = None  # x.onnx: export; x.pt: checkpoint only
    export_dtype: str = "float32"
    exporter: str = "dynamo"
    report: bool | str = True  # True: <out stem>_report/; False: none; or a folder

    @property
    def family_spec(self) -> Family:
        return get(self.family)

    def given(self, option: str) -> bool:
        """Whether ``option`` (a command-line option name) differs from its default."""
        if option in self.bag_mapping:
            return self.bag_mapping[option] is not None
        name = FIELD_OF_OPTION.get(option, option)
        if name not in _DEFAULTS:
            return False
        return getattr(self, name) != _DEFAULTS[name]

    def options(self) -> dict[str, Any]:
        """Every option by its command-line name (for the families' option rules)."""
        values = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        values |= {option: values[name] for option, name in FIELD_OF_OPTION.items()}
        return values | dict(self.bag_mapping)

    def resolved(self) -> RunSpec:
        """This spec with the family's defaults where it gives none, the system, the output file."""
        family = self.family_spec
        values: dict[str, Any] = {"system": self.system or family.systems[0]}
        for key, value in family.defaults.items():
            if getattr(self, key) is None and not (key == "n_train" and self.bags):
                values[key] = value  # bags: every training sample unless --n-train (split by trial)
        spec = dataclasses.replace(self, **values)
        if spec.out is None:
            chain = f"{spec.links}" if spec.system == "chain" else ""
            spec = dataclasses.replace(spec, out=f"models/{spec.system}{chain}_{spec.family}.onnx")
        return spec

    @property
    def checkpoint_folder(self) -> str:
        """``checkpoint_dir``, default ``<out stem>_checkpoints/`` next to the model (resolved spec)."""
        if self.checkpoint_dir:
            return str(self.checkpoint_dir)
        out = Path(str(self.out))
        return str(out.with_name(f"{out.stem}_checkpoints"))

    @property
    def report_folder(self) -> Path | None:
        if self.report is False:
            return None
        if self.report is True:
            out = Path(str(self.out))
            return out.with_name(f"{out.stem}_report")
        return Path(self.report)

    @property
    def resume_from(self) -> str | None:
        if self.resume is False:
            return None
        return self.checkpoint_folder if self.resume is True else str(self.resume)


_DEFAULTS = {
    f.name: (f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default)
    for f in dataclasses.fields(RunSpec)
}


def check(spec: RunSpec, resolved: RunSpec) -> None:
    """ConfigError (one line, exit code 2) for a family/system/option combination that makes no sense.
    ``spec`` as given (what was set), ``resolved`` with the defaults (what will run)."""
    family = spec.family_spec
    system = resolved.system
    if system not in family.systems:
        fitting = [f.name for f in FAMILIES.values() if system in f.systems]
        raise ConfigError(
            f"--model {family.name} does not train on --system {system}; its systems: "
            f"{', '.join(family.systems)} (families for {system}: {', '.join(fitting)})"
        )
    suffix = Path(str(resolved.out)).suffix
    if suffix not in (".onnx", ".pt"):
        raise ConfigError(f"--out {resolved.out}: write x.onnx (export) or x.pt (checkpoint)")
    from ..files import output_dir_problem, output_file_problem

    problem = output_file_problem(resolved.out, create_parents=True)
    if problem:
        raise ConfigError(f"--out {resolved.out} {problem}; choose another path (checked before training)")
    problem = output_dir_problem(resolved.checkpoint_folder)
    if problem:
        raise ConfigError(
            f"checkpoint folder {resolved.checkpoint_folder} {problem}; choose another --out or "
            "--checkpoint-dir (checked before training)"
        )
    options = resolved.options()
    family.check_options(options, spec.given)
    refuse_links_without_chain(options, spec.given)


def command_line(spec: RunSpec) -> str:
    """The command with every effective option spelled out, so it reproduces the run as given
    (``spec`` resolved; bags' mapping and sha256 are in the provenance's data entry)."""
    family = spec.family_spec
    parts = ["ros-lnn train", f"--model {spec.family}", f"--system {spec.system}"]
    if spec.system == "chain" or family.data == TRAJECTORIES:
        parts.append(f"--trajectories {spec.trajectories} --duration {spec.duration}")
        if spec.system == "chain":
            parts.append(f"--links {spec.links}")
    if spec.data:
        parts.append(f"--data {spec.data}")
    if spec.bags:
        parts.append("--bag " + " ".join(str(b) for b in spec.bags))
    if spec.val_bags:
        parts.append("--val-bag " + " ".join(str(b) for b in spec.val_bags))
    if spec.test_bags:
        parts.append("--test-bag " + " ".join(str(b) for b in spec.test_bags))
    if spec.bag_config:
        parts.append(f"--config {spec.bag_config}")
    if "with_qe" in family.command_options:
        parts.append("--with-qe" if spec.with_qe else "--without-qe")
    for opt in family.command_options:
        value = getattr(spec, opt)
        if opt == "with_qe" or value is None or value == ():
            continue
        if opt == "test_trials":
            value = ",".join(value)
        parts.append(f"--{opt.replace('_', '-')} {value}")
    parts.append("--hidden " + " ".join(str(h) for h in spec.hidden or ()))
    if spec.angle_features:
        parts.append("--angle-features")
    if spec.dissipation != "auto":
        parts.append(f"--dissipation {spec.dissipation}")
    if spec.patience:
        parts.append(f"--patience {spec.patience} --min-delta {spec.min_delta}")
    return " ".join(parts)


__all__ = ["RunSpec", "check", "command_line"]
