"""``ros-lnn identify-payload``: an arm model + a recording with an unknown payload → the payload's mass,
centre of mass and inertia, and a new model that carries it (no torch). See :mod:`ros_lnn.arm.payload`."""

from __future__ import annotations

import argparse


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--model", required=True, help="arm model (.onnx) written by ros-lnn train for an arm"
    )
    parser.add_argument("--bag", required=True, action="append", help="recording(s) with the payload")
    parser.add_argument(
        "--reference-bag",
        action="append",
        default=[],
        help="recording(s) without the payload on the same trajectory: the model's own error of the last "
        "link and friction is estimated alongside and cancels (without one, it goes into the payload)",
    )
    parser.add_argument(
        "--config", default=None, help="mapping YAML for the bag (default: the mapping stored in the model)"
    )
    parser.add_argument("--out", default=None, help="new model with the payload (default: report only)")
    parser.add_argument("--json", default=None, help="write the payload report as JSON")
    parser.add_argument(
        "--point-mass",
        action="store_true",
        help="fit mass and centre of mass only (inertia about the CoM = 0)",
    )
    parser.add_argument(
        "--no-offsets",
        action="store_true",
        help="do not fit a per-joint torque offset along with the payload",
    )


def run(args: argparse.Namespace) -> int:
    import json
    from pathlib import Path

    import numpy as np

    from ..arm.mapping import ArmMapping
    from ..arm.model import ArmModel
    from ..arm.payload import identify_payload, model_mapping, write_model_with_payload
    from ..arm.recording import read_arm_bag
    from ..errors import ConfigError

    for target in (args.out, args.json):
        if target and not Path(target).absolute().parent.is_dir():
            raise ConfigError(f"{target}: the folder {Path(target).absolute().parent} does not exist")
    if args.out and Path(args.out).resolve() == Path(args.model).resolve():
        raise ConfigError("--out is the input model; write the model with the payload to a new file")
    model = ArmModel(args.model)
    print(model.describe())
    mapping = ArmMapping.from_yaml(args.config) if args.config else model_mapping(model)
    if tuple(mapping.actuated_joints) != model.joints:
        raise ConfigError(
            f"the mapping's actuated_joints {list(mapping.actuated_joints)} differ from the model's "
            f"{list(model.joints)}"
        )
    recordings = [read_arm_bag(b, mapping) for b in args.bag]
    reference = [read_arm_bag(b, mapping) for b in args.reference_bag]
    if not reference:
        print("no --reference-bag: the model's error of the last link goes into the payload estimate")
    fit = identify_payload(
        model,
        recordings,
        reference=reference or None,
        offsets=not args.no_offsets,
        point_mass=args.point_mass,
        progress=print,
    )
    p = fit.payload
    eig = np.linalg.eigvalsh(p.inertia)
    print(f"payload on {fit.link}: mass {p.mass:.4f} kg")
    print(f"  centre of mass [mm] in {fit.link}'s frame: {', '.join(f'{1000 * c:.1f}' for c in p.com)}")
    print(
        f"  inertia about the centre of mass, principal moments [kg·m²]: {', '.join(f'{e:.3g}' for e in eig)}"
    )
    for note in fit.notes:
        print(f"  note: {note}")
    print(
        f"torque rre on the recording [%] (mean over joints): model {np.mean(fit.rre_before):.1f} → "
        f"with the payload {np.mean(fit.rre_after):.1f}"
    )
    if args.json:
        Path(args.json).write_text(json.dumps(fit.report(), indent=1) + "\n")
    if args.out:
        source = ", ".join(Path(b).name for b in args.bag)
        if reference:
            source += " (reference " + ", ".join(Path(b).name for b in args.reference_bag) + ")"
        path = write_model_with_payload(args.model, args.out, fit, source=source)
        print(f"wrote {path}")
    return 0
