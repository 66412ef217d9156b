"""``ros-lnn export``: a checkpoint of any family → ONNX with metadata."""
from __future__ import annotations


def add_arguments(parser):
    parser.add_argument("checkpoint", help="checkpoint written by ros-lnn train (--out x.pt, or final.pt/last.pt "
                                           "in the checkpoint folder)")
    parser.add_argument("--out", required=True, help="ONNX file to write")
    parser.add_argument("--dtype", choices=("float32", "float64"), default="float32", help="graph precision")
    parser.add_argument("--exporter", choices=("dynamo", "torchscript"), default="dynamo",
                        help="torch.onnx exporter of servo_lnn/delan: dynamo (leaner, faster graph) or torchscript "
                             "(exports in <1 s); the zoo families export with dynamo")
    parser.add_argument("--system", default="", help="system name for the metadata when the checkpoint has none")


def run(args) -> int:
    from datetime import datetime, timezone

    from ..errors import ConfigError
    from ..inference.metadata import ModelMetadata
    from ..models.registry import SERVO_LNN, load_checkpoint

    model, ckpt = load_checkpoint(args.checkpoint)
    family = getattr(model, "family", SERVO_LNN)
    text = (ckpt.get("extra") or {}).get("metadata")
    export_note = {"checkpoint": str(args.checkpoint), "exporter": "dynamo" if family != SERVO_LNN else args.exporter,
                   "dtype": args.dtype, "date": datetime.now(timezone.utc).isoformat(timespec="seconds")}
    if family == SERVO_LNN:
        from ..models.export import default_metadata, export_onnx

        metadata = (ModelMetadata.from_json(text, source=args.checkpoint) if text
                    else default_metadata(model, system=args.system,
                                          provenance={"checkpoint": str(args.checkpoint), "epoch": ckpt.get("epoch")}))
        metadata.provenance = dict(metadata.provenance or {}) | {"export": export_note}
        path = export_onnx(model, args.out, metadata, dtype=args.dtype, dynamo=args.exporter == "dynamo")
    else:
        from ..models.family_export import export_family_onnx, family_metadata

        if args.exporter != "dynamo":
            raise ConfigError(f"{args.checkpoint}: the {family} graph exports with --exporter dynamo only "
                              "(the TorchScript exporter fixes its batch size)")
        if text:
            metadata = ModelMetadata.from_json(text, source=args.checkpoint)
        else:
            coords = (ckpt.get("provenance") or {}).get("coordinates") or {}
            names = coords.get("names") or getattr(model, "coordinate_names", None) or \
                [f"q{i + 1}" for i in range(model.n)]
            units = coords.get("units") or ["rad" if i in model.angle_coordinates else "m" for i in range(model.n)]
            metadata = family_metadata(model, names, units, system=args.system,
                                       provenance=dict(ckpt.get("provenance") or {}))
        metadata.provenance = dict(metadata.provenance or {}) | {"export": export_note}
        path = export_family_onnx(model, args.out, metadata, dtype=args.dtype)
    print(f"wrote {path}")
    return 0
