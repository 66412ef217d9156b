"""The fully actuated arm's ``ros-lnn train`` and ``ros-lnn evaluate``: chosen when the config's
mapping lists ``actuated_joints`` (train) or the model is an arm model (evaluate)."""

from __future__ import annotations

import json
from pathlib import Path

from ..errors import ConfigError, DataError


def _urdf(args, mapping) -> str:
    urdf = getattr(args, "urdf", None) or mapping.robot_description
    if not urdf:
        raise ConfigError("an arm model needs the robot's URDF: --urdf, or robot_description in the config")
    if not getattr(args, "urdf", None) and not Path(urdf).is_absolute() and args.config:
        urdf = str(Path(args.config).parent / urdf)
    return urdf


def train(args) -> int:
    from ..arm.mapping import ArmMapping
    from ..arm.recording import read_arm_bag
    from ..arm.residual import ResidualOptions
    from ..arm.training import train_arm
    from ..files import output_file_problem

    if not args.bag:
        raise ConfigError("an arm model trains on recordings: give --bag BAG...")
    if args.data:
        raise ConfigError("--data is for the reference systems; an arm model trains on --bag")
    mapping = ArmMapping.from_yaml(args.config)
    urdf = _urdf(args, mapping)
    out = Path(args.out or "models/arm.onnx")
    if out.suffix != ".onnx":
        raise ConfigError(f"--out {out}: an arm model is written as .onnx")
    problem = output_file_problem(out, create_parents=True)
    if problem:
        raise ConfigError(f"--out {out}: {problem}")
    train_recs = [read_arm_bag(b, mapping) for b in args.bag]
    val_recs = [read_arm_bag(b, mapping) for b in args.val_bag] if args.val_bag else None
    print(
        f"arm model: {mapping.describe()}; training on {', '.join(r.name for r in train_recs)} "
        f"({sum(r.duration for r in train_recs):.1f} s together)",
        flush=True,
    )
    options = ResidualOptions()
    if args.epochs:
        options.epochs = args.epochs
    if args.lr:
        options.lr = args.lr
    if args.weight_decay is not None:
        options.weight_decay = args.weight_decay
    if args.patience:
        options.patience = args.patience
    result = train_arm(
        train_recs,
        urdf,
        mapping,
        out=out,
        validation=val_recs,
        options=options,
        progress=lambda s: print(s, flush=True),
    )
    from ..arm.evaluation import evaluate_arm
    from ..arm.model import ArmModel

    model = ArmModel(out)
    test = [read_arm_bag(b, mapping) for b in args.test_bag] if args.test_bag else []
    tested = evaluate_arm(model, test, mapping, keep_series=True) if test else {}
    for name, m in tested.items():
        print(
            f"test {name}: torque rre {m['torque_rre_mean_percent']:.2f} % "
            f"(least-squares fit alone {m['least_squares_fit']['torque_rre_mean_percent']:.2f} %)"
        )
    if not args.no_report:
        folder = Path(args.report or out.with_name(f"{out.stem}_report"))
        folder.mkdir(parents=True, exist_ok=True)
        for name, m in tested.items():
            _plot(folder, f"test_{name}", m.pop("series"), model.joints)
        report = {
            "metrics": result.metrics,
            "identification": model.meta.get("identification"),
            "test": tested,
        }
        (folder / "metrics.json").write_text(json.dumps(report, indent=2))
        (folder / "training.log").write_text("\n".join(result.log) + "\n")
        print(f"report: {folder} (metrics.json, training.log{', torque plots' if tested else ''})")
    print(f"wrote {result.path} ({result.train_s:.0f} s)")
    return 0


def evaluate(args) -> int:
    from ..arm.evaluation import evaluate_arm
    from ..arm.mapping import ArmMapping
    from ..arm.model import ArmModel
    from ..arm.recording import read_arm_bag

    if not args.bag:
        raise DataError("an arm model is evaluated on recordings: give --bag BAG...")
    model = ArmModel(args.model)
    if args.config:
        mapping = ArmMapping.from_yaml(args.config)
    else:
        mapping = ArmMapping.from_dict(
            model.meta.get("mapping") or {"actuated_joints": list(model.joints)}, "the model's mapping"
        )
    if tuple(mapping.actuated_joints) != model.joints:
        raise ConfigError(
            f"the mapping's actuated_joints {list(mapping.actuated_joints)} differ from the model's "
            f"{list(model.joints)}"
        )
    print(model.describe())
    recordings = [read_arm_bag(b, mapping) for b in args.bag]
    results = evaluate_arm(model, recordings, mapping, keep_series=not args.no_plots)
    for name, m in results.items():
        fit = m["least_squares_fit"]
        print(f"{name}: {m['samples']} samples at {m['rate_hz']:.0f} Hz")
        print(f"  {'joint':<24} {'rre %':>8} {'nMSE':>8} {'fit rre %':>10}")
        for j in model.joints:
            print(
                f"  {j:<24} {m['torque_rre_percent'][j]:8.2f} {m['torque_nmse'][j]:8.4f} "
                f"{fit['torque_rre_percent'][j]:10.2f}"
            )
        print(
            f"  torque rre mean {m['torque_rre_mean_percent']:.2f} % "
            f"(least-squares fit alone {fit['torque_rre_mean_percent']:.2f} %)"
        )
    if not args.no_plots:
        folder = Path(args.plots or f"evaluation_{Path(args.model).stem}")
        for name, m in results.items():
            _plot(folder, name, m.pop("series"), model.joints)
        print(f"plots: {folder}/")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(results, fh, indent=2)
        print(f"metrics written to {args.json}")
    return 0


def _plot(folder: Path, name: str, series: dict, joints) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return
    import numpy as np

    folder.mkdir(parents=True, exist_ok=True)
    n = len(joints)
    fig, axes = plt.subplots(n, 2, figsize=(12, 2.0 * n), sharex=True, gridspec_kw={"width_ratios": [3, 1]})
    axes = np.atleast_2d(axes)
    k = np.arange(len(series["tau"]))
    for j, joint in enumerate(joints):
        ax, res = axes[j]
        ax.plot(k, series["tau"][:, j], lw=0.5, color="0.6", label="measured")
        ax.plot(k, series["model"][:, j], lw=0.8, label="model")
        ax.plot(k, series["fit"][:, j], lw=0.8, ls="--", label="least-squares fit")
        ax.set_ylabel(f"{joint}\nN·m")
        res.plot(k, series["tau"][:, j] - series["model"][:, j], lw=0.5)
        res.set_ylabel("residual")
    axes[0, 0].legend(loc="upper right", fontsize=7)
    axes[-1, 0].set_xlabel("sample")
    fig.tight_layout()
    safe = "".join(c if c.isalnum() or c in "._-" else "_" for c in name)
    fig.savefig(folder / f"{safe}_torque.png", dpi=90)
    plt.close(fig)
