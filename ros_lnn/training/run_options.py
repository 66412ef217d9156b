"""Command-line options of ``ros-lnn train`` for the run itself (checkpoints and resume, early
stopping, report folder, torch.compile, torchrun) and the small helpers ``train.run`` calls."""
from __future__ import annotations

import signal
from pathlib import Path


def add_run_arguments(parser) -> None:
    parser.add_argument("--checkpoint-every", type=int, default=1000,
                        help="epochs between checkpoints (last.pt, written atomically; default 1000)")
    parser.add_argument("--resume", nargs="?", const="", default=None, metavar="CHECKPOINT",
                        help="continue an interrupted run from CHECKPOINT (file or folder; default: "
                             "last.pt in the checkpoint folder); same options and data as the interrupted run")
    parser.add_argument("--patience", type=int, default=0,
                        help="early stopping: validations without improvement before stopping (0: off, the default)")
    parser.add_argument("--min-delta", type=float, default=0.0,
                        help="early stopping: smallest decrease of the validation nMSE that counts (q̈_f; q̈ for the acceleration families)")
    parser.add_argument("--report", metavar="DIR",
                        help="report folder: loss curves, validation plots, metrics.json (default <out stem>_report/)")
    parser.add_argument("--no-report", action="store_true", help="do not write the report folder")
    parser.add_argument("--grad-clip", type=float, default=None, metavar="NORM",
                        help="clip the gradient norm (default: off for servo_lnn/delan, 10 for the acceleration families)")
    parser.add_argument("--compile", action="store_true",
                        help="torch.compile the loss (falls back to eager with a warning where it fails)")


def out_path(args) -> Path:
    return Path(args.out or f"models/{args.system}_servo_lnn.onnx")


def checkpoint_dir(args) -> str:
    """``--checkpoint-dir``, default ``<out stem>_checkpoints/`` next to the model."""
    if args.checkpoint_dir:
        return str(args.checkpoint_dir)
    out = out_path(args)
    return str(out.with_name(f"{out.stem}_checkpoints"))


def train_options(args) -> dict:
    """TrainConfig fields of the run options."""
    resume = None
    if args.resume is not None:
        resume = args.resume or checkpoint_dir(args)
    return {"checkpoint_dir": checkpoint_dir(args), "checkpoint_every": max(1, args.checkpoint_every),
            "resume": resume, "patience": args.patience, "min_delta": args.min_delta, "compile": bool(args.compile),
            "grad_clip": getattr(args, "grad_clip", None)}


def report_dir(args) -> Path | None:
    if args.no_report:
        return None
    from .report import default_report_dir

    return Path(args.report) if args.report else default_report_dir(out_path(args))


def sigterm_as_interrupt() -> None:
    """SIGTERM ends a run like Ctrl-C (KeyboardInterrupt): finally-blocks remove temporary files and
    the last good checkpoint stays."""
    def handler(signum, frame):
        raise KeyboardInterrupt(f"signal {signum}")

    try:
        signal.signal(signal.SIGTERM, handler)
    except ValueError:  # not the main thread (e.g. called from a test runner thread)
        pass


def is_main_rank(history: dict) -> bool:
    return (history.get("run") or {}).get("rank", 0) == 0


def run_provenance(history: dict) -> dict:
    """What the metadata should say about how the run went."""
    return {"early_stopping": history.get("early_stopping"), "resumed": history.get("resumed", []),
            "epochs_run": history["epoch"][-1] if history.get("epoch") else 0, **(history.get("run") or {})}


def finish_distributed(history: dict) -> bool:
    """Leave the torchrun process group (if any); True on the rank that exports and reports."""
    from .distributed import shutdown_process_group

    shutdown_process_group()
    return is_main_rank(history)
