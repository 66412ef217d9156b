"""``ros-lnn train --model FAMILY``: train any model family on its reference data and export it to
ONNX (``--out x.onnx``, the default) or save the checkpoint (``--out x.pt``).

Families (:mod:`ros_lnn.families`): ``servo_lnn`` (default; the ServoLNN paper's setup on the crane),
``delan`` (a ServoLNN with no servo coordinates, on the DeLaN character data or a chain), ``lnn`` /
``lnn_nh`` (nonholonomic examples; ``lnn`` also chains), ``tlnn`` / ``node`` (planar chains). This
module turns the options into a :class:`~ros_lnn.training.spec.RunSpec`, runs it
(:func:`ros_lnn.training.run.run`) and prints the result. A config whose mapping lists
``actuated_joints`` trains a fully actuated arm's model instead (:func:`train_arm_model`).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from ..bags.mapping import OVERRIDABLE, SERVO_TYPES
from ..errors import ConfigError
from ..families import FAMILIES, SYSTEMS
from ..training.spec import RunSpec, command_line


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--model",
        choices=tuple(FAMILIES),
        default="servo_lnn",
        help="model family (default servo_lnn; delan = servo_lnn without servo coordinates)",
    )
    parser.add_argument(
        "--system",
        choices=SYSTEMS,
        default=None,
        help="reference data: crane (servo_lnn); delan_character or chain (delan); particle, "
        "drone, rolling_disk (lnn, lnn_nh); chain (lnn, tlnn, node). Default: the family's "
        "first",
    )
    parser.add_argument(
        "--data",
        metavar="FILE",
        help="servo_lnn: a trials file written by ros-lnn simulate (default: the paper's crane data set, "
        "simulated and cached); delan: the DeLaN character data set's character_data.npz",
    )
    parser.add_argument(
        "--bag", nargs="+", metavar="BAG", help="rosbag2 recording(s) to train on (sqlite3 or mcap)"
    )
    parser.add_argument(
        "--val-bag",
        nargs="+",
        metavar="BAG",
        help="recording(s) early stopping validates on (not trained on; default: trials cut from --bag, "
        "in-distribution)",
    )
    parser.add_argument(
        "--test-bag",
        nargs="+",
        metavar="BAG",
        help="recording(s) of different excitation the reported metrics come from (never validated on)",
    )
    parser.add_argument(
        "--config", help="YAML with a bag: mapping section (default: the crane's topics/joints)"
    )
    add_mapping_arguments(parser)
    qe = parser.add_mutually_exclusive_group()
    qe.add_argument(
        "--with-qe",
        dest="with_qe",
        action="store_true",
        default=True,
        help="train with the measured servo forces Q_e (default)",
    )
    qe.add_argument(
        "--without-qe",
        dest="with_qe",
        action="store_false",
        help="train without Q_e (estimated power loss; only q̈_f and Q_f are then identified)",
    )
    parser.add_argument("--epochs", type=int, help="epochs (servo_lnn/delan 10000 as the papers; zoo 60)")
    parser.add_argument("--batch", type=int, help="batch size (servo_lnn 2048, delan 512, zoo 256)")
    parser.add_argument("--lr", type=float, help="Adam learning rate (servo_lnn 1e-4, delan 5e-4, zoo 1e-3)")
    parser.add_argument("--weight-decay", type=float, help="Adam weight decay (servo_lnn/delan: 1e-5)")
    parser.add_argument(
        "--seed", type=int, default=0, help="seed of the initialisation and shuffling (zoo: also of the data)"
    )
    parser.add_argument(
        "--n-train",
        type=int,
        help="training samples drawn from the training trials (default 4096; bags: all)",
    )
    parser.add_argument("--split-seed", type=int, default=0, help="seed of the training-sample draw")
    parser.add_argument(
        "--test-trials",
        help="comma-separated test trial names (default: the paper's 5; "
        "delan_character: test letters, default e,q,v)",
    )
    parser.add_argument(
        "--hidden", type=int, nargs="+", help="hidden widths (servo_lnn 64, delan 64 64, zoo 128 128)"
    )
    parser.add_argument(
        "--activation", default="softplus", help="hidden activation (softplus; zoo also tanh)"
    )
    parser.add_argument(
        "--diag-activation",
        default="softplus",
        help="activation keeping l_diag >= 0: softplus (default), relu (the paper; dies on the crane data)",
    )
    parser.add_argument("--epsilon", type=float, help="M = L Lᵀ + ε I (servo_lnn 0.01, delan 1e-3)")
    parser.add_argument(
        "--angle-features", action="store_true", help="feed angle coordinates (unit rad) as [sin q, cos q]"
    )
    parser.add_argument(
        "--dissipation",
        choices=("auto", "off", "rayleigh", "rayleigh_coulomb"),
        default="auto",
        help="learned dissipation Q_d = -D(q) qd, D PSD (rayleigh), plus smooth Coulomb per joint; auto: "
        "rayleigh_coulomb for bags without measured forces, off otherwise (the crane's default model)",
    )
    parser.add_argument("--links", type=int, help="links of the chain (--system chain; default 2)")
    parser.add_argument(
        "--trajectories", type=int, help="simulated trajectories (zoo and delan chain; default 20)"
    )
    parser.add_argument("--duration", type=float, help="seconds per simulated trajectory (default 5)")
    parser.add_argument("--device", default="auto", help="auto (cuda when available), cpu, cuda, cuda:1 ...")
    parser.add_argument(
        "--dtype",
        choices=("float32", "float64"),
        help="training precision (servo_lnn/delan float32, zoo float64)",
    )
    parser.add_argument(
        "--threads",
        type=int,
        default=None,
        help="torch CPU threads (default 1: the per-step tensors are too small to gain from more)",
    )
    parser.add_argument(
        "--log-every", type=int, help="epochs between progress lines (servo_lnn/delan 500; zoo epochs/10)"
    )
    parser.add_argument(
        "--val-every",
        type=int,
        help="epochs between validations (servo_lnn/delan 2000; zoo: the log interval)",
    )
    parser.add_argument(
        "--checkpoint-dir",
        help="write checkpoints (last.pt, final.pt) here (default <out stem>_checkpoints/ next to --out)",
    )
    parser.add_argument(
        "--out", help="x.onnx: export (default models/<system>_<family>.onnx); x.pt: save the checkpoint only"
    )
    parser.add_argument("--export-dtype", choices=("float32", "float64"), default="float32")
    parser.add_argument(
        "--exporter",
        choices=("dynamo", "torchscript"),
        default="dynamo",
        help="torch.onnx exporter of servo_lnn/delan: dynamo (leaner, faster graph) or torchscript "
        "(exports in <1 s); the zoo families export with dynamo",
    )
    add_run_arguments(parser)


def add_mapping_arguments(parser: argparse.ArgumentParser) -> None:
    """Overrides of a bag mapping (any of them also works without a config for the crane)."""
    g = parser.add_argument_group("bag mapping (overrides the config's bag: section)")
    g.add_argument("--joint-states-topic", help="JointState topic (default /joint_states)")
    g.add_argument("--servo-topic", help="servo command topic ('' = none; default /servo_commands)")
    g.add_argument("--servo-type", choices=sorted(SERVO_TYPES), help="servo command message type")
    g.add_argument("--free-joints", type=lambda s: tuple(s.split(",")), help="comma-separated free joints")
    g.add_argument("--servo-joints", type=lambda s: tuple(s.split(",")), help="comma-separated servo joints")
    g.add_argument("--servo-effort", help="measured Q_e source: joint_states, none, or a topic")
    g.add_argument("--free-effort", help="Q_f source: zero (unactuated), joint_states, none, or a topic")
    g.add_argument("--split", choices=("by_trial", "by_bag"), help="validation/test by trial or by recording")
    g.add_argument(
        "--cyclic-joints",
        type=lambda s: tuple(s.split(",")),
        help="comma-separated joints the Lagrangian does not depend on (not network inputs)",
    )
    g.add_argument(
        "--urdf",
        dest="robot_description",
        metavar="FILE",
        help="the robot's URDF: rigid-body prior identified from the bag (the mapping's robot_description)",
    )
    g.add_argument("--savgol-window", type=int, help="Savitzky–Golay window (odd, samples)")
    g.add_argument("--savgol-order", type=int, help="Savitzky–Golay polynomial order")
    g.add_argument("--val-fraction", type=float, help="share of trials held out for validation")


def add_run_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of the run itself: checkpoints and resume, early stopping, report, torch.compile."""
    parser.add_argument(
        "--checkpoint-every",
        type=int,
        default=1000,
        help="epochs between checkpoints (last.pt, written atomically; default 1000)",
    )
    parser.add_argument(
        "--resume",
        nargs="?",
        const="",
        default=None,
        metavar="CHECKPOINT",
        help="continue an interrupted run from CHECKPOINT (file or folder; default: "
        "last.pt in the checkpoint folder); same options and data as the interrupted run",
    )
    parser.add_argument(
        "--patience",
        type=int,
        default=0,
        help="early stopping: validations without improvement before stopping (0: off, the default)",
    )
    parser.add_argument(
        "--min-delta",
        type=float,
        default=0.0,
        help="early stopping: smallest decrease of the validation nMSE that counts (q̈_f; q̈ for "
        "the acceleration families)",
    )
    parser.add_argument(
        "--report",
        metavar="DIR",
        help="report folder: loss curves, validation plots, metrics.json (default <out stem>_report/)",
    )
    parser.add_argument("--no-report", action="store_true", help="do not write the report folder")
    parser.add_argument(
        "--grad-clip",
        type=float,
        default=None,
        metavar="NORM",
        help="clip the gradient norm (default: off for servo_lnn/delan, 10 for the acceleration families)",
    )
    parser.add_argument(
        "--compile",
        action="store_true",
        help="torch.compile the loss (falls back to eager with a warning where it fails)",
    )


def run_spec(args: argparse.Namespace) -> RunSpec:
    """The RunSpec of parsed ``ros-lnn train`` options (the namespace stays here)."""
    test_trials = (
        tuple(s.strip() for s in args.test_trials.split(",") if s.strip()) if args.test_trials else ()
    )
    resume = False if args.resume is None else (args.resume or True)
    report = False if args.no_report else (args.report or True)
    return RunSpec(
        family=args.model,
        system=args.system,
        data=args.data,
        bags=tuple(str(b) for b in args.bag or ()),
        val_bags=tuple(str(b) for b in args.val_bag or ()),
        test_bags=tuple(str(b) for b in args.test_bag or ()),
        bag_config=args.config,
        bag_mapping={k: getattr(args, k) for k in OVERRIDABLE if getattr(args, k) is not None},
        with_qe=args.with_qe,
        n_train=args.n_train,
        split_seed=args.split_seed,
        test_trials=test_trials,
        trajectories=args.trajectories,
        duration=args.duration,
        links=args.links,
        hidden=tuple(args.hidden) if args.hidden else None,
        activation=args.activation,
        diag_activation=args.diag_activation,
        epsilon=args.epsilon,
        angle_features=args.angle_features,
        dissipation=args.dissipation,
        epochs=args.epochs,
        batch=args.batch,
        lr=args.lr,
        weight_decay=args.weight_decay,
        grad_clip=args.grad_clip,
        seed=args.seed,
        device=args.device,
        dtype=args.dtype,
        threads=args.threads,
        log_every=args.log_every,
        val_every=args.val_every,
        checkpoint_dir=args.checkpoint_dir,
        checkpoint_every=args.checkpoint_every,
        resume=resume,
        patience=args.patience,
        min_delta=args.min_delta,
        compile=args.compile,
        out=args.out,
        export_dtype=args.export_dtype,
        exporter=args.exporter,
        report=report,
    )


def canonical_command(args: argparse.Namespace) -> str:
    """The command with every effective option spelled out, so it reproduces the run as given."""
    return command_line(run_spec(args).resolved())


def run(args: argparse.Namespace) -> int:
    from ..arm.mapping import is_arm_config
    from ..training.run import run as run_training

    if args.config and is_arm_config(args.config):
        return train_arm_model(args)

    result = run_training(run_spec(args), progress=lambda line: print(line, flush=True))
    if result is None:  # torchrun: another rank exports and reports
        return 0
    print(result.test_summary)
    if result.report is not None:
        print(f"report: {result.report['dir']} ({', '.join(result.report['files'])})")
    print(f"wrote {result.out} ({result.history['seconds']:.0f} s training on {result.history['device']})")
    return 0


def _arm_urdf(args, mapping) -> str:
    urdf = getattr(args, "urdf", None) or mapping.robot_description
    if not urdf:
        raise ConfigError("an arm model needs the robot's URDF: --urdf, or robot_description in the config")
    if not getattr(args, "urdf", None) and not Path(urdf).is_absolute() and args.config:
        urdf = str(Path(args.config).parent / urdf)
    return urdf


def train_arm_model(args) -> int:
    """The fully actuated arm's ``ros-lnn train``: chosen when the config's mapping lists
    ``actuated_joints``."""
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
    urdf = _arm_urdf(args, mapping)
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
    from ..arm.evaluation import evaluate_arm, plot_torque
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
            plot_torque(folder, f"test_{name}", m.pop("series"), model.joints)
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
