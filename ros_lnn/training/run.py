"""A training run: data → split → train → evaluate → provenance → export/report.

``run(RunSpec(...))`` is the whole of ``ros-lnn train``; the family (:mod:`ros_lnn.families`) decides
the model, its losses and metrics, its export and which options make sense, the data kind decides the
data source, the split and the report. Every family trains with the project trainer
(:mod:`ros_lnn.training.trainer`: device, checkpoints, resume, early stopping, ``torch.compile``,
torchrun) and writes the same checkpoint (:mod:`ros_lnn.training.checkpoint`).
"""

from __future__ import annotations

import dataclasses
import platform
import signal
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..families import EFFORT_RESIDUALS, TRAJECTORIES, TRIALS, Family, Network
from .spec import RunSpec, check, command_line

if TYPE_CHECKING:
    from torch import nn


@dataclass(frozen=True)
class RunResult:
    """What a finished run wrote and measured."""

    family: Family
    out: Path
    metrics: dict
    provenance: dict
    history: dict
    model: nn.Module
    report: dict | None = None  # {"dir", "files"} of the report folder

    @property
    def test_summary(self) -> str:
        return self.family.test_summary(self.metrics)


def sigterm_as_interrupt() -> None:
    """SIGTERM ends a run like Ctrl-C (KeyboardInterrupt): finally-blocks remove temporary files and
    the last good checkpoint stays."""

    def handler(signum, frame):
        raise KeyboardInterrupt(f"signal {signum}")

    try:
        signal.signal(signal.SIGTERM, handler)
    except ValueError:  # not the main thread (e.g. called from a test runner thread)
        pass


def run_provenance(history: dict) -> dict:
    """What the metadata should say about how the run went."""
    return {
        "early_stopping": history.get("early_stopping"),
        "resumed": history.get("resumed", []),
        "epochs_run": history["epoch"][-1] if history.get("epoch") else 0,
        **(history.get("run") or {}),
    }


def versions() -> dict:
    import numpy
    import onnx
    import torch

    from .. import __version__

    return {
        "ros_lnn": __version__,
        "torch": torch.__version__,
        "onnx": onnx.__version__,
        "numpy": numpy.__version__,
        "python": platform.python_version(),
    }


def training_record(family: Family, spec: RunSpec, history: dict) -> dict:
    """The provenance's ``training`` entry."""
    record: dict[str, Any] = {
        "family": spec.family,
        "epochs": spec.epochs,
        "batch": spec.batch,
        "lr": spec.lr,
        "weight_decay": spec.weight_decay,
    }
    if family.data == TRAJECTORIES:
        terms = history["losses"]
        loss = "qdd_mse" if terms == ["qdd"] else " + ".join(f"{k}_mse" for k in terms)
        record |= {"grad_clip": spec.grad_clip, "seed": spec.seed, "loss": loss}
    else:
        record |= {"seed": spec.seed, "with_qe": spec.with_qe, "losses": history["losses"]}
    return record | {
        "device": history["device"],
        "dtype": spec.dtype,
        # wall-clock seconds of the whole training loop (validations and checkpoints included; a loaded
        # machine stretches it), its process CPU seconds, and the validations' and checkpoints' share
        "seconds": round(history["seconds"], 1),
        **{
            k: round(history[k], 1)
            for k in ("cpu_seconds", "validation_seconds", "checkpoint_seconds")
            if k in history
        },
    }


def test_metrics(
    family: Family, model: nn.Module, test: dict, history: dict, evaluated_on: str = "test trials"
) -> dict:
    metrics = family.evaluate(model, test)
    if family.data == TRAJECTORIES:
        return metrics | {"evaluated_on": "test trajectories", "final_train_loss": history["loss"][-1]}
    per_trial = metrics.pop("qdd_f_nmse_per_trial", {})  # keyed by trial index → by trial name
    return metrics | {
        "qdd_f_nmse_per_trial": {test["names"][i]: v for i, v in enumerate(per_trial.values())},
        "evaluated_on": evaluated_on,
        "final_train_loss": history["loss"][-1],
    }


def identify_from_bags(
    spec: RunSpec, data, progress: Callable[[str], None]
) -> tuple[dict | None, dict | None]:
    """Recordings: the excitation report (printed) and, with a URDF (the mapping's
    ``robot_description``), the rigid-body prior identified from the training samples."""
    if data.bags is None:
        return None, None
    from .identifiability import excitation_report

    mapping = data.bags.mapping
    shape = data.shape
    prior = urdf = ident = None
    if mapping.robot_description:
        from .urdf_prior import identify, prior_config, read_urdf

        urdf = read_urdf(mapping.robot_description, shape.coordinate_names)
        ident = identify(urdf, data.train, len(shape.free_joints), use_qe=data.with_qe, seed=spec.seed)
        prior = prior_config(urdf, ident.params) | {
            "damping": ident.damping.tolist(),
            "coulomb": ident.coulomb.tolist(),
        }
        progress(
            f"URDF prior: {urdf.path} ({len(urdf.joints)} joints), inertial parameters identified from "
            f"the {ident.rows}; fit residual {ident.residual_rel:.2e} of the URDF's"
        )
    excitation = excitation_report(
        data.train,
        shape.free_joints,
        shape.servo_joints,
        shape.coordinate_units,
        shape.joint_kinds,
        recordings=len(spec.bags) + len(spec.val_bags) + len(spec.test_bags),
        identification=ident,
        urdf=urdf,
    )
    for line in excitation["lines"]:
        progress(f"identifiability: {line}")
    return prior, excitation


def resolve_dissipation(option: str, data) -> str:
    """The model's dissipation: ``auto`` is ``rayleigh_coulomb`` for recordings without measured
    forces (real joints have friction and nothing else accounts for it), off otherwise (the crane's
    conservative model); the other choices as given ("off" → "")."""
    if option == "auto":
        return "rayleigh_coulomb" if data.source.get("kind") == "rosbag" and not data.with_qe else ""
    return "" if option == "off" else option


def run(spec: RunSpec, progress: Callable[[str], None] = print) -> RunResult | None:
    """Carry out ``spec``; None on the torchrun ranks that neither export nor report."""
    family = spec.family_spec
    resolved = spec.resolved()
    check(spec, resolved)  # before any data is made or torch is imported
    spec = resolved

    import torch

    from .checkpoint import save_checkpoint
    from .data import data_hash
    from .distributed import shutdown_process_group
    from .sources import load
    from .trainer import TrainConfig, seed_everything, train

    sigterm_as_interrupt()
    seed_everything(spec.seed)
    data = load(family, spec, progress)
    # what the data decided (Q_e not measured, the bag's validation trials) is part of the command line
    spec = dataclasses.replace(spec, with_qe=data.with_qe, test_trials=data.test_trials or spec.test_trials)
    progress(data.summary)

    prior, excitation = identify_from_bags(spec, data, progress)
    # learned dissipation is part of the ServoLNN graph; other families model friction their own way
    dissipation = resolve_dissipation(spec.dissipation, data) if family.model_family == "servo_lnn" else ""
    if dissipation and spec.dissipation == "auto":  # what auto chose is part of the command line
        spec = dataclasses.replace(spec, dissipation=dissipation)
        progress(f"dissipation: {dissipation} (auto: the recordings measure no force)")
    seed_everything(spec.seed)
    model = family.build(
        data.shape,
        Network(
            tuple(spec.hidden or ()),
            spec.activation,
            spec.epsilon,
            spec.diag_activation,
            spec.angle_features,
            dissipation,
            prior,
        ),
    )
    family.normalise(model, data.train)
    epochs = int(spec.epochs or 1)
    log_every = max(1, epochs // 10) if spec.log_every is None else max(1, min(spec.log_every, epochs))
    val_every = log_every if spec.val_every is None else max(1, min(spec.val_every, epochs))
    cfg = TrainConfig(
        epochs=epochs,
        batch=int(spec.batch or 1),
        lr=float(spec.lr or 0.0),
        weight_decay=float(spec.weight_decay or 0.0),
        seed=spec.seed,
        device=spec.device,
        dtype=str(spec.dtype),
        with_qe=spec.with_qe,
        losses=family.losses(model, spec.with_qe),
        log_every=log_every,
        val_every=val_every,
        threads=spec.threads,
        checkpoint_dir=spec.checkpoint_folder,
        checkpoint_every=max(1, spec.checkpoint_every),
        resume=spec.resume_from,
        patience=spec.patience,
        min_delta=spec.min_delta,
        compile=bool(spec.compile),
        grad_clip=spec.grad_clip,
    )
    prefix = family.progress_prefix
    history = train(
        model, data.train, data.validation, cfg, progress=lambda line: progress(f"{prefix}{line}")
    )
    shutdown_process_group()
    if (history.get("run") or {}).get("rank", 0) != 0:  # torchrun: only rank 0 exports and reports
        return None
    if family.finish is not None:
        line = family.finish(model, data.validation)
        if line:
            progress(f"{prefix}{line}")

    model = model.to(device="cpu", dtype=torch.float64)
    metrics = test_metrics(family, model, data.test, history, data.evaluated_on)
    command = command_line(spec)
    provenance: dict[str, Any] = {
        "data": data.source,
        "data_hash": data_hash(data.train, data.test),
        "split": data.split,
    }
    if family.data == TRAJECTORIES:
        provenance["coordinates"] = {
            "names": list(data.shape.coordinate_names),
            "units": list(data.shape.coordinate_units),
        }
    provenance |= {
        "training": training_record(family, spec, history),
        "command": command,
        "run": run_provenance(history),
        "versions": versions(),
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
    }
    metadata = family.metadata(
        model,
        data.shape,
        system=data.shape.system,
        metrics=metrics,
        provenance=provenance,
        package_version=provenance["versions"]["ros_lnn"],
    )
    out = Path(str(spec.out))
    checkpoint = dict(
        history=history,
        command=command,
        provenance=provenance,
        epoch=history["epoch"][-1],
        extra={"metadata": metadata.to_json()},
    )
    if out.suffix == ".pt":
        save_checkpoint(out, model, **checkpoint)
    else:
        family.export(model, out, metadata, dtype=spec.export_dtype, exporter=spec.exporter)
    save_checkpoint(Path(spec.checkpoint_folder) / "final.pt", model, **checkpoint)
    report = None
    if spec.report_folder is not None:
        write = REPORT_WRITERS[family.data]
        report = write(
            (spec.report_folder, history, model, data.test, metrics, provenance), spec, data, excitation
        )
    return RunResult(family, out, metrics, provenance, history, model, report)


#: What every report writer takes first: the report folder, the history, the model, the test samples,
#: the metrics, the provenance.
ReportInputs = tuple[Path, dict, Any, dict, dict, dict]


def _trials_report(common: ReportInputs, spec, data, excitation) -> dict:
    """ServoLNN/DeLaN: loss curves, validation plots, metrics (+ the excitation report of recordings)."""
    from .report import write_report

    report = write_report(
        *common,
        qe_measured=spec.with_qe,
        prefix="test" if data.val is not None else "validation",
        extra={"identifiability": excitation} if excitation else None,
    )
    if excitation:
        from .identifiability import write_report as write_identifiability

        report["files"].append(write_identifiability(spec.report_folder, excitation))
    return report


def _trajectories_report(common: ReportInputs, spec, data, excitation) -> dict:
    from .report import write_acceleration_report

    return write_acceleration_report(*common, coordinate_names=list(data.shape.coordinate_names))


def _residuals_report(common: ReportInputs, spec, data, excitation) -> dict:
    from .effort_residuals import write_residual_report

    return write_residual_report(*common, data.shape.coordinate_names)


#: The report writer of each family's data kind (``Family.data``), as export is each family's own:
#: ``write(common, spec, data, excitation)`` with ``common`` the :data:`ReportInputs`.
REPORT_WRITERS = {
    TRIALS: _trials_report,
    TRAJECTORIES: _trajectories_report,
    EFFORT_RESIDUALS: _residuals_report,
}


__all__ = ["REPORT_WRITERS", "RunSpec", "RunResult", "run", "command_line"]
