"""``ros-lnn export``: a training checkpoint → ONNX with metadata."""
from __future__ import annotations


def add_arguments(parser):
    parser.add_argument("checkpoint", help="checkpoint written by ros-lnn train --checkpoint-dir (final.pt/last.pt)")
    parser.add_argument("--out", required=True, help="ONNX file to write")
    parser.add_argument("--dtype", choices=("float32", "float64"), default="float32", help="graph precision")
    parser.add_argument("--exporter", choices=("dynamo", "torchscript"), default="dynamo",
                        help="torch.onnx exporter: dynamo (leaner, faster graph) or torchscript (exports in <1 s)")
    parser.add_argument("--system", default="", help="system name for the metadata when the checkpoint has none")


def run(args) -> int:
    from datetime import datetime, timezone

    from ..inference.metadata import ModelMetadata
    from ..models.export import default_metadata, export_onnx
    from ..training.trainer import load_checkpoint

    model, ckpt = load_checkpoint(args.checkpoint)
    text = (ckpt.get("extra") or {}).get("metadata")
    metadata = (ModelMetadata.from_json(text, source=args.checkpoint) if text
                else default_metadata(model, system=args.system,
                                      provenance={"checkpoint": str(args.checkpoint), "epoch": ckpt.get("epoch")}))
    metadata.provenance = dict(metadata.provenance or {}) | {"export": {
        "checkpoint": str(args.checkpoint), "exporter": args.exporter, "dtype": args.dtype,
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds")}}
    path = export_onnx(model, args.out, metadata, dtype=args.dtype, dynamo=args.exporter == "dynamo")
    print(f"wrote {path}")
    return 0
