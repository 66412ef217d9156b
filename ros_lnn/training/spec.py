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
from ..families import FAMILIES, SYSTEMS, TRAJECTORIES, Family, get
from ..families.base import refuse_links_without_chain

#: Option names of the command line whose RunSpec field is named differently.
FIELD_OF_OPTION = {"bag": "bags", "config": "bag_config", "val_bag": "val_bags", "test_bag": "test_bags"}


def option(help: str, flag: str | None = None, parse=None, **argparse_kwargs) -> dict[str, Any]:
    """Field metadata: how ``ros-lnn train`` offers a :class:`RunSpec` field. ``flag`` defaults to
    ``--field-name``; ``parse`` turns the parsed value into the field's (default: lists become tuples);
    the argparse type, ``nargs`` and ``store_true`` follow from the field's annotation unless given."""
    return {"cli": {"flag": flag, "help": help, "parse": parse, **argparse_kwargs}}


def _comma_list(text):
    return tuple(s.strip() for s in text.split(",") if s.strip()) if text else ()


#: Fields set by options that ``ros-lnn train`` defines itself (pairs of flags, optional values).
CUSTOM_OPTIONS = ("with_qe", "resume", "report", "bag_mapping")


@dataclass(frozen=True)
class RunSpec:
    """A training run. ``None`` means "the family's default" (:meth:`resolved` fills it in). Each field's
    ``option`` metadata is its ``ros-lnn train`` option: the command line is generated from here."""

    family: str = field(
        default="servo_lnn",
        metadata=option(
            "model family (default servo_lnn; delan = servo_lnn without servo coordinates)",
            "--model",
            choices=tuple(FAMILIES),
        ),
    )
    system: str | None = field(
        default=None,  # reference system; None: the family's first
        metadata=option(
            "reference data: crane (servo_lnn); delan_character or chain (delan); particle, drone, "
            "rolling_disk (lnn, lnn_nh); chain (lnn, tlnn, node). Default: the family's first",
            choices=SYSTEMS,
        ),
    )
    # data
    data: str | None = field(
        default=None,
        metadata=option(
            "servo_lnn: a trials file written by ros-lnn simulate (default: the paper's crane data set, "
            "simulated and cached); delan: the DeLaN character data set's character_data.npz",
            metavar="FILE",
        ),
    )
    bags: tuple[str, ...] = field(
        default=(),
        metadata=option("rosbag2 recording(s) to train on (sqlite3 or mcap)", "--bag", metavar="BAG"),
    )
    val_bags: tuple[str, ...] = field(
        default=(),
        metadata=option(
            "recording(s) early stopping validates on (not trained on; default: trials cut from --bag, "
            "in-distribution)",
            "--val-bag",
            metavar="BAG",
        ),
    )
    test_bags: tuple[str, ...] = field(
        default=(),
        metadata=option(
            "recording(s) of different excitation the reported metrics come from (never validated on)",
            "--test-bag",
            metavar="BAG",
        ),
    )
    bag_config: str | None = field(
        default=None,
        metadata=option("YAML with a bag: mapping section (default: the crane's topics/joints)", "--config"),
    )
    bag_mapping: Mapping[str, Any] = field(default_factory=dict)  # overrides of single mapping settings
    with_qe: bool = True  # train on the measured servo forces Q_e (when measured): --with-qe/--without-qe
    n_train: int | None = field(
        default=None,
        metadata=option("training samples drawn from the training trials (default 4096; bags: all)"),
    )
    split_seed: int = field(default=0, metadata=option("seed of the training-sample draw"))
    test_trials: tuple[str, ...] = field(
        default=(),
        metadata=option(
            "comma-separated test trial names (default: the paper's 5; delan_character: test letters, "
            "default e,q,v)",
            parse=_comma_list,
            type=str,
            nargs=None,
        ),
    )
    trajectories: int | None = field(
        default=None, metadata=option("simulated trajectories (zoo and delan chain; default 20)")
    )
    duration: float | None = field(
        default=None, metadata=option("seconds per simulated trajectory (default 5)")
    )
    links: int | None = field(default=None, metadata=option("links of the chain (--system chain; default 2)"))
    # network
    hidden: tuple[int, ...] | None = field(
        default=None, metadata=option("hidden widths (servo_lnn 64, delan 64 64, zoo 128 128)")
    )
    activation: str = field(
        default="softplus", metadata=option("hidden activation (softplus; zoo also tanh)")
    )
    diag_activation: str = field(
        default="softplus",
        metadata=option(
            "activation keeping l_diag >= 0: softplus (default), relu (the paper; dies on the crane data)"
        ),
    )
    epsilon: float | None = field(
        default=None, metadata=option("M = L Lᵀ + ε I (servo_lnn 0.01, delan 1e-3)")
    )
    angle_features: bool = field(
        default=False, metadata=option("feed angle coordinates (unit rad) as [sin q, cos q]")
    )
    dissipation: str = field(
        default="auto",
        metadata=option(
            "learned dissipation Q_d = -D(q) qd, D PSD (rayleigh), plus smooth Coulomb per joint; auto: "
            "rayleigh_coulomb for bags without measured forces, off otherwise (the crane's default model)",
            choices=("auto", "off", "rayleigh", "rayleigh_coulomb"),
        ),
    )
    # training
    epochs: int | None = field(
        default=None, metadata=option("epochs (servo_lnn/delan 10000 as the papers; zoo 60)")
    )
    batch: int | None = field(
        default=None, metadata=option("batch size (servo_lnn 2048, delan 512, zoo 256)")
    )
    lr: float | None = field(
        default=None, metadata=option("Adam learning rate (servo_lnn 1e-4, delan 5e-4, zoo 1e-3)")
    )
    weight_decay: float | None = field(
        default=None, metadata=option("Adam weight decay (servo_lnn/delan: 1e-5)")
    )
    grad_clip: float | None = field(
        default=None,
        metadata=option(
            "clip the gradient norm (default: off for servo_lnn/delan, 10 for the acceleration families)",
            metavar="NORM",
        ),
    )
    seed: int = field(
        default=0, metadata=option("seed of the initialisation and shuffling (zoo: also of the data)")
    )
    device: str = field(default="auto", metadata=option("auto (cuda when available), cpu, cuda, cuda:1 ..."))
    dtype: str | None = field(
        default=None,
        metadata=option(
            "training precision (servo_lnn/delan float32, zoo float64)", choices=("float32", "float64")
        ),
    )
    threads: int | None = field(
        default=None,
        metadata=option(
            "torch CPU threads (default 1: the per-step tensors are too small to gain from more)"
        ),
    )
    log_every: int | None = field(
        default=None, metadata=option("epochs between progress lines (servo_lnn/delan 500; zoo epochs/10)")
    )
    val_every: int | None = field(
        default=None,
        metadata=option("epochs between validations (servo_lnn/delan 2000; zoo: the log interval)"),
    )
    checkpoint_dir: str | None = field(
        default=None,
        metadata=option(
            "write checkpoints (last.pt, final.pt) here (default <out stem>_checkpoints/ next to --out)"
        ),
    )
    checkpoint_every: int = field(
        default=1000,
        metadata=option("epochs between checkpoints (last.pt, written atomically; default 1000)"),
    )
    resume: bool | str = False  # True: this run's checkpoint folder; or a checkpoint path (--resume [CKPT])
    patience: int = field(
        default=0,
        metadata=option(
            "early stopping: validations without improvement before stopping (0: off, the default)"
        ),
    )
    min_delta: float = field(
        default=0.0,
        metadata=option(
            "early stopping: smallest decrease of the validation nMSE that counts (q̈_f; q̈ for the "
            "acceleration families)"
        ),
    )
    compile: bool = field(
        default=False,
        metadata=option("torch.compile the loss (falls back to eager with a warning where it fails)"),
    )
    # output
    out: str | None = field(
        default=None,
        metadata=option(
            "x.onnx: export (default models/<system>_<family>.onnx); x.pt: save the checkpoint only"
        ),
    )
    export_dtype: str = field(
        default="float32", metadata=option("ONNX precision", choices=("float32", "float64"))
    )
    exporter: str = field(
        default="dynamo",
        metadata=option(
            "torch.onnx exporter of servo_lnn/delan: dynamo (leaner, faster graph) or torchscript (exports "
            "in <1 s); the zoo families export with dynamo",
            choices=("dynamo", "torchscript"),
        ),
    )
    report: bool | str = True  # True: <out stem>_report/; False: none; or a folder (--report/--no-report)

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


__all__ = ["CUSTOM_OPTIONS", "RunSpec", "check", "command_line", "option"]
