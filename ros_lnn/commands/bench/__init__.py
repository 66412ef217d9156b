"""``ros-lnn bench <what>``: benchmarks whose figures go into closing notes and docs/benchmarks.md.

One module per benchmark in this package (``bench/<name>.py`` with ``bench_<name>(args) -> dict``),
imported only when its benchmark runs (:data:`BENCHES`)."""

from __future__ import annotations

import importlib

# name -> (module, function, help)
BENCHES = {
    "inference": (
        "ros_lnn.commands.bench.inference",
        "bench_inference",
        "ONNX runtime vs torch (analytic) vs torch (autograd) per-sample latency, batched throughput",
    ),
    "node": (
        "ros_lnn.commands.bench.node",
        "bench_node",
        "estimator node driven at 1 kHz / 5 kHz over DDS (--observer: the effort_observer node at 1 kHz "
        "on a simulated Panda)",
    ),
    "control": ("ros_lnn.commands.bench.control", "bench_control", "DAC controller step time for N bodies"),
    "dac-node": (
        "ros_lnn.commands.bench.control",
        "bench_dac_node",
        "dac_controller node at 1 kHz over DDS, model-only and with the learned port (--model)",
    ),
    "fault": (
        "ros_lnn.commands.bench.fault",
        "bench_fault",
        "fault-injection soak of servo_lnn, sim and dac_controller (--duration s, default 120; --quick: "
        "one round)",
    ),
    "flood": (
        "ros_lnn.commands.bench.flood",
        "bench_flood",
        "servo_lnn and dac_controller each under a 20 kHz joint_states flood (--rate Hz, --duration s, "
        "default 30): service latency p99 during it, resident memory before and after",
    ),
    "soak": (
        "ros_lnn.commands.bench.soak",
        "bench_soak",
        "the nodes of a robot for --duration s (default 180; 1800 for half an hour), each its own process, "
        "with faults of the fault harness at random intervals: memory growth, latency p99 at the start and "
        "the end, crashes, hangs, missed stops (--rate: the simulators' Hz, default 200)",
    ),
    "stop": (
        "ros_lnn.commands.bench.stop",
        "bench_stop",
        "the demo arm's closed loop with gains of 1e6 set live: overshoot past the joint limits after the "
        "latched stop, zero efforts against the protective stop (--duration s, default 10)",
    ),
    "ingest": (
        "ros_lnn.commands.bench.ingest",
        "bench_ingest",
        "rosbag ingest speed against the naive rosbags loop",
    ),
    "train": (
        "ros_lnn.commands.bench.train",
        "bench_train",
        "training steps/s: analytic vs autograd, paper schedule",
    ),
    "ddp": (
        "ros_lnn.commands.bench.ddp",
        "bench_ddp",
        "ros-lnn train in one process and under torchrun (--nproc N, default 2; --epochs): speed-up and "
        "how far apart the final weights are",
    ),
    "delan": (
        "ros_lnn.commands.bench.delan",
        "bench_delan",
        "DeLaN character benchmark (test letters e, q, v; --data DIR) against the published figures, "
        "rollouts",
    ),
    "realdata": (
        "ros_lnn.commands.bench.realdata",
        "bench_realdata",
        "train on one robot recording, test on others: ServoLNN vs structural LS fit and zero, ablations",
    ),
    "realarm": (
        "ros_lnn.commands.bench.realarm",
        "bench_realarm",
        "a fully actuated arm (--bag, --test-bag or --test-fraction, --config, --urdf): learned model vs "
        "regressor least squares vs URDF, held-out torque error",
    ),
    "collision": (
        "ros_lnn.commands.bench.collision",
        "bench_collision",
        "external torque observer on a simulated Panda with pulses: identified model vs URDF-nominal "
        "(--duration s of training/calibration motion, default 60; --model: skip training; --at-rest: "
        "pushes on a standing arm with stiction, the model with friction memory vs the least-squares fit)",
    ),
    "armcontrol": (
        "ros_lnn.commands.bench.armcontrol",
        "bench_armcontrol",
        "a simulated Panda under feed-forward + PD: the URDF's model vs an identified arm model vs the true "
        "one (--duration s of identification recording, default 30; --model: skip training; --dds: the "
        "loop over DDS too)",
    ),
    "zoo": (
        "ros_lnn.commands.bench.zoo",
        "bench_zoo",
        "the papers' studies: zoo [servo-seeds|tlnn|tlnn-forced|lnn-nh|partial|examples|delan] "
        "(JSON and PNG in reports/zoo)",
    ),
}


def add_arguments(parser):
    import argparse

    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    listing = "\n".join(f"  {name:<10} {text}" for name, (_, _, text) in sorted(BENCHES.items()))
    parser.description = "Benchmarks whose figures go into closing notes and docs/benchmarks.md:\n" + listing
    parser.add_argument("what", choices=sorted(BENCHES), help="which benchmark (listed above)")
    parser.add_argument(
        "studies",
        nargs="*",
        metavar="STUDY",
        help="bench zoo: which studies (default: all; see docs/studies.md)",
    )
    parser.add_argument("--json", metavar="FILE", help="also write the figures as JSON")
    parser.add_argument("--quick", action="store_true", help="fewer repetitions (smoke run)")
    parser.add_argument("--model", help="ONNX model (default: the shipped one)")
    parser.add_argument("--duration", type=float, default=None, help="seconds, for timed benchmarks")
    parser.add_argument(
        "--rate",
        type=float,
        default=None,
        help="bench flood: joint_states Hz (20 000); bench soak: sims' Hz (200)",
    )
    parser.add_argument(
        "--observer",
        action="store_true",
        help="bench node: the effort_observer node at 1 kHz on a simulated Panda instead of servo_lnn "
        "(--model: an arm model; default: one trained first)",
    )
    parser.add_argument(
        "--dds",
        action="store_true",
        help="bench armcontrol: also run the loop over DDS (dac_controller and arm_sim, each in its process)",
    )
    parser.add_argument(
        "--lockstep",
        action="store_true",
        help="bench armcontrol --dds: arm_sim steps once per command on simulated time (/clock) instead "
        "of keeping wall time",
    )
    parser.add_argument(
        "--output",
        "--out",
        dest="output",
        help="folder for the figures a benchmark writes (control: the closed-loop demo's, "
        "default reports/dac_demo; zoo, delan: JSON and PNG, default reports/zoo)",
    )
    parser.add_argument("--nproc", type=int, help="bench ddp: torchrun processes (default 2)")
    parser.add_argument("--seeds", type=int, help="bench zoo: number of seeds (servo-seeds 10, lnn-nh 3)")
    parser.add_argument("--epochs", type=int, help="bench zoo/delan/realarm/ddp: training epochs")
    parser.add_argument(
        "--seed",
        type=int,
        default=0,
        help="bench realarm: the residual's first seed (members use seed … seed + 3)",
    )
    parser.add_argument("--links", type=int, nargs="+", help="bench zoo tlnn: chain sizes (default 2 3 4)")
    parser.add_argument("--data", help="bench delan, zoo delan: the DeLaN character data (folder or .npz)")
    parser.add_argument(
        "--reference",
        metavar="DIR",
        help="bench train: a checkout of the published DeLaN implementation (milutter/"
        "deep_lagrangian_networks), trained side by side with this package's DeLaN (imported from DIR)",
    )
    parser.add_argument(
        "--scale-samples",
        type=int,
        help="bench train: samples of the scale-out epoch (default 3 600 000, an hour of 1 kHz data; 0 skips "
        "it; --quick skips it unless given)",
    )
    parser.add_argument(
        "--at-rest",
        action="store_true",
        help="bench collision: pushes on a standing arm with stiction (friction memory vs the fit)",
    )
    arm = parser.add_argument_group("bench realarm")
    arm.add_argument("--bag", nargs="+", metavar="BAG", help="training recording(s) of the arm")
    arm.add_argument("--test-bag", nargs="+", metavar="BAG", help="held-out recording(s)")
    arm.add_argument(
        "--test-fraction",
        type=float,
        default=0.3,
        help="without --test-bag: the last share of each --bag held out (0.3)",
    )
    arm.add_argument("--config", help="YAML whose bag: section lists actuated_joints (the arm mapping)")
    arm.add_argument(
        "--urdf",
        help="the robot's URDF (default: the config's robot_description; without one the learned model "
        "is DeLaN + joint friction, compared with zero torque and the friction-only model)",
    )


def run(args) -> int:
    module, func, _ = BENCHES[args.what]
    if args.what == "node" and getattr(args, "observer", False):
        module, func = "ros_lnn.commands.bench.observer_node", "bench_observer_node"
    if args.what == "collision" and getattr(args, "at_rest", False):
        module, func = "ros_lnn.commands.bench.collision_rest", "bench_collision_at_rest"
    if args.studies and args.what != "zoo":
        from ...errors import ConfigError

        names = " ".join(args.studies)
        raise ConfigError(f"bench {args.what} takes no study names ({names}); only bench zoo does")
    try:
        fn = getattr(importlib.import_module(module), func)
    except (ModuleNotFoundError, AttributeError) as exc:
        from ...errors import RosLnnError

        raise RosLnnError(f"benchmark '{args.what}' is not available: {exc}") from exc
    result = fn(args)
    if args.json and isinstance(result, dict):
        import json

        with open(args.json, "w") as fh:
            json.dump(result, fh, indent=2, default=float)
        print(f"figures written to {args.json}")
    return 0
