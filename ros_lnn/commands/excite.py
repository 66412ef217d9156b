"""``ros-lnn excite``: design an exciting Fourier-series trajectory for identification and write it as
a trajectory_msgs/JointTrajectory YAML plus the identifiability report (no torch). See
:mod:`ros_lnn.arm.excitation`."""

from __future__ import annotations

import argparse


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--urdf", required=True, help="the robot's URDF")
    parser.add_argument(
        "--joints", required=True, help="the actuated joints, comma-separated (others are locked at neutral)"
    )
    parser.add_argument(
        "--duration",
        type=float,
        required=True,
        metavar="S",
        help="period of the trajectory in s (the base frequency is 1/S)",
    )
    parser.add_argument(
        "--limits",
        default=None,
        help="limits over the URDF's: a YAML file or inline 'acceleration=5,velocity_scale=0.5,J.lower=-1' "
        "(keys velocity, acceleration, velocity_scale, acceleration_scale, "
        "J.lower|upper|velocity|acceleration)",
    )
    parser.add_argument(
        "--margin", type=float, default=0.05, help="fraction of each position range kept free at both ends"
    )
    parser.add_argument("--harmonics", type=int, default=5, help="harmonics per joint (default 5)")
    parser.add_argument(
        "--samples", type=int, default=200, help="states over one period the criterion is evaluated at"
    )
    parser.add_argument(
        "--max-seconds", type=float, default=60.0, help="time budget of the optimisation (default 60)"
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("-o", "--out", required=True, help="JointTrajectory YAML to write")
    parser.add_argument(
        "--report", default=None, help="identifiability report JSON (default: OUT with .report.json)"
    )
    parser.add_argument(
        "--step", type=float, default=0.1, help="time between trajectory points in s (default 0.1)"
    )
    parser.add_argument(
        "--lead-in", type=float, default=5.0, help="time to reach the start point in s (default 5)"
    )
    parser.add_argument("--periods", type=int, default=1, help="periods the file repeats (default 1)")
    parser.add_argument(
        "--dwell", type=float, default=0.0, metavar="S",
        help="append S seconds of point-to-point moves with stops and reversals of several amplitudes "
        "(0.1-10 %% of each range, dwells of 0.3-1 s): what excites friction with memory (default 0: none)",
    )  # fmt: skip


def run(args: argparse.Namespace) -> int:
    import json
    from pathlib import Path

    import numpy as np

    from ..arm.excitation import (
        arm_limits,
        design_excitation,
        dwell_program,
        joint_trajectory_message,
        write_joint_trajectory,
    )
    from ..arm.rigid_body import ArmRigidBody
    from ..errors import ConfigError

    joints = [j.strip() for j in args.joints.split(",") if j.strip()]
    if not joints:
        raise ConfigError("--joints: give the actuated joints, comma-separated")
    if not 0.0 <= args.margin < 0.4:
        raise ConfigError(f"--margin {args.margin}: give a fraction in [0, 0.4)")
    out = Path(args.out)
    if not out.parent.is_dir():
        raise ConfigError(f"{out}: the folder {out.parent} does not exist")
    if out.suffix not in (".yaml", ".yml"):
        raise ConfigError(f"{out}: the trajectory file must end in .yaml")
    arm = ArmRigidBody.from_urdf(args.urdf, joints)
    limits, notes = arm_limits(arm, args.limits)
    for note in notes:
        print(note)
    design = design_excitation(
        arm,
        limits,
        args.duration,
        harmonics=args.harmonics,
        samples=args.samples,
        margin=args.margin,
        max_seconds=args.max_seconds,
        seed=args.seed,
        progress=print,
    )
    design.notes = notes
    report = design.report(arm.joints)
    if args.dwell < 0:
        raise ConfigError(f"--dwell {args.dwell}: give seconds >= 0")
    stops = dwell_program(design.trajectory, limits, args.dwell, seed=args.seed) if args.dwell > 0 else None
    message = joint_trajectory_message(
        design.trajectory, arm.joints, step=args.step, lead_in=args.lead_in, periods=args.periods, then=stops
    )
    if stops is not None:
        deltas = np.diff(stops.poses, axis=0)
        report["dwell"] = {
            "seconds": stops.duration,
            "moves": len(stops.moves),
            "dwell_s": stops.dwells.tolist(),
            "reversals_per_joint": (np.sum(np.diff(np.sign(deltas), axis=0) != 0, axis=0)).tolist(),
            "smallest_step_rad": np.abs(deltas).min(0).tolist(),
            "largest_step_rad": np.abs(deltas).max(0).tolist(),
        }
        print(
            f"dwell program: {len(stops.moves)} point-to-point moves in {stops.duration:.1f} s after the "
            f"series, steps {np.abs(deltas).min():.4f}–{np.abs(deltas).max():.3f} rad, reversals per joint "
            + " ".join(str(v) for v in report["dwell"]["reversals_per_joint"])
        )
    report["file"] = {
        "points": len(message["points"]),
        "step_s": args.step,
        "lead_in_s": args.lead_in,
        "periods": args.periods,
    }
    comment = (
        f"Exciting trajectory by ros-lnn excite: {len(joints)} joints, period {args.duration:g} s, "
        f"{args.harmonics} harmonics; condition number {design.condition_number:.1f} "
        f"(random multisines: median {report['random_multisine_condition_number_median']:.1f}).\n"
        "ros2 topic pub --once /joint_trajectory_controller/joint_trajectory "
        f"trajectory_msgs/msg/JointTrajectory --yaml-file {out.name}"
    )
    write_joint_trajectory(out, message, comment)
    report_path = Path(args.report) if args.report else out.with_name(out.stem + ".report.json")
    report_path.write_text(json.dumps(report, indent=1) + "\n")
    peaks = report["peaks"]
    print(
        f"{'joint':<20} {'q range [rad]':>22} {'limits':>22} "
        f"{'max |q̇|':>9} {'limit':>7} {'max |q̈|':>9} {'limit':>7}"
    )
    for k, j in enumerate(arm.joints):
        print(
            f"{j:<20} {peaks['q_min'][k]:>10.3f} … {peaks['q_max'][k]:<9.3f} {limits.lower[k]:>10.3f} … "
            f"{limits.upper[k]:<9.3f} {peaks['qd_max'][k]:>9.3f} {limits.velocity[k]:>7.3f} "
            f"{peaks['qdd_max'][k]:>9.3f} {limits.acceleration[k]:>7.3f}"
        )
    print(f"wrote {out} ({len(message['points'])} points) and {report_path}")
    print(
        f"identifiability: {design.base_count} base parameters; "
        f"condition number {design.condition_number:.1f} "
        f"designed vs {report['random_multisine_condition_number_median']:.1f} for random multisines of the "
        "same limits (median of "
        f"{len(design.random_condition_numbers)})"
    )
    return 0
