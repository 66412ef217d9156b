"""An arm's ``ros-lnn train`` run from the same :class:`ros_lnn.training.spec.RunSpec` as the model
families' (bags, validation and test bags, the mapping file, epochs, learning rate, weight decay,
patience, ``out``, ``report``): read the recordings, :func:`ros_lnn.arm.training.train_arm`, evaluate on
the test bags against the least-squares fit, and write the report folder (``metrics.json``,
``training.log``, torque plots) beside the model as the families' runs do.

The families' run is :func:`ros_lnn.training.run.run`; ``ros-lnn train`` takes this one when the mapping
file lists ``actuated_joints`` (:func:`is_arm_run`)."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import ConfigError
from ..training.spec import RunSpec

DEFAULT_OUT = "models/arm.onnx"


@dataclass
class ArmRunResult:
    """What a finished arm run wrote and measured."""

    out: Path
    metrics: dict  # train_arm's: identification, residual, friction memory, validation
    tested: dict = field(default_factory=dict)  # per test bag: torque rre, the fit's, per phase
    report: dict | None = None  # {"dir", "files"} of the report folder
    seconds: float = 0.0

    @property
    def test_summary(self) -> str:
        return "\n".join(
            f"test {name}: torque rre {m['torque_rre_mean_percent']:.2f} % "
            f"(least-squares fit alone {m['least_squares_fit']['torque_rre_mean_percent']:.2f} %)"
            for name, m in self.tested.items()
        )


def is_arm_run(spec: RunSpec) -> bool:
    from .mapping import is_arm_config

    return bool(spec.bag_config) and is_arm_config(spec.bag_config)


def arm_urdf(spec: RunSpec, mapping) -> str:
    """``--urdf`` (the ``robot_description`` override), else the mapping's, relative to the config."""
    given = spec.bag_mapping.get("robot_description")
    urdf = given or mapping.robot_description
    if not urdf:
        raise ConfigError("an arm model needs the robot's URDF: --urdf, or robot_description in the config")
    if not given and not Path(urdf).is_absolute() and spec.bag_config:
        urdf = str(Path(spec.bag_config).parent / urdf)
    return urdf


def residual_options(spec: RunSpec):
    """The learned members' schedule: the package's defaults, overridden by the spec's epochs, lr,
    weight decay and patience where given."""
    from .residual import ResidualOptions

    options = ResidualOptions()
    if spec.epochs:
        options.epochs = spec.epochs
    if spec.lr:
        options.lr = spec.lr
    if spec.weight_decay is not None:
        options.weight_decay = spec.weight_decay
    if spec.patience:
        options.patience = spec.patience
    return options


def run_arm(spec: RunSpec, progress: Callable[[str], None] = print) -> ArmRunResult:
    from ..files import output_file_problem
    from .evaluation import evaluate_arm, plot_torque
    from .mapping import ArmMapping
    from .model import ArmModel
    from .recording import read_arm_bag
    from .training import train_arm

    if not spec.bags:
        raise ConfigError("an arm model trains on recordings: give --bag BAG...")
    if spec.data:
        raise ConfigError("--data is for the reference systems; an arm model trains on --bag")
    assert spec.bag_config is not None
    mapping = ArmMapping.from_yaml(spec.bag_config)
    urdf = arm_urdf(spec, mapping)
    out = Path(spec.out or DEFAULT_OUT)
    if out.suffix != ".onnx":
        raise ConfigError(f"--out {out}: an arm model is written as .onnx")
    problem = output_file_problem(out, create_parents=True)
    if problem:
        raise ConfigError(f"--out {out}: {problem}")
    train_recs = [read_arm_bag(b, mapping) for b in spec.bags]
    val_recs = [read_arm_bag(b, mapping) for b in spec.val_bags] if spec.val_bags else None
    progress(
        f"arm model: {mapping.describe()}; training on {', '.join(r.name for r in train_recs)} "
        f"({sum(r.duration for r in train_recs):.1f} s together)"
    )
    trained = train_arm(
        train_recs,
        urdf,
        mapping,
        out=out,
        validation=val_recs,
        options=residual_options(spec),
        progress=progress,
    )
    model = ArmModel(out)
    test = [read_arm_bag(b, mapping) for b in spec.test_bags]
    tested = evaluate_arm(model, test, mapping, keep_series=True) if test else {}
    result = ArmRunResult(out, trained.metrics, tested, seconds=trained.train_s)
    if spec.report:
        folder = Path(spec.report if isinstance(spec.report, str) else out.with_name(f"{out.stem}_report"))
        folder.mkdir(parents=True, exist_ok=True)
        for name, m in tested.items():
            plot_torque(folder, f"test_{name}", m.pop("series"), model.joints)
        report = {
            "metrics": trained.metrics,
            "identification": model.meta.get("identification"),
            "test": tested,
        }
        (folder / "metrics.json").write_text(json.dumps(report, indent=2))
        (folder / "training.log").write_text("\n".join(trained.log) + "\n")
        result.report = {"dir": str(folder), "files": sorted(p.name for p in folder.iterdir())}
    else:
        for m in tested.values():
            m.pop("series", None)
    return result
