"""``ros-lnn train --model FAMILY``: train any model family on its reference data and export it to
ONNX (``--out x.onnx``, the default) or save the checkpoint (``--out x.pt``).

Families (:mod:`ros_lnn.families`): ``servo_lnn`` (default; the ServoLNN paper's setup on the crane),
``delan`` (a ServoLNN with no servo coordinates, on the DeLaN character data or a chain), ``lnn`` /
``lnn_nh`` (nonholonomic examples; ``lnn`` also chains), ``tlnn`` / ``node`` (planar chains). This
module turns the options into a :class:`~ros_lnn.training.spec.RunSpec`, runs it
(:func:`ros_lnn.training.run.run`) and prints the result. A config whose mapping lists
``actuated_joints`` trains a fully actuated arm's model instead, from the same RunSpec
(:func:`ros_lnn.arm.run.run_arm`).
"""

from __future__ import annotations

import argparse
import dataclasses
import types
import typing

from ..bags.mapping import SERVO_TYPES
from ..families.base import BAG_MAPPING_OPTIONS
from ..training.spec import RunSpec, command_line


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of ``ros-lnn train``: one per :class:`RunSpec` field, generated from the field's
    ``option`` metadata (flag, help, choices; type and arity from its annotation), plus the few this
    module defines itself (``CUSTOM_OPTIONS``: the Q_e pair, ``--resume [CKPT]``, ``--report/--no-report``
    and the bag mapping's overrides)."""
    hints = typing.get_type_hints(RunSpec)
    for f in dataclasses.fields(RunSpec):
        cli = f.metadata.get("cli")
        if cli is None:
            continue
        kwargs = {k: v for k, v in cli.items() if k not in ("flag", "parse")}
        if "type" not in kwargs and "action" not in kwargs:
            base, many = _argument_type(hints[f.name])
            if base is bool:
                kwargs["action"] = "store_true"
            else:
                kwargs["type"] = base
                if many:
                    kwargs["nargs"] = "+"
        kwargs.setdefault("default", None if f.default in ((), None) else f.default)
        parser.add_argument(_flag(f), **kwargs)
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
        "--report",
        metavar="DIR",
        help="report folder: loss curves, validation plots, metrics.json (default <out stem>_report/)",
    )
    parser.add_argument("--no-report", action="store_true", help="do not write the report folder")
    add_mapping_arguments(parser)


def _flag(f: dataclasses.Field) -> str:
    """A RunSpec field's option (``--bag`` for ``bags``); the namespace attribute is the option's name."""
    return f.metadata["cli"]["flag"] or "--" + f.name.replace("_", "-")


def _argument_type(annotation) -> tuple[type, bool]:
    """(argparse type, several values?) of a RunSpec annotation: ``int | None`` → (int, False),
    ``tuple[str, ...]`` → (str, True), ``bool`` → (bool, False)."""
    kind = annotation
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        kind = next(a for a in typing.get_args(annotation) if a is not type(None))
    if typing.get_origin(kind) is tuple:
        return typing.get_args(kind)[0], True
    return kind, False


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


def run_spec(args: argparse.Namespace) -> RunSpec:
    """The RunSpec of parsed ``ros-lnn train`` options (the namespace stays here): every generated
    option by its field, then the custom ones."""
    values = {}
    for f in dataclasses.fields(RunSpec):
        cli = f.metadata.get("cli")
        if cli is None:
            continue
        value = getattr(args, _flag(f)[2:].replace("-", "_"))
        if cli["parse"] is not None:
            value = cli["parse"](value)
        elif isinstance(value, list):
            value = tuple(value)
        elif value is None and f.default == ():
            value = ()
        values[f.name] = value
    return RunSpec(
        **values,
        bag_mapping={k: getattr(args, k) for k in BAG_MAPPING_OPTIONS if getattr(args, k) is not None},
        with_qe=args.with_qe,
        resume=False if args.resume is None else (args.resume or True),
        report=False if args.no_report else (args.report or True),
    )


def canonical_command(args: argparse.Namespace) -> str:
    """The command with every effective option spelled out, so it reproduces the run as given."""
    return command_line(run_spec(args).resolved())


def run(args: argparse.Namespace) -> int:
    """One spec for every run: a model family's (:func:`ros_lnn.training.run.run`) or, when the mapping
    lists ``actuated_joints``, an arm's (:func:`ros_lnn.arm.run.run_arm`); the same lines after either."""
    from ..arm.run import is_arm_run, run_arm
    from ..training.run import run as run_training

    spec = run_spec(args)
    progress = lambda line: print(line, flush=True)  # noqa: E731
    if is_arm_run(spec):
        arm = run_arm(spec, progress)
        summary, out, report, trained = arm.test_summary, arm.out, arm.report, f"{arm.seconds:.0f} s"
    else:
        result = run_training(spec, progress=progress)
        if result is None:  # torchrun: another rank exports and reports
            return 0
        summary, out, report = result.test_summary, result.out, result.report
        trained = f"{result.history['seconds']:.0f} s training on {result.history['device']}"
    if summary:
        print(summary)
    if report is not None:
        print(f"report: {report['dir']} ({', '.join(report['files'])})")
    print(f"wrote {out} ({trained})")
    return 0
