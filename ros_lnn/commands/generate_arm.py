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


def run(args) -> int:
    import yaml

    from ..arm.excitation import SampledTrajectory, read_joint_trajectory
    from ..arm.fourier import FourierTrajectory, random_multisine
    from ..arm.generator import ArmGenerator, GeneratorOptions, Payload, write_recording

    joints = [j.strip() for j in args.joints.split(",") if j.strip()]
    gen = ArmGenerator(args.urdf, joints, seed=args.arm_seed)
    payload: Payload | None = None
    if args.payload:
        v = [float(x) for x in args.payload.split(",")]
        if len(v) not in (4, 7):
            raise ConfigError("--payload: mass,cx,cy,cz or mass,cx,cy,cz,Ixx,Iyy,Izz")
        payload = Payload(v[0], np.array(v[1:4]), np.diag(v[4:7]) if len(v) == 7 else np.zeros((3, 3)))
    traj: FourierTrajectory | SampledTrajectory | None
    if args.trajectory == "random":
        traj = random_multisine(gen.limits, args.duration, 5, seed=args.seed, margin=0.05)
    elif args.trajectory:
        traj = read_joint_trajectory(args.trajectory)
        if traj.joints != gen.joints:
            raise ConfigError(f"{args.trajectory}: joints {list(traj.joints)}, expected {list(gen.joints)}")
    else:
        traj = None
    options = GeneratorOptions(rate_hz=args.rate, effort=args.effort, noise=not args.noise_free)
    duration = traj.duration if isinstance(traj, SampledTrajectory) else args.duration
    rec = gen.generate(duration, trajectory=traj, payload=payload, options=options, seed=args.seed)
    path = write_recording(args.out, rec, storage=args.storage)

    mapping = {
        "actuated_joints": list(rec.mapping.actuated_joints),
        "effort": rec.mapping.effort,
        **({"effort_scale": dict(rec.mapping.effort_scale)} if rec.mapping.effort_scale else {}),
    }
    Path(f"{path}.mapping.yaml").write_text(yaml.safe_dump({"arm": mapping}, sort_keys=False))
    Path(f"{path}.truth.json").write_text(json.dumps(gen.truth(payload), indent=1) + "\n")
    print(
        f"wrote {path}: {len(rec.t)} joint states, {rec.t[-1]:.1f} s; {path}.mapping.yaml, {path}.truth.json"
    )
    return 0
