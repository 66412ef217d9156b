"""``ros-lnn evaluate``: accuracy of an ONNX model on trials (npz from ``ros-lnn simulate``, or the
paper's held-out crane trials by default), or on recordings (``--bag``): per bag the q̈_f nMSE against
the Savitzky–Golay reference of the measured velocities, the power and energy balance residuals, and
plots of predicted against measured q̈_f with the residual in its own panel. An arm model is evaluated
on recordings by :func:`evaluate_arm_model` (torque errors and plots). No torch needed."""

from __future__ import annotations

import json
from pathlib import Path

from ..errors import ConfigError, DataError


def add_arguments(parser):
    parser.add_argument("--model", help="ONNX model (default: the shipped crane model)")
    parser.add_argument(
        "--data", metavar="TRIALS.npz", help="trials to evaluate on (default: paper test trials)"
    )
    parser.add_argument("--bag", nargs="+", metavar="BAG", help="rosbag2 recording(s) to evaluate on")
    parser.add_argument(
        "--config",
        help="YAML with the bag: mapping of --bag (default: the mapping the model was trained with, "
        "else the crane's)",
    )
    parser.add_argument("--trials", help="comma-separated trial names to keep (default: all)")
    parser.add_argument("--json", metavar="FILE", help="also write the metrics as JSON")
    parser.add_argument(
        "--plots",
        metavar="DIR",
        help="--bag: folder of the per-trial plots (default evaluation_<model stem>/ in the current folder)",
    )
    parser.add_argument("--no-plots", action="store_true", help="--bag: write no plots")


def _keep(trials, names: str | None):
    if not names:
        return trials
    wanted = [s.strip() for s in names.split(",") if s.strip()]
    missing = [w for w in wanted if w not in {t.name for t in trials}]
    if missing:
        raise DataError(f"trials {missing} not found; available: {[t.name for t in trials]}")
    return [t for t in trials if t.name in wanted]


def run(args) -> int:
    from ..arm.model import is_arm_model
    from ..inference.runtime import ServoLnnRuntime

    if args.model and is_arm_model(args.model):
        return evaluate_arm_model(args)

    rt = ServoLnnRuntime(args.model)
    if args.bag:
        if args.data:
            raise DataError("--data and --bag: evaluate on one kind of data at a time")
        return _evaluate_bags(rt, args)
    from ..inference.evaluation import evaluate_trial

    if args.data:
        from ..physics.trials import load_trials

        trials = load_trials(args.data)
    else:
        from ..physics.datasets import PAPER_TEST_TRIALS, paper_crane_trials

        trials = [t for t in paper_crane_trials() if t.name in PAPER_TEST_TRIALS]
    trials = _keep(trials, args.trials)
    for trial in trials:
        absent = [j for j in rt.joints if j not in trial.coordinate_names]
        if absent:
            raise DataError(
                f"trial '{trial.name}' has no joints {absent} that the model {rt.path.name} needs"
            )
    print(f"model {rt.path.name}: free {rt.free_joints}, servo {rt.servo_joints}")
    print(
        f"{'trial':<14} {'samples':>7} {'qdd_f nMSE':>11} {'Q_e rel rms':>12} {'E rms [J]':>10} "
        f"{'M rel err':>10}"
    )
    results = {}
    for trial in trials:
        _, m = evaluate_trial(rt, trial)
        results[trial.name] = m
        print(
            f"{trial.name:<14} {len(trial):>7} {m['qdd_f_nmse']:>11.2e} {100 * m['Q_e_rel_rms']:>11.2f}% "
            f"{m['E_rms']:>10.2e} {m['M_rel_err']:>10.2e}"
        )
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(results, fh, indent=2)
    return 0


def bag_mapping(rt, config: str | None):
    """The mapping of ``--config``; without one, the mapping the model was trained with (its
    provenance), else the crane's with the model's joints."""
    from ..bags.mapping import BagMapping, mapping_from_options

    if config:
        return mapping_from_options(config)
    data = (rt.metadata.provenance or {}).get("data") or {}
    if data.get("kind") == "rosbag" and isinstance(data.get("mapping"), dict):
        return BagMapping.from_dict(dict(data["mapping"]), f"{rt.path.name} (its training mapping)")
    return mapping_from_options(None, {"free_joints": rt.free_joints, "servo_joints": rt.servo_joints})


def _evaluate_bags(rt, args) -> int:
    from dataclasses import replace

    from ..bags.dataset import load_bag_dataset
    from ..inference.evaluation import recording_errors

    mapping = replace(bag_mapping(rt, args.config), val_fraction=0.0)
    rt.metadata.check_joints(mapping.free_joints, mapping.servo_joints, source=str(rt.path))
    plots = None if args.no_plots else Path(args.plots or f"evaluation_{rt.path.stem}")
    units = list(rt.metadata.coordinate_units) or ["rad"] * rt.n
    print(
        f"model {rt.path.name} (system '{rt.metadata.system}'): free {rt.free_joints}, "
        f"servo {rt.servo_joints}"
    )
    print(
        "q̈_f reference: Savitzky–Golay derivative of the measured velocities "
        f"(window {mapping.savgol_window}, order {mapping.savgol_order})"
    )
    print(f"{'bag / trial':<28} {'samples':>7} {'q̈_f nMSE':>10} {'power res.':>10} {'energy bal.':>11}")
    results: dict = {}
    for bag in args.bag:
        ds = load_bag_dataset(bag, mapping)
        trials = _keep(ds.trials, args.trials)
        per_trial, weighted, count = {}, 0.0, 0
        for trial in trials:
            series, m = recording_errors(rt, trial)
            per_trial[trial.name] = m
            weighted += m["qdd_f_nmse"] * m["samples"]
            count += m["samples"]
            print(
                f"{trial.name:<28} {m['samples']:>7} {m['qdd_f_nmse']:>10.2e} "
                f"{m['power_residual_rel']:>10.2e} {m['energy_balance_rel']:>11.2e}"
            )
            if plots is not None:
                _plot(plots, trial.name, series, rt.free_joints, units)
        results[str(bag)] = {
            "qdd_f_nmse": weighted / max(count, 1),
            "samples": count,
            "trials": per_trial,
            "qdd_f_reference": f"savgol(qd, window={mapping.savgol_window}, order={mapping.savgol_order})",
            "qdd_e_from": sorted({str(i.get("qdd_e")) for i in ds.summary["trials"]}),
        }
        print(f"{Path(bag).name + ' (all)':<28} {count:>7} {results[str(bag)]['qdd_f_nmse']:>10.2e}")
    if plots is not None:
        print(f"plots: {plots}/")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(results, fh, indent=2)
    return 0


def _plot(folder: Path, name: str, series: dict, free_joints, units) -> None:
    import re

    import numpy as np

    from ..training.report import acceleration_unit, plot_comparison

    folder.mkdir(parents=True, exist_ok=True)
    rows = [
        (f"q̈ {j}", acceleration_unit(units[i]), series["qdd_f"][:, i], series["qdd_f_hat"][:, i])
        for i, j in enumerate(free_joints)
    ]
    rows = [r for r in rows if np.isfinite(r[2]).all() and np.isfinite(r[3]).all()]
    safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", name).strip("_") or "trial"
    plot_comparison(name, series["t"], rows, folder / f"{safe}.png", reference="measured")


def evaluate_arm_model(args) -> int:
    """The fully actuated arm's ``ros-lnn evaluate``: chosen when the model is an arm model."""
    from ..arm.evaluation import evaluate_arm, plot_torque
    from ..arm.mapping import ArmMapping
    from ..arm.model import ArmModel
    from ..arm.recording import read_arm_bag

    if not args.bag:
        raise DataError("an arm model is evaluated on recordings: give --bag BAG...")
    model = ArmModel(args.model)
    if args.config:
        mapping = ArmMapping.from_yaml(args.config)
    else:
        mapping = ArmMapping.from_dict(
            model.meta.get("mapping") or {"actuated_joints": list(model.joints)}, "the model's mapping"
        )
    if tuple(mapping.actuated_joints) != model.joints:
        raise ConfigError(
            f"the mapping's actuated_joints {list(mapping.actuated_joints)} differ from the model's "
            f"{list(model.joints)}"
        )
    print(model.describe())
    recordings = [read_arm_bag(b, mapping) for b in args.bag]
    results = evaluate_arm(model, recordings, mapping, keep_series=not args.no_plots)
    for name, m in results.items():
        fit = m["least_squares_fit"]
        fast = f"; fast torque {m['fast_torque']}" if "fast_torque" in m else ""
        ph = m["phases"]
        print(f"{name}: {m['samples']} samples at {m['rate_hz']:.0f} Hz{fast}")
        print(
            f"  standing: |q̇| < {ph['still_velocity']:g} rad/s; reversing: moving within "
            f"{ph['reversal_window_s']:g} s of a change of q̇'s sign; moving: the rest; "
            "floor: the raw torque against its own filtered copy"
        )
        print(
            f"  {'joint':<24} {'rre %':>8} {'nMSE':>8} {'fit rre %':>10} {'moving':>8} {'standing':>9} "
            f"{'reversing':>10} {'floor %':>8}   "
            "(moving / standing / reversing: model rre %, share of samples)"
        )
        for j in model.joints:
            phases = " ".join(
                f"{_opt(m[f'torque_rre_{k}_percent'][j]):>{w}}"
                for k, w in (("moving", 8), ("standing", 9), ("reversing", 10))
            )
            shares = "/".join(f"{ph['share'][k][j]:.2f}" for k in ("moving", "standing", "reversing"))
            print(
                f"  {j:<24} {m['torque_rre_percent'][j]:8.2f} {m['torque_nmse'][j]:8.4f} "
                f"{fit['torque_rre_percent'][j]:10.2f} {phases} "
                f"{m['filter_floor_percent'][j]:8.2f}   {shares}"
            )
        print(
            f"  torque rre mean {m['torque_rre_mean_percent']:.2f} % "
            f"(least-squares fit alone {fit['torque_rre_mean_percent']:.2f} %); standing "
            f"{_opt(m['torque_rre_standing_mean_percent'])} % "
            f"(fit {_opt(fit['torque_rre_standing_mean_percent'])} %), "
            f"reversing {_opt(m['torque_rre_reversing_mean_percent'])} % "
            f"(fit {_opt(fit['torque_rre_reversing_mean_percent'])} %)"
        )
    if not args.no_plots:
        folder = Path(args.plots or f"evaluation_{Path(args.model).stem}")
        for name, m in results.items():
            plot_torque(folder, name, m.pop("series"), model.joints)
        print(f"plots: {folder}/")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(results, fh, indent=2)
        print(f"metrics written to {args.json}")
    return 0


def _opt(value) -> str:
    return "—" if value is None else f"{value:.2f}"
