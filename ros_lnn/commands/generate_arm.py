"""``ros-lnn generate-arm URDF --joints … -o BAG``: one realistic recording of a simulated arm
(:mod:`ros_lnn.arm.generator`), its mapping (``BAG.mapping.yaml``, for training) and its truth
(``BAG.truth.json``)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from ..errors import ConfigError


def add_arguments(parser):
    parser.add_argument("urdf")
    parser.add_argument("--joints", required=True, help="actuated joints, comma-separated")
    parser.add_argument("-o", "--out", required=True, help="rosbag2 directory to write")
    parser.add_argument("--duration", type=float, default=20.0)
    parser.add_argument(
        "--trajectory", default="",
        help="a JointTrajectory YAML (ros-lnn excite), 'random' (a random multisine within the URDF's "
        "limits, as excite's baseline), or '' (a random one at 60 %% of the limits)",
    )  # fmt: skip
    parser.add_argument("--rate", type=float, default=500.0, help="Hz (100–1000)")
    parser.add_argument("--effort", choices=("motor_current", "joint_states"), default="motor_current")
    parser.add_argument("--noise-free", action="store_true")
    parser.add_argument("--seed", type=int, default=1, help="stamps, noise and the random trajectory")
    parser.add_argument("--arm-seed", type=int, default=0, help="the true arm (parameters, friction)")
    parser.add_argument(
        "--payload", default="", help="mass,cx,cy,cz[,Ixx,Iyy,Izz] (kg, m, kg·m² about the CoM)"
    )
    parser.add_argument("--storage", choices=("sqlite3", "mcap"), default="sqlite3")
    parser.add_argument(
        "--program", choices=("fourier", "ptp", "holds"), default="fourier",
        help="fourier: the --trajectory (default); ptp: point-to-point moves of several amplitudes with "
        "reversals and dwells (--dwell); holds: static holds at random poses",
    )  # fmt: skip
    parser.add_argument(
        "--dwell",
        default="0.3,1.5",
        metavar="MIN,MAX",
        help="ptp: dwell after each move, s (default 0.3,1.5)",
    )
    parser.add_argument(
        "--dynamic-friction", action="store_true",
        help="LuGre friction (presliding, breakaway, a torque held at rest) instead of the static law",
    )  # fmt: skip
    parser.add_argument(
        "--pushes", type=int, default=0, metavar="N",
        help="N pushes by a person on the standing arm (3-12 %% of a joint's effort limit, during dwells)",
    )  # fmt: skip


def run(args) -> int:
    import yaml

    from ..arm.excitation import SampledTrajectory, read_joint_trajectory
    from ..arm.fourier import FourierTrajectory, random_multisine
    from ..arm.generator import ArmGenerator, GeneratorOptions, Payload, write_recording
    from ..arm.programs import PointToPoint, holds, point_to_point

    joints = [j.strip() for j in args.joints.split(",") if j.strip()]
    gen = ArmGenerator(args.urdf, joints, seed=args.arm_seed, dynamic_friction=args.dynamic_friction)
    payload: Payload | None = None
    if args.payload:
        v = [float(x) for x in args.payload.split(",")]
        if len(v) not in (4, 7):
            raise ConfigError("--payload: mass,cx,cy,cz or mass,cx,cy,cz,Ixx,Iyy,Izz")
        payload = Payload(v[0], np.array(v[1:4]), np.diag(v[4:7]) if len(v) == 7 else np.zeros((3, 3)))
    traj: FourierTrajectory | SampledTrajectory | PointToPoint | None
    if args.program != "fourier" and args.trajectory:
        raise ConfigError(f"--program {args.program} makes its own trajectory; leave out --trajectory")
    if args.program == "ptp":
        traj = point_to_point(gen.limits, args.duration, seed=args.seed, dwell=_pair(args.dwell, "--dwell"))
    elif args.program == "holds":
        traj = holds(gen.limits, poses=max(1, int(args.duration // 6)), seed=args.seed)
    elif args.trajectory == "random":
        traj = random_multisine(gen.limits, args.duration, 5, seed=args.seed, margin=0.05)
    elif args.trajectory:
        traj = read_joint_trajectory(args.trajectory)
        if traj.joints != gen.joints:
            raise ConfigError(f"{args.trajectory}: joints {list(traj.joints)}, expected {list(gen.joints)}")
    else:
        traj = None
    options = GeneratorOptions(rate_hz=args.rate, effort=args.effort, noise=not args.noise_free)
    duration = traj.duration if isinstance(traj, (SampledTrajectory, PointToPoint)) else args.duration
    pushes = []
    if args.pushes:
        if not isinstance(traj, PointToPoint):
            raise ConfigError("--pushes act on a standing arm: give --program ptp or holds")
        pushes = push_schedule(traj.stops(), gen.effort_limits, args.pushes, args.seed)
    rec = gen.generate(
        duration, trajectory=traj, payload=payload, options=options, seed=args.seed, pushes=pushes
    )
    path = write_recording(args.out, rec, storage=args.storage)

    mapping = {
        "actuated_joints": list(rec.mapping.actuated_joints),
        "effort": rec.mapping.effort,
        **({"effort_scale": dict(rec.mapping.effort_scale)} if rec.mapping.effort_scale else {}),
    }
    Path(f"{path}.mapping.yaml").write_text(yaml.safe_dump({"arm": mapping}, sort_keys=False))
    truth = gen.truth(payload)
    truth["program"] = args.program
    truth["pushes"] = [p.__dict__ for p in pushes]
    Path(f"{path}.truth.json").write_text(json.dumps(truth, indent=1) + "\n")
    print(
        f"wrote {path}: {len(rec.t)} joint states, {rec.t[-1]:.1f} s; {path}.mapping.yaml, {path}.truth.json"
    )
    return 0


def _pair(text: str, option: str) -> tuple[float, float]:
    try:
        lo, hi = (float(x) for x in text.split(","))
    except ValueError:
        raise ConfigError(f"{option} {text!r}: give MIN,MAX in seconds") from None
    if not 0 <= lo <= hi:
        raise ConfigError(f"{option} {text!r}: give 0 <= MIN <= MAX")
    return lo, hi


def push_schedule(stops, effort_limits, count: int, seed: int, fractions=(0.03, 0.12)):
    """``count`` pushes in the longest dwells of ``stops`` ((start, end) s): one joint each, 3–12 % of
    its effort limit, random sign, 0.1–0.3 s from 0.1 s into the dwell."""
    from ..arm.simulation import Pulse

    rng = np.random.default_rng(seed + 7919)
    usable = sorted((s for s in stops if s[1] - s[0] >= 0.45), key=lambda s: s[0] - s[1])[:count]
    if len(usable) < count:
        raise ConfigError(f"--pushes {count}: the program has {len(usable)} dwells of 0.45 s or more")
    limits = np.asarray(effort_limits, dtype=float)
    out = []
    for start, end in sorted(usable):
        j = int(rng.integers(len(limits)))
        size = float(rng.uniform(*fractions)) * limits[j] * rng.choice([-1.0, 1.0])
        out.append(Pulse(j, size, start + 0.1, float(min(rng.uniform(0.1, 0.3), end - start - 0.2))))
    return out
