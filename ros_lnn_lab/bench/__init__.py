"""``ros-lnn bench <what>``: benchmarks whose figures go into closing notes and docs/benchmarks.md.

One module per benchmark in this package (``bench/<name>.py`` with ``bench_<name>(args) -> dict``),
imported only when its benchmark runs (:data:`BENCHES`); each takes the options :data:`TAKES` lists
(``ros-lnn bench NAME --help``)."""

from __future__ import annotations

import importlib
from typing import Any

# name -> (module, function, help)
BENCHES = {
    "inference": (
        "ros_lnn_lab.bench.inference",
        "bench_inference",
        "ONNX runtime vs torch (analytic) vs torch (autograd) per-sample latency, batched throughput",
    ),
    "node": (
        "ros_lnn_lab.bench.node",
        "bench_node",
        "estimator node driven at 1 kHz / 5 kHz over DDS (--observer: the effort_observer node at 1 kHz "
        "on a simulated Panda)",
    ),
    "control": ("ros_lnn_lab.bench.control", "bench_control", "DAC controller step time for N bodies"),
    "dac-node": (
        "ros_lnn_lab.bench.control",
        "bench_dac_node",
        "dac_controller node at 1 kHz over DDS, model-only and with the learned port (--model)",
    ),
    "fault": (
        "ros_lnn_lab.bench.fault",
        "bench_fault",
        "fault-injection soak of servo_lnn, sim and dac_controller (--duration s, default 120; --quick: "
        "one round)",
    ),
    "flood": (
        "ros_lnn_lab.bench.flood",
        "bench_flood",
        "servo_lnn, dac_controller and effort_observer each under a 20 kHz joint_states flood (--rate Hz, "
        "--duration s, default 30): service latency p99 during it, resident memory before and after",
    ),
    "soak": (
        "ros_lnn_lab.bench.soak",
        "bench_soak",
        "the nodes of a robot for --duration s (default 180; 1800 for half an hour), each its own process, "
        "with faults of the fault harness at random intervals: memory growth, latency p99 at the start and "
        "the end, crashes, hangs, missed stops (--rate: the simulators' Hz, default 200)",
    ),
    "stop": (
        "ros_lnn_lab.bench.stop",
        "bench_stop",
        "the demo arm's closed loop with gains of 1e6 set live: overshoot past the joint limits after the "
        "latched stop, zero efforts against the protective stop (--duration s, default 10)",
    ),
    "ingest": (
        "ros_lnn_lab.bench.ingest",
        "bench_ingest",
        "rosbag ingest speed against the naive rosbags loop",
    ),
    "train": (
        "ros_lnn_lab.bench.train",
        "bench_train",
        "training steps/s: analytic vs autograd, paper schedule",
    ),
    "ddp": (
        "ros_lnn_lab.bench.ddp",
        "bench_ddp",
        "ros-lnn train in one process and under torchrun (--nproc N, default 2; --epochs): speed-up and "
        "how far apart the final weights are",
    ),
    "delan": (
        "ros_lnn_lab.bench.delan",
        "bench_delan",
        "DeLaN character benchmark (test letters e, q, v; --data DIR) against the published figures, "
        "rollouts",
    ),
    "realdata": (
        "ros_lnn_lab.bench.realdata",
        "bench_realdata",
        "train on one robot recording, test on others: ServoLNN vs structural LS fit and zero, ablations",
    ),
    "realarm": (
        "ros_lnn_lab.bench.realarm",
        "bench_realarm",
        "a fully actuated arm (--bag, --test-bag or --test-fraction, --config, --urdf): learned model vs "
        "regressor least squares vs URDF, held-out torque error",
    ),
    "collision": (
        "ros_lnn_lab.bench.collision",
        "bench_collision",
        "external torque observer on a simulated Panda with pulses: identified model vs URDF-nominal "
        "(--duration s of training/calibration motion, default 60; --model: skip training; --at-rest: "
        "pushes on a standing arm with stiction, the model with friction memory vs the least-squares fit)",
    ),
    "armcontrol": (
        "ros_lnn_lab.bench.armcontrol",
        "bench_armcontrol",
        "a simulated Panda under feed-forward + PD: the URDF's model vs an identified arm model vs the true "
        "one (--duration s of identification recording, default 30; --model: skip training; --dds: the "
        "loop over DDS too)",
    ),
    "zoo": (
        "ros_lnn_lab.bench.zoo",
        "bench_zoo",
        "the papers' studies: zoo [servo-seeds|tlnn|tlnn-forced|lnn-nh|partial|examples|delan] "
        "(JSON and PNG in reports/zoo)",
    ),
}


#: every option a benchmark may take: name -> (flags, argparse keywords)
OPTIONS: dict[str, tuple[tuple[str, ...], dict[str, Any]]] = {
    "json": (("--json",), {"metavar": "FILE", "help": "also write the figures as JSON"}),
    "quick": (("--quick",), {"action": "store_true", "help": "fewer repetitions (smoke run)"}),
    "model": (("--model",), {"help": "ONNX model (default: the shipped one, or one trained first)"}),
    "duration": (("--duration",), {"type": float, "default": None, "help": "seconds"}),
    "rate": (
        ("--rate",),
        {"type": float, "default": None, "help": "flood: joint_states Hz (20 000); soak: the sims' Hz (200)"},
    ),
    "observer": (
        ("--observer",),
        {
            "action": "store_true",
            "help": "the effort_observer node at 1 kHz on a simulated Panda instead of servo_lnn "
            "(--model: an arm model; default: one trained first)",
        },
    ),
    "busy": (
        ("--busy",),
        {
            "action": "store_true",
            "help": "with --observer: a busy-loop process beside the node (the robot computer's other work)",
        },
    ),
    "dds": (
        ("--dds",),
        {
            "action": "store_true",
            "help": "also run the loop over DDS (dac_controller and arm_sim, each in its process)",
        },
    ),
    "lockstep": (
        ("--lockstep",),
        {
            "action": "store_true",
            "help": "with --dds: arm_sim steps once per command on simulated time (/clock)",
        },
    ),
    "output": (
        ("--output", "--out"),
        {"dest": "output", "help": "folder for the figures the benchmark writes"},
    ),
    "nproc": (("--nproc",), {"type": int, "help": "torchrun processes (default 2)"}),
    "seeds": (("--seeds",), {"type": int, "help": "number of seeds (servo-seeds 10, lnn-nh 3)"}),
    "epochs": (("--epochs",), {"type": int, "help": "training epochs"}),
    "seed": (
        ("--seed",),
        {"type": int, "default": 0, "help": "the residual's first seed (members use seed … seed + 3)"},
    ),
    "links": (("--links",), {"type": int, "nargs": "+", "help": "tlnn: chain sizes (default 2 3 4)"}),
    "data": (("--data",), {"help": "the DeLaN character data (folder or .npz)"}),
    "reference": (
        ("--reference",),
        {
            "metavar": "DIR",
            "help": "a checkout of the published DeLaN implementation (milutter/deep_lagrangian_networks), "
            "trained side by side with this package's DeLaN (imported from DIR)",
        },
    ),
    "scale_samples": (
        ("--scale-samples",),
        {
            "type": int,
            "help": "samples of the scale-out epoch (default 3 600 000, an hour of 1 kHz data; 0 skips it; "
            "--quick skips it unless given)",
        },
    ),
    "at_rest": (
        ("--at-rest",),
        {
            "action": "store_true",
            "help": "pushes on a standing arm with stiction: friction memory against the least-squares fit",
        },
    ),
    "bag": (("--bag",), {"nargs": "+", "metavar": "BAG", "help": "training recording(s) of the arm"}),
    "test_bag": (("--test-bag",), {"nargs": "+", "metavar": "BAG", "help": "held-out recording(s)"}),
    "test_fraction": (
        ("--test-fraction",),
        {
            "type": float,
            "default": 0.3,
            "help": "without --test-bag: the last share of each --bag held out (0.3)",
        },
    ),
    "config": (("--config",), {"help": "YAML whose bag: section lists actuated_joints (the arm mapping)"}),
    "urdf": (
        ("--urdf",),
        {
            "help": "the robot's URDF (default: the config's robot_description; without one the learned "
            "model is DeLaN + joint friction)"
        },
    ),
    "studies": (
        ("studies",),
        {"nargs": "*", "metavar": "STUDY", "help": "which studies (default: all; see docs/studies.md)"},
    ),
}

#: each benchmark's options (``--json`` for every one)
TAKES = {
    "inference": ("model", "quick"),
    "node": ("observer", "busy", "duration", "model", "quick"),
    "control": ("duration", "model", "output", "quick"),
    "dac-node": ("duration", "model", "output", "quick"),
    "fault": ("duration", "model", "quick"),
    "flood": ("duration", "model", "rate"),
    "soak": ("duration", "rate"),
    "stop": ("duration",),
    "ingest": ("quick",),
    "train": ("data", "epochs", "quick", "reference", "scale_samples"),
    "ddp": ("epochs", "nproc", "output", "quick"),
    "delan": ("data", "epochs", "output", "quick"),
    "realdata": ("quick",),
    "realarm": ("bag", "test_bag", "test_fraction", "config", "urdf", "epochs", "seed", "output"),
    "collision": ("at_rest", "duration", "model", "quick"),
    "armcontrol": ("dds", "lockstep", "duration", "model", "output", "quick"),
    "zoo": ("studies", "output", "quick", "seeds", "links", "data", "epochs"),
}


def _dest(name: str) -> str:
    return OPTIONS[name][1].get("dest", name)


def add_arguments(parser):
    """One subcommand per benchmark with its own options and ``--help``; every option's default is on
    the namespace whichever benchmark runs (a benchmark reads the ones it takes)."""
    import argparse

    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    listing = "\n".join(f"  {name:<10} {text}" for name, (_, _, text) in sorted(BENCHES.items()))
    parser.description = "Benchmarks whose figures go into closing notes and docs/benchmarks.md:\n" + listing
    defaults = {
        _dest(n): kw.get("default", False if kw.get("action") == "store_true" else None)
        for n, (_, kw) in OPTIONS.items()
    }
    sub = parser.add_subparsers(dest="what", metavar="BENCHMARK", required=True)
    for name in sorted(BENCHES):
        help_text = BENCHES[name][2]
        p = sub.add_parser(name, help=help_text, description=help_text)
        for option in ("json", *TAKES[name]):
            flags, kw = OPTIONS[option]
            p.add_argument(*flags, **kw)
        p.set_defaults(
            **{k: v for k, v in defaults.items() if k not in {_dest(o) for o in TAKES[name]} | {"json"}}
        )


def run(args) -> int:
    module, func, _ = BENCHES[args.what]
    if args.what == "node" and getattr(args, "observer", False):
        module, func = "ros_lnn_lab.bench.observer_node", "bench_observer_node"
    if args.what == "collision" and getattr(args, "at_rest", False):
        module, func = "ros_lnn_lab.bench.collision_rest", "bench_collision_at_rest"
    try:
        fn = getattr(importlib.import_module(module), func)
    except (ModuleNotFoundError, AttributeError) as exc:
        from ros_lnn.errors import RosLnnError

        raise RosLnnError(f"benchmark '{args.what}' is not available: {exc}") from exc
    result = fn(args)
    if args.json and isinstance(result, dict):
        import json

        with open(args.json, "w") as fh:
            json.dump(result, fh, indent=2, default=float)
        print(f"figures written to {args.json}")
    return 0
