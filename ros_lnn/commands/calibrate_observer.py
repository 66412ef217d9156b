"""``ros-lnn calibrate-observer``: collision thresholds of the effort_observer node from recordings of
the arm moving freely (no contact).

Each bag's joint states (read with the mapping the model was trained with, or ``--config``) go through
the same observer the node runs (``--method``, ``--gain``); per joint the band
``velocity_slope · |q̇| + static`` is fitted to the residuals' spread and scaled for
``--false-alarm-rate`` false alarms per hour (:func:`ros_lnn.arm.observer.calibrate`). The YAML names
the observer it was made for; the node refuses thresholds made for another method or gain.
No torch needed."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..errors import ConfigError


def add_arguments(parser):
    parser.add_argument(
        "--model", required=True, help="arm model (.onnx from ros-lnn train with an arm config)"
    )
    parser.add_argument(
        "--bag", nargs="+", required=True, metavar="FREE_MOTION_BAG", help="collision-free recordings"
    )
    parser.add_argument(
        "--out", required=True, help="thresholds YAML to write (the node's thresholds parameter)"
    )
    parser.add_argument(
        "--false-alarm-rate",
        type=float,
        default=0.1,
        help="false alarms per hour the thresholds aim at (0.1)",
    )
    parser.add_argument(
        "--method", choices=("momentum", "direct"), default="momentum", help="observer (momentum)"
    )
    parser.add_argument(
        "--gain",
        type=float,
        nargs="+",
        default=[50.0],
        help="observer gain K (1/s): one, or one per joint (50)",
    )
    parser.add_argument(
        "--effort-timing",
        choices=("sampled", "held_until_stamp", "held_from_stamp"),
        default="sampled",
        help="what the recordings' effort is, as the node's effort_timing (sampled: the torque at the stamp)",
    )
    parser.add_argument(
        "--margin",
        type=float,
        default=0.1,
        help="thresholds at least (1 + margin) × the largest residual seen (0.1)",
    )
    parser.add_argument(
        "--skip-s", type=float, default=0.5, help="seconds of each recording the observer settles in"
    )
    parser.add_argument("--config", help="YAML with the arm mapping of the bags (default: the model's)")
    parser.add_argument(
        "--friction-state-start", choices=("measured", "neutral"), default="measured",
        help="a model with friction memory: its state at each recording's start, as the node's "
        "friction_state_start (measured)",
    )  # fmt: skip


def run(args) -> int:
    from ..arm import observer as ob
    from ..arm.mapping import ArmMapping
    from ..arm.model import ArmModel
    from ..arm.recording import read_arm_bag

    model = ArmModel(args.model)
    if args.config:
        mapping = ArmMapping.from_yaml(args.config)
    else:
        stored = model.meta.get("mapping")
        if not stored:
            raise ConfigError(f"{args.model}: no arm mapping in the model; give --config")
        mapping = ArmMapping.from_dict(stored, f"{args.model} (mapping)")
    if tuple(mapping.actuated_joints) != model.joints:
        raise ConfigError(
            f"the mapping's joints {list(mapping.actuated_joints)} differ from the model's "
            f"{list(model.joints)}"
        )
    gains = args.gain[0] if len(args.gain) == 1 else args.gain
    runs = []
    for bag in args.bag:
        rec = read_arm_bag(bag, mapping)
        if rec.qd is None:
            raise ConfigError(f"{bag}: no joint velocities; the observer needs them")
        observer = ob.make_observer(model, args.method, gains, effort_timing=args.effort_timing)
        ob.friction_state_start(observer, args.friction_state_start)
        r = ob.run_observer(observer, rec.t, rec.q, rec.qd, rec.tau)
        keep = rec.t - rec.t[0] >= args.skip_s
        runs.append((rec.t[keep], r[keep], rec.qd[keep]))
        print(
            f"{Path(bag).name}: {rec.duration:.1f} s, {len(rec)} joint states; largest |r| per joint "
            f"{np.round(np.abs(r[keep]).max(0), 3).tolist()} N·m"
        )
    th = ob.calibrate(runs, model.joints, false_alarm_rate_per_h=args.false_alarm_rate, margin=args.margin)
    th.info["observer"] = {
        "method": args.method,
        "gains": [float(g) for g in args.gain],
        "effort_timing": args.effort_timing,
        "model": Path(args.model).name,
    }
    spread = ob.spread_by_motion(runs, model.joints)
    th.info["spread"] = spread
    th.save(args.out)
    print(
        f"residual |r| at rest (|q̇| < {spread['still_velocity']:g} rad/s) and in motion, 99th percentile / "
        "largest [N·m]; the threshold at rest and at the median speed in motion:"
    )
    speeds = np.abs(np.concatenate([v for _, _, v in runs]))
    for k, (j, b, a) in enumerate(zip(model.joints, th.static, th.velocity_slope)):
        entry = spread["joints"][j]
        moving = speeds[:, k][speeds[:, k] >= spread["still_velocity"]]
        v_med = float(np.median(moving)) if len(moving) else 0.0
        print(
            f"  {j}: |r| > {a:.3f} · |q̇| + {b:.3f}; at rest {_pair(entry['rest'])} "
            f"(threshold {b:.3f}); in motion {_pair(entry['motion'])} (threshold {a * v_med + b:.3f} at "
            f"{v_med:.2f} rad/s)"
        )
    print(
        f"thresholds for {args.false_alarm_rate:g} false alarms per hour from {th.info['seconds']:.0f} s "
        "of free "
        f"motion written to {args.out}"
    )
    return 0


def _pair(entry: dict) -> str:
    if entry["p99"] is None:
        return "no samples"
    return f"{entry['p99']:.3f} / {entry['max']:.3f} ({entry['samples']} samples)"
