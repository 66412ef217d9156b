"""The ``ros-lnn`` command. Each subcommand lives in ``ros_lnn/commands/<name>.py`` (``-`` → ``_``) with
``add_arguments(parser)`` and ``run(args) -> int``; modules are imported only when their subcommand
runs, so the deployment commands never import torch."""

from __future__ import annotations

import argparse
import importlib
import sys

from . import __version__
from .errors import RosLnnError

DESCRIPTION = (
    "Physics-structured learned dynamics for ROS 2: the live estimator demo, simulators, rosbag2 "
    "recording, training and export of ServoLNN/DeLaN and the model zoo, evaluation and benchmarks. "
    "'ros-lnn COMMAND --help' describes each command."
)

COMMANDS = {
    "demo": "live: crane simulator + servo_lnn estimator as ROS 2 nodes in one process, estimated vs true "
    "(--offline: the model on a held-out trial; --dac: the controller demo)",
    "simulate": "simulate the reference systems and write trials (npz or rosbag2)",
    "record": "record the configured topics to rosbag2 through rclpy",
    "reindex": "make a rosbag2 that was never closed (killed recorder, full disk) readable: metadata.yaml "
    "rebuilt from its storage file",
    "train": "train a model (ServoLNN by default) and export it to ONNX",
    "export": "export a trained checkpoint to ONNX with metadata",
    "evaluate": "evaluate an ONNX model on simulated or recorded trials",
    "convert": "a robot's CSV log (UR RTDE, libfranka, vendor) → rosbag2 /joint_states by a column map",
    "generate-arm": "a realistic recording of a simulated arm (URDF, friction, noise, jitter, payload)",
    "excite": "design an exciting trajectory for arm identification (JointTrajectory YAML + report)",
    "identify-payload": "an arm model + a recording with a payload → its mass, CoM, inertia and a new model",
    "calibrate-observer": "collision thresholds of the effort_observer node from collision-free arm "
    "recordings",
    "bench": "benchmarks: inference, node, control, dac-node, fault, flood, stop, soak, ingest, train, "
    "delan, realdata, realarm, collision, zoo",
}


def _load(name):
    return importlib.import_module(f"ros_lnn.commands.{name.replace('-', '_')}")


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="ros-lnn", description=DESCRIPTION)
    parser.add_argument("--version", action="version", version=f"ros_lnn {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, help_text in COMMANDS.items():
        p = sub.add_parser(name, help=help_text, description=help_text)
        if only is None or only == name:
            try:
                _load(name).add_arguments(p)
            except ModuleNotFoundError as exc:
                if only == name:
                    raise RosLnnError(f"'{name}' is not available in this installation: {exc}") from exc
    return parser


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    command = next((a for a in argv if a in COMMANDS), None)
    try:
        args = build_parser(only=command).parse_args(argv)
        if args.command is None:
            build_parser().print_help()
            return 2
        return int(_load(args.command).run(args) or 0)
    except RosLnnError as exc:
        print(f"ros-lnn {command or ''}: error: {exc}".replace("  ", " "), file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
