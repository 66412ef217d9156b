"""``ros-lnn train``: train a ServoLNN on reference trials (simulated or from a file) and export it to
ONNX with its metrics and provenance in the metadata."""
from __future__ import annotations

import hashlib
import platform
from datetime import datetime, timezone
from pathlib import Path

SYSTEMS = ("crane",)


def add_arguments(parser):
    parser.add_argument("--system", choices=SYSTEMS, default="crane", help="reference system (default crane)")
    parser.add_argument("--data", metavar="TRIALS.npz",
                        help="trials file (ros-lnn simulate); default: simulate the paper's crane data set")
    parser.add_argument("--bag", nargs="+", metavar="BAG", help="rosbag2 recording(s) to train on (sqlite3 or mcap)")
    parser.add_argument("--config", help="YAML with a bag: mapping section (default: the crane's topics/joints)")
    from ..training.bag_mapping import add_mapping_arguments

    add_mapping_arguments(parser)
    qe = parser.add_mutually_exclusive_group()
    qe.add_argument("--with-qe", dest="with_qe", action="store_true", default=True,
                    help="train with the measured servo forces Q_e (default)")
    qe.add_argument("--without-qe", dest="with_qe", action="store_false",
                    help="train without Q_e (estimated power loss; only q̈_f and Q_f are then identified)")
    parser.add_argument("--epochs", type=int, default=10_000, help="epochs (paper: 10000)")
    parser.add_argument("--batch", type=int, default=2048, help="batch size (paper: 2048)")
    parser.add_argument("--lr", type=float, default=1e-4, help="Adam learning rate (paper: 1e-4)")
    parser.add_argument("--weight-decay", type=float, default=1e-5, help="Adam weight decay (paper: 1e-5)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the initialisation and shuffling")
    parser.add_argument("--n-train", type=int, default=4096, help="training samples drawn from the training trials")
    parser.add_argument("--split-seed", type=int, default=0, help="seed of the training-sample draw")
    parser.add_argument("--test-trials", help="comma-separated test trial names (default: the paper's 5)")
    parser.add_argument("--hidden", type=int, nargs="+", default=[64], help="hidden widths (paper: 64)")
    parser.add_argument("--activation", default="softplus", help="hidden activation (paper: softplus)")
    parser.add_argument("--diag-activation", default="softplus",
                        help="activation keeping l_diag >= 0: softplus (default), relu (the paper; dies on the crane data)")
    parser.add_argument("--angle-features", action="store_true",
                        help="feed angle coordinates (unit rad) as [sin q, cos q]")
    parser.add_argument("--device", default="auto", help="auto (cuda when available), cpu, cuda, cuda:1 ...")
    parser.add_argument("--dtype", choices=("float32", "float64"), default="float32", help="training precision")
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads (default 1: the per-step tensors are too small to gain from more)")
    parser.add_argument("--log-every", type=int, default=500, help="epochs between progress lines")
    parser.add_argument("--val-every", type=int, default=2000, help="epochs between validations")
    parser.add_argument("--checkpoint-dir", help="write checkpoints (last.pt, final.pt) here "
                                                 "(default <out stem>_checkpoints/ next to --out)")
    parser.add_argument("--out", help="ONNX file to write (default models/<system>_servo_lnn.onnx)")
    parser.add_argument("--export-dtype", choices=("float32", "float64"), default="float32")
    parser.add_argument("--exporter", choices=("dynamo", "torchscript"), default="dynamo",
                        help="torch.onnx exporter: dynamo (leaner, faster graph) or torchscript (exports in <1 s)")
    from ..training.run_options import add_run_arguments

    add_run_arguments(parser)


def file_sha256(path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def load_trials(args):
    """(system, trials, source description). The one place that knows where training data comes from."""
    from ..physics.crane import Crane
    from ..physics.datasets import paper_crane_trials
    from ..physics.trials import load_trials as load_file

    system = Crane()
    if getattr(args, "bag", None):
        from ..training.bag_source import bag_training_data

        return bag_training_data(args, system)
    if args.data:
        return system, load_file(args.data), {"kind": "trials_file", "path": str(args.data),
                                              "sha256": file_sha256(args.data)}
    return system, paper_crane_trials(system), {"kind": "simulated", "generator": "ros_lnn.physics.datasets.paper_crane_trials",
                                                "parameters": {"m1": system.m1, "m2": system.m2, "L": system.L, "g": system.g}}


def split(trials, args):
    from ..errors import DataError
    from ..physics.datasets import PAPER_TEST_TRIALS, paper_split

    names = [t.name for t in trials]
    if args.test_trials:
        test = tuple(s.strip() for s in args.test_trials.split(",") if s.strip())
    elif all(n in names for n in PAPER_TEST_TRIALS):
        test = PAPER_TEST_TRIALS
    elif len(trials) >= 2:
        test = tuple(names[len(names) - len(names) // 2:])
    else:
        raise DataError("need at least two trials (one to train, one to test); pass more data or --test-trials")
    available = sum(len(t) for t in trials if t.name not in test)
    n_train = min(args.n_train, available)
    train, test_samples = paper_split(trials, n_train_samples=n_train, seed=args.split_seed, test_names=test)
    return train, test_samples, {"train_trials": train["names"], "test_trials": test_samples["names"],
                                 "n_train": int(n_train), "n_test": int(len(test_samples["t"])),
                                 "split_seed": args.split_seed}


def canonical_command(args) -> str:
    """The command with every effective option spelled out, so it reproduces the run as given."""
    parts = ["ros-lnn train", f"--system {args.system}"]
    if args.data:
        parts.append(f"--data {args.data}")
    if getattr(args, "bag", None):  # the effective mapping and the bags' sha256 are in provenance["data"]
        parts.append("--bag " + " ".join(str(b) for b in args.bag))
    if getattr(args, "config", None):
        parts.append(f"--config {args.config}")
    parts.append("--with-qe" if args.with_qe else "--without-qe")
    for opt in ("epochs", "batch", "lr", "weight_decay", "seed", "n_train", "split_seed", "test_trials",
                "activation", "diag_activation", "device", "dtype", "out", "export_dtype"):
        value = getattr(args, opt)
        if value is not None:
            parts.append(f"--{opt.replace('_', '-')} {value}")
    parts.append("--hidden " + " ".join(str(h) for h in args.hidden))
    if args.angle_features:
        parts.append("--angle-features")
    if getattr(args, "patience", 0):
        parts.append(f"--patience {args.patience} --min-delta {args.min_delta}")
    return " ".join(parts)


def versions() -> dict:
    import numpy
    import onnx
    import torch

    from .. import __version__

    return {"ros_lnn": __version__, "torch": torch.__version__, "onnx": onnx.__version__,
            "numpy": numpy.__version__, "python": platform.python_version()}


def run(args) -> int:
    import torch

    from ..errors import DataError
    from ..models.export import default_metadata, export_onnx
    from ..models.servo_lnn import ServoLNN
    from ..training.data import data_hash, model_order, normalisation, reorder
    from ..training.trainer import TrainConfig, evaluate, save_checkpoint, seed_everything, train
    from ..training.report import write_report
    from ..training.run_options import finish_distributed, report_dir, run_provenance, sigterm_as_interrupt, train_options

    sigterm_as_interrupt()
    system, trials, source = load_trials(args)
    if not trials:
        raise DataError(f"{args.data or 'simulation'}: no trials")
    free, servo = list(trials[0].free_joints), list(trials[0].servo_joints)
    if args.with_qe and not servo:
        args.with_qe = False
    order = model_order(trials[0].coordinate_names, free, servo)
    units = [system.coordinate_units[system.coordinate_names.index(j)] if j in system.coordinate_names else "rad"
             for j in free + servo]
    train_s, test_s, split_info = split(trials, args)
    train_s, test_s = reorder(train_s, order), reorder(test_s, order)
    print(f"data: {len(trials)} trials ({source['kind']}); train {split_info['n_train']} samples of "
          f"{split_info['train_trials']}; test {split_info['n_test']} samples of {split_info['test_trials']}")

    seed_everything(args.seed)
    angles = [j for j, u in zip(free + servo, units) if u == "rad"] if args.angle_features else []
    model = ServoLNN(free, servo, hidden=args.hidden, activation=args.activation,
                     diag_activation=args.diag_activation, angle_joints=angles, coordinate_units=units)
    model.set_normalisation(*normalisation(train_s["q"]))
    cfg = TrainConfig(epochs=args.epochs, batch=args.batch, lr=args.lr, weight_decay=args.weight_decay,
                      seed=args.seed, device=args.device, dtype=args.dtype, with_qe=args.with_qe,
                      log_every=max(1, min(args.log_every, args.epochs)),
                      val_every=max(1, min(args.val_every, args.epochs)),
                      threads=args.threads, **train_options(args))
    history = train(model, train_s, test_s, cfg, progress=lambda line: print(line, flush=True))
    if not finish_distributed(history):  # torchrun: only rank 0 exports and reports
        return 0

    model = model.to(device="cpu", dtype=torch.float64)
    metrics = evaluate(model, test_s)
    metrics = {k: v for k, v in metrics.items() if k != "qdd_f_nmse_per_trial"} | {
        "qdd_f_nmse_per_trial": {test_s["names"][i]: v for i, v in
                                 enumerate(metrics.get("qdd_f_nmse_per_trial", {}).values())},
        "evaluated_on": "test trials", "final_train_loss": history["loss"][-1]}
    provenance = {
        "data": source, "data_hash": data_hash(train_s, test_s), "split": split_info,
        "training": {"epochs": args.epochs, "batch": args.batch, "lr": args.lr, "weight_decay": args.weight_decay,
                     "seed": args.seed, "with_qe": args.with_qe, "losses": history["losses"],
                     "device": history["device"], "dtype": args.dtype, "seconds": round(history["seconds"], 1)},
        "command": canonical_command(args),
        "run": run_provenance(history), "versions": versions(), "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
    }
    metadata = default_metadata(model, system=args.system, metrics=metrics, provenance=provenance,
                                package_version=provenance["versions"]["ros_lnn"])
    out = Path(args.out or f"models/{args.system}_servo_lnn.onnx")
    export_onnx(model, out, metadata, dtype=args.export_dtype, dynamo=args.exporter == "dynamo")
    if cfg.checkpoint_dir:
        save_checkpoint(Path(cfg.checkpoint_dir) / "final.pt", model, None, args.epochs, history,
                        extra={"metadata": metadata.to_json()})
    print(f"test: q̈_f nMSE {metrics['qdd_f_nmse']:.2e}"
          + (f", Q_e rel rms {metrics['Q_e_rel_rms']:.2%}" if "Q_e_rel_rms" in metrics else "")
          + f", M rel err {metrics.get('M_rel_err', float('nan')):.2%}, V rel err {metrics.get('V_rel_err', float('nan')):.2%}"
          + f", E rel err {metrics.get('E_rel_err', float('nan')):.2%}")
    report = report_dir(args)
    if report is not None:
        written = write_report(report, history, model, test_s, metrics, provenance, qe_measured=args.with_qe)
        print(f"report: {written['dir']} ({', '.join(written['files'])})")
    print(f"wrote {out} ({history['seconds']:.0f} s training on {history['device']})")
    return 0
