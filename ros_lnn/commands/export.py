"""``ros-lnn export``: a checkpoint of any family → ONNX with metadata."""

from __future__ import annotations

import argparse


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "checkpoint",
        help="checkpoint written by ros-lnn train (--out x.pt, or final.pt/last.pt in the checkpoint folder)",
    )
    parser.add_argument("--out", required=True, help="ONNX file to write")
    parser.add_argument("--dtype", choices=("float32", "float64"), default="float32", help="graph precision")
    parser.add_argument(
        "--exporter",
        choices=("dynamo", "torchscript"),
        default="dynamo",
        help="torch.onnx exporter of servo_lnn/delan: dynamo (leaner, faster graph) or torchscript "
        "(exports in <1 s); the zoo families export with dynamo",
    )
    parser.add_argument(
        "--system", default="", help="system name for the metadata when the checkpoint has none"
    )


def run(args: argparse.Namespace) -> int:
    from ..training.checkpoint import export_checkpoint

    path = export_checkpoint(
        args.checkpoint, args.out, dtype=args.dtype, exporter=args.exporter, system=args.system
    )
    print(f"wrote {path}")
    return 0
