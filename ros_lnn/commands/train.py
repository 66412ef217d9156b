"""``ros-lnn train --model FAMILY``: train any model family on its reference data and export it to
ONNX (``--out x.onnx``, the default) or save the checkpoint (``--out x.pt``).

Families: ``servo_lnn`` (default; the ServoLNN paper's setup on the crane), ``delan`` (a ServoLNN with
no servo coordinates, on the DeLaN character data or a chain), ``lnn`` / ``lnn_nh`` (nonholonomic
examples; ``lnn`` also chains), ``tlnn`` / ``node`` (planar chains). Every family trains with the
project trainer (:mod:`ros_lnn.training.trainer`: device, checkpoints, ``--resume``, early stopping,
``--compile``, torchrun, ``--report``): ServoLNN/DeLaN by the inverse/forward/power losses, the others
by q̈ MSE (the ``qdd`` loss, gradient norm clipped at ``--grad-clip``, non-finite batches skipped).
Every family saves the same checkpoint (:mod:`ros_lnn.models.registry`) and exports to ONNX.
"""
from __future__ import annotations

import copy
import hashlib
import platform
from datetime import datetime, timezone
from pathlib import Path

FAMILIES = ("servo_lnn", "delan", "lnn", "lnn_nh", "tlnn", "node")
#: Reference systems of each family; the first is its default.
FAMILY_SYSTEMS = {
    "servo_lnn": ("crane",),
    "delan": ("delan_character", "chain"),
    "lnn": ("particle", "drone", "rolling_disk", "chain"),
    "lnn_nh": ("particle", "drone", "rolling_disk"),
    "tlnn": ("chain",),
    "node": ("chain",),
}
SYSTEMS = ("crane", "delan_character", "particle", "drone", "rolling_disk", "chain")
ACCELERATION_FAMILIES = ("lnn", "lnn_nh", "tlnn", "node")
_ZOO = dict(epochs=60, batch=256, lr=1e-3, weight_decay=0.0, grad_clip=10.0, hidden=[128, 128], dtype="float64",
            trajectories=20, duration=5.0, links=2)
#: Values applied where the command line gives none: the ServoLNN paper's schedule, the DeLaN
#: benchmark's (ros-lnn bench delan), and the zoo's (the nonholonomic paper's 2x128 softplus net).
FAMILY_DEFAULTS = {
    "servo_lnn": dict(epochs=10_000, batch=2048, lr=1e-4, weight_decay=1e-5, hidden=[64], epsilon=0.01,
                      dtype="float32", n_train=4096, log_every=500, val_every=2000),
    "delan": dict(epochs=10_000, batch=512, lr=5e-4, weight_decay=1e-5, hidden=[64, 64], epsilon=1e-3,
                  dtype="float32", log_every=500, val_every=2000, trajectories=20, duration=5.0,
                  links=2),
    **{family: dict(_ZOO) for family in ACCELERATION_FAMILIES},
}
#: Options of bag reading (ServoLNN only).
BAG_OPTIONS = ("bag", "config", "joint_states_topic", "servo_topic", "servo_type", "free_joints", "servo_joints",
               "servo_effort", "savgol_window", "savgol_order", "val_fraction")
TRAINER_OPTIONS = ("data", *BAG_OPTIONS, "with_qe", "weight_decay", "n_train", "split_seed", "test_trials",
                   "diag_activation", "angle_features", "epsilon", "val_every", "checkpoint_every", "resume",
                   "patience", "min_delta", "report", "compile", "exporter", "grad_clip")
ZOO_OPTIONS = ("trajectories", "duration", "links")
#: ServoLNN/crane-specific options the acceleration families do not have.
SERVO_ONLY_OPTIONS = ("data", *BAG_OPTIONS, "with_qe", "n_train", "split_seed", "test_trials", "diag_activation",
                      "angle_features", "epsilon", "exporter")


def add_arguments(parser):
    parser.add_argument("--model", choices=FAMILIES, default="servo_lnn",
                        help="model family (default servo_lnn; delan = servo_lnn without servo coordinates)")
    parser.add_argument("--system", choices=SYSTEMS, default=None,
                        help="reference data: crane (servo_lnn); delan_character or chain (delan); particle, "
                             "drone, rolling_disk (lnn, lnn_nh); chain (lnn, tlnn, node). Default: the family's first")
    parser.add_argument("--data", metavar="FILE",
                        help="servo_lnn: trials file (ros-lnn simulate), default the paper's crane data set; "
                             "delan: character_data.npz, default ../shared/data/delan_character/")
    parser.add_argument("--bag", nargs="+", metavar="BAG", help="rosbag2 recording(s) to train on (sqlite3 or mcap)")
    parser.add_argument("--config", help="YAML with a bag: mapping section (default: the crane's topics/joints)")
    from ..bags.mapping import add_mapping_arguments

    add_mapping_arguments(parser)
    qe = parser.add_mutually_exclusive_group()
    qe.add_argument("--with-qe", dest="with_qe", action="store_true", default=True,
                    help="train with the measured servo forces Q_e (default)")
    qe.add_argument("--without-qe", dest="with_qe", action="store_false",
                    help="train without Q_e (estimated power loss; only q̈_f and Q_f are then identified)")
    parser.add_argument("--epochs", type=int, help="epochs (servo_lnn/delan 10000 as the papers; zoo 60)")
    parser.add_argument("--batch", type=int, help="batch size (servo_lnn 2048, delan 512, zoo 256)")
    parser.add_argument("--lr", type=float, help="Adam learning rate (servo_lnn 1e-4, delan 5e-4, zoo 1e-3)")
    parser.add_argument("--weight-decay", type=float, help="Adam weight decay (servo_lnn/delan: 1e-5)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the initialisation and shuffling (zoo: also of the data)")
    parser.add_argument("--n-train", type=int, help="training samples drawn from the training trials (default 4096)")
    parser.add_argument("--split-seed", type=int, default=0, help="seed of the training-sample draw")
    parser.add_argument("--test-trials", help="comma-separated test trial names (default: the paper's 5; "
                                              "delan_character: test letters, default e,q,v)")
    parser.add_argument("--hidden", type=int, nargs="+",
                        help="hidden widths (servo_lnn 64, delan 64 64, zoo 128 128)")
    parser.add_argument("--activation", default="softplus", help="hidden activation (softplus; zoo also tanh)")
    parser.add_argument("--diag-activation", default="softplus",
                        help="activation keeping l_diag >= 0: softplus (default), relu (the paper; dies on the crane data)")
    parser.add_argument("--epsilon", type=float, help="M = L Lᵀ + ε I (servo_lnn 0.01, delan 1e-3)")
    parser.add_argument("--angle-features", action="store_true",
                        help="feed angle coordinates (unit rad) as [sin q, cos q]")
    parser.add_argument("--links", type=int, help="links of the chain (--system chain; default 2)")
    parser.add_argument("--trajectories", type=int, help="simulated trajectories (zoo and delan chain; default 20)")
    parser.add_argument("--duration", type=float, help="seconds per simulated trajectory (default 5)")
    parser.add_argument("--device", default="auto", help="auto (cuda when available), cpu, cuda, cuda:1 ...")
    parser.add_argument("--dtype", choices=("float32", "float64"),
                        help="training precision (servo_lnn/delan float32, zoo float64)")
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads (default 1: the per-step tensors are too small to gain from more)")
    parser.add_argument("--log-every", type=int, help="epochs between progress lines (servo_lnn/delan 500; zoo epochs/10)")
    parser.add_argument("--val-every", type=int, help="epochs between validations (servo_lnn/delan 2000; zoo: the log interval)")
    parser.add_argument("--checkpoint-dir", help="write checkpoints (last.pt, final.pt) here "
                                                 "(default <out stem>_checkpoints/ next to --out)")
    parser.add_argument("--out", help="x.onnx: export (default models/<system>_<family>.onnx); x.pt: save the checkpoint only")
    parser.add_argument("--export-dtype", choices=("float32", "float64"), default="float32")
    parser.add_argument("--exporter", choices=("dynamo", "torchscript"), default="dynamo",
                        help="torch.onnx exporter of servo_lnn/delan: dynamo (leaner, faster graph) or torchscript "
                             "(exports in <1 s); the zoo families export with dynamo")
    from ..training.run_options import add_run_arguments

    add_run_arguments(parser)
    parser.set_defaults(option_defaults={dest: parser.get_default(dest) for dest in TRAINER_OPTIONS + ZOO_OPTIONS})


def given(args, dest) -> bool:
    """Whether the command line set ``dest`` to something other than its default (decided before
    :func:`with_defaults` fills in the family's values)."""
    if hasattr(args, "explicit"):
        return dest in args.explicit
    defaults = getattr(args, "option_defaults", {})
    return dest in defaults and getattr(args, dest, None) != defaults[dest]


def family(args) -> str:
    return getattr(args, "model", None) or "servo_lnn"


def with_defaults(args):
    """A copy of ``args`` with the family's defaults where the command line gave no value."""
    args = copy.copy(args)
    args.explicit = {d for d in TRAINER_OPTIONS + ZOO_OPTIONS if given(args, d)}
    fam = family(args)
    if getattr(args, "system", None) is None:
        args.system = FAMILY_SYSTEMS[fam][0]
    for key, value in FAMILY_DEFAULTS[fam].items():
        if getattr(args, key, None) is None:
            setattr(args, key, copy.copy(value))
    if getattr(args, "out", None) is None:
        chain = f"{args.links}" if args.system == "chain" else ""
        args.out = f"models/{args.system}{chain}_{fam}.onnx"
    return args


def check_combination(args) -> None:
    """Raise ConfigError (one line, exit code 2) for a family/system/option combination that makes no sense."""
    from ..errors import ConfigError

    fam = family(args)
    if args.system not in FAMILY_SYSTEMS[fam]:
        fitting = [f for f, systems in FAMILY_SYSTEMS.items() if args.system in systems]
        raise ConfigError(f"--model {fam} does not train on --system {args.system}; its systems: "
                          f"{', '.join(FAMILY_SYSTEMS[fam])} (families for {args.system}: {', '.join(fitting)})")
    suffix = Path(args.out).suffix
    if suffix not in (".onnx", ".pt"):
        raise ConfigError(f"--out {args.out}: write x.onnx (export) or x.pt (checkpoint)")
    if fam in ACCELERATION_FAMILIES:
        wrong = [d for d in SERVO_ONLY_OPTIONS if given(args, d)]
        if wrong:
            raise ConfigError(f"--model {fam} trains by acceleration MSE on simulated data and has no "
                              f"{', '.join('--' + d.replace('_', '-') for d in wrong)} (ServoLNN/bag options)")
    elif fam == "delan":
        if any(given(args, d) for d in BAG_OPTIONS):
            raise ConfigError("--model delan does not read bags; a bag without servo joints trains a DeLaN "
                              "with --model servo_lnn --bag ...")
        if args.system == "chain" and args.data:
            raise ConfigError("--model delan --system chain simulates its data; --data is the DeLaN character "
                              "file of --system delan_character")
    if args.system != "chain" and given(args, "links"):
        raise ConfigError(f"--links is for --system chain, not {args.system}")
    if fam == "servo_lnn" and any(given(args, d) for d in ZOO_OPTIONS):
        raise ConfigError("--trajectories/--duration/--links are for the simulated zoo data; "
                          "--model servo_lnn trains on the crane trials (--data) or bags (--bag)")


def file_sha256(path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def load_trials(args):
    """(system, trials, source description) of a trials-based run (servo_lnn's crane, delan's chain)."""
    from ..physics.crane import Crane
    from ..physics.datasets import paper_crane_trials
    from ..physics.trials import load_trials as load_file

    if getattr(args, "system", None) == "chain":
        from ..physics.chain import PlanarChain
        from ..physics.datasets import chain_trials

        chain = PlanarChain.uniform(args.links)
        return chain, chain_trials(chain, n_trials=args.trajectories, duration=args.duration, seed=args.seed), {
            "kind": "simulated", "generator": "ros_lnn.physics.datasets.chain_trials",
            "parameters": {"links": args.links, "trajectories": args.trajectories, "duration": args.duration,
                           "seed": args.seed}}
    system = Crane()
    if getattr(args, "bag", None):
        from ..bags.source import bag_training_data

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
    n_train = available if args.n_train is None else min(args.n_train, available)
    train, test_samples = paper_split(trials, n_train_samples=n_train, seed=args.split_seed, test_names=test)
    return train, test_samples, {"train_trials": train["names"], "test_trials": test_samples["names"],
                                 "n_train": int(n_train), "n_test": int(len(test_samples["t"])),
                                 "split_seed": args.split_seed}


def character_samples(args):
    """(train, test, split info, source) of the DeLaN character data set: test letters ``--test-trials``
    (default e, q, v), training samples all of the other letters' or ``--n-train`` of them."""
    import numpy as np

    from ..errors import DataError
    from ..physics.delan_data import TEST_LETTERS, default_data_path, load_character_data

    letters = tuple(s.strip() for s in args.test_trials.split(",") if s.strip()) if args.test_trials else TEST_LETTERS
    path = Path(args.data) if args.data else default_data_path()
    if path.is_file() and "labels" not in np.load(path).files:
        raise DataError(f"{path}: not the DeLaN character data (no 'labels'); pass character_data.npz, "
                        "or train a trials file with --model servo_lnn --data")
    train, test = load_character_data(path, letters)
    for side in (train, test):  # letters as trials: names and the per-sample index the metrics group by
        letter = side.pop("letter").tolist()
        side["names"] = list(dict.fromkeys(letter))
        side["trial"] = np.array([side["names"].index(c) for c in letter])
    n_available = len(train["q"])
    if args.n_train is not None and args.n_train < n_available:
        pick = np.sort(np.random.default_rng(args.split_seed).choice(n_available, args.n_train, replace=False))
        train = {k: (v if k == "names" else v[pick]) for k, v in train.items()}
    info = {"train_trials": train["names"], "test_trials": test["names"], "n_train": int(len(train["q"])),
            "n_test": int(len(test["q"])), "split_seed": args.split_seed}
    return train, test, info, {"kind": "delan_character", "path": str(path), "sha256": file_sha256(path)}


def canonical_command(args) -> str:
    """The command with every effective option spelled out, so it reproduces the run as given."""
    args = with_defaults(args)
    fam = family(args)
    parts = ["ros-lnn train", f"--model {fam}", f"--system {args.system}"]
    if args.system == "chain" or fam in ACCELERATION_FAMILIES:
        parts.append(f"--trajectories {args.trajectories} --duration {args.duration}")
        if args.system == "chain":
            parts.append(f"--links {args.links}")
    if args.data:
        parts.append(f"--data {args.data}")
    if getattr(args, "bag", None):  # the effective mapping and the bags' sha256 are in provenance["data"]
        parts.append("--bag " + " ".join(str(b) for b in args.bag))
    if getattr(args, "config", None):
        parts.append(f"--config {args.config}")
    if fam == "servo_lnn":
        parts.append("--with-qe" if args.with_qe else "--without-qe")
    options = ("epochs", "batch", "lr", "weight_decay", "seed", "n_train", "split_seed", "test_trials",
               "activation", "diag_activation", "epsilon", "device", "dtype", "out", "export_dtype")
    if fam in ACCELERATION_FAMILIES:
        options = tuple(o for o in options if o not in TRAINER_OPTIONS + ("device",))
    for opt in options:
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
    args = with_defaults(args)
    check_combination(args)
    if family(args) in ACCELERATION_FAMILIES:
        return run_acceleration(args)
    return run_servo(args)


def run_servo(args) -> int:
    """ServoLNN / DeLaN through the project trainer."""
    import torch

    from ..errors import ConfigError, DataError
    from ..models.export import default_metadata, export_onnx
    from ..models.registry import save_checkpoint
    from ..models.servo_lnn import ServoLNN
    from ..training.data import data_hash, model_order, normalisation, reorder
    from ..training.trainer import TrainConfig, evaluate, seed_everything, train
    from ..training.report import write_report
    from ..training.run_options import finish_distributed, report_dir, run_provenance, sigterm_as_interrupt, train_options

    sigterm_as_interrupt()
    delan = family(args) == "delan"
    if args.system == "delan_character":
        train_s, test_s, split_info, source = character_samples(args)
        free, servo, units = ["joint_1", "joint_2"], [], ["rad", "rad"]
    else:
        system, trials, source = load_trials(args)
        if not trials:
            raise DataError(f"{args.data or 'simulation'}: no trials")
        free, servo = list(trials[0].free_joints), list(trials[0].servo_joints)
        if delan and servo:
            raise ConfigError(f"--model delan needs data without servo joints, these have {servo}; "
                              "use --model servo_lnn")
        order = model_order(trials[0].coordinate_names, free, servo)
        units = [system.coordinate_units[system.coordinate_names.index(j)] if j in system.coordinate_names else "rad"
                 for j in free + servo]
        train_s, test_s, split_info = split(trials, args)
        train_s, test_s = reorder(train_s, order), reorder(test_s, order)
    if args.with_qe and not servo:
        args.with_qe = False
    count = f"{len(trials)} trials" if args.system != "delan_character" else f"{len(split_info['train_trials']) + len(split_info['test_trials'])} letters"
    print(f"data: {count} ({source['kind']}); train {split_info['n_train']} samples of "
          f"{split_info['train_trials']}; test {split_info['n_test']} samples of {split_info['test_trials']}")

    seed_everything(args.seed)
    angles = [j for j, u in zip(free + servo, units) if u == "rad"] if args.angle_features else []
    model = ServoLNN(free, servo, hidden=args.hidden, activation=args.activation, epsilon=args.epsilon,
                     diag_activation=args.diag_activation, angle_joints=angles, coordinate_units=units)
    model.set_normalisation(*normalisation(train_s["q"]))
    cfg = TrainConfig(epochs=args.epochs, batch=args.batch, lr=args.lr, weight_decay=args.weight_decay,
                      seed=args.seed, device=args.device, dtype=args.dtype, with_qe=args.with_qe,
                      losses=("inv", "fwd") if delan else (),
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
    command = canonical_command(args)
    provenance = {
        "data": source, "data_hash": data_hash(train_s, test_s), "split": split_info,
        "training": {"family": family(args), "epochs": args.epochs, "batch": args.batch, "lr": args.lr,
                     "weight_decay": args.weight_decay, "seed": args.seed, "with_qe": args.with_qe,
                     "losses": history["losses"], "device": history["device"], "dtype": args.dtype,
                     "seconds": round(history["seconds"], 1)},
        "command": command,
        "run": run_provenance(history), "versions": versions(), "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
    }
    metadata = default_metadata(model, system=args.system, metrics=metrics, provenance=provenance,
                                package_version=provenance["versions"]["ros_lnn"])
    out = Path(args.out)
    checkpoint = dict(history=history, command=command, provenance=provenance, epoch=history["epoch"][-1],
                      extra={"metadata": metadata.to_json()})
    if out.suffix == ".pt":
        save_checkpoint(out, model, **checkpoint)
    else:
        export_onnx(model, out, metadata, dtype=args.export_dtype, dynamo=args.exporter == "dynamo")
    if cfg.checkpoint_dir:
        save_checkpoint(Path(cfg.checkpoint_dir) / "final.pt", model, **checkpoint)
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


def run_acceleration(args) -> int:
    """LNN, LNN-nh, TLNN, neural ODE: q̈ by MSE on simulated trajectories through the project trainer,
    whole trajectories held out (validation, early stopping and the test metrics on them)."""
    import torch

    from ..models.family_export import export_family_onnx, family_metadata
    from ..models.registry import save_checkpoint
    from ..training.data import data_hash
    from ..training.report import write_acceleration_report
    from ..training.run_options import (finish_distributed, report_dir, run_provenance, sigterm_as_interrupt,
                                        train_options)
    from ..training.trainer import TrainConfig, seed_everything, set_qd_scale, train
    from ..zoo.train_family import acceleration_metrics, build, split_by_trajectory

    sigterm_as_interrupt()
    fam = family(args)
    seed_everything(args.seed)
    model, data, described = build(fam, args.system, links=args.links, trajectories=args.trajectories,
                                   duration=args.duration, hidden=args.hidden, activation=args.activation,
                                   seed=args.seed)
    train_s, test_s, split_info = split_by_trajectory(data, args.seed)
    print(f"data: {args.system} ({described['data']['kind']}), {split_info['n_trajectories']} trajectories; "
          f"train {split_info['n_train']} samples; test {split_info['n_test']} samples of trajectories "
          f"{split_info['test_trajectories']}", flush=True)
    set_qd_scale(model, train_s["qd"])
    log_every = max(1, args.epochs // 10) if args.log_every is None else max(1, min(args.log_every, args.epochs))
    val_every = log_every if args.val_every is None else max(1, min(args.val_every, args.epochs))
    cfg = TrainConfig(epochs=args.epochs, batch=args.batch, lr=args.lr, weight_decay=args.weight_decay,
                      seed=args.seed, device=args.device, dtype=args.dtype, log_every=log_every, val_every=val_every,
                      threads=args.threads, **train_options(args))
    history = train(model, train_s, test_s, cfg, progress=lambda line: print(f"{fam} {line}", flush=True))
    if not finish_distributed(history):
        return 0
    model = model.to(device="cpu", dtype=torch.float64)
    metrics = acceleration_metrics(model, test_s) | {"evaluated_on": "test trajectories",
                                                    "final_train_loss": history["loss"][-1]}
    command = canonical_command(args)
    provenance = {
        "data": described["data"], "data_hash": data_hash(train_s, test_s), "split": split_info,
        "coordinates": {"names": described["coordinate_names"], "units": described["coordinate_units"]},
        "training": {"family": fam, "epochs": args.epochs, "batch": args.batch, "lr": args.lr,
                     "weight_decay": args.weight_decay, "grad_clip": args.grad_clip, "seed": args.seed,
                     "loss": "qdd_mse", "device": history["device"], "dtype": args.dtype,
                     "seconds": round(history["seconds"], 1)},
        "command": command, "run": run_provenance(history), "versions": versions(),
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
    }
    metadata = family_metadata(model, described["coordinate_names"], described["coordinate_units"], system=args.system,
                               metrics=metrics, provenance=provenance, package_version=provenance["versions"]["ros_lnn"])
    out = Path(args.out)
    checkpoint = dict(history=history, command=command, provenance=provenance, epoch=history["epoch"][-1],
                      extra={"metadata": metadata.to_json()})
    if out.suffix == ".pt":
        save_checkpoint(out, model, **checkpoint)
    else:
        export_family_onnx(model, out, metadata, dtype=args.export_dtype)
    save_checkpoint(Path(cfg.checkpoint_dir) / "final.pt", model, **checkpoint)
    print(f"test: q̈ MSE {metrics['qdd_mse']:.3e}, nMSE {metrics['qdd_nmse']:.2e}"
          + (f" ({metrics['non_finite']} non-finite predictions)" if metrics["non_finite"] else ""))
    report = report_dir(args)
    if report is not None:
        written = write_acceleration_report(report, history, model, test_s, metrics, provenance,
                                            coordinate_names=described["coordinate_names"])
        print(f"report: {written['dir']} ({', '.join(written['files'])})")
    print(f"wrote {out} ({history['seconds']:.0f} s training on {history['device']})")
    return 0
